//! TGI's options: `text-generation-launcher` is a clap derive `Parser` (launcher/src/main.rs):
//! unknown arguments rejected, no prefixes. The list is data/flags/tgi.txt (the union over
//! releases, the file saying which).

use crate::engine::Meaning;
use std::collections::BTreeSet;
use std::sync::OnceLock;

pub(super) fn known() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&str>> = OnceLock::new();
    SET.get_or_init(|| super::super::flag_list(include_str!("../../../data/flags/tgi.txt")))
}

pub(super) fn meaning(f: &str) -> Option<Meaning> {
    use Meaning::*;
    Some(match f {
        "--num-shard" => Tp,
        "--max-total-tokens" => MaxLen,
        "--cuda-memory-fraction" => GpuUtil,
        "--kv-cache-dtype" => KvDtype,
        // a router queue limit, not a batch size: no memory effect (launcher/src/main.rs)
        "--max-concurrent-requests" => Inert,
        "--max-batch-prefill-tokens" => BatchedTokens,
        "--quantize" => Quant,
        "--dtype" => Dtype,
        "--model-id" => Model,
        "--hostname" | "--port" | "--max-input-tokens" | "--max-input-length" | "--revision" => {
            Inert
        }
        "--trust-remote-code" | "--sharded" => InertSwitch,
        _ => return None,
    })
}
