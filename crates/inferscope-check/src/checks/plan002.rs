//! PLAN002: the KV cache holds fewer full-length sequences than the concurrency asked for.

use super::plan001::{breakdown, no_plan, plan_shape, plan_subject};
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PLAN002",
    title: "KV cache below the requested concurrency",
    severity: Severity::Warn,
    scope: Scope::Plan,
    why: "When the KV cache holds fewer max_model_len sequences than the load brings at once, the engine queues or preempts requests (vLLM logs 'Maximum concurrency for N tokens per request: X' at start-up and recomputes preempted sequences), so latency rises long before the GPUs are busy.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let Some(plan) = input.plan else {
        return vec![no_plan()];
    };
    let subject = plan_subject(input.snapshot, plan);
    if !plan.fits {
        return vec![Outcome::unknown(
            subject,
            "the plan does not fit (see PLAN001): there is no KV cache to compare with the concurrency",
        )];
    }
    let len = plan
        .max_model_len
        .map(|l| format!("{l} tokens"))
        .unwrap_or_else(|| "max_model_len".into());
    let capacity = format!(
        "KV cache of {} tokens covers {:.2} sequences of {len} ({}; {})",
        plan.kv_cache_tokens,
        plan.max_concurrency,
        plan_shape(plan),
        breakdown(plan)
    );
    let Some(n) = plan.concurrency else {
        return vec![Outcome::pass(
            subject,
            format!("no concurrency requested; {capacity}"),
        )];
    };
    if plan.max_concurrency >= f64::from(n) {
        return vec![Outcome::pass(
            subject,
            format!("requested concurrency {n}; {capacity}"),
        )];
    }
    let need_tokens = plan
        .max_model_len
        .map(|l| format!(" (about {} tokens)", l.saturating_mul(u64::from(n))))
        .unwrap_or_default();
    vec![Outcome::fail(
        subject,
        format!(
            "requested concurrency {n}{need_tokens}, but the {capacity}: only {:.2} of {n} full-length sequences fit at once",
            plan.max_concurrency
        ),
        remedy(plan),
    )]
}

/// The planner's own re-planned changes when the plan file carries them (each kept by the
/// planner only when it raises the concurrency), else the usual levers without a figure the
/// plan did not check (a utilisation "up to 0.95" can be below the share the plan used).
fn remedy(plan: &inferscope_host::PlanFacts) -> String {
    let cap = format!(
        "or cap the load at what fits: `--max-num-seqs {}`",
        plan.max_concurrency.floor().max(1.0)
    );
    match &plan.suggestions {
        Some(s) if !s.is_empty() => format!(
            "Changes `inferscope plan` re-planned that raise it: {}; {cap}.",
            s.iter()
                .map(|c| format!("`{}` ({:.2} sequences)", c.change, c.max_concurrency))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(_) => format!(
            "No single change `inferscope plan` tried raises it (shorter context, fp8 KV cache, more GPUs, quantized weights, a larger share of memory); {cap}."
        ),
        None => format!(
            "More KV room per sequence: `--max-model-len` lower (if requests are shorter), `--kv-cache-dtype fp8` (about twice the tokens), or more GPUs (`--tensor-parallel-size`); {cap}. Re-run `inferscope plan`: its suggestions are re-planned (a higher `--gpu-memory-utilization` helps only above the share the plan used)."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{PlanFacts, PlanPerGpu};

    fn run_plan(plan: &PlanFacts) -> Vec<Outcome> {
        run_with(
            &CHECK,
            &fixture("h100"),
            Some(plan),
            None,
            &Thresholds::default(),
        )
    }

    /// Case `llmd-v0.19.0-qwen-qwen2-5-72b-instruc-h100-tp2pp1dp1--8192` of
    /// /work/shared/fixtures/vllm-logs/cases.jsonl: 19,920 KV tokens, "Maximum concurrency for
    /// 8192 tokens per request: 2.43x".
    fn qwen72b_tp2(concurrency: Option<u32>) -> PlanFacts {
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
            concurrency,
            max_model_len: Some(8192),
            tensor_parallel_size: Some(2),
            ..PlanFacts::default()
        }
    }

    #[test]
    fn the_remedy_is_the_planners_re_planned_changes_not_a_fixed_0_95() {
        // issue 26: a plan made at utilisation 1.0 must not be told "up to 0.95"
        let mut p = qwen72b_tp2(Some(8));
        let out = run_plan(&p);
        let remedy = |o: &[Outcome]| o[0].remedy.clone().unwrap_or_default();
        assert!(!remedy(&out).contains("0.95"), "{}", remedy(&out));
        p.suggestions = Some(vec![inferscope_host::PlanSuggestion {
            change: "--kv-cache-dtype fp8".into(),
            fits: true,
            max_concurrency: 4.86,
        }]);
        let out = run_plan(&p);
        assert!(
            remedy(&out).contains("`--kv-cache-dtype fp8` (4.86 sequences)"),
            "{}",
            remedy(&out)
        );
    }

    #[test]
    fn eight_users_on_a_2_43x_cache_fail() {
        let out = run_plan(&qwen72b_tp2(Some(8)));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("only 2.43 of 8 full-length sequences"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .unwrap()
                .contains("--max-num-seqs 2")
        );
    }

    #[test]
    fn within_capacity_or_no_concurrency_passes() {
        // Case `llmd-v0.19.0-meta-llama-llama-3-1-8b--h100-tp1pp1dp1--8192`: 476,016 tokens,
        // 58.11x at 8192 tokens; 32 concurrent users fit.
        let llama8b = PlanFacts {
            fits: true,
            per_gpu: PlanPerGpu {
                total_gib: 75.23,
                weights_gib: 14.99,
                non_torch_gib: 0.25,
                activation_gib: 1.89,
                cuda_graph_gib: 0.91,
                kv_cache_gib: 58.11,
            },
            kv_cache_tokens: 476_016,
            max_concurrency: 58.11,
            concurrency: Some(32),
            max_model_len: Some(8192),
            tensor_parallel_size: Some(1),
            ..PlanFacts::default()
        };
        assert_eq!(statuses(&run_plan(&llama8b)), [Status::Pass]);
        let out = run_plan(&qwen72b_tp2(None));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0]
                .evidence
                .starts_with("no concurrency requested; KV cache of 19920 tokens covers 2.43")
        );
    }

    #[test]
    fn no_plan_or_a_plan_that_does_not_fit_is_unknown() {
        assert_eq!(
            statuses(&check(&CHECK, &fixture("h100"))),
            [Status::Unknown]
        );
        let mut p = qwen72b_tp2(Some(8));
        p.fits = false;
        assert_eq!(statuses(&run_plan(&p)), [Status::Unknown]);
    }
}
