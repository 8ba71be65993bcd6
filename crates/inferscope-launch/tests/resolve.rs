//! Resolution on the multi-socket fixture trees (fixtures/hosts/), captured with the real probe.

use inferscope_host::{
    GpuDetails, GpuMemory, GpuPair, GpuUuid, LinkClass, Reading, Snapshot, UnknownReason,
};
use inferscope_launch::{
    Emit, EmitOptions, GpuRef, LaunchError, LaunchPlan, MemMode, RunRequest, Target, emit,
    parse_gpus, parse_nodes, resolve,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

const H100: &str = "h100-sxm8-2s-switch-12nic";
const PCIE8: &str = "pcie8-2s-plx-switches";
const ASYM: &str = "dual-socket-5gpu-asymmetric";
const CLOUD: &str = "cloud-vm-2gpu-numa-unknown";

fn fixture(name: &str) -> Snapshot {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hosts")
        .join(name)
        .join("root");
    inferscope_probe::capture(
        &inferscope_probe::FsRoot::new(&root),
        &inferscope_probe::CaptureOptions {
            captured_at: "2026-12-02T00:00:00Z".into(),
            tool: "inferscope test".into(),
        },
    )
}

fn request(target: Target) -> RunRequest {
    RunRequest {
        target,
        mem: None,
        cpus_per_gpu: None,
        env: BTreeMap::new(),
        command: vec!["vllm".into(), "serve".into(), "m".into()],
        device_ids: inferscope_launch::DeviceIds::Index,
        omp_threads: None,
        alloc_conf: None,
    }
}

fn gpus(list: &str) -> RunRequest {
    request(parse_gpus(list).unwrap())
}

fn plan(snapshot: &Snapshot, req: &RunRequest) -> LaunchPlan {
    resolve(snapshot, req).unwrap_or_else(|e| panic!("{e}"))
}

fn labels(p: &LaunchPlan) -> Vec<&str> {
    p.gpus.iter().map(|g| g.label.as_str()).collect()
}

fn unknown<T>() -> Reading<T> {
    Reading::unknown(UnknownReason::NotSupported, "not in this test")
}

/// Driver details with only a UUID and memory use known.
fn details(uuid: &str, used_gib: Option<u64>) -> GpuDetails {
    GpuDetails {
        index: unknown(),
        uuid: Reading::value(GpuUuid(uuid.into())),
        name: unknown(),
        serial: unknown(),
        memory: match used_gib {
            Some(g) => Reading::value(GpuMemory {
                total_bytes: 80 << 30,
                used_bytes: g << 30,
                free_bytes: (80 - g) << 30,
                reserved_bytes: unknown(),
            }),
            None => unknown(),
        },
        bar1: unknown(),
        persistence_mode: unknown(),
        compute_mode: unknown(),
        mig: unknown(),
        ecc: unknown(),
        memory_repair: unknown(),
        clocks: unknown(),
        temperature_c: unknown(),
        power_draw_mw: unknown(),
        power_limit_mw: unknown(),
        pcie: unknown(),
        nvlinks: unknown(),
        cpu_affinity: unknown(),
        memory_affinity: unknown(),
        gpu_numa_node: unknown(),
        processes: unknown(),
    }
}

/// The snapshot with driver details: UUID `GPU-000N-...` and `used[i]` GiB in use.
fn with_driver(mut s: Snapshot, used: &[Option<u64>]) -> Snapshot {
    for (i, g) in s.gpus.iter_mut().enumerate() {
        g.details = Reading::value(details(
            &format!("GPU-{i:04}-aaaa-bbbb"),
            used.get(i).copied().flatten(),
        ));
    }
    s
}

// ---- a group on one node -------------------------------------------------------------------

#[test]
fn one_node_group_binds_cpus_and_memory_to_that_node() {
    let s = fixture(H100);
    let p = plan(&s, &gpus("0,1"));
    assert_eq!(labels(&p), ["GPU0", "GPU1"]);
    assert_eq!(p.cpus.to_string(), "0,2,4,6,8,10");
    assert_eq!(p.nodes.to_string(), "0");
    let m = p.memory.as_ref().unwrap();
    assert_eq!((m.policy, m.nodes.to_string()), (MemMode::Bind, "0".into()));
    assert!(p.workers.is_empty());
    assert_eq!(p.env["CUDA_VISIBLE_DEVICES"], "0,1");
    assert_eq!(p.env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
    // Nothing else unless asked (issue 13); vLLM's own OMP default is explained in the advice.
    assert_eq!(p.env.len(), 2, "{:?}", p.env);
    assert!(
        p.advice
            .iter()
            .any(|a| a.contains("OMP_NUM_THREADS is not set: vLLM sets it itself")),
        "{:?}",
        p.advice
    );
    assert!(
        !p.warnings.iter().any(|w| w.contains("span")),
        "{:?}",
        p.warnings
    );
    assert!(!p.live);

    let s = fixture(PCIE8);
    let p = plan(&s, &gpus("4,5"));
    assert_eq!(p.cpus.to_string(), "14-27");
    assert_eq!(p.memory.unwrap().nodes.to_string(), "1");
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

// ---- a group across sockets ----------------------------------------------------------------

#[test]
fn cross_socket_group_warns_and_interleaves() {
    let s = fixture(H100);
    let p = plan(&s, &gpus("3,4"));
    assert_eq!(p.cpus.to_string(), "0-11");
    assert_eq!(p.nodes.to_string(), "0-1");
    let m = p.memory.as_ref().unwrap();
    assert_eq!(
        (m.policy, m.nodes.to_string()),
        (MemMode::Interleave, "0-1".into())
    );
    let w = p
        .warnings
        .iter()
        .find(|w| w.contains("span NUMA nodes 0-1"))
        .expect("a warning about spanning nodes");
    assert!(w.contains("GPU0,GPU1,GPU2,GPU3 share node 0"), "{w}");
    assert!(!p.env.contains_key("OMP_NUM_THREADS"));
    assert!(p.reasons.iter().any(|r| r.contains("one process tree")));

    let mut req = gpus("4,3");
    req.mem = Some(MemMode::Preferred);
    let p = plan(&s, &req);
    let m = p.memory.as_ref().unwrap();
    assert_eq!(
        (m.policy, m.nodes.to_string()),
        (MemMode::Preferred, "1".into()),
        "preferred takes the first GPU's node"
    );
    assert_eq!(p.env["CUDA_VISIBLE_DEVICES"], "4,3", "the user's order");

    req.mem = Some(MemMode::Bind);
    let m = plan(&s, &req).memory.unwrap();
    assert_eq!(
        (m.policy, m.nodes.to_string()),
        (MemMode::Bind, "0-1".into())
    );
}

// ---- the cgroup excludes the GPU's local CPUs -----------------------------------------------

#[test]
fn cgroup_that_excludes_the_local_cpus_is_an_empty_cpu_set() {
    let s = fixture(ASYM);
    let gpus = |list: &str| {
        let mut req = gpus(list);
        req.env = s.env.clone();
        req
    };
    let e = resolve(&s, &gpus("0")).unwrap_err();
    assert!(matches!(e, LaunchError::EmptyCpuSet { .. }), "{e}");
    let msg = e.to_string();
    assert_eq!(
        msg,
        "empty CPU set: GPU0 is on node 1 (CPUs 8-15,24-31), but this process's cgroup (/system.slice/vllm.service) allows only CPUs 0-7,16-23; run it in a cgroup that allows those CPUs, or choose GPUs on node 0 (GPU1,GPU2,GPU3,GPU4)"
    );

    // With a GPU on the allowed node as well, the CPUs shrink to what the cgroup allows and the
    // memory policy drops the node the cgroup forbids.
    let p = plan(&s, &gpus("0,1"));
    assert_eq!(p.cpus.to_string(), "0-7,16-23");
    let m = p.memory.as_ref().unwrap();
    assert_eq!(
        (m.policy, m.nodes.to_string()),
        (MemMode::Interleave, "0".into())
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("allows none of node 1's CPUs (8-15,24-31)") && w.contains("GPU0")),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("allows memory only on node(s) 0")),
        "{:?}",
        p.warnings
    );
    // The inherited CUDA_VISIBLE_DEVICES=1,2,3,4 is replaced, and said so.
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("CUDA_VISIBLE_DEVICES=1,2,3,4"))
    );

    // --cpus-per-gpu on that GPU: no slot at all.
    let mut req = gpus("0");
    req.cpus_per_gpu = Some(2);
    let e = resolve(&s, &req).unwrap_err();
    assert!(matches!(e, LaunchError::NotEnoughCpus { .. }), "{e}");

    // auto never picks the GPU the cgroup cannot run next to.
    let p = plan(&s, &request(Target::Auto(1)));
    assert_eq!(labels(&p), ["GPU1"]);
    let p = plan(&s, &request(Target::Auto(2)));
    assert_eq!(labels(&p), ["GPU1", "GPU2"], "PHB pair on node 0");
}

