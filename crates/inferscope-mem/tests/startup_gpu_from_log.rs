//! The GPU read from the log (issue 28 item 4 of "What to build": device names mapped to the
//! catalog, `--gpu` overriding), on real lines: vLLM's bf16 refusal naming the card
//! (`platforms/cuda.py` `check_if_supports_dtype`), TGI's launcher naming a card it has no FLOPS
//! for (`launcher/src/main.rs` `compute_type`), and lines that name only a backend or the
//! platform, which identify no card: the report says so instead of guessing.

use inferscope_formats::startup_log::parse;
use inferscope_mem::startup::{Hints, StartupReport, analyse};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn logs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools/engine-logs")
}

fn report(text: &str, hints: &Hints) -> StartupReport {
    analyse(&parse(text.as_bytes()).unwrap(), hints)
}

fn case(file: &str, id: &str) -> String {
    let text = std::fs::read_to_string(logs().join(file)).unwrap();
    let c: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|c| c["id"] == id)
        .unwrap();
    c["raw_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}\n", l.as_str().unwrap()))
        .collect()
}

#[test]
fn a_card_named_by_the_log_is_the_catalog_gpu_and_a_backend_line_is_not() {
    let hints = Hints::default();
    // vLLM 0.5.4 on a V100 (transformerlab-app#370).
    let v100 =
        std::fs::read_to_string(logs().join("device/vllm-054-v100-bf16-refused.log")).unwrap();
    let r = report(&v100, &hints);
    assert_eq!(
        r.gpu_model.as_deref(),
        Some("V100 SXM2 32GB"),
        "{:?}",
        r.notes
    );
    assert!(r.notes.iter().any(|n| n.contains("Tesla V100-SXM2-32GB")));
    // `--gpu` overrides the log.
    let over = report(
        &v100,
        &Hints {
            gpu: Some("A100 SXM 80GB".into()),
            ..Hints::default()
        },
    );
    assert_eq!(over.gpu_model.as_deref(), Some("A100 SXM 80GB"));

    // TGI 3.x on two RTX A6000 (the shared gemma-3 case): "Unkown compute for card
    // nvidia-rtx-a6000", and the model in its Args: a prediction without --gpu.
    let tgi = case("tgi.jsonl", "tgi-gemma3-27b-it-2xa6000-flashinfer");
    let r = report(&tgi, &hints);
    assert_eq!(r.gpu_model.as_deref(), Some("RTX A6000"));

    // Lines naming a backend or the platform only: no GPU, and the reason names the line.
    for (text, line) in [
        (
            std::fs::read_to_string(logs().join("device/vllm-085-platform-only.log")).unwrap(),
            "Automatically detected platform cuda.",
        ),
        (
            case(
                "vllm-recent.jsonl",
                "vllm-i33155-gpt-oss-120b-h100-v0.14.1-oom",
            ),
            "Using Triton backend",
        ),
    ] {
        let r = report(
            &text,
            &Hints {
                model: Some("openai/gpt-oss-120b".into()),
                ..Hints::default()
            },
        );
        assert_eq!(r.gpu_model, None, "{line}");
        let why = r.prediction_unavailable.unwrap_or_default();
        assert!(why.contains(line) && why.contains("not one card"), "{why}");
    }
}
