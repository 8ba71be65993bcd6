//! `inferscope run`: the real binary binds and execs a child on this machine, and the child's own
//! view of its CPUs and memory policy matches what `--dry-run` said. Machines without a GPU (CI)
//! bind with `--numa-node 0`, which every Linux machine has.

mod common;

use common::{inferscope, repo};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_inferscope"));
    c.current_dir(repo());
    c
}

/// Run the binary with its CPU affinity first narrowed to one CPU, so that the child's
/// `Cpus_allowed_list` shows what `run` set, not what was inherited.
fn run_narrowed(args: &[&str]) -> (Output, u32) {
    let mut cmd = bin();
    cmd.args(args);
    // SAFETY: the closure runs in the forked child before exec and only makes one syscall
    // (sched_setaffinity), which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let mut one = nix::sched::CpuSet::new();
            let mine = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
            if let Some(first) =
                (0..nix::sched::CpuSet::count()).find(|c| mine.is_set(*c).unwrap_or(false))
            {
                one.set(first)?;
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one)?;
            }
            Ok(())
        });
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

fn field<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim_start_matches(':').trim())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn the_child_runs_bound_as_dry_run_said_and_its_exit_code_passes_through() {
    let (code, json, err) = inferscope(&[
        "run",
        "--numa-node",
        "0",
        "--dry-run",
        "--json",
        "--",
        "true",
    ]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cpus: inferscope_host::CpuSet = plan["cpus"].as_str().unwrap().parse().unwrap();
    let policy = plan["memory"]["policy"].as_str().unwrap().to_string();
    let mem_nodes: inferscope_host::NodeSet =
        plan["memory"]["nodes"].as_str().unwrap().parse().unwrap();
    assert_eq!(policy, "bind");

    let script = r#"grep -E '^(Cpus_allowed_list|Mems_allowed_list|SigIgn):' /proc/self/status
head -n 1 /proc/self/numa_maps | cut -d' ' -f2 | sed 's/^/Policy: /'
echo "Pid: $$"
echo "Omp: $OMP_NUM_THREADS"
exit 7"#;
    let (out, pid) = run_narrowed(&["run", "--numa-node", "0", "--", "sh", "-c", script]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stdout}\n{stderr}");

    // CPUs: exactly the dry run's, although the parent narrowed inferscope to one CPU.
    let seen: inferscope_host::CpuSet = field(&stdout, "Cpus_allowed_list").parse().unwrap();
    assert_eq!(seen, cpus, "{stdout}");
    // Memory: the cpuset allows the dry run's nodes, and the task policy is the dry run's (unless
    // the kernel refused it, which must then be said in one line).
    let allowed: inferscope_host::NodeSet = field(&stdout, "Mems_allowed_list").parse().unwrap();
    assert!(mem_nodes.is_subset(&allowed), "{stdout}");
    if allowed == mem_nodes {
        assert_eq!(allowed.to_string(), mem_nodes.to_string());
    }
    let refused = stderr.contains("set_mempolicy: operation not permitted");
    if refused {
        assert!(stderr.contains("--cap-add SYS_NICE"), "{stderr}");
    } else {
        assert_eq!(
            field(&stdout, "Policy"),
            format!("{policy}:{mem_nodes}"),
            "{stdout}"
        );
    }
    // exec, not spawn: the shell has inferscope's PID.
    assert_eq!(field(&stdout, "Pid"), pid.to_string());
    // SIGPIPE is not left ignored by the Rust runtime (bit 13 - 1 of SigIgn).
    let sigign = u64::from_str_radix(field(&stdout, "SigIgn"), 16).unwrap();
    assert_eq!(
        sigign & (1 << 12),
        0,
        "SIGPIPE ignored in the child: {stdout}"
    );
    // Not set unless asked (issue 13); the test's own environment has none either.
    if std::env::var_os("OMP_NUM_THREADS").is_none() {
        assert_eq!(field(&stdout, "Omp"), "");
    }
    // One line says what was bound and why.
    let line = stderr
        .lines()
        .find(|l| l.starts_with("inferscope: run: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains(&format!("CPUs {cpus} ")), "{line}");
    assert!(line.ends_with("; exec sh"), "{line}");
}

#[test]
fn a_signal_kills_inferscope_the_way_it_kills_the_server() {
    let out = bin()
        .args([
            "run",
            "--numa-node",
            "0",
            "--",
            "sh",
            "-c",
            "kill -TERM $$; sleep 5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(15), "{out:?}");
    assert_eq!(out.status.code(), None);
}

#[test]
fn bad_inputs_exit_2_with_one_line_and_run_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let m = marker.to_str().unwrap();
    let asym = "fixtures/hosts/dual-socket-5gpu-asymmetric/root";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", "--gpus", "99", "--", "touch", m],
            "inferscope: error: no GPU 99: this machine has ",
        ),
        (
            vec!["run", "--numa-node", "0"],
            "inferscope: error: no command to run: give the server command after `--`",
        ),
        (
            vec!["run", "--numa-node", "0", "--dry-run"],
            "inferscope: error: no command to run",
        ),
        (
            vec!["run", "--", "touch", m],
            "inferscope: error: say what to bind to: --gpus",
        ),
        (
            vec![
                "run",
                "--gpus",
                "0",
                "--dry-run",
                "--root",
                asym,
                "--",
                "touch",
                m,
            ],
            "inferscope: error: empty CPU set: GPU0 is on node 1 (CPUs 8-15,24-31), but this process's cgroup (/system.slice/vllm.service) allows only CPUs 0-7,16-23",
        ),
        (
            vec!["run", "--gpus", "1", "--root", asym, "--", "touch", m],
            "inferscope: error: refusing to bind from --root: binding acts on this machine only",
        ),
        (
            vec!["run", "--numa-node", "4095", "--", "touch", m],
            "inferscope: error: no NUMA node 4095: this machine has node(s) ",
        ),
        (
            vec!["run", "--gpus", "0,,1", "--", "touch", m],
            "inferscope: error: --gpus \"0,,1\": an empty entry between commas",
        ),
        (
            vec!["run", "--gpus", "auto:0", "--", "touch", m],
            "inferscope: error: --gpus \"auto:0\": auto:N needs N of at least 1",
        ),
        (
            vec!["run", "--gpus", "0", "--numa-node", "0", "--", "touch", m],
            "inferscope: error: --gpus and --numa-node exclude each other",
        ),
        (
            vec!["run", "--numa-node", "0", "--json", "--", "touch", m],
            "inferscope: error: --json prints the plan of --dry-run",
        ),
        (
            vec![
                "run",
                "--numa-node",
                "0",
                "--cpus-per-gpu",
                "2",
                "--",
                "touch",
                m,
            ],
            "inferscope: error: --cpus-per-gpu splits a node among GPUs",
        ),
        (
            vec!["run", "--numa-node", "0", "--", "/nonexistent/server"],
            "inferscope: error: cannot run /nonexistent/server: No such file or directory",
        ),
        (
            vec!["run", "--numa-node", "0", "--", "no-such-server-xyz"],
            "inferscope: error: cannot run no-such-server-xyz: not found in any PATH directory",
        ),
        (
            vec!["run", "--numa-node", "0", "--", "Cargo.toml"],
            "inferscope: error: cannot run Cargo.toml: not found in any PATH directory",
        ),
        (
            vec!["run", "--numa-node", "0", "--", "./Cargo.toml"],
            "inferscope: error: cannot run ./Cargo.toml: not an executable file",
        ),
        (
            vec![
                "run",
                "--numa-node",
                "0",
                "--omp-threads",
                "0",
                "--",
                "touch",
                m,
            ],
            "inferscope: error: --omp-threads \"0\": expected a whole number of at least 1, or auto",
        ),
        (
            vec![
                "run",
                "--gpus",
                "0",
                "--device-ids",
                "uuid",
                "--dry-run",
                "--root",
                "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
                "--",
                "vllm",
                "serve",
                "m",
            ],
            "inferscope: error: --device-ids uuid: vLLM rejects UUIDs in CUDA_VISIBLE_DEVICES",
        ),
    ];
    for (args, want) in cases {
        let (code, stdout, stderr) = inferscope(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(want),
            "{args:?}:\n{stderr}\nwanted: {want}"
        );
        assert!(!marker.exists(), "{args:?} ran the command");
    }
}

#[test]
fn snapshots_and_roots_plan_for_other_machines() {
    let h100 = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root";
    let (code, out, err) = inferscope(&[
        "run", "--gpus", "0,1", "--emit", "numactl", "--root", h100, "--", "vllm", "serve", "m",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with("numactl --physcpubind=0,2,4,6,8,10 --membind=0 -- vllm serve m\n"),
        "{out}"
    );
    // The snapshot's recorded CUDA_VISIBLE_DEVICES is kept, never replaced, and the user told so.
    assert!(err.contains(
        "inferscope: warning: the snapshot's environment sets CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7, not 0,1; it is kept"
    ), "{err}");

    // Through a snapshot file, as for an imported or remote machine.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    let (code, json, err) = inferscope(&["snapshot", "--root", h100]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(&file, json).unwrap();
    let f = file.to_str().unwrap();
    for (fmt, want) in [
        ("docker", "--cpuset-cpus=1,3,5,7,9,11 \\"),
        ("systemd", "NUMAMask=1"),
        ("k8s", "topologyManagerPolicy: single-numa-node"),
    ] {
        let (code, out, err) = inferscope(&[
            "run",
            "--gpus",
            "4,5,6,7",
            "--snapshot",
            f,
            "--emit",
            fmt,
            "--",
            "vllm",
            "serve",
            "m",
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(want), "{fmt}: {out}");
    }
    // Binding from that file is refused.
    let (code, _, err) = inferscope(&["run", "--gpus", "4", "--snapshot", f, "--", "true"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("inferscope: error: refusing to bind from --snapshot"),
        "{err}"
    );
}

#[test]
fn dry_run_text_of_a_split_node() {
    let (code, out, err) = inferscope(&[
        "run",
        "--gpus",
        "0,1,2,3",
        "--cpus-per-gpu",
        "3",
        "--dry-run",
        "--root",
        "fixtures/hosts/pcie8-2s-plx-switches/root",
        "--",
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "my model",
    ]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!(out);
}
