//! Detectors over sampled series (pure; the samples come from `inferscope watch`).
//!
//! * [`trend`]: leak/creep. An ordinary least-squares line through (seconds, bytes) gives the
//!   slope, its standard error and t statistic, and R². Two checks keep a one-off step (model
//!   load, allocator cache warming) from reading as a leak: the slope of the **last third** must
//!   still be at least half the overall slope, and R² must be high. The Wald–Wolfowitz runs test
//!   on the residual signs is reported (`runs_z`): a line through a step leaves long runs of
//!   same-signed residuals (z ≪ 0), steady growth leaves them mixed.
//! * [`remote_drift`]: the share of a process's resident pages on NUMA nodes other than those
//!   its threads ran on, rising over the watch.
//! * [`pcie_saturation`]: PCIe throughput against the link's capacity.

use serde::Serialize;

/// Fewest samples a trend is judged on.
pub const MIN_SAMPLES: usize = 6;
/// Least growth over the watch (bytes) called a leak, whatever the statistics say.
pub const MIN_GROWTH_BYTES: f64 = 16.0 * 1024.0 * 1024.0;
/// Least t statistic of the slope for growth to count as real.
pub const MIN_T: f64 = 5.0;
/// Least R² for steady growth.
pub const MIN_R2: f64 = 0.8;
/// The last third's slope must be at least this share of the overall slope.
pub const MIN_LATE_SLOPE_SHARE: f64 = 0.5;

/// Shape of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrendVerdict {
    /// Grows steadily until the end: a leak or creep.
    SteadyGrowth,
    /// Grew, then levelled off (a step or a warming cache).
    Plateau,
    /// No growth worth the name.
    Stable,
    /// Shrinks.
    Shrinking,
    /// Too few samples.
    InsufficientData,
}

impl TrendVerdict {
    /// Stable name (`steady_growth`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TrendVerdict::SteadyGrowth => "steady_growth",
            TrendVerdict::Plateau => "plateau",
            TrendVerdict::Stable => "stable",
            TrendVerdict::Shrinking => "shrinking",
            TrendVerdict::InsufficientData => "insufficient_data",
        }
    }
}

/// A fitted series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trend {
    /// Samples used.
    pub samples: usize,
    /// Seconds covered.
    pub span_s: f64,
    /// Fitted slope, bytes per second.
    pub slope_bytes_per_s: f64,
    /// Fitted growth over the span (slope × span).
    pub growth_bytes: f64,
    /// Coefficient of determination.
    pub r_squared: f64,
    /// Slope / its standard error (large = certain; infinite for a perfect line).
    pub t_stat: f64,
    /// Slope of the last third of the samples, bytes per second.
    pub late_slope_bytes_per_s: f64,
    /// Runs-test z score of the residual signs (≪ 0: the line misses a step or a curve).
    pub runs_z: f64,
    /// The verdict.
    pub verdict: TrendVerdict,
    /// 0–1: R² × min(1, samples / 20) for steady growth, else 0.
    pub confidence: f64,
}

fn fit(points: &[(f64, f64)]) -> (f64, f64, f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return (0.0, my, 0.0, 0.0);
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let sse: f64 = points
        .iter()
        .map(|p| (p.1 - (intercept + slope * p.0)).powi(2))
        .sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 0.0 };
    let se = if n > 2.0 {
        (sse / (n - 2.0) / sxx).sqrt()
    } else {
        f64::INFINITY
    };
    let t = if se > 0.0 {
        slope / se
    } else if slope != 0.0 {
        f64::INFINITY.copysign(slope)
    } else {
        0.0
    };
    (slope, intercept, r2, t)
}

fn runs_z(points: &[(f64, f64)], slope: f64, intercept: f64) -> f64 {
    let signs: Vec<bool> = points
        .iter()
        .map(|p| p.1 - (intercept + slope * p.0))
        .filter(|r| *r != 0.0)
        .map(|r| r > 0.0)
        .collect();
    let n1 = signs.iter().filter(|s| **s).count() as f64;
    let n2 = signs.len() as f64 - n1;
    if n1 == 0.0 || n2 == 0.0 {
        return 0.0;
    }
    let runs = 1 + signs
        .windows(2)
        .filter(|w| matches!(w, [a, b] if a != b))
        .count();
    let n = n1 + n2;
    let mean = 2.0 * n1 * n2 / n + 1.0;
    let var = 2.0 * n1 * n2 * (2.0 * n1 * n2 - n) / (n * n * (n - 1.0));
    if var <= 0.0 {
        0.0
    } else {
        (runs as f64 - mean) / var.sqrt()
    }
}

