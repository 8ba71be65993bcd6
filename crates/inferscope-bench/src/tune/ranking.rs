//! Ranking the measured candidates (pure): the order, the runs each is judged on, their merged
//! outcomes, the top-ranked candidate and the throughput-vs-p90 Pareto fronts.

use super::session::Cand;
use super::{State, counted_runs, pareto_front, ranking};
use crate::metric::{Family, Metric, Stat};
use crate::plot::ParetoPoint;
use crate::run::{RunOutcome, merge_repeats};
use crate::stats::Slo;

/// A candidate's first `n` runs merged (pooled statistics, `repeats` per run for `compare`).
pub fn merged(c: &Cand, n: usize, slo: &Slo) -> Option<RunOutcome> {
    let outs: Vec<RunOutcome> = c
        .runs
        .iter()
        .take(n)
        .map(|(r, recs, _)| RunOutcome {
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
    pub merged: Vec<Option<RunOutcome>>,
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
    let merged: Vec<Option<RunOutcome>> = cands
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

/// Each Pareto front with the latency it plots against throughput, in file order.
pub fn plotted(r: &Ranking) -> [(Family, &[bool]); 2] {
    [(Family::Ttft, &r.fronts.0), (Family::Tpot, &r.fronts.1)]
}

/// A merged outcome's p90 of `fam`, in ms.
pub fn p90(o: &Option<RunOutcome>, fam: Family) -> Option<f64> {
    o.as_ref()
        .and_then(|o| Metric::Latency(fam, Stat::P90).of(&o.result.stats))
}

/// A merged outcome's output throughput.
pub fn thr(o: &Option<RunOutcome>) -> Option<f64> {
    o.as_ref()
        .and_then(|o| Metric::Throughput.of(&o.result.stats))
}

/// The throughput-vs-p90 Pareto fronts (TTFT, TPOT).
pub fn fronts(merged: &[Option<RunOutcome>]) -> Fronts {
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

/// The points of one Pareto plot (`front`: the candidates on it): every candidate with both
/// values.
pub fn pareto_points(cands: &[Cand], r: &Ranking, fam: Family, front: &[bool]) -> Vec<ParetoPoint> {
    cands
        .iter()
        .zip(r.merged.iter())
        .zip(front.iter())
        .filter_map(|((c, o), f)| Some((c.label.clone(), thr(o)?, p90(o, fam)?, *f)))
        .collect()
}
