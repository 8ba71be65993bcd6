//! The topology view: the `nvidia-smi topo -m` matrix users know, then a NUMA summary that
//! `nvidia-smi` does not give (node memory, usable CPUs under the cgroup, what sits where).

use super::bytes;
use inferscope_host::topology::{self, NodeSummary, TopoMatrix};
use inferscope_host::{Reading, Snapshot};
use serde::Serialize;
use std::io::{self, Write};

/// JSON form of `inferscope topo --json`: the matrix fields at the top level (`devices`,
/// `matrix`, `gpus`, `nics`, `notes`), plus `numa_nodes` when the source is a whole machine.
#[derive(Debug, Serialize)]
pub struct TopoReport {
    /// GPU/NIC matrix and GPU placement.
    #[serde(flatten)]
    pub matrix: TopoMatrix,
    /// NUMA nodes and what is attached to them (empty when imported from `nvidia-smi` text).
    pub numa_nodes: Vec<NodeSummary>,
    /// `cuda:N` → GPU for the captured environment (absent for imported text).
    pub cuda_devices: Option<inferscope_host::Reading<inferscope_host::cuda::CudaDevices>>,
}

/// Write the report of a snapshot as pretty JSON.
pub fn write_json(snap: &Snapshot, out: &mut dyn Write) -> io::Result<()> {
    let report = TopoReport {
        matrix: topology::topo_matrix(snap),
        numa_nodes: topology::numa_summary(snap),
        cuda_devices: Some(inferscope_host::cuda::cuda_devices(snap)),
    };
    serde_json::to_writer_pretty(&mut *out, &super::versioned::versioned(&report))?;
    writeln!(out)
}

fn reading_text<T: std::fmt::Display>(r: &Reading<T>, unknown: &str) -> String {
    match r.known() {
        Some(v) => v.to_string(),
        None => unknown.to_string(),
    }
}

fn pad(s: &str, w: usize) -> String {
    format!("{s:<w$}")
}

/// Write the human view.
pub fn write_text(snap: &Snapshot, out: &mut dyn Write) -> io::Result<()> {
    let h = &snap.host;
    writeln!(
        out,
        "{}: {}, {} sockets, {} cores, {} threads{}",
        reading_text(&h.hostname, "unknown host"),
        reading_text(&h.cpu_model, "unknown CPU"),
        reading_text(&h.sockets, "?"),
        reading_text(&h.cores, "?"),
        reading_text(&h.threads, "?"),
        if snap.is_live {
            String::new()
        } else {
            format!(" (not live: {})", snap.source.root)
        }
    )?;
    writeln!(out)?;
    let m = topology::topo_matrix(snap);
    if snap.gpus.is_empty() {
        writeln!(
            out,
            "No GPU found: no NVIDIA (0x10de) or AMD (0x1002) display controller in /sys/bus/pci/devices."
        )?;
        writeln!(out)?;
    } else {
        write_matrix(&m, out)?;
        write_cuda(snap, &m, out)?;
    }
    write_numa(snap, &m, &topology::numa_summary(snap), out)?;
    if !snap.capture_problems.is_empty() {
        writeln!(out)?;
        writeln!(out, "Capture problems:")?;
        for p in &snap.capture_problems {
            writeln!(out, "  {p}")?;
        }
    }
    Ok(())
}

fn list_text(nodes: &Option<Vec<inferscope_host::NumaNodeId>>) -> String {
    match nodes {
        Some(ids) if !ids.is_empty() => ids
            .iter()
            .map(|n| n.0)
            .collect::<inferscope_host::NodeSet>()
            .to_string(),
        _ => "N/A".to_string(),
    }
}

