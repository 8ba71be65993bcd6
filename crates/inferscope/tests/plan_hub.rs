//! `plan --model ORG/NAME` through the Hugging Face Hub (issue 29 item 1), against the local
//! stand-in in `hub_standin/` serving `fixtures/hub/` (see its SOURCES.md): the same code path as
//! the real Hub, only `HF_ENDPOINT` differs.

mod common;
mod hub_standin;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn cache_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("inferscope-hub-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `inferscope plan ARGS` with the Hub at `endpoint` and the cache at `cache`.
fn plan(
    endpoint: &str,
    cache: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"));
    cmd.arg("plan")
        .args(args)
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HUB_CACHE", cache)
        .env("HF_HOME", cache.join("home"))
        .env("INFERSCOPE_HUB_REQUESTS", "1")
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("HF_TOKEN")
        .env_remove("HF_TOKEN_PATH")
        .env_remove("HF_HUB_OFFLINE")
        .current_dir(common::repo());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn requests(err: &str) -> usize {
    err.lines()
        .find_map(|l| l.strip_prefix("inferscope: hub requests: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no request count in {err}"))
}

/// The real repos' plans: two H100s at TP 2, 4,096 tokens.
const H100_TP2: [&str; 9] = [
    "--gpu",
    "H100 SXM",
    "--gpus",
    "2",
    "--tp",
    "2",
    "--max-model-len",
    "4096",
    "--json",
];

const ARGS: [&str; 9] = [
    "--gpu-memory-gib",
    "8",
    "--gpus",
    "2",
    "--tp",
    "2",
    "--max-model-len",
    "256",
    "--json",
];

#[test]
fn hub_repo_is_planned_from_real_headers_then_offline_the_same() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("tiny");
    let mut args = vec!["--model", "inferscope-test/tiny-llama-sharded"];
    args.extend(ARGS);
    let (code, out, err) = plan(
        &hub.endpoint,
        &cache,
        &[("HF_TOKEN", hub_standin::TOKEN)],
        &args,
    );
    assert_eq!(code, 0, "{err}");
    let online: Value = serde_json::from_str(&out).unwrap();
    // the index's total_size, equal to the two real shard headers' tensors (SOURCE.md: 53888)
    assert_eq!(online["weights_bytes_total"], 53888);
    assert!(
        online["assumptions"]
            .to_string()
            .contains("exact bytes from 21 checkpoint tensors")
    );
    let src = online["model_source"].as_str().unwrap();
    assert!(
        src.contains(&hub.endpoint) && src.contains(hub_standin::COMMIT),
        "{src}"
    );
    // config, generation_config (a 404 here), index, one Range request per shard: shards + 3
    // (each shard's request takes two hops: the Hub's 302, then the CDN)
    assert_eq!(requests(&err), 5, "{:?}", hub.seen());
    let seen = hub.seen();
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert!(
        seen.iter().filter(|s| s.host == "hub").all(|s| s.auth),
        "{seen:?}"
    );
    let cdn: Vec<_> = seen.iter().filter(|s| s.host == "cdn").collect();
    assert_eq!(cdn.len(), 2, "{seen:?}");
    assert!(
        cdn.iter()
            .all(|s| !s.auth && s.range.as_deref() == Some("bytes=0-262143")),
        "{seen:?}"
    );

    // the standard cache layout: refs/main → the commit; metadata as files; headers in the sidecar
    let repo = cache.join("models--inferscope-test--tiny-llama-sharded");
    let refs = std::fs::read_to_string(repo.join("refs/main")).unwrap();
    assert_eq!(refs, hub_standin::COMMIT);
    let snap = repo.join("snapshots").join(hub_standin::COMMIT);
    assert!(
        snap.join("config.json").is_file() && snap.join("model.safetensors.index.json").is_file()
    );
    assert!(!snap.join("model-00001-of-00002.safetensors").exists());
    assert!(
        snap.join(".inferscope/model-00001-of-00002.safetensors.header")
            .is_file()
    );

    // the same model from a local folder holding the whole files: the same per-GPU weights
    let (code, out, err) = common::inferscope(
        &[
            &[
                "plan",
                "--model",
                "fixtures/hub/inferscope-test--tiny-llama-sharded",
            ][..],
            &ARGS[..],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    let local: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        online["weights_bytes_per_gpu"],
        local["weights_bytes_per_gpu"]
    );
    assert_eq!(
        online["kv_cache_bytes_per_gpu"],
        local["kv_cache_bytes_per_gpu"]
    );

    // a second run with HF_HUB_OFFLINE=1 and no endpoint at all gives the same plan
    let before = hub.seen().len();
    let (code, out, err) = plan(
        "http://127.0.0.1:9",
        &cache,
        &[("HF_HUB_OFFLINE", "1")],
        &args,
    );
    assert_eq!(code, 0, "{err}");
    let offline: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        offline["weights_bytes_per_gpu"],
        online["weights_bytes_per_gpu"]
    );
    assert_eq!(
        offline["kv_cache_bytes_per_gpu"],
        online["kv_cache_bytes_per_gpu"]
    );
    assert_eq!(hub.seen().len(), before);
}

#[test]
fn gated_repo_without_token_is_one_line_and_exit_2() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("gated");
    let mut args = vec![
        "--model",
        "meta-llama/Llama-3.3-70B-Instruct",
        "--revision",
        "main",
    ];
    args.extend(ARGS);
    let (code, out, err) = plan(&hub.endpoint, &cache, &[], &args);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty());
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.contains("hub requests"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("inferscope: error: meta-llama/Llama-3.3-70B-Instruct is gated: accept its licence on the Hub and set HF_TOKEN"),
        "{err}"
    );
    // the token `hf auth login` writes ($HF_HOME/token; HF_HOME is CACHE/home here) is sent to
    // the Hub host, never to the CDN
    std::fs::create_dir_all(cache.join("home")).unwrap();
    std::fs::write(
        cache.join("home/token"),
        format!("{}\n", hub_standin::TOKEN),
    )
    .unwrap();
    let before = hub.seen().len();
    let mut tiny = vec!["--model", "inferscope-test/tiny-llama-sharded"];
    tiny.extend(ARGS);
    let (code, _out, err) = plan(&hub.endpoint, &cache, &[], &tiny);
    assert_eq!(code, 0, "{err}");
    let seen = hub.seen();
    let new = seen.get(before..).unwrap();
    assert!(new.iter().any(|s| s.host == "cdn"), "{new:?}");
    assert!(new.iter().all(|s| s.auth == (s.host == "hub")), "{new:?}");
    std::fs::remove_file(cache.join("home/token")).unwrap();

    // the URL is named, never a token
    assert!(
        lines[0].contains("/meta-llama/Llama-3.3-70B-Instruct/resolve/main/config.json"),
        "{err}"
    );
    // with HF_HUB_OFFLINE the Hub is never asked: the embedded catalog's entry is planned
    let before = hub.seen().len();
    let (code, out, err) = plan(&hub.endpoint, &cache, &[("HF_HUB_OFFLINE", "1")], &args);
    assert!(code == 0 || code == 1, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["model_source"]
            .as_str()
            .unwrap()
            .contains("embedded catalog"),
        "{v}"
    );
    assert_eq!(hub.seen().len(), before);
    // an id in neither: offline is an error that says the Hub was not asked
    let (code, _out, err) = plan(
        &hub.endpoint,
        &cache,
        &[("HF_HUB_OFFLINE", "1")],
        &["--model", "nobody/NoSuchModel-7B", "--gpu-memory-gib", "8"],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown model") && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );
    assert_eq!(hub.seen().len(), before);
}

