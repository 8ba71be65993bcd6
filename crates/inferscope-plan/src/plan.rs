//! One plan: model + GPUs + engine settings → per-GPU memory, KV tokens, concurrency.
//!
//! [`plan`] is pure and cheap (no I/O, a few small vectors) so `plan --find` can call it
//! thousands of times. Every default it picks and every approximation it relies on is appended
//! to [`Plan::assumptions`].

use crate::arch::{AttentionKind, Dtype, ModelArch, Quantization};
use crate::engine::{Engine, EngineSettings};
use crate::engines::llama_cpp::plan::{LlamaCppPlan, LlamaCppSettings};
use crate::memory::{
    self, GIB, ProfileShape, Shard, TpLink, activation_bytes, cuda_graph_bytes, gib2, kv_layout,
    non_torch_bytes, stage_layers, weights_per_gpu,
};
use serde::{Deserialize, Serialize};

/// The GPUs the plan runs on (all alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// Name, for output.
    pub name: String,
    /// Total memory as PyTorch reports it (`torch.cuda.mem_get_info()[1]`), bytes.
    pub total_bytes: u64,
    /// GPUs available.
    pub count: u32,
}

impl GpuSpec {
    /// `count` GPUs of a catalog kind, with the memory PyTorch sees on one.
    pub fn from_catalog(gpu: &crate::gpus::GpuSpec, count: u32) -> GpuSpec {
        GpuSpec {
            name: gpu.name.clone(),
            total_bytes: (gpu.torch_total_gib * GIB) as u64,
            count,
        }
    }
}

/// Everything a plan depends on. `None` = the engine's default for this version and GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// The model.
    pub arch: ModelArch,
    /// Repo id or name, for output.
    pub model_name: String,
    /// GPUs.
    pub gpu: GpuSpec,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Pipeline-parallel size.
    pub pp: u32,
    /// Expert parallelism for MoE (`--enable-expert-parallel`).
    pub expert_parallel: bool,
    /// `--max-model-len`.
    pub max_model_len: Option<u64>,
    /// vLLM `--max-model-len auto` / `-1`: the largest length whose one request fits.
    pub max_model_len_auto: bool,
    /// vLLM `--kv-cache-memory-bytes`: the KV cache per GPU, bytes (utilisation ignored).
    pub kv_cache_memory_bytes: Option<u64>,
    /// Hybrid models' state flags (state dtypes, a state pool's size; see each room's options).
    pub hybrid: crate::engine::HybridSettings,
    /// vLLM `--speculative-config` with an MTP method.
    pub speculative_mtp: Option<crate::engine::SpeculativeMtp>,
    /// MTP layers [`PlanRequest::apply_engine`] added to `arch` as the draft (0: none).
    pub speculative_mtp_layers: u32,
    /// `--gpu-memory-utilization` (vLLM default 0.9).
    pub gpu_memory_utilization: Option<f64>,
    /// `--kv-cache-dtype` (`auto` = model dtype).
    pub kv_cache_dtype: Option<String>,
    /// `--dtype` (`auto` = checkpoint dtype).
    pub dtype: Option<String>,
    /// `--quantization`, when it differs from the checkpoint's (e.g. online `fp8`).
    pub quantization: Option<String>,
    /// `--max-num-seqs`.
    pub max_num_seqs: Option<u32>,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// `--block-size`.
    pub block_size: Option<u32>,
    /// `--enforce-eager`.
    pub enforce_eager: bool,
    /// The serving engine.
    pub engine: Engine,
    /// Engine version (`None` = latest modelled).
    pub engine_version: Option<String>,
    /// Force the V0 (`Some(false)`) or V1 (`Some(true)`) engine; default by version.
    pub v1: Option<bool>,
    /// vLLM's sampler uses FlashInfer (`Some(true)`) or PyTorch (`Some(false)`) for top-k/top-p,
    /// as a start-up log says; `None`: the release's default install (rule `sampler`).
    pub flashinfer_sampler: Option<bool>,
    /// Offline `LLM()` class rather than the OpenAI server (changes V1 batch defaults).
    pub offline: bool,
    /// Concurrent sequences of `max_model_len` the user needs.
    pub concurrency: Option<u32>,
    /// llama-server settings with no vLLM counterpart (used when `engine` is llama.cpp).
    pub llama_cpp: LlamaCppSettings,
    /// The engine keeps no prefix (radix) cache (a room's switch with no vLLM counterpart).
    pub disable_radix_cache: bool,
    /// LMDeploy settings with no vLLM counterpart (used when `engine` is LMDeploy).
    pub lmdeploy: crate::engine::LmdeploySettings,
    /// `--speculative-algorithm` and its flags, and the prefill-graph switch.
    pub speculative: crate::engine::SpeculativeSettings,
    /// CUDA compute capability of the GPUs, when known (vLLM 0.8–0.9 fall back to V0 below 8.0).
    pub compute_capability: Option<(u32, u32)>,
    /// Free memory per GPU when the engine starts, bytes, for a room that sizes from it
    /// (default: the torch-visible total less the CUDA context).
    pub free_bytes_at_start: Option<u64>,
    /// Exact tensor bytes of a local checkpoint (from its safetensors headers): per-GPU
    /// weights are sharded from these instead of the architecture formula.
    pub checkpoint: Option<crate::checkpoint::CheckpointWeights>,
    /// How the tensor-parallel GPUs are linked (NCCL's buffers under TP, [`TpLink`]); `None`
    /// when unknown (the fitted NVLink increment is charged).
    pub tp_link: Option<TpLink>,
}

