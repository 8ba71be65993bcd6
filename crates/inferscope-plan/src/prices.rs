//! `plan --prices FILE`: what a GPU-hour costs, per catalog GPU, so `plan --find` can rank by
//! cost. The file is the user's (prices move weekly and differ per provider); inferscope ships
//! only an example (docs/prices.example.csv), never prices as truth.
//!
//! Format: CSV, one `GPU,USD_PER_GPU_HOUR` per line; `#` starts a comment; an optional header
//! line `gpu,usd_per_gpu_hour`. GPU names are anything `--gpu` accepts (catalog names and
//! aliases: `H100 SXM`, `h100-sxm`, `L40S`).

use std::collections::BTreeMap;

/// Price per GPU-hour by canonical catalog name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    /// Canonical GPU name → USD per GPU-hour.
    pub usd_per_gpu_hour: BTreeMap<String, f64>,
}

/// A line the price file cannot use (1-based line number).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct PriceError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parse a price file's text; every GPU name must be in the catalog, each named once.
pub fn parse(text: &str) -> Result<Prices, PriceError> {
    let mut out = Prices::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let fail = |message: String| PriceError { line, message };
        let l = raw.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let Some((name, price)) = l.split_once(',') else {
            return Err(fail(format!(
                "{l:?}: expected GPU,USD_PER_GPU_HOUR (e.g. H100 SXM,2.99)"
            )));
        };
        let (name, price) = (name.trim().trim_matches('"'), price.trim());
        if name.eq_ignore_ascii_case("gpu") {
            continue; // the header
        }
        let usd: f64 = price
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p > 0.0)
            .ok_or_else(|| {
                fail(format!(
                    "{price:?}: expected a positive price in USD per GPU-hour"
                ))
            })?;
        let gpu = crate::gpus::lookup(name).map_err(|e| fail(e.to_string()))?;
        if out.usd_per_gpu_hour.insert(gpu.name.clone(), usd).is_some() {
            return Err(fail(format!("{} is priced twice", gpu.name)));
        }
    }
    if out.usd_per_gpu_hour.is_empty() {
        return Err(PriceError {
            line: 0,
            message: "no prices (expected lines GPU,USD_PER_GPU_HOUR)".into(),
        });
    }
    Ok(out)
}

/// Dollars per hour for `count` GPUs and per million output tokens at `tokens_per_s`
/// aggregate decode throughput (None when the throughput is unknown or zero).
pub fn cost(usd_per_gpu_hour: f64, count: u32, tokens_per_s: Option<f64>) -> (f64, Option<f64>) {
    let per_hour = usd_per_gpu_hour * f64::from(count);
    let per_million = tokens_per_s
        .filter(|t| *t > 0.0 && t.is_finite())
        .map(|t| per_hour / (t * 3600.0) * 1e6);
    (per_hour, per_million)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_through_the_catalog_and_errors_name_the_line() {
        let p = parse("# example\ngpu,usd_per_gpu_hour\nh100-sxm, 2.5\nL40S,1 # spot\n").unwrap();
        assert_eq!(p.usd_per_gpu_hour["H100 SXM"], 2.5);
        assert_eq!(p.usd_per_gpu_hour["L40S"], 1.0);
        for (text, line, msg) in [
            ("L40S,abc", 1, "expected a positive price"),
            ("\nL40S,-1", 2, "expected a positive price"),
            ("L40S 1.0", 1, "expected GPU,USD_PER_GPU_HOUR"),
            ("L40S,1\nl40s,2", 2, "priced twice"),
            ("Voodoo 5,1", 1, "Voodoo"),
            ("# nothing\n", 0, "no prices"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn cost_per_million_tokens_follows_the_throughput() {
        // 2 GPUs at $2/h = $4/h; 1000 tok/s = 3.6 M tok/h -> $1.11 per million.
        let (h, m) = cost(2.0, 2, Some(1000.0));
        assert_eq!(h, 4.0);
        assert!((m.unwrap() - 4.0 / 3.6).abs() < 1e-9);
        assert_eq!(cost(2.0, 1, Some(0.0)).1, None);
    }
}
