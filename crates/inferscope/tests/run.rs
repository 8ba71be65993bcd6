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

const H100: &str = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root";

/// `run --root H100 --gpus LIST [extra] --emit FORMAT -- CMD...`: exit code, stdout, stderr.
fn emit_h100(gpus: &str, format: &str, extra: &[&str], cmd: &[&str]) -> (i32, String, String) {
    let mut args = vec!["run", "--root", H100, "--gpus", gpus, "--emit", format];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    inferscope(&args)
}

#[test]
fn emitted_artifacts_set_the_gpu_selection_they_were_planned_for() {
    // The snapshot's shell had CUDA_VISIBLE_DEVICES=0,...,7: `run` there keeps it, but an
    // artifact runs elsewhere and must name GPUs 4-7 itself (issue 26 item 1).
    let vllm = ["vllm", "serve", "M", "--tensor-parallel-size", "4"];
    let (code, out, err) = emit_h100("4,5,6,7", "numactl", &[], &vllm);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().last().unwrap(),
        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=4,5,6,7 numactl --physcpubind=1,3,5,7,9,11 --membind=1 -- vllm serve M --tensor-parallel-size 4"
    );
    assert!(
        err.contains("--emit output sets CUDA_VISIBLE_DEVICES=4,5,6,7 explicitly"),
        "{err}"
    );

    let (code, out, err) = emit_h100("4,5,6,7", "systemd", &[], &vllm);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l == "Environment=CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=4,5,6,7"),
        "{out}"
    );

    // Docker: the container holds GPUs 4-7 as 0-3; the planned order (7 first) is kept.
    let (code, out, err) = emit_h100("7,4", "docker", &[], &vllm);
    assert_eq!(code, 0, "{err}");
    for line in [
        "  --gpus '\"device=7,4\"' \\",
        "  -e CUDA_DEVICE_ORDER=PCI_BUS_ID \\",
        "  -e CUDA_VISIBLE_DEVICES=1,0 \\",
        "  --entrypoint vllm \\",
        "  vllm/vllm-openai:latest \\",
        "  serve M --tensor-parallel-size 4",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} in\n{out}");
    }
    assert!(
        out.contains(
            "# image: vllm/vllm-openai:latest: vLLM's official image (no --engine-version"
        ),
        "{out}"
    );
    let (code, out, err) = emit_h100("4,5,6,7", "k8s", &[], &vllm);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("- name: \"CUDA_VISIBLE_DEVICES\"\n      value: \"0,1,2,3\""),
        "{out}"
    );
    assert!(
        out.contains("    image: \"vllm/vllm-openai:latest\"\n"),
        "{out}"
    );
}

/// (extra flags, command, image, `--entrypoint`, arguments after the image)
type ImageCase<'a> = (
    &'a [&'a str],
    &'a [&'a str],
    &'a str,
    Option<&'a str>,
    &'a str,
);

