//! Diagnose a parsed OOM message: why did the allocation fail, and what would fix it.
//!
//! The rules, in order (the first that applies wins; docs/mem.md gives their sources):
//!
//! 1. **not_enough_information**: a framework wrapper with no allocator figures (TGI's
//!    `Not enough memory to handle N prefill tokens`), or no request size / free figure.
//! 2. **memory_fraction_limit**: an `S allowed;` clause (set by
//!    `torch.cuda.set_per_process_memory_fraction`, or vLLM's `gpu_memory_utilization` on some
//!    versions) and this process's reserved memory plus the request is above it, while the device
//!    still had the request free.
//! 3. **fragmentation**: the reserved-but-unallocated pool is *material*: at least the request
//!    and at least [`MATERIAL_POOL_SHARE`] of the card (1 GiB when the capacity is not printed);
//!    or the device reports at least the request free yet the allocation failed (the free memory
//!    is not usable as one block of that size). A pool that merely covers the request but is a
//!    sliver of the card is not where the memory went (issue 17: 95 MiB beside another process's
//!    92 %, 113 MiB beside 93 % live tensors); it is named second, as a minor cause.
//! 4. **other_processes**: memory on the device not held by this process (`Process P has`
//!    clauses, or total − free − this process) would cover the shortfall and is at least 1 GiB.
//! 5. **exhaustion**: this process holds the memory (live tensors); the request does not fit.
//!
//! Every case also weighs the causes by the memory each accounts for ([`CauseWeight`]: other
//! processes, live tensors, the reserved-unallocated pool, as shares of the capacity, the pool
//! also as a share of the request); the largest cause other than the verdict is `minor_cause`.

use inferscope_formats::oom::{AllocHint, Backend, OomReport, OomStyle, ProcessUsage, Wrapper};
use serde::Serialize;

const GIB: u64 = 1 << 30;

/// Share of the card the reserved-unallocated pool must reach before fragmentation is the
/// diagnosis. 5 % is one step of the knob users turn (`--gpu-memory-utilization` and the rooms'
/// memory-fraction flags, `Knob::MemoryFraction`, move in 0.05 steps): a smaller pool, even if it covers the request,
/// is not what decides whether the workload fits, and `expandable_segments` would win back at
/// most that much (docs/mem.md).
pub const MATERIAL_POOL_SHARE: f64 = 0.05;

/// Most memory outside PyTorch's allocator that is taken to be the failing process's own (CUDA
/// context, cuBLAS/cuDNN workspaces, NCCL buffers: typically 0.3–1.5 GiB) when the message does
/// not separate it from other processes' (PyTorch < 2.1's parenthesised message).
pub const SELF_NON_TORCH_MAX: u64 = 3 * GIB / 2;

/// What the driver is asked for when PyTorch's caching allocator serves a request of `req`
/// bytes from a new segment (c10/cuda/CUDACachingAllocator.cpp `get_allocation_size`: up to
/// 1 MiB from a 2 MiB segment, up to 10 MiB from a 20 MiB segment, larger requests rounded up
/// to 2 MiB), plus one 2 MiB page the driver maps memory in: free memory below this is not
/// enough, whatever it says beside the request.
pub fn driver_ask(req: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let seg = if req <= MIB {
        2 * MIB
    } else if req < 10 * MIB {
        20 * MIB
    } else {
        req.div_ceil(2 * MIB).saturating_mul(2 * MIB)
    };
    seg.saturating_add(2 * MIB)
}

/// Below this share of the card a cause is not mentioned as the minor one.
pub const MINOR_CAUSE_SHARE: f64 = 0.005;

/// One cause, weighed by the memory it accounts for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CauseWeight {
    /// `other_processes`, `live_tensors` or `reserved_unallocated`.
    pub cause: &'static str,
    /// Bytes it accounts for (null: the message does not say).
    pub bytes: Option<u64>,
    /// `bytes` / total capacity (null when either is unknown).
    pub share_of_capacity: Option<f64>,
    /// `bytes` / requested (only for `reserved_unallocated`: does the pool cover the request).
    pub share_of_request: Option<f64>,
}

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Diagnosis {
    /// Reserved-but-unallocated memory (or device free memory) ≥ the request.
    Fragmentation,
    /// This process uses the memory; nothing to reclaim.
    Exhaustion,
    /// Other processes hold the memory that is missing.
    OtherProcesses,
    /// A per-process memory fraction limit was hit.
    MemoryFractionLimit,
    /// The message does not carry the figures needed.
    NotEnoughInformation,
}

