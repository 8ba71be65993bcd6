//! ENV005: `NCCL_SHM_DISABLE` set.

use super::env004::{NcclSwitch, nccl_switch, not_on, nvidia_gpus};
use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV005",
    title: "NCCL_SHM_DISABLE set",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "NCCL_SHM_DISABLE=1 takes away the shared-memory transport NCCL uses between GPUs of one host that cannot do peer-to-peer (different sockets, P2P disabled), so that traffic goes through the network plugin or TCP sockets instead, much slower for tensor-parallel all-reduce.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let name = "NCCL_SHM_DISABLE";
    let sw = nccl_switch(s, name);
    if let Some(o) = not_on(name, &sw) {
        return vec![o];
    }
    let NcclSwitch::On(v) = sw else {
        return Vec::new();
    };
    let gpus = nvidia_gpus(s);
    if gpus < 2 {
        return vec![Outcome::pass(
            HOST,
            format!("{name}={v:?}, but fewer than two NVIDIA GPUs: no intra-host NCCL traffic"),
        )];
    }
    let p2p_too = matches!(nccl_switch(s, "NCCL_P2P_DISABLE"), NcclSwitch::On(_));
    let consequence = if p2p_too {
        "with NCCL_P2P_DISABLE also set, every GPU-to-GPU transfer on this host goes through the network transport (InfiniBand loopback or TCP sockets)"
    } else {
        "GPU pairs without peer-to-peer (e.g. across sockets) fall back to the network transport (InfiniBand loopback or TCP sockets)"
    };
    vec![Outcome::fail(
        HOST,
        format!("{name}={v:?} on a host with {gpus} NVIDIA GPUs: {consequence}"),
        format!(
            "`unset {name}` (or `export {name}=0`). If it was set because NCCL failed in a container, give the container shared memory instead: `docker run --ipc=host` or `--shm-size=16g` (see MEM006)."
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    #[test]
    fn set_on_a_multi_gpu_host_fails() {
        let mut s = fixture("plx");
        s.env.insert("NCCL_SHM_DISABLE".into(), "1".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("8 NVIDIA GPUs"));
        s.env.insert("NCCL_P2P_DISABLE".into(), "1".into());
        assert!(
            check(&CHECK, &s)[0]
                .evidence
                .contains("every GPU-to-GPU transfer")
        );
    }

    #[test]
    fn unset_or_zero_passes() {
        assert_eq!(statuses(&check(&CHECK, &fixture("plx"))), [Status::Pass]);
        let mut s = fixture("plx");
        s.env.insert("NCCL_SHM_DISABLE".into(), "0".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }

    #[test]
    fn single_gpu_host_passes() {
        let mut s = fixture("dev-vm");
        s.env.insert("NCCL_SHM_DISABLE".into(), "1".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }
}
