//! [`FsRoot`]: every sysfs/procfs read goes through one root directory.
//!
//! Reading the machine through a prefix (hwloc's `HWLOC_FSROOT`) is what makes the probe testable:
//! a fixture tree or an unpacked `gather` archive is read exactly like the live `/`. The root
//! also records what it read, so `gather` archives precisely the files the probe used, and it
//! turns every failure into a [`Reading`] whose evidence names the file (relative to the root, so
//! a gathered copy reproduces the live snapshot byte for byte).

use inferscope_formats::ParseError;
use inferscope_host::{Reading, UnknownReason};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// Largest file the probe will read (a 256-CPU `/proc/cpuinfo` is ~400 KiB).
pub const MAX_FILE_BYTES: u64 = 8 << 20;
/// Most directory entries the probe will list in one directory.
pub const MAX_DIR_ENTRIES: usize = 1 << 16;
/// Where a gather archive records the paths that were denied when it was made.
pub const DENIED_LIST: &str = ".inferscope-gather/denied.txt";

/// What a read failed with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FsError {
    /// Path as seen on the captured machine (`/proc/meminfo`).
    pub path: String,
    /// Reason class.
    pub reason: UnknownReason,
    /// Human-readable cause.
    pub message: String,
}

impl FsError {
    /// Convert into an unknown reading carrying this error as evidence.
    pub fn into_reading<T>(self) -> Reading<T> {
        let detail = self.to_string();
        Reading::unknown(self.reason, detail)
    }
}

/// Everything read through a root, for `gather`.
#[derive(Debug, Default, Clone)]
pub struct Recording {
    /// Files and their exact bytes as read.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Directories that were listed, and the subdirectories those listings showed.
    pub dirs: BTreeSet<String>,
    /// Symlinks and their targets as read.
    pub symlinks: BTreeMap<String, String>,
    /// Paths whose read was refused.
    pub denied: BTreeSet<String>,
}

/// A directory that stands for `/` of the machine being probed.
#[derive(Debug)]
pub struct FsRoot {
    root: PathBuf,
    live: bool,
    denied: BTreeSet<String>,
    recording: Option<RefCell<Recording>>,
}

fn lexical_normalise(rel: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str().unwrap_or("")),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    parts.join("/")
}