#[test]
fn unreadable_shard_header_falls_back_to_total_size_and_says_so() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("bad");
    // shard 2 is fixtures/tools/safetensors/bad-header-len-2-40.safetensors (header length 2^40)
    let mut args = vec!["--model", "inferscope-test/tiny-llama-bad-shard"];
    args.extend(ARGS);
    let (code, out, err) = plan(&hub.endpoint, &cache, &[], &args);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let src = v["model_source"].as_str().unwrap();
    assert!(
        src.contains("model-00002-of-00002.safetensors") && src.contains("total_size"),
        "{src}"
    );
    assert_eq!(v["weights_bytes_total"], 53888);
}

#[test]
fn index_only_2026_repo_is_sized_from_total_size() {
    // Real config and index of bryce-hoehn/Qwen3.5-18B-REAP-A3B-Coding (fixtures/hub/SOURCES.md);
    // the stand-in holds no shard header for it.
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("qwen35");
    let mut args = vec!["--model", "bryce-hoehn/Qwen3.5-18B-REAP-A3B-Coding"];
    args.extend(ARGS);
    let (code, out, err) = plan(&hub.endpoint, &cache, &[], &args);
    // config, generation_config, index, the first shard's 404: then the fallback, not 7 more
    assert_eq!(requests(&err), 4, "{err}");
    assert!(!err.contains("unknown model"), "{err}");
    let snap = cache
        .join("models--bryce-hoehn--Qwen3.5-18B-REAP-A3B-Coding/snapshots")
        .join(hub_standin::COMMIT);
    // its real generation_config.json is stored where vLLM looks for it
    assert_eq!(
        std::fs::read(snap.join("generation_config.json")).unwrap(),
        std::fs::read(
            common::repo().join(
                "fixtures/hub/bryce-hoehn--Qwen3.5-18B-REAP-A3B-Coding/generation_config.json"
            )
        )
        .unwrap()
    );
    let side = std::fs::read_to_string(snap.join(".inferscope/hub.json")).unwrap();
    assert!(side.contains("model-00001-of-00007.safetensors"), "{side}");
    eprintln!("{out}{err}");
    if code != 2 {
        // the planner models this architecture: weights are the index's total_size over TP 2
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["weights_bytes_total"], 37087995136u64);
        // per GPU: the total over TP 2, within 1 % (the engine's RoPE cache and runtime buffers
        // come on top)
        let per_gpu = v["weights_bytes_per_gpu"].as_f64().unwrap();
        let half = 37087995136.0 / 2.0;
        assert!((per_gpu - half).abs() / half < 0.01, "{per_gpu} vs {half}");
        assert!(
            v["model_source"].as_str().unwrap().contains("total_size"),
            "{v}"
        );
    }
}