// ---- --cpus-per-gpu splits a node among four workers -----------------------------------------

#[test]
fn cpus_per_gpu_splits_a_node_among_four_workers() {
    let s = fixture(PCIE8);
    let mut req = gpus("0,1,2,3");
    req.cpus_per_gpu = Some(3);
    let p = plan(&s, &req);
    let split: Vec<(String, u32, String)> = p
        .workers
        .iter()
        .map(|w| (w.gpu.clone(), w.slot, w.cpus.to_string()))
        .collect();
    assert_eq!(
        split,
        [
            ("GPU0".to_string(), 0, "0-2".to_string()),
            ("GPU1".to_string(), 1, "3-5".to_string()),
            ("GPU2".to_string(), 2, "6-8".to_string()),
            ("GPU3".to_string(), 3, "9-11".to_string()),
        ]
    );
    assert_eq!(p.cpus.to_string(), "0-11");
    assert!(!p.env.contains_key("OMP_NUM_THREADS"));
    assert_eq!(p.memory.unwrap().nodes.to_string(), "0");

    // Four workers started one by one get the same, disjoint, slots.
    let mut seen = inferscope_host::CpuSet::new();
    for (gpu, want) in [(3, "9-11"), (0, "0-2"), (2, "6-8"), (1, "3-5")] {
        let mut req = request(Target::Gpus(vec![GpuRef::Index(gpu)]));
        req.cpus_per_gpu = Some(3);
        let p = plan(&s, &req);
        assert_eq!(p.cpus.to_string(), want, "GPU{gpu}");
        assert!(p.cpus.is_disjoint(&seen));
        seen = seen.union(&p.cpus);
    }
    // Node 1's GPUs count slots on node 1.
    let mut req = gpus("5");
    req.cpus_per_gpu = Some(3);
    assert_eq!(plan(&s, &req).cpus.to_string(), "17-19");

    // A slot past the node's CPUs is an error, not an overlap: 4 × 4 > 14.
    let mut req = gpus("0,1,2,3");
    req.cpus_per_gpu = Some(4);
    let e = resolve(&s, &req).unwrap_err().to_string();
    assert!(
        e.starts_with("--cpus-per-gpu 4: GPU3 is GPU number 4 on node 0"),
        "{e}"
    );
    assert!(e.contains("allows only 14 of them (0-13)"), "{e}");

    // Even-numbered CPU lists are split in list order.
    let s = fixture(H100);
    let mut req = gpus("0,1,2,3");
    req.cpus_per_gpu = Some(1);
    let p = plan(&s, &req);
    let cpus: Vec<String> = p.workers.iter().map(|w| w.cpus.to_string()).collect();
    assert_eq!(cpus, ["0", "2", "4", "6"]);

    req.cpus_per_gpu = Some(0);
    assert!(matches!(
        resolve(&s, &req).unwrap_err(),
        LaunchError::Usage(_)
    ));
    req.cpus_per_gpu = Some(u32::MAX);
    assert!(resolve(&s, &req).is_err());
}

