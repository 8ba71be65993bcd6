//! Human output of `inferscope watch`: the live table and the summary.

use crate::commands::watch::WatchSummary;
use inferscope_probe::watch::{GpuSample, ProcessSample};
use std::io::{self, Write};

fn opt_bytes(b: Option<u64>) -> String {
    b.map_or_else(|| "-".to_string(), super::bytes)
}

/// One screen: GPUs, then processes.
pub fn write_live(
    t: f64,
    gpus: &[GpuSample],
    procs: &[ProcessSample],
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "inferscope watch  t={t:.1}s  (Ctrl-C stops and prints the summary)"
    )?;
    if !gpus.is_empty() {
        writeln!(
            out,
            "{:<5}{:>12}{:>12}{:>6}{:>14}{:>14}",
            "GPU", "used", "total", "util", "PCIe tx/s", "PCIe rx/s"
        )?;
        for g in gpus {
            writeln!(
                out,
                "{:<5}{:>12}{:>12}{:>6}{:>14}{:>14}",
                g.index,
                opt_bytes(g.memory_used_bytes),
                opt_bytes(g.memory_total_bytes),
                g.utilization_percent
                    .map_or_else(|| "-".into(), |u| format!("{u}%")),
                opt_bytes(g.pcie_tx_bytes_per_s),
                opt_bytes(g.pcie_rx_bytes_per_s),
            )?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "{:<9}{:<16}{:>12}{:>12}  {:<12}per-node",
        "PID", "name", "RSS", "GPU mem", "ran on CPUs"
    )?;
    for p in procs {
        let nodes: Vec<String> = p
            .numa_bytes
            .iter()
            .map(|(n, b)| format!("N{n}={}", super::bytes(*b)))
            .collect();
        let gpu: u64 = p.gpu_memory_bytes.values().sum();
        writeln!(
            out,
            "{:<9}{:<16}{:>12}{:>12}  {:<12}{}",
            p.pid,
            if p.alive {
                p.name.as_deref().unwrap_or("?").to_string()
            } else {
                "(exited)".to_string()
            },
            opt_bytes(p.rss_bytes),
            if p.gpu_memory_bytes.is_empty() {
                "-".to_string()
            } else {
                super::bytes(gpu)
            },
            p.cpus_ran_on.as_deref().unwrap_or("-"),
            nodes.join(" ")
        )?;
    }
    Ok(())
}

/// The end-of-watch summary.
pub fn write_summary(s: &WatchSummary, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Watched {:.1} s, {} samples.", s.duration_s, s.samples)?;
    if let Some(n) = &s.nvml_note {
        writeln!(out, "GPU figures: none ({n}).")?;
    }
    for p in &s.processes {
        writeln!(
            out,
            "  pid {:<8} {:<16} RSS {} → {} (max {}), trend {}, ran on CPUs {}{}",
            p.pid,
            p.name.as_deref().unwrap_or("?"),
            opt_bytes(p.rss_first_bytes),
            opt_bytes(p.rss_last_bytes),
            super::bytes(p.rss_max_bytes),
            p.rss_trend.verdict.as_str(),
            if p.cpus_ran_on.is_empty() {
                "-"
            } else {
                &p.cpus_ran_on
            },
            match p.exited_after_s {
                Some(t) => format!(", exited after {t:.1} s"),
                None => String::new(),
            }
        )?;
    }
    if s.findings.is_empty() {
        writeln!(out, "Findings: none.")?;
    } else {
        writeln!(out, "Findings:")?;
        for f in &s.findings {
            writeln!(out, "  - {f}")?;
        }
    }
    Ok(())
}
