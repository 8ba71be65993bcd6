//! Capacity search (pure): the highest open-loop Poisson request rate whose SLO attainment stays
//! at or above a target, found with a bounded number of probe runs.
//!
//! The caller measures; this module only decides which rate to probe next and what the answer is.
//! [`find`] (its own file, the one with I/O) is that caller for a running server.
//!
//! * **Start**: a closed-loop saturation rate `R` (what the server completes per second when kept
//!   busy) bounds the search: an open loop above `R` builds a queue that grows for the whole
//!   run. The first probe is at `R × 1.25`. If it passes (a loose SLO over a short run can absorb
//!   a growing queue), the upper end doubles until a probe fails or the probes run out.
//! * **Bisection** between the highest passing and the lowest failing rate, arithmetic (the
//!   lower end starts at 0, where a geometric mean is undefined), until the bracket is narrower
//!   than `resolution` of its upper end or `max_probes` is spent.
//! * **Pass** means the run is valid (not stopped as saturated, not interrupted) and at least
//!   `target` of its finished requests met every SLO (`goodput.fraction`). A saturated run never
//!   passes: requests it did not send were not served within the SLO either.
//! * **Answer**: the highest passing rate, with the bracket `[pass, fail]` so the report can say
//!   how sharp it is; `None` when no probed rate passed (even the lowest).

use serde::{Deserialize, Serialize};

mod find;
pub use find::{CapacityRun, find};

/// One probe's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Offered rate (requests/s).
    pub rate: f64,
    /// Share of finished requests that met every SLO (0..=1); `None` when nothing finished.
    pub attainment: Option<f64>,
    /// The run was valid (not saturated, not interrupted, enough requests).
    pub valid: bool,
    /// Whether it counted as a pass.
    pub pass: bool,
}

/// Search settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// Required SLO attainment (e.g. 0.99).
    pub target: f64,
    /// Stop when `(fail − pass) / fail` is below this (e.g. 0.05).
    pub resolution: f64,
    /// Most probe runs.
    pub max_probes: u32,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            target: 0.99,
            resolution: 0.05,
            max_probes: 8,
        }
    }
}

/// Why a capacity search cannot start; the message names the flag or the measurement at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// `--attainment` outside (0, 1].
    #[error("--attainment {0}: must be a fraction in (0, 1]")]
    Attainment(f64),
    /// `--capacity-resolution` outside (0, 1).
    #[error("--capacity-resolution {0}: must be a fraction in (0, 1)")]
    Resolution(f64),
    /// `--max-probes 0`.
    #[error("--max-probes must be at least 1")]
    NoProbes,
    /// The closed-loop run completed nothing per second (or a non-finite rate).
    #[error("the saturation run completed {0} requests/s; cannot search below it")]
    NoSaturation(f64),
}

/// Why a search stops before its next probe (not an error: the answer is then final).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchDone {
    /// Every allowed probe ran.
    #[error("{0} probes spent")]
    ProbesSpent(u32),
    /// The pass/fail bracket is narrower than the resolution.
    #[error("bracket {lo:.3}–{hi:.3} requests/s is within {percent:.0} %")]
    Narrow {
        /// Highest passing rate.
        lo: f64,
        /// Lowest failing rate.
        hi: f64,
        /// The resolution, in percent.
        percent: f64,
    },
}

impl SearchSettings {
    /// Whether a measured run passes: valid, and at least `target` of its finished requests met
    /// the SLO (an unknown attainment never passes).
    pub fn passes(&self, attainment: Option<f64>, valid: bool) -> bool {
        valid && attainment.is_some_and(|a| a + 1e-12 >= self.target)
    }

    /// Check the settings.
    pub fn validate(&self) -> Result<(), SearchError> {
        if !(self.target > 0.0 && self.target <= 1.0) {
            return Err(SearchError::Attainment(self.target));
        }
        if !(self.resolution > 0.0 && self.resolution < 1.0) {
            return Err(SearchError::Resolution(self.resolution));
        }
        if self.max_probes == 0 {
            return Err(SearchError::NoProbes);
        }
        Ok(())
    }
}

