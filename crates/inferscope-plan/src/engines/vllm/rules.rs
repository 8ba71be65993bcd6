//! Which of vLLM's own mechanisms apply to one start-up, per release, each citing where the
//! release's source says so (docs/planner.md, "Rule table").
//!
//! The rules were read from the released wheels (`pip download vllm==X --no-deps
//! --only-binary :all:`), one per release where a rule changes: 0.4.2, 0.5.3, 0.6.4, 0.6.6,
//! 0.7.0, 0.7.3, 0.8.5, 0.9.0, 0.10.2, 0.11.0, 0.12.0, 0.17.0, 0.19.0, 0.20.0 and 0.34.0
//! (newest); for the sampler rule also 0.13.0–0.16.0 and 0.18.0. A release
//! between two read ones gets the older one's rules; a rule first seen in a read release is
//! applied from that release (the boundary is at most that precise). Pure: no I/O.

use crate::memory::{EngineVersion, GIB, SamplerPath};
use crate::rules::{Accounting, EngineRules, Rule};

/// Releases whose wheels were read for the rule table, oldest first.
pub const RELEASES_READ: &[EngineVersion] = &[
    v(0, 4, 2),
    v(0, 5, 3),
    v(0, 6, 4),
    v(0, 6, 6),
    v(0, 7, 0),
    v(0, 7, 3),
    v(0, 8, 5),
    v(0, 9, 0),
    v(0, 10, 2),
    v(0, 11, 0),
    v(0, 12, 0),
    v(0, 17, 0),
    v(0, 19, 0),
    v(0, 20, 0),
    v(0, 34, 0),
];

const fn v(major: u32, minor: u32, patch: u32) -> EngineVersion {
    EngineVersion {
        major,
        minor,
        patch,
    }
}

/// What one vLLM start-up depends on beyond the model's shape.
#[derive(Debug, Clone, Default)]
pub struct VllmContext<'a> {
    /// `--engine-version` as given.
    pub version: Option<&'a str>,
    /// Torch-visible total of one GPU, bytes.
    pub gpu_total_bytes: u64,
    /// GPU name (vLLM itself tests `"a100" in device_name`).
    pub gpu_name: &'a str,
    /// CUDA compute capability, when known.
    pub compute_capability: Option<(u32, u32)>,
    /// `max_model_len` in effect.
    pub max_model_len: u64,
    /// The model has sliding-window layers (V0 then keeps chunked prefill off).
    pub sliding_window: bool,
    /// Multimodal model.
    pub multimodal: bool,
    /// Offline `LLM()` rather than the OpenAI server.
    pub offline: bool,
    /// V0/V1 forced by the caller (`VLLM_USE_V1`).
    pub v1_forced: Option<bool>,
    /// The sampler's top-k/top-p is FlashInfer's (`Some(true)`) or PyTorch's (`Some(false)`),
    /// as a start-up log says; `None`: the release's default.
    pub flashinfer_sampler: Option<bool>,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// `--max-num-seqs`.
    pub max_num_seqs: Option<u32>,
    /// `--gpu-memory-utilization`.
    pub gpu_memory_utilization: Option<f64>,
    /// `--block-size`.
    pub block_size: Option<u32>,
    /// `--kv-cache-dtype` is an fp8 type.
    pub kv_fp8: bool,
    /// `--dtype float32`.
    pub dtype_fp32: bool,
    /// `--enforce-eager`.
    pub enforce_eager: bool,
    /// Bytes of one element in the model dtype (the logits `compute_logits` returns).
    pub dtype_bytes: u64,
}

/// How non-torch memory enters the budget in a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonTorch {
    /// ≤ 0.6.3: `peak = init_gpu_memory − free` after profiling: everything the worker
    /// allocated since it started, torch's cache included.
    SinceInit,
    /// 0.6.4: `(total − free) − torch allocated`: also the CUDA context and other processes.
    TotalMinusFree,
    /// ≥ 0.6.6 (V0 and V1): `memory_profiling`'s non-torch increase since the worker started.
    Increase,
}

