//! llama.cpp's `llama-server` memory, as llama.cpp itself sizes it — not vLLM's accounting.
//!
//! llama.cpp does not give "the rest of the GPU" to the KV cache: it allocates exactly `-c`
//! context cells (rounded up to 256), shared by `-np` slots, with K and V in the types of
//! `-ctk`/`-ctv` (f16 by default, block-quantized q8_0/q4_0/... with their block overhead). The
//! rules below are those of the llama.cpp vendored in llama-cpp-python 0.3.36 (`llama-context.cpp`,
//! `llama-kv-cache.cpp`, `llama-kv-cache-iswa.cpp`, `tools/server/server.cpp`, `common/fit.cpp`)
//! and are checked cell for cell against that build's `llama-server` logs
//! (`fixtures/tools/llama-server/`):
//!
//! * `-np` unset (auto): 4 slots and a unified KV pool (`kv_unified`, even with `-no-kvu`);
//!   set: that many slots, each with its own stream of `n_ctx / np` cells rounded up to 256
//!   (`n_ctx` then grows to match), unless `-kvu`.
//! * `-c` unset or 0: the model's training context per stream (`n_ctx_train × streams`).
//! * a slot's context is capped at the training context (the server warns and caps).
//! * sliding-window layers keep `min(cells, n_swa × (unified ? np : 1) + n_ubatch)` cells,
//!   rounded up to 256, unless `--swa-full`.
//! * MLA (DeepSeek) caches only the compressed latent in K; there is no V tensor.
//! * `-ngl auto` (default): llama.cpp's `--fit` offloads as many layers as fit with 1 GiB free.
//!
//! What llama.cpp does not report and is estimated here (said in the assumptions): the compute
//! buffer (logits and activations of one `n_ubatch`) and the CUDA context.

use crate::arch::{AttentionKind, Dtype, ModelArch};
use crate::memory::{GIB, Shard, checkpoint_bytes, gib2, weights_per_gpu};
use crate::plan::{EngineInfo, PerGpu, Plan, PlanRequest};
use serde::{Deserialize, Serialize};

/// llama.cpp `-ngl`: how many repeating layers go to the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GpuLayers {
    /// An exact count (`-ngl 20`; larger than the model means all, output layer included).
    Count(u32),
    /// `all`, `auto`: as words.
    Word(GpuLayersWord),
}

/// The words `-ngl` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuLayersWord {
    /// Every layer.
    All,
    /// As many as fit (llama.cpp's default, through `--fit`).
    Auto,
}

impl GpuLayers {
    /// Parse `-ngl`'s value: a count, `all` or `auto` (`-1` is auto, as in older builds).
    pub fn parse(s: &str) -> Option<GpuLayers> {
        match s.trim() {
            "all" => Some(GpuLayers::Word(GpuLayersWord::All)),
            "auto" | "-1" => Some(GpuLayers::Word(GpuLayersWord::Auto)),
            n => n.parse().ok().map(GpuLayers::Count),
        }
    }
}

/// llama-server settings that only llama.cpp has (the rest map onto [`PlanRequest`]: `-c` is
/// `max_model_len`, `-np` is `max_num_seqs`, `-ctk` is `kv_cache_dtype`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlamaCppSettings {
    /// `-ngl` (None = auto).
    #[serde(default)]
    pub gpu_layers: Option<GpuLayers>,
    /// `-ctv` (None = f16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_type_v: Option<String>,
    /// `-ub` (None = 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubatch_size: Option<u64>,
    /// `-kvu` / `-no-kvu` (None = unified only when `-np` is auto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_unified: Option<bool>,
    /// `--swa-full`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swa_full: bool,
    /// `-fa on|off|auto` (None = auto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_attn: Option<String>,
    /// `-ts`/`--tensor-split` proportions per GPU (None = by free memory: equal on equal GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_split: Option<Vec<f64>>,
    /// `-sm`/`--split-mode` `none|layer|row` (None = layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_mode: Option<String>,
}

/// What llama.cpp will allocate (`plan --json` key `llama_cpp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaCppPlan {
    /// Context cells of all streams together, as `llama_context: n_ctx` prints it.
    pub n_ctx: u64,
    /// Cells one sequence may use, as `llama_context: n_ctx_seq` prints it.
    pub n_ctx_seq: u64,
    /// Context of one server slot (`n_ctx_slot`, capped at the training context).
    pub n_ctx_slot: u64,
    /// Server slots (`-np`).
    pub slots: u32,
    /// One KV pool shared by all slots.
    pub kv_unified: bool,
    /// K cache type.
    pub cache_type_k: String,
    /// V cache type.
    pub cache_type_v: String,
    /// Cells of each sliding-window layer's cache, when the model has such layers.
    pub swa_cells: Option<u64>,
    /// Repeating layers on the GPU.
    pub gpu_layers: u32,
    /// Of the model's layers.
    pub layers: u32,
    /// The whole KV cache in MiB, as `llama_kv_cache: size = … MiB` prints it (GPU and host).
    pub kv_cache_mib: f64,
    /// Weights and KV cache left in host memory (layers not offloaded, token embeddings), GiB.
    pub host_gib: f64,
}

/// Recurrent cells of a hybrid model's state layers.
struct RecurrentCells {
    /// Bytes per layer (0 for attention-only layers), all cells.
    per_layer: Vec<u64>,
    /// All layers together.
    total: u64,
    /// One sequence's bytes over all state layers.
    per_sequence: u64,
}

