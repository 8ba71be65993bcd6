//! Importing what users already have: `snapshot --import` (nvidia-smi -q text/XML, hwloc XML)
//! and `topo --from-nvidia-smi`, through the binary as users run it.

mod common;

use std::collections::BTreeSet;

use common::inferscope;

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn imported_nvidia_smi_report_becomes_a_valid_snapshot() {
    let (code, json, err) = inferscope(&[
        "snapshot",
        "--import",
        "fixtures/tools/nvidia-smi-q/h100-sxm-8gpu-q-full-driver565.txt",
    ]);
    assert_eq!(code, 0, "{err}");
    let snap = inferscope::load::parse_snapshot(&json, "import").unwrap();
    assert!(!snap.is_live);
    assert_eq!(snap.gpus.len(), 8);
    let d = snap.gpus[0].details.known().unwrap();
    assert_eq!(d.memory.known().unwrap().total_bytes, 81_559 * 1024 * 1024);
    assert_eq!(
        snap.driver.known().unwrap().driver_version.known().unwrap(),
        "565.57.01"
    );
    // sysfs facts are not in the file: unknown with the file named, never zero.
    match &snap.gpus[0].numa_node {
        inferscope_host::Reading::Unknown(u) => {
            assert!(u.detail.contains("h100-sxm-8gpu-q-full-driver565.txt"))
        }
        v => panic!("{v:?}"),
    }
    // Every other command accepts it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.json");
    std::fs::write(&file, &json).unwrap();
    let (code, out, err) = inferscope(&["topo", "--snapshot", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("GPU7"), "{out}");
}

#[test]
fn hwloc_and_nvidia_smi_xml_import_together() {
    let (code, json, err) = inferscope(&[
        "snapshot",
        "--import",
        "fixtures/tools/hwloc/nvidia-dgx2.xml",
        "fixtures/tools/nvidia-smi-q/a100-sxm4-80gb-q-x-xml-dtd-v12.txt",
    ]);
    assert_eq!(code, 0, "{err}");
    let snap = inferscope::load::parse_snapshot(&json, "import").unwrap();
    // 16 V100s from hwloc; the A100 report's GPU (another machine) is added, not merged wrongly.
    assert_eq!(snap.gpus.len(), 17);
    assert_eq!(snap.numa_nodes.len(), 2);
    let with_details = snap.gpus.iter().filter(|g| g.details.is_known()).count();
    assert_eq!(with_details, 1);
}

#[test]
fn import_refuses_topo_text_and_unknown_files_with_one_clear_error() {
    let (code, _, err) = inferscope(&[
        "snapshot",
        "--import",
        "fixtures/tools/nvidia-smi-topo/rtx5090-2gpu-threadripper-phb-tabs.txt",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("inferscope topo --from-nvidia-smi"), "{err}");
    let (code, _, err) = inferscope(&["snapshot", "--import", "README.md"]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("README.md: not a format inferscope imports"),
        "{err}"
    );
    let (code, _, err) = inferscope(&[
        "snapshot",
        "--import",
        "fixtures/tools/nvidia-smi-q/bad-garbage-memory.txt",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad-garbage-memory.txt: line 10, column 45"),
        "{err}"
    );
}

#[test]
fn errors_in_fixture_files_point_at_the_line_in_the_file() {
    // The provenance header (5 lines) is skipped, but line numbers still count it.
    let (code, _, err) = inferscope(&[
        "topo",
        "--from-nvidia-smi",
        "fixtures/tools/nvidia-smi-topo/error-topo-m-with-i-flag-rejected.txt",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("error-topo-m-with-i-flag-rejected.txt: line 8, column 1"),
        "{err}"
    );
}

/// `topo --json` has one layout whatever the source: a machine tree, a snapshot, pasted text.
#[test]
fn topo_json_schema_is_the_same_for_every_source() {
    let (_, from_tree, _) = inferscope(&[
        "topo",
        "--json",
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
    ]);
    let (code, from_text, err) = inferscope(&[
        "topo",
        "--json",
        "--from-nvidia-smi",
        "fixtures/tools/nvidia-smi-topo/h100-8gpu-topo-mp-pcie-only-12nic-comma-affinity.txt",
    ]);
    assert_eq!(code, 0, "{err}");
    let a: serde_json::Value = serde_json::from_str(&from_tree).unwrap();
    let b: serde_json::Value = serde_json::from_str(&from_text).unwrap();
    assert_eq!(keys(&a), keys(&b));
    assert_eq!(keys(&a["gpus"][0]), keys(&b["gpus"][0]));
    assert_eq!(keys(&a["nics"][0]), keys(&b["nics"][0]));
    // And the tree modelled on that very matrix gives the same cells and affinities.
    assert_eq!(a["devices"], b["devices"]);
    assert_eq!(a["matrix"], b["matrix"]);
    for i in 0..8 {
        assert_eq!(a["gpus"][i]["cpu_affinity"], b["gpus"][i]["cpu_affinity"]);
        assert_eq!(a["gpus"][i]["numa_affinity"], b["gpus"][i]["numa_affinity"]);
    }
    assert_eq!(b["numa_nodes"], serde_json::json!([]));
}

/// Round trip through the real renderer: parse `topo -m` text → `inferscope topo` view → parse
/// again gives the same devices, links, GPU columns and NICs, for every real paste that parses.
#[test]
fn topo_text_round_trips_through_the_inferscope_renderer() {
    let dir = common::repo().join("fixtures/tools/nvidia-smi-topo");
    let mut checked = 0;
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    names.sort();
    for path in names {
        let input = inferscope_probe::import::read_input(&path).unwrap();
        let Ok(first) = inferscope_formats::nvidia_smi_topo::parse(&input.text) else {
            continue;
        };
        let mut rendered = Vec::new();
        inferscope::render::topo::write_matrix(&first, &mut rendered).unwrap();
        let rendered = String::from_utf8(rendered).unwrap();
        let second = inferscope_formats::nvidia_smi_topo::parse(&rendered)
            .unwrap_or_else(|e| panic!("{}: re-parse failed: {e}\n{rendered}", path.display()));
        assert_eq!(first.devices, second.devices, "{}", path.display());
        assert_eq!(first.matrix, second.matrix, "{}", path.display());
        assert_eq!(first.gpus, second.gpus, "{}", path.display());
        assert_eq!(first.nics, second.nics, "{}", path.display());
        checked += 1;
    }
    assert_eq!(checked, 13, "every real paste that parses is round-tripped");
}