/// The resolved rules of one vLLM start-up.
#[derive(Debug, Clone)]
pub struct VllmRules {
    /// The release whose rules apply.
    pub release: EngineVersion,
    /// V1 engine.
    pub v1: bool,
    /// V0 chunked prefill on.
    pub chunked_prefill: bool,
    /// Tokens of the profiling batch (`max_num_batched_tokens`).
    pub batched_tokens: u64,
    /// `max_num_seqs` (rows of the dummy sampler run).
    pub seqs: u64,
    /// `gpu_memory_utilization` in effect.
    pub utilization: f64,
    /// 0.34's extensible KV cache (utilization 1.0 unless given).
    pub extensible_kv: bool,
    /// The CUDA-graph estimate is taken out of the KV budget.
    pub cuda_graph_in_budget: bool,
    /// Block size in tokens.
    pub block_size: u32,
    /// How non-torch memory is measured.
    pub non_torch: NonTorch,
    /// How the dummy sampler run filters top-k/top-p.
    pub sampler: SamplerPath,
    /// What applies, with sources.
    pub info: EngineRules,
}

fn rule(rule: &str, value: impl Into<String>, source: &str) -> Rule {
    Rule {
        rule: rule.into(),
        value: value.into(),
        source: source.into(),
    }
}

/// The release whose rules apply to `asked`, and a note when it is not `asked` itself.
pub fn resolve_release(asked: Option<&str>) -> (EngineVersion, Option<String>, Accounting) {
    let newest = EngineVersion::LATEST;
    let Some(text) = asked else {
        return (
            newest,
            Some(format!(
                "engine version not given: rules of the newest modelled release, {newest}"
            )),
            Accounting::Modelled,
        );
    };
    let Some(ver) = EngineVersion::parse(text) else {
        return (
            newest,
            Some(format!(
                "engine version {text:?} not understood: rules of {newest}"
            )),
            Accounting::Approximate,
        );
    };
    if ver > newest {
        return (
            newest,
            Some(format!("{ver} is newer than modelled: rules of {newest}")),
            Accounting::Approximate,
        );
    }
    let oldest = RELEASES_READ.first().copied().unwrap_or(newest);
    if (ver.major, ver.minor) < (oldest.major, oldest.minor) {
        return (
            oldest,
            Some(format!("{ver} is older than modelled: rules of {oldest}")),
            Accounting::Approximate,
        );
    }
    (ver, None, Accounting::Modelled)
}

/// vLLM's `--gpu-memory-utilization` when it is not given, for one release.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultUtilization {
    /// The fraction.
    pub value: f64,
    /// 0.34's extensible KV cache sets it (1.0) rather than `CacheConfig`'s field default.
    pub extensible: bool,
    /// Where the release's source says so.
    pub source: &'static str,
}

/// The default `--gpu-memory-utilization` of a vLLM release (resolve the text with
/// [`resolve_release`]). One function for `plan` and `mem startup`, so a log that does not print
/// the fraction is read with the same default the planner predicts with.
pub fn default_gpu_memory_utilization(release: EngineVersion) -> DefaultUtilization {
    if release >= v(0, 34, 0) {
        DefaultUtilization {
            value: 1.0,
            extensible: true,
            source: "0.34.0 vllm/config/cache.py CacheConfig.resolved_gpu_memory_utilization: 1.0 with the extensible KV cache (default on CUDA), else 0.92",
        }
    } else if release >= v(0, 20, 0) {
        DefaultUtilization {
            value: 0.92,
            extensible: false,
            source: "0.20.0 vllm/config/cache.py CacheConfig.gpu_memory_utilization default 0.92",
        }
    } else {
        DefaultUtilization {
            value: 0.9,
            extensible: false,
            source: "0.4.2–0.19.0 CacheConfig gpu_memory_utilization default 0.9 (vllm/engine/arg_utils.py)",
        }
    }
}

