//! `inferscope topo`: the link matrix and NUMA layout of a machine, a tree or a snapshot file.

use crate::render;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Render the topology of the chosen source.
pub fn run(
    snapshot: Option<&Path>,
    root: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let snap = match (snapshot, root) {
        (Some(file), _) => crate::load::snapshot_file(file)?,
        (None, Some(dir)) => super::capture_root(dir)?,
        (None, None) => super::capture_root(Path::new("/"))?,
    };
    if !snap.gpus.is_empty()
        && let Some(note) = super::driver_note(&snap)
    {
        eprintln!("{note}");
    }
    if json {
        render::topo::write_json(&snap, out)?;
    } else {
        render::topo::write_text(&snap, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Render pasted `nvidia-smi topo -m` text through the same view and JSON layout.
pub fn run_imported(file: &Path, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let input = inferscope_probe::import::read_input(file)?;
    let matrix = inferscope_formats::nvidia_smi_topo::parse(&input.text)
        .map_err(|e| input.error(file, e))?;
    if json {
        let report = render::topo::TopoReport {
            matrix,
            numa_nodes: Vec::new(),
            cuda_devices: None,
        };
        serde_json::to_writer_pretty(&mut *out, &render::versioned::versioned(&report))?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "From {} (nvidia-smi text, not this machine)",
            file.display()
        )?;
        writeln!(out)?;
        render::topo::write_matrix(&matrix, out)?;
    }
    Ok(ExitCode::SUCCESS)
}
