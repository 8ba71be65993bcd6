//! Successive halving for `tune`, and the ranking and "who is ahead" checks it feeds. Pure: the
//! schedule is recomputed from what each candidate has measured so far, so a resumed run (journal)
//! gets exactly the schedule an uninterrupted one would.
//!
//! The method (docs/tune.md, "Budget and successive halving"):
//!
//! * **Rounds.** Round 1's field is every candidate not skipped. Every member of a round gets its
//!   run of that round before any candidate starts the next round, so run *k* of every candidate
//!   belongs to round *k*.
//! * **Leaders first.** Within a round, the members run in order of their mean objective over the
//!   rounds already complete (best first; round 1 in candidate order): when a budget ends a round
//!   early, the runs it did get went to the likeliest winners.
//! * **Halving.** After a complete round *r*, the better half (rounded up) of its measured members
//!   other than the baseline, compared on their *r* runs, plus the baseline, form round *r + 1*;
//!   the others are dropped. The rounds stop after `repeats`.
//! * **A cut round does not count.** A round the budget (or Ctrl-C) ended before every member ran
//!   counts toward nobody's rank: ranking uses only runs of complete rounds (round 1 excepted: a
//!   budget too small for one run each ranks those that ran, on their one run).
//! * **Common runs.** Candidates are compared on the runs they have in common: a candidate that
//!   reached a later round beat every one dropped before, on the runs they shared; the baseline,
//!   kept every round whatever it measured, is placed by comparing it with each candidate on
//!   their common runs.

/// What one candidate has so far, for scheduling.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Not tried yet.
    Pending,
    /// Planned as not fitting, or left out: never run.
    Skipped,
    /// Failed to start or to serve.
    Failed,
    /// The objective value of each measured run, in round order (higher is better); `None` for a
    /// run whose objective is unknown (counts as a run, ranks last).
    Measured(Vec<Option<f64>>),
}

impl State {
    fn runs(&self) -> Option<&[Option<f64>]> {
        match self {
            State::Measured(r) => Some(r),
            _ => None,
        }
    }
}

/// Mean objective over a candidate's runs with a value.
pub fn mean_objective(runs: &[Option<f64>]) -> Option<f64> {
    let v: Vec<f64> = runs.iter().flatten().copied().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Mean over the first `n` runs; unknown ranks below everything.
fn key(runs: &[Option<f64>], n: usize) -> f64 {
    mean_objective(runs.get(..n.min(runs.len())).unwrap_or_default()).unwrap_or(f64::NEG_INFINITY)
}

/// Where the schedule stands, recomputed from the candidates' states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Halving {
    /// The current round (1-based); the last one when `todo` is empty.
    pub round: usize,
    /// Rounds every member of which has run (or failed).
    pub complete: usize,
    /// The current round's members still to run, leaders first; empty when tuning is done.
    pub todo: Vec<usize>,
}

/// The schedule so far. `baseline` is the baseline's index; `repeats` the rounds (≥ 1).
pub fn halving(states: &[State], baseline: usize, repeats: u32) -> Halving {
    let repeats = repeats.max(1) as usize;
    let runs = |i: usize| states.get(i).and_then(State::runs);
    let len = |i: usize| runs(i).map_or(0, <[_]>::len);
    let mut field: Vec<usize> = (0..states.len())
        .filter(|&i| states.get(i) != Some(&State::Skipped))
        .collect();
    let mut round = 1usize;
    loop {
        let mut todo: Vec<usize> = field
            .iter()
            .copied()
            .filter(|&i| matches!(states.get(i), Some(State::Pending)) || runs(i).is_some())
            .filter(|&i| len(i) < round)
            .collect();
        if !todo.is_empty() {
            // Leaders first, by the complete rounds before this one; ties in candidate order.
            let done = round - 1;
            todo.sort_by(|&a, &b| {
                let (ka, kb) = (
                    runs(a).map_or(f64::NEG_INFINITY, |r| key(r, done)),
                    runs(b).map_or(f64::NEG_INFINITY, |r| key(r, done)),
                );
                if done == 0 {
                    a.cmp(&b)
                } else {
                    kb.total_cmp(&ka).then(a.cmp(&b))
                }
            });
            return Halving {
                round,
                complete: round - 1,
                todo,
            };
        }
        if round >= repeats {
            return Halving {
                round,
                complete: round,
                todo: Vec::new(),
            };
        }
        let mut others: Vec<usize> = field
            .iter()
            .copied()
            .filter(|&i| i != baseline && runs(i).is_some())
            .collect();
        others.sort_by(|&a, &b| {
            let (ka, kb) = (
                runs(a).map_or(f64::NEG_INFINITY, |r| key(r, round)),
                runs(b).map_or(f64::NEG_INFINITY, |r| key(r, round)),
            );
            kb.total_cmp(&ka).then(a.cmp(&b))
        });
        others.truncate(others.len().div_ceil(2));
        if field.contains(&baseline) && runs(baseline).is_some() {
            others.push(baseline);
        }
        if others.is_empty() {
            return Halving {
                round,
                complete: round,
                todo: Vec::new(),
            };
        }
        others.sort_unstable();
        field = others;
        round += 1;
    }
}

