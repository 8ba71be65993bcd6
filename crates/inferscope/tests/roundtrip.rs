//! Lossless round trips: snapshot → JSON → load → JSON is byte-identical, and a gather archive
//! unpacked and read with `--root` reproduces the snapshot it was made from.

mod common;

use inferscope_host::Snapshot;
use inferscope_probe::{FsRoot, capture, gather};

fn json(s: &Snapshot) -> String {
    serde_json::to_string_pretty(s).unwrap()
}

#[test]
fn snapshot_json_round_trip_is_byte_identical() {
    let mut names = common::host_fixtures();
    names.push("(live)".into());
    for name in names {
        let snap = if name == "(live)" {
            capture(&FsRoot::new("/"), &common::opts())
        } else {
            common::capture_fixture(&name)
        };
        let first = json(&snap);
        let loaded = inferscope::load::parse_snapshot(&first, &name).unwrap();
        assert_eq!(loaded, snap, "{name}");
        assert_eq!(json(&loaded), first, "{name}");
    }
}

/// Unpack a gather archive and capture it.
fn replay(archive: &[u8]) -> (tempfile::TempDir, Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    let gz = flate2::read::GzDecoder::new(archive);
    tar::Archive::new(gz).unpack(dir.path()).unwrap();
    let snap = capture(&FsRoot::new(dir.path()), &common::opts());
    (dir, snap)
}

fn same_apart_from_provenance(mut a: Snapshot, mut b: Snapshot) {
    for s in [&mut a, &mut b] {
        s.is_live = false;
        s.source.root = String::new();
        s.captured_at = String::new();
    }
    assert_eq!(json(&a), json(&b));
}

#[test]
fn gather_of_live_machine_replays_to_the_same_snapshot() {
    let mut archive = Vec::new();
    let live = gather::gather(std::path::Path::new("/"), &common::opts(), &mut archive).unwrap();
    assert!(live.is_live);
    let (_dir, replayed) = replay(&archive);
    assert!(!replayed.is_live);
    same_apart_from_provenance(live, replayed);
}

#[test]
fn gather_of_each_fixture_tree_replays_to_the_same_snapshot() {
    for name in common::host_fixtures() {
        let root = common::repo()
            .join("fixtures/hosts")
            .join(&name)
            .join("root");
        let mut archive = Vec::new();
        let original = gather::gather(&root, &common::opts(), &mut archive).unwrap();
        assert!(!original.gpus.is_empty(), "{name}");
        let (_dir, replayed) = replay(&archive);
        same_apart_from_provenance(original, replayed);
    }
}

#[test]
fn gather_keeps_only_relevant_environment_and_redacts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("proc/self")).unwrap();
    std::fs::write(
        root.join("proc/self/environ"),
        b"PATH=/usr/bin\0HF_TOKEN=hf_secret\0CUDA_VISIBLE_DEVICES=1,0\0HOME=/root\0",
    )
    .unwrap();
    let mut archive = Vec::new();
    gather::gather(root, &common::opts(), &mut archive).unwrap();
    let gz = flate2::read::GzDecoder::new(archive.as_slice());
    let mut ar = tar::Archive::new(gz);
    let mut environ = None;
    for entry in ar.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_string_lossy() == "proc/self/environ" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut entry, &mut s).unwrap();
            environ = Some(s);
        }
    }
    let environ = environ.expect("environ archived");
    assert!(!environ.contains("hf_secret"));
    assert!(!environ.contains("PATH="));
    assert!(environ.contains("CUDA_VISIBLE_DEVICES=1,0"));
    assert!(environ.contains("HF_TOKEN=<redacted>"));
}

#[test]
fn committed_gather_archive_of_the_dev_machine_still_reads() {
    let path = common::repo().join("fixtures/hosts/dev-vm-2core-nogpu/gather.tar.gz");
    let archive = std::fs::read(path).unwrap();
    let (_dir, snap) = replay(&archive);
    snap.validate().unwrap();
    assert!(snap.gpus.is_empty());
    assert_eq!(snap.numa_nodes.len(), 1);
    assert_eq!(snap.host.threads.known(), Some(&2));
}
