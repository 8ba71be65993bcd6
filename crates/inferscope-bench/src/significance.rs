//! Is a difference between two runs real? Pure statistics behind `compare`'s verdict.
//!
//! * **The unit is the request.** Token gaps inside one request share its batch, its prompt and
//!   its slot, so they are strongly correlated; resampling gaps one by one makes intervals far
//!   too narrow. Every per-request metric (TTFT, TPOT, E2E) and the pooled ITL are therefore
//!   bootstrapped by resampling *requests* (a cluster bootstrap): ITL percentiles are recomputed
//!   over all gaps of the resampled requests. Closed-loop throughput replays the resampled
//!   requests through the run's concurrency slots (tokens / makespan), so the drain at the end of
//!   a run varies as it does between real runs; open-loop throughput is set by the schedule and
//!   is judged only between repeated runs. The error rate resamples the failed flags.
//! * **Normal intervals from the bootstrap's standard error**, not bootstrap percentiles: the
//!   verdict needs far tails (see Bonferroni below) that 200 resamples cannot give directly.
//! * **Between-run variance** when both sides have repeated runs (`bench --repeat K`): the mean
//!   of the K per-run values, Welch's standard error and Student-t critical values. That is the
//!   honest error bar for drift from run to run (warm caches, thermal state, neighbours).
//! * **Tails are judged only where data supports them**: a percentile needs at least
//!   [`MIN_TAIL_REQUESTS`] distinct requests with a sample above it in each run, counting at most
//!   n · (1 − q) (see [`tail_support`]); otherwise it is inconclusive and the number of requests
//!   that would suffice is given (a p99 needs 1,000).
//! * **Many thresholds, one false-alarm budget**: with m thresholded metrics each test is
//!   one-sided at α = 5 % / m (Bonferroni), so an unchanged server is called a regression at most
//!   about 5 % of the time whatever the number of thresholds.
//! * **Sizing**: the standard error shrinks as 1/√n, so the run size at which a worsening equal to
//!   the threshold would be significant with 80 % power is n · ((z_α + z_0.8) · SE / T)².

use crate::metric::Family;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;

/// Bootstrap resamples per side.
pub const RESAMPLES: usize = 200;
/// Distinct requests that must lie above a percentile, in each run, before it is judged.
pub const MIN_TAIL_REQUESTS: u64 = 10;
/// The family-wise false-alarm budget (one-sided).
pub const FAMILY_ALPHA: f64 = 0.05;
/// Power the sizing aims for.
pub const POWER: f64 = 0.8;
/// Gaps per request used for ITL (a longer request is thinned evenly, to bound the work).
const MAX_GAPS_PER_REQUEST: usize = 256;

/// What one measured request contributes (ms; `None` where undefined).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestSample {
    /// Time to first token.
    pub ttft: Option<f64>,
    /// Time per output token.
    pub tpot: Option<f64>,
    /// End-to-end latency (completed requests).
    pub e2e: Option<f64>,
    /// Inter-chunk gaps.
    pub gaps: Vec<f64>,
    /// Output tokens, when counted.
    pub tokens: Option<u64>,
    /// The request failed.
    pub failed: bool,
}

/// Statistics per family.
pub const FIELDS: [&str; 6] = ["mean", "p50", "p90", "p95", "p99", "p999"];

/// The quantile of a percentile field (`p99` -> 0.99); `None` for `mean` and unknown names.
pub fn quantile_of(field: &str) -> Option<f64> {
    match field {
        "p50" => Some(0.50),
        "p90" => Some(0.90),
        "p95" => Some(0.95),
        "p99" => Some(0.99),
        "p999" => Some(0.999),
        _ => None,
    }
}

/// Mean or nearest-rank percentile of a sorted sample.
pub fn sorted_statistic(field: &str, xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    if field == "mean" {
        return Some(xs.iter().sum::<f64>() / xs.len() as f64);
    }
    let q = quantile_of(field)?;
    let k = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    xs.get(k).copied()
}