/// `mem startup` resolves a model like `plan` (issue 29 item 4): a Hub id not in the catalog is
/// planned through the Hub, and what it fetched is then planned by `plan` offline.
#[test]
fn mem_startup_resolves_a_hub_id_like_plan() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("mem");
    // the first real vLLM start-up of fixtures/tools/engine-logs/vllm-recent.jsonl
    let case: Value = serde_json::from_str(
        std::fs::read_to_string(
            common::repo().join("fixtures/tools/engine-logs/vllm-recent.jsonl"),
        )
        .unwrap()
        .lines()
        .next()
        .unwrap(),
    )
    .unwrap();
    let log: String = case["raw_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}\n", l.as_str().unwrap()))
        .collect();
    let log_file = cache.join("startup.log");
    std::fs::write(&log_file, log).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args([
            "mem",
            "startup",
            "--json",
            "--model",
            "inferscope-test/tiny-llama-sharded",
        ])
        .arg(&log_file)
        .env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HUB_CACHE", &cache)
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN")
        .current_dir(common::repo())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["prediction"].is_object(),
        "{}",
        v["prediction_unavailable"]
    );
    assert!(hub.seen().iter().any(|s| s.path.ends_with("/config.json")));
    // the cache now holds it: plan finds it offline
    let mut args = vec!["--model", "inferscope-test/tiny-llama-sharded"];
    args.extend(ARGS);
    let (code, _out, err) = plan(
        "http://127.0.0.1:9",
        &cache,
        &[("HF_HUB_OFFLINE", "1")],
        &args,
    );
    assert_eq!(code, 0, "{err}");

    // the log itself naming the Hub id (the real log's model path replaced by it, as a user
    // serving straight from the Hub would have it): planned the same way, from the cache now
    let named = std::fs::read_to_string(&log_file).unwrap().replace(
        "/home/zp/work/models/Qwen/Qwen3-VL-30B-A3B-Instruct",
        "inferscope-test/tiny-llama-sharded",
    );
    assert!(named.contains("inferscope-test/tiny-llama-sharded"));
    let named_file = cache.join("named.log");
    std::fs::write(&named_file, named).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(["mem", "startup", "--json"])
        .arg(&named_file)
        .env("HF_HUB_CACHE", &cache)
        .env("HF_HUB_OFFLINE", "1")
        .current_dir(common::repo())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["prediction"].is_object(),
        "{}",
        v["prediction_unavailable"]
    );

    // a repo the Hub does not have, named by --model: no prediction, and the report says why
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args([
            "mem",
            "startup",
            "--json",
            "--model",
            "nobody/NoSuchModel-7B",
        ])
        .arg(&log_file)
        .env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HUB_CACHE", &cache)
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("HF_HUB_OFFLINE")
        .current_dir(common::repo())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let why = v["prediction_unavailable"].as_str().unwrap_or_default();
    assert!(
        why.contains("unknown model") && why.contains("/resolve/main/config.json"),
        "{why}"
    );
}