// ---- auto:N -----------------------------------------------------------------------------------

#[test]
fn auto_prefers_links_then_free_memory_then_one_node() {
    let s = fixture(PCIE8);
    assert_eq!(
        labels(&plan(&s, &request(Target::Auto(2)))),
        ["GPU0", "GPU1"]
    );
    assert_eq!(
        labels(&plan(&s, &request(Target::Auto(4)))),
        ["GPU0", "GPU1", "GPU2", "GPU3"]
    );
    let p = plan(&s, &request(Target::Auto(2)));
    assert!(
        p.reasons
            .iter()
            .any(|r| r.starts_with("auto:2 chose GPU0,GPU1 of 8 GPUs: worst link PIX")),
        "{:?}",
        p.reasons
    );

    // Memory in use breaks the tie between PIX pairs; the busy GPU is named in a warning when
    // chosen explicitly.
    let busy = with_driver(fixture(PCIE8), &[Some(40), Some(0), Some(0), Some(0)]);
    let p = plan(&busy, &request(Target::Auto(2)));
    assert_eq!(labels(&p), ["GPU2", "GPU3"]);
    // Every UUID is known, and vLLM still gets indices (it parses entries with int()).
    assert_eq!(p.env["CUDA_VISIBLE_DEVICES"], "2,3");
    assert_eq!(p.env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
    let p = plan(&busy, &gpus("0"));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("GPU0 already has 40.0 GiB of 80.0 GiB memory in use")),
        "{:?}",
        p.warnings
    );
    // ... but a better link wins over free memory: PIX(0,1) beats PXB.
    let busy = with_driver(fixture(PCIE8), &[Some(40), Some(0), Some(0)]);
    assert_eq!(
        labels(&plan(&busy, &request(Target::Auto(2)))),
        ["GPU0", "GPU1"],
        "GPU3's memory use is unknown, which is not zero"
    );

    // NVLink, when the driver reports it, beats every PCIe class.
    let mut s = fixture(H100);
    let (a, b) = (s.gpus[4].pci_bus_id, s.gpus[6].pci_bus_id);
    s.gpu_pairs.push(GpuPair {
        a,
        b,
        common_ancestor: Reading::value(LinkClass::Node),
        nvlinks: Reading::value(18),
        p2p_read: unknown(),
        p2p_write: unknown(),
    });
    let p = plan(&s, &request(Target::Auto(2)));
    assert_eq!(labels(&p), ["GPU4", "GPU6"]);
    assert!(p.reasons.iter().any(|r| r.contains("worst link NV18")));

    // Deterministic, and bounded by the GPUs there are.
    let s = fixture(H100);
    assert_eq!(
        plan(&s, &request(Target::Auto(3))),
        plan(&s, &request(Target::Auto(3)))
    );
    assert_eq!(
        labels(&plan(&s, &request(Target::Auto(8)))).len(),
        8,
        "all GPUs"
    );
    let e = resolve(&s, &request(Target::Auto(9))).unwrap_err();
    assert_eq!(e.to_string(), "--gpus auto:9: the snapshot has only 8 GPUs");
}

