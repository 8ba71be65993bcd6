//! `snapshot --import`: turn what users already have (`nvidia-smi -q` text, `nvidia-smi -q -x`
//! XML, `lstopo --of xml`) into a Snapshot every command accepts.
//!
//! The format is recognised from content, not the file name (pastes have no useful names;
//! `inferscope_formats::detect`). The parsers are pure (inferscope-formats); this module reads
//! the files ([`read_input`], bounded) and assembles their parts ([`snapshot_from_inputs`], pure): hwloc gives the host, NUMA nodes and PCI tree, nvidia-smi gives the driver facts, and GPUs are matched by PCI
//! address. Everything no input carries is `not_captured`, with the inputs named.

use anyhow::{Context, bail};
use inferscope_formats::detect::{Format as ImportFormat, detect};
use inferscope_formats::{hwloc_xml, nvidia_smi_q, nvidia_smi_xml};
use inferscope_host::{
    Cgroup, DriverInfo, Gpu, GpuVendor, HostSettings, Nic, PciId, Reading, SCHEMA_VERSION,
    Snapshot, SnapshotSource, UnknownReason,
};
use std::io::Read;
use std::path::Path;

/// Largest input accepted.
pub const MAX_IMPORT_BYTES: u64 = 64 << 20;

/// A file read for import: its text without a provenance header, and how many lines that
/// header had (added back to error line numbers so they point into the file).
#[derive(Debug, Clone)]
pub struct Input {
    /// Text after any provenance header.
    pub text: String,
    /// Lines skipped before `text`.
    pub skipped_lines: usize,
}

impl Input {
    /// An error from parsing `text`, as a message whose line number points into the file.
    pub fn error(&self, path: &Path, mut e: inferscope_formats::ParseError) -> anyhow::Error {
        e.line += self.skipped_lines;
        anyhow::anyhow!("{}: {e}", path.display())
    }
}

/// Read a file for import (bounded, lossy UTF-8).
pub fn read_input(path: &Path) -> anyhow::Result<Input> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(MAX_IMPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > MAX_IMPORT_BYTES {
        bail!(
            "{}: larger than {} MiB; not a tool output inferscope imports",
            path.display(),
            MAX_IMPORT_BYTES >> 20
        );
    }
    let all = String::from_utf8_lossy(&bytes);
    let text = strip_provenance_header(&all);
    Ok(Input {
        skipped_lines: all[..all.len() - text.len()].matches('\n').count(),
        text: text.to_string(),
    })
}

/// Fixture files (ours and `../shared/fixtures`) start with `# Source:` lines and a `---` line
/// before the tool output; skip that block so fixtures can be fed to the CLI as they are. Real
/// tool output never starts with `# Source:`.
pub fn strip_provenance_header(text: &str) -> &str {
    if !text.starts_with("# Source:") {
        return text;
    }
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return &text[offset..];
        }
    }
    text
}

fn not_captured<T>(what: &str) -> Reading<T> {
    Reading::unknown(UnknownReason::NotCaptured, what.to_string())
}

fn empty_settings(why: &str) -> HostSettings {
    HostSettings {
        memory_total_bytes: not_captured(why),
        memory_available_bytes: not_captured(why),
        thp_enabled: not_captured(why),
        thp_defrag: not_captured(why),
        hugepages: Vec::new(),
        swap_total_bytes: not_captured(why),
        swap_used_bytes: not_captured(why),
        vm_swappiness: not_captured(why),
        vm_zone_reclaim_mode: not_captured(why),
        kernel_numa_balancing: not_captured(why),
        cpu_governors: not_captured(why),
        dev_shm: not_captured(why),
        memlock_limit: not_captured(why),
        kernel_iommu_params: not_captured(why),
        cgroup: not_captured::<Cgroup>(why),
    }
}

/// Build a snapshot from files. `captured_at` is the import time.
pub fn snapshot_from_files(
    paths: &[&Path],
    captured_at: String,
    tool: String,
) -> anyhow::Result<Snapshot> {
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        inputs.push((path.display().to_string(), read_input(path)?));
    }
    snapshot_from_inputs(&inputs, captured_at, tool)
}