/// Every real 2025–26 repo in fixtures/hub (config and index as published; SOURCES.md): resolved
/// through the stand-in within shards + 3 requests, stored, and planned the same offline. Where
/// the planner models the architecture, the weights are the index's total_size over TP 2
/// within 1 % (no shard headers are served for them: the total_size fallback), and the KV bytes
/// per token and state bytes per sequence are those [`vllm_cache_bytes`] computes from the
/// config with vLLM's formulas.
#[test]
fn real_2025_26_repos_resolve_through_the_hub_and_offline() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("real");
    let mut planned = 0;
    for (repo, shards, total) in [
        (
            "bryce-hoehn/Qwen3.5-18B-REAP-A3B-Coding",
            7,
            Some(37087995136u64),
        ),
        ("Ibtasam-98/medgemma-27b-it", 12, Some(54864813280)),
        ("jj8127/mimo_kor", 4, Some(15666819072)),
        ("mistralai/Devstral-Small-2507", 10, Some(47144806400)),
        ("sen-ye/DeepSeek-OCR2-query-ablation", 1, Some(6779249408)),
        ("alibaba/Logics-Thinking", 4, Some(18938237760)),
        (
            "IDLEOAK/openpangu-lightweight-methods",
            9,
            Some(16061784576),
        ),
        (
            "oguzaybilir/LocateAnything-3B-FineTuning",
            2,
            Some(7661331936),
        ),
        ("renegade-studio/beta-O1", 413, Some(912210767872)),
        ("maxma233/timelyMeal", 2, Some(7760526336)),
        (
            "bryce-hoehn/Qwen3.5-25B-REAP-A3B-Coding",
            10,
            Some(50182743296),
        ),
        // its index says total_size 0: unknown, so no fallback and one clear error
        ("sarcascoder/nvidia-reason2", 4, None),
    ] {
        let mut args = vec!["--model", repo];
        args.extend(H100_TP2);
        let (code, out, err) = plan(&hub.endpoint, &cache, &[], &args);
        eprintln!("{repo}: exit {code}; {}", err.lines().last().unwrap_or(""));
        assert!(requests(&err) <= shards + 3, "{repo}: {err}");
        assert!(!err.contains("unknown model"), "{repo}: {err}");
        let Some(total) = total else {
            assert_eq!(code, 2, "{repo}: {out}");
            assert!(
                err.contains("no metadata.total_size (or 0)") && err.contains(repo),
                "{repo}: {err}"
            );
            continue;
        };
        let snap = cache
            .join(format!("models--{}", repo.replace('/', "--")))
            .join("snapshots")
            .join(hub_standin::COMMIT);
        assert!(snap.join(".inferscope/hub.json").is_file(), "{repo}");
        if code == 2 {
            // an architecture the planner refuses by name, never an unknown model
            assert!(err.contains("config.json"), "{repo}: {err}");
            continue;
        }
        planned += 1;
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{repo}: {e}: {err}"));
        assert_eq!(v["weights_bytes_total"], total, "{repo}");
        // Per GPU: the checkpoint over TP 2 plus the RoPE cos/sin cache vLLM keeps beside it on
        // every rank (`RotaryEmbedding.cos_sin_cache`: max_position_embeddings × rotary dim, in
        // the model dtype), computed here from the fixture's config.
        let half = total as f64 / 2.0 + rope_cache_bytes(repo) as f64;
        let per_gpu = v["weights_bytes_per_gpu"].as_f64().unwrap();
        eprintln!(
            "{repo}: weights per GPU {per_gpu} vs total/2 + RoPE cache {half} ({:+.3} %)",
            (per_gpu / half - 1.0) * 100.0
        );
        assert!(
            (per_gpu - half).abs() / half < 0.01,
            "{repo}: {per_gpu} vs {half}"
        );
        let (kv, state) = vllm_cache_bytes(repo, 2);
        assert_eq!(v["kv_bytes_per_token"], kv, "{repo}: KV bytes per token");
        assert_eq!(
            v["state_bytes_per_sequence"].as_u64().unwrap_or(0),
            state,
            "{repo}: state bytes per sequence"
        );
        args.push("--revision");
        args.push("main");
        let (code2, out2, err2) = plan(
            "http://127.0.0.1:9",
            &cache,
            &[("HF_HUB_OFFLINE", "1")],
            &args,
        );
        assert_eq!(code2, code, "{repo}: {err2}");
        let v2: Value = serde_json::from_str(&out2).unwrap();
        assert_eq!(
            v2["weights_bytes_per_gpu"], v["weights_bytes_per_gpu"],
            "{repo}"
        );
        assert_eq!(
            v2["kv_cache_bytes_per_gpu"], v["kv_cache_bytes_per_gpu"],
            "{repo}"
        );
    }
    assert!(planned >= 3, "only {planned} planned");
}