impl PlanRequest {
    /// What this request decides about a hybrid model's state blocks in vLLM.
    pub fn hybrid_run(&self) -> crate::hybrid::HybridRun<'_> {
        // an MTP draft without `num_speculative_tokens` drafts one token per MTP layer
        // (`SpeculativeConfig.__post_init__`: `n_predict`)
        let drafts = self
            .hybrid
            .speculative_tokens
            .unwrap_or(if self.speculative_mtp.is_some() {
                u64::from(self.speculative_mtp_layers.max(1))
            } else {
                0
            });
        crate::hybrid::HybridRun {
            prefix_caching: self.hybrid.enable_prefix_caching,
            mamba_cache_mode: self.hybrid.mamba_cache_mode.as_deref(),
            speculative_tokens: drafts,
            compute_capability: self.compute_capability,
            gdn_prefill_backend: self.hybrid.gdn_prefill_backend.as_deref(),
        }
    }

    /// Take every setting a parsed serving command gives; the rest keep their defaults.
    pub fn apply_engine(&mut self, s: &EngineSettings) {
        let req = self;
        req.engine = s.engine;
        if let Some(v) = s.tensor_parallel_size {
            req.tp = v;
        }
        if let Some(v) = s.pipeline_parallel_size {
            req.pp = v;
        }
        if s.max_model_len.is_some() {
            req.max_model_len = s.max_model_len;
        }
        if s.max_model_len_auto {
            req.max_model_len = None;
            req.max_model_len_auto = true;
        }
        if s.kv_cache_memory_bytes.is_some() {
            req.kv_cache_memory_bytes = s.kv_cache_memory_bytes;
        }
        if s.hybrid != crate::engine::HybridSettings::default() {
            req.hybrid = s.hybrid.clone();
        }
        // MTP speculative decoding loads the model's MTP layers as the draft: planned as more
        // decoder layers (`ModelArch::with_mtp_layers`); a config without them stays as it is
        // and the plan says so (`speculative_mtp`)
        if let Some(m) = &s.speculative_mtp {
            req.speculative_mtp = Some(m.clone());
            if let Some(a) = req.arch.with_mtp_layers() {
                req.speculative_mtp_layers = req.arch.mtp_layers;
                req.arch = a;
            }
        }
        if s.gpu_memory_utilization.is_some() {
            req.gpu_memory_utilization = s.gpu_memory_utilization;
        }
        if s.kv_cache_dtype.is_some() {
            req.kv_cache_dtype = s.kv_cache_dtype.clone();
        }
        if s.max_num_seqs.is_some() {
            req.max_num_seqs = s.max_num_seqs;
        }
        if s.max_num_batched_tokens.is_some() {
            req.max_num_batched_tokens = s.max_num_batched_tokens;
        }
        if let Some(e) = s.enforce_eager {
            req.enforce_eager = e;
        }
        if s.quantization.is_some() {
            req.quantization = s.quantization.clone();
        }
        if s.dtype.is_some() {
            req.dtype = s.dtype.clone();
        }
        if s.block_size.is_some() {
            req.block_size = s.block_size;
        }
        if let Some(e) = s.enable_expert_parallel {
            req.expert_parallel = e;
        }
        req.llama_cpp = s.llama_cpp.clone();
        req.disable_radix_cache = s.disable_radix_cache;
        req.lmdeploy = s.lmdeploy.clone();
        req.speculative = s.speculative.clone();
    }

    /// Take what the catalog knows of the GPU kind beyond its memory: how its GPUs are linked
    /// (NCCL's buffers under TP) and its compute capability (vLLM 0.8–0.9's V0 fallback).
    /// Every caller that picks or swaps a catalog GPU goes through here, so the two facts
    /// always describe `gpu`.
    pub fn use_catalog_gpu(&mut self, g: Option<&crate::gpus::GpuSpec>) {
        self.tp_link = g.and_then(|g| g.tp_link());
        self.compute_capability = g.and_then(|g| g.compute_capability_pair());
    }

    /// A request with vLLM's defaults for everything but the model and GPU.
    pub fn new(arch: ModelArch, model_name: impl Into<String>, gpu: GpuSpec) -> PlanRequest {
        PlanRequest {
            arch,
            model_name: model_name.into(),
            gpu,
            tp: 1,
            pp: 1,
            expert_parallel: false,
            max_model_len: None,
            max_model_len_auto: false,
            kv_cache_memory_bytes: None,
            hybrid: Default::default(),
            speculative_mtp: None,
            speculative_mtp_layers: 0,
            gpu_memory_utilization: None,
            kv_cache_dtype: None,
            dtype: None,
            quantization: None,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            block_size: None,
            enforce_eager: false,
            engine: Engine::Vllm,
            engine_version: None,
            v1: None,
            flashinfer_sampler: None,
            offline: false,
            concurrency: None,
            llama_cpp: LlamaCppSettings::default(),
            disable_radix_cache: false,
            lmdeploy: Default::default(),
            speculative: Default::default(),
            compute_capability: None,
            free_bytes_at_start: None,
            checkpoint: None,
            tp_link: None,
        }
    }
}

/// Memory on one GPU, GiB with two decimals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerGpu {
    /// What the engine may use: `gpu_memory_utilization × gpu_total_gib`.
    pub total_gib: f64,
    /// Memory PyTorch sees on the GPU.
    pub gpu_total_gib: f64,
    /// Weights on this GPU.
    pub weights_gib: f64,
    /// CUDA context growth, NCCL and all-reduce buffers.
    pub non_torch_gib: f64,
    /// Activation peak of the profiling run.
    pub activation_gib: f64,
    /// CUDA graphs (0 with enforce-eager).
    pub cuda_graph_gib: f64,
    /// KV cache.
    pub kv_cache_gib: f64,
    /// Memory left on the GPU after the engine's share and the CUDA graphs (negative: OOM).
    pub free_after_kv_gib: f64,
}

/// The engine the plan models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// Engine.
    pub name: Engine,
    /// Version whose accounting was used.
    pub version: String,
    /// V1 engine (false: V0).
    pub v1: bool,
}