/// vLLM's rules for one start-up: the release table read top to bottom, one function per
/// section ([`engine_generation`], [`profile_batch`], [`sampler`], [`budget`]), each rule pushed
/// with the file and function it comes from.
pub fn vllm(ctx: &VllmContext) -> VllmRules {
    let (ver, note, accounting) = resolve_release(ctx.version);
    let mut rules = Vec::with_capacity(10);
    let at = |ma: u32, mi: u32, pa: u32| ver >= v(ma, mi, pa);
    let v1 = engine_generation(ctx, &at, &mut rules);
    let ProfileBatch {
        chunked,
        batched_tokens,
        seqs,
    } = profile_batch(ctx, &at, v1, &mut rules);
    let sampler = sampler(ctx, &at, v1, seqs, &mut rules);
    let Budget {
        utilization,
        extensible,
        non_torch,
        cuda_graph_in_budget,
        block_size,
    } = budget(ctx, ver, v1, &mut rules);

    VllmRules {
        release: ver,
        v1,
        chunked_prefill: chunked,
        batched_tokens,
        seqs,
        utilization,
        extensible_kv: extensible,
        cuda_graph_in_budget,
        block_size,
        non_torch,
        sampler,
        info: EngineRules {
            engine: "vllm".into(),
            requested_version: ctx.version.map(str::to_string),
            rules_of: ver.to_string(),
            note,
            accounting,
            rules,
        },
    }
}

/// A release test: the release is at least `(major, minor, patch)`.
type At<'a> = &'a dyn Fn(u32, u32, u32) -> bool;

/// V0 or V1: forced, the release's only engine, or V1's support oracle.
fn engine_generation(ctx: &VllmContext, at: At<'_>, rules: &mut Vec<Rule>) -> bool {
    let cc_low = ctx.compute_capability.is_some_and(|(ma, _)| ma < 8);
    // flash_attn_supports_fp8() is FlashAttention 3, Hopper only; unknown GPU: assume it
    let kv_fp8_no_fa3 = ctx.kv_fp8 && ctx.compute_capability.is_some_and(|(ma, _)| ma != 9);
    if let Some(f) = ctx.v1_forced {
        rules.push(rule(
            "engine",
            if f { "V1 (forced)" } else { "V0 (forced)" },
            "VLLM_USE_V1 as given",
        ));
        f || at(0, 11, 0)
    } else if !at(0, 8, 0) {
        rules.push(rule(
            "engine",
            "V0",
            "0.4.2–0.7.3: V0 is the only default engine (vllm/engine/llm_engine.py)",
        ));
        false
    } else if at(0, 11, 0) {
        rules.push(rule(
            "engine",
            "V1 (V0 removed)",
            "0.11.0: the wheel has no vllm/worker/worker.py; only vllm/v1",
        ));
        true
    } else if cc_low && !at(0, 10, 0) {
        rules.push(rule(
            "engine",
            "V0 (fallback: compute capability < 8.0)",
            "0.8.5/0.9.0 vllm/engine/arg_utils.py EngineArgs._is_v1_supported_oracle (\"Compute Capability < 8.0\")",
        ));
        false
    } else if (kv_fp8_no_fa3 || ctx.dtype_fp32) && !at(0, 10, 0) {
        let why = if ctx.dtype_fp32 {
            "--dtype float32 (V1_SUPPORTED_DTYPES is bf16/fp16)"
        } else {
            "--kv-cache-dtype fp8 without FlashAttention 3 (compute capability 9.x) fp8 support"
        };
        rules.push(rule(
            "engine",
            format!("V0 (fallback: {why})"),
            "0.8.5 vllm/engine/arg_utils.py EngineArgs._is_v1_supported_oracle",
        ));
        false
    } else {
        rules.push(rule(
            "engine",
            "V1",
            "0.8.5 vllm/engine/arg_utils.py EngineArgs._is_v1_supported_oracle (V1 unless a feature is unsupported)",
        ));
        true
    }
}

/// The profile run's batch: tokens and sequences, and whether chunked prefill is on.
struct ProfileBatch {
    chunked: bool,
    batched_tokens: u64,
    seqs: u64,
}

