//! Issue 32 (e): `compare`'s results, `tune`'s journal and `check --plan` go through the one
//! bounded reader (`inferscope::input`, docs/SECURITY.md): a file over 64 MiB is refused with one
//! line naming it, exit 2, without reading it whole. The files are sparse: 64 MiB + 1 byte of
//! zeros costs no disk.

mod common;

use common::inferscope;

fn oversized(dir: &std::path::Path, name: &str) -> String {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    path.display().to_string()
}

fn assert_refused(args: &[&str], path: &str) {
    let (code, out, err) = inferscope(args);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err.lines().next().unwrap_or(""),
        format!(
            "inferscope: error: {path}: larger than 64 MiB, the most inferscope reads from one input file"
        ),
    );
}

#[test]
fn compare_refuses_an_oversized_result() {
    let dir = tempfile::tempdir().unwrap();
    let big = oversized(dir.path(), "a.json");
    assert_refused(&["compare", &big, &big], &big);
}

#[test]
fn tune_refuses_an_oversized_journal() {
    let dir = tempfile::tempdir().unwrap();
    let big = oversized(dir.path(), "journal.jsonl");
    let out = dir.path().join("out").display().to_string();
    assert_refused(
        &[
            "tune",
            "--server",
            "s --port {port}",
            "--out",
            &out,
            "--journal",
            &big,
        ],
        &big,
    );
}

#[test]
fn check_refuses_an_oversized_plan() {
    let dir = tempfile::tempdir().unwrap();
    let big = oversized(dir.path(), "plan.json");
    assert_refused(
        &[
            "check",
            "--root",
            "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
            "--plan",
            &big,
        ],
        &big,
    );
}
