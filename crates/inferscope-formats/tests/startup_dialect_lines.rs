//! Lines of an engine whose phrases are a registered dialect (`Engine::log_dialect`; moved
//! from `startup_log.rs`'s inline tests): rank 0's figure wins, and the dialect's arguments dump
//! starts a run.

use inferscope_formats::startup_log::{Engine, parse};

#[test]
fn rank_zero_wins() {
    let log = parse(
        "[2025-03-08 12:29:21 TP1] KV Cache is allocated. #tokens: 46000, K size: 1.40 GB, V size: 1.40 GB\n\
         [2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB\n"
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(log.engine, Some(Engine::Sglang));
    assert_eq!(log.figure("kv_cache_tokens").unwrap().value, 46611.0);
    assert_eq!(log.rank_count(), 2);
}

#[test]
fn a_second_arguments_dump_is_a_restart() {
    let text = "[2025-03-08 12:29:00] server_args=ServerArgs(model_path='a', tp_size=1)\n\
                [2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 100, K size: 1.00 GB, V size: 1.00 GB\n\
                [2025-03-08 12:30:00] server_args=ServerArgs(model_path='b', tp_size=2)\n";
    let log = parse(text.as_bytes()).unwrap();
    assert_eq!(log.earlier.len(), 1);
    assert_eq!(log.arg("model_path"), Some("b"));
}
