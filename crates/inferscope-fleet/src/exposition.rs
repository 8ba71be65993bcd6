//! Prometheus text exposition (format 0.0.4) for `inferscope serve --metrics`: Snapshot facts,
//! check results and watch samples. Written by hand (a few dozen lines) instead of pulling a
//! metrics crate: every family is a gauge, `# HELP` and `# TYPE` appear once per family, and
//! label values are escaped as the format requires.

use inferscope_check::{Finding, Status};
use inferscope_host::Snapshot;
use inferscope_mem::watch_sample::{GpuSample, ProcessSample};
use std::collections::BTreeMap;
use std::fmt::Write as _;

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Default)]
struct Families {
    // name -> (help, lines)
    map: BTreeMap<&'static str, (&'static str, Vec<String>)>,
}

impl Families {
    fn add(&mut self, name: &'static str, help: &'static str, labels: &[(&str, String)], v: f64) {
        if !v.is_finite() {
            return;
        }
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
            .collect();
        let line = if l.is_empty() {
            format!("{name} {v}")
        } else {
            format!("{name}{{{}}} {v}", l.join(","))
        };
        let lines = &mut self.map.entry(name).or_insert((help, Vec::new())).1;
        // The same labels twice would be a duplicate series; keep the first.
        let key = line.rsplit_once(' ').map_or(line.as_str(), |(k, _)| k);
        if !lines
            .iter()
            .any(|l| l.rsplit_once(' ').is_some_and(|(k, _)| k == key))
        {
            lines.push(line);
        }
    }

    fn render(self) -> String {
        let mut o = String::new();
        for (name, (help, lines)) in self.map {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} gauge");
            for l in lines {
                let _ = writeln!(o, "{l}");
            }
        }
        o
    }
}

/// Everything one scrape shows.
pub fn write_metrics(
    snap: &Snapshot,
    findings: &[Finding],
    gpus: &[GpuSample],
    procs: &[ProcessSample],
) -> String {
    let mut f = Families::default();
    host_metrics(&mut f, snap);
    gpu_metrics(&mut f, snap, gpus);
    check_metrics(&mut f, findings);
    process_metrics(&mut f, procs);
    f.render()
}

/// Build and host info, driver, online CPUs and NUMA nodes.
fn host_metrics(f: &mut Families, snap: &Snapshot) {
    f.add(
        "inferscope_info",
        "inferscope build and host (always 1).",
        &[
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            (
                "hostname",
                snap.host.hostname.known().cloned().unwrap_or_default(),
            ),
        ],
        1.0,
    );
    if let Some(d) = snap.driver.known() {
        let text = |r: &inferscope_host::Reading<String>| {
            r.known().cloned().unwrap_or_else(|| "unknown".to_string())
        };
        f.add(
            "inferscope_driver_info",
            "NVIDIA driver and the CUDA version it supports (always 1); compare across nodes by label.",
            &[
                ("driver_version", text(&d.driver_version)),
                ("cuda_driver_version", text(&d.cuda_driver_version)),
            ],
            1.0,
        );
    }
    if let Some(c) = snap.host.online_cpus.known() {
        f.add(
            "inferscope_host_cpus_online",
            "Online logical CPUs.",
            &[],
            c.len() as f64,
        );
    }
    for n in &snap.numa_nodes {
        let l = [("numa_node", n.id.to_string())];
        if let Some(b) = n.memory_total_bytes.known() {
            f.add(
                "inferscope_numa_node_memory_total_bytes",
                "Memory of a NUMA node.",
                &l,
                *b as f64,
            );
        }
        if let Some(b) = n.memory_free_bytes.known() {
            f.add(
                "inferscope_numa_node_memory_free_bytes",
                "Free memory of a NUMA node at capture.",
                &l,
                *b as f64,
            );
        }
        f.add(
            "inferscope_numa_node_cpus",
            "CPUs of a NUMA node.",
            &l,
            n.cpus.len() as f64,
        );
    }
}