#[test]
fn docker_runs_the_engines_official_image_with_the_arguments_it_expects() {
    let cases: [ImageCase; 6] = [
        (
            &["--engine-version", "0.10.2"],
            &["vllm", "serve", "M"],
            "vllm/vllm-openai:v0.10.2",
            Some("vllm"),
            "serve M",
        ),
        (
            &[],
            &["python3", "-m", "sglang.launch_server", "--model-path", "M"],
            "lmsysorg/sglang:latest",
            None,
            "python3 -m sglang.launch_server --model-path M",
        ),
        (
            &["--engine-version", "3.3.5"],
            &["text-generation-launcher", "--model-id", "M"],
            "ghcr.io/huggingface/text-generation-inference:3.3.5",
            None,
            "--model-id M",
        ),
        (
            &[],
            &[
                "/opt/llama/bin/llama-server",
                "-m",
                "/models/m.gguf",
                "-ngl",
                "99",
            ],
            "ghcr.io/ggml-org/llama.cpp:server-cuda",
            None,
            "-m /models/m.gguf -ngl 99",
        ),
        (
            &["--image", "registry.example.com/team/vllm:2"],
            &["vllm", "serve", "M"],
            "registry.example.com/team/vllm:2",
            Some("vllm"),
            "serve M",
        ),
        // "CMD is the image": the first word is an image reference, not a program.
        (
            &[],
            &["vllm/vllm-openai:v0.9.1", "--model", "M"],
            "vllm/vllm-openai:v0.9.1",
            None,
            "--model M",
        ),
    ];
    for (extra, cmd, image, entrypoint, args) in cases {
        let (code, out, err) = emit_h100("0", "docker", extra, cmd);
        assert_eq!(code, 0, "{cmd:?}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        let n = lines.len();
        assert_eq!(lines[n - 2], format!("  {image} \\"), "{cmd:?}:\n{out}");
        assert_eq!(lines[n - 1], format!("  {args}"), "{cmd:?}:\n{out}");
        assert_eq!(
            lines.iter().any(|l| l.starts_with("  --entrypoint ")),
            entrypoint.is_some(),
            "{cmd:?}:\n{out}"
        );
        if let Some(e) = entrypoint {
            assert_eq!(lines[n - 3], format!("  --entrypoint {e} \\"), "{out}");
        }
        assert!(out.contains(&format!("# image: {image}")), "{out}");
    }
    // No image can be guessed, or the options make no sense: one clear error, exit 2.
    for (extra, cmd, want) in [
        (
            &[][..],
            &["./serve.sh", "M"][..],
            "--emit needs --image IMAGE",
        ),
        (
            &["--image", "x/y:1"][..],
            &["vllm/vllm-openai:v1", "--model", "M"][..],
            "give the image once",
        ),
        (
            &["--image", "a b"][..],
            &["vllm", "serve", "M"][..],
            "not an image reference",
        ),
        (
            &["--engine-version", "1;reboot"][..],
            &["vllm", "serve", "M"][..],
            "--engine-version",
        ),
    ] {
        let (code, out, err) = emit_h100("0", "docker", extra, cmd);
        assert_eq!(code, 2, "{cmd:?}: {out}");
        assert!(
            err.starts_with("inferscope: error: ") && err.contains(want),
            "{err}"
        );
    }
    let (code, _, err) = emit_h100(
        "0",
        "numactl",
        &["--image", "x/y:1"],
        &["vllm", "serve", "M"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("--image chooses the container image"), "{err}");
}

#[test]
fn emitted_values_are_quoted_so_no_shell_systemd_or_kubernetes_interprets_them() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let m = marker.to_str().unwrap();
    let hostile = format!("x$(touch {m})`touch {m}`\n#\"'\\ %h ${{HOME}} $(HOME) ;");
    let cmd = ["vllm", "serve", "M", "--served-model-name", &hostile, ";"];
    let alloc = ["--alloc-conf", &hostile];
    let want_args: Vec<String> = cmd[1..].iter().map(|s| s.to_string()).collect();

    // numactl and docker are shell: run the text with the tools replaced by functions that
    // print their arguments, and compare byte for byte.
    for (format, shim) in [
        (
            "numactl",
            "numactl() { while [ \"$1\" != -- ]; do shift; done; shift; shift; printf '%s\\0' \"$@\" \"$PYTORCH_CUDA_ALLOC_CONF\"; }",
        ),
        (
            "docker",
            "docker() { e=; while [ \"$1\" != vllm/vllm-openai:latest ]; do case \"$1\" in -e) e=\"$2\";; esac; shift; done; shift; printf '%s\\0' \"$@\" \"${e#PYTORCH_CUDA_ALLOC_CONF=}\"; }",
        ),
    ] {
        let (code, out, err) = emit_h100("0", format, &alloc, &cmd);
        assert_eq!(code, 0, "{err}");
        let script = format!("{shim}\n{out}");
        let got = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(
            got.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        let words: Vec<String> = String::from_utf8(got.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(String::from)
            .collect();
        let mut want = want_args.clone();
        want.push(hostile.clone());
        assert_eq!(words, want, "{format}:\n{out}");
        assert!(!marker.exists(), "{format} ran the substitution:\n{out}");
    }

    // systemd: one directive per line, `$` and `%` doubled in ExecStart, `%` in Environment,
    // the newline escaped.
    let (code, out, err) = emit_h100("0", "systemd", &alloc, &cmd);
    assert_eq!(code, 0, "{err}");
    for l in out.lines() {
        assert!(
            l.starts_with('#')
                || l == "[Service]"
                || [
                    "CPUAffinity=",
                    "NUMAPolicy=",
                    "NUMAMask=",
                    "Environment=",
                    "LimitMEMLOCK=",
                    "ExecStart="
                ]
                .iter()
                .any(|k| l.starts_with(k)),
            "{l:?} in\n{out}"
        );
        assert!(!l.ends_with('\\'), "{l:?} continues onto the next line");
    }
    let quoted = format!("\"x$$(touch {m})`touch {m}`\\n#\\\"'\\\\ %%h $${{HOME}} $$(HOME) ;\"");
    assert!(
        out.contains(&format!(
            "ExecStart=vllm serve M --served-model-name {quoted} \";\"\n"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "\"PYTORCH_CUDA_ALLOC_CONF=x$(touch {m})`touch {m}`\\n#\\\"'\\\\ %%h ${{HOME}} $(HOME) ;\""
        )),
        "Environment= does not expand $, so it is not doubled:\n{out}"
    );

    // k8s: YAML parses to the values with every `$` doubled, which Kubernetes turns back
    // into `$` instead of expanding `$(VAR)`.
    let (code, out, err) = emit_h100("0", "k8s", &alloc, &cmd);
    assert_eq!(code, 0, "{err}");
    let pod: serde_norway::Value = serde_norway::from_str(&out).unwrap();
    let c = &pod["spec"]["containers"][0];
    let k8s = |s: &str| s.replace('$', "$$");
    let args: Vec<String> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(args, want_args.iter().map(|a| k8s(a)).collect::<Vec<_>>());
    let env = c["env"].as_sequence().unwrap();
    let alloc_env = env
        .iter()
        .find(|e| e["name"].as_str() == Some("PYTORCH_CUDA_ALLOC_CONF"))
        .unwrap();
    assert_eq!(alloc_env["value"].as_str().unwrap(), k8s(&hostile));
}