/// The profile batch: the release's defaults for this GPU, or the flags.
fn profile_batch(ctx: &VllmContext, at: At<'_>, v1: bool, rules: &mut Vec<Rule>) -> ProfileBatch {
    let big = ctx.gpu_total_bytes as f64 >= 70.0 * GIB;
    let huge = ctx.gpu_total_bytes as f64 >= 160.0 * GIB;
    let name = ctx.gpu_name.to_ascii_lowercase();
    let a100 = name.contains("a100");
    let gb10 = ctx.compute_capability == Some((12, 1));
    let long = ctx.max_model_len > 32768;
    let mut chunked = false;
    let (def_tokens, def_seqs, src): (u64, u64, String) = if v1 {
        if huge && at(0, 34, 0) {
            (16384, 1024, "0.34.0 vllm/engine/arg_utils.py EngineArgs._set_default_args: ≥ 160 GiB (B200/B300): 16384 / 1024".into())
        } else if big && !(a100 && at(0, 9, 0)) && !(gb10 && at(0, 34, 0)) {
            (
                if ctx.offline { 16384 } else { 8192 },
                1024,
                format!(
                    "{} vllm/engine/arg_utils.py EngineArgs._set_default_args{}: ≥ 70 GiB{}: LLM() 16384 / server 8192 tokens, 1024 seqs",
                    if at(0, 9, 0) { "0.9.0+" } else { "0.8.5" },
                    if at(0, 9, 0) { "" } else { "_v1" },
                    if at(0, 9, 0) {
                        " and not an A100 (the engine tests \"a100\" in the device name, PR 17885)"
                    } else {
                        ""
                    },
                ),
            )
        } else {
            (
                if ctx.offline { 8192 } else { 2048 },
                256,
                "0.8.5+ vllm/engine/arg_utils.py EngineArgs._set_default_args: other GPUs: LLM() 8192 / server 2048 tokens, 256 seqs".into(),
            )
        }
    } else {
        chunked = at(0, 5, 3) && long && !ctx.sliding_window && !(ctx.multimodal && at(0, 6, 4));
        let cp_tokens = if at(0, 6, 6) { 2048 } else { 512 };
        if chunked {
            (
                cp_tokens,
                256,
                format!(
                    "0.5.3+ vllm/engine/arg_utils.py EngineArgs.create_engine_config: use_long_context (max_model_len > 32768) turns chunked prefill on; vllm/config.py SchedulerConfig: {cp_tokens} tokens ({})",
                    if at(0, 6, 6) {
                        "2048 from 0.6.6"
                    } else {
                        "512 in 0.5.3–0.6.4"
                    }
                ),
            )
        } else {
            (
                ctx.max_model_len.max(2048),
                256,
                format!(
                    "vllm/config.py SchedulerConfig (0.4.2–0.10.2): no chunked prefill: max(max_model_len, 2048) tokens{}",
                    if long && ctx.sliding_window {
                        "; sliding-window models keep chunked prefill off (create_engine_config)"
                    } else {
                        ""
                    }
                ),
            )
        }
    };
    let batched_tokens = ctx
        .max_num_batched_tokens
        .unwrap_or(def_tokens)
        .clamp(1, 1 << 32);
    let seqs = u64::from(ctx.max_num_seqs.map_or(def_seqs as u32, |s| s)).clamp(1, 1 << 20);
    rules.push(rule(
        "profile_batch",
        format!(
            "{batched_tokens} tokens{}, {seqs} seqs{}",
            if ctx.max_num_batched_tokens.is_some() {
                " (given)"
            } else {
                ""
            },
            if ctx.max_num_seqs.is_some() {
                " (given)"
            } else {
                ""
            }
        ),
        &src,
    ));
    rules.push(rule(
        "profile_contents",
        if v1 {
            "one forward pass of max_num_batched_tokens tokens (multimodal: the encoder on its budget first), then a dummy sampler run over max_num_seqs × vocab logits"
        } else {
            "one forward pass of max_num_batched_tokens tokens split over max_num_seqs sequences; logits for each sequence's last token (max_num_seqs × vocab)"
        },
        if v1 {
            "0.8.5–0.20.0 vllm/v1/worker/gpu_model_runner.py GPUModelRunner.profile_run, _dummy_run, _dummy_sampler_run"
        } else {
            "0.4.2–0.10.2 vllm/worker/model_runner.py ModelRunner.profile_run"
        },
    ));
    ProfileBatch {
        chunked,
        batched_tokens,
        seqs,
    }
}

