//! Ranking the measured candidates (pure): the order, the runs each is judged on, their merged
//! outcomes, the top-ranked candidate and the throughput-vs-p90 Pareto fronts.

use super::session::Cand;
use super::{State, counted_runs, pareto_front, ranking};
use crate::plot::ParetoPoint;
use crate::run::{Outcome, merge_repeats};
use crate::stats::Slo;

/// A candidate's first `n` runs merged (pooled statistics, `repeats` per run for `compare`).
pub fn merged(c: &Cand, n: usize, slo: &Slo) -> Option<Outcome> {
    let outs: Vec<Outcome> = c
        .runs
        .iter()
        .take(n)
        .map(|(r, recs, _)| Outcome {
            result: r.clone(),
            records: recs.clone(),
        })
        .collect();
    if outs.len() <= 1 {
        return outs.into_iter().next();
    }
    merge_repeats(outs, slo)
}

/// Per candidate, whether it is on the throughput-vs-p90 TTFT and TPOT Pareto fronts.
pub type Fronts = (Vec<bool>, Vec<bool>);

/// The candidates ranked.
#[derive(Debug)]
pub struct Ranking {
    /// Candidate indices, best first.
    pub order: Vec<usize>,
    /// Per candidate, how many of its first runs it is ranked and shown on (complete rounds).
    pub counted: Vec<usize>,
    /// Per candidate, those runs merged.
    pub merged: Vec<Option<Outcome>>,
    /// The top-ranked candidate, when it was measured.
    pub top: Option<usize>,
    /// The Pareto fronts of the merged outcomes.
    pub fronts: Fronts,
}

/// Rank `cands` (`baseline` is the baseline's index) with `repeats` rounds.
pub fn rank(cands: &[Cand], baseline: usize, repeats: u32, slo: &Slo) -> Ranking {
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let order = ranking(&states, baseline, repeats);
    // Each candidate is shown and judged on the runs it is ranked on (complete rounds only).
    let counted = counted_runs(&states, baseline, repeats);
    let merged: Vec<Option<Outcome>> = cands
        .iter()
        .zip(&counted)
        .map(|(c, &n)| self::merged(c, n, slo))
        .collect();
    let top = order
        .first()
        .copied()
        .filter(|&i| matches!(states.get(i), Some(State::Measured(_))));
    let fronts = fronts(&merged);
    Ranking {
        order,
        counted,
        merged,
        top,
        fronts,
    }
}

/// Which latency a Pareto front plots against throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
}

impl Family {
    /// Both, in file order.
    pub const ALL: [Family; 2] = [Family::Ttft, Family::Tpot];
    /// Its name in file names.
    pub fn name(self) -> &'static str {
        match self {
            Family::Ttft => "ttft",
            Family::Tpot => "tpot",
        }
    }
}

/// A merged outcome's p90 of `fam`, in ms.
pub fn p90(o: &Option<Outcome>, fam: Family) -> Option<f64> {
    o.as_ref().and_then(|o| match fam {
        Family::Ttft => o.result.stats.ttft_ms.p90,
        Family::Tpot => o.result.stats.tpot_ms.p90,
    })
}

/// A merged outcome's output throughput.
pub fn thr(o: &Option<Outcome>) -> Option<f64> {
    o.as_ref()
        .and_then(|o| crate::compare::stats_value(&o.result.stats, "throughput"))
}

/// The throughput-vs-p90 Pareto fronts (TTFT, TPOT).
pub fn fronts(merged: &[Option<Outcome>]) -> Fronts {
    let front = |fam| {
        pareto_front(
            &merged
                .iter()
                .map(|o| (thr(o), p90(o, fam)))
                .collect::<Vec<_>>(),
        )
    };
    (front(Family::Ttft), front(Family::Tpot))
}

/// The points of one Pareto plot: every candidate with both values.
pub fn pareto_points(cands: &[Cand], r: &Ranking, fam: Family) -> Vec<ParetoPoint> {
    let front = match fam {
        Family::Ttft => &r.fronts.0,
        Family::Tpot => &r.fronts.1,
    };
    cands
        .iter()
        .zip(r.merged.iter())
        .zip(front.iter())
        .filter_map(|((c, o), f)| Some((c.label.clone(), thr(o)?, p90(o, fam)?, *f)))
        .collect()
}