#[test]
fn auto_searches_greedily_beyond_the_exhaustive_limit() {
    // 24 GPUs (three copies of the 8) choose 12 is 2.7 million sets: greedy, still deterministic.
    let mut s = fixture(PCIE8);
    let base = s.gpus.clone();
    for copy in 1..3u8 {
        for g in &base {
            let mut g = g.clone();
            g.pci_bus_id.domain = u32::from(copy);
            s.gpus.push(g);
        }
    }
    let p = plan(&s, &request(Target::Auto(12)));
    assert_eq!(p.gpus.len(), 12);
    assert_eq!(p, plan(&s, &request(Target::Auto(12))));
}

// ---- naming GPUs and nodes ------------------------------------------------------------------

#[test]
fn gpus_by_uuid_pci_address_and_errors() {
    let s = with_driver(fixture(H100), &[]);
    let p = plan(&s, &gpus("GPU-0005,0000:18:00.0"));
    assert_eq!(labels(&p), ["GPU5", "GPU0"]);
    assert_eq!(p.env["CUDA_VISIBLE_DEVICES"], "5,0");
    assert_eq!(p.gpus[0].uuid.as_ref().unwrap().0, "GPU-0005-aaaa-bbbb");

    let err = |s: &Snapshot, list: &str| resolve(s, &gpus(list)).unwrap_err().to_string();
    assert_eq!(
        err(&s, "8"),
        "no GPU 8: the snapshot has 8 GPUs (GPU0-GPU7); `inferscope topo` lists them"
    );
    assert_eq!(
        err(&s, "GPU-00"),
        "no GPU GPU-00: it is the start of 8 GPUs' UUIDs; give more of the UUID"
    );
    assert!(err(&s, "GPU-9").contains("no GPU of the snapshot has a UUID starting with it"));
    assert!(err(&s, "0,GPU-0000").contains("GPU0 is named twice"));
    assert!(err(&s, "0000:19:00.0").starts_with("no GPU 0000:19:00.0: no GPU at that PCI address"));
    let plain = fixture(H100);
    assert!(err(&plain, "GPU-1234").contains("UUIDs are unknown"));

    let mut nogpu = fixture(H100);
    nogpu.gpus.clear();
    assert_eq!(err(&nogpu, "0"), "no GPU 0: the snapshot has no GPU");
    nogpu.is_live = true;
    assert_eq!(err(&nogpu, "0"), "no GPU 0: this machine has no GPU");
}

