//! Human output of `inferscope mem`.

use inferscope_mem::oom::OomAnalysis;
use std::io::{self, Write};

fn size(b: Option<u64>) -> String {
    b.map_or_else(|| "not in the message".to_string(), super::bytes)
}

/// The parsed figures, the diagnosis and the remedies.
pub fn write_oom(a: &OomAnalysis, out: &mut dyn Write) -> io::Result<()> {
    let backend = a.backend.map_or("GPU", |b| if b == "hip" { "HIP" } else { "CUDA" });
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