impl Diagnosis {
    /// Stable name (`fragmentation`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Diagnosis::Fragmentation => "fragmentation",
            Diagnosis::Exhaustion => "exhaustion",
            Diagnosis::OtherProcesses => "other_processes",
            Diagnosis::MemoryFractionLimit => "memory_fraction_limit",
            Diagnosis::NotEnoughInformation => "not_enough_information",
        }
    }
}

/// One remedy that applies to this case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Remedy {
    /// Stable id (`expandable_segments`, `lower_gpu_memory_utilization`, ...).
    pub id: &'static str,
    /// What to do, with the exact setting.
    pub action: String,
}

/// A `{pid, bytes}` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcessBytes {
    /// Pid as reported.
    pub pid: u32,
    /// Memory in use.
    pub bytes: u64,
}

/// The parsed figures and the diagnosis, as `mem oom --json` prints them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomAnalysis {
    /// `cuda` / `hip` / null.
    pub backend: Option<&'static str>,
    /// `parenthesised` (PyTorch ≤ 2.0), `sentences` (≥ 2.1) or `wrapper`.
    pub style: Option<&'static str>,
    /// Device index as the failing process numbered it.
    pub device: Option<u32>,
    /// Total capacity.
    pub total_bytes: Option<u64>,
    /// Tried to allocate.
    pub requested_bytes: Option<u64>,
    /// Free on the device.
    pub free_bytes: Option<u64>,
    /// Allocated by PyTorch (including private pools).
    pub allocated_bytes: Option<u64>,
    /// Reserved by PyTorch in total (stated, or allocated + reserved-unallocated).
    pub reserved_bytes: Option<u64>,
    /// Reserved by PyTorch but unallocated (stated, or reserved − allocated).
    pub reserved_unallocated_bytes: Option<u64>,
    /// In private pools (CUDA Graphs).
    pub private_pools_bytes: Option<u64>,
    /// Per-process limit (`allowed`).
    pub allowed_bytes: Option<u64>,
    /// This process's memory in use (PyTorch + non-PyTorch).
    pub process_in_use_bytes: Option<u64>,
    /// `Process P has S memory in use` clauses, as reported.
    pub other_processes: Vec<ProcessBytes>,
    /// Device memory not accounted for by this process's PyTorch allocator
    /// (total − free − reserved, or total − free − this process's use when stated).
    pub not_this_process_bytes: Option<u64>,
    /// Framework wrapper (`tgi_prefill_tokens`, `vllm_no_cache_blocks`).
    pub wrapper: Option<String>,
    /// Prefill tokens in TGI's wrapper.
    pub wrapper_tokens: Option<u64>,
    /// Allocator hint printed (`max_split_size_mb` / `expandable_segments`).
    pub hint: Option<&'static str>,
    /// Allocator configuration variable named in the message.
    pub alloc_conf_var: Option<String>,
    /// Who printed it.
    pub context: Vec<String>,
    /// OOM messages in the input.
    pub messages_found: usize,
    /// The verdict.
    pub diagnosis: Diagnosis,
    /// Causes weighed by the memory each accounts for, largest share first.
    pub causes: Vec<CauseWeight>,
    /// The largest cause other than the verdict's that holds at least 0.5 % of the card (or, for
    /// the reserved-unallocated pool, covers the request).
    pub minor_cause: Option<&'static str>,
    /// The start-up phase the message or its pasted context names (`profile_run`,
    /// `sampler_warmup`, `kv_cache_allocation`, `graph_capture`, `warmup`, `weight_loading`).
    pub phase: Option<&'static str>,
    /// The phrase that named it.
    pub phase_evidence: Option<&'static str>,
    /// The term that grew in that phase and what it scales with.
    pub phase_term: Option<String>,
    /// Why, in one or two sentences with the numbers.
    pub explanation: String,
    /// What would help, most specific first.
    pub remedies: Vec<Remedy>,
    /// Oddities in the message.
    pub notes: Vec<String>,
}

