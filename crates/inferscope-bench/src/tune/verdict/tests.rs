//! The ranking and the verdict on real runs: llama-server `-np 1` and `-np 4` on the project's
//! 2-core VM (fixtures/bench/llama-server-np1-np4/README.md says how they were recorded).
//! `-np 1` has the higher output throughput (1751 against 1625 tokens/s) and the slower first
//! token (TTFT p50 54.8 against 22.8 ms).

use super::*;
use crate::record::read_trace;
use crate::result::BenchResult;
use crate::tune::ranking::rank;
use crate::tune::session::Objective;
use crate::tune::{State, Template};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/bench/llama-server-np1-np4")
        .join(name)
}

/// A candidate labelled `label` with one measured run of fixture `np` (`np1`/`np4`); with `slo`
/// its statistics are recomputed from its trace under that SLO (goodput changes with it).
fn cand(label: &str, np: &str, objective: Objective, slo: Option<&Slo>) -> Cand {
    let text = std::fs::read_to_string(fixture(&format!("{np}.json"))).unwrap();
    let mut result: BenchResult = serde_json::from_str(&text).unwrap();
    let f = std::fs::File::open(fixture(&format!("{np}.jsonl"))).unwrap();
    let records = read_trace(&mut std::io::BufReader::new(f)).unwrap();
    if let Some(slo) = slo {
        result.stats = crate::stats::compute(&records, slo).0;
    }
    let mut c = Cand::new(
        [("np".to_string(), label.to_string())].into(),
        label.into(),
        Template::parse("llama-server --port {port}").unwrap(),
        PathBuf::new(),
    );
    let v = objective.of(&result, None);
    c.push_run((result, records, None), v);
    c
}

fn throughput(c: &Cand) -> f64 {
    Objective::Throughput.of(&c.runs[0].0, None).unwrap()
}

#[test]
fn a_faster_candidate_ranks_first_and_is_kept() {
    let o = Objective::Throughput;
    let cands = [cand("np4", "np4", o, None), cand("np1", "np1", o, None)];
    assert!(throughput(&cands[1]) > throughput(&cands[0]) * 1.05);
    let r = rank(&cands, 0, 1, &Slo::default());
    assert_eq!(r.order, vec![1, 0]);
    assert_eq!(r.top, Some(1));
    let v = judge(o, &cands, &Slo::default(), &r, 0);
    assert!(v.significant, "{}", v.text);
    assert!(!v.inconclusive);
    assert!(
        v.text.starts_with(
            "`np1` is better than the baseline `np4`: 1750.9 output tokens/s vs 1625.4"
        ),
        "{}",
        v.text
    );
    assert!(v.comparison.is_some());
}

#[test]
fn a_winner_slower_than_the_baseline_is_never_kept() {
    let o = Objective::Throughput;
    let cands = [cand("np1", "np1", o, None), cand("np4", "np4", o, None)];
    // Ranked honestly, the faster baseline is first: nothing to keep.
    let mut r = rank(&cands, 0, 1, &Slo::default());
    assert_eq!(r.top, Some(0));
    let v = judge(o, &cands, &Slo::default(), &r, 0);
    assert!(!v.significant);
    assert_eq!(
        v.text,
        "no candidate is better than the baseline `np1`: it ranks first"
    );
    // Were the slower one put first (a cut round), the verdict keeps nothing: the baseline
    // beats it by more than the noise...
    r.top = Some(1);
    let v = judge(o, &cands, &Slo::default(), &r, 0);
    assert!(!v.significant && v.inconclusive, "{}", v.text);
    assert!(
        v.text
            .starts_with("inconclusive: `np4` ranks first, but `np1` measured 1750.9")
    );
    // ...and compared with the baseline alone it is not better either.
    let (text, significant, _) =
        against_baseline(o, &cands, &Slo::default(), &r.counted, Some(1), 0);
    assert!(!significant, "{text}");
    let v = Verdict {
        text,
        significant,
        comparison: None,
        inconclusive: false,
    };
    assert!(
        v.text.starts_with(
            "no candidate is distinguishable from the baseline `np1`: the best, `np4`, has 1625.4"
        ),
        "{}",
        v.text
    );
    assert!(v.text.ends_with("; not significant"), "{}", v.text);
}

