//! `inferscope diff A.json B.json [C.json ...]`: what differs between nodes, odd one out first.
//! Each argument is a snapshot file or an exporter's URL (`http://node:9400`, whose `/snapshot`
//! is fetched). Exit 0 when every compared fact is equal, 1 when some differ (like diff(1)) or a
//! node did not answer, 2 on errors (a file that does not load, fewer than two snapshots).

use inferscope_probe::fetch;

use inferscope_fleet::diff;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `inferscope diff` arguments.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Snapshot files written by `inferscope snapshot`, or exporters' URLs
    /// (`http://node:9400`: its /snapshot is fetched), one per node (at least two).
    #[arg(value_name = "SNAPSHOT", num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Time allowed for each URL's whole fetch (30, 30s, 2m); a node that takes longer is
    /// reported as not answering.
    #[arg(long, value_name = "D", default_value = "30s", value_parser = super::fetch_timeout_arg)]
    pub timeout: std::time::Duration,
}

fn url_arg(f: &std::path::Path) -> Option<&str> {
    f.to_str().filter(|s| fetch::is_url(s))
}

/// Column names: file stems, or whole paths when two stems collide.
fn names(files: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = files
        .iter()
        .map(|f| {
            if let Some(u) = url_arg(f) {
                return fetch::short_name(u);
            }
            f.file_name()
                .map(|n| n.to_string_lossy())
                .map(|n| n.strip_suffix(".json").unwrap_or(&n).to_string())
                .unwrap_or_else(|| f.display().to_string())
        })
        .collect();
    let unique = stems
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == stems.len();
    if unique {
        stems
    } else {
        files
            .iter()
            .map(|f| fetch::shown(&f.display().to_string()))
            .collect()
    }
}

/// Compare and print.
pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // URLs first, all at once; a file that does not load is an error, a node that does not
    // answer is reported beside the comparison.
    let urls: Vec<String> = args
        .files
        .iter()
        .filter_map(|f| url_arg(f).map(str::to_string))
        .collect();
    let mut fetched = if urls.is_empty() {
        Vec::new()
    } else {
        fetch::fetch_all(&urls, args.timeout)?
    }
    .into_iter();
    let mut snaps = Vec::new();
    let mut missing = Vec::new();
    for (f, name) in args.files.iter().zip(names(&args.files)) {
        match url_arg(f) {
            Some(u) => match fetched.next() {
                Some(Ok(s)) => snaps.push((name, s)),
                Some(Err(error)) => missing.push(serde_json::json!({
                    "name": name, "source": fetch::shown(u), "error": error,
                })),
                None => anyhow::bail!("{}: not fetched", fetch::shown(u)),
            },
            None => snaps.push((name, crate::load::snapshot_file(f)?)),
        }
    }
    if snaps.len() < 2 {
        let why: Vec<String> = missing
            .iter()
            .map(|m| m["error"].as_str().unwrap_or_default().to_string())
            .collect();
        anyhow::bail!(
            "only {} of {} nodes gave a snapshot; need two to compare ({})",
            snaps.len(),
            args.files.len(),
            why.join("; ")
        );
    }
    let named: Vec<(String, &inferscope_host::Snapshot)> =
        snaps.iter().map(|(n, s)| (n.clone(), s)).collect();
    let d = diff::diff(&named);
    if args.json {
        // schema_version is put first by `versioned` (a json! map sorts its keys).
        let v = serde_json::json!({
            "identical": d.identical(),
            "nodes": d.nodes,
            "compared_fields": d.compared_fields,
            "differences": d.differences,
            "unreachable": missing,
        });
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&v))?;
        writeln!(out)?;
    } else {
        out.write_all(crate::render::fleet::diff_text(&d).as_bytes())?;
        for m in &missing {
            writeln!(
                out,
                "not compared: {} ({})",
                m["name"].as_str().unwrap_or_default(),
                m["error"].as_str().unwrap_or_default()
            )?;
        }
    }
    // A node that did not answer leaves the fleet unconfirmed: not "identical".
    Ok(if d.identical() && missing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
