//! OOM phases named by phrases an engine registers as data (`Engine::log_dialect`), on the
//! real SGLang OOM fixture and on the frames of its source (`inferscope_formats::oom_phase`).

use inferscope_formats::oom_phase::{Phase, detect};

#[test]
fn registered_phrases_name_the_phase() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tools/oom/sglang-capture-cuda-graph-failed-448mib.txt"
    ))
    .unwrap();
    let hit = detect(&text).unwrap();
    assert_eq!(hit.phase, Phase::GraphCapture);
    for (frame, phase) in [
        (
            "File \"sglang/srt/model_executor/model_runner.py\", line 1, in init_memory_pool",
            Phase::KvCacheAllocation,
        ),
        (
            "File \"model_runner.py\", in profile_max_num_token",
            Phase::ProfileRun,
        ),
        ("in capture_one_batch_size", Phase::GraphCapture),
    ] {
        assert_eq!(detect(frame).map(|h| h.phase), Some(phase), "{frame}");
    }
    assert_eq!(detect("nothing here"), None);
}
