//! GPU016: the driver supports an older CUDA than the server's runtime needs.

use super::support::HOST;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::Reading;
use std::fmt;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU016",
    title: "Driver supports an older CUDA than the runtime needs",
    severity: Severity::Error,
    scope: Scope::Host,
    why: "A CUDA runtime newer than the driver fails at the first CUDA call (`CUDA driver version is insufficient for CUDA runtime version`, or a PyTorch warning that the driver is too old and `torch.cuda.is_available()` is False), and NVIDIA's container runtime refuses images whose `cuda>=` requirement the driver does not meet.",
    run,
};

/// NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" table (see the file's header).
const TABLE: &str = include_str!("../../data/cuda-driver-table.tsv");

/// A CUDA version, major.minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CudaVersion {
    major: u32,
    minor: u32,
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// `12.4`, `12.4.1`, `12` → major.minor; `None` if not a version.
pub(crate) fn parse_cuda(text: &str) -> Option<CudaVersion> {
    let mut it = text.trim().split('.');
    let major = it.next()?.parse().ok()?;
    let minor = match it.next() {
        Some(m) => m.parse().ok()?,
        None => 0,
    };
    Some(CudaVersion { major, minor })
}

/// A driver version (`550.90.07`) as numbers, padded to three parts for comparison.
fn parse_driver(text: &str) -> Option<[u32; 3]> {
    let mut out = [0u32; 3];
    let mut n = 0;
    for part in text.trim().split('.') {
        let slot = out.get_mut(n)?;
        *slot = part.parse().ok()?;
        n += 1;
    }
    (n > 0).then_some(out)
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
struct Row {
    /// Minimum driver, as numbers.
    driver: [u32; 3],
    /// Minimum driver, as written.
    driver_text: &'static str,
    /// CUDA version it brings.
    cuda: CudaVersion,
}

/// The table's rows in file order; a malformed row is an error naming its line.
fn table() -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, line) in TABLE.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = line.split('\t');
        let (Some(d), Some(c), None) = (cols.next(), cols.next(), cols.next()) else {
            return Err(format!(
                "cuda-driver-table.tsv line {}: expected two columns",
                i + 1
            ));
        };
        match (parse_driver(d), parse_cuda(c)) {
            (Some(driver), Some(cuda)) => rows.push(Row {
                driver,
                driver_text: d,
                cuda,
            }),
            _ => return Err(format!("cuda-driver-table.tsv line {}: {line:?}", i + 1)),
        }
    }
    Ok(rows)
}

/// The newest CUDA a driver version supports, from the table; `None` when the driver is older
/// than every row or does not parse.
pub(crate) fn max_cuda_for_driver(driver: &str) -> Option<CudaVersion> {
    let d = parse_driver(driver)?;
    table()
        .ok()?
        .into_iter()
        .filter(|r| r.driver <= d)
        .map(|r| r.cuda)
        .max()
}

