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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// Plan a `llama-server` (see the module doc).
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
    let n_ctx_train = arch.max_position_embeddings.max(1);

    // ---- slots and context ----
    let np_auto = req.max_num_seqs.is_none();
    let slots = req.max_num_seqs.unwrap_or(4).clamp(1, 4096);
    // With -np auto the server forces a unified pool, whatever -kvu/-no-kvu says.
    let unified = np_auto || s.kv_unified.unwrap_or(false);
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
    let n_ctx_slot = n_ctx_seq.min(n_ctx_train);
    if n_ctx_seq > n_ctx_train {
        assumptions.push(format!(
            "a slot's context {n_ctx_seq} exceeds the training context {n_ctx_train}: llama-server caps it at {n_ctx_train}"
        ));
    }

    // ---- cache types ----
    let type_k = req
        .kv_cache_dtype
        .as_deref()
        .filter(|t| *t != "auto")
        .unwrap_or("f16")
        .to_ascii_lowercase();
    let type_v = s
        .cache_type_v
        .as_deref()
        .unwrap_or("f16")
        .to_ascii_lowercase();
    let mut k_type = ggml_type(&type_k);
    let mut v_type = ggml_type(&type_v);
    for (flag, name, t) in [
        ("-ctk", &type_k, &mut k_type),
        ("-ctv", &type_v, &mut v_type),
    ] {
        if t.is_none() {
            problems.push(format!(
                "{flag} {name}: llama.cpp accepts f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"
            ));
            *t = ggml_type("f16");
        }
    }
    let (k_type, v_type) = (k_type.unwrap_or((2, 1)), v_type.unwrap_or((2, 1)));
    let fa = s.flash_attn.as_deref().unwrap_or("auto");
    if v_type.1 > 1 && arch.mla.is_none() {
        if fa == "off" {
            problems.push(format!(
                "-ctv {type_v} needs flash attention, but -fa is off (llama.cpp refuses a quantized V cache without it)"
            ));
        } else if fa != "on" {
            assumptions.push(format!(
                "-ctv {type_v} needs flash attention: -fa auto must enable it on this GPU"
            ));
        }
    }

    // ---- KV cells per layer ----
    // llama.cpp: n_ubatch = min(-b, -ub), defaults 2048 and 512.
    let ubatch = s
        .ubatch_size
        .unwrap_or(512)
        .min(req.max_num_batched_tokens.unwrap_or(2048))
        .clamp(1, 1 << 20);
    let kv_size = if unified { n_ctx } else { n_ctx_seq };
    let swa_window = arch.layers.iter().find_map(|l| match l.kind {
        AttentionKind::Sliding(w) | AttentionKind::ChunkedLocal(w) => Some(u64::from(w)),
        _ => None,
    });
    let swa_cells = swa_window.map(|w| {
        if s.swa_full {
            kv_size
        } else {
            let per = w.saturating_mul(if unified { u64::from(slots) } else { 1 });
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
    if arch.layers.iter().any(|l| l.kind == AttentionKind::NoKv) {
        assumptions.push("recurrent (no-KV) layers: their state memory is not modelled".into());
    }
    let layer_kv_bytes: Vec<u64> = (0..layers as usize)
        .map(|l| {
            let (k, v) = kv_elements(arch, l);
            let cells = match arch.layers.get(l).map(|a| a.kind) {
                Some(AttentionKind::Sliding(_) | AttentionKind::ChunkedLocal(_)) => {
                    swa_cells.unwrap_or(kv_size)
                }
                _ => kv_size,
            };
            cells
                .saturating_mul(streams)
                .saturating_mul(row_bytes(k_type, k).saturating_add(row_bytes(v_type, v)))
        })
        .collect();
    // A block-quantized row must hold whole blocks, in every layer.
    for (flag, name, t, k_or_v) in [("-ctk", &type_k, k_type, 0), ("-ctv", &type_v, v_type, 1)] {
        let misfit = (0..layers as usize).find_map(|l| {
            let (k, v) = kv_elements(arch, l);
            let n = if k_or_v == 0 { k } else { v };
            (t.1 > 1 && n % t.1 != 0).then_some((l, n))
        });
        if let Some((l, n)) = misfit {
            problems.push(format!(
                "{flag} {name}: layer {l} has {n} values per token, not a multiple of its block of {}",
                t.1
            ));
        }
    }
    let sum = |it: &mut dyn Iterator<Item = u64>| it.fold(0u64, u64::saturating_add);
    let kv_total = sum(&mut layer_kv_bytes.iter().copied());

    // ---- weights: token embeddings stay in host memory; -ngl moves the repeating layers,
    // then the output layer (a copy of the embeddings when they are tied), to the GPU ----
    let weights = checkpoint_bytes(arch);
    let parts = weights_per_gpu(arch, arch.quantization.as_ref(), Shard::SINGLE);
    let modelled = (parts.total() - parts.rope_cache - parts.runtime).max(1);
    // Scale the modelled parts to the exact file bytes (GGUF quant mixes differ per tensor).
    let scale = |b: u64| (u128::from(b) * u128::from(weights) / u128::from(modelled)) as u64;
    let embd = scale(parts.embedding);
    let output = scale(if parts.lm_head > 0 {
        parts.lm_head
    } else {
        parts.embedding
    });
    let per_layer =
        scale(parts.attention + parts.mlp + parts.experts + parts.other) / u64::from(layers);
    assumptions.push(
        "weights: token embeddings stay in host memory; -ngl moves whole layers, then the \
         output layer (llama.cpp's placement; layer sizes from the architecture, scaled to the \
         file's bytes)"
            .into(),
    );

    // ---- compute buffer and context (estimates) ----
    let compute = (ubatch * 4)
        .saturating_mul(arch.vocab_size)
        .saturating_add((ubatch * 16).saturating_mul(arch.hidden_size.max(arch.intermediate_size)))
        .saturating_add(if fa == "off" {
            (ubatch * 4)
                .saturating_mul(n_ctx_seq)
                .saturating_mul(u64::from(arch.num_attention_heads))
        } else {
            0
        });
    assumptions.push(format!(
        "compute buffer ≈ n_ubatch {ubatch} × (vocab × 4 B logits + activations){}: an estimate, \
         llama.cpp prints the real one at start-up",
        if fa == "off" {
            " + the KQ matrix (flash attention off)"
        } else {
            ""
        }
    ));
    assumptions.push(format!(
        "CUDA context ≈ {} MiB per process (outside llama.cpp's own accounting)",
        CUDA_CONTEXT_BYTES >> 20
    ));

    let total = req.gpu.total_bytes.min(1 << 50);
    let on_gpu = |n: u32| -> (u64, u64) {
        let n = n.min(layers + 1);
        let w = per_layer
            .saturating_mul(u64::from(n.min(layers)))
            .saturating_add(if n > layers { output } else { 0 });
        let kv = sum(&mut layer_kv_bytes
            .iter()
            .copied()
            .skip((layers - n.min(layers)) as usize));
        (w, kv)
    };
    let need = |n: u32| {
        let (w, kv) = on_gpu(n);
        w.saturating_add(kv)
            .saturating_add(compute)
            .saturating_add(CUDA_CONTEXT_BYTES)
    };
    let gpu_layers = match s.gpu_layers {
        Some(GpuLayers::Count(n)) => n.min(layers + 1),
        Some(GpuLayers::Word(GpuLayersWord::All)) => layers + 1,
        None | Some(GpuLayers::Word(GpuLayersWord::Auto)) => {
            // The most layers that fit: `need` grows with n, so a binary search.
            let fits_with = |n: u32| need(n).saturating_add(FIT_MARGIN_BYTES) <= total;
            let (mut lo, mut hi) = (0u32, layers + 1);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if fits_with(mid) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            let fit = lo;
            assumptions.push(format!(
                "-ngl auto: --fit offloads as many layers as fit with {} MiB free: {} of {}{}",
                FIT_MARGIN_BYTES >> 20,
                fit.min(layers),
                layers,
                if fit > layers {
                    " and the output layer"
                } else {
                    ""
                }
            ));
            fit
        }
    };
    assumptions.push(
        "one GPU holds every offloaded layer (llama.cpp can split layers over several with \
         -sm layer; not modelled)"
            .into(),
    );
    let (w_gpu, kv_gpu) = on_gpu(gpu_layers);
    let used = need(gpu_layers);
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

    let max_concurrency = if unified {
        (n_ctx as f64 / n_ctx_slot as f64).min(f64::from(slots))
    } else {
        f64::from(slots)
    };
    let fits = problems.is_empty();
    let meets = req
        .concurrency
        .map(|c| fits && max_concurrency >= f64::from(c));
    let kv_bytes_per_token = sum(&mut (0..layers as usize).map(|l| {
        let (k, v) = kv_elements(arch, l);
        row_bytes(k_type, k).saturating_add(row_bytes(v_type, v))
    }));
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
        kv_cache_tokens: n_ctx,
        max_concurrency: (max_concurrency * 100.0).round() / 100.0,
        concurrency: req.concurrency,
        meets_concurrency: meets,
        max_model_len: Some(n_ctx_slot),
        tensor_parallel_size: Some(1),
        pipeline_parallel_size: 1,
        gpus_used: 1,
        weights_bytes_total: Some(weights),
        weights_bytes_per_gpu: w_gpu,
        gpus: Vec::new(),
        numa_nodes: Vec::new(),
        kv_bytes_per_token,
        blocks: 0,
        block_size: 1,
        kv_cache_groups: 1 + u32::from(swa_window.is_some()),
        kv_cache_dtype: nearest_dtype(&type_k),
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
            n_ctx,
            n_ctx_seq,
            n_ctx_slot,
            slots,
            kv_unified: unified,
            cache_type_k: type_k,
            cache_type_v: type_v,
            swa_cells,
            gpu_layers: gpu_layers.min(layers),
            layers,
            kv_cache_mib: (kv_total as f64 / (1u64 << 20) as f64 * 100.0).round() / 100.0,
            host_gib: gib2(
                embd as f64
                    + per_layer as f64 * f64::from(layers - gpu_layers.min(layers))
                    + if gpu_layers > layers {
                        0.0
                    } else {
                        output as f64
                    }
                    + kv_total.saturating_sub(kv_gpu) as f64,
            ),
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
}