/// The plan (`inferscope plan --json`). A superset of `inferscope_host::facts::PlanFacts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The engine starts: weights and activations fit, the KV cache holds one `max_model_len`
    /// request, and the CUDA graphs fit beside the engine's share.
    pub fits: bool,
    /// Why it does not fit (empty when it fits).
    pub problems: Vec<String>,
    /// Per-GPU breakdown (pipeline stage 0, the rank vLLM logs).
    pub per_gpu: PerGpu,
    /// KV capacity in tokens over the engine, as vLLM V1 prints `GPU KV cache size`.
    pub kv_cache_tokens: u64,
    /// Requests of `max_model_len` tokens that fit at once.
    pub max_concurrency: f64,
    /// Concurrency asked for.
    pub concurrency: Option<u32>,
    /// `max_concurrency ≥ concurrency` (None when no concurrency was asked for).
    pub meets_concurrency: Option<bool>,
    /// Context length planned for.
    pub max_model_len: Option<u64>,
    /// Tensor-parallel size.
    pub tensor_parallel_size: Option<u32>,
    /// Pipeline-parallel size.
    pub pipeline_parallel_size: u32,
    /// GPUs used (`tp × pp`).
    pub gpus_used: u32,
    /// Checkpoint bytes the host reads while loading.
    pub weights_bytes_total: Option<u64>,
    /// Weights on one GPU (pipeline stage 0), bytes: exact when checkpoint headers were read.
    #[serde(default)]
    pub weights_bytes_per_gpu: u64,
    /// GPUs by PCI address (filled by the caller when it knows them).
    pub gpus: Vec<inferscope_host::ids::PciBusId>,
    /// NUMA nodes (filled by the caller).
    pub numa_nodes: Vec<u32>,
    /// KV bytes per token on one GPU, all its layers, windows ignored.
    pub kv_bytes_per_token: u64,
    /// Recurrent-state bytes of one sequence on one GPU, all its state layers (hybrid models:
    /// linear attention, Mamba), before the engine pads them to its page size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub state_bytes_per_sequence: u64,
    /// Bytes of a separate recurrent-state pool on one GPU as the engine allocates it (a room
    /// whose engine keeps one says how, padding slots included); absent where the state lives
    /// in the KV cache (vLLM) or no pool is modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_pool_bytes: Option<u64>,
    /// KV cache blocks (`num_gpu_blocks`).
    pub blocks: u64,
    /// Tokens per block.
    pub block_size: u32,
    /// KV cache groups (V1 hybrid models: one per attention kind and group of layers).
    pub kv_cache_groups: u32,
    /// KV dtype used.
    pub kv_cache_dtype: Dtype,
    /// Model.
    pub model: String,
    /// GPU name.
    pub gpu: String,
    /// Engine accounting used.
    pub engine: EngineInfo,
    /// Every default and approximation the numbers rest on.
    pub assumptions: Vec<String>,
    /// What llama.cpp allocates (llama-server plans only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llama_cpp: Option<LlamaCppPlan>,
    /// `modelled`: the engine's own accounting for this release; `approximate`: another
    /// engine's or release's rules stand in (also said in the first assumptions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<crate::rules::Accounting>,
    /// The engine rules applied, each with its source (release, file, function).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_rules: Option<crate::rules::EngineRules>,
}

/// One stage's numbers (bytes).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stage {
    pub(crate) weights: u64,
    pub(crate) non_torch: u64,
    pub(crate) activation: u64,
    pub(crate) cuda_graph: u64,
    pub(crate) kv: i64,
    pub(crate) blocks: u64,
    pub(crate) free_after: i64,
}

/// Phase 1: the effective model dtype, a `--quantization` flag that changes the checkpoint's,
/// and the KV dtype.
fn dtypes(
    req: &PlanRequest,
    assumptions: &mut Vec<String>,
) -> (Dtype, Option<Quantization>, Dtype) {
    let arch = &req.arch;
    let mut arch_dtype = arch.dtype;
    if let Some(d) = req.dtype.as_deref().filter(|d| *d != "auto") {
        match Dtype::parse(d) {
            Some(d) if d != Dtype::Fp8 => arch_dtype = d,
            _ => assumptions.push(format!("--dtype {d} not understood: using {}", arch.dtype)),
        }
    }
    let flag_quant: Option<Quantization> = req
        .quantization
        .as_deref()
        .filter(|q| !q.is_empty() && *q != "none")
        .and_then(|q| {
            let q = q.to_ascii_lowercase();
            // a flag naming the checkpoint's own method (or its marlin kernel) changes nothing
            match &arch.quantization {
                Some(c)
                    if q.contains(&c.method) || c.method.contains(&q) || q.contains("marlin") =>
                {
                    None
                }
                Some(c) if c.method == "compressed-tensors" => None,
                _ => Quantization::from_method(&q),
            }
        });
    let quant = flag_quant.as_ref().or(arch.quantization.as_ref());
    if let Some(q) = quant.filter(|q| q.method.starts_with("gguf")) {
        // a GGUF file types each tensor itself: output.weight's own ggml type decides the LM head
        assumptions.push(format!(
            "weights: GGUF, {:.3} bytes per layer weight (the file's mix); token embeddings and \
             output.weight keep their own ggml types (exact when the GGUF file is given, else \
             llama-quantize's choice for the file type); norms stay F32",
            q.bytes_per_weight()
        ));
    } else if let Some(q) = quant {
        assumptions.push(format!(
            "weights: {} {}-bit{}, {:.3} bytes per quantized weight; embeddings, norms, routers and lm_head stay {}{}",
            q.method,
            q.bits,
            if q.group_size > 0 { format!(" (group {})", q.group_size) } else { String::new() },
            q.bytes_per_weight(),
            arch_dtype,
            if q.attention_unquantized { "; attention stays unquantized" } else { "" },
        ));
    }
    let kv_dtype = match req.kv_cache_dtype.as_deref().filter(|k| *k != "auto") {
        Some(k) => Dtype::parse(k).unwrap_or_else(|| {
            assumptions.push(format!(
                "--kv-cache-dtype {k} not understood: using the model dtype"
            ));
            arch_dtype
        }),
        None => arch_dtype,
    };
    (arch_dtype, flag_quant, kv_dtype)
}