/// Each failure is one line naming the repo, the file and the URL (no token), exit 2, and
/// nothing is left in the cache (issue 29: DNS, time-outs, bad JSON, 5xx).
#[test]
fn hub_failures_are_one_line_naming_repo_file_and_url() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("fail");
    let token = [("HF_TOKEN", hub_standin::TOKEN)];
    for (endpoint, repo, needle) in [
        (
            hub.endpoint.as_str(),
            "inferscope-test/outage",
            "answered 503",
        ),
        (
            hub.endpoint.as_str(),
            "inferscope-test/bad-config",
            "not a JSON object",
        ),
        // nothing listens on port 9 (discard): connection refused, as for a host that is down
        (
            "http://127.0.0.1:9",
            "inferscope-test/tiny-llama-sharded",
            "cannot fetch",
        ),
        // a name that does not resolve (RFC 6761 reserves .invalid)
        (
            "http://hub.invalid",
            "inferscope-test/tiny-llama-sharded",
            "cannot fetch",
        ),
    ] {
        let (code, out, err) = plan(
            endpoint,
            &cache,
            &token,
            &["--model", repo, "--gpu-memory-gib", "8"],
        );
        assert_eq!(code, 2, "{repo}: {out}{err}");
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| !l.contains("hub requests"))
            .collect();
        assert_eq!(lines.len(), 1, "{err}");
        let url = format!("{endpoint}/{repo}/resolve/main/config.json");
        assert!(
            lines[0].contains(needle) && lines[0].contains(&url),
            "{repo}: {err}"
        );
        assert!(!lines[0].contains(hub_standin::TOKEN), "{err}");
        let stored = cache.join(format!("models--{}", repo.replace('/', "--")));
        assert!(!stored.exists(), "{repo}: {}", stored.display());
    }
    // credentials in HF_ENDPOINT are not printed
    let (code, _out, err) = plan(
        "http://user:s3cret-pw@127.0.0.1:9",
        &cache,
        &token,
        &["--model", "org/x", "--gpu-memory-gib", "8"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        !err.contains("s3cret-pw") && err.contains("/org/x/resolve/main/config.json"),
        "{err}"
    );
}