/// Per GPU: identity, memory, clocks, temperature, power and links (snapshot and samples).
fn gpu_metrics(f: &mut Families, snap: &Snapshot, gpus: &[GpuSample]) {
    for (pos, g) in snap.gpus.iter().enumerate() {
        let d = g.details.known();
        let index = d.and_then(|d| d.index.known()).map_or(pos as u32, |i| i.0);
        let uuid = d
            .and_then(|d| d.uuid.known())
            .map(|u| u.0.clone())
            .unwrap_or_default();
        let node = g
            .numa_node
            .known()
            .map(|n| n.to_string())
            .unwrap_or_default();
        let labels = [
            ("gpu", index.to_string()),
            ("uuid", uuid.clone()),
            ("pci_bus_id", g.pci_bus_id.to_string()),
            ("numa_node", node.clone()),
        ];
        f.add(
            "inferscope_gpu_info",
            "A GPU on the PCI bus (always 1).",
            &labels,
            1.0,
        );
        let sample = gpus.iter().find(|s| {
            s.pci_bus_id
                .as_deref()
                .and_then(|b| b.parse::<inferscope_host::PciBusId>().ok())
                == Some(g.pci_bus_id)
        });
        let mem = d.and_then(|d| d.memory.known());
        let total = sample
            .and_then(|s| s.memory_total_bytes)
            .or(mem.map(|m| m.total_bytes));
        let used = sample
            .and_then(|s| s.memory_used_bytes)
            .or(mem.map(|m| m.used_bytes));
        if let Some(t) = total {
            f.add(
                "inferscope_gpu_memory_total_bytes",
                "GPU memory in total.",
                &labels,
                t as f64,
            );
        }
        if let Some(u) = used {
            f.add(
                "inferscope_gpu_memory_used_bytes",
                "GPU memory in use.",
                &labels,
                u as f64,
            );
        }
        if let Some(s) = sample {
            if let Some(u) = s.utilization_percent {
                f.add(
                    "inferscope_gpu_utilization_ratio",
                    "GPU utilisation (0-1) over NVML's last sample period.",
                    &labels,
                    f64::from(u) / 100.0,
                );
            }
            if let Some(b) = s.pcie_tx_bytes_per_s {
                f.add(
                    "inferscope_gpu_pcie_tx_bytes_per_second",
                    "PCIe transmit throughput (NVML, 20 ms sample).",
                    &labels,
                    b as f64,
                );
            }
            if let Some(b) = s.pcie_rx_bytes_per_s {
                f.add(
                    "inferscope_gpu_pcie_rx_bytes_per_second",
                    "PCIe receive throughput (NVML, 20 ms sample).",
                    &labels,
                    b as f64,
                );
            }
        }
        if let Some(t) = d.and_then(|d| d.temperature_c.known()) {
            f.add(
                "inferscope_gpu_temperature_celsius",
                "GPU temperature.",
                &labels,
                f64::from(*t),
            );
        }
        if let Some(p) = d.and_then(|d| d.power_draw_mw.known()) {
            f.add(
                "inferscope_gpu_power_watts",
                "GPU power draw.",
                &labels,
                f64::from(*p) / 1000.0,
            );
        }
        gpu_links(f, snap, g, d, &labels);
    }
}

/// One series per check result.
fn check_metrics(f: &mut Families, findings: &[Finding]) {
    for x in findings {
        let v = match x.status {
            Status::Pass => 0.0,
            Status::Fail => 1.0,
            _ => 2.0,
        };
        f.add(
            "inferscope_check_status",
            "Result of an inferscope check per code and subject: 0 pass, 1 fail, 2 unknown (see `inferscope explain CODE`).",
            &[
                ("code", x.code.clone()),
                ("severity", format!("{:?}", x.severity).to_ascii_lowercase()),
                ("subject", x.subject.clone()),
            ],
            v,
        );
    }
}

/// Resident, per-node and GPU memory of the watched processes that are alive.
fn process_metrics(f: &mut Families, procs: &[ProcessSample]) {
    for p in procs.iter().filter(|p| p.alive) {
        let name = p.name.clone().unwrap_or_default();
        let l = [("pid", p.pid.to_string()), ("name", name.clone())];
        if let Some(r) = p.rss_bytes {
            f.add(
                "inferscope_process_resident_bytes",
                "Resident set size of a watched process.",
                &l,
                r as f64,
            );
        }
        for (node, b) in &p.numa_bytes {
            f.add(
                "inferscope_process_numa_resident_bytes",
                "Resident bytes of a watched process per NUMA node (numa_maps).",
                &[
                    ("pid", p.pid.to_string()),
                    ("name", name.clone()),
                    ("numa_node", node.to_string()),
                ],
                *b as f64,
            );
        }
        for (gpu, b) in &p.gpu_memory_bytes {
            f.add(
                "inferscope_process_gpu_memory_bytes",
                "GPU memory of a watched process (NVML).",
                &[
                    ("pid", p.pid.to_string()),
                    ("name", name.clone()),
                    ("gpu", gpu.to_string()),
                ],
                *b as f64,
            );
        }
    }
}

