//! Issue 13: `inferscope run` starts real engines correctly. Each engine's stand-in (a script
//! named like the engine's program that prints its environment) is started through the real
//! binary on the live path, with NVML answered by the stub library the probe tests compile
//! (tests/nvml-stub: two H100s whose UUIDs are known), so every UUID is known, which is
//! exactly when the old `run` broke vLLM. The value produced is then fed to a re-implementation
//! of each engine's own parsing rule (docs/run.md, "Engine compatibility").

mod common;

use common::repo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const UUID0: &str = "GPU-11111111-1111-1111-1111-111111111111";
const UUID1: &str = "GPU-22222222-2222-2222-2222-222222222222";
/// Variables `run` may touch; removed from the test's environment unless a case sets them.
const WATCHED: [&str; 7] = [
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
];

struct Rig {
    dir: tempfile::TempDir,
    stub: PathBuf,
}

impl Rig {
    fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let src = repo().join("crates/inferscope-probe/tests/nvml-stub/libnvidia-ml-stub.c");
        let stub = dir.path().join("libnvidia-ml-stub.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O0", "-o"])
            .arg(&stub)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("this test needs a C compiler ({cc}): {e}"));
        assert!(status.success(), "compiling the NVML stub failed");
        // Stand-ins named as the engines' programs; `python3` stands in for `python3 -m ...`.
        for name in [
            "vllm",
            "python3",
            "text-generation-launcher",
            "llama-server",
            "ollama",
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, "#!/bin/sh\nexec env\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Rig { dir, stub }
    }

    /// Run `inferscope ARGS` with the stub NVML, the stand-ins first on PATH, and `set` in an
    /// environment otherwise free of the watched variables.
    fn run(&self, args: &[&str], set: &[(&str, &str)]) -> (i32, String, String) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_inferscope"));
        c.current_dir(repo()).args(args);
        for v in WATCHED {
            c.env_remove(v);
        }
        let path = std::env::var("PATH").unwrap_or_default();
        c.env("PATH", format!("{}:{path}", self.dir.path().display()))
            .env("INFERSCOPE_NVML_LIB", &self.stub);
        for (k, v) in set {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The watched variables the stand-in received.
fn received(env_dump: &str) -> BTreeMap<String, String> {
    env_dump
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| WATCHED.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---- each engine's documented parsing rule, re-implemented ----------------------------------

/// vLLM `Platform.device_id_to_physical_device_id` and SGLang `CustomAllreduce.__init__`:
/// Python `int()` of every comma-separated entry (surrounding whitespace allowed).
fn python_int_entries(v: &str) -> Result<Vec<i64>, String> {
    v.split(',')
        .map(|e| {
            e.trim()
                .parse::<i64>()
                .map_err(|_| format!("ValueError: invalid literal for int() with base 10: '{e}'"))
        })
        .collect()
}

/// TGI launcher `num_cuda_devices`: the number of comma-separated entries.
fn tgi_count(v: &str) -> usize {
    v.split(',').count()
}

/// The CUDA runtime (llama.cpp, Ollama): each entry an ordinal below the device count, or a
/// unique prefix of a GPU UUID.
fn cuda_runtime(v: &str, uuids: &[&str]) -> Result<Vec<usize>, String> {
    v.split(',')
        .map(|e| {
            if let Ok(i) = e.parse::<usize>() {
                return (i < uuids.len())
                    .then_some(i)
                    .ok_or(format!("no device {i}"));
            }
            let m: Vec<usize> = (0..uuids.len())
                .filter(|&i| uuids.get(i).is_some_and(|u| u.starts_with(e)))
                .collect();
            match m.as_slice() {
                [one] => Ok(*one),
                _ => Err(format!("{e} names no single device")),
            }
        })
        .collect()
}

/// The stub's GPUs have no sysfs NUMA node, so `run` refuses them where the host has several
/// nodes: the check cannot run on such a host, and says so.
fn numa_skip(err: &str) {
    common::skip(&format!(
        "this host has several NUMA nodes and the stub GPUs none: {}",
        err.trim()
    ));
}

#[test]
fn each_engine_gets_integer_indices_in_pci_order_and_nothing_else_unasked() {
    let rig = Rig::new();
    let engines: [&[&str]; 6] = [
        &["vllm", "serve", "m", "--tensor-parallel-size", "2"],
        &[
            "python3",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "m",
        ],
        &[
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--tp",
            "2",
        ],
        &[
            "text-generation-launcher",
            "--model-id",
            "m",
            "--num-shard",
            "2",
        ],
        &["llama-server", "-m", "m.gguf"],
        &["ollama", "serve"],
    ];
    for cmd in engines {
        let mut args = vec!["run", "--gpus", "1,0", "--"];
        args.extend_from_slice(cmd);
        let (code, out, err) = rig.run(&args, &[]);
        if err.contains("NUMA node unknown") {
            return numa_skip(&err);
        }
        assert_eq!(code, 0, "{cmd:?}: {err}");
        let env = received(&out);
        // Every UUID is known (the dry run shows them), and still: indices, in the user's order.
        assert_eq!(
            env,
            map(&[
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
                ("CUDA_VISIBLE_DEVICES", "1,0")
            ]),
            "{cmd:?}: {err}"
        );
        let v = &env["CUDA_VISIBLE_DEVICES"];
        assert_eq!(python_int_entries(v), Ok(vec![1, 0]), "vLLM/SGLang rule");
        assert_eq!(tgi_count(v), 2, "TGI rule");
        assert_eq!(
            cuda_runtime(v, &[UUID0, UUID1]),
            Ok(vec![1, 0]),
            "CUDA rule"
        );
    }
    let (code, json, err) = rig.run(
        &[
            "run",
            "--gpus",
            "1,0",
            "--dry-run",
            "--json",
            "--",
            "vllm",
            "serve",
            "m",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan["gpus"][0]["uuid"], UUID1);
    assert_eq!(plan["engine"], "vllm");
    let advice = plan["advice"].to_string();
    assert!(
        advice.contains("OMP_NUM_THREADS is not set: vLLM sets it itself"),
        "{advice}"
    );
}

#[test]
fn uuids_only_when_asked_and_only_for_engines_that_accept_them() {
    let rig = Rig::new();
    for cmd in [&["llama-server", "-m", "m.gguf"][..], &["ollama", "serve"]] {
        let mut args = vec!["run", "--gpus", "0,1", "--device-ids", "uuid", "--"];
        args.extend_from_slice(cmd);
        let (code, out, err) = rig.run(&args, &[]);
        if err.contains("NUMA node unknown") {
            return numa_skip(&err);
        }
        assert_eq!(code, 0, "{err}");
        let env = received(&out);
        let want = format!("{UUID0},{UUID1}");
        assert_eq!(
            env,
            map(&[("CUDA_VISIBLE_DEVICES", want.as_str())]),
            "{cmd:?}"
        );
        assert_eq!(cuda_runtime(&want, &[UUID0, UUID1]), Ok(vec![0, 1]));
        // What vLLM would do with it: the start-up crash of vllm-project/vllm#13815.
        assert!(python_int_entries(&want).is_err());
    }
    for cmd in [
        &["vllm", "serve", "m"][..],
        &["python3", "-m", "sglang.launch_server", "--model-path", "m"],
    ] {
        let mut args = vec!["run", "--gpus", "0,1", "--device-ids", "uuid", "--"];
        args.extend_from_slice(cmd);
        let (code, out, err) = rig.run(&args, &[]);
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(out.is_empty(), "{cmd:?} was started: {out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("inferscope: error: --device-ids uuid: ")
                && err.contains("rejects UUIDs in CUDA_VISIBLE_DEVICES"),
            "{err}"
        );
    }
}

#[test]
fn asked_settings_are_set_and_user_values_are_kept_byte_for_byte() {
    let rig = Rig::new();
    let (code, out, err) = rig.run(
        &[
            "run",
            "--gpus",
            "0,1",
            "--omp-threads",
            "auto",
            "--alloc-conf",
            "expandable_segments:True",
            "--",
            "llama-server",
            "-m",
            "m.gguf",
        ],
        &[],
    );
    if err.contains("NUMA node unknown") {
        return numa_skip(&err);
    }
    assert_eq!(code, 0, "{err}");
    let env = received(&out);
    assert_eq!(env["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True");
    let omp: u64 = env["OMP_NUM_THREADS"].parse().unwrap();
    assert!(omp >= 1, "{env:?}");

    // The user's own values, odd spacing and all, reach the server unchanged.
    let mine = [
        ("CUDA_VISIBLE_DEVICES", "0,1"),
        ("OMP_NUM_THREADS", " 3 "),
        ("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
    ];
    let (code, out, err) = rig.run(
        &[
            "run",
            "--gpus",
            "0,1",
            "--omp-threads",
            "8",
            "--alloc-conf",
            "x:y",
            "--",
            "vllm",
            "serve",
            "m",
        ],
        &mine,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(received(&out), map(&mine));
    assert!(err.contains("--omp-threads is not applied"), "{err}");

    // vLLM's sleep mode refuses expandable segments: refused before anything starts.
    let (code, out, err) = rig.run(
        &[
            "run",
            "--gpus",
            "0",
            "--alloc-conf",
            "expandable_segments:True",
            "--",
            "vllm",
            "serve",
            "m",
            "--enable-sleep-mode",
        ],
        &[],
    );
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.starts_with("inferscope: error: --alloc-conf "), "{err}");
    assert!(err.contains("CuMemAllocator"), "{err}");

    // A CUDA_VISIBLE_DEVICES naming other GPUs is never overwritten: one line, exit 2.
    let (code, out, err) = rig.run(
        &["run", "--gpus", "0", "--", "vllm", "serve", "m"],
        &[("CUDA_VISIBLE_DEVICES", "1")],
    );
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("inferscope: error: CUDA_VISIBLE_DEVICES=1 is already set and differs"),
        "{err}"
    );
}

/// Models a two-GPU AMD workstation (e.g. 2x Radeon PRO W7900, PCI vendor 0x1002): the RTX 5090
/// workstation fixture's PCI tree with its GPUs' vendor set to AMD.
fn amd_snapshot(dir: &Path) -> PathBuf {
    let mut snap = common::capture_fixture("rtx5090-2gpu-workstation");
    for g in &mut snap.gpus {
        g.vendor = inferscope_host::GpuVendor::Amd;
    }
    snap.env.clear();
    let file = dir.join("amd.json");
    std::fs::write(&file, serde_json::to_string(&snap).unwrap()).unwrap();
    file
}

#[test]
fn an_amd_host_gets_hip_visible_devices() {
    let rig = Rig::new();
    let file = amd_snapshot(rig.dir.path());
    let f = file.to_str().unwrap();
    let (code, json, err) = rig.run(
        &[
            "run",
            "--gpus",
            "1",
            "--snapshot",
            f,
            "--dry-run",
            "--json",
            "--",
            "vllm",
            "serve",
            "m",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan["env"], serde_json::json!({"HIP_VISIBLE_DEVICES": "1"}));
    assert!(!err.contains("warning: AMD"), "{err}");
    assert_eq!(python_int_entries("1"), Ok(vec![1]));
    let (code, _, err) = rig.run(
        &[
            "run",
            "--gpus",
            "1",
            "--snapshot",
            f,
            "--emit",
            "numactl",
            "--device-ids",
            "uuid",
            "--",
            "llama-server",
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("AMD GPUs are selected by index"), "{err}");
}