/// Judge a series of (seconds, bytes) points, in time order.
pub fn trend(points: &[(f64, f64)]) -> Trend {
    let points: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    let n = points.len();
    let span = match (points.first(), points.last()) {
        (Some(a), Some(b)) => b.0 - a.0,
        _ => 0.0,
    };
    let mut t = Trend {
        samples: n,
        span_s: span,
        slope_bytes_per_s: 0.0,
        growth_bytes: 0.0,
        r_squared: 0.0,
        t_stat: 0.0,
        late_slope_bytes_per_s: 0.0,
        runs_z: 0.0,
        verdict: TrendVerdict::InsufficientData,
        confidence: 0.0,
    };
    if n < MIN_SAMPLES || span <= 0.0 {
        return t;
    }
    let (slope, intercept, r2, tstat) = fit(&points);
    let late = points.get(n - n / 3..).unwrap_or(&[]);
    let (late_slope, ..) = fit(late);
    t.slope_bytes_per_s = slope;
    t.growth_bytes = slope * span;
    t.r_squared = r2;
    t.t_stat = tstat;
    t.late_slope_bytes_per_s = late_slope;
    t.runs_z = runs_z(&points, slope, intercept);
    let significant = tstat.abs() >= MIN_T && t.growth_bytes.abs() >= MIN_GROWTH_BYTES;
    t.verdict = if !significant {
        TrendVerdict::Stable
    } else if slope < 0.0 {
        TrendVerdict::Shrinking
    } else if late_slope >= MIN_LATE_SLOPE_SHARE * slope && r2 >= MIN_R2 {
        TrendVerdict::SteadyGrowth
    } else {
        TrendVerdict::Plateau
    };
    if t.verdict == TrendVerdict::SteadyGrowth {
        t.confidence = (r2 * (n as f64 / 20.0).min(1.0)).clamp(0.0, 1.0);
    }
    t
}

/// Remote-node page drift of one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// Share of resident bytes on remote nodes in the first sample (0–1).
    pub first_remote_share: f64,
    /// In the last sample.
    pub last_remote_share: f64,
    /// Fitted change of the share per hour.
    pub share_slope_per_hour: f64,
    /// Pages drift to remote nodes: the share rose by at least 5 points with t ≥ 5.
    pub drifting: bool,
}

/// Least rise of the remote share (0–1) called drift.
pub const MIN_DRIFT_SHARE: f64 = 0.05;

/// Judge (seconds, remote share 0–1) points.
pub fn remote_drift(points: &[(f64, f64)]) -> Option<Drift> {
    let (first, last) = (points.first()?, points.last()?);
    let n = points.len();
    let (slope, _, _, tstat) = if n >= 3 {
        fit(points)
    } else {
        (0.0, 0.0, 0.0, 0.0)
    };
    let rise = last.1 - first.1;
    Some(Drift {
        first_remote_share: first.1,
        last_remote_share: last.1,
        share_slope_per_hour: slope * 3600.0,
        drifting: n >= MIN_SAMPLES && rise >= MIN_DRIFT_SHARE && tstat >= MIN_T,
    })
}

/// Usable PCIe bandwidth per lane and direction, bytes/s, after line encoding
/// (8b/10b for gen 1–2, 128b/130b for 3–5, FLIT for 6).
pub fn pcie_lane_bytes_per_s(generation: u32) -> Option<f64> {
    Some(match generation {
        1 => 250e6,
        2 => 500e6,
        3 => 984.6e6,
        4 => 1969.2e6,
        5 => 3938.5e6,
        6 => 7563.0e6,
        _ => return None,
    })
}

/// Share of link capacity at or above which a sample counts as saturated.
pub const SATURATION_SHARE: f64 = 0.8;