#[test]
fn numa_node_target_binds_without_gpus() {
    let s = fixture(PCIE8);
    let p = plan(&s, &request(parse_nodes("1").unwrap()));
    assert!(p.gpus.is_empty());
    assert_eq!(p.cpus.to_string(), "14-27");
    assert_eq!(p.memory.as_ref().unwrap().nodes.to_string(), "1");
    assert_eq!(
        p.env.keys().collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "no GPU variables"
    );
    let p = plan(&s, &request(parse_nodes("0-1").unwrap()));
    assert_eq!(p.memory.unwrap().policy, MemMode::Interleave);
    let e = resolve(&s, &request(parse_nodes("2").unwrap())).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no NUMA node 2: the snapshot has node(s) 0,1"
    );
    let mut req = request(parse_nodes("0").unwrap());
    req.cpus_per_gpu = Some(2);
    assert!(matches!(resolve(&s, &req), Err(LaunchError::Usage(_))));
}

#[test]
fn gpus_without_a_reported_node_are_placed_by_their_cpus() {
    let s = fixture(CLOUD);
    let p = plan(&s, &gpus("1"));
    assert_eq!(p.gpus[0].numa_node.0, 0);
    assert!(
        p.reasons
            .iter()
            .any(|r| r.contains("GPU1's NUMA node is not reported")),
        "{:?}",
        p.reasons
    );
    assert_eq!(p.cpus.to_string(), "0-11");
    // The fixture's environment sets CUDA_DEVICE_ORDER; the plan sets it anyway (same value).
    assert_eq!(p.env["CUDA_VISIBLE_DEVICES"], "1");
}

