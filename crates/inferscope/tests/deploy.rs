//! deploy/: the Kubernetes manifests parse as YAML (serde_norway) and name only real subcommands
//! and flags of this binary; the Prometheus rules pass `promtool check rules` and their unit
//! tests (`promtool test rules`); every metric the rules and the Grafana dashboard query is a
//! family the exporter really writes. Also `serve --root`, which the DaemonSet relies on.

mod common;

use inferscope_probe::watch::{GpuSample, ProcessSample};
use serde_norway::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    common::repo().join("deploy")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn get<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) => &v[i],
        Err(_) => &v[*k],
    })
}

/// Metric families of one exposition: every `# TYPE` name, from a fixture host with driver facts,
/// a GPU sample and a watched process, so that every family the exporter can write appears.
fn exported_families() -> BTreeSet<String> {
    let snap = inferscope::load::snapshot_file(&common::repo().join("fixtures/fleet/node-b.json"))
        .unwrap();
    let findings = inferscope_check::run_defaults(&snap);
    let gpus = vec![GpuSample {
        index: 0,
        uuid: Some("GPU-test".into()),
        pci_bus_id: Some(snap.gpus[0].pci_bus_id.to_string()),
        memory_used_bytes: Some(1 << 30),
        memory_total_bytes: Some(80 << 30),
        utilization_percent: Some(42),
        pcie_tx_bytes_per_s: Some(1_000_000),
        pcie_rx_bytes_per_s: Some(2_000_000),
        ..GpuSample::default()
    }];
    let procs = vec![ProcessSample {
        pid: 42,
        alive: true,
        name: Some("python3".into()),
        rss_bytes: Some(1 << 30),
        numa_bytes: [(0, 1 << 29), (1, 1 << 29)].into_iter().collect(),
        gpu_memory_bytes: [(0, 1 << 30)].into_iter().collect(),
        ..ProcessSample::default()
    }];
    let text = inferscope_fleet::exposition::write_metrics(&snap, &findings, &gpus, &procs);
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// `inferscope_*` identifiers in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = expr[i..].find("inferscope_") {
        let start = i + at;
        let boundary =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        if boundary {
            out.push(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

fn run_promtool(args: &[&str], dir: &Path) {
    let out = match Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!(
            "promtool not found ({e}): install Debian's `prometheus` package \
             (apt-get install -y prometheus), or run the project's test command `scripts/test`, \
             which installs it"
        ),
    };
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn exporter_writes_the_families_the_deploy_files_need() {
    let f = exported_families();
    for name in [
        "inferscope_info",
        "inferscope_check_status",
        "inferscope_driver_info",
        "inferscope_gpu_info",
        "inferscope_gpu_memory_used_bytes",
        "inferscope_gpu_memory_total_bytes",
        "inferscope_gpu_pcie_link_width",
        "inferscope_gpu_pcie_link_max_width",
        "inferscope_gpu_pcie_link_generation",
        "inferscope_gpu_pcie_link_max_generation",
        "inferscope_gpu_nvlink_links",
        "inferscope_gpu_nvlink_links_active",
        "inferscope_gpu_ecc_uncorrected_errors",
        "inferscope_process_gpu_memory_bytes",
        "inferscope_process_numa_resident_bytes",
    ] {
        assert!(f.contains(name), "{name} not exported; have {f:?}");
    }
}

#[test]
fn kubernetes_manifests_parse_and_use_real_flags() {
    let dir = deploy().join("kubernetes");
    let kust = yaml(&dir.join("kustomization.yaml"));
    assert!(
        kust.get("namespace").is_none(),
        "kustomization must not pin a namespace"
    );
    let resources: Vec<String> = get(&kust, &["resources"])
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        resources,
        ["daemonset.yaml", "service.yaml", "servicemonitor.yaml"]
    );
    let docs: Vec<Value> = resources.iter().map(|r| yaml(&dir.join(r))).collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["DaemonSet", "Service", "ServiceMonitor"]);
    for d in &docs {
        assert!(d["metadata"].get("namespace").is_none());
    }

    let ds = &docs[0];
    let pod = get(ds, &["spec", "template", "spec"]);
    assert_eq!(pod["runtimeClassName"].as_str(), Some("nvidia"));
    assert_eq!(
        get(pod, &["nodeSelector", "nvidia.com/gpu.present"]).as_str(),
        Some("true")
    );
    assert_eq!(
        get(pod, &["tolerations", "0", "key"]).as_str(),
        Some("nvidia.com/gpu")
    );
    let c = get(pod, &["containers", "0"]);
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(
        get(sc, &["capabilities", "drop", "0"]).as_str(),
        Some("ALL")
    );
    assert_eq!(
        get(pod, &["securityContext", "runAsNonRoot"]).as_bool(),
        Some(true)
    );
    assert_eq!(
        get(c, &["readinessProbe", "httpGet", "path"]).as_str(),
        Some("/metrics")
    );
    for k in ["requests", "limits"] {
        assert!(c["resources"][k]["memory"].is_string(), "{k}");
    }
    let mounts = c["volumeMounts"].as_sequence().unwrap();
    let mut host_paths = BTreeSet::new();
    for m in mounts {
        assert_eq!(m["readOnly"].as_bool(), Some(true), "{m:?}");
        let vol = pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        host_paths.insert((
            vol["hostPath"]["path"].as_str().unwrap().to_string(),
            m["mountPath"].as_str().unwrap().to_string(),
        ));
    }
    let args: Vec<String> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    // The probe reads <root>/sys and <root>/proc: the mounts must sit where --root points.
    let root = &args[args.iter().position(|a| a == "--root").unwrap() + 1];
    for p in ["/sys", "/proc"] {
        assert!(
            host_paths.contains(&(p.to_string(), format!("{root}{p}"))),
            "{p} not mounted at {root}{p}: {host_paths:?}"
        );
    }
    let listen = &args[args.iter().position(|a| a == "--listen").unwrap() + 1];
    let port: i64 = listen.rsplit_once(':').unwrap().1.parse().unwrap();
    assert_eq!(
        get(c, &["ports", "0", "containerPort"]).as_i64(),
        Some(port)
    );

    // Subcommand and every flag are real: they appear in the binary's --help.
    let (code, top, _) = common::inferscope(&["--help"]);
    assert_eq!(code, 0);
    assert!(top.contains(&format!("\n  {} ", args[0])), "{}", args[0]);
    let (code, help, _) = common::inferscope(&[&args[0], "--help"]);
    assert_eq!(code, 0);
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
            "{flag} not in `{} --help`:\n{help}",
            args[0]
        );
    }

    let svc = &docs[1];
    assert_eq!(
        get(svc, &["spec", "ports", "0", "name"]).as_str(),
        Some("metrics")
    );
    assert_eq!(
        get(svc, &["spec", "ports", "0", "port"]).as_i64(),
        Some(9400)
    );
    let sm = &docs[2];
    assert_eq!(
        get(sm, &["spec", "endpoints", "0", "port"]).as_str(),
        Some("metrics")
    );
    assert_eq!(
        get(sm, &["spec", "endpoints", "0", "path"]).as_str(),
        Some("/metrics")
    );
    // The ServiceMonitor selects the Service, which selects the pods.
    for (k, v) in get(sm, &["spec", "selector", "matchLabels"])
        .as_mapping()
        .unwrap()
    {
        assert_eq!(&svc["metadata"]["labels"][k.as_str().unwrap()], v);
    }
    for (k, v) in get(svc, &["spec", "selector"]).as_mapping().unwrap() {
        assert_eq!(
            &get(ds, &["spec", "template", "metadata", "labels"])[k.as_str().unwrap()],
            v
        );
    }
}

