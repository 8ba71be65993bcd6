//! `run --emit lws`: every emitted LeaderWorkerSet validates against the real CRD's OpenAPI v3
//! schema (LWS v0.10.0, `fixtures/kubernetes/lws/`, Draft 7 as its README checked it), the
//! validator itself accepts the two published LWS examples and refuses a broken one, and the
//! leader's Service selects the pods LWS labels.

use inferscope_launch::{MultiNodeFormat, MultiNodeOptions, Network, emit_multi_node};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

fn lws_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/kubernetes/lws")
}

fn yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .map(|d| serde_norway::from_str::<Value>(d).unwrap_or_else(|e| panic!("{e}:\n{d}")))
        .collect()
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let text = std::fs::read_to_string(
            lws_dir().join("leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
        )
        .unwrap();
        let crd: Value = serde_norway::from_str(&text).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert!(schema.is_object(), "no openAPIV3Schema in the CRD");
        jsonschema::draft7::new(schema).unwrap()
    })
}

fn errors(doc: &Value) -> Vec<String> {
    validator()
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn the_validator_accepts_the_published_examples_and_refuses_a_broken_one() {
    for f in ["vllm-gpu-lws.yaml", "sglang-lws.yaml"] {
        let text = std::fs::read_to_string(lws_dir().join(f)).unwrap();
        let lws = &yaml_docs(&text)[0];
        assert_eq!(errors(lws), Vec::<String>::new(), "{f}");
        let mut bad = lws.clone();
        bad["spec"]["leaderWorkerTemplate"]["size"] = Value::String("two".into());
        assert!(!errors(&bad).is_empty(), "{f}: size \"two\" accepted");
    }
}

#[test]
fn emitted_leader_worker_sets_validate_against_the_crd() {
    let cases = [
        (
            "vllm serve meta-llama/Llama-3.1-405B-Instruct -tp 8 -pp 2 --port 8080",
            2,
            None,
            Some("0.11.1"),
        ),
        (
            "vllm serve deepseek-ai/DeepSeek-R1 -dp 32 --enable-expert-parallel",
            4,
            Some(Network::IbNdr),
            None,
        ),
        (
            "vllm serve Qwen/Qwen3-235B-A22B -tp 16 --max-model-len 32768",
            2,
            Some(Network::Eth100),
            Some("0.34.0"),
        ),
    ];
    for (cmd, nodes, network, version) in cases {
        let opts = MultiNodeOptions {
            nodes,
            network,
            engine_version: version.map(String::from),
            ..MultiNodeOptions::default()
        };
        let text = emit_multi_node(&words(cmd), MultiNodeFormat::Lws, &opts).unwrap();
        let docs = yaml_docs(&text);
        assert_eq!(docs.len(), 2, "{cmd}: LWS and Service\n{text}");
        let lws = &docs[0];
        assert_eq!(errors(lws), Vec::<String>::new(), "{cmd}\n{text}");
        let t = &lws["spec"]["leaderWorkerTemplate"];
        assert_eq!(t["size"], nodes, "{cmd}");
        // the leader serves; the workers carry no port and no probe
        let leader = &t["leaderTemplate"]["spec"]["containers"][0];
        let worker = &t["workerTemplate"]["spec"]["containers"][0];
        assert!(
            leader["readinessProbe"]["httpGet"]["path"] == "/health",
            "{cmd}"
        );
        assert!(worker.get("readinessProbe").is_none() && worker.get("ports").is_none());
        let script = worker["command"][2].as_str().unwrap();
        let sglang = cmd.contains("sglang");
        assert!(
            script.starts_with("exec ") && script.ends_with(" --headless") != sglang,
            "{script}"
        );
        // every node's command, read back, is a command the engine's own flag list accepts
        let words: Vec<String> = script
            .trim_start_matches("exec ")
            .split_whitespace()
            .map(|w| w.trim_matches(['\'', '"']).to_string())
            .collect();
        inferscope_plan::engine::parse_command(&words)
            .unwrap_or_else(|e| panic!("{cmd}: emitted worker command refused: {e}\n{script}"));
        // the Service selects the leader pod of this set
        let svc = &docs[1];
        assert_eq!(svc["kind"], "Service");
        assert_eq!(
            svc["spec"]["selector"]["leaderworkerset.sigs.k8s.io/name"],
            lws["metadata"]["name"]
        );
        assert_eq!(
            svc["spec"]["ports"][0]["port"],
            leader["ports"][0]["containerPort"]
        );
    }
}
