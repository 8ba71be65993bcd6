//! `inferscope plan` output: the per-GPU memory breakdown as the engine will account it, the
//! capacity it leaves, every assumption, what to change when it falls short, and a speed bound.

use inferscope_plan::Plan;
use inferscope_plan::engine::EngineSettings;
use inferscope_plan::find::{Candidate, FindResult, Workload};
use inferscope_plan::plan_speed::SpeedBounds;
use inferscope_plan::suggest::Suggestion;
use std::io::{self, Write};

/// Write the plan.
pub fn write_plan(
    p: &Plan,
    model_source: &str,
    gpu_source: &str,
    settings: Option<&EngineSettings>,
    suggestions: &[Suggestion],
    speed: &SpeedBounds,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "Model:  {model_source}")?;
    writeln!(out, "GPUs:   {gpu_source}")?;
    if let Some(l) = &p.llama_cpp {
        write_llama_cpp(p, l, out)?;
    } else {
        write_vllm_memory(p, out)?;
    }
    write_outcome(p, settings, suggestions, speed, out)
}

/// The memory of a llama-server plan, in llama.cpp's own terms.
fn write_llama_cpp(
    p: &Plan,
    l: &inferscope_plan::engines::llama_cpp::plan::LlamaCppPlan,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "Engine: llama.cpp ({}), {} slot{} × {} tokens, n_ctx {} ({}), K {} / V {}, {} of {} layers on the GPU",
        p.engine.version,
        l.slots,
        if l.slots == 1 { "" } else { "s" },
        l.n_ctx_slot,
        l.n_ctx,
        if l.kv_unified {
            "one unified KV pool".to_string()
        } else {
            format!("{} cells per slot", l.n_ctx_seq)
        },
        l.cache_type_k,
        l.cache_type_v,
        l.gpu_layers,
        l.layers
    )?;
    writeln!(out)?;
    let g = &p.per_gpu;
    writeln!(out, "GPU memory (GiB)")?;
    for (label, v) in [
        ("GPU memory", g.gpu_total_gib),
        ("  weights (offloaded layers)", g.weights_gib),
        ("  KV cache (offloaded layers)", g.kv_cache_gib),
        ("  compute buffer (estimate)", g.activation_gib),
        ("  CUDA context (estimate)", g.non_torch_gib),
        ("left free on the GPU", g.free_after_kv_gib),
        ("host memory (weights, KV not offloaded)", l.host_gib),
    ] {
        writeln!(out, "  {label:<40} {v:>9.2}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "KV cache: {:.2} MiB in all (llama_kv_cache: size), {} bytes/token{} → {:.2} requests of {} tokens at once",
        l.kv_cache_mib,
        p.kv_bytes_per_token,
        l.swa_cells
            .map(|c| format!(", sliding-window layers {c} cells"))
            .unwrap_or_default(),
        p.max_concurrency,
        l.n_ctx_slot
    )
}

/// The memory of a plan in vLLM's accounting.
/// Whether the figures are the engine's own accounting for this release, said first.
fn write_accounting(p: &Plan, out: &mut dyn Write) -> io::Result<()> {
    let Some(r) = &p.engine_rules else {
        return Ok(());
    };
    match r.accounting {
        inferscope_plan::rules::Accounting::Modelled => writeln!(
            out,
            "Accounting: modelled: {} rules of release {}{} (sources under Assumptions)",
            r.engine,
            r.rules_of,
            r.note
                .as_deref()
                .map_or(String::new(), |n| format!("; {n}"))
        ),
        inferscope_plan::rules::Accounting::Approximate => writeln!(
            out,
            "Accounting: APPROXIMATE: {}",
            r.note
                .as_deref()
                .unwrap_or("rules of another engine or release")
        ),
    }
}

