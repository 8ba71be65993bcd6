//! `plan --model ORG/NAME` through the Hugging Face cache, with per-GPU weights sharded from
//! the checkpoint's safetensors headers (issue 15, items 4 and 5).
//!
//! The checkpoint is the real safetensors fixture `fixtures/tools/safetensors/
//! tiny-llama-f16-bf16-f32.safetensors` (written by the reference `safetensors` writer, see its
//! SOURCE.md) laid out as `huggingface_hub` lays out its cache.

mod common;

use serde_json::Value;
use std::path::Path;

/// config.json matching the fixture's tensors: hidden 32, 2 layers, 4 heads of 8, 2 KV heads,
/// MLP 64, vocab 128. `inter` lets a test make the formula disagree with the headers.
fn config(inter: u32) -> String {
    format!(
        r#"{{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
  "intermediate_size": {inter}, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 256,
  "torch_dtype": "bfloat16", "tie_word_embeddings": false}}"#
    )
}

/// `HUB/models--ORG--NAME/{refs/REF, snapshots/HASH/{config.json, model.safetensors}}`.
fn snapshot(hub: &Path, repo: &str, reference: &str, hash: &str, inter: u32) {
    let dir = hub.join(format!("models--{}", repo.replace('/', "--")));
    let snap = dir.join("snapshots").join(hash);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(dir.join("refs")).unwrap();
    std::fs::write(dir.join("refs").join(reference), hash).unwrap();
    std::fs::write(snap.join("config.json"), config(inter)).unwrap();
    std::fs::copy(
        common::repo().join("fixtures/tools/safetensors/tiny-llama-f16-bf16-f32.safetensors"),
        snap.join("model.safetensors"),
    )
    .unwrap();
}

fn run(hub: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "plan",
        "--gpu-memory-gib",
        "8",
        "--gpus",
        "2",
        "--tp",
        "2",
        "--max-model-len",
        "256",
    ];
    args.extend(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(&args)
        .env("HF_HUB_CACHE", hub)
        .env_remove("HF_HOME")
        .current_dir(common::repo())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hf_cache_checkpoint_gives_exact_sharded_weights() {
    let tmp = std::env::temp_dir().join(format!("inferscope-hfcache-{}", std::process::id()));
    let hub = tmp.join("hub");
    snapshot(
        &hub,
        "tiny/llama",
        "main",
        "1111111111111111111111111111111111111111",
        64,
    );
    // another revision whose config disagrees with the headers (MLP 128 instead of 64)
    snapshot(
        &hub,
        "tiny/llama",
        "v2",
        "2222222222222222222222222222222222222222",
        128,
    );

    let (code, out, err) = run(&hub, &["--model", "tiny/llama", "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let src = v["model_source"].as_str().unwrap();
    assert!(
        src.contains("Hugging Face cache") && src.contains("1111111111"),
        "{src}"
    );
    // TP 2, per the fixture's header sizes (bytes):
    //   per layer: q 2048 + o 2048 + gate 4096 + up 4096 + down 4096 split in two = 8192,
    //   k 1024 + v 1024 over min(tp, 2 KV heads) = 1024, two F32 norms 256 replicated;
    //   embed 8192 / 2 + lm_head 8192 / 2 + final norm 128; RoPE cache 256 × 8 × 2 = 4096
    let per_layer = 8192 + 1024 + 256;
    let expected = 2 * per_layer + 4096 + 4096 + 128 + 4096;
    assert_eq!(v["weights_bytes_per_gpu"], expected);
    assert_eq!(v["weights_bytes_total"], 53888);
    let assumptions = v["assumptions"].to_string();
    assert!(assumptions.contains("exact bytes from 21 checkpoint tensors"));
    assert!(!assumptions.contains("warning: the architecture formula"));

    // --revision v2: the formula (MLP 128) and the headers disagree by more than 2 %
    let (_code, out, err) = run(
        &hub,
        &["--model", "tiny/llama", "--revision", "v2", "--json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert!(v["model_source"].as_str().unwrap().contains("2222222222"));
    assert!(
        v["assumptions"]
            .to_string()
            .contains("warning: the architecture formula gives"),
        "{}",
        v["assumptions"]
    );
    assert_eq!(v["weights_bytes_per_gpu"], expected);

    // an id neither in the cache nor in the catalog says where it looked, exit 2
    let (code, _out, err) = run(&hub, &["--model", "nobody/nothing"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("models--nobody--nothing") && err.contains("revision main"),
        "{err}"
    );

    // a snapshot whose safetensors header is cut short: one error naming the file, exit 2
    snapshot(
        &hub,
        "tiny/llama",
        "bad",
        "3333333333333333333333333333333333333333",
        64,
    );
    let snap = hub.join("models--tiny--llama/snapshots/3333333333333333333333333333333333333333");
    std::fs::copy(
        common::repo().join("fixtures/tools/safetensors/bad-truncated-in-header.safetensors"),
        snap.join("model.safetensors"),
    )
    .unwrap();
    let (code, _out, err) = run(&hub, &["--model", "tiny/llama", "--revision", "bad"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("3333333333") && err.contains("model.safetensors"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}
