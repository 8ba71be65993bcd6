//! Human output of `inferscope mem`.

use inferscope_mem::oom::OomAnalysis;
use std::io::{self, Write};

fn size(b: Option<u64>) -> String {
    b.map_or_else(|| "not in the message".to_string(), super::bytes)
}

/// The parsed figures, the diagnosis and the remedies.
pub fn write_oom(a: &OomAnalysis, out: &mut dyn Write) -> io::Result<()> {
    let backend = a
        .backend
        .map_or("GPU", |b| if b == "hip" { "HIP" } else { "CUDA" });
    let device = a.device.map_or_else(|| "?".to_string(), |d| d.to_string());
    writeln!(out, "{backend} out of memory on device {device}")?;
    if !a.context.is_empty() {
        writeln!(out, "  {:<23}{}", "reported by", a.context.join("; "))?;
    }
    if let Some(tokens) = a.wrapper_tokens {
        writeln!(out, "  {:<23}TGI prefill of {tokens} tokens", "wrapper")?;
    }
    let rows = [
        ("requested", a.requested_bytes),
        ("total capacity", a.total_bytes),
        ("free", a.free_bytes),
        ("allocated by PyTorch", a.allocated_bytes),
        ("reserved by PyTorch", a.reserved_bytes),
        ("reserved, unallocated", a.reserved_unallocated_bytes),
    ];
    for (label, v) in rows {
        writeln!(out, "  {label:<23}{}", size(v))?;
    }
    for (label, v) in [
        ("in private pools", a.private_pools_bytes),
        ("allowed (fraction)", a.allowed_bytes),
        ("this process in use", a.process_in_use_bytes),
        ("not this process", a.not_this_process_bytes),
    ] {
        if let Some(v) = v {
            writeln!(out, "  {label:<23}{}", super::bytes(v))?;
        }
    }
    for p in &a.other_processes {
        writeln!(
            out,
            "  {:<23}{}",
            format!("process {}", p.pid),
            super::bytes(p.bytes)
        )?;
    }
    writeln!(out)?;
    writeln!(out, "Diagnosis: {}", a.diagnosis.as_str())?;
    writeln!(out, "  {}", a.explanation)?;
    if let Some(p) = a.phase {
        writeln!(
            out,
            "  phase: {p}{}",
            a.phase_term
                .as_deref()
                .map_or(String::new(), |t| format!("; {t}"))
        )?;
    }
    let weighed: Vec<String> = a
        .causes
        .iter()
        .filter_map(|c| {
            c.share_of_capacity
                .map(|s| format!("{} {:.1} %", c.cause.replace('_', " "), s * 100.0))
        })
        .collect();
    if !weighed.is_empty() {
        writeln!(out, "  share of the card: {}", weighed.join(", "))?;
    }
    if !a.remedies.is_empty() {
        writeln!(out)?;
        writeln!(out, "Remedies:")?;
        for r in &a.remedies {
            writeln!(out, "  - {}", r.action)?;
        }
    }
    if !a.notes.is_empty() {
        writeln!(out)?;
        writeln!(out, "Notes:")?;
        for n in &a.notes {
            writeln!(out, "  - {n}")?;
        }
    }
    Ok(())
}

fn pool_line(
    label: &str,
    p: &inferscope_mem::snapshot::PoolStats,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "  {label:<12}{:>5} segments {:>6} blocks  reserved {:>10}  allocated {:>10}  free {:>10}  largest free {:>10}  fragmentation {:>3.0}%",
        p.segments,
        p.blocks,
        super::bytes(p.reserved_bytes),
        super::bytes(p.allocated_bytes),
        super::bytes(p.free_bytes),
        super::bytes(p.largest_free_block_bytes),
        p.external_fragmentation * 100.0
    )
}

/// The snapshot analysis.
pub fn write_snapshot(
    a: &inferscope_mem::snapshot::SnapshotAnalysis,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "PyTorch memory snapshot: devices {:?}", a.devices)?;
    pool_line("overall", &a.overall, out)?;
    pool_line("small pool", &a.small_pool, out)?;
    pool_line("large pool", &a.large_pool, out)?;
    for p in &a.private_pools {
        pool_line(&format!("pool {}", p.pool), &p.stats, out)?;
    }
    if a.overall.pending_free_bytes > 0 {
        writeln!(
            out,
            "  pending free (waiting on streams): {}",
            super::bytes(a.overall.pending_free_bytes)
        )?;
    }
    if let Some(o) = &a.oom {
        writeln!(
            out,
            "Recorded OOM on device {}: {} requested with {} free on the device",
            o.device,
            super::bytes(o.size),
            o.device_free
                .map_or("an unknown amount".to_string(), super::bytes)
        )?;
    }
    writeln!(out, "Expandable segments: {}", a.expandable.summary)?;
    if !a.top_sites.is_empty() {
        writeln!(out, "Top allocation sites (live blocks):")?;
        for s in &a.top_sites {
            writeln!(
                out,
                "  {:>10}  {:>5} blocks  {}",
                super::bytes(s.bytes),
                s.blocks,
                s.site
            )?;
        }
    }
    if a.blocks_without_frames > 0 {
        writeln!(
            out,
            "  {} live blocks have no frames (record with torch.cuda.memory._record_memory_history())",
            a.blocks_without_frames
        )?;
    }
    Ok(())
}