/// `--model ORG/NAME/FILE.gguf`: one Range request through the CDN, only the header read, the
/// same plan as the local file, and the same again offline.
#[test]
fn gguf_file_of_a_hub_repo_is_planned_from_its_header() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("gguf");
    let spec = "inferscope-test/tiny-llama-gguf/tiny-random-llama-recipe.gguf";
    let mut args = vec!["--model", spec];
    args.extend(ARGS);
    let (code, out, err) = plan(
        &hub.endpoint,
        &cache,
        &[("HF_TOKEN", hub_standin::TOKEN)],
        &args,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(requests(&err), 1, "{err}");
    let online: Value = serde_json::from_str(&out).unwrap();
    // SOURCE.md of fixtures/tools/gguf: 12 tensors, 66464 bytes
    assert_eq!(online["weights_bytes_total"], 66464);
    let seen = hub.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[0].auth && seen[0].host == "hub" && !seen[1].auth && seen[1].host == "cdn",
        "{seen:?}"
    );
    let snap = cache
        .join("models--inferscope-test--tiny-llama-gguf/snapshots")
        .join(hub_standin::COMMIT);
    let stored = std::fs::metadata(snap.join(".inferscope/tiny-random-llama-recipe.gguf.header"))
        .unwrap()
        .len();
    assert!(
        stored < 90304,
        "{stored} bytes stored: more than the header"
    );
    assert!(!snap.join("tiny-random-llama-recipe.gguf").exists());

    let (code, out, err) = common::inferscope(
        &[
            &[
                "plan",
                "--model",
                "fixtures/tools/gguf/tiny-random-llama-recipe.gguf",
            ][..],
            &ARGS[..],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    let local: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        online["weights_bytes_per_gpu"],
        local["weights_bytes_per_gpu"]
    );

    let (code, out, err) = plan(
        "http://127.0.0.1:9",
        &cache,
        &[("HF_HUB_OFFLINE", "1")],
        &args,
    );
    assert_eq!(code, 0, "{err}");
    let offline: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        offline["weights_bytes_per_gpu"],
        online["weights_bytes_per_gpu"]
    );
    assert_eq!(
        offline["kv_cache_bytes_per_gpu"],
        online["kv_cache_bytes_per_gpu"]
    );
}

/// max_position_embeddings × rotary dim × 2 bytes (bf16/fp16) from `fixtures/hub/ORG--NAME/
/// config.json` (its `text_config` when nested; rotary dim = head_dim, or hidden / heads, times
/// `partial_rotary_factor`).
/// A fixture repo's `config.json`: its `text_config` where it has one, else the whole.
fn text_config(repo: &str) -> Value {
    let path = common::repo()
        .join("fixtures/hub")
        .join(repo.replace('/', "--"))
        .join("config.json");
    let top: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    match top.get("text_config") {
        Some(t) if t.is_object() => t.clone(),
        _ => top,
    }
}

/// KV bytes per token and recurrent-state bytes per sequence on one of `tp` GPUs, from the
/// repo's config with vLLM's formulas (KV cache dtype `auto`: the model's 16-bit dtype):
/// - every attention layer keeps K and V of `max(1, kv_heads / tp)` heads of `head_dim`
///   (`v1/kv_cache_interface.py` `AttentionSpec.page_size_bytes`; sliding-window layers the
///   same per token, `SlidingWindowSpec`), head_dim = `head_dim` or hidden / heads;
/// - a `linear_attention` layer (Gated DeltaNet) keeps no KV but a conv state
///   `(k − 1) × (2·kh·kd + vh·vd) / tp` in the model dtype and a recurrent state
///   `vh / tp × kd × vd` in the config's `mamba_ssm_dtype` (`layers/mamba/mamba_utils.py`
///   `gated_delta_net_state_shape`, `Qwen3_5MoeForConditionalGenerationConfig`).
fn vllm_cache_bytes(repo: &str, tp: u64) -> (u64, u64) {
    let c = text_config(repo);
    let g = |k: &str| c[k].as_u64();
    let layers = g("num_hidden_layers").unwrap();
    let heads = g("num_attention_heads").unwrap();
    let kv_heads = g("num_key_value_heads").unwrap_or(heads);
    let head_dim = g("head_dim").unwrap_or_else(|| g("hidden_size").unwrap() / heads);
    let linear = c["layer_types"].as_array().map_or(0, |t| {
        t.iter().filter(|x| *x == "linear_attention").count() as u64
    });
    let kv = (layers - linear) * 2 * (kv_heads / tp).max(1) * head_dim * 2;
    let state = if linear > 0 {
        let (kh, vh, kd, vd, k) = (
            g("linear_num_key_heads").unwrap(),
            g("linear_num_value_heads").unwrap(),
            g("linear_key_head_dim").unwrap(),
            g("linear_value_head_dim").unwrap(),
            g("linear_conv_kernel_dim").unwrap(),
        );
        let ssm_bytes = match c["mamba_ssm_dtype"].as_str() {
            Some("float32") => 4,
            _ => 2,
        };
        linear * ((k - 1) * (2 * kh * kd + vh * vd) / tp * 2 + vh / tp * kd * vd * ssm_bytes)
    } else {
        0
    };
    (kv, state)
}

