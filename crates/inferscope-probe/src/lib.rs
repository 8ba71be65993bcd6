//! # inferscope-probe
//!
//! The only crate that reads the live machine. Everything goes through an [`FsRoot`], so the
//! same code reads `/`, a fixture tree, or an unpacked `gather` archive; nothing here needs root
//! or a GPU. What cannot be read becomes an unknown [`inferscope_model::Reading`] naming the file,
//! never a zero and never a panic.
//!
//! The clock is not read here either: the caller passes the capture time in
//! [`CaptureOptions`], which keeps capture deterministic for tests.

pub mod env;
pub mod fsroot;
pub mod gather;
pub mod host;
pub mod numa;
pub mod pci;
pub mod settings;

pub use fsroot::{FsError, FsRoot};
use inferscope_model::{SCHEMA_VERSION, Snapshot, SnapshotSource};

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
    let mut problems = Vec::new();
    let host = host::probe_host(fs);
    let numa_nodes = numa::probe_numa(fs, &mut problems);
    let pci_devices = pci::probe_pci(fs, &mut problems);
    let gpus = pci::gpus(&pci_devices);
    let nics = pci::nics(fs, &pci_devices);
    let settings = settings::probe_settings(fs, &host.online_cpus);
    let env = env::probe_env(fs);
    Snapshot {
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
    }
}