/// Phase 3: what the request implies beside the engine rules (context, TP/PP checks, the
/// estimates used), in the order the plan prints them.
#[allow(clippy::too_many_arguments)]
fn shape_notes(
    req: &PlanRequest,
    arch: &ModelArch,
    (tp, pp, max_len): (u32, u32, u64),
    (profiled, in_table): (bool, bool),
    assumptions: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> u32 {
    if req.max_model_len.is_none() {
        assumptions.push(format!(
            "max_model_len {max_len} (model's max_position_embeddings, vLLM default)"
        ));
    } else if max_len > arch.max_position_embeddings {
        assumptions.push(format!(
            "max_model_len {max_len} exceeds max_position_embeddings {}: vLLM refuses it unless \
             VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
            arch.max_position_embeddings
        ));
    }
    if arch.mla.is_some() {
        assumptions.push("MLA: the compressed latent (kv_lora_rank + qk_rope_head_dim) is cached whole on every TP rank".into());
    }
    if tp as u64 > u64::from(arch.num_kv_heads) && arch.mla.is_none() {
        assumptions.push(format!(
            "TP {tp} > {} KV heads: each rank keeps one replicated KV head",
            arch.num_kv_heads
        ));
    }
    if !arch.num_attention_heads.is_multiple_of(tp) {
        problems.push(format!(
            "{} attention heads are not divisible by tensor_parallel_size {tp}",
            arch.num_attention_heads
        ));
    }
    if pp > arch.num_layers {
        problems.push(format!(
            "pipeline_parallel_size {pp} exceeds {} layers",
            arch.num_layers
        ));
    }
    let gpus_used = tp.saturating_mul(pp);
    if gpus_used > req.gpu.count {
        problems.push(format!(
            "tp × pp = {gpus_used} GPUs but only {} available",
            req.gpu.count
        ));
    }
    // an engine whose graphs and non-torch memory live outside its budget shows none of them in
    // its table: no estimate of them here
    if !req.enforce_eager && in_table {
        assumptions.push(
            "CUDA-graph memory estimate 0.5 GiB + 13 MiB per layer (rough fit to H100 logs)".into(),
        );
    }
    if in_table {
        assumptions.push(format!(
        "non-torch memory {:.2} GiB per GPU (fitted on the calibration half: H100, NVLink, custom all-reduce{}{})",
        non_torch_bytes(tp, pp, profiled, req.tp_link) as f64 / GIB,
        match (tp > 1, req.tp_link) {
            (false, _) => "",
            (true, Some(TpLink::Pcie)) => {
                "; GPUs linked by PCIe only: no NCCL channel buffers in GPU memory"
            }
            (true, Some(TpLink::BoardLink)) => "; GPUs linked on the board: NCCL's NVLink buffers",
            (true, None) => "; GPU link unknown (an NVLink bridge?): NCCL's NVLink buffers charged",
        },
        if profiled {
            ""
        } else {
            "; vLLM ≤ 0.6.4 counts everything since the worker started"
        }
    ));
    }
    if arch.vision_params > 0 {
        assumptions.push(
            "multimodal: vision tower loaded in the model dtype and profiled (≈0.25 GiB)".into(),
        );
    }
    if arch.moe.is_some() {
        assumptions.push(if req.expert_parallel {
            "MoE: experts placed whole across the TP group (expert parallel)".into()
        } else {
            "MoE: every expert sliced across TP ranks".into()
        });
    }
    if pp > 1 {
        assumptions.push(
            "pipeline parallel: per-GPU figures are stage 0's; blocks are the minimum over stages"
                .into(),
        );
    }

    gpus_used
}

/// Phase 4: exact weights from the checkpoint's headers, and a warning when the formula
/// disagrees by more than 2 %.
fn checkpoint_notes(
    req: &PlanRequest,
    arch: &ModelArch,
    quant: Option<&Quantization>,
    flag_quant: bool,
    assumptions: &mut Vec<String>,
) {
    if let Some(c) = req.checkpoint.as_ref().filter(|c| c.tensors > 0) {
        if flag_quant {
            assumptions.push("weights: --quantization changes the checkpoint's dtype: formula used, not the headers".into());
        } else {
            let mut f = weights_per_gpu(arch, quant, Shard::SINGLE);
            f.rope_cache = 0;
            f.runtime = 0;
            let (h, fb) = (c.loaded_bytes() as f64, f.total() as f64);
            assumptions.push(format!(
                "weights: exact bytes from {} checkpoint tensors ({:.2} GiB loaded{}), sharded by TP/PP as vLLM does",
                c.tensors,
                h / GIB,
                if c.skipped > 0 { format!("; {:.2} GiB of MTP layers not loaded", c.skipped as f64 / GIB) } else { String::new() }
            ));
            if fb > 0.0 && ((h - fb) / fb).abs() > 0.02 {
                assumptions.push(format!(
                    "warning: the architecture formula gives {:.2} GiB but the checkpoint headers {:.2} GiB ({:+.1} %): the headers are used",
                    fb / GIB,
                    h / GIB,
                    (h - fb) / fb * 100.0
                ));
            }
        }
    }
}

/// The per-stage sizing's result: stage 0's figures, blocks (minimum over stages) and layout.
struct Stages {
    first: Stage,
    blocks: u64,
    layout: crate::memory::KvLayout,
    all_fit_weights: bool,
    graphs_fit: bool,
}

/// What the per-stage sizing needs.
struct StageInputs<'a> {
    arch: &'a ModelArch,
    quant: Option<&'a Quantization>,
    flag_quant: bool,
    tp: u32,
    pp: u32,
    profiled: bool,
    batched_tokens: u64,
    seqs: u64,
    sampler: crate::memory::SamplerPath,
    graphs_in_budget: bool,
    v1: bool,
    usable: u64,
    total: u64,
    kv_dtype: Dtype,
    block: u64,
    /// `--kv-cache-memory-bytes`: the KV cache, set directly.
    kv_bytes: Option<u64>,
    /// Conv and SSM state dtypes of hybrid models' state layers.
    state_dtypes: (Dtype, Dtype),
    /// The vLLM release whose rules apply.
    version: memory::EngineVersion,
}

/// Phase 5: vLLM's sizing per pipeline stage (first, last and one middle stage).
fn stages(req: &PlanRequest, i: &StageInputs) -> Stages {
    let StageInputs {
        arch,
        quant,
        flag_quant,
        tp,
        pp,
        profiled,
        batched_tokens,
        seqs,
        sampler,
        graphs_in_budget,
        v1,
        usable,
        total,
        kv_dtype,
        block,
        kv_bytes,
        state_dtypes,
        version,
    } = *i;
    let mut first = Stage::default();
    let mut min_blocks = u64::MAX;
    let mut layout0 = None;
    let mut all_fit_weights = true;
    let mut graphs_fit = true;
    let stages = pp.min(arch.num_layers.max(1));
    for s in 0..stages {
        // stages in the middle are like stage 1; compute the first, last and one middle only
        if s > 1 && s + 1 < stages {
            continue;
        }
        let shard = Shard {
            tp,
            pp: stages,
            stage: s,
            expert_parallel: req.expert_parallel,
        };
        let formula = weights_per_gpu(arch, quant, shard);
        let w = match (&req.checkpoint, flag_quant) {
            // the headers hold what is loaded; add what the engine allocates beside it
            (Some(c), false) if c.tensors > 0 => {
                c.per_gpu(shard, arch.num_kv_heads, arch.tie_word_embeddings)
                    + formula.rope_cache
                    + formula.runtime
            }
            _ => formula.total(),
        };
        let nt = non_torch_bytes(tp, pp, profiled, req.tp_link);
        let act = activation_bytes(
            arch,
            ProfileShape {
                tokens: batched_tokens,
                seqs,
                v1: profiled,
                tp,
                sampler,
            },
        );
        let range = stage_layers(arch.num_layers, stages, s);
        let layers_here = range.len() as u32;
        let graph = if req.enforce_eager {
            0
        } else {
            cuda_graph_bytes(layers_here, tp)
        };
        let in_budget = if graphs_in_budget { graph } else { 0 };
        // vLLM ≥ 0.10.2 `determine_available_memory`: `--kv-cache-memory-bytes` is returned as
        // is, with no profiling against the utilisation budget.
        let kv = match kv_bytes {
            Some(b) => b.min(1 << 60) as i64,
            None => usable as i64 - (w + nt + act + in_budget) as i64,
        };
        let dsa = (req.engine == Engine::Vllm && version >= crate::hybrid::VLLM_FIRST)
            .then(|| {
                crate::dsa::vllm_layout(
                    arch,
                    range.len() as u32,
                    req.kv_cache_dtype.as_deref(),
                    version,
                    req.compute_capability.map(|c| c.0),
                )
            })
            .flatten();
        let layout = if let Some(d) = dsa {
            d
        } else if arch.state_layers.is_empty() {
            kv_layout(arch, range, tp, kv_dtype, block)
        } else {
            let state = crate::hybrid::StateCache {
                dtypes: state_dtypes,
                blocks: crate::hybrid::state_blocks(arch, version, &req.hybrid_run()),
            };
            crate::hybrid::vllm_layout(arch, range, tp, kv_dtype, block, state, version)
        };
        let blocks = if kv <= 0 {
            0
        } else if v1 {
            kv as u64 / layout.bytes_per_block().max(1)
        } else {
            kv as u64 / (layout.bytes_per_token * block).max(1)
        };
        let free_after = match kv_bytes {
            // nothing was profiled: everything allocated must fit the card itself
            Some(b) => total as i64 - (w + nt + act + graph) as i64 - b.min(1 << 60) as i64,
            None => total as i64 - usable as i64 - (graph - in_budget) as i64,
        };
        if kv <= 0 {
            all_fit_weights = false;
        }
        if free_after < 0 {
            graphs_fit = false;
        }
        min_blocks = min_blocks.min(blocks);
        if s == 0 {
            first = Stage {
                weights: w,
                non_torch: nt,
                activation: act,
                cuda_graph: graph,
                kv,
                blocks,
                free_after,
            };
            layout0 = Some(layout);
        }
    }
    let layout = layout0.unwrap_or_else(|| kv_layout(arch, 0..0, tp, kv_dtype, block));
    let blocks = if min_blocks == u64::MAX {
        first.blocks
    } else {
        min_blocks
    };

    Stages {
        first,
        blocks,
        layout,
        all_fit_weights,
        graphs_fit,
    }
}

