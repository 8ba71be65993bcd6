//! vLLM's options: `FlexibleArgumentParser` (vllm/utils/argparse_utils.py) is an argparse
//! parser run with `parse_args` ("unrecognized arguments"); it turns `_` into `-` in `--` names
//! before parsing, takes `--json-arg.key value`, `-O3`, and argparse's default
//! `allow_abbrev=True` (an unambiguous prefix of a long option is that option). The list is
//! data/flags/vllm.txt (the union over releases, the file saying which).

use crate::engine::{EngineSettings, Meaning};
use std::collections::BTreeSet;
use std::sync::OnceLock;

pub(super) fn known() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&str>> = OnceLock::new();
    SET.get_or_init(|| super::super::flag_list(include_str!("../../../data/flags/vllm.txt")))
}

pub(super) fn meaning(f: &str) -> Option<Meaning> {
    use Meaning::*;
    Some(match f {
        "--tensor-parallel-size" | "-tp" => Tp,
        "--pipeline-parallel-size" | "-pp" => Pp,
        "--data-parallel-size" | "-dp" => Dp,
        "--max-model-len" => MaxLen,
        "--kv-cache-memory-bytes" => KvBytes,
        "--mamba-cache-dtype" => MambaConvDtype,
        "--mamba-ssm-cache-dtype" => MambaSsmDtype,
        "--mamba-cache-mode" => MambaCacheMode,
        "--gdn-prefill-backend" => GdnPrefillBackend,
        "--gpu-memory-utilization" => GpuUtil,
        "--kv-cache-dtype" => KvDtype,
        "--max-num-seqs" => MaxSeqs,
        "--max-num-batched-tokens" => BatchedTokens,
        "--enforce-eager" => Eager,
        "--quantization" | "-q" => Quant,
        "--dtype" => Dtype,
        "--block-size" => Block,
        "--enable-expert-parallel" => ExpertParallel,
        "--enable-prefix-caching" => PrefixCaching(true),
        "--no-enable-prefix-caching" => PrefixCaching(false),
        "--speculative-config" | "-sc" => SpeculativeConfig,
        "--model" => Model,
        "--host"
        | "--port"
        | "--api-key"
        | "--served-model-name"
        | "--tokenizer"
        | "--revision"
        | "--download-dir"
        | "--uvicorn-log-level"
        | "--chat-template"
        | "--tool-call-parser"
        | "--seed"
        | "--distributed-executor-backend" => Inert,
        "--trust-remote-code"
        | "--disable-log-requests"
        | "--disable-log-stats"
        | "--enable-auto-tool-choice"
        | "--enable-chunked-prefill" => InertSwitch,
        _ => return None,
    })
}

/// A flag the command uses that the `--engine-version` release does not have: that release's
/// own error (vLLM's argparse, or what it would do with the value).
pub(super) fn refused_by_release(s: &EngineSettings, version: &str) -> Option<String> {
    let v = crate::memory::EngineVersion::parse(version)?;
    let at = |mi: u32, pa: u32| {
        v >= crate::memory::EngineVersion {
            major: 0,
            minor: mi,
            patch: pa,
        }
    };
    if s.kv_cache_memory_bytes.is_some() && !at(10, 2) {
        return Some(format!(
            "--kv-cache-memory-bytes: vLLM {v} has no such option (vllm serve: error: \
             unrecognized arguments: --kv-cache-memory-bytes); it appeared in 0.10.2 \
             (vllm/engine/arg_utils.py EngineArgs.add_cli_args)"
        ));
    }
    if s.max_model_len_auto && !at(14, 0) {
        return Some(format!(
            "--max-model-len auto/-1: vLLM {v} has no automatic length (vllm serve: error: \
             argument --max-model-len: invalid human_readable_int value: 'auto'; `-1` is taken \
             as a length); it appeared in 0.14.0 (vllm/engine/arg_utils.py \
             human_readable_int_or_auto, vllm/v1/core/kv_cache_utils.py _auto_fit_max_model_len)"
        ));
    }
    None
}