/// The current round's members still to run, leaders first; empty when tuning is done.
pub fn next_round(states: &[State], baseline: usize, repeats: u32) -> Vec<usize> {
    halving(states, baseline, repeats).todo
}

/// How many of its runs each candidate is ranked on: those of complete rounds (at least its one
/// screening run, so a budget too small for round 1 still ranks what ran).
pub fn counted_runs(states: &[State], baseline: usize, repeats: u32) -> Vec<usize> {
    let counted = halving(states, baseline, repeats).complete.max(1);
    states
        .iter()
        .map(|s| s.runs().map_or(0, |r| r.len().min(counted)))
        .collect()
}

/// Mean objective of `a` and of `b` over the counted runs they have in common, and how many.
/// `None` unless both were measured.
pub fn common_means(
    states: &[State],
    counted: &[usize],
    a: usize,
    b: usize,
) -> Option<(f64, f64, usize)> {
    let (ra, rb) = (states.get(a)?.runs()?, states.get(b)?.runs()?);
    let n = (*counted.get(a)?).min(*counted.get(b)?);
    (n > 0).then(|| (key(ra, n), key(rb, n), n))
}

/// Candidate indices ranked: measured ones first (see the module's rules: the round reached,
/// then the mean over those rounds, the baseline placed by common runs), then failed, then
/// skipped or never run.
pub fn ranking(states: &[State], baseline: usize, repeats: u32) -> Vec<usize> {
    let counted = counted_runs(states, baseline, repeats);
    let level = |i: usize| counted.get(i).copied().unwrap_or(0);
    let measured = |i: usize| states.get(i).and_then(State::runs).is_some();
    let mut others: Vec<usize> = (0..states.len())
        .filter(|&i| i != baseline && measured(i))
        .collect();
    let k = |i: usize| {
        states
            .get(i)
            .and_then(State::runs)
            .map_or(f64::NEG_INFINITY, |r| key(r, level(i)))
    };
    others.sort_by(|&a, &b| {
        level(b)
            .cmp(&level(a))
            .then_with(|| k(b).total_cmp(&k(a)))
            .then(a.cmp(&b))
    });
    let mut order = others;
    if measured(baseline) {
        // Above the first candidate it beats on their common runs.
        let at = order
            .iter()
            .position(|&z| {
                common_means(states, &counted, baseline, z).is_some_and(|(b, z, _)| b > z)
            })
            .unwrap_or(order.len());
        order.insert(at, baseline);
    }
    let class = |s: Option<&State>| match s {
        Some(State::Failed) => 0,
        _ => 1,
    };
    let mut rest: Vec<usize> = (0..states.len()).filter(|&i| !measured(i)).collect();
    rest.sort_by_key(|&i| (class(states.get(i)), i));
    order.extend(rest);
    order
}

