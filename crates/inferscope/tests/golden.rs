//! Golden outputs: `inferscope topo` text and JSON for every fixture tree, and the snapshot JSON
//! of one tree. Refresh after an intended change with `INSTA_UPDATE=always cargo test` (or
//! `cargo insta test --accept`) and review the diff in git.

mod common;

use inferscope::render::topo;

#[test]
fn topo_text_per_fixture() {
    for name in common::host_fixtures() {
        let snap = common::capture_fixture(&name);
        let mut out = Vec::new();
        topo::write_text(&snap, &mut out).unwrap();
        insta::assert_snapshot!(
            format!("topo_text__{name}"),
            String::from_utf8(out).unwrap()
        );
    }
}

#[test]
fn topo_json_per_fixture() {
    for name in common::host_fixtures() {
        let snap = common::capture_fixture(&name);
        let mut out = Vec::new();
        topo::write_json(&snap, &mut out).unwrap();
        insta::assert_snapshot!(
            format!("topo_json__{name}"),
            String::from_utf8(out).unwrap()
        );
    }
}

#[test]
fn snapshot_json_of_the_asymmetric_box() {
    let snap = common::capture_fixture("dual-socket-5gpu-asymmetric");
    insta::assert_snapshot!(serde_json::to_string_pretty(&snap).unwrap());
}
