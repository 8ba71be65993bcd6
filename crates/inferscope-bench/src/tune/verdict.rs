//! The verdict (pure): whether the top-ranked candidate beats the baseline, significantly, on
//! the runs they have in common; and never a winner that another measured candidate beats by
//! more than the run-to-run noise.

use super::ranking::{Ranking, merged};
use super::session::{Cand, Objective};
use super::{State, contender, noise};
use crate::compare::{self, CompareStatus, Samples};
use crate::stats::Slo;

/// The smallest run-to-run noise assumed (a fraction): `compare`'s default throughput threshold
/// (5 %), since one run each shows no spread.
pub const NOISE_FLOOR: f64 = 0.05;

/// What the report concludes.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The sentence.
    pub text: String,
    /// The top-ranked candidate is significantly better than the baseline: keep it.
    pub significant: bool,
    /// `compare`'s table of the top-ranked candidate against the baseline.
    pub comparison: Option<compare::Comparison>,
    /// Another measured candidate beats the top-ranked one by more than the noise: no winner.
    pub inconclusive: bool,
}

/// Judge the ranking `r` of `cands` against the baseline (index `baseline`).
pub fn judge(
    objective: Objective,
    cands: &[Cand],
    slo: &Slo,
    r: &Ranking,
    baseline: usize,
) -> Verdict {
    let label_of = |i: usize| cands.get(i).map(|c| c.label.clone()).unwrap_or_default();
    let (mut text, mut significant, comparison) =
        against_baseline(objective, cands, slo, &r.counted, r.top, baseline);
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let noise = noise(&states, &r.counted, NOISE_FLOOR);
    let rival = r
        .top
        .and_then(|w| contender(&states, &r.counted, w, noise).map(|c| (w, c)));
    if let Some((w, (z, zv, wv, n))) = rival {
        let on = if n > 0 {
            format!("on the {n} run(s) they have in common")
        } else {
            "each on its own ranked runs".into()
        };
        text = format!(
            "inconclusive: `{}` ranks first, but `{}` measured {zv:.1} {} against its {wv:.1} {on}, more than the run-to-run noise ({:.1} %); measure again with more --repeat or a longer --duration",
            label_of(w),
            label_of(z),
            objective.unit(),
            noise * 100.0
        );
        significant = false;
    }
    Verdict {
        text,
        significant,
        comparison,
        inconclusive: rival.is_some(),
    }
}

/// The verdict sentence, whether it is significant, and compare's table.
fn against_baseline(
    objective: Objective,
    cands: &[Cand],
    slo: &Slo,
    counted: &[usize],
    winner: Option<usize>,
    baseline: usize,
) -> (String, bool, Option<compare::Comparison>) {
    let base_label = cands
        .get(baseline)
        .map(|c| c.label.clone())
        .unwrap_or_default();
    let Some(w) = winner else {
        return ("no candidate could be measured".into(), false, None);
    };
    let wl = cands.get(w).map(|c| c.label.clone()).unwrap_or_default();
    if w == baseline {
        return (
            format!("no candidate is better than the baseline `{base_label}`: it ranks first"),
            false,
            None,
        );
    }
    // Judged on the runs both have in common (the same rounds), not one's extra runs.
    let common = counted
        .get(w)
        .copied()
        .unwrap_or(0)
        .min(counted.get(baseline).copied().unwrap_or(0));
    let run = |i: usize| cands.get(i).and_then(|c| merged(c, common, slo));
    let (Some(bo), Some(wo)) = (run(baseline), run(w)) else {
        return (
            format!(
                "`{wl}` ranks first; the baseline `{base_label}` was not measured, so nothing can be said about significance"
            ),
            false,
            None,
        );
    };
    if objective == Objective::Capacity {
        let (bc, wc) = (
            cands.get(baseline).and_then(Cand::capacity),
            cands.get(w).and_then(Cand::capacity),
        );
        let (b, wv) = (
            bc.as_ref().and_then(|c| c.requests_per_s),
            wc.as_ref().and_then(|c| c.requests_per_s),
        );
        let b_fail = bc.as_ref().and_then(|c| c.failing_rate);
        let sig = match (wv, b_fail) {
            (Some(w), Some(f)) => w >= f,
            _ => false,
        };
        let fmt = |v: Option<f64>| {
            v.map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "none".into())
        };
        return (
            format!(
                "`{wl}` sustains {} requests/s within the SLO against the baseline `{base_label}`'s {}; {}",
                fmt(wv),
                fmt(b),
                if sig {
                    "significant: it passed a rate the baseline failed"
                } else {
                    "not distinguishable: the search brackets overlap"
                }
            ),
            sig,
            None,
        );
    }
    let thresholds = compare::parse_thresholds(compare::DEFAULT_THRESHOLDS).unwrap_or_default();
    let sb = Samples::from_records(&bo.records);
    let sw = Samples::from_records(&wo.records);
    let c = compare::compare(&bo.result, &wo.result, Some((&sb, &sw)), &thresholds);
    let metric = objective.metric();
    let row = c.rows.iter().find(|r| r.metric == metric);
    let (sig, desc) = match row {
        Some(r) => {
            let method = match r.method {
                compare::Method::BetweenRuns => "between runs",
                compare::Method::ClusterBootstrap => "request-level cluster bootstrap",
                compare::Method::None => "no evidence",
            };
            let how = match (r.samples, r.ci95) {
                (Some(s), Some([lo, hi])) => format!(
                    "; 95 % interval of the difference [{lo:+.1}, {hi:+.1}], {} vs {} {}, {method}",
                    s.base, s.cand, s.unit
                ),
                _ => format!("; {method}"),
            };
            let num = |v: Option<f64>| {
                v.map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "unknown".into())
            };
            (
                // "better" without evidence (no traces, no repeats) is not significance
                r.status == CompareStatus::Better && r.method != compare::Method::None,
                format!(
                    "{} {} vs {} {}{}{how}",
                    num(r.cand),
                    objective.unit(),
                    num(r.base),
                    objective.unit(),
                    r.delta_pct
                        .map(|d| format!(" ({d:+.1} %)"))
                        .unwrap_or_default()
                ),
            )
        }
        None => (false, "no comparable value".into()),
    };
    let runs_of = |i: usize| cands.get(i).map_or(0, |c| c.runs.len());
    let desc = if runs_of(w) > common || runs_of(baseline) > common {
        format!("{desc} (on their first {common} run(s), the complete rounds they have in common)")
    } else {
        desc
    };
    let text = if sig {
        format!("`{wl}` is better than the baseline `{base_label}`: {desc}; significant")
    } else {
        format!(
            "no candidate is distinguishable from the baseline `{base_label}`: the best, `{wl}`, has {desc}; not significant"
        )
    };
    (text, sig, Some(c))
}

#[cfg(test)]
mod tests {
    // The ranking and the verdict on real runs: llama-server `-np 1` and `-np 4` on the project's
    // 2-core VM (fixtures/bench/llama-server-np1-np4/README.md says how they were recorded).
    // `-np 1` has the higher output throughput (1751 against 1625 tokens/s) and the slower first
    // token (TTFT p50 54.8 against 22.8 ms).

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
}
