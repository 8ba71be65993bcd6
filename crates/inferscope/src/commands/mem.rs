//! `inferscope mem oom` and `inferscope mem snapshot`: memory forensics on files users already
//! have (a pasted OOM message, a `torch.cuda.memory._dump_snapshot()` pickle).

use crate::render;
use anyhow::{Context, bail};
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

/// Largest OOM text read (a pasted log excerpt).
pub const MAX_OOM_INPUT: u64 = 4 << 20;

fn read_text(file: Option<&Path>) -> anyhow::Result<(String, String)> {
    let mut bytes = Vec::new();
    let name = match file {
        None => "<stdin>".to_string(),
        Some(p) if p == Path::new("-") => "<stdin>".to_string(),
        Some(p) => p.display().to_string(),
    };
    if name == "<stdin>" {
        std::io::stdin()
            .take(MAX_OOM_INPUT + 1)
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
    } else if let Some(p) = file {
        std::fs::File::open(p)
            .with_context(|| format!("cannot open {name}"))?
            .take(MAX_OOM_INPUT + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {name}"))?;
    }
    // Refuse rather than silently analyse a prefix of a huge log (a 1 GB line is not a paste).
    if bytes.len() as u64 > MAX_OOM_INPUT {
        bail!(
            "{name}: larger than {} MiB; pass the excerpt around the out-of-memory error instead of the whole log",
            MAX_OOM_INPUT >> 20
        );
    }
    if bytes.contains(&0) || std::str::from_utf8(&bytes).is_err() {
        bail!(
            "{name}: binary data, not an out-of-memory message (expected text: a log excerpt or traceback)"
        );
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), name))
}

