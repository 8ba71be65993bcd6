//! Every real vLLM start-up in `fixtures/tools/vllm-logs/cases.jsonl` through the planner.
//!
//! Run `cargo test -p inferscope-plan --test vllm_logs_accuracy -- --nocapture` to see the
//! table (ours, theirs, error %) and the median/worst errors that docs/planner.md reports.

use inferscope_plan::catalog;
use inferscope_plan::memory::GIB;
use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
use serde_json::Value;

/// Cases the planner cannot model yet, with the reason (asserted to be exactly this set).
const SKIPPED: &[(&str, &str)] = &[];

/// Torch-visible totals (GiB) for GPUs whose logs do not print `total_gpu_memory` (caveat 6).
fn torch_total_gib(gpu: &str) -> Option<f64> {
    let g = gpu.to_ascii_lowercase();
    let table: &[(&str, f64)] = &[
        // RTX A6000 (48 GB, 49140 MiB): PyTorch reports 47.54 GiB ("47.54 GiB total capacity")
        ("a6000", 47.54),
        ("h100", 79.19),
        ("a100-sxm4-80", 79.15),
        ("a100 80", 79.15),
        ("l40s", 44.4),
        ("4090", 23.6),
        ("3090", 23.58),
        ("v100-sxm2-32", 31.74),
        ("t4", 14.56),
    ];
    table.iter().find(|(k, _)| g.contains(k)).map(|(_, v)| *v)
}

struct Row {
    id: String,
    modern: bool,
    w_ours: Option<f64>,
    w_theirs: Option<f64>,
    kv_ours: f64,
    kv_theirs: f64,
    kv_from_blocks: bool,
    tok_ours: u64,
    tok_theirs: Option<u64>,
    conc_ours: f64,
    conc_theirs: Option<f64>,
    kv_tol: f64,
}