/// PCIe saturation of one GPU over the watch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Saturation {
    /// Highest share of capacity seen (either direction).
    pub max_share: f64,
    /// Samples at or above [`SATURATION_SHARE`].
    pub saturated_samples: usize,
    /// Samples judged.
    pub samples: usize,
    /// At least 3 consecutive saturated samples, or half of them.
    pub saturated: bool,
}

/// Judge (tx, rx, capacity) bytes/s per sample.
pub fn pcie_saturation(samples: &[(f64, f64, f64)]) -> Option<Saturation> {
    let shares: Vec<f64> = samples
        .iter()
        .filter(|s| s.2 > 0.0)
        .map(|s| s.0.max(s.1) / s.2)
        .collect();
    if shares.is_empty() {
        return None;
    }
    let hot: Vec<bool> = shares.iter().map(|s| *s >= SATURATION_SHARE).collect();
    let mut run = 0;
    let mut best = 0;
    for h in &hot {
        run = if *h { run + 1 } else { 0 };
        best = best.max(run);
    }
    let count = hot.iter().filter(|h| **h).count();
    Some(Saturation {
        max_share: shares.iter().copied().fold(0.0, f64::max),
        saturated_samples: count,
        samples: shares.len(),
        saturated: best >= 3 || count * 2 >= shares.len() && count > 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1024.0 * 1024.0;

    fn series(f: impl Fn(f64) -> f64, n: usize) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let t = i as f64 * 0.1;
                // Deterministic jitter of ±1 MiB.
                let jitter = ((i * 7919) % 13) as f64 / 6.0 - 1.0;
                (t, f(t) + jitter * MIB)
            })
            .collect()
    }

    #[test]
    fn steady_growth_is_a_leak() {
        let t = trend(&series(|t| 100.0 * MIB + 50.0 * MIB * t, 30));
        assert_eq!(t.verdict, TrendVerdict::SteadyGrowth, "{t:?}");
        assert!(t.confidence > 0.9);
        assert!((t.slope_bytes_per_s / MIB - 50.0).abs() < 2.0);
    }

    #[test]
    fn step_then_flat_is_not() {
        let t = trend(&series(
            |t| if t < 0.35 { 10.0 * MIB } else { 160.0 * MIB },
            30,
        ));
        assert_ne!(t.verdict, TrendVerdict::SteadyGrowth, "{t:?}");
        assert!(t.runs_z < -2.0, "{t:?}");
        let flat = trend(&series(|_| 160.0 * MIB, 30));
        assert_eq!(flat.verdict, TrendVerdict::Stable, "{flat:?}");
    }

    #[test]
    fn warming_cache_is_a_plateau() {
        let t = trend(&series(|t| 500.0 * MIB * (1.0 - (-t * 2.0).exp()), 40));
        assert_eq!(t.verdict, TrendVerdict::Plateau, "{t:?}");
    }

    #[test]
    fn too_short_and_degenerate() {
        assert_eq!(trend(&[]).verdict, TrendVerdict::InsufficientData);
        let same_time: Vec<_> = (0..10).map(|i| (1.0, i as f64)).collect();
        assert_eq!(trend(&same_time).verdict, TrendVerdict::InsufficientData);
        let nan: Vec<_> = (0..10).map(|i| (i as f64, f64::NAN)).collect();
        assert_eq!(trend(&nan).verdict, TrendVerdict::InsufficientData);
    }

    #[test]
    fn drift_and_saturation() {
        let pts: Vec<_> = (0..10).map(|i| (i as f64, 0.01 * i as f64)).collect();
        assert!(remote_drift(&pts).unwrap().drifting);
        let flat: Vec<_> = (0..10).map(|i| (i as f64, 0.3)).collect();
        assert!(!remote_drift(&flat).unwrap().drifting);
        let cap = 16.0 * pcie_lane_bytes_per_s(4).unwrap();
        let s = pcie_saturation(&[(0.9 * cap, 0.0, cap); 4]).unwrap();
        assert!(s.saturated);
        let s = pcie_saturation(&[(0.1 * cap, 0.2 * cap, cap); 4]).unwrap();
        assert!(!s.saturated);
        assert!(pcie_saturation(&[]).is_none());
    }
}