#[test]
fn user_environment_is_left_alone() {
    let s = fixture(H100);
    let mut req = gpus("0");
    req.env.insert(
        "PYTORCH_CUDA_ALLOC_CONF".into(),
        "backend:cudaMallocAsync".into(),
    );
    req.env.insert("OMP_NUM_THREADS".into(), "2".into());
    let p = plan(&s, &req);
    assert!(!p.env.contains_key("PYTORCH_CUDA_ALLOC_CONF"));
    assert!(!p.env.contains_key("OMP_NUM_THREADS"));
    assert!(p.reasons.iter().any(|r| r.contains("OMP_NUM_THREADS=2")));
    let mut req = gpus("0");
    req.command.clear();
    assert_eq!(resolve(&s, &req), Err(LaunchError::NoCommand));
}

#[test]
fn plan_json_round_trips() {
    let s = fixture(PCIE8);
    let mut req = gpus("0,1");
    req.cpus_per_gpu = Some(2);
    let p = plan(&s, &req);
    let json = serde_json::to_string_pretty(&p).unwrap();
    let back: LaunchPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["cpus"], "0-3");
    assert_eq!(v["memory"]["policy"], "bind");
    assert_eq!(v["memory"]["nodes"], "0");
    assert_eq!(v["workers"][1]["cpus"], "2-3");
    assert_eq!(v["gpus"][0]["pci_bus_id"], "0000:1c:00.0");
}

// ---- emitters ---------------------------------------------------------------------------------

#[test]
fn emitters_say_the_same_plan() {
    let s = fixture(H100);
    let mut req = gpus("0,1");
    req.command = vec![
        "vllm".into(),
        "serve".into(),
        "meta-llama/Llama-3.1-8B".into(),
        "--served-model-name".into(),
        "my model".into(),
    ];
    let p = plan(&s, &req);

    let numactl = emit(&p, Emit::Numactl, &EmitOptions::default()).unwrap();
    assert_eq!(
        numactl.lines().last().unwrap(),
        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1 numactl --physcpubind=0,2,4,6,8,10 --membind=0 -- vllm serve meta-llama/Llama-3.1-8B --served-model-name 'my model'"
    );
    assert!(
        numactl.starts_with("# inferscope run: CPUs 0,2,4,6,8,10 (6 CPUs), memory bind on node 0")
    );

    let docker = emit(&p, Emit::Docker, &EmitOptions::default()).unwrap();
    for flag in [
        "--cpuset-cpus=0,2,4,6,8,10 \\",
        "--cpuset-mems=0 \\",
        "--gpus '\"device=0,1\"' \\",
        "--shm-size=16g \\",
        "--ulimit memlock=-1 \\",
        "--cap-add SYS_NICE \\",
    ] {
        assert!(docker.contains(flag), "{flag} in\n{docker}");
    }
    // Inside the container CUDA renumbers the two GPUs from 0; the selection is still explicit,
    // and vLLM's official image runs `vllm serve` whatever its ENTRYPOINT.
    assert!(
        docker.ends_with(
            "  -e CUDA_DEVICE_ORDER=PCI_BUS_ID \\\n  -e CUDA_VISIBLE_DEVICES=0,1 \\\n  --entrypoint vllm \\\n  vllm/vllm-openai:latest \\\n  serve meta-llama/Llama-3.1-8B --served-model-name 'my model'\n"
        ),
        "{docker}"
    );

    let systemd = emit(&p, Emit::Systemd, &EmitOptions::default()).unwrap();
    for line in [
        "[Service]",
        "CPUAffinity=0,2,4,6,8,10",
        "NUMAPolicy=bind",
        "NUMAMask=0",
        "LimitMEMLOCK=infinity",
        "ExecStart=",
        "ExecStart=vllm serve meta-llama/Llama-3.1-8B --served-model-name \"my model\"",
    ] {
        assert!(systemd.lines().any(|l| l == line), "{line} in\n{systemd}");
    }

    let k8s = emit(&p, Emit::K8s, &EmitOptions::default()).unwrap();
    for text in [
        "topologyManagerPolicy: single-numa-node",
        "cpuManagerPolicy: static",
        "requests: {cpu: \"6\", memory: \"<memory>\", nvidia.com/gpu: \"2\"}",
        "image: \"vllm/vllm-openai:latest\"",
        "command: [\"vllm\"]",
        "args: [\"serve\", \"meta-llama/Llama-3.1-8B\", \"--served-model-name\", \"my model\"]",
        "- name: \"CUDA_VISIBLE_DEVICES\"\n      value: \"0,1\"",
        "add: [\"SYS_NICE\"]",
    ] {
        assert!(k8s.contains(text), "{text} in\n{k8s}");
    }

    // Across sockets: interleave, warnings as comments, k8s needs a looser policy.
    let p = plan(&s, &gpus("3,4"));
    let numactl = emit(&p, Emit::Numactl, &EmitOptions::default()).unwrap();
    assert!(numactl.contains("--interleave=0-1 --"));
    assert!(numactl.contains("# warning: the GPUs span NUMA nodes 0-1"));
    assert!(
        emit(&p, Emit::K8s, &EmitOptions::default())
            .unwrap()
            .contains("topologyManagerPolicy: restricted")
    );
    assert!(
        emit(&p, Emit::Docker, &EmitOptions::default())
            .unwrap()
            .contains("# note: --cpuset-mems only limits memory")
    );
    let mut req = gpus("3,4");
    req.mem = Some(MemMode::Preferred);
    let p = plan(&s, &req);
    let docker = emit(&p, Emit::Docker, &EmitOptions::default()).unwrap();
    assert!(
        !docker
            .lines()
            .any(|l| !l.starts_with('#') && l.contains("--cpuset-mems")),
        "{docker}"
    );
    assert!(
        emit(&p, Emit::Numactl, &EmitOptions::default())
            .unwrap()
            .contains("--preferred=0 --")
    );
    assert!(
        emit(&p, Emit::Systemd, &EmitOptions::default())
            .unwrap()
            .contains("NUMAPolicy=preferred\nNUMAMask=0\n")
    );

    // UUIDs, when known, go to docker's device list.
    let s = with_driver(fixture(H100), &[]);
    let p = plan(&s, &gpus("1"));
    assert!(
        emit(&p, Emit::Docker, &EmitOptions::default())
            .unwrap()
            .contains("--gpus '\"device=GPU-0001-aaaa-bbbb\"'")
    );
}