fn family_values<'a>(reqs: impl Iterator<Item = &'a RequestSample>, fam: Family) -> Vec<f64> {
    let mut v: Vec<f64> = Vec::new();
    for r in reqs {
        match fam {
            Family::Ttft => v.extend(r.ttft),
            Family::Tpot => v.extend(r.tpot),
            Family::E2e => v.extend(r.e2e),
            Family::Itl => {
                let step = r.gaps.len().div_ceil(MAX_GAPS_PER_REQUEST).max(1);
                v.extend(r.gaps.iter().step_by(step));
            }
        }
    }
    v.sort_unstable_by(f64::total_cmp);
    v
}

/// Σ tokens / Σ E2E (tokens per ms of request time) of completed, counted requests.
fn token_ratio<'a>(reqs: impl Iterator<Item = &'a RequestSample>) -> Option<f64> {
    let (mut t, mut e) = (0u64, 0.0f64);
    for r in reqs {
        if let (Some(tok), Some(e2e)) = (r.tokens, r.e2e) {
            t += tok;
            e += e2e;
        }
    }
    (e > 0.0).then(|| t as f64 / e)
}

fn error_fraction<'a>(reqs: impl Iterator<Item = &'a RequestSample> + Clone) -> Option<f64> {
    let n = reqs.clone().count();
    (n > 0).then(|| reqs.filter(|r| r.failed).count() as f64 / n as f64)
}

/// Tokens per ms of a closed loop at `slots` concurrency replaying these requests in order:
/// each starts when a slot frees, so the drain at the end (the slowest slot) counts as it did in
/// the run. `None` without completed, counted requests.
fn replay_throughput<'a>(reqs: impl Iterator<Item = &'a RequestSample>, slots: u32) -> Option<f64> {
    let mut free = vec![0.0f64; slots.max(1) as usize];
    let mut tokens = 0u64;
    for r in reqs {
        let (Some(t), Some(e2e)) = (r.tokens, r.e2e) else {
            continue;
        };
        // The earliest-free slot takes the next request.
        if let Some(slot) = free.iter_mut().min_by(|a, b| a.total_cmp(b)) {
            *slot += e2e;
        }
        tokens += t;
    }
    let makespan = free.iter().copied().fold(0.0f64, f64::max);
    (makespan > 0.0).then(|| tokens as f64 / makespan)
}

/// Every latency statistic (`ttft_p50`, ...) plus `token_ratio`, `error_rate` and, for a closed
/// loop, `replay_throughput` of a set of requests.
fn all_statistics<'a>(
    reqs: impl Iterator<Item = &'a RequestSample> + Clone,
    slots: Option<u32>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for fam in Family::ALL {
        let v = family_values(reqs.clone(), fam);
        for f in FIELDS {
            if let Some(x) = sorted_statistic(f, &v) {
                out.insert(format!("{}_{f}", fam.name()), x);
            }
        }
    }
    if let Some(x) = token_ratio(reqs.clone()) {
        out.insert("token_ratio".into(), x);
    }
    if let Some(x) = slots.and_then(|c| replay_throughput(reqs.clone(), c)) {
        out.insert("replay_throughput".into(), x);
    }
    if let Some(x) = error_fraction(reqs) {
        out.insert("error_rate".into(), x);
    }
    out
}

/// Point statistics of one run's requests (same names as [`bootstrap_se`]); `slots` is the
/// closed loop's concurrency (`None` for an open loop).
pub fn statistics(reqs: &[RequestSample], slots: Option<u32>) -> BTreeMap<String, f64> {
    all_statistics(reqs.iter(), slots)
}

