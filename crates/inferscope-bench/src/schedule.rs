//! When each request is *meant* to be sent: pure, seeded, no clock.
//!
//! One schedule drives every mode (oha's habit: one send loop, not one copy per mode):
//!
//! * **Closed loop** (`--concurrency N`): N workers, each sends its next request as soon as its
//!   previous one ends. The intended send time of a request is the end of the previous request on
//!   that worker, so latency can never hide client-side delay.
//! * **Open loop** (`--rate R`): arrivals at absolute offsets from the start of the run, whatever
//!   the server does. Gaps are constant (`1/R`), exponential (Poisson process, `Exp(R)`), or gamma
//!   with shape `k` and mean `1/R` (`k < 1` is burstier than Poisson, `k > 1` smoother). Latency is
//!   measured from the intended time, not from the moment the client managed to send: that is what
//!   avoids coordinated omission when the client or the server falls behind.
//! * **Sweep** (`--sweep N`): a closed-loop step at the configured concurrency finds the saturation
//!   throughput; [`sweep_rates`] then plans N open-loop steps evenly below it.
//!
//! Arrival times are generated from a seeded xoshiro256++ (a documented algorithm, so a seed
//! reproduces the same arrivals across rand releases) as absolute offsets accumulated in f64
//! seconds and rounded to nanoseconds once, so rounding never accumulates.

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Exp, Gamma};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// How inter-arrival gaps are drawn in an open loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Arrival {
    /// Every gap is exactly `1/rate`.
    Constant,
    /// Exponential gaps with mean `1/rate` (a Poisson process).
    Poisson,
    /// Gamma gaps with the given shape and mean `1/rate`; shape 1 is Poisson.
    Gamma {
        /// Shape parameter `k` (> 0). Coefficient of variation of the gaps is `1/sqrt(k)`.
        shape: f64,
    },
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Constant => f.write_str("constant"),
            Arrival::Poisson => f.write_str("poisson"),
            Arrival::Gamma { shape } => write!(f, "gamma:{shape}"),
        }
    }
}

/// Why an `--arrival` value cannot be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrivalError {
    /// Not poisson, constant or gamma:SHAPE.
    #[error("unknown arrival `{0}`: expected poisson, constant or gamma:SHAPE")]
    Unknown(String),
    /// The gamma shape is not a number.
    #[error("gamma shape `{0}` is not a number")]
    ShapeNotANumber(String),
    /// The gamma shape is not a finite positive number.
    #[error("gamma shape must be > 0, got {0}")]
    ShapeNotPositive(f64),
}

impl std::str::FromStr for Arrival {
    type Err = ArrivalError;
    fn from_str(s: &str) -> Result<Self, ArrivalError> {
        match s.trim() {
            "constant" => Ok(Arrival::Constant),
            "poisson" => Ok(Arrival::Poisson),
            other => {
                let Some(shape) = other.strip_prefix("gamma:") else {
                    return Err(ArrivalError::Unknown(other.into()));
                };
                let shape: f64 = shape
                    .parse()
                    .map_err(|_| ArrivalError::ShapeNotANumber(shape.into()))?;
                if !(shape.is_finite() && shape > 0.0) {
                    return Err(ArrivalError::ShapeNotPositive(shape));
                }
                Ok(Arrival::Gamma { shape })
            }
        }
    }
}

/// The load pattern of one run (or one sweep step).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Schedule {
    /// A fixed number of requests in flight.
    Closed {
        /// Requests in flight at all times.
        concurrency: u32,
    },
    /// Arrivals at a rate, independent of responses.
    Open {
        /// Mean arrivals per second.
        rate: f64,
        /// Gap distribution.
        arrival: Arrival,
        /// Seed of the gap generator.
        seed: u64,
    },
}

/// Why a schedule cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// Concurrency 0.
    #[error("concurrency must be at least 1")]
    ZeroConcurrency,
    /// Rate not finite and positive.
    #[error("rate must be a positive number of requests per second, got {0}")]
    BadRate(f64),
    /// Gamma shape not finite and positive.
    #[error("gamma shape must be > 0, got {0}")]
    BadShape(f64),
}