#[test]
fn rules_pass_promtool_and_use_exported_metrics() {
    let dir = deploy().join("prometheus");
    run_promtool(&["check", "rules", "inferscope-rules.yml"], &dir);
    run_promtool(&["test", "rules", "inferscope-rules.test.yml"], &dir);
    let families = exported_families();
    let rules = yaml(&dir.join("inferscope-rules.yml"));
    let mut alerts = Vec::new();
    for g in rules["groups"].as_sequence().unwrap() {
        for r in g["rules"].as_sequence().unwrap() {
            let expr = r["expr"].as_str().unwrap();
            let names = metric_names(expr);
            assert!(
                !names.is_empty() || expr.contains("up{"),
                "no inferscope metric in {expr}"
            );
            for n in names {
                assert!(families.contains(&n), "rule uses {n}, not exported");
            }
            alerts.push(r["alert"].as_str().unwrap().to_string());
        }
    }
    for a in [
        "InferscopeCheckFailingError",
        "InferscopePcieLinkDowntrained",
        "InferscopeNvlinkDown",
        "InferscopeGpuEccUncorrectable",
        "InferscopeGpuMemoryLeak",
        "InferscopeDriverVersionDrift",
    ] {
        assert!(alerts.iter().any(|x| x == a), "{a} missing");
    }
}

fn collect_queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::Object(q)) => {
                        if let Some(serde_json::Value::String(s)) = q.get("query") {
                            out.push(s.clone());
                        }
                    }
                    _ => collect_queries(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_queries(x, out)),
        _ => {}
    }
}