fn rope_cache_bytes(repo: &str) -> u64 {
    let c = text_config(repo);
    let max_pos = c["max_position_embeddings"].as_u64().unwrap_or(0);
    let head = c["head_dim"].as_u64().unwrap_or_else(|| {
        c["hidden_size"].as_u64().unwrap_or(0) / c["num_attention_heads"].as_u64().unwrap_or(1)
    });
    let partial = c["partial_rotary_factor"].as_f64().unwrap_or(1.0);
    (max_pos as f64 * head as f64 * partial) as u64 * 2
}

/// Without `X-Repo-Commit` (some mirrors), the commit comes from the model API, still within
/// shards + 3 requests; a repo without any safetensors file is planned from its config.
#[test]
fn commit_from_the_model_api_when_the_header_is_missing() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("api");
    let mut args = vec!["--model", "inferscope-test/no-commit-header"];
    args.extend(ARGS);
    let (code, out, err) = plan(&hub.endpoint, &cache, &[], &args);
    assert_eq!(code, 0, "{err}");
    // config, the model API, the index (404), model.safetensors (404): 1 + 3
    assert_eq!(requests(&err), 4, "{:?}", hub.seen());
    assert!(
        hub.seen()
            .iter()
            .any(|s| s.path == "/api/models/inferscope-test/no-commit-header/revision/main")
    );
    let refs = cache.join("models--inferscope-test--no-commit-header/refs/main");
    assert_eq!(std::fs::read_to_string(refs).unwrap(), hub_standin::COMMIT);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["model_source"]
            .as_str()
            .unwrap()
            .contains("weights estimated from the config"),
        "{v}"
    );
}

/// The headers of `fixtures/hub/XiaomiMiMo--MiMo-V2.6-Distill-Qwen-9B/` as served: tensor name →
/// (dtype, shape, bytes), read here independently of the client.
fn mimo_headers() -> Vec<(String, String, Vec<u64>, u64)> {
    let dir = common::repo().join("fixtures/hub/XiaomiMiMo--MiMo-V2.6-Distill-Qwen-9B");
    let mut out = Vec::new();
    for n in 1..=4 {
        let frame =
            std::fs::read(dir.join(format!("model-0000{n}-of-00004.safetensors.header"))).unwrap();
        let len = u64::from_le_bytes(frame[..8].try_into().unwrap()) as usize;
        let h: Value = serde_json::from_slice(&frame[8..8 + len]).unwrap();
        for (name, t) in h.as_object().unwrap() {
            if name == "__metadata__" {
                continue;
            }
            let off = t["data_offsets"].as_array().unwrap();
            let shape = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            out.push((
                name.clone(),
                t["dtype"].as_str().unwrap().to_string(),
                shape,
                off[1].as_u64().unwrap() - off[0].as_u64().unwrap(),
            ));
        }
    }
    out
}

