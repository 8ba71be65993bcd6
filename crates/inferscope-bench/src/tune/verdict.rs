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
mod tests;