#[test]
fn odd_requests_give_errors_not_panics() {
    let snaps = [fixture(H100), fixture(ASYM), fixture(CLOUD), fixture(PCIE8)];
    let lists = [
        "0",
        "7",
        "4294967295",
        "auto:1",
        "auto:4294967295",
        "GPU-",
        "GPU-x",
        "0,1,2,3,4,5,6,7",
        "ffff:ff:1f.7",
        "auto:5",
    ];
    for s in &snaps {
        for l in lists {
            let Ok(t) = parse_gpus(l) else { continue };
            for per in [None, Some(1), Some(7), Some(u32::MAX)] {
                for mem in [None, Some(MemMode::Preferred), Some(MemMode::Interleave)] {
                    let mut req = request(t.clone());
                    req.cpus_per_gpu = per;
                    req.mem = mem;
                    if let Ok(p) = resolve(s, &req) {
                        assert!(!p.cpus.is_empty());
                        for e in [Emit::Numactl, Emit::Docker, Emit::Systemd, Emit::K8s] {
                            assert!(!emit(&p, e, &EmitOptions::default()).unwrap().is_empty());
                        }
                    }
                }
            }
        }
    }
    // A snapshot with an unknown cgroup plans, with a warning instead of a silent "no limit".
    let mut s = fixture(H100);
    s.settings.cgroup = Reading::unknown(UnknownReason::PermissionDenied, "/proc/self/cgroup");
    let p = plan(&s, &gpus("0"));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("the cgroup is unknown"))
    );
}
