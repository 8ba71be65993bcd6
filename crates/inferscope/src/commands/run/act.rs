//! The only code in inferscope that changes the machine's state: it sets this process's CPU
//! affinity and NUMA memory policy, then `exec`s the server, which inherits both (affinity and
//! the task memory policy survive `execve`).
//!
//! * CPU affinity: `sched_setaffinity(2)` through `nix` (safe wrapper).
//! * Memory policy: `set_mempolicy(2)` through `libc::syscall`, since glibc has no wrapper and no
//!   maintained crate offers one; this is the one `unsafe` block.
//! * Docker's and containerd's default seccomp profiles allow `set_mempolicy` only with
//!   `CAP_SYS_NICE`; without it the call fails with `EPERM`. That is reported in one line with
//!   the fix, and the server still starts with its CPUs bound: a server without a memory policy is
//!   better than no server. Any other failure is an error and nothing is executed.
//! * `exec` goes through `std::process::Command`, which resets `SIGPIPE` (ignored by the Rust
//!   runtime) to its default and clears the signal mask in the new image, so the server sees the
//!   signal state it would see when started from a shell.

use anyhow::{anyhow, bail};
use inferscope_host::{CpuSet, NodeSet};
use inferscope_launch::{LaunchPlan, MemMode};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;

/// Largest NUMA node number accepted for the memory policy mask (Linux's MAX_NUMNODES is at most
/// 1024 in every distribution kernel).
const MAX_NODE: u32 = 4095;

/// Set this process's CPU affinity.
pub fn bind_cpus(cpus: &CpuSet) -> anyhow::Result<()> {
    use nix::sched::{CpuSet as NixCpuSet, sched_setaffinity};
    let mut set = NixCpuSet::new();
    let limit = NixCpuSet::count();
    for (lo, hi) in cpus.ranges() {
        if *hi as usize >= limit {
            bail!(
                "CPU {hi} is beyond the {limit} CPUs sched_setaffinity takes in this build; nothing was run"
            );
        }
        for cpu in *lo..=*hi {
            set.set(cpu as usize)
                .map_err(|e| anyhow!("cannot add CPU {cpu} to the affinity mask: {e}"))?;
        }
    }
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
        anyhow!("cannot bind to CPUs {cpus} (sched_setaffinity: {e}); nothing was run")
    })
}

/// `MPOL_*` mode number of a policy.
fn mode_number(policy: MemMode) -> libc::c_int {
    match policy {
        MemMode::Preferred => libc::MPOL_PREFERRED,
        MemMode::Bind => libc::MPOL_BIND,
        MemMode::Interleave => libc::MPOL_INTERLEAVE,
    }
}

/// The node bitmask `set_mempolicy` takes, and the `maxnode` to pass with it.
fn node_mask(nodes: &NodeSet) -> anyhow::Result<(Vec<libc::c_ulong>, libc::c_ulong)> {
    let bits = libc::c_ulong::BITS;
    let max = nodes.ranges().last().map(|r| r.1).unwrap_or(0);
    if max > MAX_NODE {
        bail!("NUMA node {max} is beyond the {MAX_NODE} nodes supported; nothing was run");
    }
    let words = (max / bits + 1) as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; words];
    for n in nodes.iter() {
        // Every node is at most `max`, so its word is always in `mask`.
        if let Some(word) = mask.get_mut((n / bits) as usize) {
            *word |= 1 << (n % bits);
        }
    }
    // The kernel reads maxnode - 1 bits (mm/mempolicy.c get_nodes), as numactl accounts for.
    let maxnode = (words as libc::c_ulong) * libc::c_ulong::from(bits) + 1;
    Ok((mask, maxnode))
}

/// Set this process's NUMA memory policy. `Ok(None)` when set, `Ok(Some(line))` when the kernel
/// refused in a way that should not stop the server (the line says why and how to fix it).
pub fn set_mempolicy(policy: MemMode, nodes: &NodeSet) -> anyhow::Result<Option<String>> {
    let (mask, maxnode) = node_mask(nodes)?;
    // SAFETY: `mask` is a live, initialised buffer of `mask.len()` c_ulongs; the kernel reads
    // `maxnode - 1 = mask.len() * c_ulong::BITS` bits from it and writes nothing. The other
    // arguments are plain integers. No Rust memory is aliased or retained by the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            mode_number(policy),
            mask.as_ptr(),
            maxnode,
        )
    };
    if rc == 0 {
        return Ok(None);
    }
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL);
    refusal(errno, policy, nodes)
}

