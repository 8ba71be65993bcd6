//! `gather`: archive exactly what the probe read, so the archive *is* the machine for
//! `snapshot --root` (hwloc's `hwloc-gather-topology` idea).
//!
//! The archive is built from the probe's own recording, not by copying paths again: procfs files
//! report size 0 and change between reads, so what was parsed is what is stored. Entries are
//! written in sorted order with fixed metadata (mode, mtime 0), so the same machine state gives the
//! same archive. NVML's answers are stored as JSON beside the files, so a replay shows the
//! driver facts of the gathered machine. The environment file is reduced to the variables the probe keeps, with secrets
//! already redacted, because gather archives are attached to bug reports.

use crate::env;
use crate::fsroot::{DENIED_LIST, FsRoot, Recording};
use crate::{CaptureOptions, capture_with_driver, driver};
use flate2::Compression;
use flate2::write::GzEncoder;
use inferscope_formats::environ;
use inferscope_host::Snapshot;
use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::Path;

/// Capture the machine under `root` and write the archive of what was read to `out`.
/// Returns the snapshot that the archive reproduces.
pub fn gather(root: &Path, opts: &CaptureOptions, out: impl Write) -> io::Result<Snapshot> {
    let fs = FsRoot::recording(root);
    let (snapshot, driver_capture) = capture_with_driver(&fs, opts);
    let mut rec = fs.take_recording();
    sanitise(&mut rec);
    // NVML answers are not files; record them so the archive replays them.
    let recorded = serde_json::to_vec_pretty(&driver_capture).map_err(io::Error::other)?;
    rec.files.insert(driver::RECORDED.to_string(), recorded);
    write_archive(&rec, out)?;
    Ok(snapshot)
}

fn sanitise(rec: &mut Recording) {
    for (path, bytes) in rec.files.iter_mut() {
        let Some(rest) = path.strip_prefix("proc/") else {
            continue;
        };
        match rest.split_once('/') {
            // Any process's environment (`self` today): only the variables the probe keeps.
            Some((_, "environ")) => {
                let kept = env::filter(environ::parse(bytes));
                let mut clean = Vec::new();
                for (k, v) in kept {
                    clean.extend_from_slice(k.as_bytes());
                    clean.push(b'=');
                    clean.extend_from_slice(v.as_bytes());
                    clean.push(0);
                }
                *bytes = clean;
            }
            // The kernel command line (`proc/cmdline`) and everything else: URL credentials and
            // token-shaped strings, should any appear in text.
            _ => {
                if let Ok(text) = std::str::from_utf8(bytes)
                    && let std::borrow::Cow::Owned(clean) = inferscope_host::redact::scrub(text)
                {
                    *bytes = clean.into_bytes();
                }
            }
        }
    }
}

fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h
}

fn write_archive(rec: &Recording, out: impl Write) -> io::Result<()> {
    let gz = GzEncoder::new(out, Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);

    // Every directory that must exist: listed ones and all parents of every entry.
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    let add_parents = |p: &str, dirs: &mut BTreeSet<String>| {
        let mut cur = Path::new(p).parent();
        while let Some(d) = cur {
            let s = d.to_string_lossy();
            if s.is_empty() {
                break;
            }
            dirs.insert(s.into_owned());
            cur = d.parent();
        }
    };
    for d in &rec.dirs {
        if !d.is_empty() && !rec.symlinks.contains_key(d) {
            dirs.insert(d.clone());
        }
        add_parents(d, &mut dirs);
    }
    for p in rec.files.keys().chain(rec.symlinks.keys()) {
        add_parents(p, &mut dirs);
    }
    // A path recorded as a symlink must not also be created as a directory.
    for s in rec.symlinks.keys() {
        dirs.remove(s);
    }
    for d in &dirs {
        let mut h = header(tar::EntryType::Directory, 0, 0o755);
        tar.append_data(&mut h, format!("{d}/"), io::empty())?;
    }
    for (path, target) in &rec.symlinks {
        let mut h = header(tar::EntryType::Symlink, 0, 0o777);
        tar.append_link(&mut h, path, target)?;
    }
    for (path, bytes) in &rec.files {
        let mut h = header(tar::EntryType::Regular, bytes.len() as u64, 0o444);
        tar.append_data(&mut h, path, bytes.as_slice())?;
    }
    let denied: String = rec.denied.iter().map(|p| format!("{p}\n")).collect();
    let mut h = header(tar::EntryType::Regular, denied.len() as u64, 0o444);
    tar.append_data(&mut h, DENIED_LIST, denied.as_bytes())?;
    tar.into_inner()?.finish()?;
    Ok(())
}
