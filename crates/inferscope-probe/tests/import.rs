//! Snapshot assembly on real tool outputs kept in fixtures/tools (each with its source header).

use inferscope_host::{Reading, Snapshot, UnknownReason};
use inferscope_probe::import::{Input, read_input, snapshot_from_inputs, strip_provenance_header};
use std::path::Path;

/// The reason and evidence of an unknown reading.
fn why<T>(r: &Reading<T>) -> Option<(&UnknownReason, &str)> {
    match r {
        Reading::Unknown(u) => Some((&u.reason, u.detail.as_str())),
        Reading::Value(_) => None,
    }
}

fn fixture(rel: &str) -> (String, Input) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    (rel.to_string(), read_input(&path).unwrap())
}

fn assemble_of(rels: &[&str]) -> anyhow::Result<Snapshot> {
    let inputs: Vec<_> = rels.iter().map(|r| fixture(r)).collect();
    snapshot_from_inputs(&inputs, "2026-01-01T00:00:00Z".into(), "test".into())
}

const SMI: &str = "fixtures/tools/nvidia-smi-q/h100-sxm-8gpu-q-full-driver565.txt";
const HWLOC: &str = "fixtures/tools/hwloc/nvidia-dgx2.xml";

#[test]
fn the_provenance_header_is_skipped_and_counted() {
    let (_, input) = fixture(SMI);
    assert!(input.text.starts_with("==============NVSMI LOG"));
    assert_eq!(input.skipped_lines, 5);
    assert_eq!(strip_provenance_header("plain\n---\n"), "plain\n---\n");
    // A header without its closing `---` is not a header: nothing is dropped.
    assert_eq!(strip_provenance_header("# Source: x\n"), "# Source: x\n");
}

#[test]
fn nvidia_smi_alone_gives_gpus_and_driver_and_names_what_it_lacks() {
    let s = assemble_of(&[SMI]).unwrap();
    assert_eq!(s.gpus.len(), 8);
    assert!(s.gpus.iter().all(|g| g.details.known().is_some()));
    assert_eq!(
        s.driver
            .known()
            .unwrap()
            .driver_version
            .known()
            .map(String::as_str),
        Some("565.57.01")
    );
    // No hwloc: the host is unknown with the reason naming the input, never zeros.
    let (reason, detail) = why(&s.host.cores).unwrap();
    assert_eq!(*reason, UnknownReason::NotCaptured);
    assert_eq!(detail, format!("not in the imported files ({SMI})"));
    assert!(s.numa_nodes.is_empty());
    assert_eq!(s.source.root, format!("import: {SMI}"));
    assert!(!s.is_live);
}

#[test]
fn hwloc_alone_gives_the_pci_tree_and_leaves_gpu_details_uncaptured() {
    let s = assemble_of(&[HWLOC]).unwrap();
    assert_eq!(s.gpus.len(), 16, "a DGX-2 has 16 V100s");
    assert_eq!(s.numa_nodes.len(), 2);
    assert!(
        s.gpus
            .iter()
            .all(|g| why(&g.details).is_some_and(|w| *w.0 == UnknownReason::NotCaptured))
    );
}

#[test]
fn one_machine_at_a_time_and_topo_text_is_sent_to_topo() {
    let e = assemble_of(&[SMI, SMI]).unwrap_err().to_string();
    assert!(
        e.ends_with("a second nvidia-smi report; import one machine at a time"),
        "{e}"
    );
    let topo = "fixtures/tools/nvidia-smi-topo/rtx5090-2gpu-threadripper-phb-tabs.txt";
    let e = assemble_of(&[topo]).unwrap_err().to_string();
    assert!(e.contains("inferscope topo --from-nvidia-smi"), "{e}");
}