/// The oldest driver the table lists for a CUDA version (or the next one listed above it).
fn min_driver_for(cuda: CudaVersion) -> Option<&'static str> {
    table()
        .ok()?
        .into_iter()
        .filter(|r| r.cuda >= cuda)
        .min_by_key(|r| r.driver)
        .map(|r| r.driver_text)
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let (required_text, source) = match (
        s.env.get("CUDA_VERSION"),
        &input.thresholds.required_cuda_version,
    ) {
        (Some(v), _) => (
            v.clone(),
            format!("CUDA_VERSION={v} in the captured environment"),
        ),
        (None, Some(v)) => (
            v.clone(),
            format!("thresholds.required_cuda_version = {v:?}"),
        ),
        (None, None) => {
            return vec![Outcome::unknown(
                HOST,
                "nothing says which CUDA the server needs (no CUDA_VERSION in the environment, as NVIDIA's CUDA images set it); set thresholds.required_cuda_version",
            )];
        }
    };
    let Some(required) = parse_cuda(&required_text) else {
        return vec![Outcome::unknown(
            HOST,
            format!("{source} is not a CUDA version like 12.4"),
        )];
    };
    let driver = match need(&s.driver, HOST, "NVIDIA driver (NVML)") {
        Ok(d) => d,
        Err(o) => return vec![o],
    };
    let from_nvml = driver
        .cuda_driver_version
        .known()
        .and_then(|v| parse_cuda(v));
    let (have, how) = match (from_nvml, &driver.driver_version) {
        (Some(v), _) => (
            v,
            format!("the driver reports CUDA {v} (nvmlSystemGetCudaDriverVersion)"),
        ),
        (None, Reading::Value(dv)) => match max_cuda_for_driver(dv) {
            Some(v) => (
                v,
                format!("driver {dv} supports CUDA up to {v} (NVIDIA's toolkit/driver table)"),
            ),
            None => {
                return vec![Outcome::unknown(
                    HOST,
                    format!(
                        "driver {dv} is older than CUDA 11.0's or not a version; the CUDA it supports is unknown"
                    ),
                )];
            }
        },
        (None, Reading::Unknown(u)) => {
            return vec![Outcome::from_unknown(
                HOST,
                "driver and CUDA driver version",
                u,
            )];
        }
    };
    let driver_text = driver
        .driver_version
        .known()
        .map_or(String::new(), |v| format!("driver {v}: "));
    let evidence = format!("{driver_text}{how}; the server needs CUDA {required} ({source})");
    if have >= required {
        return vec![Outcome::pass(HOST, evidence)];
    }
    let note = if have.major == required.major {
        format!(
            "; same major version, so CUDA minor version compatibility may run plain kernels, but PTX JIT and features newer than {have} fail, and NVIDIA's container runtime refuses images requiring cuda>={required}"
        )
    } else {
        "; a newer major version: the runtime will not initialise".to_string()
    };
    let upgrade = match min_driver_for(required) {
        Some(d) => format!(
            "Upgrade the NVIDIA driver to {d} or newer (CUDA {required}, per NVIDIA's table; e.g. `sudo apt install nvidia-driver-{}-server` or the data-center driver of that branch)",
            d.split('.').next().unwrap_or(d)
        ),
        None => format!("Upgrade the NVIDIA driver to one that supports CUDA {required}"),
    };
    vec![Outcome::fail(
        HOST,
        format!("{evidence}{note}"),
        format!(
            "{upgrade}; or run a server image built for CUDA {have} or older. Data-center GPUs (A100, H100, L40S, ...) can instead use CUDA forward compatibility: install `cuda-compat-{}-{}` in the image and put /usr/local/cuda/compat first on LD_LIBRARY_PATH (NVIDIA's CUDA images include it); GeForce/RTX cards cannot.",
            required.major, required.minor
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::UnknownReason;

    #[test]
    fn table_parses_and_is_ordered() {
        let rows = table().unwrap();
        assert!(rows.len() >= 19);
        for w in rows.windows(2) {
            assert!(
                w[0].driver < w[1].driver && w[0].cuda < w[1].cuda,
                "{:?} / {:?}",
                w[0],
                w[1]
            );
        }
        assert_eq!(rows[0].cuda.to_string(), "11.0");
    }

    #[test]
    fn driver_to_cuda() {
        let v = |d| max_cuda_for_driver(d).map(|c| c.to_string());
        assert_eq!(v("550.90.07").as_deref(), Some("12.4"));
        assert_eq!(v("550.54.14").as_deref(), Some("12.4"));
        assert_eq!(v("550.54.13").as_deref(), Some("12.3"));
        assert_eq!(v("535.104.05").as_deref(), Some("12.2"));
        assert_eq!(v("570.26").as_deref(), Some("12.8"));
        assert_eq!(v("580.95.05").as_deref(), Some("13.0"));
        assert_eq!(v("440.33"), None);
        assert_eq!(v("garbage"), None);
        assert_eq!(min_driver_for(parse_cuda("12.7").unwrap()), Some("570.26"));
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_cuda("12.4.1"), parse_cuda("12.4"));
        assert!(parse_cuda("12.10") > parse_cuda("12.9"));
        assert_eq!(parse_cuda("x"), None);
    }

    #[test]
    fn container_runtime_within_the_driver_passes() {
        let mut s = h100_with_driver();
        s.env.insert("CUDA_VERSION".into(), "12.4.1".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert_eq!(
            out[0].evidence,
            "driver 550.90.07: the driver reports CUDA 12.4 (nvmlSystemGetCudaDriverVersion); the server needs CUDA 12.4 (CUDA_VERSION=12.4.1 in the captured environment)"
        );
    }

    #[test]
    fn newer_runtime_fails() {
        let mut s = h100_with_driver();
        s.env.insert("CUDA_VERSION".into(), "12.8.1".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        let remedy = out[0].remedy.as_deref().unwrap_or("");
        assert!(
            remedy.contains("570.26 or newer") && remedy.contains("cuda-compat-12-8"),
            "{remedy}"
        );
        assert!(out[0].evidence.contains("minor version compatibility"));
    }

    #[test]
    fn threshold_and_table_are_used_without_nvml_cuda_version() {
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.driver {
            d.cuda_driver_version = Reading::unknown(UnknownReason::NotCaptured, "x");
            d.driver_version = Reading::value("535.104.05".into());
        }
        let th = |v: &str| Thresholds {
            required_cuda_version: Some(v.into()),
            ..Thresholds::default()
        };
        let out = run_with(&CHECK, &s, None, None, &th("13.0"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("driver 535.104.05 supports CUDA up to 12.2")
        );
        assert!(out[0].evidence.contains("will not initialise"));
        assert_eq!(
            statuses(&run_with(&CHECK, &s, None, None, &th("12.1"))),
            [Status::Pass]
        );
    }

    #[test]
    fn unknown_without_a_requirement_or_a_driver() {
        let out = check(&CHECK, &h100_with_driver());
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0]
                .evidence
                .contains("set thresholds.required_cuda_version")
        );
        let mut s = fixture("h100");
        s.env.insert("CUDA_VERSION".into(), "12.4.1".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
