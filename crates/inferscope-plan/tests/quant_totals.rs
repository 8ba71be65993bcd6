//! Block-quantised checkpoints (issue 29 item 2, part 3): the weights with their scales against
//! published checkpoint sizes. gpt-oss: MXFP4 experts, 4 bits + one e8m0 scale per 32 weights
//! (4.25 bits), everything else bf16; OpenAI's model card (arXiv 2508.10925, table 1) lists
//! 60.8 GiB for gpt-oss-120b and 12.8 GiB for gpt-oss-20b. Configs: the catalog's
//! `data/models/openai__gpt-oss-*.json` (sources in the SOURCE.md beside them).

use inferscope_plan::arch::Quantization;
use inferscope_plan::from_hf_config;
use inferscope_plan::memory::{GIB, checkpoint_bytes};

#[test]
fn gpt_oss_checkpoint_is_the_unpadded_mxfp4_total() {
    let cases = [
        (
            include_str!("../data/models/openai__gpt-oss-120b.json"),
            60.8,
        ),
        (
            include_str!("../data/models/openai__gpt-oss-20b.json"),
            12.8,
        ),
    ];
    for (cfg, published) in cases {
        let mut a = from_hf_config(cfg).unwrap();
        a.checkpoint_bytes = None; // the formula, not a stored size
        let q = a.quantization.clone().unwrap();
        assert_eq!(q.method, "mxfp4");
        assert_eq!(q.bytes_per_weight(), 0.5 + 1.0 / 32.0);
        let got = checkpoint_bytes(&a) as f64 / GIB;
        let off = (got - published) / published;
        eprintln!("gpt-oss: {got:.2} GiB vs {published} GiB published ({off:+.4})");
        assert!(off.abs() < 0.01, "{got:.2} GiB vs {published}");
    }
}

#[test]
fn block_scales_per_format() {
    // NVFP4: 4 bits + one fp8 scale per 16 (the per-tensor global scale is negligible)
    let nv = Quantization::from_method("nvfp4").unwrap();
    assert_eq!(nv.bytes_per_weight(), 0.5 + 1.0 / 16.0);
    // FP8 with 128 × 128 blocks: one fp32 scale per 16384 weights
    let mut fp8 = Quantization::from_method("fp8").unwrap();
    fp8.group_size = 128 * 128;
    assert_eq!(fp8.bytes_per_weight(), 1.0 + 4.0 / 16384.0);
}

#[test]
fn fp8_block_checkpoints_read_their_block_size() {
    // Qwen3-235B-A22B-FP8's quantization_config: fp8, weight_block_size [128, 128]
    let cfg = include_str!("../data/models/Qwen__Qwen3-235B-A22B-FP8.json");
    let a = from_hf_config(cfg).unwrap();
    let q = a.quantization.unwrap();
    assert_eq!((q.method.as_str(), q.group_size), ("fp8", 16384));
    assert_eq!(q.bytes_per_weight(), 1.0 + 4.0 / 16384.0);
}