/// The search state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacitySearch {
    /// Settings.
    pub settings: SearchSettings,
    /// Closed-loop saturation rate the search started from.
    pub saturation_rate: f64,
    /// Probes so far, in order.
    pub probes: Vec<Probe>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Highest passing rate (requests/s); `None` when no probe passed.
    pub requests_per_s: Option<f64>,
    /// Lowest failing rate above it; `None` when no probe failed.
    pub failing_rate: Option<f64>,
    /// Required attainment.
    pub target: f64,
    /// Closed-loop saturation rate.
    pub saturation_rate: f64,
    /// Every probe.
    pub probes: Vec<Probe>,
    /// Why the search stopped.
    pub stopped: String,
}

impl CapacitySearch {
    /// Start from a measured closed-loop saturation rate (must be positive and finite).
    pub fn new(saturation_rate: f64, settings: SearchSettings) -> Result<Self, SearchError> {
        settings.validate()?;
        if !(saturation_rate.is_finite() && saturation_rate > 0.0) {
            return Err(SearchError::NoSaturation(saturation_rate));
        }
        Ok(CapacitySearch {
            settings,
            saturation_rate,
            probes: Vec::new(),
        })
    }

    /// Decide whether a measured run passes (see [`SearchSettings::passes`]).
    pub fn passes(&self, attainment: Option<f64>, valid: bool) -> bool {
        self.settings.passes(attainment, valid)
    }

    /// Record a measured probe.
    pub fn record(&mut self, rate: f64, attainment: Option<f64>, valid: bool) {
        let pass = self.passes(attainment, valid);
        self.probes.push(Probe {
            rate,
            attainment,
            valid,
            pass,
        });
    }

    fn bracket(&self) -> (f64, Option<f64>) {
        let lo = self
            .probes
            .iter()
            .filter(|p| p.pass)
            .map(|p| p.rate)
            .fold(0.0, f64::max);
        let hi = self
            .probes
            .iter()
            .filter(|p| !p.pass && p.rate > lo)
            .map(|p| p.rate)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
        (lo, hi)
    }

    /// The next rate to probe, or why the search is done.
    pub fn next_rate(&self) -> Result<f64, SearchDone> {
        if self.probes.len() as u32 >= self.settings.max_probes {
            return Err(SearchDone::ProbesSpent(self.settings.max_probes));
        }
        let (lo, hi) = self.bracket();
        match hi {
            None if self.probes.is_empty() => Ok(self.saturation_rate * 1.25),
            // Everything probed so far passed: widen.
            None => Ok(lo * 2.0),
            Some(hi) => {
                if (hi - lo) / hi < self.settings.resolution {
                    return Err(SearchDone::Narrow {
                        lo,
                        hi,
                        percent: self.settings.resolution * 100.0,
                    });
                }
                Ok((lo + hi) / 2.0)
            }
        }
    }

    /// The answer so far.
    pub fn result(&self, stopped: impl Into<String>) -> Capacity {
        let (lo, hi) = self.bracket();
        Capacity {
            requests_per_s: (lo > 0.0).then_some(lo),
            failing_rate: hi,
            target: self.settings.target,
            saturation_rate: self.saturation_rate,
            probes: self.probes.clone(),
            stopped: stopped.into(),
        }
    }
}

