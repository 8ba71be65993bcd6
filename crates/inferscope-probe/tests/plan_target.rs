//! `inferscope_plan::target` on snapshots captured from real fixture trees
//! (fixtures/hosts/*/SOURCE): the GPU model planned for, and the other GPUs suggested.

use inferscope_plan::target;
use inferscope_probe::{CaptureOptions, FsRoot, capture};
use std::path::Path;

fn snap(host: &str) -> inferscope_host::Snapshot {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hosts")
        .join(host)
        .join("root");
    capture(
        &FsRoot::new(&root),
        &CaptureOptions {
            captured_at: "2026-12-04T00:00:00Z".into(),
            tool: "plan_target".into(),
        },
    )
}

#[test]
fn an_h100_tree_gives_eight_h100s_from_the_catalog_total() {
    let t = target::from_snapshot(&snap("h100-sxm8-2s-switch-12nic")).unwrap();
    assert_eq!(t.spec.count, 8);
    assert_eq!(t.pci_ids.len(), 8);
    assert!(t.spec.name.contains("H100 SXM"), "{}", t.spec.name);
    // no NVML in a sysfs tree: the catalog's torch-visible total
    let cat = inferscope_plan::gpus::lookup(&t.spec.name).unwrap();
    assert_eq!(
        t.spec.total_bytes,
        (cat.torch_total_gib * inferscope_plan::memory::GIB) as u64
    );
    assert!(
        t.source.contains("catalog torch-visible total"),
        "{}",
        t.source
    );
}

#[test]
fn an_empty_root_is_an_error_asking_for_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let s = capture(
        &FsRoot::new(dir.path()),
        &CaptureOptions {
            captured_at: "2026-12-04T00:00:00Z".into(),
            tool: "plan_target".into(),
        },
    );
    let e = target::from_snapshot(&s).unwrap_err();
    assert!(e.starts_with("no NVIDIA GPU in "), "{e}");
    assert!(e.contains("--gpu NAME"), "{e}");
}

#[test]
fn other_gpu_suggestions_are_cut_to_three_larger_ones() {
    let arch = inferscope_plan::catalog::lookup("meta-llama/Llama-3.1-70B-Instruct").unwrap();
    let gpu =
        inferscope_plan::GpuSpec::from_catalog(inferscope_plan::gpus::lookup("l40s").unwrap(), 1);
    let req = inferscope_plan::PlanRequest::new(arch, "llama-70b", gpu.clone());
    let s = target::suggestions_for(&req, &gpu);
    let others = s
        .iter()
        .filter(|s| s.kind == inferscope_plan::suggest::ChangeKind::OtherGpu)
        .count();
    assert!(others <= 3 && others > 0, "{others}");
}