fn opt_gib(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |g| format!("{g:.2}"))
}

/// `mem startup`: the engine's figures, the planner's beside them, diagnosis and fixes.
pub fn write_startup(
    r: &inferscope_mem::startup::StartupReport,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "{} {} start-up{}",
        r.engine,
        r.engine_version
            .as_deref()
            .unwrap_or("(version not printed)"),
        if r.failed { ": FAILED" } else { "" }
    )?;
    for (label, v) in [
        ("device", r.device.clone()),
        ("model", r.model_id.clone()),
        ("GPU", r.gpu_model.clone()),
        ("GPUs", r.gpu_count.map(|c| c.to_string())),
        (
            "TP x PP",
            r.tp_size
                .map(|t| format!("{t} x {}", r.pp_size.unwrap_or(1))),
        ),
    ] {
        if let Some(v) = v {
            writeln!(out, "  {label:<9}{v}")?;
        }
    }
    writeln!(out)?;
    writeln!(out, "As printed (line, value, unit, GiB):")?;
    for p in &r.printed {
        writeln!(
            out,
            "  {:<6} {:<32} {:>12} {:<9} {}",
            p.line,
            p.key,
            p.value,
            p.unit,
            p.gib.map_or(String::new(), |g| format!("{g:.2} GiB"))
        )?;
    }
    writeln!(out)?;
    match &r.prediction {
        Some(p) => {
            writeln!(
                out,
                "Per GPU, GiB     measured  predicted  difference   ({} on {}, {:.2} GiB)",
                p.model, p.gpu, p.gpu_total_gib
            )?;
            for t in &p.terms {
                writeln!(
                    out,
                    "  {:<16}{:>8} {:>10} {:>11}",
                    t.term,
                    opt_gib(t.measured_gib),
                    format!("{:.2}", t.predicted_gib),
                    t.difference_gib
                        .map_or("-".to_string(), |d| format!("{d:+.2}"))
                )?;
            }
            writeln!(
                out,
                "  {:<16}{:>8} {:>10}",
                "KV tokens",
                r.measured
                    .kv_cache_tokens
                    .map_or("-".to_string(), |t| t.to_string()),
                p.kv_cache_tokens
            )?;
            if !p.fits {
                writeln!(out, "  planner: does not fit: {}", p.problems.join("; "))?;
            }
        }
        None => {
            writeln!(
                out,
                "Per GPU, GiB: weights {}, non-torch {}, activation {}, CUDA graphs {}, KV {}; KV tokens {}",
                opt_gib(r.measured.weights_gib),
                opt_gib(r.measured.non_torch_gib),
                opt_gib(r.measured.activation_peak_gib),
                opt_gib(r.measured.cuda_graph_gib),
                opt_gib(r.measured.kv_cache_gib),
                r.measured
                    .kv_cache_tokens
                    .map_or("-".to_string(), |t| t.to_string())
            )?;
            if let Some(why) = &r.prediction_unavailable {
                writeln!(out, "  no prediction: {why}")?;
            }
        }
    }
    if r.failed {
        writeln!(out)?;
        if let (Some(line), Some(text)) = (r.failure_line, &r.failure) {
            writeln!(out, "Failure (line {line}): {text}")?;
        }
        if let Some(d) = &r.diagnosis {
            writeln!(out, "Diagnosis: {d}")?;
        }
        if let Some(b) = &r.budget
            && let Some(s) = b.shortfall_gib
        {
            writeln!(
                out,
                "Shortfall: {}{} per GPU (KV available {}, one request needs {})",
                if b.shortfall_is_lower_bound {
                    "at least "
                } else {
                    ""
                },
                small_gib(Some(s), " GiB"),
                small_gib(b.kv_available_gib, ""),
                small_gib(b.one_request_gib, "")
            )?;
        }
        if !r.fixes.is_empty() {
            writeln!(out, "Fixes (fits?, checked by):")?;
            for f in &r.fixes {
                writeln!(
                    out,
                    "  {:<36} {:<4} {:<8} {}",
                    f.change,
                    if f.fits { "yes" } else { "no" },
                    f.checked_by,
                    f.cost
                )?;
                if !f.why.is_empty() {
                    writeln!(out, "  {:<36} why: {}", "", f.why)?;
                }
            }
        }
    }
    if !r.notes.is_empty() {
        writeln!(out)?;
        for n in &r.notes {
            writeln!(out, "Note: {n}")?;
        }
    }
    Ok(())
}

/// GiB with two decimals (then `unit`), in MiB below a tenth of a GiB, where two decimals would
/// print a tiny model's pool and shortfall as 0.00.
fn small_gib(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(g) if g != 0.0 && g.abs() < 0.1 => format!("{:.2} MiB", g * 1024.0),
        Some(g) => format!("{g:.2}{unit}"),
        None => "-".to_string(),
    }
}
