//! ENV001: the PyTorch CUDA allocator runs without expandable segments.

use super::env002::{ALLOC_VARS, parse_conf};
use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::GpuVendor;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV001",
    title: "PYTORCH_CUDA_ALLOC_CONF without expandable_segments",
    severity: Severity::Info,
    scope: Scope::Environment,
    why: "Without expandable_segments:True, PyTorch's caching allocator keeps fixed-size segments that fragment as request shapes change; servers then die with CUDA out of memory while the message itself reports gigabytes 'reserved by PyTorch but unallocated'.",
    run,
};

/// When not to follow the remedy, so the finding never talks a user into a known crash.
const CAVEATS: &str = "Leave it off for vLLM with tensor/data parallelism and custom all-reduce until your vLLM has PR #43923 (startup crash `custom_all_reduce.cuh:455 'invalid argument'`; or add `--disable-custom-all-reduce`), and for vLLM sleep mode on versions before PR #40812 (they assert). Set the legacy name PYTORCH_CUDA_ALLOC_CONF: vLLM inspects only that one.";

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    if !s.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia) {
        return vec![Outcome::pass(
            HOST,
            "no NVIDIA GPU in this snapshot: the CUDA caching allocator is not used",
        )];
    }
    let set: Vec<(&str, &str)> = ALLOC_VARS
        .iter()
        .filter_map(|n| s.env.get(*n).map(|v| (*n, v.as_str())))
        .collect();
    if set.is_empty() {
        return vec![Outcome::fail(
            HOST,
            "neither PYTORCH_CUDA_ALLOC_CONF nor PYTORCH_ALLOC_CONF is set in the captured environment: expandable_segments is off (PyTorch's default)",
            format!(
                "`export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` before starting the server. {CAVEATS}"
            ),
        )];
    }
    let mut missing: Vec<(&str, &str)> = Vec::new();
    let mut explicit_off: Vec<&str> = Vec::new();
    for (name, value) in &set {
        match parse_conf(value).get("expandable_segments") {
            Some("True") => {}
            Some("False") => explicit_off.push(name),
            _ => missing.push((name, value)),
        }
    }
    let shown = set
        .iter()
        .map(|(n, v)| format!("{n}={v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some((name, value)) = missing.first() {
        // Keep the user's other options, minus max_split_size_mb (no use with expandable
        // segments, see ENV002).
        let conf = parse_conf(value);
        let mut entries: Vec<String> = conf
            .entries
            .iter()
            .filter(|e| e.key != "expandable_segments" && e.key != "max_split_size_mb")
            .map(|e| format!("{}:{}", e.key, e.value))
            .collect();
        entries.push("expandable_segments:True".into());
        return vec![Outcome::fail(
            HOST,
            format!("{shown}: no `expandable_segments:True` in {name}"),
            format!(
                "`export {name}={}` before starting the server. {CAVEATS}",
                entries.join(",")
            ),
        )];
    }
    if explicit_off.is_empty() {
        vec![Outcome::pass(
            HOST,
            format!("{shown}: expandable segments on"),
        )]
    } else {
        vec![Outcome::pass(
            HOST,
            format!(
                "{shown}: expandable_segments:False is set explicitly in {} (a deliberate opt-out, e.g. for vLLM sleep mode or custom all-reduce); not flagged",
                explicit_off.join(", ")
            ),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    fn with_env(pairs: &[(&str, &str)]) -> inferscope_host::Snapshot {
        let mut s = fixture("h100");
        for (k, v) in pairs {
            s.env.insert(k.to_string(), v.to_string());
        }
        s
    }

    #[test]
    fn unset_fails_with_the_export_line_and_the_vllm_caveats() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Fail]);
        let r = out[0].remedy.as_deref().unwrap();
        assert!(r.starts_with("`export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`"));
        assert!(r.contains("#43923") && r.contains("#40812"), "{r}");
    }

    #[test]
    fn set_without_expandable_keeps_other_options_in_the_remedy() {
        let s = with_env(&[(
            "PYTORCH_ALLOC_CONF",
            "max_split_size_mb:512,garbage_collection_threshold:0.6",
        )]);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].remedy.as_deref().unwrap().starts_with(
            "`export PYTORCH_ALLOC_CONF=garbage_collection_threshold:0.6,expandable_segments:True`"
        ));
        // Lowercase `true` is not True to PyTorch.
        let s = with_env(&[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:true")]);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Fail]);
    }

    #[test]
    fn expandable_on_or_deliberately_off_passes() {
        let s = with_env(&[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")]);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
        let s = with_env(&[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")]);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("deliberate opt-out"));
    }

    #[test]
    fn no_nvidia_gpu_passes() {
        let out = check(&CHECK, &fixture("dev-vm"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("no NVIDIA GPU"));
    }
}