#[test]
fn dashboard_queries_name_exported_metrics() {
    let text = std::fs::read_to_string(deploy().join("grafana/inferscope.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut queries = Vec::new();
    collect_queries(&dash, &mut queries);
    assert!(queries.len() >= 20, "{queries:?}");
    let families = exported_families();
    let mut used = BTreeSet::new();
    for q in &queries {
        let names = metric_names(q);
        assert!(!names.is_empty(), "query without an inferscope metric: {q}");
        for n in names {
            assert!(
                families.contains(&n),
                "dashboard queries {n}, not exported: {q}"
            );
            used.insert(n);
        }
    }
    for n in [
        "inferscope_check_status",
        "inferscope_gpu_memory_used_bytes",
        "inferscope_gpu_pcie_link_width",
        "inferscope_gpu_nvlink_links_active",
        "inferscope_process_numa_resident_bytes",
    ] {
        assert!(used.contains(n), "dashboard lacks {n}");
    }
    let ids: Vec<i64> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ids.len(),
        ids.iter().collect::<BTreeSet<_>>().len(),
        "panel ids repeat"
    );
}

#[test]
fn metric_names_are_found_in_promql() {
    assert_eq!(
        metric_names("a / ignoring(x) inferscope_a_b{x=\"inferscope_not\"} + xinferscope_c"),
        ["inferscope_a_b", "inferscope_not"]
    );
}

#[test]
fn serve_reads_the_host_under_root() {
    // On a GPU machine NVML would add this machine's GPUs to the fixture's.
    let exporter = common::Exporter::start(
        &[
            "--root",
            "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
            "--all",
        ],
        &[("INFERSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")],
    );
    let resp = exporter.get("/metrics");
    drop(exporter);
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    // The fixture's 8 GPUs and 2 NUMA nodes, not this machine's.
    assert_eq!(resp.matches("inferscope_gpu_info{").count(), 8, "{resp}");
    assert!(resp.contains("pci_bus_id=\"0000:18:00.0\""));
    assert!(
        resp.contains("inferscope_numa_node_cpus{numa_node=\"1\"} 6"),
        "{resp}"
    );
    assert!(resp.contains("inferscope_gpu_pcie_link_width{"));
}

#[test]
fn serve_refuses_a_missing_root() {
    let (code, _, err) = common::inferscope(&["serve", "--metrics", "--root", "/nonexistent-root"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "inferscope: error: --root /nonexistent-root: not a directory\n"
    );
}

/// `kubectl kustomize DIR` (Debian's `kubernetes-client`; its kustomize 2.0 is the oldest the
/// manifests support), as one YAML value per object.
fn kustomize(dir: &str) -> Vec<Value> {
    use serde::Deserialize;
    let out = match Command::new("kubectl")
        .args(["kustomize", dir])
        .current_dir(common::repo())
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!(
            "kubectl not found ({e}): install Debian's `kubernetes-client` package \
             (apt-get install -y kubernetes-client; .ci/run does this) to run this test"
        ),
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {dir} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

/// `args` of a container, and that each `--flag` is in `inferscope SUBCOMMAND --help`.
fn assert_real_flags(c: &Value) -> Vec<String> {
    let args: Vec<String> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let (code, help, _) = common::inferscope(&[&args[0], "--help"]);
    assert_eq!(code, 0, "{}", args[0]);
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
            "{flag} not in `{} --help`",
            args[0]
        );
    }
    // And the whole command line parses: `serve` refuses a missing --root before listening.
    let mut probe = args.clone();
    if let Some(i) = probe.iter().position(|a| a == "--root") {
        probe[i + 1] = "/nonexistent-root".into();
    }
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    let (code, _, err) = common::inferscope(&probe);
    assert_eq!(code, 2);
    assert!(
        err.contains("--root /nonexistent-root: not a directory"),
        "{err}"
    );
    args
}

#[test]
fn kustomize_renders_the_built_image_and_real_flags() {
    let out = Command::new(common::repo().join("scripts/build-image.sh"))
        .arg("--print-name")
        .output()
        .unwrap();
    let image = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(
        image,
        format!("localhost/inferscope:{}", env!("CARGO_PKG_VERSION"))
    );
    for dir in ["deploy/kubernetes", "deploy/kubernetes-nfd"] {
        let objects = kustomize(dir);
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Service", "DaemonSet", "ServiceMonitor"], "{dir}");
        for o in &objects {
            assert_eq!(
                get(o, &["metadata", "labels", "app.kubernetes.io/part-of"]).as_str(),
                Some("inferscope")
            );
        }
        let pod = get(&objects[1], &["spec", "template", "spec"]);
        let c = get(pod, &["containers", "0"]);
        assert_eq!(c["image"].as_str(), Some(image.as_str()), "{dir}");
        assert_eq!(
            get(c, &["livenessProbe", "httpGet", "path"]).as_str(),
            Some("/healthz")
        );
        let args = assert_real_flags(c);
        let nfd = args.iter().position(|a| a == "--nfd-features");
        assert_eq!(nfd.is_some(), dir.ends_with("-nfd"), "{dir}: {args:?}");
        if let Some(i) = nfd {
            // The feature file lands in NFD's host directory, through the one writable mount.
            let file = &args[i + 1];
            let mount = c["volumeMounts"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|m| m["readOnly"].as_bool() != Some(true))
                .unwrap();
            let at = mount["mountPath"].as_str().unwrap();
            assert_eq!(file.rsplit_once('/').unwrap().0, at);
            let vol = pod["volumes"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap();
            assert_eq!(
                vol["hostPath"]["path"].as_str(),
                Some("/etc/kubernetes/node-feature-discovery/features.d")
            );
            assert_eq!(
                get(pod, &["securityContext", "runAsUser"]).as_i64(),
                Some(0)
            );
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false));
            assert_eq!(
                get(sc, &["capabilities", "drop", "0"]).as_str(),
                Some("ALL")
            );
        } else {
            for m in c["volumeMounts"].as_sequence().unwrap() {
                assert_eq!(m["readOnly"].as_bool(), Some(true), "{m:?}");
            }
        }
    }
}
