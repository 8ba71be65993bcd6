//! The journal on disk (I/O): its fingerprint, appending lines, and resuming from it. The
//! line format and its reader are pure, in [`super`].

use super::secrets;
use super::session::{Cand, Config, Host, hide, hide_json, say};
use super::{JOURNAL_VERSION, JournalLine, State, read_journal};
use crate::record;
use anyhow::{Context, bail};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Everything a journaled run or skip depends on: the servers, the load and requests, the
/// objective (with capacity's target), and the planner's GPU. Not: the budget, repeats,
/// timeouts of starting and stopping, the output folder (a resume may change them). Secrets
/// redacted: the journal is written to disk (two runs differing only in a secret measure the
/// same thing).
pub fn fingerprint(a: &Config) -> String {
    let sets: Vec<String> = a
        .sets
        .iter()
        .map(|s| {
            let v: Vec<String> = s
                .values
                .iter()
                .map(|v| secrets::shown_value(&s.name, v))
                .collect();
            format!("{}={}", s.name, v.join(","))
        })
        .collect();
    let load = match a.rate {
        Some(r) => format!("rate {r}"),
        None => format!("concurrency {}", a.concurrency),
    };
    hide(&format!(
        "server `{}` baseline `{}` sets [{}] workload {} {load} duration {:?} warmup {} objective {} slo {} seed {} gpus {:?} numa {:?} api {:?} model {:?} max_tokens {} timeout {:?} idle_timeout {:?} attainment {} max_probes {} plan_gpu {:?} plan_gpu_memory_gib {:?}",
        secrets::shown_line(&a.server),
        secrets::shown_line(a.baseline.as_deref().unwrap_or("")),
        sets.join(" "),
        a.workload,
        a.duration,
        a.warmup,
        a.objective().metric(),
        serde_json::to_string(&a.slo).unwrap_or_default(),
        a.seed,
        a.gpus,
        a.numa_node,
        a.api,
        a.model,
        a.max_tokens,
        a.timeout,
        a.idle_timeout,
        a.attainment,
        a.max_probes,
        a.plan_gpu,
        a.plan_gpu_memory_gib
    ))
}

/// Write `v` as pretty JSON, secrets hidden.
pub fn write_json_file(path: &Path, v: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(&hide_json(serde_json::to_value(v)?))?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Append one line (secrets hidden), synced: a crash loses at most the line being written.
pub fn append(path: &Path, line: &JournalLine) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut text = serde_json::to_string(&hide_json(serde_json::to_value(line)?))?;
    text.push('\n');
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_data())
        .with_context(|| format!("writing {}", path.display()))
}

/// The directory a journal's trace paths are relative to.
pub fn dir_of(journal: &Path) -> PathBuf {
    journal.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Read the journal (writing its header when new) and restore each candidate's records.
pub fn resume(
    a: &Config,
    host: &dyn Host,
    journal: &Path,
    fp: &str,
    cands: &mut [Cand],
) -> anyhow::Result<()> {
    // The one bounded reader (docs/SECURITY.md): a huge journal is refused, never read whole.
    let read = host.read_bytes(journal).and_then(|b| {
        String::from_utf8(b).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a tune journal: not UTF-8 text",
            )
        })
    });
    let (old, fresh) = match read {
        Ok(text) => (
            read_journal(&journal.display().to_string(), &text, fp).map_err(anyhow::Error::msg)?,
            // an empty file (created by hand, or cut before its header) gets one
            text.trim().is_empty(),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), true),
        Err(e) => bail!("{}: {e}", journal.display()),
    };
    if fresh {
        append(
            journal,
            &JournalLine::Header {
                version: JOURNAL_VERSION,
                fingerprint: fp.to_string(),
            },
        )?;
    }
    let mut resumed = 0usize;
    for line in old {
        let key = match &line {
            JournalLine::Run { settings, .. }
            | JournalLine::Failed { settings, .. }
            | JournalLine::Skipped { settings, .. } => settings.clone(),
            JournalLine::Header { .. } => continue,
        };
        let Some(c) = cands.iter_mut().find(|c| c.shown == key) else {
            continue;
        };
        resumed += 1;
        restore(a, journal, c, line)?;
    }
    if resumed > 0 {
        say(
            a.quiet,
            &format!("resuming from {}: {resumed} records", journal.display()),
        );
    }
    Ok(())
}

/// Apply one journal line to its candidate (a run's trace is read back from its file).
fn restore(a: &Config, journal: &Path, c: &mut Cand, line: JournalLine) -> anyhow::Result<()> {
    match line {
        JournalLine::Run {
            command,
            result,
            trace,
            capacity,
            ..
        } => {
            let path = dir_of(journal).join(&trace);
            let f = std::fs::File::open(&path).with_context(|| {
                format!(
                    "{}: its trace {} is missing",
                    journal.display(),
                    path.display()
                )
            })?;
            let recs = record::read_trace(&mut std::io::BufReader::new(f))
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let v = a.objective().of(&result, capacity.as_ref());
            c.push_run((*result, recs, capacity), v);
            c.command = command;
        }
        JournalLine::Failed {
            command,
            reason,
            log_tail,
            ..
        } => {
            c.state = State::Failed;
            c.reason = Some(reason);
            c.log_tail = Some(log_tail);
            c.command = command;
        }
        JournalLine::Skipped { reason, .. } => {
            c.state = State::Skipped;
            c.reason = Some(reason);
        }
        JournalLine::Header { .. } => {}
    }
    Ok(())
}

/// `path` relative to `base` when it is under it, else as it is.
pub fn relative(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (p, b) = (abs(path), abs(base));
    p.strip_prefix(&b)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}
