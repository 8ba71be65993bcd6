//! SGLang's options: `prepare_server_args` (sglang/srt/server_args.py) is a plain
//! `argparse.ArgumentParser` with `parse_args`: unknown options rejected, prefixes allowed, no
//! `_` to `-` rewriting. The list is data/flags/sglang.txt (the union over releases, the file
//! saying which).

use crate::engine::Meaning;
use std::collections::BTreeSet;
use std::sync::OnceLock;

pub(super) fn known() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&str>> = OnceLock::new();
    SET.get_or_init(|| super::super::flag_list(include_str!("../../../data/flags/sglang.txt")))
}

pub(super) fn meaning(f: &str) -> Option<Meaning> {
    use Meaning::*;
    Some(match f {
        "--mamba-ssm-dtype" => MambaSsmDtype,
        "--max-mamba-cache-size" => MambaPoolSize,
        "--mamba-full-memory-ratio" => MambaRatio,
        "--disable-radix-cache" => NoRadixCache,
        "--tp" | "--tp-size" | "--tensor-parallel-size" => Tp,
        "--pp" | "--pp-size" => Pp,
        "--context-length" => MaxLen,
        "--mem-fraction-static" => GpuUtil,
        "--kv-cache-dtype" => KvDtype,
        "--max-running-requests" => MaxSeqs,
        "--chunked-prefill-size" => BatchedTokens,
        "--disable-cuda-graph" => Eager,
        "--quantization" => Quant,
        "--dtype" => Dtype,
        "--model-path" | "--model" => Model,
        "--host" | "--port" | "--api-key" | "--served-model-name" | "--tokenizer-path" => Inert,
        "--trust-remote-code" | "--enable-torch-compile" => InertSwitch,
        _ => return None,
    })
}