/// `llama_memory_recurrent`: each state layer gets an F32 conv row (`n_embd_r`) and an F32 state
/// row (`n_embd_s`) per cell, `mem_size = max(1, n_seq_max)` cells, one per server slot
/// (`src/llama-model.cpp` `create_memory`: `recurrent_type_r/_s = GGML_TYPE_F32`;
/// `src/llama-memory-recurrent.cpp`, no rollback snapshots: `n_rs_seq` 0).
fn recurrent_cells(arch: &ModelArch, slots: u32, assumptions: &mut Vec<String>) -> RecurrentCells {
    let cells = u64::from(slots.max(1));
    let mut per_layer = vec![0u64; arch.num_layers.max(1) as usize];
    let mut per_sequence = 0u64;
    for s in &arch.state_layers {
        let Some((r, st)) = crate::state::llama_cpp_state_elements(&s.state) else {
            continue;
        };
        let seq = r.saturating_add(st).saturating_mul(4);
        per_sequence = per_sequence.saturating_add(seq);
        if let Some(p) = per_layer.get_mut(s.layer as usize) {
            *p = p.saturating_add(seq.saturating_mul(cells));
        }
    }
    let total = per_layer.iter().fold(0u64, |a, b| a.saturating_add(*b));
    if total > 0 {
        assumptions.push(format!(
            "recurrent state: {} state layers keep {per_sequence} B per sequence (F32 conv and state rows), {cells} cells = one per slot, {:.2} MiB in all (llama_memory_recurrent: size) [llama.cpp src/llama-memory-recurrent.cpp, src/llama-hparams.cpp n_embd_r/n_embd_s, src/llama-model.cpp create_memory]",
            arch.state_layers.len(),
            total as f64 / (1u64 << 20) as f64
        ));
    }
    RecurrentCells {
        per_layer,
        total,
        per_sequence,
    }
}

/// One ggml type's block: bytes per block of `elements` values.
fn ggml_type(name: &str) -> Option<(u64, u64)> {
    Some(match name {
        "f32" => (4, 1),
        "f16" | "bf16" => (2, 1),
        "q8_0" => (34, 32),
        "q4_0" | "iq4_nl" => (18, 32),
        "q4_1" => (20, 32),
        "q5_0" => (22, 32),
        "q5_1" => (24, 32),
        _ => return None,
    })
}

/// Bytes of a row of `n` values of a ggml type (`ggml_row_size`).
fn row_bytes((block_bytes, block_elems): (u64, u64), n: u64) -> u64 {
    n.div_ceil(block_elems).saturating_mul(block_bytes)
}

fn pad256(n: u64) -> u64 {
    n.div_ceil(256).saturating_mul(256)
}

/// The nearest `Dtype` for the plan's `kv_cache_dtype` (quantized types report 8-bit).
fn nearest_dtype(t: &str) -> Dtype {
    match t {
        "f32" => Dtype::F32,
        "f16" => Dtype::F16,
        "bf16" => Dtype::Bf16,
        _ => Dtype::Fp8,
    }
}

/// KV elements per token of layer `l` (K, V).
fn kv_elements(arch: &ModelArch, l: usize) -> (u64, u64) {
    if let Some(m) = &arch.mla {
        return (u64::from(m.kv_lora_rank + m.qk_rope_head_dim), 0);
    }
    match arch.layers.get(l) {
        Some(a) if a.kind == AttentionKind::NoKv => (0, 0),
        Some(a) => {
            let n = u64::from(a.kv_heads) * u64::from(a.head_dim);
            (n, if a.k_eq_v { 0 } else { n })
        }
        None => {
            let n = u64::from(arch.num_kv_heads) * u64::from(arch.head_dim);
            (n, n)
        }
    }
}

/// CUDA context of a process, not counted by llama.cpp (nvidia-smi shows it).
const CUDA_CONTEXT_BYTES: u64 = 300 << 20;
/// Free memory `--fit` leaves per GPU (`--fit-target`, default 1024 MiB).
const FIT_MARGIN_BYTES: u64 = 1 << 30;

/// Slots and context cells (`-np`, `-c`, `-kvu`).
struct Context {
    slots: u32,
    unified: bool,
    streams: u64,
    n_ctx: u64,
    n_ctx_seq: u64,
    n_ctx_slot: u64,
}

fn context(req: &PlanRequest, assumptions: &mut Vec<String>) -> Context {
    let n_ctx_train = req.arch.max_position_embeddings.max(1);
    let np_auto = req.max_num_seqs.is_none();
    let slots = req.max_num_seqs.unwrap_or(4).clamp(1, 4096);
    // With -np auto the server forces a unified pool, whatever -kvu/-no-kvu says.
    let unified = np_auto || req.llama_cpp.kv_unified.unwrap_or(false);
    if np_auto {
        assumptions.push("-np auto: 4 slots sharing one unified KV pool".into());
    }
    let streams = if unified { 1 } else { u64::from(slots) };
    let asked_ctx = req.max_model_len.filter(|c| *c > 0).map(|c| c.min(1 << 32));
    let mut n_ctx = pad256(asked_ctx.unwrap_or(n_ctx_train.saturating_mul(streams)));
    if asked_ctx.is_none() {
        assumptions.push(format!(
            "-c unset: the training context {n_ctx_train} per KV stream ({streams} stream{})",
            if streams == 1 { "" } else { "s" }
        ));
    }
    let n_ctx_seq = if unified {
        n_ctx
    } else {
        pad256(n_ctx / streams).max(256)
    };
    if !unified {
        n_ctx = n_ctx_seq * streams;
    }
    if n_ctx_seq > n_ctx_train {
        assumptions.push(format!(
            "a slot's context {n_ctx_seq} exceeds the training context {n_ctx_train}: llama-server caps it at {n_ctx_train}"
        ));
    }
    Context {
        slots,
        unified,
        streams,
        n_ctx,
        n_ctx_seq,
        n_ctx_slot: n_ctx_seq.min(n_ctx_train),
    }
}

