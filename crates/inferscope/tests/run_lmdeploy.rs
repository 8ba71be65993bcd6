//! `run` recognises LMDeploy's server (issue 32 item 4) through the one detector, behind `env`
//! and `python -m lmdeploy`, and applies the LMDeploy room's environment rules.

mod common;

use common::inferscope;

#[test]
fn run_names_lmdeploy_behind_wrappers() {
    for cmd in [
        &["lmdeploy", "serve", "api_server", "m", "--tp", "2"][..],
        &["env", "X=1", "lmdeploy", "serve", "api_server", "m"],
        &["python3", "-m", "lmdeploy", "serve", "api_server", "m"],
    ] {
        let mut args = vec!["run", "--numa-node", "0", "--dry-run", "--json", "--"];
        args.extend_from_slice(cmd);
        let (code, out, err) = inferscope(&args);
        assert_eq!(code, 0, "{cmd:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["engine"], "lmdeploy", "{cmd:?}: {out}");
    }
}

#[test]
fn the_room_environment_rules_are_the_default_start_ups() {
    use inferscope_launch::engine::{Engine, rules};
    let r = rules(Some(Engine::Lmdeploy));
    assert_eq!(r.name, "LMDeploy");
    // TurboMind (the default) maps CUDA ordinals through CUDA_VISIBLE_DEVICES: UUIDs work
    assert!(r.accepts_uuids);
    assert!(r.uuid_source.contains("_update_engine_config"));
    assert_eq!(r.sets_omp_threads, None);
}
