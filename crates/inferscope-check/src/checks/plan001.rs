//! PLAN001: the serving plan does not fit on the GPUs.
//!
//! Also home of the helpers PLAN002 shares: the plan's subject and its memory breakdown.

use super::env003::gpu_label;
use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{PlanFacts, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PLAN001",
    title: "Model does not fit",
    severity: Severity::Error,
    scope: Scope::Plan,
    why: "When weights, activations, CUDA graphs and non-torch memory already exceed gpu_memory_utilization × GPU memory, the engine fails at start-up (vLLM: 'No available memory for the cache blocks' or CUDA out of memory while loading) after minutes of downloading and loading.",
    run,
};

/// The outcome for a missing `--plan`.
pub(crate) fn no_plan() -> Outcome {
    Outcome::unknown(HOST, "no plan given (pass --plan FILE)")
}

/// `GPU0 (0000:18:00.0),GPU1 (...)` when the plan names its GPUs, else `host`.
pub(crate) fn plan_subject(s: &Snapshot, plan: &PlanFacts) -> String {
    if plan.gpus.is_empty() {
        HOST.to_string()
    } else {
        plan.gpus
            .iter()
            .map(|g| gpu_label(s, g))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Tensor parallelism and context, as the plan states them.
pub(crate) fn plan_shape(plan: &PlanFacts) -> String {
    let tp = plan
        .tensor_parallel_size
        .map(|t| format!("tensor_parallel_size {t}"))
        .unwrap_or_else(|| "tensor_parallel_size not stated".into());
    let len = plan
        .max_model_len
        .map(|l| format!("max_model_len {l}"))
        .unwrap_or_else(|| "max_model_len not stated".into());
    format!("{tp}, {len}")
}

/// The per-GPU ledger of the plan.
pub(crate) fn breakdown(plan: &PlanFacts) -> String {
    let g = &plan.per_gpu;
    let fixed = g.weights_gib + g.non_torch_gib + g.activation_gib + g.cuda_graph_gib;
    format!(
        "per GPU: budget {:.2} GiB (gpu_memory_utilization × total); weights {:.2} + non-torch {:.2} + activation peak {:.2} + CUDA graphs {:.2} = {:.2} GiB; KV cache {:.2} GiB",
        g.total_gib,
        g.weights_gib,
        g.non_torch_gib,
        g.activation_gib,
        g.cuda_graph_gib,
        fixed,
        g.kv_cache_gib
    )
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let Some(plan) = input.plan else {
        return vec![no_plan()];
    };
    let s = input.snapshot;
    let subject = plan_subject(s, plan);
    let g = &plan.per_gpu;
    let mut evidence = format!("{}; {}", breakdown(plan), plan_shape(plan));
    if !plan.assumptions.is_empty() {
        evidence.push_str(&format!("; assumptions: {}", plan.assumptions.join("; ")));
    }
    if plan.fits {
        return vec![Outcome::pass(subject, format!("fits: {evidence}"))];
    }
    let fixed = g.weights_gib + g.non_torch_gib + g.activation_gib + g.cuda_graph_gib;
    let short = fixed - g.total_gib;
    let short_text = if short > 0.0 {
        format!("short by {short:.2} GiB per GPU before any KV cache. ")
    } else {
        String::new()
    };
    let more_tp = match plan.tensor_parallel_size {
        Some(tp) => format!("`--tensor-parallel-size {}`", tp.saturating_mul(2)),
        None => "a larger `--tensor-parallel-size`".to_string(),
    };
    vec![Outcome::fail(
        subject,
        format!("does not fit: {evidence}"),
        format!(
            "{short_text}Spread or shrink the weights: {more_tp} (weights per GPU halve), or a quantized checkpoint / `--quantization fp8` (about half of 16-bit weights); then `--max-model-len` lower (smaller activation peak), `--enforce-eager` (no CUDA graph memory), or `--gpu-memory-utilization` up to 0.95 if nothing else uses the GPUs. Re-run `inferscope plan` with the new settings."
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::PlanPerGpu;

    /// Case `llmd-v0.19.0-qwen-qwen2-5-72b-instruc-h100-tp2pp1dp1--8192` of
    /// /work/shared/fixtures/vllm-logs/cases.jsonl: Qwen2.5-72B-Instruct, 2×H100, TP 2,
    /// gpu_memory_utilization 0.95, max_model_len 8192 (vLLM's measured figures).
    pub(crate) fn qwen72b_tp2() -> PlanFacts {
        PlanFacts {
            fits: true,
            per_gpu: PlanPerGpu {
                total_gib: 75.23,
                weights_gib: 67.8,
                non_torch_gib: 2.09,
                activation_gib: 2.29,
                cuda_graph_gib: 1.61,
                kv_cache_gib: 3.04,
            },
            kv_cache_tokens: 19920,
            max_concurrency: 2.43,
            concurrency: None,
            max_model_len: Some(8192),
            tensor_parallel_size: Some(2),
            weights_bytes_total: None,
            gpus: Vec::new(),
            numa_nodes: Vec::new(),
            assumptions: Vec::new(),
            suggestions: None,
        }
    }

    fn run_plan(plan: &PlanFacts) -> Vec<Outcome> {
        run_with(
            &CHECK,
            &fixture("h100"),
            Some(plan),
            None,
            &Thresholds::default(),
        )
    }

    #[test]
    fn measured_tp2_start_up_fits() {
        let out = run_plan(&qwen72b_tp2());
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("KV cache 3.04 GiB"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn same_model_on_one_gpu_does_not_fit() {
        // Modelled from the same case at TP 1: one GPU holds both weight halves (135.6 GiB).
        let mut p = qwen72b_tp2();
        p.fits = false;
        p.tensor_parallel_size = Some(1);
        p.per_gpu.weights_gib = 135.6;
        p.per_gpu.non_torch_gib = 0.24;
        p.per_gpu.kv_cache_gib = 0.0;
        p.gpus = vec!["0000:18:00.0".parse().unwrap()];
        let out = run_plan(&p);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert_eq!(out[0].subject, "GPU0 (0000:18:00.0)");
        assert!(
            out[0].evidence.contains("= 139.74 GiB"),
            "{}",
            out[0].evidence
        );
        let r = out[0].remedy.as_deref().unwrap();
        assert!(r.starts_with("short by 64.51 GiB per GPU"), "{r}");
        assert!(r.contains("`--tensor-parallel-size 2`"));
    }

    #[test]
    fn no_plan_is_unknown() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert_eq!(out[0].evidence, "no plan given (pass --plan FILE)");
    }
}