impl Schedule {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), ScheduleError> {
        match *self {
            Schedule::Closed { concurrency: 0 } => Err(ScheduleError::ZeroConcurrency),
            Schedule::Closed { .. } => Ok(()),
            Schedule::Open { rate, arrival, .. } => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(ScheduleError::BadRate(rate));
                }
                if let Arrival::Gamma { shape } = arrival
                    && !(shape.is_finite() && shape > 0.0)
                {
                    return Err(ScheduleError::BadShape(shape));
                }
                Ok(())
            }
        }
    }

    /// An arrival generator for an open loop; `None` for a closed loop.
    pub fn arrivals(&self) -> Option<Result<Arrivals, ScheduleError>> {
        match *self {
            Schedule::Closed { .. } => None,
            Schedule::Open {
                rate,
                arrival,
                seed,
            } => Some(Arrivals::new(rate, arrival, seed)),
        }
    }
}

#[derive(Debug, Clone)]
enum Gap {
    Constant(f64),
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
}

/// Endless iterator of intended send offsets from the start of the run (the first arrival is at
/// zero), for an open loop.
#[derive(Debug, Clone)]
pub struct Arrivals {
    rng: Xoshiro256PlusPlus,
    gap: Gap,
    next_s: f64,
}

impl Arrivals {
    /// Arrivals at `rate` per second with the given gap distribution and seed.
    pub fn new(rate: f64, arrival: Arrival, seed: u64) -> Result<Self, ScheduleError> {
        Schedule::Open {
            rate,
            arrival,
            seed,
        }
        .validate()?;
        let gap = match arrival {
            Arrival::Constant => Gap::Constant(1.0 / rate),
            Arrival::Poisson => Gap::Exp(Exp::new(rate).map_err(|_| ScheduleError::BadRate(rate))?),
            Arrival::Gamma { shape } => Gap::Gamma(
                // mean = shape * scale = 1/rate
                Gamma::new(shape, 1.0 / (rate * shape))
                    .map_err(|_| ScheduleError::BadShape(shape))?,
            ),
        };
        Ok(Arrivals {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            gap,
            next_s: 0.0,
        })
    }
}

impl Iterator for Arrivals {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let at = self.next_s;
        let g = match &self.gap {
            Gap::Constant(g) => *g,
            Gap::Exp(d) => d.sample(&mut self.rng),
            Gap::Gamma(d) => d.sample(&mut self.rng),
        };
        // Saturate rather than panic: Duration::from_secs_f64 panics on overflow.
        self.next_s = (self.next_s + g).min(1.0e9);
        Some(Duration::from_secs_f64(at.clamp(0.0, 1.0e9)))
    }
}

/// Rates of the open-loop steps of a sweep below a measured saturation rate: `steps` rates
/// evenly spaced at `k/(steps+1)` of `saturation_rate`, lowest first. Empty when the saturation
/// rate is not positive or `steps` is 0.
pub fn sweep_rates(saturation_rate: f64, steps: u32) -> Vec<f64> {
    if !(saturation_rate.is_finite() && saturation_rate > 0.0) {
        return Vec::new();
    }
    (1..=steps)
        .map(|k| saturation_rate * f64::from(k) / f64::from(steps + 1))
        .collect()
}

/// When sending stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Measured requests to send (after warm-up), if bounded by count.
    pub requests: Option<u64>,
    /// Measured sending time (after warm-up), if bounded by time.
    pub duration: Option<Duration>,
}

/// Warm-up before measuring: a time or a number of requests, sent with the same schedule and
/// excluded from the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Warmup {
    /// No warm-up.
    None,
    /// Requests whose intended send time falls in the first D of the run.
    Duration(#[serde(with = "crate::record::duration_ms")] Duration),
    /// The first N requests.
    Requests(u64),
}

impl std::str::FromStr for Warmup {
    type Err = crate::DurationError;
    /// `--warmup`'s value: a whole number of requests (`20`; `0` is none) or a duration (`5s`).
    fn from_str(s: &str) -> Result<Self, crate::DurationError> {
        match s.trim().parse::<u64>() {
            Ok(0) => Ok(Warmup::None),
            Ok(n) => Ok(Warmup::Requests(n)),
            Err(_) => crate::parse_duration(s).map(Warmup::Duration),
        }
    }
}

