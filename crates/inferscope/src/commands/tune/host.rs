//! What the tuning session asks of the binary ([`Host`]): the planner's verdict on each
//! candidate (typed, never "fits" by default), NVML's GPU memory, `run --emit numactl` for the
//! winner, and the tool's one bounded reader.

use inferscope_bench::tune::server::GpuUsed;
use inferscope_bench::tune::session::Host;
use std::path::Path;

/// The binary's answers to the session.
pub struct BinaryHost {
    /// Plan for this catalog GPU instead of the machine's.
    pub plan_gpu: Option<String>,
    /// Plan for a GPU of this much memory instead.
    pub plan_gpu_memory_gib: Option<f64>,
}

impl Host for BinaryHost {
    fn plan(&self, words: &[String]) -> (Option<serde_json::Value>, Option<String>) {
        plan_candidate(self, words)
    }

    fn gpu_used_mib(&self) -> GpuUsed {
        let cap = inferscope_probe::nvml::capture(None, 64);
        if let inferscope_host::Reading::Unknown(u) = &cap.info {
            return Err(u.detail.clone());
        }
        Ok(cap
            .gpus
            .iter()
            .map(|(_, d)| d.memory.known().map(|m| m.used_bytes >> 20))
            .collect())
    }

    fn run_emit(&self, flag: &str, value: &str, words: &[String]) -> String {
        use crate::commands::run::{DeviceIdsArg, EmitArg, RunArgs};
        let args = RunArgs {
            gpus: (flag == "--gpus").then(|| value.to_string()),
            numa_node: (flag == "--numa-node").then(|| value.to_string()),
            mem: None,
            cpus_per_gpu: None,
            device_ids: DeviceIdsArg::Index,
            omp_threads: None,
            alloc_conf: None,
            dry_run: false,
            json: false,
            emit: Some(EmitArg::Numactl),
            image: None,
            engine_version: None,
            nodes: None,
            leader_addr: None,
            network: None,
            snapshot: None,
            root: None,
            command: words.iter().map(Into::into).collect(),
        };
        let mut buf = Vec::new();
        match crate::commands::run::run(args, &mut buf) {
            Ok(_) => String::from_utf8_lossy(&buf).into_owned(),
            Err(e) => format!("(run --emit numactl failed: {e:#})"),
        }
    }

    fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        crate::input::read_bytes(path)
    }
}

/// Plan a candidate where the engine is modelled: `Ok(Some(reason))` when it does not fit.
fn plan_candidate(h: &BinaryHost, words: &[String]) -> (Option<serde_json::Value>, Option<String>) {
    let args = crate::commands::plan::PlanArgs {
        gpu: h.plan_gpu.clone(),
        gpu_memory_gib: h.plan_gpu_memory_gib,
        json: true,
        command: words.to_vec(),
        ..Default::default()
    };
    let mut buf = Vec::new();
    match crate::commands::plan::run(&args, &mut buf) {
        Err(e) => (
            Some(serde_json::json!({ "not_planned": format!("{e:#}") })),
            None,
        ),
        Ok(_) => match plan_verdict(&buf) {
            Ok((v, verdict)) => {
                let why = (!verdict.fits).then(|| {
                    format!(
                        "the planner says it does not fit: {}",
                        verdict.problems.join("; ")
                    )
                });
                (Some(v), why)
            }
            // Unknown, never "fits": the candidate runs unplanned, and plan.json says why.
            Err(e) => (
                Some(
                    serde_json::json!({ "not_planned": format!("the planner's output could not be read: {e}") }),
                ),
                None,
            ),
        },
    }
}

/// The planner's verdict on a candidate, typed: what `tune` reads of `plan --json`.
#[derive(Debug, serde::Deserialize)]
struct PlanVerdict {
    /// The candidate fits.
    fits: bool,
    /// Why it does not.
    problems: Vec<String>,
}

/// Read the verdict from `plan --json` output; output without a readable `fits`/`problems` is
/// an error (issue 32: it used to count as "fits").
fn plan_verdict(buf: &[u8]) -> Result<(serde_json::Value, PlanVerdict), String> {
    let v: serde_json::Value = serde_json::from_slice(buf).map_err(|e| e.to_string())?;
    let verdict: PlanVerdict =
        serde::Deserialize::deserialize(&v).map_err(|e: serde_json::Error| e.to_string())?;
    Ok((v, verdict))
}

#[cfg(test)]
mod plan_verdict_tests {
    use super::*;

    fn planned(model: &str, gpu: &str) -> Vec<u8> {
        let args = crate::commands::plan::PlanArgs {
            model: Some(model.into()),
            gpu: Some(gpu.into()),
            json: true,
            ..Default::default()
        };
        let mut buf = Vec::new();
        crate::commands::plan::run(&args, &mut buf).unwrap();
        buf
    }

    #[test]
    fn the_planners_own_output_gives_its_verdict() {
        let (_, v) = plan_verdict(&planned("meta-llama/Llama-3.1-8B-Instruct", "l40s")).unwrap();
        assert!(v.fits && v.problems.is_empty(), "{v:?}");
        let (_, v) = plan_verdict(&planned("meta-llama/Llama-3.1-70B-Instruct", "l40s")).unwrap();
        assert!(!v.fits && !v.problems.is_empty(), "{v:?}");
    }

    #[test]
    fn unreadable_output_is_an_error_never_fits() {
        for bad in [
            &b""[..],
            b"{\"fits\": tr",
            b"{\"hello\": 1}",
            b"{\"fits\": \"yes\", \"problems\": []}",
        ] {
            let e = plan_verdict(bad).unwrap_err();
            assert!(!e.is_empty(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(
            plan_verdict(b"{\"hello\": 1}")
                .unwrap_err()
                .contains("`fits`")
        );
    }
}