/// An engine's own KV sizing after the shared stages, which replaces the default one.
pub(crate) struct OwnSizing {
    pub(crate) tokens: u64,
    /// KV bytes per token the engine budgets (an NSA cell includes the indexer).
    pub(crate) cell: u64,
    pub(crate) kv: i64,
    pub(crate) budget: f64,
    pub(crate) outside: f64,
    pub(crate) block: u32,
    pub(crate) rules: crate::rules::EngineRules,
    /// Requests the engine can run at once whatever their length (a Mamba pool).
    pub(crate) max_requests: Option<u64>,
    /// Recurrent-state bytes of one request on this GPU, as the engine sizes them.
    pub(crate) state_per_seq: Option<u64>,
    /// The engine starts with less KV than one max-length request (a note, not a problem).
    pub(crate) starts_short: bool,
    /// Bytes of the engine's separate state pool as allocated ([`Plan::state_pool_bytes`]).
    pub(crate) state_pool: Option<u64>,
}

/// What an engine's own sizing reads: the request and the shared figures.
pub(crate) struct SizingInput<'a> {
    pub(crate) req: &'a PlanRequest,
    pub(crate) arch: &'a ModelArch,
    pub(crate) quant: Option<&'a Quantization>,
    pub(crate) tp: u32,
    pub(crate) pp: u32,
    /// Torch-visible bytes per GPU.
    pub(crate) total: u64,
    /// KV bytes per token from the shared layout.
    pub(crate) cell: u64,
}