impl Warmup {
    /// Is the request with this sequence number and intended offset part of the warm-up?
    pub fn covers(&self, seq: u64, intended: Duration) -> bool {
        match *self {
            Warmup::None => false,
            Warmup::Duration(d) => intended < d,
            Warmup::Requests(n) => seq < n,
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn warmup_is_a_request_count_or_a_duration() {
        assert_eq!("0".parse::<Warmup>(), Ok(Warmup::None));
        assert_eq!("20".parse::<Warmup>(), Ok(Warmup::Requests(20)));
        assert_eq!(
            "2s".parse::<Warmup>(),
            Ok(Warmup::Duration(Duration::from_secs(2)))
        );
        assert!("5 parsecs".parse::<Warmup>().is_err());
    }

    use super::*;

    #[test]
    fn constant_gaps_are_exact() {
        let a: Vec<_> = Arrivals::new(4.0, Arrival::Constant, 1)
            .unwrap()
            .take(5)
            .collect();
        let ms: Vec<u128> = a.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, vec![0, 250, 500, 750, 1000]);
    }

    #[test]
    fn same_seed_same_arrivals_other_seed_differs() {
        let a: Vec<_> = Arrivals::new(100.0, Arrival::Poisson, 7)
            .unwrap()
            .take(50)
            .collect();
        let b: Vec<_> = Arrivals::new(100.0, Arrival::Poisson, 7)
            .unwrap()
            .take(50)
            .collect();
        let c: Vec<_> = Arrivals::new(100.0, Arrival::Poisson, 8)
            .unwrap()
            .take(50)
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn gamma_mean_matches_rate_and_burstiness_follows_shape() {
        for shape in [0.25, 1.0, 4.0] {
            let n = 20_000;
            let a: Vec<f64> = Arrivals::new(50.0, Arrival::Gamma { shape }, 3)
                .unwrap()
                .take(n + 1)
                .map(|d| d.as_secs_f64())
                .collect();
            let gaps: Vec<f64> = a.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            let cv = var.sqrt() / mean;
            assert!(
                (mean - 0.02).abs() < 0.02 * 0.05,
                "shape {shape}: mean {mean}"
            );
            let want = 1.0 / shape.sqrt();
            assert!(
                (cv - want).abs() < want * 0.1,
                "shape {shape}: cv {cv} want {want}"
            );
        }
    }

    #[test]
    fn parse_arrival() {
        assert_eq!("poisson".parse::<Arrival>(), Ok(Arrival::Poisson));
        assert_eq!(
            "gamma:0.5".parse::<Arrival>(),
            Ok(Arrival::Gamma { shape: 0.5 })
        );
        assert!("gamma:0".parse::<Arrival>().is_err());
        assert!("gamma:x".parse::<Arrival>().is_err());
        assert!("uniform".parse::<Arrival>().is_err());
    }

    #[test]
    fn invalid_schedules_are_rejected_not_panicking() {
        assert!(Arrivals::new(0.0, Arrival::Poisson, 1).is_err());
        assert!(Arrivals::new(f64::NAN, Arrival::Constant, 1).is_err());
        assert!(Arrivals::new(f64::INFINITY, Arrival::Constant, 1).is_err());
        assert!(Arrivals::new(1.0, Arrival::Gamma { shape: -1.0 }, 1).is_err());
        assert_eq!(
            Schedule::Closed { concurrency: 0 }.validate(),
            Err(ScheduleError::ZeroConcurrency)
        );
        // Tiny rates saturate instead of overflowing Duration.
        let mut a = Arrivals::new(1e-300, Arrival::Constant, 1).unwrap();
        a.next();
        assert!(a.next().is_some());
    }

    #[test]
    fn sweep_plan() {
        assert_eq!(sweep_rates(100.0, 4), vec![20.0, 40.0, 60.0, 80.0]);
        assert!(sweep_rates(0.0, 4).is_empty());
        assert!(sweep_rates(10.0, 0).is_empty());
    }

    #[test]
    fn warmup_coverage() {
        assert!(Warmup::Requests(2).covers(1, Duration::ZERO));
        assert!(!Warmup::Requests(2).covers(2, Duration::ZERO));
        assert!(Warmup::Duration(Duration::from_secs(1)).covers(99, Duration::from_millis(999)));
        assert!(!Warmup::None.covers(0, Duration::ZERO));
    }
}