/// Run a whole search with a measuring function, the one loop `bench --find-capacity` and `tune
/// --objective capacity` use. `measure(rate)` runs one probe and returns `Ok(Some((attainment,
/// valid)))`, `Ok(None)` when the user interrupted (the search ends there, "interrupted"), or
/// its own error, which ends the search and is returned.
pub fn search<E: From<SearchError>>(
    saturation_rate: f64,
    settings: SearchSettings,
    mut measure: impl FnMut(f64) -> Result<Option<(Option<f64>, bool)>, E>,
) -> Result<Capacity, E> {
    let mut s = CapacitySearch::new(saturation_rate, settings)?;
    loop {
        let rate = match s.next_rate() {
            Ok(r) => r,
            Err(why) => return Ok(s.result(why.to_string())),
        };
        match measure(rate)? {
            Some((att, valid)) => s.record(rate, att, valid),
            None => return Ok(s.result("interrupted")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that meets the SLO exactly below `cap` requests/s.
    type Measured = Result<Option<(Option<f64>, bool)>, SearchError>;

    fn step(cap: f64) -> impl FnMut(f64) -> Measured {
        move |r| Ok(Some((Some(if r <= cap { 1.0 } else { 0.5 }), true)))
    }

    #[test]
    fn finds_a_sharp_edge_within_resolution() {
        for cap in [3.0, 17.5, 40.0, 79.0] {
            // saturation measured near the capacity
            let c = search(cap * 1.1, SearchSettings::default(), step(cap)).unwrap();
            let got = c.requests_per_s.unwrap();
            assert!(got <= cap && got >= cap * 0.95, "cap {cap}: {got} {c:?}");
            assert!(c.failing_rate.unwrap() > cap);
            assert!(c.probes.len() <= 8);
        }
    }

    #[test]
    fn widens_when_everything_passes() {
        // saturation badly underestimated: capacity 4× higher
        let c = search(10.0, SearchSettings::default(), step(40.0)).unwrap();
        let got = c.requests_per_s.unwrap();
        assert!(got > 30.0 && got <= 40.0, "{c:?}");
    }

    #[test]
    fn nothing_passes_and_interruption() {
        let c = search(10.0, SearchSettings::default(), |_| -> Measured {
            Ok(Some((Some(0.0), true)))
        })
        .unwrap();
        assert_eq!(c.requests_per_s, None);
        assert_eq!(c.probes.len(), 8);
        assert!(c.probes.iter().all(|p| !p.pass));
        let c = search(10.0, SearchSettings::default(), |_| -> Measured {
            Ok(None)
        })
        .unwrap();
        assert_eq!(c.stopped, "interrupted");
        assert!(c.probes.is_empty());
        // A probe's own error ends the search and is returned as is.
        let mut calls = 0;
        let e = search(10.0, SearchSettings::default(), |_| -> Measured {
            calls += 1;
            Err(SearchError::NoProbes)
        })
        .unwrap_err();
        assert_eq!((e, calls), (SearchError::NoProbes, 1));
    }

    #[test]
    fn invalid_or_unknown_runs_never_pass() {
        let mut s = CapacitySearch::new(10.0, SearchSettings::default()).unwrap();
        assert!(!s.passes(Some(1.0), false));
        assert!(!s.passes(None, true));
        assert!(s.passes(Some(0.99), true));
        s.record(12.5, Some(1.0), false);
        assert_eq!(s.result("x").requests_per_s, None);
    }

    #[test]
    fn bad_settings() {
        let bad = |f: fn(&mut SearchSettings)| {
            let mut s = SearchSettings::default();
            f(&mut s);
            CapacitySearch::new(1.0, s).unwrap_err().to_string()
        };
        assert!(bad(|s| s.target = 0.0).contains("--attainment"));
        assert!(bad(|s| s.target = 1.5).contains("--attainment"));
        assert!(bad(|s| s.resolution = 0.0).contains("resolution"));
        assert!(bad(|s| s.max_probes = 0).contains("--max-probes"));
        assert!(
            CapacitySearch::new(0.0, SearchSettings::default())
                .unwrap_err()
                .to_string()
                .contains("saturation")
        );
        assert!(CapacitySearch::new(f64::NAN, SearchSettings::default()).is_err());
    }
}
