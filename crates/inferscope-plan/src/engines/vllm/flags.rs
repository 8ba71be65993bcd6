//! The options Vllm's parser accepts (data/flags/vllm.txt, the union over releases, the file
//! saying which) and what each one means for the plan.

use crate::engine::Meaning;
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
        "--max-model-len" => MaxLen,
        "--kv-cache-memory-bytes" => KvBytes,
        "--mamba-cache-dtype" => MambaConvDtype,
        "--mamba-ssm-cache-dtype" => MambaSsmDtype,
        "--gpu-memory-utilization" => GpuUtil,
        "--kv-cache-dtype" => KvDtype,
        "--max-num-seqs" => MaxSeqs,
        "--max-num-batched-tokens" => BatchedTokens,
        "--enforce-eager" => Eager,
        "--quantization" | "-q" => Quant,
        "--dtype" => Dtype,
        "--block-size" => Block,
        "--enable-expert-parallel" => ExpertParallel,
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
        | "--enable-prefix-caching"
        | "--disable-log-requests"
        | "--disable-log-stats"
        | "--enable-auto-tool-choice"
        | "--enable-chunked-prefill" => InertSwitch,
        _ => return None,
    })
}