/// K and V cache types (`-ctk`, `-ctv`) and their block layouts.
struct CacheTypes {
    name_k: String,
    name_v: String,
    k: (u64, u64),
    v: (u64, u64),
    flash_attn: String,
}

fn cache_types(
    req: &PlanRequest,
    assumptions: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> CacheTypes {
    let name_k = req
        .kv_cache_dtype
        .as_deref()
        .filter(|t| *t != "auto")
        .unwrap_or("f16")
        .to_ascii_lowercase();
    let name_v = req
        .llama_cpp
        .cache_type_v
        .as_deref()
        .unwrap_or("f16")
        .to_ascii_lowercase();
    let mut k_type = ggml_type(&name_k);
    let mut v_type = ggml_type(&name_v);
    for (flag, name, t) in [
        ("-ctk", &name_k, &mut k_type),
        ("-ctv", &name_v, &mut v_type),
    ] {
        if t.is_none() {
            problems.push(format!(
                "{flag} {name}: llama.cpp accepts f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"
            ));
            *t = ggml_type("f16");
        }
    }
    let (k, v) = (k_type.unwrap_or((2, 1)), v_type.unwrap_or((2, 1)));
    let fa = req
        .llama_cpp
        .flash_attn
        .clone()
        .unwrap_or_else(|| "auto".into());
    if v.1 > 1 && req.arch.mla.is_none() {
        if fa == "off" {
            problems.push(format!(
                "-ctv {name_v} needs flash attention, but -fa is off (llama.cpp refuses a quantized V cache without it)"
            ));
        } else if fa != "on" {
            assumptions.push(format!(
                "-ctv {name_v} needs flash attention: -fa auto must enable it on this GPU"
            ));
        }
    }
    CacheTypes {
        name_k,
        name_v,
        k,
        v,
        flash_attn: fa,
    }
}

/// KV bytes of each layer, and the sliding-window layers' cells.
struct LayerKv {
    per_layer: Vec<u64>,
    swa_cells: Option<u64>,
    has_swa: bool,
    ubatch: u64,
}

fn layer_kv(
    req: &PlanRequest,
    c: &Context,
    t: &CacheTypes,
    assumptions: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> LayerKv {
    let arch = &req.arch;
    let s = &req.llama_cpp;
    let layers = arch.num_layers.max(1);
    // llama.cpp: n_ubatch = min(-b, -ub), defaults 2048 and 512.
    let ubatch = s
        .ubatch_size
        .unwrap_or(512)
        .min(req.max_num_batched_tokens.unwrap_or(2048))
        .clamp(1, 1 << 20);
    let kv_size = if c.unified { c.n_ctx } else { c.n_ctx_seq };
    let swa_window = arch.layers.iter().find_map(|l| match l.kind {
        AttentionKind::Sliding(w) | AttentionKind::ChunkedLocal(w) => Some(u64::from(w)),
        _ => None,
    });
    let swa_cells = swa_window.map(|w| {
        if s.swa_full {
            kv_size
        } else {
            let per = w.saturating_mul(if c.unified { u64::from(c.slots) } else { 1 });
            pad256(kv_size.min(per.saturating_add(ubatch)))
        }
    });
    if swa_window.is_some() {
        assumptions.push(if s.swa_full {
            "--swa-full: sliding-window layers keep the full context".into()
        } else {
            "sliding-window layers keep window × (unified ? slots : 1) + n_ubatch cells".into()
        });
    }
    if arch.mla.is_some() {
        assumptions
            .push("MLA: K holds kv_lora_rank + qk_rope_head_dim per token; no V cache".into());
    }
    if arch.state_layers.is_empty() && arch.layers.iter().any(|l| l.kind == AttentionKind::NoKv) {
        assumptions.push("recurrent (no-KV) layers: their state memory is not modelled".into());
    }
    let per_layer: Vec<u64> = (0..layers as usize)
        .map(|l| {
            let (k, v) = kv_elements(arch, l);
            let cells = match arch.layers.get(l).map(|a| a.kind) {
                Some(AttentionKind::Sliding(_) | AttentionKind::ChunkedLocal(_)) => {
                    swa_cells.unwrap_or(kv_size)
                }
                _ => kv_size,
            };
            cells
                .saturating_mul(c.streams)
                .saturating_mul(row_bytes(t.k, k).saturating_add(row_bytes(t.v, v)))
        })
        .collect();
    // A block-quantized row must hold whole blocks, in every layer.
    for (flag, name, bt, k_or_v) in [("-ctk", &t.name_k, t.k, 0), ("-ctv", &t.name_v, t.v, 1)] {
        let misfit = (0..layers as usize).find_map(|l| {
            let (k, v) = kv_elements(arch, l);
            let n = if k_or_v == 0 { k } else { v };
            (bt.1 > 1 && n % bt.1 != 0).then_some((l, n))
        });
        if let Some((l, n)) = misfit {
            problems.push(format!(
                "{flag} {name}: layer {l} has {n} values per token, not a multiple of its block of {}",
                bt.1
            ));
        }
    }
    LayerKv {
        per_layer,
        swa_cells,
        has_swa: swa_window.is_some(),
        ubatch,
    }
}

/// The weights as llama.cpp places them: the output layer and each repeating layer (token
/// embeddings stay in host memory: the rest of `total`).
struct WeightParts {
    output: u64,
    per_layer: Vec<u64>,
    total: u64,
    /// With tied embeddings the GPU's output layer is a copy of the token embeddings, which
    /// stay in host memory as well: the copy's bytes (0 when the output layer is its own).
    tied_copy: u64,
}

fn weight_parts(req: &PlanRequest, assumptions: &mut Vec<String>) -> WeightParts {
    let arch = &req.arch;
    let layers = arch.num_layers.max(1) as usize;
    // 1. a GGUF file's own tensors: every tensor in its own ggml type
    if let Some(c) = req.checkpoint.as_ref().filter(|c| c.tensors > 0) {
        assumptions.push(format!(
            "weights: exact bytes of the file's {} tensors, each in its own ggml type; token \
             embeddings stay in host memory, -ngl moves whole layers, then the output layer",
            c.tensors
        ));
        let mut per_layer: Vec<u64> = c
            .layers
            .iter()
            .map(|l| l.split + l.kv + l.replicated)
            .collect();
        per_layer.resize(layers, 0);
        return WeightParts {
            // a tied output layer is the embeddings' copy
            output: if c.lm_head > 0 {
                c.lm_head
            } else {
                c.embedding
            } + c.other,
            per_layer,
            total: c.loaded_bytes(),
            tied_copy: if c.lm_head > 0 { 0 } else { c.embedding },
        };
    }
    // 2. a catalog model with a GGUF file type: llama-quantize's per-tensor types
    let ft = arch
        .quantization
        .as_ref()
        .and_then(|q| q.method.strip_prefix("gguf:"))
        .and_then(|m| m.split(':').next())
        .and_then(crate::gguf_quant::GgufFileType::parse);
    if let Some(ft) = ft {
        let g = crate::gguf_quant::size(arch, ft);
        let tied = g.output_bytes == 0;
        let output = if tied {
            g.embedding_bytes
        } else {
            g.output_bytes
        };
        assumptions.push(format!(
            "weights: {ft:?} as llama-quantize types each tensor (output {:.2} GiB, token \
             embeddings {:.2} GiB in their own types); token embeddings stay in host memory, \
             -ngl moves whole layers, then the output layer",
            output as f64 / GIB,
            g.embedding_bytes as f64 / GIB
        ));
        let mut per_layer = g.per_layer.clone();
        per_layer.resize(layers, 0);
        return WeightParts {
            output: output + g.non_layer_bytes - g.embedding_bytes - g.output_bytes,
            per_layer,
            total: g.total_bytes,
            tied_copy: if tied { g.embedding_bytes } else { 0 },
        };
    }
    // 3. the architecture formula, scaled to the checkpoint's bytes
    let weights = checkpoint_bytes(arch);
    let parts = weights_per_gpu(arch, arch.quantization.as_ref(), Shard::SINGLE);
    let modelled = (parts.total() - parts.rope_cache - parts.runtime).max(1);
    let scale = |b: u64| (u128::from(b) * u128::from(weights) / u128::from(modelled)) as u64;
    let per = scale(parts.attention + parts.mlp + parts.experts + parts.other) / layers as u64;
    assumptions.push(
        "weights: token embeddings stay in host memory; -ngl moves whole layers, then the \
         output layer (llama.cpp's placement; layer sizes from the architecture, scaled to the \
         checkpoint's bytes)"
            .into(),
    );
    let tied = parts.lm_head == 0;
    WeightParts {
        output: scale(if tied { parts.embedding } else { parts.lm_head }),
        per_layer: vec![per; layers],
        total: weights,
        tied_copy: if tied { scale(parts.embedding) } else { 0 },
    }
}

/// Compute buffer of one `n_ubatch` (an estimate: llama.cpp prints the real one).
fn compute_buffer(req: &PlanRequest, ubatch: u64, n_ctx_seq: u64, fa: &str) -> u64 {
    let arch = &req.arch;
    (ubatch * 4)
        .saturating_mul(arch.vocab_size)
        .saturating_add((ubatch * 16).saturating_mul(arch.hidden_size.max(arch.intermediate_size)))
        .saturating_add(if fa == "off" {
            (ubatch * 4)
                .saturating_mul(n_ctx_seq)
                .saturating_mul(u64::from(arch.num_attention_heads))
        } else {
            0
        })
}

/// Which GPU each offloaded layer goes to (llama.cpp `llama_model::load_tensors`,
/// `-sm layer`): with `n` layers offloaded, the last `n` repeating layers (and the output layer
/// when `n` exceeds them) are spread by the cumulative `--tensor-split` proportions, layer
/// `il` going to the first device whose cumulative share exceeds `(il − start) / n`. Returns,
/// per GPU, (weights, KV).
fn place(w: &WeightParts, kv: &[u64], n: u32, layers: u32, split: &[f64]) -> Vec<(u64, u64)> {
    let devices = split.len().max(1);
    let sum: f64 = split.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let mut cumulative = Vec::with_capacity(devices);
    let mut acc = 0.0;
    for x in split {
        acc += x / sum;
        cumulative.push(acc);
    }
    let mut out = vec![(0u64, 0u64); devices];
    let n = n.min(layers + 1);
    let start = layers.saturating_sub(n);
    let act = f64::from(n.max(1));
    let device_of = |il: u32| -> usize {
        let r = f64::from(il - start) / act;
        cumulative
            .iter()
            .position(|c| *c > r)
            .unwrap_or(devices - 1)
    };
    for il in start..layers {
        let d = device_of(il);
        if let Some(slot) = out.get_mut(d) {
            slot.0 = slot
                .0
                .saturating_add(w.per_layer.get(il as usize).copied().unwrap_or(0));
            slot.1 = slot
                .1
                .saturating_add(kv.get(il as usize).copied().unwrap_or(0));
        }
    }
    if n > layers {
        let d = device_of(layers);
        if let Some(slot) = out.get_mut(d) {
            slot.0 = slot.0.saturating_add(w.output);
        }
    }
    out
}

/// Each GPU's share of the layers: `-sm none` keeps everything on one; `layer` (default)
/// splits by `--tensor-split` (unset: by free memory, equal on equal GPUs); `row` is placed as
/// `layer` (not modelled).
fn tensor_split(req: &PlanRequest, assumptions: &mut Vec<String>) -> Vec<f64> {
    let s = &req.llama_cpp;
    let gpus = match s.split_mode.as_deref() {
        Some("none") => 1,
        _ => req.gpu.count.clamp(1, 128) as usize,
    };
    let split: Vec<f64> = match &s.tensor_split {
        Some(ts) => {
            let mut v: Vec<f64> = ts.iter().copied().take(gpus).collect();
            v.resize(gpus, 0.0);
            v
        }
        None => vec![1.0; gpus],
    };
    if gpus > 1 {
        assumptions.push(format!(
            "-sm layer over {gpus} GPUs, --tensor-split {} (unset: by free memory, equal on \
             equal GPUs); each GPU holds its layers' weights and KV, its compute buffer and a \
             CUDA context",
            split
                .iter()
                .map(|x| format!("{x}"))
                .collect::<Vec<_>>()
                .join(",")
        ));
        if s.split_mode.as_deref() == Some("row") {
            assumptions.push(
                "-sm row splits each matrix by rows: placed as -sm layer here (not modelled)"
                    .into(),
            );
        }
    }
    split
}

/// How many layers `-ngl` offloads; `auto` (default) is `--fit`: the most whose busiest GPU
/// keeps [`FIT_MARGIN_BYTES`] free.
fn offloaded_layers(
    ngl: Option<GpuLayers>,
    layers: u32,
    total: u64,
    busiest: &dyn Fn(u32) -> (u64, u64, u64),
    assumptions: &mut Vec<String>,
) -> u32 {
    match ngl {
        Some(GpuLayers::Count(n)) => n.min(layers + 1),
        Some(GpuLayers::Word(GpuLayersWord::All)) => layers + 1,
        None | Some(GpuLayers::Word(GpuLayersWord::Auto)) => {
            // The most layers that fit: the busiest GPU grows with n, so a binary search.
            let fits_with = |n: u32| busiest(n).2.saturating_add(FIT_MARGIN_BYTES) <= total;
            let (mut lo, mut hi) = (0u32, layers + 1);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if fits_with(mid) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            assumptions.push(format!(
                "-ngl auto: --fit offloads as many layers as fit with {} MiB free: {} of {}{}",
                FIT_MARGIN_BYTES >> 20,
                lo.min(layers),
                layers,
                if lo > layers {
                    " and the output layer"
                } else {
                    ""
                }
            ));
            lo
        }
    }
}

/// Plan a `llama-server` (see the module doc). Phases: [`context`], [`cache_types`],
/// [`layer_kv`], [`weight_parts`], [`compute_buffer`], [`tensor_split`], [`offloaded_layers`],
/// [`place`], then the plan; over 150 lines only because the `Plan` it assembles has ~40 fields.
pub fn plan(req: &PlanRequest) -> Plan {
    let arch = &req.arch;
    let s = &req.llama_cpp;
    let mut assumptions: Vec<String> = vec![format!(
        "llama.cpp accounting (the llama.cpp of llama-cpp-python 0.3.36, checked against its \
         llama-server logs{})",
        req.engine_version
            .as_deref()
            .map(|v| format!("; --engine-version {v} not modelled separately"))
            .unwrap_or_default()
    )];
    let mut problems: Vec<String> = Vec::new();
    let layers = arch.num_layers.max(1);

    let c = context(req, &mut assumptions);
    let t = cache_types(req, &mut assumptions, &mut problems);
    let mut kv = layer_kv(req, &c, &t, &mut assumptions, &mut problems);
    let sum = |it: &mut dyn Iterator<Item = u64>| it.fold(0u64, u64::saturating_add);
    let kv_total = sum(&mut kv.per_layer.iter().copied());
    // hybrid models: recurrent cells live with their layer (placed like its KV)
    let rs = recurrent_cells(arch, c.slots, &mut assumptions);
    for (p, r) in kv.per_layer.iter_mut().zip(&rs.per_layer) {
        *p = p.saturating_add(*r);
    }
    let w = weight_parts(req, &mut assumptions);
    let compute = compute_buffer(req, kv.ubatch, c.n_ctx_seq, &t.flash_attn);
    assumptions.push(format!(
        "compute buffer ≈ n_ubatch {} × (vocab × 4 B logits + activations){}: an estimate, \
         llama.cpp prints the real one at start-up",
        kv.ubatch,
        if t.flash_attn == "off" {
            " + the KQ matrix (flash attention off)"
        } else {
            ""
        }
    ));
    assumptions.push(format!(
        "CUDA context ≈ {} MiB per process and GPU (outside llama.cpp's own accounting)",
        CUDA_CONTEXT_BYTES >> 20
    ));

    let split = tensor_split(req, &mut assumptions);
    let total = req.gpu.total_bytes.min(1 << 50);
    let overhead = compute.saturating_add(CUDA_CONTEXT_BYTES);
    // the busiest GPU with `n` layers offloaded: (weights, KV, used)
    let busiest = |n: u32| -> (u64, u64, u64) {
        place(&w, &kv.per_layer, n, layers, &split)
            .into_iter()
            .map(|(wb, kb)| (wb, kb, wb.saturating_add(kb).saturating_add(overhead)))
            .max_by_key(|x| x.2)
            .unwrap_or((0, 0, overhead))
    };
    let gpu_layers = offloaded_layers(s.gpu_layers, layers, total, &busiest, &mut assumptions);
    let placed = place(&w, &kv.per_layer, gpu_layers, layers, &split);
    let gpus_used = placed.iter().filter(|(wb, _)| *wb > 0).count().max(1);
    let (w_gpu, kv_gpu, used) = busiest(gpu_layers);
    let w_all_gpus = sum(&mut placed.iter().map(|p| p.0));
    let kv_all_gpus = sum(&mut placed.iter().map(|p| p.1));
    let free_after = total as f64 - used as f64;
    if free_after < 0.0 {
        problems.push(format!(
            "weights {:.2} GiB + KV cache {:.2} + compute {:.2} + CUDA context {:.2} exceed the GPU's {:.2} GiB",
            w_gpu as f64 / GIB,
            kv_gpu as f64 / GIB,
            compute as f64 / GIB,
            CUDA_CONTEXT_BYTES as f64 / GIB,
            total as f64 / GIB
        ));
    }
    if gpu_layers < layers {
        assumptions.push(format!(
            "{} of {layers} layers run on the CPU: decode speed is bound by host memory bandwidth",
            layers - gpu_layers
        ));
    }

    let max_concurrency = if c.unified {
        (c.n_ctx as f64 / c.n_ctx_slot as f64).min(f64::from(c.slots))
    } else {
        f64::from(c.slots)
    };
    let fits = problems.is_empty();
    let meets = req
        .concurrency
        .map(|n| fits && max_concurrency >= f64::from(n));
    let kv_bytes_per_token = sum(&mut (0..layers as usize).map(|l| {
        let (k, v) = kv_elements(arch, l);
        row_bytes(t.k, k).saturating_add(row_bytes(t.v, v))
    }));
    // The GPU's copy of tied embeddings leaves the original in host memory.
    let copy_on_gpu = if gpu_layers > layers { w.tied_copy } else { 0 };
    let host = w
        .total
        .saturating_sub(w_all_gpus.saturating_sub(copy_on_gpu))
        + kv_total
            .saturating_add(rs.total)
            .saturating_sub(kv_all_gpus);
    Plan {
        fits,
        problems,
        per_gpu: PerGpu {
            total_gib: gib2(total as f64),
            gpu_total_gib: gib2(total as f64),
            weights_gib: gib2(w_gpu as f64),
            non_torch_gib: gib2(CUDA_CONTEXT_BYTES as f64),
            activation_gib: gib2(compute as f64),
            cuda_graph_gib: 0.0,
            kv_cache_gib: gib2(kv_gpu as f64),
            free_after_kv_gib: gib2(free_after),
        },
        kv_cache_tokens: c.n_ctx,
        max_concurrency: (max_concurrency * 100.0).round() / 100.0,
        concurrency: req.concurrency,
        meets_concurrency: meets,
        max_model_len: Some(c.n_ctx_slot),
        tensor_parallel_size: Some(1),
        pipeline_parallel_size: 1,
        gpus_used: gpus_used as u32,
        weights_bytes_total: Some(w.total),
        weights_bytes_per_gpu: w_gpu,
        gpus: Vec::new(),
        numa_nodes: Vec::new(),
        kv_bytes_per_token,
        state_bytes_per_sequence: rs.per_sequence,
        // llama.cpp's recurrent cells are reported in its own KV figures
        state_pool_bytes: None,
        blocks: 0,
        block_size: 1,
        kv_cache_groups: 1 + u32::from(kv.has_swa),
        kv_cache_dtype: nearest_dtype(&t.name_k),
        model: req.model_name.clone(),
        gpu: req.gpu.name.clone(),
        engine: EngineInfo {
            name: req.engine,
            version: req
                .engine_version
                .clone()
                .unwrap_or_else(|| "llama-cpp-python 0.3.36".into()),
            v1: false,
        },
        assumptions,
        accounting: Some(crate::rules::Accounting::Modelled),
        engine_rules: Some(crate::rules::EngineRules {
            engine: "llama.cpp".into(),
            requested_version: req.engine_version.clone(),
            rules_of: "llama.cpp vendored in llama-cpp-python 0.3.36".into(),
            note: None,
            accounting: crate::rules::Accounting::Modelled,
            rules: vec![crate::rules::Rule {
                rule: "kv_cache".into(),
                value: "n_ctx cells per stream, no share of free memory".into(),
                source: "llama-cpp-python 0.3.36 vendor/llama.cpp src/llama-context.cpp, src/llama-kv-cache.cpp, tools/server/server.cpp".into(),
            }],
        }),
        llama_cpp: Some(LlamaCppPlan {
            n_ctx: c.n_ctx,
            n_ctx_seq: c.n_ctx_seq,
            n_ctx_slot: c.n_ctx_slot,
            slots: c.slots,
            kv_unified: c.unified,
            cache_type_k: t.name_k,
            cache_type_v: t.name_v,
            swa_cells: kv.swa_cells,
            gpu_layers: gpu_layers.min(layers),
            layers,
            kv_cache_mib: (kv_total as f64 / (1u64 << 20) as f64 * 100.0).round() / 100.0,
            host_gib: gib2(host as f64),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::lookup;
    use crate::engine::Engine;
    use crate::plan::GpuSpec;

    fn request(model: &str, gib: u64) -> PlanRequest {
        let mut r = PlanRequest::new(
            lookup(model).unwrap(),
            model,
            GpuSpec {
                name: "test".into(),
                total_bytes: gib << 30,
                count: 1,
            },
        );
        r.engine = Engine::LlamaCpp;
        r
    }

    #[test]
    fn ggml_block_sizes_are_llama_cpps() {
        // ggml_row_size for 128 values of each type llama-server's -ctk accepts.
        for (t, bytes) in [
            ("f32", 512),
            ("f16", 256),
            ("bf16", 256),
            ("q8_0", 136),
            ("q4_0", 72),
            ("q4_1", 80),
            ("iq4_nl", 72),
            ("q5_0", 88),
            ("q5_1", 96),
        ] {
            assert_eq!(row_bytes(ggml_type(t).unwrap(), 128), bytes, "{t}");
        }
        assert_eq!(ggml_type("fp8"), None);
        assert_eq!(pad256(1000), 1024);
        assert_eq!(pad256(2048), 2048);
    }

    #[test]
    fn tied_embeddings_stay_in_host_memory_when_the_output_copy_is_offloaded() {
        // Qwen2.5-0.5B ties its output layer to the token embeddings (151936 × 896 bf16 =
        // 0.25 GiB): with every layer and the output on the GPU, the original embeddings
        // still live in host memory.
        let mut r = request("Qwen/Qwen2.5-0.5B-Instruct", 24);
        r.llama_cpp.gpu_layers = Some(GpuLayers::Count(999));
        let p = plan(&r);
        let l = p.llama_cpp.unwrap();
        assert_eq!(l.gpu_layers, l.layers, "{l:?}");
        let embeddings_gib = 151_936.0 * 896.0 * 2.0 / GIB;
        assert!(
            (l.host_gib - embeddings_gib).abs() < 0.02,
            "host {} GiB vs embeddings {embeddings_gib:.3} GiB",
            l.host_gib
        );
    }

    #[test]
    fn llama_3_8b_gqa_kv_at_32k() {
        // 32 layers × 8 KV heads × 128 × (K + V) × 2 bytes = 128 KiB per token; 32768 cells.
        let mut r = request("meta-llama/Llama-3.1-8B-Instruct", 24);
        r.max_model_len = Some(32768);
        r.max_num_seqs = Some(1);
        let p = plan(&r);
        let l = p.llama_cpp.unwrap();
        assert_eq!(p.kv_bytes_per_token, 131_072);
        assert_eq!(l.kv_cache_mib, 4096.0);
        assert_eq!((l.n_ctx, l.n_ctx_slot, l.slots), (32768, 32768, 1));
        // q8_0 K and V: 34/32 of a byte per value.
        r.kv_cache_dtype = Some("q8_0".into());
        r.llama_cpp.cache_type_v = Some("q8_0".into());
        let l = plan(&r).llama_cpp.unwrap();
        assert_eq!(l.kv_cache_mib, 2176.0);
    }

    #[test]
    fn sliding_window_layers_keep_window_plus_ubatch_cells() {
        // Gemma 3 27B: 62 layers, 5 of every 6 sliding (window 1024).
        let mut r = request("google/gemma-3-27b-it", 80);
        r.max_model_len = Some(32768);
        r.max_num_seqs = Some(4);
        let l = plan(&r).llama_cpp.unwrap();
        // 4 streams of 8192 cells; each sliding layer keeps pad256(1024 + 512) = 1536 per stream.
        assert_eq!((l.n_ctx_seq, l.swa_cells), (8192, Some(1536)));
        // Unified: one stream, window × 4 slots + 512.
        r.llama_cpp.kv_unified = Some(true);
        let l = plan(&r).llama_cpp.unwrap();
        assert_eq!(l.swa_cells, Some(4608));
        r.llama_cpp.swa_full = true;
        assert_eq!(plan(&r).llama_cpp.unwrap().swa_cells, Some(32768));
    }

    #[test]
    fn batch_size_caps_the_ubatch_and_suggestions_search_the_total_context() {
        // -b 256 below -ub 512: llama.cpp uses 256 for the sliding-window margin.
        let mut r = request("google/gemma-3-27b-it", 80);
        r.max_model_len = Some(32768);
        r.max_num_seqs = Some(4);
        r.max_num_batched_tokens = Some(256);
        assert_eq!(plan(&r).llama_cpp.unwrap().swa_cells, Some(1280));
        // -c 131072 -np 4 on 24 GiB does not fit; the suggested -c is a total over 4 slots,
        // so it may exceed one slot's 32768 tokens.
        let mut r = request("meta-llama/Llama-3.1-8B-Instruct", 24);
        r.max_model_len = Some(131072);
        r.max_num_seqs = Some(4);
        r.llama_cpp.gpu_layers = Some(GpuLayers::Word(GpuLayersWord::All));
        assert!(!plan(&r).fits);
        let s = crate::suggest::suggest(&r, &[]);
        let c = s
            .iter()
            .find_map(|x| x.change.strip_prefix("-c "))
            .and_then(|c| c.parse::<u64>().ok())
            .unwrap();
        assert!(c > 32768, "suggested -c {c}");
        r.max_model_len = Some(c);
        assert!(plan(&r).fits);
        r.max_model_len = Some(c + 512);
        assert!(!plan(&r).fits, "-c {c} is not the largest that fits");
    }

    #[test]
    fn mla_caches_only_the_latent() {
        // DeepSeek-V3: 61 layers × (512 + 64) f16 values in K, no V.
        let r = request("deepseek-ai/DeepSeek-V3", 80);
        let p = plan(&r);
        assert_eq!(p.kv_bytes_per_token, 61 * 576 * 2);
        assert!(p.assumptions.iter().any(|a| a.contains("no V cache")));
    }

    #[test]
    fn auto_offload_keeps_a_gigabyte_free_and_partial_offload_moves_the_rest_to_the_host() {
        // Llama 3.1 70B in bf16 (~131 GiB) on a 24 GiB GPU: some layers only.
        let mut r = request("meta-llama/Llama-3.1-70B-Instruct", 24);
        r.max_model_len = Some(8192);
        r.max_num_seqs = Some(1);
        let p = plan(&r);
        let l = p.llama_cpp.clone().unwrap();
        assert!(l.gpu_layers > 0 && l.gpu_layers < l.layers, "{l:?}");
        assert!(p.fits);
        assert!(p.per_gpu.free_after_kv_gib >= 1.0, "{:?}", p.per_gpu);
        assert!(l.host_gib > 100.0, "{l:?}");
        // All layers asked for: does not fit, and says so.
        r.llama_cpp.gpu_layers = Some(GpuLayers::Word(GpuLayersWord::All));
        let p = plan(&r);
        assert!(!p.fits);
        assert!(p.problems[0].contains("exceed the GPU"), "{:?}", p.problems);
    }

    #[test]
    fn unknown_cache_types_and_unaligned_heads_are_problems() {
        let mut r = request("meta-llama/Llama-3.1-8B-Instruct", 24);
        r.kv_cache_dtype = Some("fp8".into());
        let p = plan(&r);
        assert!(
            p.problems.iter().any(|x| x.contains("-ctk fp8")),
            "{:?}",
            p.problems
        );
        // A layer whose K row (1 head of 20 values) is not whole q4_0 blocks of 32.
        let mut r = request("meta-llama/Llama-3.1-8B-Instruct", 24);
        r.arch.layers[3].kv_heads = 1;
        r.arch.layers[3].head_dim = 20;
        r.kv_cache_dtype = Some("q4_0".into());
        let p = plan(&r);
        assert_eq!(
            p.problems,
            ["-ctk q4_0: layer 3 has 20 values per token, not a multiple of its block of 32"]
        );
        r.kv_cache_dtype = Some("f16".into());
        assert!(plan(&r).problems.is_empty());
        assert_eq!(
            GpuLayers::parse("all"),
            Some(GpuLayers::Word(GpuLayersWord::All))
        );
        assert_eq!(
            GpuLayers::parse("-1"),
            Some(GpuLayers::Word(GpuLayersWord::Auto))
        );
        assert_eq!(GpuLayers::parse("33"), Some(GpuLayers::Count(33)));
        assert_eq!(GpuLayers::parse("many"), None);
    }

    #[test]
    fn gguf_file_types_place_each_tensor_in_its_own_type() {
        // Meta-Llama-3-70B Q4_K_M: llama-bench printed 39.59 GiB for the real file
        // (fixtures/speed/cases.jsonl). All layers and the output (Q6_K) on the GPU; only
        // token_embd (Q4_K, 128256 × 8192 × 144/256 B = 0.55 GiB) stays on the host. The old
        // scaling charged the embeddings in bf16 and shrank every layer by 3.5 %.
        let a = lookup("meta-llama/Meta-Llama-3-70B-Instruct").unwrap();
        let (q, g) = crate::gguf_quant::apply(&a, crate::gguf_quant::GgufFileType::Q4_K_M);
        let mut r = request("meta-llama/Meta-Llama-3-70B-Instruct", 80);
        r.arch = q;
        r.max_model_len = Some(8192);
        r.max_num_seqs = Some(1);
        r.llama_cpp.gpu_layers = Some(GpuLayers::Word(GpuLayersWord::All));
        let p = plan(&r);
        let gib = |b: u64| b as f64 / GIB;
        assert_eq!(p.weights_bytes_per_gpu, g.total_bytes - g.embedding_bytes);
        assert!((gib(g.embedding_bytes) - 0.55).abs() < 0.01);
        assert!((gib(p.weights_bytes_per_gpu) - 39.04).abs() < 0.2, "{p:?}");
        assert!(p.assumptions.iter().any(|x| x.contains("own types")));
    }

    #[test]
    fn layers_split_over_gpus_by_tensor_split() {
        // Two GPUs, -sm layer: 80 layers + output; equal split by default, 3:1 with -ts 3,1.
        let a = lookup("meta-llama/Meta-Llama-3-70B-Instruct").unwrap();
        let (q, g) = crate::gguf_quant::apply(&a, crate::gguf_quant::GgufFileType::Q4_K_M);
        let mut r = request("meta-llama/Meta-Llama-3-70B-Instruct", 24);
        r.arch = q;
        r.gpu.count = 2;
        r.max_model_len = Some(4096);
        r.max_num_seqs = Some(1);
        r.llama_cpp.gpu_layers = Some(GpuLayers::Word(GpuLayersWord::All));
        let p = plan(&r);
        assert_eq!(p.gpus_used, 2);
        let on_gpus = g.total_bytes - g.embedding_bytes;
        // the busier GPU holds about half (the output layer tips it)
        let half = p.weights_bytes_per_gpu as f64 / on_gpus as f64;
        assert!(half > 0.5 && half < 0.53, "{half}");
        // 39 GiB over two 24 GiB cards fits; on one it does not
        assert!(p.fits, "{:?}", p.problems);
        r.llama_cpp.split_mode = Some("none".into());
        assert!(!plan(&r).fits);
        r.llama_cpp.split_mode = None;
        r.llama_cpp.tensor_split = Some(vec![3.0, 1.0]);
        let p = plan(&r);
        let share = p.weights_bytes_per_gpu as f64 / on_gpus as f64;
        assert!(share > 0.74 && share < 0.77, "{share}");
        assert!(!p.fits);
        // placement unit: 4 layers of 10, output 5, 3:1 → layers 0..3 on GPU 0 with n = 5
        let w = WeightParts {
            output: 5,
            per_layer: vec![10; 4],
            total: 50,
            tied_copy: 0,
        };
        assert_eq!(place(&w, &[1; 4], 5, 4, &[3.0, 1.0]), vec![(40, 4), (5, 0)]);
        assert_eq!(
            place(&w, &[1; 4], 2, 4, &[1.0, 1.0]),
            vec![(10, 1), (10, 1)]
        );
    }
}