/// What a failed `set_mempolicy` means: a warning line (carry on with CPUs bound) or an error.
pub fn refusal(errno: i32, policy: MemMode, nodes: &NodeSet) -> anyhow::Result<Option<String>> {
    match errno {
        libc::EPERM => Ok(Some(format!(
            "the kernel refused the NUMA memory policy ({policy} node {nodes}: set_mempolicy: operation not permitted), as container seccomp profiles do without CAP_SYS_NICE; CPUs are bound, memory is not; fix: docker run --cap-add SYS_NICE (inferscope run --emit docker includes it)"
        ))),
        libc::ENOSYS => Ok(Some(format!(
            "this kernel has no NUMA support (set_mempolicy: function not implemented); CPUs are bound, memory policy {policy} node {nodes} is not set"
        ))),
        e => Err(anyhow!(
            "cannot set the NUMA memory policy {policy} on node {nodes}: {}; nothing was run",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// Refuse, before anything is bound or printed, a program that `exec` would not find: a path
/// that is not an executable file, or a name on no `PATH` directory. (`exec` itself still reports
/// a program that vanishes in between.)
pub fn check_program(program: &std::ffi::OsStr) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let shown = program.to_string_lossy();
    if program.as_encoded_bytes().contains(&b'/') {
        let p = Path::new(program);
        return match std::fs::metadata(p) {
            Err(e) => bail!("cannot run {shown}: {e}"),
            Ok(_) if !executable(p) => bail!("cannot run {shown}: not an executable file"),
            Ok(_) => Ok(()),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(program))) {
        Ok(())
    } else {
        bail!("cannot run {shown}: not found in any PATH directory")
    }
}

/// Apply the plan to this process and exec its command. Returns only on failure, with the error
/// (nothing has been executed then).
pub fn bind_and_exec(mut plan: LaunchPlan, command: &[OsString]) -> anyhow::Error {
    if !plan.live {
        return anyhow!(
            "refusing to bind: the plan was made from {}, not from this machine",
            plan.source
        );
    }
    let Some((program, args)) = command.split_first() else {
        return inferscope_launch::LaunchError::NoCommand.into();
    };
    if let Err(e) = check_program(program) {
        return e;
    }
    if let Err(e) = bind_cpus(&plan.cpus) {
        return e;
    }
    let mut refused = None;
    if let Some(m) = &plan.memory {
        match set_mempolicy(m.policy, &m.nodes) {
            Ok(None) => {}
            Ok(Some(line)) => refused = Some(line),
            Err(e) => return e,
        }
    }
    if refused.is_some() {
        plan.memory = None;
    }
    eprintln!("inferscope: run: {}", plan.summary());
    if let Some(line) = refused {
        eprintln!("inferscope: warning: {line}");
    }
    let err = std::process::Command::new(program)
        .args(args)
        .envs(&plan.env)
        .exec();
    anyhow!("cannot run {}: {err}", program.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_carry_the_kernel_off_by_one() {
        let (mask, maxnode) = node_mask(&"0".parse().unwrap()).unwrap();
        assert_eq!(mask, vec![1]);
        assert_eq!(maxnode, libc::c_ulong::from(libc::c_ulong::BITS) + 1);
        let (mask, _) = node_mask(&"1,3".parse().unwrap()).unwrap();
        assert_eq!(mask, vec![0b1010]);
        let (mask, _) = node_mask(&"65".parse().unwrap()).unwrap();
        assert_eq!(mask.len(), 2);
        assert!(node_mask(&"0-4294967295".parse().unwrap()).is_err());
    }

    #[test]
    fn eperm_is_one_line_with_the_fix_and_not_an_error() {
        let nodes: NodeSet = "1".parse().unwrap();
        let line = refusal(libc::EPERM, MemMode::Bind, &nodes)
            .unwrap()
            .unwrap();
        assert!(line.contains("--cap-add SYS_NICE") && line.contains("CPUs are bound"));
        assert!(!line.contains('\n'));
        assert!(
            refusal(libc::ENOSYS, MemMode::Bind, &nodes)
                .unwrap()
                .is_some()
        );
        let e = refusal(libc::EINVAL, MemMode::Bind, &nodes).unwrap_err();
        assert!(e.to_string().contains("nothing was run"));
    }

    #[test]
    fn cpus_beyond_the_mask_are_an_error_not_a_panic() {
        let huge: CpuSet = "100000".parse().unwrap();
        assert!(bind_cpus(&huge).is_err());
    }
}