fn write_vllm_memory(p: &Plan, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Engine: {} {} ({}), TP {} × PP {}, max_model_len {}, KV {}, block {}",
        inferscope_plan::engine::server_name(p.engine.name),
        p.engine.version,
        match p.engine.name {
            inferscope_plan::engine::Engine::Vllm if p.engine.v1 => "V1",
            inferscope_plan::engine::Engine::Vllm => "V0",
            _ => "own accounting",
        },
        p.tensor_parallel_size.unwrap_or(1),
        p.pipeline_parallel_size,
        p.max_model_len.map_or("?".into(), |m| m.to_string()),
        p.kv_cache_dtype,
        p.block_size
    )?;
    write_accounting(p, out)?;
    writeln!(out)?;
    let g = &p.per_gpu;
    let graphs_in_budget = p.engine_rules.as_ref().is_some_and(|r| {
        r.rules
            .iter()
            .any(|x| x.rule == "cuda_graphs" && x.value.starts_with("estimated"))
    });
    writeln!(out, "Per GPU (GiB)                       ")?;
    for (label, v) in [
        ("GPU memory (torch-visible)", g.gpu_total_gib),
        ("engine budget (× utilization)", g.total_gib),
        ("  weights", g.weights_gib),
        ("  non-torch (CUDA ctx, NCCL)", g.non_torch_gib),
        ("  activation peak (profiling)", g.activation_gib),
        ("  KV cache", g.kv_cache_gib),
        (
            if graphs_in_budget {
                "  CUDA graphs (in budget)"
            } else {
                "CUDA graphs"
            },
            g.cuda_graph_gib,
        ),
        ("left free on the GPU", g.free_after_kv_gib),
    ] {
        writeln!(out, "  {label:<34} {v:>9.2}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "KV cache: {} tokens ({} blocks of {}), {} bytes/token/GPU{} → max concurrency at max_model_len: {:.2}×",
        p.kv_cache_tokens,
        p.blocks,
        p.block_size,
        p.kv_bytes_per_token,
        if p.state_bytes_per_sequence > 0 {
            format!(
                " + {} bytes/sequence/GPU of recurrent state",
                p.state_bytes_per_sequence
            )
        } else {
            String::new()
        },
        p.max_concurrency
    )?;
    if let Some(b) = p.state_pool_bytes {
        // a separate state pool sits beside the KV cache in the budget, padding slot included
        writeln!(
            out,
            "State pool: {:.2} GiB/GPU as the engine allocates it (states of the running requests + 1 padding slot)",
            b as f64 / (1u64 << 30) as f64
        )?;
    }
    Ok(())
}

/// Fit, speed, suggestions, ignored flags and assumptions (every engine).
fn write_outcome(
    p: &Plan,
    settings: Option<&EngineSettings>,
    suggestions: &[Suggestion],
    speed: &SpeedBounds,
    out: &mut dyn Write,
) -> io::Result<()> {
    if let Some(c) = p.concurrency {
        writeln!(
            out,
            "Requested concurrency {c}: {}",
            if p.meets_concurrency == Some(true) {
                "met"
            } else {
                "NOT met"
            }
        )?;
    }
    writeln!(out, "Fits: {}", if p.fits { "yes" } else { "NO" })?;
    for pr in &p.problems {
        writeln!(out, "  - {pr}")?;
    }
    if let Some(d) = &speed.decode {
        writeln!(
            out,
            "Decode ({} sequences at full context), {}: expected {:.0} tok/s per sequence, {:.0} aggregate; roofline {:.0} / {:.0} (no real run is faster)",
            speed.sequences,
            d.engine.cli_id(),
            d.expected_tokens_per_s_per_sequence,
            d.expected_tokens_per_s_aggregate,
            d.roofline_tokens_per_s_per_sequence,
            d.roofline_tokens_per_s_aggregate,
        )?;
    }
    if let Some(pf) = &speed.prefill {
        writeln!(
            out,
            "TTFT for a {}-token prompt, {}: expected {:.0} ms; roofline {:.0} ms",
            pf.prompt_tokens,
            pf.engine.cli_id(),
            pf.expected_ttft_s * 1000.0,
            pf.roofline_ttft_s * 1000.0
        )?;
    }
    if let Some(why) = &speed.unavailable {
        writeln!(out, "Speed: not estimated ({why})")?;
    }
    if let Some(l) = &speed.load {
        writeln!(
            out,
            "Load time at {} GB/s disk: expected {:.0} s; roofline {:.0} s (host RAM to cache the checkpoint: {:.1} GiB)",
            speed.disk_gbps,
            l.expected_load_time_s,
            l.roofline_load_time_s,
            l.bound.host_ram_whole_bytes / inferscope_plan::memory::GIB
        )?;
    }
    if !suggestions.is_empty() {
        writeln!(out)?;
        writeln!(out, "What would change it:")?;
        for s in suggestions {
            writeln!(
                out,
                "  {:<40} fits {:<3} max concurrency {:>7.2}×  KV {:>7.2} GiB/GPU  GPUs {}",
                s.change,
                if s.fits { "yes" } else { "no" },
                s.max_concurrency,
                s.kv_cache_gib,
                s.gpus_used
            )?;
        }
    }
    if let Some(s) = settings.filter(|s| !s.ignored.is_empty()) {
        writeln!(out)?;
        writeln!(out, "Ignored flags (not modelled): {}", s.ignored.join(" "))?;
    }
    writeln!(out)?;
    writeln!(out, "Assumptions:")?;
    for a in &p.assumptions {
        writeln!(out, "  - {a}")?;
    }
    if let Some(d) = &speed.decode {
        for a in &d.assumptions {
            writeln!(out, "  - speed: {a}")?;
        }
    }
    Ok(())
}

