//! Every real vLLM start-up in `fixtures/tools/vllm-logs/cases.jsonl` through the planner.
//!
//! Run `cargo test -p inferscope-plan --test vllm_logs_accuracy -- --nocapture` to see the
//! table (ours, theirs, error %) and the median/worst errors that docs/planner.md reports.
//!
//! The cases are split once, by the FNV-1a 64 hash of the case id: even → **calibration**
//! half (the only rows the fitted constants in `memory::fitted` may come from; `calibration_fit`
//! re-runs that fit), odd → **check** half (never fitted on; the targets apply there).

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

/// FNV-1a 64 of the case id: even = calibration half, odd = check half.
fn is_calibration(id: &str) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.is_multiple_of(2)
}

struct Row {
    id: String,
    calibration: bool,
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

/// The plan request of one case, as the log's command and GPU give it.
fn request(c: &Value) -> PlanRequest {
    let m = &c["measured"];
    let id = s(c, "id").unwrap();
    let model = s(c, "model_id").unwrap();
    let arch = catalog::lookup(&model).unwrap_or_else(|e| panic!("{id}: {e}"));
    let gpu_name = s(c, "gpu_model").unwrap_or_default();
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
    req.gpu_memory_utilization = num(c, "gpu_memory_utilization");
    req.kv_cache_dtype = s(c, "kv_cache_dtype");
    req.dtype = s(c, "dtype");
    req.block_size = c["block_size"].as_u64().map(|b| b as u32);
    req.enforce_eager = c["enforce_eager"].as_bool().unwrap_or(false);
    let version = s(c, "vllm_version").unwrap();
    req.engine_version = Some(version.clone());
    // V0/V1 is left to the rule table; the test checks it against the log
    // "fp8 (online, --quantization fp8)": a flag on an unquantized checkpoint
    if let Some(q) = s(c, "quantization")
        && q.contains("--quantization")
    {
        req.quantization = q.split_whitespace().next().map(str::to_string);
    }
    // The A6000 rows are `LLM(...)` (offline) runs.
    req.offline = s(c, "source_context").is_some_and(|x| x.contains("LLM("));
    req
}

/// Cases of the file.
fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tools/vllm-logs/cases.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("cases.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("case JSON"))
        .collect()
}

/// Plans every recorded vLLM start-up and reports the errors per half (calibration/check) and era
/// (V0/V1). One piece (~180 lines): the table it prints and the bounds it asserts read the same
/// per-case rows, and a reader checks one against the other top to bottom.
#[test]
fn vllm_logs_accuracy() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tools/vllm-logs/cases.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("cases.jsonl");
    let mut rows = Vec::new();
    let mut skipped_seen: Vec<String> = Vec::new();
    let mut failures_engine: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: Value = serde_json::from_str(line).expect("case JSON");
        let id = s(&c, "id").unwrap();
        if let Some((_, why)) = SKIPPED.iter().find(|(k, _)| *k == id) {
            println!("SKIPPED {id}: {why}");
            skipped_seen.push(id);
            continue;
        }
        let m = &c["measured"];
        let req = request(&c);
        let version = s(&c, "vllm_version").unwrap();
        let p = plan(&req);
        let log_v1 = s(&c, "engine").is_some_and(|e| e == "V1");
        if p.engine.v1 != log_v1 {
            failures_engine.push(format!(
                "{id}: rules chose v1={} but the log ran v1={log_v1}",
                p.engine.v1
            ));
        }
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
            calibration: is_calibration(&id),
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
        "{:<5} {:<62} {:>7} {:>7} {:>6} | {:>7} {:>7} {:>6} | {:>8} {:>8} {:>6} | {:>7} {:>7}",
        "half",
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
    // buckets: [half][era]: half 0 = calibration, 1 = check; era 0 = V0 (< 0.8), 1 = >= 0.8
    let mut w_err = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    let mut kv_err = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    let mut failures = Vec::new();
    for r in &rows {
        let k = pct(r.kv_ours, r.kv_theirs);
        let w = match (r.w_ours, r.w_theirs) {
            (Some(o), Some(t)) => Some(pct(o, t)),
            _ => None,
        };
        let t = r.tok_theirs.map(|t| pct(r.tok_ours as f64, t as f64));
        let half = usize::from(!r.calibration);
        let era = usize::from(r.modern);
        kv_err[half][era].push(k.abs());
        if let Some(w) = w {
            w_err[half][era].push(w.abs());
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
            "{:<5} {:<62} {:>7} {:>7} {:>6} | {:>7.2} {:>7.2}{} {:>+6.2} | {:>8} {:>8} {:>6} | {:>7.2} {:>7}",
            if r.calibration { "cal" } else { "CHECK" },
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
    let stats = |v: &[f64]| {
        (
            median(&mut v.to_vec()),
            v.iter().copied().fold(0.0, f64::max),
        )
    };
    for (h, half) in ["calibration", "check"].iter().enumerate() {
        for (i, name) in ["vLLM < 0.8 (V0)", "vLLM >= 0.8"].iter().enumerate() {
            let n = kv_err[h][i].len();
            if n == 0 {
                continue;
            }
            let (wm, ww) = stats(&w_err[h][i]);
            let (km, kw) = stats(&kv_err[h][i]);
            let weights = if w_err[h][i].is_empty() {
                "weights not printed by these logs".to_string()
            } else {
                format!(
                    "weights |err| median {wm:.2}% worst {ww:.2}% ({} cases)",
                    w_err[h][i].len()
                )
            };
            println!(
                "{half} half, {name}: {n} cases; {weights}; KV |err| median {km:.2}% worst {kw:.2}%"
            );
        }
        let all_kv: Vec<f64> = kv_err[h].concat();
        let all_w: Vec<f64> = w_err[h].concat();
        let (km, kw) = stats(&all_kv);
        let (wm, ww) = stats(&all_w);
        println!(
            "{half} half, all: {} cases; KV |err| median {km:.2}% worst {kw:.2}%; weights median {wm:.2}% worst {ww:.2}%",
            all_kv.len()
        );
        if h == 1 {
            // the targets, on rows never used for fitting
            assert!(km <= 2.0, "check half KV median {km:.2}% > 2%");
            assert!(kw <= 8.0, "check half KV worst {kw:.2}% > 8%");
            assert!(wm <= 1.0, "check half weights median {wm:.2}% > 1%");
        }
    }
    let mut expected: Vec<&str> = SKIPPED.iter().map(|(k, _)| *k).collect();
    expected.sort();
    skipped_seen.sort();
    assert_eq!(
        skipped_seen, expected,
        "SKIPPED list does not match the cases file"
    );
    assert!(failures_engine.is_empty(), "{}", failures_engine.join("\n"));
    assert!(
        failures.is_empty(),
        "cases outside tolerance:\n{}",
        failures.join("\n")
    );
}

/// Least squares `y = a + b x`.
fn line_fit(pts: &[(f64, f64)]) -> (f64, f64) {
    let n = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = if sxx == 0.0 { 0.0 } else { sxy / sxx };
    (my - b * mx, b)
}

/// Re-run the fit of every constant in `memory::fitted` on the calibration half only, print
/// it, and fail if the constants in the code drift from it.
#[test]
fn calibration_fit() {
    use inferscope_plan::memory::{ProfileShape, activation_terms, fitted};
    let cal: Vec<Value> = cases()
        .into_iter()
        .filter(|c| is_calibration(&s(c, "id").unwrap()))
        .collect();
    let mut tp1 = Vec::new();
    let mut tpn = Vec::new();
    let mut ppn = Vec::new();
    let mut sampler_pts = Vec::new();
    let mut vision_rows = Vec::new();
    let mut v0_overhead = Vec::new();
    for c in &cal {
        let m = &c["measured"];
        let req = request(c);
        let p = plan(&req);
        if !p.engine.v1 {
            // blocks × our block bytes is what the engine had left for KV
            let blocks = m["gpu_blocks"].as_f64().unwrap();
            let kv = blocks * p.kv_bytes_per_token as f64 * f64::from(p.block_size) / GIB;
            v0_overhead
                .push(p.per_gpu.total_gib - p.per_gpu.weights_gib - p.per_gpu.activation_gib - kv);
            continue;
        }
        let (Some(nt), Some(act)) = (num(m, "non_torch_gib"), num(m, "activation_peak_gib")) else {
            continue;
        };
        if req.pp > 1 {
            ppn.push(nt);
        } else if req.tp > 1 {
            tpn.push((f64::from(req.tp), nt));
        } else {
            tp1.push(nt);
        }
        let rules = p.engine_rules.as_ref().unwrap();
        assert!(rules.rules.iter().any(|r| r.rule == "profile_batch"));
        let t = activation_terms(
            &req.arch,
            ProfileShape {
                tokens: 8192,
                seqs: 1024,
                v1: true,
                tp: req.tp,
                // the calibration rows are vLLM 0.19 (Triton top-k/top-p) and V0
                sampler: inferscope_plan::memory::SamplerPath::Fused,
            },
        );
        let y = act * GIB - t.persistent;
        if t.vision {
            vision_rows.push((t, act));
        } else if req.pp == 1 {
            sampler_pts.push((t.logits, y / GIB));
        }
    }
    let nt1 = median(&mut tp1.clone());
    let (nta, ntb) = line_fit(&tpn);
    let ntp = ppn.iter().sum::<f64>() / ppn.len() as f64;
    let (c0, k_gib) = line_fit(&sampler_pts);
    let k = k_gib * GIB;
    let vision: f64 = vision_rows
        .iter()
        .map(|(t, act)| act - (c0 * GIB + t.persistent + t.forward.max(k * t.logits)) / GIB)
        .sum::<f64>()
        / vision_rows.len().max(1) as f64;
    let v0 = v0_overhead.iter().sum::<f64>() / v0_overhead.len() as f64;
    println!("calibration fit ({} rows):", cal.len());
    println!(
        "  non-torch TP1 {nt1:.3} GiB ({} rows); TP>1 {nta:.3} + {ntb:.4} x tp ({} rows); PP {ntp:.3} ({} rows)",
        tp1.len(),
        tpn.len(),
        ppn.len()
    );
    println!(
        "  sampler {k:.2} B/logit, fixed {c0:.3} GiB ({} rows); vision {vision:.3} GiB ({} rows)",
        sampler_pts.len(),
        vision_rows.len()
    );
    println!("  V0 overhead {v0:.3} GiB ({} rows)", v0_overhead.len());
    let close = |name: &str, code: f64, fit: f64, tol: f64| {
        assert!(
            (code - fit).abs() <= tol,
            "{name}: code has {code}, the calibration fit gives {fit:.4}"
        );
    };
    close("NON_TORCH_TP1_GIB", fitted::NON_TORCH_TP1_GIB, nt1, 0.005);
    close(
        "NON_TORCH_TP_BASE_GIB",
        fitted::NON_TORCH_TP_BASE_GIB,
        nta,
        0.01,
    );
    close(
        "NON_TORCH_TP_PER_RANK_GIB",
        fitted::NON_TORCH_TP_PER_RANK_GIB,
        ntb,
        0.005,
    );
    close("NON_TORCH_PP_GIB", fitted::NON_TORCH_PP_GIB, ntp, 0.005);
    close(
        "SAMPLER_BYTES_PER_LOGIT",
        fitted::SAMPLER_BYTES_PER_LOGIT,
        k,
        0.05,
    );
    close("V1_FIXED_GIB", fitted::V1_FIXED_GIB, c0, 0.005);
    close(
        "VISION_PROFILE_GIB",
        fitted::VISION_PROFILE_GIB,
        vision,
        0.005,
    );
    close("V0_OVERHEAD_GIB", fitted::V0_OVERHEAD_GIB, v0, 0.005);
}
