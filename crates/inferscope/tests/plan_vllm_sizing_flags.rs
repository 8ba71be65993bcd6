//! vLLM's sizing flags that ask the engine to compute (issue 29 item 3), read from the wheels:
//! `--max-model-len auto` / `-1` (0.14.0+, `kv_cache_utils.py` `_auto_fit_max_model_len`: the
//! largest length whose one request fits the KV memory) and `--kv-cache-memory-bytes` (0.10.2+,
//! `gpu_worker.py` `determine_available_memory`: the KV memory as given, utilisation ignored).
//! Releases without them refuse them with vLLM's own error.

mod common;

use common::inferscope;
use serde_json::Value;

fn plan(gpu: &str, version: Option<&str>, flags: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["plan", "--gpu", gpu, "--json"];
    if let Some(v) = version {
        args.extend(["--engine-version", v]);
    }
    args.extend(["--", "vllm", "serve", "Qwen/Qwen3-8B"]);
    args.extend(flags);
    let (code, out, err) = inferscope(&args);
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

#[test]
fn max_model_len_auto_is_the_largest_length_that_fits_and_says_so() {
    // Qwen3-8B (40960 positions) on an L4: the full length does not fit.
    let (code, full, _) = plan("L4", None, &[]);
    assert_eq!(
        code, 1,
        "the model's full length must not fit for this test"
    );
    let full_len = full["max_model_len"].as_u64().unwrap();
    for spelling in ["auto", "-1", "AUTO"] {
        let (code, v, err) = plan("L4", None, &["--max-model-len", spelling]);
        assert_eq!(code, 0, "{spelling}: {err}");
        let len = v["max_model_len"].as_u64().unwrap();
        assert!(len > 0 && len < full_len, "{spelling}: {len}");
        assert_eq!(v["fits"], true);
        let said = v["assumptions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|a| a.starts_with("max_model_len auto: reduced from"))
            .unwrap_or_else(|| panic!("{v}"));
        assert!(said.contains(&format!("to {len},")), "{said}");
        // Independently: that length fits, one token more does not.
        let (code, at, _) = plan("L4", None, &["--max-model-len", &len.to_string()]);
        assert_eq!((code, &at["fits"]), (0, &Value::Bool(true)));
        let (code, over, _) = plan("L4", None, &["--max-model-len", &(len + 1).to_string()]);
        assert_eq!((code, &over["fits"]), (1, &Value::Bool(false)), "{over}");
    }
    // Where the full length fits, auto keeps it and says so.
    let (code, v, _) = plan("H100 SXM", None, &["--max-model-len", "auto"]);
    assert_eq!(code, 0);
    assert_eq!(v["max_model_len"].as_u64(), Some(full_len));
    assert!(v["assumptions"].to_string().contains("full context length"));
}

#[test]
fn kv_cache_memory_bytes_sets_the_kv_budget_directly() {
    let (code, v, err) = plan("H100 SXM", None, &["--kv-cache-memory-bytes", "4G"]);
    assert_eq!(code, 1, "{err}"); // 4 GiB holds less than one 40960-token request
    assert_eq!(v["per_gpu"]["kv_cache_gib"].as_f64(), Some(4.0));
    let block = v["block_size"].as_u64().unwrap();
    let per_block = v["kv_bytes_per_token"].as_u64().unwrap() * block;
    assert_eq!(
        v["kv_cache_tokens"].as_u64().unwrap(),
        (4u64 << 30) / per_block * block
    );
    // The utilisation no longer moves it; `4g` is 4·10⁹ bytes, vLLM's decimal suffix.
    let (_, half, _) = plan(
        "H100 SXM",
        None,
        &[
            "--kv-cache-memory-bytes",
            "4G",
            "--gpu-memory-utilization",
            "0.5",
        ],
    );
    assert_eq!(half["kv_cache_tokens"], v["kv_cache_tokens"]);
    let (_, dec, _) = plan("H100 SXM", None, &["--kv-cache-memory-bytes", "4g"]);
    assert_eq!(
        dec["kv_cache_tokens"].as_u64().unwrap(),
        4_000_000_000 / per_block * block
    );
    // With auto, the length follows the budget given.
    let (code, both, _) = plan(
        "H100 SXM",
        None,
        &["--kv-cache-memory-bytes", "4G", "--max-model-len", "auto"],
    );
    assert_eq!(code, 0);
    assert_eq!(both["max_model_len"], v["kv_cache_tokens"]);
    // More than the card holds: vLLM skipped profiling and runs out of memory.
    let (code, big, _) = plan("L4", None, &["--kv-cache-memory-bytes", "30G"]);
    assert_eq!(code, 1);
    assert!(
        big["problems"].to_string().contains("runs out of memory"),
        "{big}"
    );
    // vLLM's parser refuses a decimal with a binary suffix.
    let (code, _, err) = plan("L4", None, &["--kv-cache-memory-bytes", "1.5G"]);
    assert_eq!(code, 2);
    assert!(err.contains("Decimals are not allowed"), "{err}");
}

#[test]
fn releases_without_the_flags_refuse_them_with_their_own_error() {
    let (code, _, err) = plan("L4", Some("0.10.1"), &["--kv-cache-memory-bytes", "4G"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unrecognized arguments: --kv-cache-memory-bytes"),
        "{err}"
    );
    let (code, _, _) = plan(
        "H100 SXM",
        Some("0.10.2"),
        &["--kv-cache-memory-bytes", "4G"],
    );
    assert_eq!(code, 1); // accepted (4 GiB is less than one request)
    let (code, _, err) = plan("L4", Some("0.13.0"), &["--max-model-len", "auto"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("invalid human_readable_int value: 'auto'"),
        "{err}"
    );
    let (code, _, _) = plan("L4", Some("0.14.0"), &["--max-model-len", "-1"]);
    assert_eq!(code, 0);
}