/// Write `plan --find`: the context it planned for first (and why), the rows shown of how many,
/// cost when priced, a paste-ready command per row, regional parts marked, and for an empty
/// answer the closest miss. `at_8k`: the best row at 8,192 tokens when the context defaulted to
/// the model's full one.
pub fn write_find(
    model: &str,
    w: &Workload,
    r: &FindResult,
    at_8k: Option<&Option<Candidate>>,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "Context: {} tokens per request — {}",
        w.max_model_len, r.context_basis
    )?;
    if let Some(best) = at_8k {
        match best {
            Some(c) => writeln!(
                out,
                "  (at --max-model-len 8192 the first choice would be {} × {}, {} weights, KV {})",
                c.count, c.gpu, c.weights, c.kv_cache_dtype
            )?,
            None => writeln!(out, "  (at --max-model-len 8192 nothing fits either)")?,
        }
    }
    writeln!(
        out,
        "{model}: {} concurrent requests of {} tokens{} — {} configurations evaluated, {} meet it; showing {} of {}{}",
        w.concurrency,
        w.max_model_len,
        w.min_tokens_per_s_per_sequence
            .map_or(String::new(), |t| format!(", ≥ {t} tok/s each")),
        r.evaluated,
        r.candidates_total,
        r.candidates.len(),
        r.candidates_total,
        if r.candidates.len() < r.candidates_total {
            " (--top N for more)"
        } else {
            ""
        }
    )?;
    writeln!(out)?;
    let priced = r.ranked_by == "cost";
    writeln!(
        out,
        "  {:<27} {:>4}  {:<7} {:<5} {:>10} {:>10} {:>9} {:>12} {:>12}{}",
        "GPU",
        "×",
        "weights",
        "KV",
        "weights/GPU",
        "KV/GPU",
        "max conc",
        "expected t/s",
        "roofline t/s",
        if priced {
            format!(" {:>8} {:>8}", "$/hour", "$/Mtok")
        } else {
            String::new()
        }
    )?;
    let money = |v: Option<f64>| v.map_or("?".to_string(), |x| format!("{x:.2}"));
    for c in &r.candidates {
        let name = if c.region.is_some() {
            format!("{} (regional)", c.gpu)
        } else {
            c.gpu.clone()
        };
        writeln!(
            out,
            "  {:<27} {:>4}  {:<7} {:<5} {:>10.2} {:>10.2} {:>9.2} {:>12} {:>12}{}",
            name,
            c.count,
            c.weights,
            c.kv_cache_dtype,
            c.weights_gib_per_gpu,
            c.kv_cache_gib_per_gpu,
            c.max_concurrency,
            c.expected_tokens_per_s_per_sequence
                .map_or("?".into(), |t| format!("{t:.0}")),
            c.roofline_tokens_per_s_per_sequence
                .map_or("?".into(), |t| format!("{t:.0}")),
            if priced {
                format!(
                    " {:>8} {:>8}",
                    money(c.usd_per_hour),
                    money(c.usd_per_million_output_tokens)
                )
            } else {
                String::new()
            }
        )?;
        if let Some(cmd) = &c.command {
            writeln!(out, "      $ {cmd}")?;
        }
        if let Some(note) = &c.command_note {
            writeln!(out, "        # {note}")?;
        }
    }
    if r.candidates.is_empty() {
        writeln!(
            out,
            "  nothing in the catalog meets this workload on up to {} GPUs",
            w.max_gpus.unwrap_or(8).min(8)
        )?;
        if let Some(m) = &r.closest_miss {
            writeln!(
                out,
                "  closest: {} × {} ({} weights, KV {}) — {}",
                m.count, m.gpu, m.weights, m.kv_cache_dtype, m.lacks
            )?;
        }
    }
    let regional: std::collections::BTreeSet<&str> = r
        .candidates
        .iter()
        .filter(|c| c.region.is_some())
        .map(|c| c.gpu.as_str())
        .collect();
    if !regional.is_empty() {
        writeln!(
            out,
            "  (regional) = sold only in mainland China (export variants): {}",
            regional.into_iter().collect::<Vec<_>>().join(", ")
        )?;
    }
    writeln!(out)?;
    for a in &r.assumptions {
        writeln!(out, "  - {a}")?;
    }
    Ok(())
}