/// Cluster-bootstrap standard errors of every statistic of one run: requests are resampled
/// with replacement; `None`-valued statistics are left out. Needs at least 2 requests.
/// Throughput (closed loop, `slots` = concurrency) is resampled by replaying the resampled
/// requests through the slots, so the end-of-run drain varies as it does between runs.
pub fn bootstrap_se(
    reqs: &[RequestSample],
    slots: Option<u32>,
    seed: u64,
) -> BTreeMap<String, f64> {
    let n = reqs.len();
    if n < 2 {
        return BTreeMap::new();
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut acc: BTreeMap<String, (f64, f64, u64)> = BTreeMap::new();
    let mut pick: Vec<&RequestSample> = Vec::with_capacity(n);
    for _ in 0..RESAMPLES {
        pick.clear();
        for _ in 0..n {
            if let Some(r) = reqs.get(rng.random_range(0..n)) {
                pick.push(r);
            }
        }
        for (k, x) in all_statistics(pick.iter().copied(), slots) {
            let e = acc.entry(k).or_insert((0.0, 0.0, 0));
            e.0 += x;
            e.1 += x * x;
            e.2 += 1;
        }
    }
    acc.into_iter()
        .filter(|(_, (_, _, c))| *c >= 2)
        .map(|(k, (s, s2, c))| {
            let c = c as f64;
            let var = ((s2 - s * s / c) / (c - 1.0)).max(0.0);
            (k, var.sqrt())
        })
        .collect()
}

/// Distinct requests with a sample strictly above `value` in family `fam`.
pub fn requests_above(reqs: &[RequestSample], fam: Family, value: f64) -> u64 {
    reqs.iter()
        .filter(|r| match fam {
            Family::Ttft => r.ttft.is_some_and(|x| x > value),
            Family::Tpot => r.tpot.is_some_and(|x| x > value),
            Family::E2e => r.e2e.is_some_and(|x| x > value),
            Family::Itl => r.gaps.iter().any(|&x| x > value),
        })
        .count() as u64
}

/// Independent support of a percentile `field` at `value`: the distinct requests with a sample
/// above it, but never more than n · (1 − q). ITL gaps above a pooled p99 can come from many
/// requests at once when one stall (a scheduler hiccup, a long prefill in the batch) hits every
/// request in flight; those are one event, not many, so a request's share of the tail is the
/// most it can count for.
pub fn tail_support(reqs: &[RequestSample], fam: Family, field: &str, value: f64) -> u64 {
    let above = requests_above(reqs, fam, value);
    match quantile_of(field) {
        Some(q) => above.min((reqs.len() as f64 * (1.0 - q) + 1e-9).floor() as u64),
        None => above,
    }
}

/// Requests one run needs for percentile `q` to have [`MIN_TAIL_REQUESTS`] above it, given that
/// `above` of `n` requests are above it now.
pub fn requests_for_tail(q: f64, n: u64, above: u64) -> u64 {
    let floor = (MIN_TAIL_REQUESTS as f64 / (1.0 - q).max(1e-6)).ceil() as u64;
    if above == 0 {
        return floor.max(n + 1);
    }
    floor.max((n as f64 * MIN_TAIL_REQUESTS as f64 / above as f64).ceil() as u64)
}

/// Mean, sample variance and count of per-run values.
pub fn mean_var(xs: &[f64]) -> Option<(f64, f64, usize)> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let m = xs.iter().sum::<f64>() / n as f64;
    let v = if n > 1 {
        xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n as f64 - 1.0)
    } else {
        0.0
    };
    Some((m, v, n))
}

/// Welch's test on per-run values: (mean(cand) − mean(base), standard error, degrees of
/// freedom). `None` unless both sides have ≥ 2 runs.
pub fn welch(base: &[f64], cand: &[f64]) -> Option<(f64, f64, f64)> {
    let (mb, vb, nb) = mean_var(base)?;
    let (mc, vc, nc) = mean_var(cand)?;
    if nb < 2 || nc < 2 {
        return None;
    }
    let (ab, ac) = (vb / nb as f64, vc / nc as f64);
    let se2 = ab + ac;
    let df = if se2 > 0.0 {
        se2 * se2 / (ab * ab / (nb as f64 - 1.0) + ac * ac / (nc as f64 - 1.0))
    } else {
        (nb + nc - 2) as f64
    };
    Some((mc - mb, se2.sqrt(), df.max(1.0)))
}