/// The dummy sampler's top-k/top-p: which path sorts the logits, and its peak.
fn sampler(
    ctx: &VllmContext,
    at: At<'_>,
    v1: bool,
    seqs: u64,
    rules: &mut Vec<Rule>,
) -> SamplerPath {
    let flashinfer = v1 && ctx.flashinfer_sampler == Some(true);
    let v0_fitted = !v1 && !at(0, 6, 6);
    let sampler = if v0_fitted || (v1 && at(0, 17, 0)) || flashinfer {
        SamplerPath::Fused
    } else if v1 {
        SamplerPath::TorchSort
    } else {
        SamplerPath::TorchSortV0
    };
    let sort_bytes = sampler.bytes_per_logit(ctx.dtype_bytes, seqs);
    rules.push(if flashinfer {
        rule(
            "sampler",
            "FlashInfer's top-k/top-p (no full sort of the logits): fitted bytes per logit",
            "as the log says (\"Using FlashInfer for top-p & top-k sampling\"): vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.forward_cuda",
        )
    } else if v0_fitted {
        rule(
            "sampler",
            "V0 sampler: inside the fitted V0 overhead (its calibration rows are 0.4)",
            "0.4.2–0.6.4 vllm/model_executor/layers/sampler.py",
        )
    } else if !v1 {
        rule(
            "sampler",
            format!(
                "V0: PyTorch sorts the logits ({sort_bytes} B per logit at the peak, derived); FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1"
            ),
            "0.6.6–0.10.2 vllm/worker/model_runner.py ModelRunner.profile_run (SamplingParams(top_p=0.99, top_k=vocab − 1)); vllm/model_executor/layers/sampler.py Sampler.forward, _apply_top_k_top_p; PyTorch aten/src/ATen/native/cuda/SortStable.cu",
        )
    } else if at(0, 17, 0) {
        rule(
            "sampler",
            "top-k/top-p by a Triton kernel (no full sort of the logits): fitted bytes per logit",
            "0.17.0–0.34.0 vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p (HAS_TRITON and ≥ 8 rows: apply_top_k_top_p_triton)",
        )
    } else if at(0, 12, 0) {
        rule(
            "sampler",
            format!(
                "PyTorch sorts the logits ({sort_bytes} B per logit at the peak, derived); FlashInfer's sampler is opt-in (VLLM_USE_FLASHINFER_SAMPLER=1)"
            ),
            "0.12.0–0.16.0 vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__ (`if envs.VLLM_USE_FLASHINFER_SAMPLER`), apply_top_k_top_p (sort, softmax, cumsum, scatter); PyTorch aten/src/ATen/native/cuda/SortStable.cu",
        )
    } else {
        rule(
            "sampler",
            format!(
                "PyTorch sorts the logits ({sort_bytes} B per logit at the peak, derived): a pip install has no FlashInfer; where FlashInfer is installed (the vllm/vllm-openai image) its sampler runs and the peak is lower"
            ),
            "0.8.5–0.11.0 vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__ (FlashInfer only if importable), apply_top_k_top_p; wheel METADATA: flashinfer-python absent (0.8.5, 0.9.0) or an extra (0.10.2, 0.11.0); PyTorch aten/src/ATen/native/cuda/SortStable.cu",
        )
    });
    sampler
}

/// The budget: utilization, non-torch memory, CUDA graphs, block size.
struct Budget {
    utilization: f64,
    extensible: bool,
    non_torch: NonTorch,
    cuda_graph_in_budget: bool,
    block_size: u32,
}