/// Write the matrix, its legend and notes in the layout of `nvidia-smi topo -m`.
pub fn write_matrix(m: &TopoMatrix, out: &mut dyn Write) -> io::Result<()> {
    let cell_w = m.devices.iter().map(|d| d.len()).max().unwrap_or(4).max(4) + 4;
    let cpu_w = m
        .gpus
        .iter()
        .map(|g| g.cpu_affinity.as_ref().map_or(3, |c| c.to_string().len()))
        .max()
        .unwrap_or(0)
        .max("CPU Affinity".len())
        + 4;
    let numa_w = "NUMA Affinity".len() + 4;
    let mut line = pad("", cell_w);
    for d in &m.devices {
        line.push_str(&pad(d, cell_w));
    }
    line.push_str(&pad("CPU Affinity", cpu_w));
    line.push_str(&pad("NUMA Affinity", numa_w));
    line.push_str("GPU NUMA ID");
    writeln!(out, "{}", line.trim_end())?;
    for (i, d) in m.devices.iter().enumerate() {
        let mut line = pad(d, cell_w);
        for link in m.matrix.get(i).into_iter().flatten() {
            let cell = link.to_string();
            let cell = if cell == "X" { " X".to_string() } else { cell };
            line.push_str(&pad(&cell, cell_w));
        }
        if let Some(g) = m.gpus.iter().find(|g| &g.name == d) {
            let cpu = g
                .cpu_affinity
                .as_ref()
                .map_or("N/A".to_string(), |c| c.to_string());
            line.push_str(&pad(&cpu, cpu_w));
            line.push_str(&pad(&list_text(&g.numa_affinity), numa_w));
            line.push_str(&list_text(&g.gpu_numa_id));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out)?;
    writeln!(out, "Legend:")?;
    writeln!(out)?;
    for (code, text) in topology::NVIDIA_SMI_LEGEND {
        writeln!(out, "  {code:<4} = {text}")?;
    }
    if !m.nics.is_empty() {
        writeln!(out)?;
        writeln!(out, "NIC Legend:")?;
        writeln!(out)?;
        for n in &m.nics {
            writeln!(out, "  {}: {}", n.name, n.device)?;
        }
    }
    if !m.notes.is_empty() {
        writeln!(out)?;
        for n in &m.notes {
            writeln!(out, "Note: {n}")?;
        }
    }
    writeln!(out)?;
    Ok(())
}

fn join_labels(labels: &[String]) -> String {
    if labels.is_empty() {
        "-".to_string()
    } else {
        labels.join(",")
    }
}

fn write_numa(
    snap: &Snapshot,
    m: &TopoMatrix,
    nodes: &[NodeSummary],
    out: &mut dyn Write,
) -> io::Result<()> {
    if nodes.is_empty() {
        writeln!(
            out,
            "NUMA: no /sys/devices/system/node (kernel without NUMA support, or not readable)"
        )?;
        return Ok(());
    }
    let rows: Vec<[String; 7]> = nodes
        .iter()
        .map(|n| {
            [
                n.id.to_string(),
                if n.cpus.is_empty() {
                    // A GPU's own memory (GH200, POWER9 + NVLink V100: the `GPU NUMA ID`)
                    // is named as such, not as a plain memory-only node.
                    let owners: Vec<&str> = m
                        .gpus
                        .iter()
                        .filter(|g| {
                            g.gpu_numa_id
                                .as_ref()
                                .is_some_and(|ids| ids.contains(&n.id))
                        })
                        .map(|g| g.name.as_str())
                        .collect();
                    if owners.is_empty() {
                        "(none: memory only)".to_string()
                    } else {
                        format!("(none: {} memory)", owners.join(","))
                    }
                } else {
                    n.cpus.to_string()
                },
                match n.usable_cpus.known() {
                    // A memory-only node has no CPUs to use: "all" of none would read as a promise.
                    _ if n.cpus.is_empty() => "-".to_string(),
                    Some(u) if u == &n.cpus => "all".to_string(),
                    Some(u) if u.is_empty() => "none".to_string(),
                    Some(u) => u.to_string(),
                    None => "unknown".to_string(),
                },
                n.memory_total_bytes
                    .known()
                    .map(|b| bytes(*b))
                    .unwrap_or_else(|| "unknown".into()),
                n.memory_free_bytes
                    .known()
                    .map(|b| bytes(*b))
                    .unwrap_or_else(|| "unknown".into()),
                join_labels(&n.gpus),
                join_labels(&n.nics),
            ]
        })
        .collect();
    let header = [
        "Node",
        "CPUs",
        "Usable CPUs",
        "Memory",
        "Free",
        "GPUs",
        "NICs",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    writeln!(out, "NUMA nodes:")?;
    let fmt_row = |cells: &[String]| {
        let mut s = String::from("  ");
        for (c, w) in cells.iter().zip(widths.iter()) {
            s.push_str(&pad(c, w + 3));
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", fmt_row(&header.map(String::from)))?;
    for r in &rows {
        writeln!(out, "{}", fmt_row(r))?;
    }
    if nodes.len() > 1 {
        writeln!(out)?;
        writeln!(out, "Node distances (SLIT):")?;
        let mut line = String::from("        ");
        for n in &snap.numa_nodes {
            line.push_str(&format!("{:>6}", n.id.0));
        }
        writeln!(out, "{line}")?;
        for n in &snap.numa_nodes {
            let mut line = format!("  {:>4}  ", n.id.0);
            match n.distances.known() {
                Some(d) => {
                    for v in d {
                        line.push_str(&format!("{v:>6}"));
                    }
                }
                None => line.push_str("  unknown"),
            }
            writeln!(out, "{line}")?;
        }
    }
    let unplaced: Vec<String> = snap
        .gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| !g.numa_node.is_known())
        .map(|(i, _)| format!("GPU{i}"))
        .collect();
    if !unplaced.is_empty() {
        writeln!(
            out,
            "  GPUs with no NUMA node reported by the kernel: {}",
            unplaced.join(",")
        )?;
    }
    match topology::allowed_cpus(snap) {
        Reading::Value(allowed) => {
            if let Some(online) = snap.host.online_cpus.known()
                && !online.is_subset(&allowed)
            {
                writeln!(
                    out,
                    "  This process's cgroup allows CPUs {allowed} of {online} online."
                )?;
            }
        }
        Reading::Unknown(u) => writeln!(out, "  cgroup CPU limit unknown: {}", u.detail)?,
    }
    Ok(())
}

fn write_cuda(snap: &Snapshot, m: &TopoMatrix, out: &mut dyn Write) -> io::Result<()> {
    let label = |id: &inferscope_host::PciBusId| {
        m.gpus
            .iter()
            .find(|g| g.pci_bus_id.as_ref() == Some(id))
            .map_or("?".to_string(), |g| g.name.clone())
    };
    match inferscope_host::cuda::cuda_devices(snap) {
        Reading::Value(c) => {
            writeln!(
                out,
                "CUDA devices (CUDA_DEVICE_ORDER={}, CUDA_VISIBLE_DEVICES={}):",
                c.device_order,
                c.visible_devices.as_deref().unwrap_or("unset")
            )?;
            let list: Vec<String> = c
                .devices
                .iter()
                .map(|(n, id)| format!("cuda:{n} = {} ({id})", label(id)))
                .collect();
            if list.is_empty() {
                writeln!(out, "  none")?;
            }
            for l in list {
                writeln!(out, "  {l}")?;
            }
            for n in &c.notes {
                writeln!(out, "  Note: {n}")?;
            }
        }
        Reading::Unknown(u) => writeln!(out, "CUDA devices: unknown: {}", u.detail)?,
    }
    writeln!(out)
}
