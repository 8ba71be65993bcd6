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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::session::Objective;
    use std::time::Duration;

    /// A named change to the settings.
    type Change = (&'static str, fn(&mut Config));

    fn config() -> Config {
        Config {
            server: "vllm serve m --port {port} --max-num-seqs {seqs} --api-key sk-abcdefgh".into(),
            sets: vec!["seqs=64,128".parse().unwrap()],
            baseline: None,
            workload: "random:in=512,out=128".parse().unwrap(),
            slo: Some("ttft=500ms".parse().unwrap()),
            objective: None,
            concurrency: 8,
            rate: None,
            duration: Duration::from_secs(30),
            warmup: "5s".into(),
            repeat: 3,
            budget: None,
            journal: None,
            out: "out".into(),
            startup_timeout: Duration::from_secs(600),
            grace: Duration::from_secs(30),
            gpus: None,
            numa_node: None,
            plan_gpu: None,
            plan_gpu_memory_gib: None,
            attainment: 0.99,
            max_probes: 8,
            serve_port: 8000,
            api: "completions".parse().unwrap(),
            model: None,
            max_tokens: 128,
            timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            seed: 0,
            quiet: true,
            started_at: "2026-12-04T11:00:00Z".into(),
            tool: "inferscope test".into(),
        }
    }

    #[test]
    fn the_fingerprint_changes_with_what_is_measured_only() {
        let base = fingerprint(&config());
        let changed: [Change; 8] = [
            ("a set value", |c| {
                c.sets = vec!["seqs=64,256".parse().unwrap()]
            }),
            ("the server", |c| {
                c.server = c.server.replace("vllm", "other-engine")
            }),
            ("the load", |c| c.concurrency = 16),
            ("the duration", |c| c.duration = Duration::from_secs(31)),
            ("the SLO", |c| c.slo = Some("ttft=400ms".parse().unwrap())),
            ("the objective", |c| {
                c.objective = Some(Objective::Throughput)
            }),
            ("the workload", |c| {
                c.workload = "random:in=256,out=128".parse().unwrap()
            }),
            ("the planner's GPU", |c| {
                c.plan_gpu = Some("h100-sxm".into())
            }),
        ];
        for (what, f) in changed {
            let mut c = config();
            f(&mut c);
            assert_ne!(fingerprint(&c), base, "{what}");
        }
        let same: [Change; 5] = [
            ("the budget", |c| c.budget = Some(Duration::from_secs(60))),
            ("the repeats", |c| c.repeat = 5),
            ("the output folder", |c| c.out = "elsewhere".into()),
            ("the grace", |c| c.grace = Duration::from_secs(1)),
            // the journal is on disk: a secret never reaches it, so it cannot tell runs apart
            ("a secret", |c| {
                c.server = c.server.replace("sk-abcdefgh", "sk-zyxwvuts")
            }),
        ];
        for (what, f) in same {
            let mut c = config();
            f(&mut c);
            assert_eq!(fingerprint(&c), base, "{what}");
        }
        assert!(!base.contains("sk-abcdefgh"), "{base}");
    }
}