/// Standard normal upper-tail probability P(Z > z).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// z with P(Z > z) = p, for 0 < p < 1 (bisection on [`normal_sf`], |error| < 1e-9).
pub fn z_upper(p: f64) -> f64 {
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    let (mut lo, mut hi) = (-40.0f64, 40.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if normal_sf(mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Student-t upper quantile t with P(T_df > t) = p (Cornish–Fisher expansion in 1/df; within
/// about 1 % for df ≥ 3 at the tails used here, and conservative-side for smaller df).
pub fn t_upper(p: f64, df: f64) -> f64 {
    let z = z_upper(p);
    let df = df.max(1.0);
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * df)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * df * df * df)
}

/// Complementary error function (Numerical Recipes' erfcc, |error| < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(speed: f64, tokens: usize) -> RequestSample {
        RequestSample {
            ttft: Some(50.0 * speed),
            tpot: Some(10.0 * speed),
            e2e: Some(50.0 * speed + 10.0 * speed * tokens as f64),
            gaps: vec![10.0 * speed; tokens],
            tokens: Some(tokens as u64 + 1),
            failed: false,
        }
    }

    #[test]
    fn quantiles() {
        assert!((z_upper(0.05) - 1.644_854).abs() < 1e-5);
        assert!((z_upper(0.2) - 0.841_621).abs() < 1e-5);
        // t(0.95, 10) = 1.812, t(0.95, 4) = 2.132
        assert!((t_upper(0.05, 10.0) - 1.812).abs() < 0.01);
        assert!((t_upper(0.05, 4.0) - 2.132).abs() < 0.03);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
    }

    #[test]
    fn cluster_bootstrap_is_wider_than_gap_bootstrap_would_be() {
        // 100 requests, each with 50 identical gaps: only 100 independent values, so the ITL
        // mean's SE must be that of 100 values (≈ sd/10), not of 5000 (≈ sd/70).
        let reqs: Vec<RequestSample> = (0..100)
            .map(|i| req(0.5 + f64::from(i) / 100.0, 50))
            .collect();
        let speeds: Vec<f64> = (0..100).map(|i| 5.0 + f64::from(i) / 10.0).collect();
        let (_, var, _) = mean_var(&speeds).unwrap();
        let se = bootstrap_se(&reqs, None, 7)["itl_mean"];
        let want = (var / 100.0).sqrt();
        assert!((se / want - 1.0).abs() < 0.25, "se {se} want {want}");
    }

    #[test]
    fn tails_count_requests_above() {
        let reqs: Vec<RequestSample> = (0..96).map(|i| req(1.0 + f64::from(i) / 96.0, 8)).collect();
        let s = statistics(&reqs, Some(8));
        assert!(s["replay_throughput"] > 0.0);
        let p99 = s["tpot_p99"];
        assert!(requests_above(&reqs, Family::Tpot, p99) < MIN_TAIL_REQUESTS);
        assert_eq!(requests_for_tail(0.99, 96, 0), 1000);
        assert_eq!(requests_for_tail(0.5, 96, 48), 20);
        let p50 = s["itl_p50"];
        assert_eq!(requests_above(&reqs, Family::Itl, p50), 48);
        // Every request has a gap above this value, but a p90 of 96 requests counts for 9.
        assert_eq!(requests_above(&reqs, Family::Itl, 0.0), 96);
        assert_eq!(tail_support(&reqs, Family::Itl, "p90", 0.0), 9);
    }

    #[test]
    fn welch_matches_hand_computation() {
        let (d, se, df) = welch(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0]).unwrap();
        assert_eq!(d, 1.0);
        assert!((se - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((df - 4.0).abs() < 1e-9);
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
    }
}
