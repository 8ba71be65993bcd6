//! `inferscope gather --out FILE.tar.gz`: archive what the probe reads.

use anyhow::Context;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Gather under `root` into `file`; prints a one-line summary.
pub fn run(root: &Path, file: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if !root.is_dir() {
        anyhow::bail!("--root {}: not a directory", root.display());
    }
    let tmp = file.with_extension("partial");
    let f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let snapshot = inferscope_probe::gather::gather(root, &super::capture_options(), &mut w)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    w.flush()
        .and_then(|_| std::fs::rename(&tmp, file))
        .with_context(|| format!("cannot write {}", file.display()))?;
    writeln!(
        out,
        "wrote {}: {} GPUs, {} NICs, {} NUMA nodes, {} PCI functions; `inferscope snapshot --root DIR` on the unpacked archive reproduces this machine",
        file.display(),
        snapshot.gpus.len(),
        snapshot.nics.len(),
        snapshot.numa_nodes.len(),
        snapshot.pci_devices.len()
    )?;
    Ok(ExitCode::SUCCESS)
}