/// `mem oom [FILE|-]`.
pub fn oom(file: Option<&Path>, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (text, name) = read_text(file)?;
    let report = match inferscope_formats::oom::parse(&text) {
        Ok(r) => r,
        Err(e) => bail!(
            "{name}: not an out-of-memory message: no \"CUDA/HIP out of memory. Tried to allocate ...\" \
             sentence and no known server wrapper of one (first line: {})",
            e.found
        ),
    };
    let analysis = inferscope_mem::oom::diagnose(&report);
    if json {
        serde_json::to_writer_pretty(&mut *out, &render::versioned::versioned(&analysis))?;
        writeln!(out)?;
    } else {
        render::mem::write_oom(&analysis, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `inferscope mem ...`.
#[derive(Debug, clap::Subcommand)]
pub enum MemCommand {
    /// Parse a PyTorch/vLLM/TGI out-of-memory message and say why it happened and what helps.
    Oom {
        /// File holding the message (a log excerpt or traceback is fine); `-` or nothing reads
        /// standard input.
        file: Option<std::path::PathBuf>,
        /// Print JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
    /// Read an engine's start-up log (the engines read: `crate::help::startup_about`): the
    /// memory the engine measured, the planner's prediction beside it, and for a failed start-up
    /// the diagnosis and fixes.
    #[command(about = crate::help::startup_about())]
    Startup {
        /// The log (pasted or piped; prefixes, colours and interleaved ranks are fine); `-` or
        /// nothing reads standard input.
        file: Option<std::path::PathBuf>,
        /// Print JSON (the record shape of the repository's start-up fixtures).
        #[arg(long)]
        json: bool,
        /// Model id for the prediction when the log does not name it (or names a local path).
        #[arg(long)]
        model: Option<String>,
        /// GPU name for the prediction when the log does not print one (e.g. H100, L4).
        #[arg(long)]
        gpu: Option<String>,
        /// GPUs used, when the log does not say.
        #[arg(long)]
        gpus: Option<u32>,
    },
    /// Analyse a `torch.cuda.memory._dump_snapshot()` pickle (read without executing it):
    /// segments, fragmentation, private pools, top allocation sites, expandable segments.
    Snapshot {
        /// The pickle.
        file: std::path::PathBuf,
        /// Also write an SVG map of the segments to OUT.
        #[arg(long, value_name = "OUT")]
        svg: Option<std::path::PathBuf>,
        /// Print JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
}

/// Dispatch `mem` subcommands.
pub fn run(cmd: MemCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match cmd {
        MemCommand::Oom { file, json } => oom(file.as_deref(), json, out),
        MemCommand::Snapshot { file, svg, json } => snapshot(&file, svg.as_deref(), json, out),
        MemCommand::Startup {
            file,
            json,
            model,
            gpu,
            gpus,
        } => startup(
            file.as_deref(),
            json,
            &inferscope_mem::startup::Hints {
                model,
                gpu,
                gpu_count: gpus,
                model_arch: None,
                model_error: None,
            },
            out,
        ),
    }
}

/// `mem snapshot FILE.pickle`.
pub fn snapshot(
    file: &Path,
    svg: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    use inferscope_formats::torch_memory_snapshot as tms;
    let name = file.display().to_string();
    let open = || {
        std::fs::File::open(file)
            .map(std::io::BufReader::new)
            .with_context(|| format!("cannot open {name}"))
    };
    let len = std::fs::metadata(file)
        .with_context(|| format!("cannot open {name}"))?
        .len();
    if len > tms::MAX_FILE_BYTES {
        bail!(
            "{name}: {} MiB is larger than the {} MiB this build reads",
            len >> 20,
            tms::MAX_FILE_BYTES >> 20
        );
    }
    if let Err(e) = tms::scan(open()?, len) {
        bail!("{name}: {e}");
    }
    let snap = match tms::decode(open()?, len) {
        Ok(s) => s,
        Err(e) => bail!("{name}: {e}"),
    };
    let analysis = inferscope_mem::snapshot::analyse(&snap);
    if let Some(path) = svg {
        std::fs::write(path, inferscope_mem::snapshot::svg(&snap))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &render::versioned::versioned(&analysis))?;
        writeln!(out)?;
    } else {
        render::mem::write_snapshot(&analysis, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `mem startup [FILE|-]`: streamed, so a log of any size is read in bounded memory.
pub fn startup(
    file: Option<&Path>,
    json: bool,
    hints: &inferscope_mem::startup::Hints,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let report = startup_report(file, hints)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &render::versioned::versioned(&report))?;
        writeln!(out)?;
    } else {
        render::mem::write_startup(&report, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A start-up log read and analysed as `mem startup` does (also `bench --startup-log`).
pub fn startup_report(
    file: Option<&Path>,
    hints: &inferscope_mem::startup::Hints,
) -> anyhow::Result<inferscope_mem::startup::StartupReport> {
    use inferscope_formats::startup_log;
    let stdin = file.is_none_or(|p| p == Path::new("-"));
    let name = match file {
        Some(p) if !stdin => p.display().to_string(),
        _ => "<stdin>".to_string(),
    };
    // Guarded: NULs or an endless line (`< /dev/zero`) end the read with the line named.
    let input: Box<dyn Read> = if stdin {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(file.unwrap_or(Path::new("-")))
                .with_context(|| format!("cannot open {name}"))?,
        )
    };
    // LMDeploy's room reads its own lines from the same stream (lmdeploy::log::Tee)
    use inferscope_plan::engines::lmdeploy::log as lmdeploy_log;
    let mut r = std::io::BufReader::with_capacity(
        1 << 16,
        lmdeploy_log::Tee::new(inferscope_formats::line_guard::LineGuard::new(input)),
    );
    let parsed = startup_log::parse(&mut r);
    let trip = r.get_ref().get_ref().trip();
    let parsed = lmdeploy_log::merge(parsed, &r.into_inner().finish());
    let log = match (parsed, trip) {
        (_, Some(trip)) => bail!("{name}: {trip}"),
        (Ok(l), None) => l,
        (Err(e), None) => bail!("{name}: {e}"),
    };
    // A local model folder (given or named by the log) is read like `plan` reads it.
    let mut hints = hints.clone();
    let named = hints.model.clone().or_else(|| {
        ["model", "model_path", "model_id", "model_tag"]
            .iter()
            .find_map(|k| log.arg(k).map(str::to_string))
    });
    if hints.model_arch.is_none()
        && let Some(named) = named
    {
        resolve_named(&named, &name, &mut hints)?;
    }
    Ok(inferscope_mem::startup::analyse(&log, &hints))
}

/// Resolve the model a start-up names (or `--model`) the way `plan` does (one function,
/// [`inferscope_probe::model_source::resolve_model_with`]): a folder, the Hugging Face cache, the
/// catalog, then the Hub — asked only for the name as given, never for a repo id guessed from a
/// path. A folder that cannot be read is an error; a name that cannot be resolved leaves the
/// report without a prediction, saying why (as before: the log's analysis still stands).
fn resolve_named(
    named: &str,
    log_name: &str,
    hints: &mut inferscope_mem::startup::Hints,
) -> anyhow::Result<()> {
    if Path::new(named).is_dir() {
        let model = inferscope_probe::model_source::resolve_model(named, None)
            .with_context(|| format!("{log_name}: cannot read the model folder {named}"))?;
        hints.model_arch = Some((named.to_string(), model.arch));
        return Ok(());
    }
    let mut first_err = None;
    for (i, candidate) in inferscope_mem::startup::model_candidates(named)
        .into_iter()
        .enumerate()
    {
        match inferscope_probe::model_source::resolve_model_with(&candidate, None, i == 0) {
            Ok(m) => {
                hints.model_arch = Some((candidate, m.arch));
                return Ok(());
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        hints.model_error = Some(format!("model {named:?}: {e}"));
    }
    Ok(())
}