impl FsRoot {
    /// Read under `root`. `/` (or a path that resolves to it) is the live machine.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let live = std::fs::canonicalize(&root)
            .map(|p| p == Path::new("/"))
            .unwrap_or(false);
        let mut denied = BTreeSet::new();
        if !live && let Ok(text) = std::fs::read_to_string(root.join(DENIED_LIST)) {
            denied = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
        }
        FsRoot {
            root,
            live,
            denied,
            recording: None,
        }
    }

    /// This machine's own filesystem mounted at `root` (a container's read-only `/host` mount of
    /// the host's `/sys` and `/proc`): read under `root`, and treated as the live machine, so
    /// NVML, which always describes the machine running inferscope, is asked too.
    pub fn host_mount(root: impl Into<PathBuf>) -> Self {
        let mut fs = FsRoot::new(root);
        fs.live = true;
        fs.denied.clear();
        fs
    }

    /// Like [`FsRoot::new`], and remember every read for [`FsRoot::take_recording`].
    pub fn recording(root: impl Into<PathBuf>) -> Self {
        let mut fs = FsRoot::new(root);
        fs.recording = Some(RefCell::new(Recording::default()));
        fs
    }

    /// True when this root is the running machine's `/`.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What was read so far (empty unless made with [`FsRoot::recording`]).
    pub fn take_recording(&self) -> Recording {
        self.recording
            .as_ref()
            .map(|r| std::mem::take(&mut *r.borrow_mut()))
            .unwrap_or_default()
    }

    fn shown(rel: &str) -> String {
        format!("/{rel}")
    }

    fn error(rel: &str, e: &io::Error) -> FsError {
        let reason = match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => UnknownReason::NotPresent,
            io::ErrorKind::PermissionDenied => UnknownReason::PermissionDenied,
            _ => UnknownReason::ReadError,
        };
        let message = match reason {
            UnknownReason::NotPresent => "not present".to_string(),
            UnknownReason::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        FsError {
            path: Self::shown(rel),
            reason,
            message,
        }
    }

    fn check_denied(&self, rel: &str) -> Result<(), FsError> {
        if self.denied.contains(rel) {
            return Err(FsError {
                path: Self::shown(rel),
                reason: UnknownReason::PermissionDenied,
                message: "permission denied".into(),
            });
        }
        Ok(())
    }

    fn note_denied(&self, rel: &str, err: &FsError) {
        if err.reason == UnknownReason::PermissionDenied
            && let Some(r) = &self.recording
        {
            r.borrow_mut().denied.insert(rel.to_string());
        }
    }

    /// Read a file (at most [`MAX_FILE_BYTES`]) as bytes. `rel` has no leading slash.
    pub fn read_bytes(&self, rel: &str) -> Result<Vec<u8>, FsError> {
        self.check_denied(rel)?;
        let result = (|| {
            let f = std::fs::File::open(self.root.join(rel))?;
            let mut buf = Vec::new();
            f.take(MAX_FILE_BYTES + 1).read_to_end(&mut buf)?;
            Ok::<_, io::Error>(buf)
        })();
        match result {
            Ok(buf) if buf.len() as u64 > MAX_FILE_BYTES => Err(FsError {
                path: Self::shown(rel),
                reason: UnknownReason::Malformed,
                message: format!("larger than {MAX_FILE_BYTES} bytes; not read"),
            }),
            Ok(buf) => {
                if let Some(r) = &self.recording {
                    r.borrow_mut().files.insert(rel.to_string(), buf.clone());
                }
                Ok(buf)
            }
            Err(e) => {
                let err = Self::error(rel, &e);
                self.note_denied(rel, &err);
                Err(err)
            }
        }
    }

    /// Read a file as text (invalid UTF-8 is replaced, not fatal).
    pub fn read_string(&self, rel: &str) -> Result<String, FsError> {
        self.read_bytes(rel)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// List a directory's entry names, sorted; at most [`MAX_DIR_ENTRIES`].
    pub fn list_dir(&self, rel: &str) -> Result<Vec<String>, FsError> {
        self.check_denied(rel)?;
        let rd = std::fs::read_dir(self.root.join(rel)).map_err(|e| {
            let err = Self::error(rel, &e);
            self.note_denied(rel, &err);
            err
        })?;
        let mut names = Vec::new();
        let mut child_dirs = Vec::new();
        for entry in rd.take(MAX_DIR_ENTRIES) {
            let entry = entry.map_err(|e| Self::error(rel, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // A listing is an observation of its subdirectories too (e.g. `infiniband/mlx5_0`),
            // so gather must recreate them even when nothing inside was read.
            if self.recording.is_some() && entry.file_type().is_ok_and(|t| t.is_dir()) {
                child_dirs.push(format!("{rel}/{name}"));
            }
            names.push(name);
        }
        names.sort();
        if let Some(r) = &self.recording {
            let mut r = r.borrow_mut();
            r.dirs.insert(rel.to_string());
            r.dirs.extend(child_dirs);
        }
        Ok(names)
    }

    /// True when `rel` is a directory itself, not a symlink to one (reduced gathers store
    /// `/sys/bus/pci/devices/X` that way).
    pub fn is_plain_dir(&self, rel: &str) -> bool {
        self.check_denied(rel).is_ok()
            && std::fs::symlink_metadata(self.root.join(rel)).is_ok_and(|m| m.is_dir())
    }

    /// Read a symlink and resolve it lexically against its directory; returns the target as a
    /// root-relative path (`sys/devices/pci0000:00/0000:00:01.0`).
    pub fn resolve_link(&self, rel: &str) -> Result<String, FsError> {
        self.check_denied(rel)?;
        let target = std::fs::read_link(self.root.join(rel)).map_err(|e| {
            let err = Self::error(rel, &e);
            self.note_denied(rel, &err);
            err
        })?;
        let target_s = target.to_string_lossy().into_owned();
        if let Some(r) = &self.recording {
            r.borrow_mut()
                .symlinks
                .insert(rel.to_string(), target_s.clone());
        }
        let joined = if target.is_absolute() {
            target_s.trim_start_matches('/').to_string()
        } else {
            let parent = Path::new(rel)
                .parent()
                .map(|p| p.to_string_lossy().into_owned());
            format!("{}/{}", parent.unwrap_or_default(), target_s)
        };
        Ok(lexical_normalise(&joined))
    }

    /// Read a file and parse it; the error names the file and the place.
    pub fn parse<T>(
        &self,
        rel: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Reading<T> {
        match self.read_string(rel) {
            Ok(text) => match parse(&text) {
                Ok(v) => Reading::value(v),
                Err(e) => Reading::unknown(UnknownReason::Malformed, format!("/{rel}: {e}")),
            },
            Err(e) => e.into_reading(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_resolution_of_sysfs_links() {
        assert_eq!(
            lexical_normalise("sys/bus/pci/devices/../../../devices/pci0000:00/0000:00:01.0"),
            "sys/devices/pci0000:00/0000:00:01.0"
        );
    }

    #[test]
    fn missing_file_is_not_present_with_root_relative_path() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FsRoot::new(dir.path());
        assert!(!fs.is_live());
        let e = fs.read_string("proc/meminfo").unwrap_err();
        assert_eq!(e.reason, UnknownReason::NotPresent);
        assert_eq!(e.to_string(), "/proc/meminfo: not present");
    }

    #[test]
    fn oversized_file_is_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("big")).unwrap();
        f.set_len(MAX_FILE_BYTES + 10).unwrap();
        let fs = FsRoot::new(dir.path());
        let e = fs.read_bytes("big").unwrap_err();
        assert_eq!(e.reason, UnknownReason::Malformed);
    }

    #[test]
    fn denied_list_replays_permission_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".inferscope-gather")).unwrap();
        std::fs::write(dir.path().join(DENIED_LIST), "proc/self/environ\n").unwrap();
        let fs = FsRoot::new(dir.path());
        let e = fs.read_string("proc/self/environ").unwrap_err();
        assert_eq!(e.reason, UnknownReason::PermissionDenied);
    }
}