/// A real 2026 checkpoint's real shard headers (MiMo-V2.6-Distill-Qwen-9B, fixtures/hub/SOURCES.md;
/// byte-exact, hash-checked): planned through the Hub stand-in by Range requests only, weights
/// equal to the headers' tensor bytes, the Gated DeltaNet state and attention KV as vLLM's
/// formulas give them from the config (whose shapes the headers confirm), then the same offline.
#[test]
fn real_2026_shard_headers_plan_weights_state_and_kv() {
    let hub = hub_standin::Hub::start(common::repo().join("fixtures/hub"));
    let cache = cache_dir("mimo");
    let repo = "XiaomiMiMo/MiMo-V2.6-Distill-Qwen-9B";
    let headers = mimo_headers();
    assert_eq!(headers.len(), 760);
    let header_bytes: u64 = headers.iter().map(|h| h.3).sum();
    // the config's shapes, confirmed by the real tensors
    let t = &text_config(repo);
    let g = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k}"));
    let (hidden, heads, kv_heads, hd) = (
        g("hidden_size"),
        g("num_attention_heads"),
        g("num_key_value_heads"),
        g("head_dim"),
    );
    let (kh, vh, kd, vd, conv_k) = (
        g("linear_num_key_heads"),
        g("linear_num_value_heads"),
        g("linear_key_head_dim"),
        g("linear_value_head_dim"),
        g("linear_conv_kernel_dim"),
    );
    let shape = |name: &str| -> Vec<u64> {
        headers
            .iter()
            .find(|h| h.0 == name)
            .unwrap_or_else(|| panic!("{name}"))
            .2
            .clone()
    };
    let l = "model.language_model.layers";
    assert_eq!(
        shape(&format!("{l}.0.linear_attn.in_proj_qkv.weight")),
        [2 * kh * kd + vh * vd, hidden]
    );
    assert_eq!(
        shape(&format!("{l}.0.linear_attn.conv1d.weight")),
        [2 * kh * kd + vh * vd, 1, conv_k]
    );
    // Qwen3.5's gated query: q_proj holds query and gate
    assert_eq!(
        shape(&format!("{l}.3.self_attn.q_proj.weight")),
        [2 * heads * hd, hidden]
    );
    assert_eq!(
        shape(&format!("{l}.3.self_attn.k_proj.weight")),
        [kv_heads * hd, hidden]
    );
    let full = headers
        .iter()
        .filter(|h| h.0.starts_with(l) && h.0.ends_with("self_attn.k_proj.weight"))
        .count() as u64;
    let linear = headers
        .iter()
        .filter(|h| h.0.starts_with(l) && h.0.ends_with("linear_attn.in_proj_qkv.weight"))
        .count() as u64;
    assert_eq!((full, linear), (8, 24));

    let tp = 2u64;
    let mut args = vec!["--model", repo];
    args.extend(H100_TP2);
    let (code, out, err) = plan(&hub.endpoint, &cache, &[], &args);
    assert_eq!(code, 0, "{err}");
    assert!(requests(&err) <= 4 + 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let src = v["model_source"].as_str().unwrap();
    assert!(
        !src.contains("total_size"),
        "headers, not the fallback: {src}"
    );
    assert_eq!(v["weights_bytes_total"], header_bytes);
    // vLLM ≥ 0.17 (the newest modelled release here): Gated DeltaNet state per layer and
    // sequence, conv (k − 1) × (2·kh·kd + vh·vd)/tp in bf16 and SSM vh/tp × kd × vd in the
    // config's mamba_ssm_dtype float32 (layers/mamba/mamba_utils.py
    // gated_delta_net_state_shape, Qwen3_5ForConditionalGenerationConfig)
    let conv = (conv_k - 1) * (2 * kh * kd + vh * vd) / tp * 2;
    let ssm = vh / tp * kd * vd * 4;
    assert_eq!(v["state_bytes_per_sequence"], linear * (conv + ssm));
    // full attention only: K and V of kv_heads/tp heads, bf16 (FullAttentionSpec)
    assert_eq!(v["kv_bytes_per_token"], full * (kv_heads / tp) * hd * 2 * 2);

    let (code2, out2, err2) = plan(
        "http://127.0.0.1:9",
        &cache,
        &[("HF_HUB_OFFLINE", "1")],
        &args,
    );
    assert_eq!(code2, 0, "{err2}");
    let v2: Value = serde_json::from_str(&out2).unwrap();
    for k in [
        "weights_bytes_total",
        "weights_bytes_per_gpu",
        "kv_bytes_per_token",
        "state_bytes_per_sequence",
    ] {
        assert_eq!(v2[k], v[k], "{k}");
    }
}