/// Build a snapshot from tool outputs already read, each with the name errors and the
/// snapshot's source give it (pure: the text in, a Snapshot or one error naming the input out).
pub fn snapshot_from_inputs(
    inputs: &[(String, Input)],
    captured_at: String,
    tool: String,
) -> anyhow::Result<Snapshot> {
    let names: Vec<String> = inputs.iter().map(|(n, _)| n.clone()).collect();
    let why = format!("not in the imported files ({})", names.join(", "));
    let mut hwloc: Option<hwloc_xml::HwlocTopology> = None;
    let mut smi: Option<nvidia_smi_q::NvidiaSmiReport> = None;
    for (name, input) in inputs {
        let text = &input.text;
        let parsed = |e: inferscope_formats::ParseError| input.error(Path::new(name), e);
        match detect(text) {
            Some(ImportFormat::HwlocXml) => {
                if hwloc.is_some() {
                    bail!("{name}: a second hwloc XML; import one machine at a time");
                }
                hwloc = Some(hwloc_xml::parse(text).map_err(parsed)?);
            }
            Some(f @ (ImportFormat::NvidiaSmiText | ImportFormat::NvidiaSmiXml)) => {
                if smi.is_some() {
                    bail!("{name}: a second nvidia-smi report; import one machine at a time");
                }
                smi = Some(if f == ImportFormat::NvidiaSmiXml {
                    nvidia_smi_xml::parse(text).map_err(parsed)?
                } else {
                    nvidia_smi_q::parse(text).map_err(parsed)?
                });
            }
            Some(ImportFormat::NvidiaSmiTopo) => bail!(
                "{name}: this is `nvidia-smi topo -m` text; it has no PCI tree or GPU facts to make a snapshot from. Show it with `inferscope topo --from-nvidia-smi {name}`"
            ),
            Some(ImportFormat::Snapshot) => bail!(
                "{name}: already an inferscope snapshot; pass it to other commands with --snapshot"
            ),
            None => bail!(
                "{name}: not a format inferscope imports (expected `nvidia-smi -q` text, `nvidia-smi -q -x` XML or `lstopo --of xml` XML)"
            ),
        }
    }
    Ok(assemble(hwloc, smi, &names, &why, captured_at, tool))
}

fn assemble(
    hwloc: Option<hwloc_xml::HwlocTopology>,
    smi: Option<nvidia_smi_q::NvidiaSmiReport>,
    names: &[String],
    why: &str,
    captured_at: String,
    tool: String,
) -> Snapshot {
    let mut problems = Vec::new();
    let (host, numa_nodes, pci_devices, os_devices) = match hwloc {
        Some(h) => {
            problems.extend(h.notes.into_iter().map(|n| format!("hwloc: {n}")));
            (h.host, h.numa_nodes, h.pci_devices, h.os_devices)
        }
        None => (
            inferscope_host::Host {
                hostname: not_captured(why),
                kernel: not_captured(why),
                cpu_model: not_captured(why),
                sockets: not_captured(why),
                cores: not_captured(why),
                threads: not_captured(why),
                online_cpus: not_captured(why),
            },
            Vec::new(),
            Vec::new(),
            Vec::new(),
        ),
    };
    let mut gpus = crate::pci::gpus(&pci_devices);
    let nics = pci_devices
        .iter()
        .filter(|d| d.class.known().is_some_and(|c| c.base() == 0x02))
        .filter_map(|d| {
            let names: Vec<&(inferscope_host::PciBusId, String, u32)> = os_devices
                .iter()
                .filter(|(id, _, _)| *id == d.bus_id)
                .collect();
            // hwloc osdev_type: 2 = network interface, 3 = OpenFabrics (RDMA).
            let rdma: Vec<String> = names
                .iter()
                .filter(|o| o.2 == 3)
                .map(|o| o.1.clone())
                .collect();
            let net: Vec<String> = names
                .iter()
                .filter(|o| o.2 == 2)
                .map(|o| o.1.clone())
                .collect();
            let vendor = *d.vendor_id.known()?;
            (!rdma.is_empty() || vendor.0 == crate::pci::vendor::MELLANOX).then(|| Nic {
                pci_bus_id: d.bus_id,
                vendor_id: vendor,
                rdma_devices: rdma,
                net_devices: net,
                numa_node: d.numa_node.clone(),
            })
        })
        .collect();
    for g in &mut gpus {
        g.details = match &smi {
            Some(_) => Reading::unknown(
                UnknownReason::NotPresent,
                "the nvidia-smi report has no section for this GPU",
            ),
            None => not_captured(why),
        };
    }
    let mut driver: Reading<DriverInfo> = not_captured(why);
    if let Some(report) = smi {
        problems.extend(report.notes.into_iter().map(|n| format!("nvidia-smi: {n}")));
        driver = Reading::value(report.driver);
        for r in report.gpus {
            let Some(id) = r.pci_bus_id else {
                problems.push("nvidia-smi: a GPU section without a PCI bus id was skipped".into());
                continue;
            };
            match gpus.iter_mut().find(|g| g.pci_bus_id == id) {
                Some(g) => g.details = Reading::value(r.details),
                None => gpus.push(Gpu {
                    pci_bus_id: id,
                    vendor: GpuVendor::Nvidia,
                    device_id: Reading::<PciId>::unknown(UnknownReason::NotCaptured, why),
                    numa_node: not_captured(why),
                    local_cpus: not_captured(why),
                    details: Reading::value(r.details),
                }),
            }
        }
        gpus.sort_by_key(|g| g.pci_bus_id);
    }
    let mut snapshot = Snapshot {
        schema_version: SCHEMA_VERSION,
        is_live: false,
        captured_at,
        source: SnapshotSource {
            root: format!("import: {}", names.join(", ")),
            tool,
        },
        host,
        numa_nodes,
        pci_devices,
        gpus,
        nics,
        settings: empty_settings(why),
        env: Default::default(),
        capture_problems: problems,
        driver,
        gpu_pairs: Vec::new(),
        cuda_order: not_captured(why),
    };
    snapshot.cuda_order = inferscope_host::cuda::cuda_order(&snapshot);
    snapshot
}