fn pct(ours: f64, theirs: f64) -> f64 {
    if theirs == 0.0 {
        return if ours == 0.0 { 0.0 } else { 100.0 };
    }
    (ours - theirs) / theirs * 100.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

#[test]
fn vllm_logs_accuracy() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tools/vllm-logs/cases.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("cases.jsonl");
    let mut rows = Vec::new();
    let mut skipped_seen: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: Value = serde_json::from_str(line).expect("case JSON");
        let id = s(&c, "id").unwrap();
        if let Some((_, why)) = SKIPPED.iter().find(|(k, _)| *k == id) {
            println!("SKIPPED {id}: {why}");
            skipped_seen.push(id);
            continue;
        }
        let m = &c["measured"];
        let model = s(&c, "model_id").unwrap();
        let arch = catalog::lookup(&model).unwrap_or_else(|e| panic!("{id}: {e}"));
        let gpu_name = s(&c, "gpu_model").unwrap_or_default();
        let total_gib = num(m, "total_gpu_memory_gib")
            .or_else(|| torch_total_gib(&gpu_name))
            .unwrap_or_else(|| panic!("{id}: no torch-visible total for {gpu_name:?}"));
        let tp = c["tensor_parallel_size"].as_u64().unwrap_or(1) as u32;
        let pp = c["pipeline_parallel_size"].as_u64().unwrap_or(1) as u32;
        let mut req = PlanRequest::new(
            arch,
            model.clone(),
            GpuSpec {
                name: gpu_name,
                total_bytes: (total_gib * GIB) as u64,
                count: tp * pp,
            },
        );
        req.tp = tp;
        req.pp = pp;
        req.max_model_len = c["max_model_len"].as_u64();
        req.gpu_memory_utilization = num(&c, "gpu_memory_utilization");
        req.kv_cache_dtype = s(&c, "kv_cache_dtype");
        req.dtype = s(&c, "dtype");
        req.block_size = c["block_size"].as_u64().map(|b| b as u32);
        req.enforce_eager = c["enforce_eager"].as_bool().unwrap_or(false);
        let version = s(&c, "vllm_version").unwrap();
        req.engine_version = Some(version.clone());
        req.v1 = s(&c, "engine").map(|e| e == "V1");
        // "fp8 (online, --quantization fp8)": a flag on an unquantized checkpoint
        if let Some(q) = s(&c, "quantization")
            && q.contains("--quantization")
        {
            req.quantization = q.split_whitespace().next().map(str::to_string);
        }
        // The A6000 rows are `LLM(...)` (offline) runs.
        req.offline = s(&c, "source_context").is_some_and(|x| x.contains("LLM("));
        let p = plan(&req);
        let modern =
            inferscope_plan::EngineVersion::parse(&version).is_some_and(|v| v.at_least(0, 8));

        let (kv_theirs, from_blocks) = match num(m, "kv_cache_gib") {
            Some(k) => (k, false),
            None => {
                let blocks = m["gpu_blocks"].as_f64().expect("gpu_blocks");
                let block_bytes = p.kv_bytes_per_token as f64 * f64::from(p.block_size);
                (blocks * block_bytes / GIB, true)
            }
        };
        let kv_ours = if from_blocks {
            p.blocks as f64 * p.kv_bytes_per_token as f64 * f64::from(p.block_size) / GIB
        } else {
            p.per_gpu.kv_cache_gib
        };
        rows.push(Row {
            id,
            modern,
            w_ours: num(m, "weights_gib").map(|_| p.per_gpu.weights_gib),
            w_theirs: num(m, "weights_gib"),
            kv_ours,
            kv_theirs,
            kv_from_blocks: from_blocks,
            tok_ours: p.kv_cache_tokens,
            tok_theirs: m["kv_cache_tokens"].as_u64(),
            conc_ours: p.max_concurrency,
            conc_theirs: num(m, "max_concurrency"),
            kv_tol: 10.0,
        });
    }

    println!(
        "{:<62} {:>7} {:>7} {:>6} | {:>7} {:>7} {:>6} | {:>8} {:>8} {:>6} | {:>7} {:>7}",
        "case",
        "w ours",
        "w log",
        "err%",
        "kv ours",
        "kv log",
        "err%",
        "tok ours",
        "tok log",
        "err%",
        "conc",
        "log"
    );
    let mut w_err = [Vec::new(), Vec::new()];
    let mut kv_err = [Vec::new(), Vec::new()];
    let mut failures = Vec::new();
    for r in &rows {
        let k = pct(r.kv_ours, r.kv_theirs);
        let w = match (r.w_ours, r.w_theirs) {
            (Some(o), Some(t)) => Some(pct(o, t)),
            _ => None,
        };
        let t = r.tok_theirs.map(|t| pct(r.tok_ours as f64, t as f64));
        let bucket = usize::from(r.modern);
        kv_err[bucket].push(k.abs());
        if let Some(w) = w {
            w_err[bucket].push(w.abs());
            if w.abs() > 2.0 {
                failures.push(format!("{}: weights off by {w:.2}%", r.id));
            }
        }
        if k.abs() > r.kv_tol {
            failures.push(format!(
                "{}: KV off by {k:.2}% (tolerance {}%)",
                r.id, r.kv_tol
            ));
        }
        println!(
            "{:<62} {:>7} {:>7} {:>6} | {:>7.2} {:>7.2}{} {:>+6.2} | {:>8} {:>8} {:>6} | {:>7.2} {:>7}",
            r.id,
            r.w_ours.map_or("-".into(), |v| format!("{v:.2}")),
            r.w_theirs.map_or("-".into(), |v| format!("{v:.2}")),
            w.map_or("-".into(), |v| format!("{v:+.2}")),
            r.kv_ours,
            r.kv_theirs,
            if r.kv_from_blocks { "b" } else { " " },
            k,
            r.tok_ours,
            r.tok_theirs.map_or("-".into(), |v| v.to_string()),
            t.map_or("-".into(), |v| format!("{v:+.2}")),
            r.conc_ours,
            r.conc_theirs.map_or("-".into(), |v| format!("{v:.2}")),
        );
    }
    println!("(b = KV GiB from the printed block count × our block bytes)");
    for (i, name) in ["vLLM < 0.8 (V0)", "vLLM >= 0.8"].iter().enumerate() {
        let n = kv_err[i].len();
        if n == 0 {
            continue;
        }
        let (wm, ww) = (
            median(&mut w_err[i].clone()),
            w_err[i].iter().copied().fold(0.0, f64::max),
        );
        let (km, kw) = (
            median(&mut kv_err[i].clone()),
            kv_err[i].iter().copied().fold(0.0, f64::max),
        );
        let weights = if w_err[i].is_empty() {
            "weights not printed by these logs".to_string()
        } else {
            format!(
                "weights |err| median {wm:.2}% worst {ww:.2}% ({} cases)",
                w_err[i].len()
            )
        };
        println!("{name}: {n} cases; {weights}; KV |err| median {km:.2}% worst {kw:.2}%");
        if i == 1 {
            assert!(km <= 3.0, "modern KV median {km:.2}% > 3%");
            assert!(kw <= 10.0, "modern KV worst {kw:.2}% > 10%");
            assert!(ww <= 2.0, "modern weights worst {ww:.2}% > 2%");
        }
    }
    let mut expected: Vec<&str> = SKIPPED.iter().map(|(k, _)| *k).collect();
    expected.sort();
    skipped_seen.sort();
    assert_eq!(
        skipped_seen, expected,
        "SKIPPED list does not match the cases file"
    );
    assert!(
        failures.is_empty(),
        "cases outside tolerance:\n{}",
        failures.join("\n")
    );
}
