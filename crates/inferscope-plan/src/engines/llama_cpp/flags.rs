//! llama-server's options: `common_params_parse` (common/arg.cpp) throws `error: invalid
//! argument: X` for an option not in its table; it turns `_` into `-` in `--` names; no
//! prefixes. The list is data/flags/llama_cpp.txt (the union over releases, the file saying
//! which).

use crate::engine::Meaning;
use std::collections::BTreeSet;
use std::sync::OnceLock;

pub(super) fn known() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&str>> = OnceLock::new();
    SET.get_or_init(|| super::super::flag_list(include_str!("../../../data/flags/llama_cpp.txt")))
}

pub(super) fn meaning(f: &str) -> Option<Meaning> {
    use Meaning::*;
    Some(match f {
        "-m" | "--model" => Model,
        "-c" | "--ctx-size" => MaxLen,
        "-np" | "--parallel" => MaxSeqs,
        "-ngl" | "--n-gpu-layers" | "--gpu-layers" => GpuLayers,
        "-ctk" | "--cache-type-k" => KvDtype,
        "-ctv" | "--cache-type-v" => KvDtypeV,
        "-b" | "--batch-size" => BatchedTokens,
        "-ub" | "--ubatch-size" => Ubatch,
        "-kvu" | "--kv-unified" => KvUnified(true),
        "-no-kvu" | "--no-kv-unified" => KvUnified(false),
        "--swa-full" => SwaFull,
        "-fa" | "--flash-attn" => FlashAttn,
        "-ts" | "--tensor-split" => TensorSplit,
        "-sm" | "--split-mode" => SplitMode,
        "--host" | "--port" | "-t" | "--threads" | "-a" | "--alias" => Inert,
        "--cont-batching" | "-cb" | "--metrics" | "--jinja" => InertSwitch,
        _ => return None,
    })
}
