//! Capacity search against a running server (`bench --find-capacity`, `tune --objective
//! capacity`): a closed-loop saturation run, then open-loop Poisson probes chosen by the pure
//! [`super::search`]. Each probe is one ordinary bench run (network I/O).

use super::{Capacity, SearchSettings, search};
use crate::exec::StopReason;
use crate::record::RequestRecord;
use crate::result::{BenchResult, MachineSummary};
use crate::run::{BenchError, BenchPlan, ProgressFn, execute};
use crate::schedule::{Arrival, Schedule};

/// The search and every run it made.
#[derive(Debug)]
pub struct CapacityRun {
    /// The answer.
    pub capacity: Capacity,
    /// The saturation run.
    pub saturation: BenchResult,
    /// The probe runs, in order (the same order as `capacity.probes`).
    pub probes: Vec<BenchResult>,
    /// Records of the highest passing probe (for traces and comparisons).
    pub best_records: Vec<RequestRecord>,
    /// Index in `probes` of the highest passing probe.
    pub best: Option<usize>,
    /// Interrupted by Ctrl-C.
    pub interrupted: bool,
}

/// Run the search. `plan.schedule` must be the closed loop that measures saturation;
/// `plan.slo` must be set. `machine` is recorded in every run's result, as `bench` does.
pub fn find(
    plan: &BenchPlan,
    settings: SearchSettings,
    machine: Option<MachineSummary>,
    progress: Option<ProgressFn>,
) -> Result<CapacityRun, BenchError> {
    if plan.slo.is_empty() {
        return Err(BenchError::Input(
            "--find-capacity needs --slo (e.g. ttft=500ms,tpot=50ms): capacity is the highest rate meeting it"
                .into(),
        ));
    }
    let sat = execute(plan, machine.clone(), progress.clone())?;
    let mut interrupted = sat.result.stop == StopReason::Interrupted;
    let mut probes = Vec::new();
    let mut best: Option<(usize, f64, Vec<RequestRecord>)> = None;
    let capacity = search(sat.result.stats.requests_per_s, settings, |rate| {
        if interrupted {
            return Ok(None);
        }
        let mut p = plan.clone();
        p.schedule = Schedule::Open {
            rate,
            arrival: Arrival::Poisson,
            seed: plan.seed,
        };
        let o = execute(&p, machine.clone(), progress.clone())?;
        if o.result.stop == StopReason::Interrupted {
            interrupted = true;
            return Ok(None);
        }
        let att = o.result.stats.goodput.map(|g| g.fraction);
        let valid = o.result.valid && !o.result.saturated;
        if settings.passes(att, valid) && best.as_ref().is_none_or(|b| rate > b.1) {
            best = Some((probes.len(), rate, o.records));
        }
        probes.push(o.result);
        Ok::<_, BenchError>(Some((att, valid)))
    })?;
    let (best, best_records) = match best {
        Some((i, _, r)) => (Some(i), r),
        None => (None, Vec::new()),
    };
    Ok(CapacityRun {
        capacity,
        saturation: sat.result,
        probes,
        best_records,
        best,
        interrupted,
    })
}