fn gib(b: u64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b < 1 << 10 {
        format!("{b} bytes")
    } else if b < 1 << 20 {
        format!("{:.2} KiB", b as f64 / 1024.0)
    } else {
        format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

fn remedy(id: &'static str, action: impl Into<String>) -> Remedy {
    Remedy {
        id,
        action: action.into(),
    }
}

/// The allocator variable a fix should set, for this backend and era.
fn conf_var(r: &OomReport) -> String {
    match (&r.alloc_conf_var, r.backend) {
        (Some(v), _) => v.clone(),
        (None, Some(Backend::Hip)) => "PYTORCH_HIP_ALLOC_CONF".into(),
        (None, _) => "PYTORCH_CUDA_ALLOC_CONF".into(),
    }
}

fn serving_remedies(out: &mut Vec<Remedy>) {
    out.push(remedy(
        "reduce_kv_demand",
        "serve less context at once: lower vLLM --max-model-len, --max-num-batched-tokens or \
         --max-num-seqs (TGI: --max-batch-prefill-tokens / --max-total-tokens)",
    ));
    out.push(remedy(
        "fp8_kv_cache",
        "halve the KV cache: vLLM --kv-cache-dtype fp8 (Hopper/Ada and newer; check accuracy)",
    ));
    out.push(remedy(
        "more_gpus_or_smaller_weights",
        "spread the model: --tensor-parallel-size N, or a quantized checkpoint (FP8/AWQ/GPTQ)",
    ));
}

/// Diagnose one parsed message: derive the figures the message implies, pick the verdict by
/// the first rule that holds, then weigh the causes and name a minor one.
pub fn diagnose(r: &OomReport) -> OomAnalysis {
    let mut notes = r.notes.clone();
    let f = Figures::derive(r, &mut notes);
    let mut remedies = Vec::new();
    let (diagnosis, explanation) = verdict(r, &f, &mut remedies);
    let causes = causes(r, &f);
    let (minor_cause, explanation) = minor_cause(diagnosis, &causes, explanation);
    let (wrapper, wrapper_tokens) = match &r.wrapper {
        Some(Wrapper::TgiPrefillTokens { tokens }) => {
            (Some("tgi_prefill_tokens".to_string()), Some(*tokens))
        }
        Some(Wrapper::VllmNoCacheBlocks) => (Some("vllm_no_cache_blocks".to_string()), None),
        Some(Wrapper::VllmSamplerWarmup { requests }) => {
            (Some("vllm_sampler_warmup".to_string()), *requests)
        }
        Some(Wrapper::DriverError) => (Some("driver_error".to_string()), None),
        None => (None, None),
    };
    // The phase's own remedies go first: they name the knob of the term that grew.
    let (phase_term, explanation) = match &r.phase {
        Some(hit) => {
            let (term, first) = crate::oom_phase::remedies(hit);
            // The phase's wording of a remedy replaces the generic one with the same id.
            remedies.retain(|x: &Remedy| !first.iter().any(|p| p.id == x.id));
            remedies.splice(0..0, first);
            (
                Some(term),
                format!(
                    "during {} (\"{}\" in the text): {explanation}",
                    crate::oom_phase::describe(hit.phase),
                    hit.evidence
                ),
            )
        }
        None => (None, explanation),
    };
    OomAnalysis {
        backend: r.backend.map(Backend::as_str),
        style: r.style.map(OomStyle::as_str),
        device: r.device,
        total_bytes: r.total_bytes,
        requested_bytes: r.requested_bytes,
        free_bytes: r.free_bytes,
        allocated_bytes: r.allocated_bytes,
        reserved_bytes: f.reserved,
        reserved_unallocated_bytes: f.reserved_unallocated,
        private_pools_bytes: r.private_pools_bytes,
        allowed_bytes: r.allowed_bytes,
        process_in_use_bytes: r.process_in_use_bytes,
        other_processes: r
            .processes
            .iter()
            .map(|p| ProcessBytes {
                pid: p.pid,
                bytes: p.bytes,
            })
            .collect(),
        not_this_process_bytes: f.not_this,
        wrapper,
        wrapper_tokens,
        hint: r.hint.map(|h| match h {
            AllocHint::MaxSplitSizeMb => "max_split_size_mb",
            AllocHint::ExpandableSegments => "expandable_segments",
        }),
        alloc_conf_var: r.alloc_conf_var.clone(),
        context: r.context.clone(),
        messages_found: r.messages_found,
        diagnosis,
        causes,
        minor_cause,
        phase: r.phase.as_ref().map(|h| h.phase.as_str()),
        phase_evidence: r.phase.as_ref().map(|h| h.evidence),
        phase_term,
        explanation,
        remedies,
        notes,
    }
}

/// Figures the message implies: reserved from allocated + cached, the failing process's own
/// use, and what other processes hold.
struct Figures {
    reserved: Option<u64>,
    reserved_unallocated: Option<u64>,
    /// The lone listed process that is the failing process itself (by its host pid).
    likely_self: Option<ProcessUsage>,
    /// Device memory in use outside this process (total - free - this process).
    not_this: Option<u64>,
    /// What other processes hold: those listed, else `not_this`.
    others: Option<u64>,
}

impl Figures {
    fn derive(r: &OomReport, notes: &mut Vec<String>) -> Figures {
        let reserved =
            r.reserved_bytes
                .or(match (r.allocated_bytes, r.reserved_unallocated_bytes) {
                    (Some(a), Some(u)) => a.checked_add(u),
                    _ => None,
                });
        let reserved_unallocated =
            r.reserved_unallocated_bytes
                .or(match (r.reserved_bytes, r.allocated_bytes) {
                    (Some(res), Some(a)) => res.checked_sub(a),
                    _ => None,
                });
        // A lone `Process P has` clause with no `this process has` clause, holding at least what
        // PyTorch reserved, is this process seen from inside a container (host pid).
        // PyTorch 2.1's list (the message with "total capacty") includes this process, too: with
        // no "this process has" clause, the listed process holding at least what PyTorch
        // reserved (the closest such) is this one.
        let mut likely_self: Option<ProcessUsage> = None;
        if r.process_in_use_bytes.is_none()
            && let Some(res) = reserved
            && let Some(me) = r
                .processes
                .iter()
                .filter(|p| p.bytes >= res)
                .min_by_key(|p| p.bytes - res)
        {
            likely_self = Some(*me);
            notes.push(format!(
                "process {} is probably the failing process itself (its host pid, or PyTorch \
                 2.1's list, which includes this process): the message has no \"this process \
                 has\" clause and it holds all PyTorch reserved",
                me.pid
            ));
        }
        if let Some(t) = r.total_bytes
            && let Some(p) = r.processes.iter().find(|p| p.bytes > t)
        {
            notes.push(format!(
                "process {} is listed with {}, more than the card's {}: an inconsistent figure, \
                 so no share of the card is given for it",
                p.pid,
                gib(p.bytes),
                gib(t)
            ));
        }
        let this_process = r
            .process_in_use_bytes
            .or(likely_self.map(|p| p.bytes))
            .or(reserved);
        let not_this = match (r.total_bytes, r.free_bytes, this_process) {
            (Some(t), Some(f), Some(p)) => Some(t.saturating_sub(f).saturating_sub(p)),
            _ => None,
        };
        let others_listed: u64 = r
            .processes
            .iter()
            .filter(|p| Some(**p) != likely_self)
            .fold(0u64, |a, p| a.saturating_add(p.bytes));
        // Without a "this process has" figure, memory outside the allocator is first this
        // process's own CUDA context and libraries: only the excess over that is someone else's.
        let self_non_torch = r.process_in_use_bytes.is_none() && likely_self.is_none();
        let others = if others_listed > 0 {
            Some(others_listed)
        } else if self_non_torch {
            not_this.map(|n| n.saturating_sub(SELF_NON_TORCH_MAX))
        } else {
            not_this
        };
        if self_non_torch
            && others_listed == 0
            && let Some(n) = not_this.filter(|n| *n > 0)
        {
            notes.push(format!(
                "{} is outside PyTorch's allocator; up to {} of it is most likely this \
                 process's own CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers (the \
                 message does not separate them) unless nvidia-smi shows other processes",
                gib(n),
                gib(n.min(SELF_NON_TORCH_MAX))
            ));
        }
        Figures {
            reserved,
            reserved_unallocated,
            likely_self,
            not_this,
            others,
        }
    }
}

/// The diagnosis and its explanation, by the first rule that holds; fills `remedies`.
fn verdict(r: &OomReport, f: &Figures, remedies: &mut Vec<Remedy>) -> (Diagnosis, String) {
    if let Some(w) = &r.wrapper
        && r.requested_bytes.is_none()
    {
        return wrapper_verdict(w, remedies);
    }
    let (Some(req), Some(free)) = (r.requested_bytes, r.free_bytes) else {
        remedies.push(remedy(
            "paste_underlying_error",
            "paste the whole message (it was cut before the capacity and free figures)",
        ));
        return (
            Diagnosis::NotEnoughInformation,
            "the message does not say how much was requested and how much was free".into(),
        );
    };
    if req == 0 || r.total_bytes == Some(0) {
        remedies.push(remedy(
            "paste_underlying_error",
            "paste the whole message as the program printed it: these figures are zero",
        ));
        return (
            Diagnosis::NotEnoughInformation,
            format!(
                "the message's sizes are zero (requested {}, capacity {}): no allocation of \
                 zero bytes fails for lack of memory, so the figures are not the real ones",
                gib(req),
                r.total_bytes.map_or_else(|| "not printed".to_string(), gib)
            ),
        );
    }
    if let Some(v) = fraction_limit(r, f, req, free, remedies) {
        return v;
    }
    if let Some(v) = fragmentation(r, f, req, free, remedies) {
        return v;
    }
    if let Some(v) = other_processes(r, f, req, free, remedies) {
        return v;
    }
    exhaustion(r, f, req, free, remedies)
}

/// A server's wrapper message (TGI warmup, vLLM's no-cache-blocks) without the CUDA figures.
fn wrapper_verdict(w: &Wrapper, remedies: &mut Vec<Remedy>) -> (Diagnosis, String) {
    let text = match w {
        Wrapper::TgiPrefillTokens { tokens } => {
            remedies.push(remedy(
                "tgi_prefill_tokens",
                format!(
                    "lower TGI --max-batch-prefill-tokens below {tokens} (and \
                     --max-batch-total-tokens with it), or give the shard more memory"
                ),
            ));
            format!(
                "TGI's warmup could not run a {tokens}-token prefill; the underlying \
                 CUDA error (with the allocator's figures) is earlier in the shard's log"
            )
        }
        Wrapper::VllmSamplerWarmup { requests } => {
            remedies.push(remedy(
                "lower_max_num_seqs",
                format!(
                    "lower vLLM --max-num-seqs{}: the sampler warm-up holds max_num_seqs × \
                     vocabulary logits at once",
                    requests.map_or(String::new(), |n| format!(" below {n}"))
                ),
            ));
            format!(
                "vLLM's sampler warm-up ran out of memory with {} dummy requests; the \
                 allocator's figures are not in the text",
                requests.map_or_else(|| "its".to_string(), |n| n.to_string())
            )
        }
        Wrapper::DriverError => {
            "the CUDA driver itself refused an allocation (`CUDA error: out of memory`): no \
             allocator figures, so only the phase (if the pasted lines name one) says where"
                .to_string()
        }
        Wrapper::VllmNoCacheBlocks => {
            remedies.push(remedy(
                "raise_gpu_memory_utilization",
                "raise vLLM --gpu-memory-utilization (or free memory held by other \
                 processes) so weights and activations leave room for KV-cache blocks",
            ));
            "vLLM found no memory left for KV-cache blocks after loading weights and \
             profiling"
                .to_string()
        }
    };
    serving_remedies(remedies);
    remedies.push(remedy(
        "paste_underlying_error",
        "paste the full `CUDA out of memory. Tried to allocate ...` line from the log \
         into `inferscope mem oom` for a precise diagnosis",
    ));
    (Diagnosis::NotEnoughInformation, text)
}

/// The request would pass a per-process memory fraction although the device had room.
fn fraction_limit(
    r: &OomReport,
    f: &Figures,
    req: u64,
    free: u64,
    remedies: &mut Vec<Remedy>,
) -> Option<(Diagnosis, String)> {
    let allowed = r.allowed_bytes?;
    // What the process holds, when the message says; unknown is not zero: the request alone
    // must then pass the limit for this diagnosis.
    let held = f.reserved.or(r.process_in_use_bytes);
    if held.unwrap_or(0).saturating_add(req) > allowed && free >= req {
        remedies.push(remedy(
            "raise_memory_fraction",
            format!(
                "raise the per-process limit of {}: torch.cuda.set_per_process_memory_fraction \
                 (vLLM: a higher --gpu-memory-utilization)",
                gib(allowed)
            ),
        ));
        return Some((
            Diagnosis::MemoryFractionLimit,
            format!(
                "this process may use {} (a memory fraction limit) and holds {}; {} more \
                 would pass the limit although the device had {} free",
                gib(allowed),
                held.map_or_else(|| "an unknown amount".to_string(), gib),
                gib(req),
                gib(free)
            ),
        ));
    }
    None
}

/// PyTorch's cache holds enough but not in one block, or the device's free memory is split.
fn fragmentation(
    r: &OomReport,
    f: &Figures,
    req: u64,
    free: u64,
    remedies: &mut Vec<Remedy>,
) -> Option<(Diagnosis, String)> {
    let var = conf_var(r);
    if let Some(ru) = f.reserved_unallocated
        && ru >= req
        && match r.total_bytes {
            Some(t) if t > 0 => ru as f64 / t as f64 >= MATERIAL_POOL_SHARE,
            _ => ru >= GIB,
        }
    {
        remedies.push(remedy(
            "expandable_segments",
            format!(
                "{var}=expandable_segments:True (PyTorch ≥ 2.2; vLLM sets it only for \
                 some paths): segments grow in place, so cached free pieces can be used"
            ),
        ));
        if r.hint == Some(AllocHint::MaxSplitSizeMb) || r.style == Some(OomStyle::Parenthesised) {
            remedies.push(remedy(
                "max_split_size_mb",
                format!(
                    "on PyTorch < 2.2: {var}=max_split_size_mb:128 keeps large blocks from \
                     being split into pieces that cannot be reused"
                ),
            ));
        }
        remedies.push(remedy(
            "empty_cache_between_phases",
            "free cached blocks between phases of different shapes (torch.cuda.empty_cache() \
             after loading or warm-up), and record a snapshot with `inferscope mem snapshot` \
             to see which sizes fragment",
        ));
        return Some((
            Diagnosis::Fragmentation,
            format!(
                "PyTorch holds {} reserved but unallocated, at least the {} requested, yet \
                 no cached block of that size is free: the cache is fragmented",
                gib(ru),
                gib(req)
            ),
        ));
    }
    // Free barely above the request is a full device: the allocator asks the driver for more
    // than the request (segment sizes, 2 MiB pages), so the cause is whatever holds the memory.
    if free >= driver_ask(req) {
        remedies.push(remedy(
            "expandable_segments",
            format!(
                "{var}=expandable_segments:True, so PyTorch maps memory in pages instead of \
                 one cudaMalloc of the whole size"
            ),
        ));
        remedies.push(remedy(
            "check_concurrent_allocations",
            "look for other processes allocating at the same moment (nvidia-smi \
             --query-compute-apps=pid,used_memory --format=csv) and, on unified-memory \
             devices, for a lower driver limit than the free figure suggests",
        ));
        return Some((
            Diagnosis::Fragmentation,
            format!(
                "the device reported {} free, more than the {} requested, but the allocation \
                 failed: the free memory is not available as one block of that size (or was \
                 taken by another process in the meantime)",
                gib(free),
                gib(req)
            ),
        ));
    }
    None
}

/// Other processes hold at least the shortfall.
fn other_processes(
    r: &OomReport,
    f: &Figures,
    req: u64,
    free: u64,
    remedies: &mut Vec<Remedy>,
) -> Option<(Diagnosis, String)> {
    // `fragmentation` runs first and returns when `free >= req`; saturating keeps this safe
    // on its own.
    let shortfall = req.saturating_sub(free);
    if let Some(o) = f.others
        && o >= GIB
        && o >= shortfall
    {
        let listed: Vec<String> = r
            .processes
            .iter()
            .filter(|p| Some(**p) != f.likely_self)
            .map(|p| format!("pid {} ({})", p.pid, gib(p.bytes)))
            .collect();
        remedies.push(remedy(
            "free_other_process",
            if listed.is_empty() {
                "stop or move the other processes on this GPU (find them with nvidia-smi \
                 --query-compute-apps=pid,used_memory --format=csv), or pick an idle GPU \
                 with CUDA_VISIBLE_DEVICES"
                    .to_string()
            } else {
                format!(
                    "stop or move {} (nvidia-smi --query-compute-apps=pid,used_memory \
                     --format=csv), or pick an idle GPU with CUDA_VISIBLE_DEVICES",
                    listed.join(", ")
                )
            },
        ));
        remedies.push(remedy(
            "lower_gpu_memory_utilization",
            format!(
                "if the other process must stay: lower vLLM --gpu-memory-utilization{} so the \
                 server budgets only what is left",
                crate::oom_phase::asides(inferscope_plan::engines::Knob::MemoryFraction, |n, f| {
                    format!(" ({n} {f})")
                })
            ),
        ));
        return Some((
            Diagnosis::OtherProcesses,
            format!(
                "{} of the device is held outside this process's PyTorch allocator; the \
                 request needed {} more than the {} free",
                gib(o),
                gib(shortfall),
                gib(free)
            ),
        ));
    }
    None
}

/// The memory is simply in use: serve less, or spread the model.
fn exhaustion(
    r: &OomReport,
    f: &Figures,
    req: u64,
    free: u64,
    remedies: &mut Vec<Remedy>,
) -> (Diagnosis, String) {
    serving_remedies(remedies);
    remedies.push(remedy(
        "lower_gpu_memory_utilization",
        "if the OOM is outside the KV cache (activations, CUDA graphs, sampler): lower vLLM \
         --gpu-memory-utilization so the preallocated cache leaves headroom",
    ));
    let caveat = if f.reserved_unallocated.is_none() {
        " (the message was cut before the allocator's figures, so fragmentation cannot be \
         ruled out)"
    } else {
        ""
    };
    (
        Diagnosis::Exhaustion,
        format!(
            "{} requested with {} free{}: the memory is in use{}",
            gib(req),
            gib(free),
            match r.allocated_bytes {
                Some(a) => format!(" and {} allocated by PyTorch", gib(a)),
                None => String::new(),
            },
            caveat
        ),
    )
}

/// What holds the card, largest first; unknown last (unknown is not zero, but cannot be ranked).
fn causes(r: &OomReport, f: &Figures) -> Vec<CauseWeight> {
    let (others, reserved_unallocated) = (f.others, f.reserved_unallocated);
    // A holder larger than the card is an inconsistent figure (a cut size, another unit), not a
    // share: left unknown rather than printed as 3 billion %.
    let share = |b: Option<u64>| match (b, r.total_bytes) {
        (Some(b), Some(t)) if t > 0 && b <= t => Some(b as f64 / t as f64),
        _ => None,
    };
    let mut causes = vec![
        CauseWeight {
            cause: "other_processes",
            bytes: others,
            share_of_capacity: share(others),
            share_of_request: None,
        },
        CauseWeight {
            cause: "live_tensors",
            bytes: r.allocated_bytes,
            share_of_capacity: share(r.allocated_bytes),
            share_of_request: None,
        },
        CauseWeight {
            cause: "reserved_unallocated",
            bytes: reserved_unallocated,
            share_of_capacity: share(reserved_unallocated),
            share_of_request: match (reserved_unallocated, r.requested_bytes) {
                (Some(p), Some(q)) if q > 0 => Some(p as f64 / q as f64),
                _ => None,
            },
        },
    ];
    // Largest first; unknown last (unknown is not zero, but it cannot be ranked).
    causes.sort_by(|a, b| {
        b.bytes
            .is_some()
            .cmp(&a.bytes.is_some())
            .then(b.bytes.cmp(&a.bytes))
    });
    causes
}

/// A second cause worth naming beside the verdict's, appended to the explanation.
fn minor_cause(
    diagnosis: Diagnosis,
    causes: &[CauseWeight],
    explanation: String,
) -> (Option<&'static str>, String) {
    let verdict_cause = match diagnosis {
        Diagnosis::OtherProcesses => Some("other_processes"),
        Diagnosis::Exhaustion => Some("live_tensors"),
        Diagnosis::Fragmentation => Some("reserved_unallocated"),
        _ => None,
    };
    let minor_cause = verdict_cause.and_then(|v| {
        causes
            .iter()
            .find(|c| {
                c.cause != v
                    && (c.share_of_capacity.is_some_and(|s| s >= MINOR_CAUSE_SHARE)
                        // A pool that covers the request is what PyTorch's hint points at:
                        // say why it is not the verdict.
                        || c.share_of_request.is_some_and(|s| s >= 1.0))
            })
            .map(|c| c.cause)
    });
    let mut explanation = explanation;
    if let Some(m) = minor_cause
        && let Some(c) = causes.iter().find(|c| c.cause == m)
    {
        let pct = c.share_of_capacity.map_or(String::new(), |s| {
            format!(" ({:.1} % of the card)", s * 100.0)
        });
        let what = match m {
            "other_processes" => "other processes hold",
            "live_tensors" => "live tensors of this process hold",
            _ => "PyTorch holds reserved but unallocated",
        };
        let size = c.bytes.map_or_else(String::new, gib);
        explanation.push_str(&format!("; minor cause: {what} {size}{pct}"));
        if m == "reserved_unallocated" {
            explanation.push_str(if c.share_of_request.is_some_and(|s| s < 1.0) {
                ", less than the request, so defragmenting (expandable_segments) alone cannot \
                 make it fit"
            } else {
                ", too little of the card for defragmenting (expandable_segments) to make it fit"
            });
        }
    }
    (minor_cause, explanation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use inferscope_formats::oom::parse;

    #[test]
    fn fraction_limit() {
        let r = parse(
            "CUDA out of memory. Tried to allocate 4.00 GiB (GPU 0; 80.00 GiB total capacity; \
             38.00 GiB already allocated; 40.00 GiB free; 40.00 GiB allowed; 39.00 GiB reserved \
             in total by PyTorch)",
        )
        .unwrap();
        let a = diagnose(&r);
        assert_eq!(a.diagnosis, Diagnosis::MemoryFractionLimit, "{a:?}");
        assert_eq!(a.remedies[0].id, "raise_memory_fraction");
        // Without a reserved or in-use figure what the process holds is unknown, not zero.
        let r = parse(
            "CUDA out of memory. Tried to allocate 42.00 GiB (GPU 0; 80.00 GiB total capacity; \
             50.00 GiB free; 40.00 GiB allowed)",
        )
        .unwrap();
        let a = diagnose(&r);
        assert_eq!(a.diagnosis, Diagnosis::MemoryFractionLimit, "{a:?}");
        assert!(a.explanation.contains("holds an unknown amount"), "{a:?}");
    }

    #[test]
    fn listed_other_process() {
        let r = parse(
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of \
             23.65 GiB of which 1.00 GiB is free. Process 11 has 10.00 GiB memory in use. \
             Including non-PyTorch memory, this process has 12.60 GiB memory in use. Of the \
             allocated memory 12.00 GiB is allocated by PyTorch, and 100.00 MiB is reserved by \
             PyTorch but unallocated.",
        )
        .unwrap();
        let a = diagnose(&r);
        assert_eq!(a.diagnosis, Diagnosis::OtherProcesses, "{a:?}");
        assert_eq!(
            a.other_processes,
            vec![ProcessBytes {
                pid: 11,
                bytes: 10 << 30
            }]
        );
        assert!(a.remedies[0].action.contains("pid 11"));
    }

    /// The PyTorch ≥ 2.1 message as a container sees it (host pid, no "this process has"),
    /// shaped like fixtures/tools/oom/ (figures chosen to land on one rule each).
    fn container_message(pid_gib: &str, free: &str, unalloc: &str) -> OomReport {
        parse(&format!(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a \
             total capacity of 79.15 GiB of which {free} GiB is free. Process 4242 has {pid_gib} \
             GiB memory in use. Of the allocated memory 70.00 GiB is allocated by PyTorch, and \
             {unalloc} GiB is reserved by PyTorch but unallocated."
        ))
        .unwrap()
    }

    #[test]
    fn a_lone_process_holding_all_reserved_is_this_process() {
        let r = container_message("78.00", "1.00", "5.00");
        let mut notes = Vec::new();
        let f = Figures::derive(&r, &mut notes);
        assert_eq!(f.reserved, Some(75 * GIB));
        assert_eq!(f.likely_self.map(|p| p.pid), Some(4242));
        // Others fall back to total - free - this process: 79.15 - 1 - 78 GiB.
        assert!(f.others.is_some_and(|o| o < GIB), "{:?}", f.others);
        assert!(notes.iter().any(|n| n.contains("process 4242 is probably")));
        // A process smaller than what PyTorch reserved is someone else.
        let r = container_message("10.00", "1.00", "5.00");
        let f = Figures::derive(&r, &mut Vec::new());
        assert_eq!(f.likely_self, None);
        assert_eq!(f.others, Some(10 * GIB));
    }

    #[test]
    fn rules_in_order_and_causes_ranked() {
        // 5 GiB cached but unallocated covers the 2 GiB request: fragmentation.
        let a = diagnose(&container_message("78.00", "1.00", "5.00"));
        assert_eq!(a.diagnosis, Diagnosis::Fragmentation);
        assert_eq!(a.causes[0].cause, "live_tensors");
        // Nothing cached, nobody else: exhaustion, with the live tensors as the verdict's cause.
        let a = diagnose(&container_message("78.00", "1.00", "0.00"));
        assert_eq!(a.diagnosis, Diagnosis::Exhaustion);
        assert_eq!(a.minor_cause, None);
        // Another process holds 10 GiB: its memory is the cause.
        let a = diagnose(&container_message("10.00", "1.00", "0.00"));
        assert_eq!(a.diagnosis, Diagnosis::OtherProcesses);
        assert!(a.remedies.iter().any(|r| r.action.contains("pid 4242")));
    }
}