/// A room's sizing hook for [`pipeline`].
pub(crate) struct OwnSizer {
    /// Sizes the KV cache; may rewrite the first stage's figures.
    pub(crate) size: fn(&SizingInput<'_>, &mut Stage, &mut Vec<String>) -> OwnSizing,
    /// CUDA graphs, activations and non-torch memory live outside the engine's budget (the
    /// shared estimates of them are not shown).
    pub(crate) outside_budget: bool,
}

/// Phase 2: vLLM's rules for the release asked for ([`crate::engines::vllm::rules::vllm`]).
fn release_rules(
    req: &PlanRequest,
    arch: &ModelArch,
    total: u64,
    max_len: u64,
) -> crate::engines::vllm::rules::VllmRules {
    let kv_fp8 = req
        .kv_cache_dtype
        .as_deref()
        .is_some_and(|k| k.starts_with("fp8"));
    crate::engines::vllm::rules::vllm(&crate::engines::vllm::rules::VllmContext {
        version: req.engine_version.as_deref(),
        gpu_total_bytes: total,
        gpu_name: &req.gpu.name,
        compute_capability: req.compute_capability,
        max_model_len: max_len,
        sliding_window: layout_has_window(arch),
        multimodal: arch.vision_params > 0,
        offline: req.offline,
        v1_forced: req.v1,
        flashinfer_sampler: req.flashinfer_sampler,
        max_num_batched_tokens: req.max_num_batched_tokens,
        max_num_seqs: req.max_num_seqs,
        gpu_memory_utilization: req.gpu_memory_utilization,
        block_size: req.block_size,
        kv_fp8,
        dtype_fp32: arch.dtype == Dtype::F32,
        enforce_eager: req.enforce_eager,
        dtype_bytes: arch.dtype.bytes(),
    })
}

/// Phase 6: tokens the blocks hold and how many max-length requests fit, as vLLM prints them.
fn vllm_tokens(
    layout: &crate::memory::KvLayout,
    blocks: u64,
    block: u64,
    max_len: u64,
    batched_tokens: u64,
    v1: bool,
) -> (u64, f64, u32) {
    if layout.bytes_per_token == 0 {
        (0, 0.0, 0)
    } else if v1 {
        let groups = layout.num_groups();
        let tokens = blocks / u64::from(groups) * block;
        let per_req = layout.blocks_per_request(max_len, block, batched_tokens);
        (tokens, blocks as f64 / per_req as f64, groups)
    } else {
        let tokens = blocks * block;
        (tokens, tokens as f64 / max_len as f64, 1)
    }
}

/// What the KV layout implies (hybrid groups, V0's full-length sliding pools, fp8 scales).
fn kv_notes(
    req: &PlanRequest,
    arch: &ModelArch,
    quant: Option<&Quantization>,
    layout: &crate::memory::KvLayout,
    groups: u32,
    v1: bool,
    assumptions: &mut Vec<String>,
) {
    if v1 && arch.is_hybrid() {
        // from 0.21 a state model's printed size is concurrency × max_model_len (hybrid.rs)
        let printed = if layout.state_bytes_per_seq > 0
            && req
                .engine_version
                .as_deref()
                .and_then(crate::memory::EngineVersion::parse)
                .is_none_or(crate::hybrid::prints_concurrency_tokens)
        {
            "tokens = max concurrency × max_model_len, as vLLM ≥ 0.21 prints them"
        } else {
            "tokens = blocks / groups × block size, as vLLM V1 prints them"
        };
        assumptions.push(format!(
            "hybrid KV layout: {} groups of {} layers; {printed}",
            groups, layout.group_size
        ));
    }
    // vLLM V0's rule, about windows: state layers (no KV) and other engines are not concerned
    if !v1 && req.engine == Engine::Vllm && layout_has_window(arch) {
        assumptions.push("V0: sliding-window layers get a full-length KV pool".into());
    }
    if quant.is_some_and(|q| q.kv_cache_fp8) && req.kv_cache_dtype.is_none() {
        assumptions.push(
            "checkpoint ships fp8 KV scales; KV dtype stays auto unless --kv-cache-dtype fp8"
                .into(),
        );
    }
}

/// Phase 7: what does not fit under vLLM's accounting.
fn vllm_problems(
    first: &Stage,
    all_fit_weights: bool,
    graphs_fit: bool,
    kv: Option<(u64, f64)>,
    (usable, util, total, max_len): (u64, f64, u64, u64),
    problems: &mut Vec<String>,
) {
    if !all_fit_weights {
        problems.push(format!(
            "weights {:.2} GiB + non-torch {:.2} + activation {:.2} exceed {:.2} GiB ({}% of {:.2} GiB)",
            first.weights as f64 / GIB,
            first.non_torch as f64 / GIB,
            first.activation as f64 / GIB,
            usable as f64 / GIB,
            (util * 100.0).round(),
            total as f64 / GIB
        ));
    } else if let Some((kv_tokens, _)) = kv.filter(|(_, c)| *c < 1.0) {
        problems.push(format!(
            "KV cache holds {kv_tokens} tokens, less than one max_model_len {max_len} request"
        ));
    }
    if !graphs_fit {
        problems
            .push("CUDA graphs do not fit in the memory gpu_memory_utilization leaves free".into());
    }
}

/// Phase 8: a room's own verdicts after its own sizing, in place of the default ones (which are
/// not computed then):
/// no KV budget, or less than one max-length request (an engine may start anyway).
fn own_problems(
    req: &PlanRequest,
    first: &Stage,
    (engine, starts_short): (&str, bool),
    (kv_tokens, max_conc, max_len): (u64, f64, u64),
    assumptions: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    if first.kv <= 0 {
        problems.push(format!(
            "weights {:.2} GiB leave no KV cache in {engine}'s budget",
            first.weights as f64 / GIB,
        ));
    } else if max_conc < 1.0 {
        let msg = format!(
            "KV cache holds {kv_tokens} tokens, less than one max_model_len {max_len} request"
        );
        if starts_short {
            // the engine starts anyway; long requests wait or are cut
            let name = crate::engines::room(req.engine).server_name();
            assumptions.push(format!("{msg} ({name} starts anyway)"));
        } else {
            problems.push(msg);
        }
    }
}

/// Compute the plan in the engine's own accounting: its room's
/// ([`crate::engines::EngineRoom::memory`]). An engine without one gets no numbers and one
/// problem, "memory not modelled for ENGINE" — never another engine's plan.
pub fn plan(req: &PlanRequest) -> Plan {
    // an architecture the release does not run, or a state layer the engine's accounting is
    // not modelled for: no plan as if it were attention
    if let Some(why) = crate::engines::refusal(&req.arch, req.engine, req.engine_version.as_deref())
    {
        return refused(req, why);
    }
    match crate::engines::room(req.engine).memory() {
        Ok(m) => m.plan(req),
        Err(x) => refused(req, x.to_string()),
    }
}

/// The PyTorch-engine pipeline: the default (profiled) sizing, or after the shared stages a
/// room's own sizing (`own`) in place of it.
///
/// The body is the sequence of named phases above ([`dtypes`], [`release_rules`],
/// [`shape_notes`], [`checkpoint_notes`], [`stages`], [`vllm_tokens`], [`vllm_problems`], the
/// room's sizing, [`own_problems`]) and the output's assembly; it stays one piece (~185 lines,
/// most of them argument lists) because the order in which the phases push assumptions is the
/// text and JSON contract the goldens pin.
pub(crate) fn pipeline(req: &PlanRequest, own: Option<&OwnSizer>) -> Plan {
    let arch = &req.arch;
    let mut assumptions: Vec<String> = Vec::with_capacity(12);
    let mut problems: Vec<String> = Vec::new();
    let tp = req.tp.clamp(1, 1024);
    let pp = req.pp.clamp(1, 1024);
    if let Some(m) = &req.speculative_mtp {
        let method = &m.method;
        if req.speculative_mtp_layers > 0 {
            assumptions.push(format!(
                "speculative decoding ({method}, {} token(s) a step): the model's {} MTP layer(s) load as the draft; their weights and KV pages are counted as decoder layers, the drafter's own profiling run and CUDA graphs are not [vllm/v1/spec_decode/eagle.py EagleProposer.load_model]",
                m.num_speculative_tokens.unwrap_or(1),
                req.speculative_mtp_layers
            ));
        } else {
            problems.push(format!(
                "--speculative-config method {method} drafts with the model's MTP layers, and config.json declares none (num_nextn_predict_layers / mtp_num_hidden_layers): vLLM has no draft to load"
            ));
        }
    }

    // ---- dtypes and quantization ----
    let (arch_dtype, flag_quant, kv_dtype) = dtypes(req, &mut assumptions);
    let quant = flag_quant.as_ref().or(arch.quantization.as_ref());
    let arch_eff;
    let arch = if arch_dtype != arch.dtype {
        arch_eff = ModelArch {
            dtype: arch_dtype,
            ..arch.clone()
        };
        &arch_eff
    } else {
        arch
    };

    // ---- engine rules of this release ----
    // 1 PiB per GPU bounds every byte sum below i64.
    let total = req.gpu.total_bytes.min(1 << 50);
    let max_len = req
        .max_model_len
        .unwrap_or(arch.max_position_embeddings)
        .clamp(1, 1 << 40);
    let rules = release_rules(req, arch, total, max_len);
    let mut engine_rules = rules.info.clone();
    let version = rules.release;
    let v1 = rules.v1;
    let vllm = own.is_none();
    if vllm {
        push_rules(&mut assumptions, &engine_rules, &format!("vLLM {version}"));
    }
    let util = rules.utilization;
    let profiled = rules.non_torch == crate::engines::vllm::rules::NonTorch::Increase;
    let gpus_used = shape_notes(
        req,
        arch,
        (tp, pp, max_len),
        (profiled, own.is_none_or(|o| !o.outside_budget)),
        &mut assumptions,
        &mut problems,
    );
    let batched_tokens = rules.batched_tokens;
    let seqs = rules.seqs;
    let block = u64::from(rules.block_size);
    checkpoint_notes(req, arch, quant, flag_quant.is_some(), &mut assumptions);

    let flag_dtype = |d: &Option<String>| d.as_deref().and_then(Dtype::parse);
    let state_dtypes = crate::hybrid::vllm_state_dtypes(
        arch,
        version,
        flag_dtype(&req.hybrid.mamba_cache_dtype),
        flag_dtype(&req.hybrid.mamba_ssm_cache_dtype),
    );

    // ---- per stage ----
    let usable = (util * total as f64) as u64;
    let mut usable_out = usable;
    let Stages {
        mut first,
        blocks,
        layout,
        all_fit_weights,
        graphs_fit,
    } = stages(
        req,
        &StageInputs {
            arch,
            quant,
            flag_quant: flag_quant.is_some(),
            tp,
            pp,
            profiled,
            batched_tokens,
            seqs,
            sampler: rules.sampler,
            graphs_in_budget: rules.cuda_graph_in_budget,
            v1,
            usable,
            total,
            kv_dtype,
            block,
            kv_bytes: req.kv_cache_memory_bytes.filter(|_| vllm),
            state_dtypes,
            version,
        },
    );
    // hybrid models: vLLM raised the block so that one page holds one state; DeepSeek sparse
    // attention: the sparse backend's 64-token blocks
    let block = if !arch.state_layers.is_empty() {
        layout.block_size.max(block)
    } else if layout.block_size > 0 && layout.block_size != block {
        assumptions.push(format!(
            "DeepSeek sparse attention: {} B per token and layer = latent {} B + indexer keys {} B, 64-token blocks [0.11.0 model_executor/models/config.py DeepseekV32ForCausalLM (auto: fp8_ds_mla in 0.11 only; from 0.12 the model dtype, fp8 flags fp8_ds_mla); v1/kv_cache_interface.py MLAAttentionSpec fp8_ds_mla; models/deepseek_v2.py DeepseekV32IndexerCache; platforms/cuda.py]",
            layout.page_bytes / layout.block_size.max(1),
            crate::dsa::vllm_latent_bytes(
                arch,
                req.kv_cache_dtype.as_deref(),
                version,
                req.compute_capability.map(|c| c.0),
            )
                .unwrap_or(0),
            arch.nsa_index_head_dim.map_or(0, crate::dsa::indexer_bytes),
        ));
        layout.block_size
    } else {
        block
    };
    // the note is vLLM's paging; an engine with its own sizing (a separate state pool) states
    // its own state accounting instead
    if layout.state_bytes_per_seq > 0 && vllm {
        hybrid_notes(
            arch,
            (&layout, block),
            state_dtypes,
            (version, &req.hybrid_run()),
            &mut assumptions,
        );
    }

    // ---- vLLM's own sizing flags ----
    let max_len = if vllm && req.max_model_len_auto && layout.bytes_per_token > 0 {
        crate::auto_len::auto_max_len(
            &layout,
            (blocks, block, batched_tokens, v1),
            max_len,
            first.kv,
            (&mut assumptions, &mut problems),
        )
    } else {
        max_len
    };
    let kv_set = req.kv_cache_memory_bytes.filter(|_| vllm);
    if let Some(b) = kv_set {
        let others = first.weights + first.non_torch + first.activation + first.cuda_graph;
        crate::auto_len::kv_bytes_notes(b, others, total, &mut assumptions, &mut problems);
    }

    // ---- tokens and concurrency ----
    let (kv_tokens, max_conc, groups) =
        vllm_tokens(&layout, blocks, block, max_len, batched_tokens, v1);
    // hybrid models from 0.21: the printed size is the concurrency times max_model_len
    let kv_tokens =
        if layout.state_bytes_per_seq > 0 && crate::hybrid::prints_concurrency_tokens(version) {
            (max_conc * max_len as f64) as u64
        } else {
            kv_tokens
        };
    kv_notes(req, arch, quant, &layout, groups, v1, &mut assumptions);

    // a room's own sizing below gives its own verdicts
    let own_sizing = own.filter(|_| layout.bytes_per_token > 0);
    if own_sizing.is_none() {
        vllm_problems(
            &first,
            all_fit_weights,
            // with the KV set directly, what overflows the card is said by kv_bytes_notes
            graphs_fit || kv_set.is_some(),
            (layout.bytes_per_token > 0).then_some((kv_tokens, max_conc)),
            (usable, util, total, max_len),
            &mut problems,
        );
    }
    // ---- a room's own KV sizing ----
    let mut kv_tokens = kv_tokens;
    let mut max_conc = max_conc;
    let mut blocks = blocks;
    let mut block_out = block as u32;
    let mut cell_out = layout.bytes_per_token;
    let mut state_per_seq = layout.state_bytes_per_seq;
    let mut state_pool = None;
    if let Some(sizer) = own_sizing {
        let input = SizingInput {
            req,
            arch,
            quant,
            tp,
            pp,
            total,
            cell: layout.bytes_per_token,
        };
        let own = (sizer.size)(&input, &mut first, &mut assumptions);
        let (tokens, kv_bytes, budget, outside) = (own.tokens, own.kv, own.budget, own.outside);
        let rules_out = own.rules.clone();
        block_out = own.block;
        cell_out = own.cell;
        engine_rules = rules_out;
        let name = format!("{} {}", engine_rules.engine, engine_rules.rules_of);
        push_rules(&mut assumptions, &engine_rules, &name);
        kv_tokens = tokens;
        blocks = tokens / u64::from(block_out.max(1));
        max_conc = tokens as f64 / max_len as f64;
        if let Some(n) = own.max_requests {
            max_conc = max_conc.min(n as f64);
        }
        if let Some(b) = own.state_per_seq {
            state_per_seq = b;
        }
        state_pool = own.state_pool;
        first.kv = kv_bytes;
        first.free_after = outside as i64;
        usable_out = budget as u64;
        own_problems(
            req,
            &first,
            (&engine_rules.engine, own.starts_short),
            (kv_tokens, max_conc, max_len),
            &mut assumptions,
            &mut problems,
        );
    }
    let fits = problems.is_empty();
    let meets = req.concurrency.map(|c| fits && max_conc >= f64::from(c));

    Plan {
        fits,
        problems,
        per_gpu: PerGpu {
            total_gib: gib2(usable_out as f64),
            gpu_total_gib: gib2(total as f64),
            weights_gib: gib2(first.weights as f64),
            non_torch_gib: gib2(first.non_torch as f64),
            activation_gib: gib2(first.activation as f64),
            cuda_graph_gib: gib2(first.cuda_graph as f64),
            kv_cache_gib: gib2(first.kv.max(0) as f64),
            free_after_kv_gib: gib2(first.free_after as f64),
        },
        kv_cache_tokens: kv_tokens,
        max_concurrency: (max_conc * 100.0).round() / 100.0,
        concurrency: req.concurrency,
        meets_concurrency: meets,
        max_model_len: Some(max_len),
        tensor_parallel_size: Some(tp),
        pipeline_parallel_size: pp,
        gpus_used,
        weights_bytes_total: Some(memory::checkpoint_bytes(arch)),
        weights_bytes_per_gpu: first.weights,
        gpus: Vec::new(),
        numa_nodes: Vec::new(),
        kv_bytes_per_token: cell_out,
        state_bytes_per_sequence: state_per_seq,
        state_pool_bytes: state_pool,
        blocks,
        block_size: block_out,
        kv_cache_groups: groups,
        kv_cache_dtype: kv_dtype,
        model: req.model_name.clone(),
        gpu: req.gpu.name.clone(),
        engine: EngineInfo {
            name: req.engine,
            version: engine_rules.rules_of.clone(),
            v1,
        },
        assumptions,
        llama_cpp: None,
        accounting: Some(engine_rules.accounting),
        engine_rules: Some(engine_rules),
    }
}

/// Say the rules first: an approximate accounting in the first line, then each rule.
fn push_rules(assumptions: &mut Vec<String>, rules: &crate::rules::EngineRules, name: &str) {
    if rules.accounting == crate::rules::Accounting::Approximate {
        assumptions.insert(
            0,
            format!(
                "accounting approximate: {}",
                rules.note.as_deref().unwrap_or("rules of another release")
            ),
        );
    } else if let Some(n) = &rules.note {
        assumptions.push(n.clone());
    }
    for r in &rules.rules {
        assumptions.push(format!("{name} {}: {} [{}]", r.rule, r.value, r.source));
    }
}

/// The model has sliding-window or chunked-local layers.
fn layout_has_window(arch: &ModelArch) -> bool {
    arch.layers.iter().any(|l| {
        matches!(
            l.kind,
            AttentionKind::Sliding(_) | AttentionKind::ChunkedLocal(_)
        )
    })
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a hybrid model's state costs and how vLLM pages it ([`crate::hybrid`]).
fn hybrid_notes(
    arch: &ModelArch,
    (layout, block): (&crate::memory::KvLayout, u64),
    (conv, ssm): (Dtype, Dtype),
    (version, run): (memory::EngineVersion, &crate::hybrid::HybridRun),
    assumptions: &mut Vec<String>,
) {
    use crate::hybrid::MambaCacheMode;
    let state_layers = layout
        .kinds
        .iter()
        .filter(|k| k.kind == AttentionKind::NoKv)
        .map(|k| k.layers)
        .sum::<u32>();
    let types: Vec<&str> = {
        let mut t: Vec<&str> = arch
            .state_layers
            .iter()
            .map(|s| s.layer_type.as_str())
            .collect();
        t.dedup();
        t
    };
    let mode = crate::hybrid::mamba_cache_mode(arch, version, run);
    let held = match mode {
        MambaCacheMode::All => format!(
            "prefix caching in `all` mode keeps a state page per {block}-token block, so a request holds as many state blocks per group as it holds attention blocks [0.26.0 model_executor/models/config.py MambaModelConfig.verify_and_update_config; platforms/interface.py _align_hybrid_block_size; v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes]"
        ),
        MambaCacheMode::Align => format!(
            "prefix caching (`align` mode): {} blocks per state group per request [v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes: 2 + draft tokens + prefill checkpoint]",
            layout.state_blocks_per_request
        ),
        MambaCacheMode::None => format!(
            "{} block(s) per state group per request [MambaSpec.max_memory_usage_bytes: 1 + draft tokens]",
            layout.state_blocks_per_request
        ),
    };
    assumptions.push(format!(
        "hybrid state: {state_layers} `{}` layers keep {} B per sequence on this GPU (conv state {conv}, SSM state {ssm}); vLLM pages them with the attention KV: block raised to {block} tokens so one {} B page holds one layer's state; {held} [0.11.0 model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config; 0.34.0 platforms/interface.py _align_hybrid_block_size; layers/mamba/mamba_utils.py MambaStateShapeCalculator]",
        types.join("`, `"),
        layout.state_bytes_per_seq,
        layout.page_bytes,
    ));
    if mode == MambaCacheMode::Align
        && crate::hybrid::gdn_prefill_on_flashinfer(arch, version, run).is_none()
    {
        assumptions.push(
            "Gated DeltaNet prefill checkpoint: the GPU's compute capability is unknown, so no checkpoint block is counted; vLLM ≥ 0.33 adds one per state group on Hopper, and on Blackwell with 128-wide key heads, where the GDN prefill runs on FlashInfer [0.34.0 layers/mamba/gdn/qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend, GatedDeltaNetAttention.get_kv_cache_spec]".into(),
        );
    }
}

/// The answer for a model the engine's accounting does not cover: no numbers, one problem.
pub(crate) fn refused(req: &PlanRequest, why: String) -> Plan {
    Plan {
        fits: false,
        problems: vec![why],
        per_gpu: PerGpu::default(),
        kv_cache_tokens: 0,
        max_concurrency: 0.0,
        concurrency: req.concurrency,
        meets_concurrency: req.concurrency.map(|_| false),
        max_model_len: req.max_model_len,
        tensor_parallel_size: Some(req.tp),
        pipeline_parallel_size: req.pp,
        gpus_used: req.tp.saturating_mul(req.pp),
        weights_bytes_total: None,
        weights_bytes_per_gpu: 0,
        gpus: Vec::new(),
        numa_nodes: Vec::new(),
        kv_bytes_per_token: 0,
        state_bytes_per_sequence: 0,
        state_pool_bytes: None,
        blocks: 0,
        block_size: 0,
        kv_cache_groups: 0,
        kv_cache_dtype: req.arch.dtype,
        model: req.model_name.clone(),
        gpu: req.gpu.name.clone(),
        engine: EngineInfo {
            name: req.engine,
            version: req.engine_version.clone().unwrap_or_default(),
            v1: true,
        },
        assumptions: Vec::new(),
        llama_cpp: None,
        accounting: None,
        engine_rules: None,
    }
}