/// A measured candidate that beats `top` on the objective by more than `noise` (a fraction of
/// `top`'s value), on their common counted runs or on each one's own counted mean: then calling
/// `top` the winner would contradict the measurements. The first such, with (its value, `top`'s
/// value, runs compared; 0 when the comparison is of own means).
pub fn contender(
    states: &[State],
    counted: &[usize],
    top: usize,
    noise: f64,
) -> Option<(usize, f64, f64, usize)> {
    let beats = |z: f64, t: f64| z.is_finite() && (!t.is_finite() || z > t + noise * t.abs());
    let own = |i: usize| {
        let n = counted.get(i).copied().unwrap_or(0);
        states
            .get(i)
            .and_then(State::runs)
            .map_or(f64::NEG_INFINITY, |r| key(r, n))
    };
    (0..states.len()).filter(|&i| i != top).find_map(|z| {
        if let Some((zv, tv, n)) = common_means(states, counted, z, top)
            && beats(zv, tv)
        {
            return Some((z, zv, tv, n));
        }
        (states.get(z)?.runs().is_some() && beats(own(z), own(top)))
            .then(|| (z, own(z), own(top), 0))
    })
}

/// The run-to-run noise of the objective: the largest relative spread ((max − min) / mean) of any
/// candidate's counted runs, and at least `floor` (the compare threshold: one run each has no
/// spread to show).
pub fn noise(states: &[State], counted: &[usize], floor: f64) -> f64 {
    states
        .iter()
        .zip(counted)
        .filter_map(|(s, &n)| {
            let v: Vec<f64> = s.runs()?.iter().take(n).flatten().copied().collect();
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                    (lo.min(x), hi.max(x))
                });
            let m = mean_objective(&s.runs()?.iter().take(n).copied().collect::<Vec<_>>())?;
            (v.len() >= 2 && m > 0.0).then(|| (hi - lo) / m)
        })
        .fold(floor, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    #[test]
    fn halving_screens_then_narrows_leaders_first() {
        let mut st = vec![Pending, Pending, Pending, Pending, Skipped];
        assert_eq!(next_round(&st, 0, 3), vec![0, 1, 2, 3]);
        st = vec![
            Measured(vec![Some(10.0)]),
            Measured(vec![Some(30.0)]),
            Failed,
            Measured(vec![Some(20.0)]),
            Skipped,
        ];
        // the others {1,3}: keep the better half (1) + baseline 0; the leader runs first
        assert_eq!(next_round(&st, 0, 3), vec![1, 0]);
        // a round cut after the leader's run: the baseline's run is what is left of round 2
        st[1] = Measured(vec![Some(30.0), Some(29.0)]);
        let h = halving(&st, 0, 3);
        assert_eq!((h.round, h.complete, h.todo), (2, 1, vec![0]));
        st[0] = Measured(vec![Some(10.0), Some(11.0)]);
        assert_eq!(next_round(&st, 0, 3), vec![1, 0]);
        st[0] = Measured(vec![Some(10.0), Some(11.0), Some(12.0)]);
        st[1] = Measured(vec![Some(30.0), Some(29.0), Some(31.0)]);
        assert_eq!(next_round(&st, 0, 3), Vec::<usize>::new());
        // 3, dropped after round 1, beat the baseline on their one common run: above it
        assert_eq!(ranking(&st, 0, 3), vec![1, 3, 0, 2, 4]);
        // four measured: 2 of the 3 others go on, best first, then the baseline
        let four = vec![
            Measured(vec![Some(1.0)]),
            Measured(vec![Some(2.0)]),
            Measured(vec![Some(4.0)]),
            Measured(vec![Some(3.0)]),
        ];
        assert_eq!(next_round(&four, 0, 3), vec![2, 3, 0]);
        // only the baseline measured; nothing measured
        assert_eq!(
            next_round(&[Measured(vec![Some(1.0)]), Failed], 0, 2),
            vec![0]
        );
        assert!(next_round(&[Failed, Skipped], 0, 3).is_empty());
    }

    #[test]
    fn ranking_compares_common_runs() {
        // issue 27: the baseline got its round-2 run, the 5x faster candidate did not (budget)
        let st = vec![
            Measured(vec![Some(329.0), Some(330.0)]),
            Measured(vec![Some(1556.0)]),
        ];
        assert_eq!(halving(&st, 0, 3).complete, 1);
        assert_eq!(ranking(&st, 0, 3), vec![1, 0]);
        // the baseline, kept every round, below a candidate dropped after round 1 that beat it
        let st = vec![
            Measured(vec![Some(5.0), Some(5.0), Some(5.0)]),
            Measured(vec![Some(9.0), Some(9.0), Some(9.0)]),
            Measured(vec![Some(7.0)]),
            Failed,
        ];
        assert_eq!(next_round(&st, 0, 3), Vec::<usize>::new());
        assert_eq!(ranking(&st, 0, 3), vec![1, 2, 0, 3]);
        // a candidate dropped after round 1 with a higher single run than the finalist's mean
        // stays below it: on their common run the finalist was better
        let st = vec![
            Measured(vec![Some(1.0), Some(1.0), Some(1.0)]),
            Measured(vec![Some(2.0), Some(1.5), Some(1.5)]),
            Measured(vec![Some(1.8)]),
        ];
        assert_eq!(ranking(&st, 0, 3), vec![1, 2, 0]);
        let counted = counted_runs(&st, 0, 3);
        assert_eq!(counted, vec![3, 3, 1]);
        // ...but its own mean (1.8) is above the finalist's (1.67) by more than 5 %
        assert_eq!(contender(&st, &counted, 1, 0.05).map(|c| c.0), Some(2));
        assert_eq!(contender(&st, &counted, 1, 0.10), None);
        assert!((noise(&st, &counted, 0.05) - 0.5 / (5.0 / 3.0)).abs() < 1e-9);
    }

    /// Issue 27 done-when: every budget cut point of a 3-candidate, 3-round plan. Each candidate
    /// has a true objective; each run measures it with a drift shared by all runs of that slot
    /// (a busy machine slows everyone alike) that is smaller than the gaps. For every assignment
    /// of the three speeds to the candidates (the baseline among them), the schedule is driven
    /// run by run and stopped after k runs for every k; the ranking of what ran must never put a
    /// slower candidate above a faster one, nothing unmeasured above anything measured, and the
    /// top must never be contradicted by another measured candidate.
    #[test]
    fn every_budget_cut_keeps_the_measured_order() {
        let speeds = [
            [100.0, 200.0, 300.0],
            [300.0, 100.0, 200.0],
            [200.0, 300.0, 100.0],
            [100.0, 300.0, 200.0],
            [300.0, 200.0, 100.0],
            [200.0, 100.0, 300.0],
        ];
        for truth in speeds {
            // the whole schedule first, to know every cut point
            let mut st = vec![Pending, Pending, Pending];
            let mut order = Vec::new();
            while let Some(&i) = next_round(&st, 0, 3).first() {
                let slot = order.len();
                let drift = 1.0 + 0.03 * ((slot * 7 % 5) as f64 - 2.0) / 2.0;
                let v = Some(truth[i] * drift);
                match &mut st[i] {
                    Measured(r) => r.push(v),
                    s => *s = Measured(vec![v]),
                }
                order.push(i);
            }
            // 3 screened; the better of the two others + the baseline twice more
            assert_eq!(order.len(), 7, "{truth:?}: {order:?}");
            for k in 0..=order.len() {
                let mut st = vec![Pending, Pending, Pending];
                for (slot, &i) in order.iter().take(k).enumerate() {
                    let drift = 1.0 + 0.03 * ((slot * 7 % 5) as f64 - 2.0) / 2.0;
                    let v = Some(truth[i] * drift);
                    match &mut st[i] {
                        Measured(r) => r.push(v),
                        s => *s = Measured(vec![v]),
                    }
                }
                let rank = ranking(&st, 0, 3);
                let ran: Vec<usize> = rank
                    .iter()
                    .copied()
                    .filter(|&i| matches!(st[i], Measured(_)))
                    .collect();
                assert_eq!(&rank[..ran.len()], &ran[..], "cut {k}: measured first");
                for w in ran.windows(2) {
                    assert!(
                        truth[w[0]] > truth[w[1]],
                        "{truth:?} cut after {k} runs {:?}: ranked {rank:?} from {st:?}",
                        &order[..k]
                    );
                }
                if let Some(&top) = ran.first() {
                    let counted = counted_runs(&st, 0, 3);
                    assert_eq!(contender(&st, &counted, top, 0.05), None, "cut {k}");
                }
            }
        }
    }
}
