//! Every OOM message in `fixtures/tools/oom/` (copies of `../shared/fixtures/oom/` with their
//! source headers, plus marked synthetic cases for clauses no public paste shows) parses and gets
//! the reviewed diagnosis in `<name>.expected.json`.
//!
//! `UPDATE_EXPECTED=1 cargo test -p inferscope-mem --test oom_golden` rewrites the expected
//! files; review every change against its input.

use inferscope_formats::oom;
use inferscope_mem::oom::diagnose;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools/oom")
}

/// The message without the `# Source:` provenance header.
fn body(text: &str) -> &str {
    match text.find("\n---\n") {
        Some(i) if text.starts_with("# Source:") => &text[i + 5..],
        _ => text,
    }
}

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    v.sort();
    v
}

fn analyse(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap();
    let r = oom::parse(body(&text)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_value(diagnose(&r)).unwrap()
}

#[test]
fn every_fixture_matches_its_expected_json() {
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    let mut failures = Vec::new();
    let files = inputs();
    assert!(files.len() >= 20, "fixtures missing: {}", files.len());
    for path in files {
        let got = analyse(&path);
        let exp_path = path.with_extension("expected.json");
        let pretty = serde_json::to_string_pretty(&got).unwrap() + "\n";
        if update {
            fs::write(&exp_path, &pretty).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&exp_path).unwrap_or_else(|e| {
            panic!("{}: {e} (UPDATE_EXPECTED=1 writes it)", exp_path.display())
        });
        if expected != pretty {
            failures.push(format!(
                "{} differs from its .expected.json (UPDATE_EXPECTED=1 rewrites it; review the diff)\n{pretty}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every OOM fixture says where it came from: a real message keeps its public source (a URL),
/// a synthetic one names the PyTorch wording it models (README of fixtures: "generated fixtures
/// say what real machine or document they model").
#[test]
fn every_fixture_names_its_source() {
    let mut checked = 0;
    for e in fs::read_dir(dir()).unwrap().filter_map(|e| e.ok()) {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "txt") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = first.strip_prefix("# Source: ").unwrap_or_else(|| {
            panic!("{name}: first line must be `# Source: ...`, found {first:?}")
        });
        if name.starts_with("synthetic-") {
            assert!(
                source.starts_with("synthetic;") && source.len() > 20,
                "{name}: a synthetic fixture says `synthetic; <what it models>`"
            );
        } else {
            assert!(
                source.starts_with("https://"),
                "{name}: a real fixture names its public source URL, found {source:?}"
            );
        }
        assert!(
            text.lines().any(|l| l == "---"),
            "{name}: the header ends with a `---` line"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} OOM fixtures found");
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The keys, checked by hand on the messages that define each generation.
#[test]
fn key_figures_and_diagnoses() {
    let get = |name: &str| analyse(&dir().join(format!("{name}.txt")));
    let v = get("legacy-8gb-runtimeerror-wrapped");
    assert_eq!(v["total_bytes"], 8 * GIB);
    assert_eq!(v["requested_bytes"], 304 * MIB);
    assert_eq!(v["allocated_bytes"], 149_694_710u64); // 142.76 MiB
    assert_eq!(v["reserved_unallocated_bytes"], 158 * MIB - 149_694_710);
    assert_eq!(v["diagnosis"], "fragmentation");

    let v = get("torch21-6gb-zero-bytes-free-no-process-clause");
    assert_eq!(v["free_bytes"], 0);
    assert_eq!(v["diagnosis"], "fragmentation");
    assert_eq!(v["remedies"][0]["id"], "expandable_segments");

    let v = get("tgi-a100-80gb-prefill-router-process-pid");
    assert_eq!(v["other_processes"][0]["pid"], 124797);
    assert_eq!(v["messages_found"], 2);
    assert_eq!(v["total_bytes"], 84_943_715_697u64); // 79.11 GiB, "capacty"

    let v = get("tgi-warmup-not-enough-memory-prefill-tokens");
    assert_eq!(v["diagnosis"], "not_enough_information");
    assert_eq!(v["wrapper_tokens"], 4096);
    assert!(v["requested_bytes"].is_null() && v["total_bytes"].is_null());

    let v = get("vllm-early-2023-torch20-parenthesised-44gb");
    assert_eq!(v["diagnosis"], "other_processes");

    let v = get("vllm-rocm-gfx1151-hip-oom-pytorch-alloc-conf");
    assert_eq!(v["backend"], "hip");
    assert_eq!(v["alloc_conf_var"], "PYTORCH_ALLOC_CONF");

    let v = get("vllm-v1-multiproc-worker-prefix-22gb");
    assert_eq!(v["device"], 1);
    assert_eq!(v["context"][0], "vLLM worker rank=1 pid=194255");
    assert_eq!(v["diagnosis"], "exhaustion");

    let v = get("torch20-allocated-exceeds-capacity-8gb");
    assert_eq!(v["allocated_bytes"], 18_468_359_373u64); // 17.20 GiB > 8 GiB, kept
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .contains("exceeds the total capacity")
    );

    let v = get("synthetic-torch2x-allowed-private-pools-expandable");
    assert_eq!(v["diagnosis"], "memory_fraction_limit");
    assert_eq!(v["private_pools_bytes"], 6_710_886_400u64);

    let v = get("synthetic-torch1x-cached-json-escaped");
    assert_eq!(v["reserved_bytes"], 9_996_536_381u64);

    let v = get("synthetic-torch2x-other-process-listed");
    assert_eq!(v["diagnosis"], "other_processes");
    assert_eq!(v["other_processes"][0]["bytes"], 10_200_547_328u64);

    let v = get("synthetic-cut-after-request");
    assert_eq!(v["diagnosis"], "not_enough_information");
}

#[test]
fn no_panic_on_cut_or_mangled_messages() {
    for path in inputs() {
        let text = fs::read_to_string(&path).unwrap();
        let b = body(&text);
        for end in (0..b.len()).step_by(7) {
            if b.is_char_boundary(end)
                && let Ok(r) = oom::parse(&b[..end])
            {
                let _ = diagnose(&r);
            }
        }
        let flipped: String = b
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect();
        if let Ok(r) = oom::parse(&flipped) {
            let _ = diagnose(&r);
        }
    }
}