/// PCIe link state (sysfs, else NVML), NVLink link counts and uncorrected ECC errors of one GPU.
fn gpu_links(
    f: &mut Families,
    snap: &Snapshot,
    g: &inferscope_host::Gpu,
    d: Option<&inferscope_host::GpuDetails>,
    labels: &[(&str, String)],
) {
    let dev = snap.pci_devices.iter().find(|p| p.bus_id == g.pci_bus_id);
    let nvml = d.and_then(|d| d.pcie.known());
    let width = |sys: Option<u32>, nv: Option<u32>| sys.or(nv).map(f64::from);
    let link = dev.map(|p| &p.link);
    let gauges = [
        (
            "inferscope_gpu_pcie_link_width",
            "PCIe link width the GPU trained at (lanes).",
            width(
                link.and_then(|l| l.current_width.known().copied()),
                nvml.and_then(|n| n.width_current.known().copied()),
            ),
        ),
        (
            "inferscope_gpu_pcie_link_max_width",
            "Widest PCIe link the GPU and its slot support (lanes).",
            width(
                link.and_then(|l| l.max_width.known().copied()),
                nvml.and_then(|n| n.width_max.known().copied()),
            ),
        ),
        (
            "inferscope_gpu_pcie_link_generation",
            "PCIe generation the link runs at now (idle GPUs drop it to save power).",
            width(
                link.and_then(|l| l.current_speed.known().and_then(|s| s.generation()))
                    .map(u32::from),
                nvml.and_then(|n| n.gen_current.known().copied()),
            ),
        ),
        (
            "inferscope_gpu_pcie_link_max_generation",
            "Highest PCIe generation the GPU's link supports.",
            width(
                link.and_then(|l| l.max_speed.known().and_then(|s| s.generation()))
                    .map(u32::from),
                nvml.and_then(|n| n.gen_max.known().copied()),
            ),
        ),
    ];
    for (name, help, v) in gauges {
        if let Some(v) = v {
            f.add(name, help, labels, v);
        }
    }
    if let Some(links) = d.and_then(|d| d.nvlinks.known())
        && !links.is_empty()
    {
        f.add(
            "inferscope_gpu_nvlink_links",
            "NVLink links the GPU has (NVML).",
            labels,
            links.len() as f64,
        );
        f.add(
            "inferscope_gpu_nvlink_links_active",
            "NVLink links that are up (NVML).",
            labels,
            links.iter().filter(|l| l.active).count() as f64,
        );
    }
    if let Some(ecc) = d.and_then(|d| d.ecc.known()) {
        for (kind, r) in [
            ("volatile", &ecc.volatile_uncorrected),
            ("aggregate", &ecc.aggregate_uncorrected),
        ] {
            if let Some(n) = r.known() {
                let mut l = labels.to_vec();
                l.push(("counter", kind.to_string()));
                f.add(
                    "inferscope_gpu_ecc_uncorrected_errors",
                    "Uncorrectable ECC errors: since the driver loaded (volatile) or over the GPU's life (aggregate).",
                    &l,
                    *n as f64,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_is_declared_once_and_label_values_are_escaped() {
        let snap = crate::testing::node("b");
        let procs = vec![ProcessSample {
            pid: 7,
            alive: true,
            name: Some("vllm \"serve\"\\x\ny".into()),
            rss_bytes: Some(1 << 30),
            ..ProcessSample::default()
        }];
        let text = write_metrics(&snap, &[], &[], &procs);
        let mut types = std::collections::BTreeSet::new();
        for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            assert!(types.insert(l), "TYPE twice: {l}");
        }
        assert!(text.contains("inferscope_info{"), "{text}");
        assert!(
            text.contains(r#"name="vllm \"serve\"\\x\ny""#),
            "escaped name missing:\n{text}"
        );
    }
}