/// The budget's rules for this release.
fn budget(ctx: &VllmContext, ver: EngineVersion, v1: bool, rules: &mut Vec<Rule>) -> Budget {
    let at = |ma: u32, mi: u32, pa: u32| ver >= v(ma, mi, pa);
    let default = default_gpu_memory_utilization(ver);
    let extensible = default.extensible && ctx.gpu_memory_utilization.is_none();
    let utilization = ctx
        .gpu_memory_utilization
        .filter(|u| u.is_finite())
        .unwrap_or(default.value)
        .clamp(0.0, 1.0);
    rules.push(rule(
        "gpu_memory_utilization",
        format!(
            "{utilization}{}",
            if ctx.gpu_memory_utilization.is_some() {
                " (given)"
            } else if extensible {
                " (default: extensible KV cache)"
            } else {
                " (default)"
            }
        ),
        default.source,
    ));
    let non_torch = if v1 || at(0, 6, 6) {
        NonTorch::Increase
    } else if at(0, 6, 4) {
        NonTorch::TotalMinusFree
    } else {
        NonTorch::SinceInit
    };
    rules.push(match non_torch {
        NonTorch::SinceInit => rule(
            "non_torch",
            "peak = memory used since the worker started (init − free after profiling)",
            "0.4.2–0.5.3 vllm/worker/worker.py Worker.determine_num_available_blocks",
        ),
        NonTorch::TotalMinusFree => rule(
            "non_torch",
            "(total − free) − torch allocated: includes the CUDA context and other processes",
            "0.6.4 vllm/worker/worker.py Worker.determine_num_available_blocks",
        ),
        NonTorch::Increase => rule(
            "non_torch",
            "non-torch increase since the worker started (NCCL, custom all-reduce, cuBLAS)",
            if v1 {
                "0.8.5–0.34.0 vllm/v1/worker/gpu_worker.py Worker.determine_available_memory (memory_profiling)"
            } else {
                "0.6.6–0.10.2 vllm/worker/worker.py Worker.determine_num_available_blocks (memory_profiling)"
            },
        ),
    });
    let cuda_graph_in_budget = v1 && at(0, 20, 0) && !ctx.enforce_eager;
    rules.push(if ctx.enforce_eager {
        rule("cuda_graphs", "none (--enforce-eager)", "--enforce-eager")
    } else if cuda_graph_in_budget {
        rule(
            "cuda_graphs",
            "estimated and taken out of the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1)",
            "0.20.0 vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default \"1\"; vllm/v1/worker/gpu_worker.py Worker.determine_available_memory",
        )
    } else {
        rule(
            "cuda_graphs",
            "captured after KV sizing: outside gpu_memory_utilization",
            if v1 {
                "0.19.0 vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default \"0\"; vllm/v1/worker/gpu_worker.py Worker.compile_or_warm_up_model"
            } else {
                "0.4.2–0.10.2 vllm/worker/worker.py: _warm_up_model captures graphs after initialize_cache"
            },
        )
    });
    let def_block = if at(0, 34, 0) { 64 } else { 16 };
    let block_size = ctx.block_size.unwrap_or(def_block).clamp(1, 4096);
    rules.push(rule(
        "block_size",
        format!(
            "{block_size}{}",
            if ctx.block_size.is_some() { " (given)" } else { "" }
        ),
        if at(0, 34, 0) {
            "0.34.0 vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE = 64"
        } else {
            "0.4.2–0.20.0 CacheConfig block_size default 16 (0.19/0.20 vllm/config/cache.py DEFAULT_BLOCK_SIZE)"
        },
    ));
    if extensible {
        rules.push(rule(
            "kv_cache",
            "extensible KV cache: sized from measured memory, the activation peak kept free as headroom",
            "0.34.0 vllm/v1/worker/gpu_worker.py Worker.initialize_from_config (extensible_kv_cache.reserved_headroom_bytes)",
        ));
    }
    Budget {
        utilization,
        extensible,
        non_torch,
        cuda_graph_in_budget,
        block_size,
    }
}
