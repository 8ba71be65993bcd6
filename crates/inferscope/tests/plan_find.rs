//! `plan --find` as "which GPU do I rent" (issue 26 item 5): the GPU and count filters, the
//! context it used said first, `--top N`, `--prices FILE`, a command per row that `plan` itself
//! accepts, the closest miss when nothing fits, regional parts marked.

mod common;

use common::inferscope;

const LLAMA70: &str = "meta-llama/Llama-3.1-70B-Instruct";

fn find_json(extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["plan", "--find", "--json", "--model", LLAMA70];
    args.extend_from_slice(extra);
    let (code, out, err) = inferscope(&args);
    assert!(code == 0 || code == 1, "{err}");
    (code, serde_json::from_str(&out).unwrap())
}

fn rows(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["candidates"].as_array().unwrap()
}

#[test]
fn gpu_and_count_filter_the_search() {
    let (code, v) = find_json(&["--gpu", "l40s", "--gpus", "4", "--max-model-len", "8192"]);
    assert_eq!(code, 0);
    assert!(!rows(&v).is_empty());
    for r in rows(&v) {
        assert_eq!(r["gpu"], "L40S", "{r}");
        assert!(r["count"].as_u64().unwrap() <= 4, "{r}");
    }
}

#[test]
fn the_context_used_is_said_first_and_overridable() {
    // no length given: the model's full context, named as such, first line of the table
    let (_, v) = find_json(&["--top", "1"]);
    assert_eq!(v["context_tokens"], 131072);
    assert!(
        v["context_basis"]
            .as_str()
            .unwrap()
            .contains("full context"),
        "{}",
        v["context_basis"]
    );
    let (_, out, _) = inferscope(&["plan", "--find", "--model", LLAMA70, "--top", "1"]);
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("Context: 131072 tokens"), "{first}");
    assert!(
        out.contains("at --max-model-len 8192 the first choice"),
        "{out}"
    );
    // input + output
    let (_, v) = find_json(&["--input-len", "3000", "--output-len", "1000", "--top", "1"]);
    assert_eq!(v["context_tokens"], 4000);
    let (code, _, err) = inferscope(&["plan", "--find", "--model", LLAMA70, "--input-len", "3000"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--output-len"), "{err}");
}

#[test]
fn top_n_says_how_many_of_how_many() {
    let (_, v) = find_json(&["--max-model-len", "8192", "--top", "3"]);
    assert_eq!(rows(&v).len(), 3);
    let total = v["candidates_total"].as_u64().unwrap();
    assert!(total > 3, "{total}");
    let (_, out, _) = inferscope(&[
        "plan",
        "--find",
        "--model",
        LLAMA70,
        "--max-model-len",
        "8192",
        "--top",
        "3",
    ]);
    assert!(out.contains(&format!("showing 3 of {total}")), "{out}");
}

#[test]
fn prices_rank_by_cost_and_bad_files_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("p.csv");
    std::fs::write(
        &prices,
        "gpu,usd_per_gpu_hour\nH100 SXM,3\nl40s,1\nH200,4\n",
    )
    .unwrap();
    let (_, v) = find_json(&[
        "--max-model-len",
        "8192",
        "--concurrency",
        "8",
        "--prices",
        prices.to_str().unwrap(),
    ]);
    assert_eq!(v["ranked_by"], "cost");
    let priced: Vec<&serde_json::Value> = rows(&v)
        .iter()
        .filter(|r| r["usd_per_hour"].is_number())
        .collect();
    assert!(priced.len() >= 3, "{priced:?}");
    // priced rows come first, cheapest per hour first
    assert!(rows(&v)[0]["usd_per_hour"].is_number());
    let hours: Vec<f64> = priced
        .iter()
        .map(|r| r["usd_per_hour"].as_f64().unwrap())
        .collect();
    assert!(hours.windows(2).all(|w| w[0] <= w[1]), "{hours:?}");
    for r in &priced {
        let per_gpu = match r["gpu"].as_str().unwrap() {
            "H100 SXM" => 3.0,
            "L40S" => 1.0,
            "H200 SXM" => 4.0,
            g => panic!("{g} was not priced"),
        };
        let h = r["usd_per_hour"].as_f64().unwrap();
        assert_eq!(h, per_gpu * r["count"].as_f64().unwrap());
        let agg = r["decode_tokens_per_s_aggregate"].as_f64().unwrap();
        let m = r["usd_per_million_output_tokens"].as_f64().unwrap();
        assert!((m - h / (agg * 3600.0) * 1e6).abs() < 1e-6 * m, "{r}");
    }
    std::fs::write(&prices, "# mine\nL40S,1\nH100 SXM,cheap\n").unwrap();
    let (code, _, err) = inferscope(&[
        "plan",
        "--find",
        "--model",
        LLAMA70,
        "--prices",
        prices.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("{}:3:", prices.display())), "{err}");
}

#[test]
fn each_row_command_is_accepted_by_plan_and_fits() {
    let (_, v) = find_json(&["--max-model-len", "8192", "--concurrency", "4"]);
    let mut checked = 0;
    for r in rows(&v).iter().filter(|r| r["weights"] != "int4").take(4) {
        let cmd = r["command"].as_str().unwrap();
        assert!(
            cmd.starts_with(&format!("vllm serve {LLAMA70} --max-model-len 8192")),
            "{cmd}"
        );
        let gpus = r["count"].to_string();
        let mut args = vec![
            "plan",
            "--json",
            "--gpu",
            r["gpu"].as_str().unwrap(),
            "--gpus",
            &gpus,
        ];
        args.push("--");
        args.extend(cmd.split(' '));
        let (code, out, err) = inferscope(&args);
        assert_eq!(code, 0, "{cmd}: {err}");
        let p: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(p["fits"], true, "{cmd}");
        checked += 1;
    }
    assert!(checked >= 2);
}

#[test]
fn nothing_fits_names_the_closest_miss() {
    let (code, v) = find_json(&["--gpu", "l4", "--gpus", "1", "--max-model-len", "8192"]);
    assert_eq!(code, 1);
    assert!(rows(&v).is_empty());
    let m = &v["closest_miss"];
    assert_eq!(m["gpu"], "L4");
    assert!(m["shortfall_ratio"].as_f64().unwrap() > 1.0, "{m}");
    assert!(
        m["lacks"].as_str().unwrap().contains("× more memory"),
        "{m}"
    );
    let (_, out, _) = inferscope(&[
        "plan",
        "--find",
        "--model",
        LLAMA70,
        "--gpu",
        "l4",
        "--gpus",
        "1",
        "--max-model-len",
        "8192",
    ]);
    assert!(out.contains("closest: 1 × L4"), "{out}");
}

#[test]
fn regional_parts_are_marked_not_hidden() {
    let (_, v) = find_json(&["--max-model-len", "8192", "--top", "1000"]);
    let h20: Vec<&serde_json::Value> = rows(&v).iter().filter(|r| r["gpu"] == "H20").collect();
    assert!(!h20.is_empty());
    assert!(
        h20.iter()
            .all(|r| r["region"].as_str().unwrap().contains("China"))
    );
    assert!(
        rows(&v)
            .iter()
            .any(|r| r["gpu"] == "H100 SXM" && r["region"].is_null())
    );
}
