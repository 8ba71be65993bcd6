//! # inferscope-probe
//!
//! The only crate that reads the live machine. Everything goes through an [`FsRoot`], so the
//! same code reads `/`, a fixture tree, or an unpacked `gather` archive; nothing here needs root
//! or a GPU. What cannot be read becomes an unknown [`inferscope_host::Reading`] naming the file,
//! never a zero and never a panic.
//!
//! The clock is not read here either: the caller passes the capture time in
//! [`CaptureOptions`], which keeps capture deterministic for tests.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Nor an index or slice that a short or odd input could push out of bounds: use `.get(..)`,
// iterators or slice patterns; an index that cannot fail gets the same `#[allow]` + comment.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
pub mod driver;
pub mod env;
pub mod exporter;
pub mod fetch;
pub mod fsroot;
pub mod gather;
pub mod host;
pub mod hub;
pub mod import;
pub mod load;
pub mod model_source;
pub mod numa;
pub mod nvml;
mod nvproc;
pub mod pci;
pub mod process;
pub mod settings;
pub mod watch;

pub use fsroot::{FsError, FsRoot};

/// True when this build speaks HTTPS (the `tls` feature, which the binary's default `tls`
/// feature turns on).
pub const TLS_ENABLED: bool = cfg!(feature = "tls");

/// Install rustls' ring provider as the process default before any HTTPS client is built
/// (reqwest's `rustls-no-provider` has none of its own); a second call is a no-op.
pub fn init_tls() {
    #[cfg(feature = "tls")]
    {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
use inferscope_host::{SCHEMA_VERSION, Snapshot, SnapshotSource};

/// Inputs of a capture that do not come from the machine.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// Capture time, RFC 3339 UTC.
    pub captured_at: String,
    /// Tool name and version recorded in the snapshot.
    pub tool: String,
}

/// Read everything under `fs` into a Snapshot.
pub fn capture(fs: &FsRoot, opts: &CaptureOptions) -> Snapshot {
    capture_with_driver(fs, opts).0
}

/// [`capture`], also returning the driver answers (which `gather` records).
pub fn capture_with_driver(
    fs: &FsRoot,
    opts: &CaptureOptions,
) -> (Snapshot, driver::DriverCapture) {
    let mut problems = Vec::new();
    let host = host::probe_host(fs);
    let numa_nodes = numa::probe_numa(fs, &host.online_cpus, &mut problems);
    let pci_devices = pci::probe_pci(fs, &mut problems);
    let mut gpus = pci::gpus(&pci_devices);
    nvproc::add_unlabelled(fs, &pci_devices, &mut gpus);
    let nics = pci::nics(fs, &pci_devices);
    let settings = settings::probe_settings(fs, &host.online_cpus);
    let env = env::probe_env(fs);
    let max_cpu = host
        .online_cpus
        .known()
        .and_then(|c| c.ranges().last().map(|r| r.1))
        .unwrap_or(1023)
        .min(1 << 16);
    let driver_capture = driver::capture_driver(fs, max_cpu);
    let mut snapshot = Snapshot {
        schema_version: SCHEMA_VERSION,
        is_live: fs.is_live(),
        captured_at: opts.captured_at.clone(),
        source: SnapshotSource {
            root: fs.root().to_string_lossy().into_owned(),
            tool: opts.tool.clone(),
        },
        host,
        numa_nodes,
        pci_devices,
        gpus,
        nics,
        settings,
        env,
        capture_problems: problems,
        driver: inferscope_host::not_captured(),
        gpu_pairs: Vec::new(),
        cuda_order: inferscope_host::not_captured(),
    };
    driver::merge(&mut snapshot, driver_capture.clone());
    nvproc::fill_memory_nodes(fs, &mut snapshot);
    make_consistent(&mut snapshot);
    (snapshot, driver_capture)
}

/// Make what the kernel said agree with itself, so a capture always passes
/// [`Snapshot::validate`]: a device that claims a NUMA node with no
/// `/sys/devices/system/node/nodeN` gets an unknown node (with the claim as evidence), and a
/// bridge on a device's path that has no `/sys/bus/pci/devices` entry is reported.
fn make_consistent(s: &mut Snapshot) {
    use inferscope_host::{NumaNodeId, Reading, UnknownReason};
    let nodes: Vec<NumaNodeId> = s.numa_nodes.iter().map(|n| n.id).collect();
    let fix = |r: &mut Reading<NumaNodeId>, what: String, problems: &mut Vec<String>| {
        if let Some(id) = r.known().copied()
            && !nodes.contains(&id)
        {
            let msg = format!(
                "{what} claims NUMA node {id}, but /sys/devices/system/node/node{id} does not exist"
            );
            problems.push(msg.clone());
            *r = Reading::unknown(UnknownReason::Malformed, msg);
        }
    };
    let mut problems = std::mem::take(&mut s.capture_problems);
    for d in &mut s.pci_devices {
        fix(
            &mut d.numa_node,
            format!("PCI device {}", d.bus_id),
            &mut problems,
        );
    }
    for g in &mut s.gpus {
        fix(
            &mut g.numa_node,
            format!("GPU {}", g.pci_bus_id),
            &mut Vec::new(),
        );
    }
    for n in &mut s.nics {
        fix(
            &mut n.numa_node,
            format!("NIC {}", n.pci_bus_id),
            &mut Vec::new(),
        );
    }
    let known: std::collections::BTreeSet<_> = s.pci_devices.iter().map(|d| d.bus_id).collect();
    for d in &s.pci_devices {
        for b in &d.upstream_bridges {
            if !known.contains(b) {
                problems.push(format!(
                    "PCI device {}: bridge {b} on its path has no /sys/bus/pci/devices entry",
                    d.bus_id
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    s.capture_problems = problems;
}