#[test]
fn a_candidate_failing_its_slo_never_wins_on_goodput() {
    // A 30 ms TTFT objective: `-np 1` (TTFT p50 55 ms) fails it for most requests, `-np 4`
    // (23 ms) meets it, although `-np 1` has the higher throughput.
    let slo: Slo = "ttft=30ms".parse().unwrap();
    let o = Objective::Goodput;
    for (first, second) in [("np1", "np4"), ("np4", "np1")] {
        let cands = [
            cand(first, first, o, Some(&slo)),
            cand(second, second, o, Some(&slo)),
        ];
        let i1 = usize::from(first != "np1");
        let i4 = 1 - i1;
        assert!(throughput(&cands[i1]) > throughput(&cands[i4]));
        let good = |i: usize| Objective::Goodput.of(&cands[i].runs[0].0, None).unwrap();
        assert!(good(i4) > 2.0 * good(i1), "{} vs {}", good(i4), good(i1));
        let r = rank(&cands, 0, 1, &slo);
        assert_eq!(r.top, Some(i4), "{first} baseline");
        let v = judge(o, &cands, &slo, &r, 0);
        assert_eq!(v.significant, i4 == 1, "{}", v.text);
    }
}

#[test]
fn a_tie_is_not_significant() {
    let o = Objective::Throughput;
    let cands = [cand("a", "np4", o, None), cand("b", "np4", o, None)];
    let r = rank(&cands, 0, 1, &Slo::default());
    // Equal values: the baseline goes above only a candidate it beats, so `b` ranks first...
    assert_eq!(r.order, vec![1, 0]);
    assert_eq!(r.top, Some(1));
    // ...and is not called better.
    let v = judge(o, &cands, &Slo::default(), &r, 0);
    assert!(!v.significant, "{}", v.text);
    assert!(!v.inconclusive, "{}", v.text);
    assert!(v.text.contains("(+0.0 %)"), "{}", v.text);
}

#[test]
fn a_top_beaten_by_another_candidate_is_inconclusive() {
    let o = Objective::Throughput;
    let cands = [
        cand("base", "np4", o, None),
        cand("b", "np4", o, None),
        cand("c", "np1", o, None),
    ];
    let mut r = rank(&cands, 0, 1, &Slo::default());
    assert_eq!(r.top, Some(2));
    // A cut round could leave `b` first: `c` beats it by 7.7 %, more than the 5 % noise floor.
    r.top = Some(1);
    let v = judge(o, &cands, &Slo::default(), &r, 0);
    assert!(v.inconclusive && !v.significant, "{}", v.text);
    assert!(
        v.text
            .starts_with("inconclusive: `b` ranks first, but `c` measured 1750.9 output tokens/s against its 1625.4"),
        "{}",
        v.text
    );
}

#[test]
fn failed_and_skipped_candidates_never_win() {
    let o = Objective::Throughput;
    let mut failed = cand("failed", "np1", o, None);
    failed.state = State::Failed;
    failed.runs.clear();
    let mut skipped = cand("skipped", "np1", o, None);
    skipped.state = State::Skipped;
    skipped.runs.clear();
    let cands = [failed.clone(), skipped.clone(), cand("np4", "np4", o, None)];
    let r = rank(&cands, 0, 1, &Slo::default());
    assert_eq!(r.top, Some(2));
    let r = rank(&[failed, skipped], 0, 1, &Slo::default());
    assert_eq!(r.top, None);
    let v = judge(o, &[], &Slo::default(), &r, 0);
    assert_eq!(v.text, "no candidate could be measured");
    assert!(!v.significant);
}

#[test]
fn pareto_fronts_keep_each_trade_off() {
    let o = Objective::Throughput;
    let cands = [cand("np1", "np1", o, None), cand("np4", "np4", o, None)];
    let r = rank(&cands, 0, 1, &Slo::default());
    // np1: more throughput, slower TTFT; np4: less throughput, faster TTFT. Both on the TTFT
    // front; on TPOT np1 is better on both axes (0.36 vs 1.73 ms p50), so np4 is dominated.
    assert_eq!(r.fronts.0, vec![true, true]);
    assert_eq!(r.fronts.1, vec![true, false]);
}
