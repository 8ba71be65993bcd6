//! The server's environment (issue 13): GPU visibility by index unless asked otherwise, nothing
//! else unless asked, and never a change to a variable the inherited environment already has.

use crate::engine::Engine;
use crate::error::LaunchError;
use crate::plan::PlannedGpu;
use crate::request::{DeviceIds, OmpThreads, RunRequest};
use inferscope_host::{CpuSet, GpuVendor, PciBusId, Reading, Snapshot};
use std::collections::BTreeMap;

/// Where the environment decisions are written.
pub(crate) struct EnvCtx<'a> {
    pub s: &'a Snapshot,
    pub req: &'a RunRequest,
    pub engine: Option<Engine>,
    pub env: &'a mut BTreeMap<String, String>,
    /// The visibility variables as planned, inherited or not (what `--emit` sets).
    pub selection: &'a mut BTreeMap<String, String>,
    pub reasons: &'a mut Vec<String>,
    pub warnings: &'a mut Vec<String>,
    pub advice: &'a mut Vec<String>,
}

impl EnvCtx<'_> {
    /// Set `name=value` unless the inherited environment has it: the same value is left as it
    /// is; another value is an error on the live machine (the server would use other GPUs than
    /// the ones bound for) and a warning when planning from a snapshot's recorded environment.
    fn set_unless_inherited(&mut self, name: &str, value: String) -> Result<(), LaunchError> {
        self.selection.insert(name.to_string(), value.clone());
        match self.req.env.get(name) {
            None => {
                self.env.insert(name.to_string(), value);
            }
            Some(old) if *old == value => {
                self.reasons
                    .push(format!("{name}={old} is already set as planned; left as it is"));
            }
            Some(old) if self.s.is_live => {
                return Err(LaunchError::Usage(format!(
                    "{name}={old} is already set and differs from what --gpus selects ({name}={value}); run never changes a variable you set: unset it, or choose the GPUs it names"
                )));
            }
            Some(old) => self.warnings.push(format!(
                "the snapshot's environment sets {name}={old}, not {value}; it is kept by `run` itself (which never changes a variable you set), so a server started from that shell would see those GPUs while CPUs and memory are bound for the chosen ones; --emit output sets {name}={value} explicitly"
            )),
        }
        Ok(())
    }

    /// `CUDA_VISIBLE_DEVICES` (+ `CUDA_DEVICE_ORDER`) for NVIDIA GPUs, `HIP_VISIBLE_DEVICES`
    /// for AMD GPUs.
    pub fn visibility(&mut self, gpus: &[PlannedGpu]) -> Result<(), LaunchError> {
        let rules = crate::engine::rules(self.engine);
        let nvidia = gpus.iter().filter(|g| g.nvidia).count();
        if nvidia > 0 && nvidia < gpus.len() {
            self.warnings.push(
                "NVIDIA and AMD GPUs mixed: no visibility variable is set; set CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES yourself"
                    .into(),
            );
            return Ok(());
        }
        if nvidia == 0 {
            if self.req.device_ids == DeviceIds::Uuid {
                return Err(LaunchError::Usage(
                    "--device-ids uuid: AMD GPUs are selected by index in HIP_VISIBLE_DEVICES; use --device-ids index".into(),
                ));
            }
            let order: Vec<PciBusId> = self
                .s
                .gpus
                .iter()
                .filter(|g| g.vendor == GpuVendor::Amd)
                .map(|g| g.pci_bus_id)
                .collect();
            let value = indices(gpus, &order).join(",");
            self.reasons.push(
                "HIP_VISIBLE_DEVICES by index among the AMD GPUs in PCI bus order (the order ROCm enumerates them); vLLM copies it into CUDA_VISIBLE_DEVICES itself (vllm/platforms/rocm.py, module level, 0.10.2)".into(),
            );
            return self.set_unless_inherited("HIP_VISIBLE_DEVICES", value);
        }
        let uuids: Option<Vec<String>> = gpus
            .iter()
            .map(|g| g.uuid.as_ref().map(|u| u.0.clone()))
            .collect();
        if self.req.device_ids == DeviceIds::Uuid {
            if !rules.accepts_uuids {
                return Err(LaunchError::Usage(format!(
                    "--device-ids uuid: {} rejects UUIDs in CUDA_VISIBLE_DEVICES ({}); use --device-ids index",
                    rules.name, rules.uuid_source
                )));
            }
            let Some(u) = uuids else {
                return Err(LaunchError::Usage(
                    "--device-ids uuid: the chosen GPUs' UUIDs are unknown (they come from the NVIDIA driver); use --device-ids index".into(),
                ));
            };
            self.reasons.push(format!(
                "CUDA_VISIBLE_DEVICES by UUID as asked (--device-ids uuid), which no renumbering changes; {} accepts them: {}",
                rules.name, rules.uuid_source
            ));
            return self.set_unless_inherited("CUDA_VISIBLE_DEVICES", u.join(","));
        }
        // CUDA's PCI_BUS_ID order counts the NVIDIA GPUs CUDA sees.
        let order: Vec<PciBusId> = match &self.s.cuda_order {
            Reading::Value(o) => o.pci_bus_id.clone(),
            Reading::Unknown(_) => self
                .s
                .gpus
                .iter()
                .filter(|g| g.vendor == GpuVendor::Nvidia)
                .map(|g| g.pci_bus_id)
                .collect(),
        };
        let idx = indices(gpus, &order);
        if idx.len() < gpus.len() {
            self.warnings.push(
                "a chosen GPU is not among the GPUs CUDA sees in the snapshot; CUDA_VISIBLE_DEVICES is not set".into(),
            );
            return Ok(());
        }
        self.reasons.push(format!(
            "CUDA_VISIBLE_DEVICES by index with CUDA_DEVICE_ORDER=PCI_BUS_ID, the form every engine parses ({}: {})",
            rules.name, rules.uuid_source
        ));
        if uuids.is_some() && rules.accepts_uuids {
            self.advice.push(format!(
                "--device-ids uuid would name the GPUs by UUID, which no renumbering changes; {} accepts them ({})",
                rules.name, rules.uuid_source
            ));
        }
        self.set_unless_inherited("CUDA_DEVICE_ORDER", "PCI_BUS_ID".into())?;
        self.set_unless_inherited("CUDA_VISIBLE_DEVICES", idx.join(","))
    }
}

/// Each GPU's position in `order`; shorter than `gpus` when one is missing.
fn indices(gpus: &[PlannedGpu], order: &[PciBusId]) -> Vec<String> {
    gpus.iter()
        .filter_map(|g| order.iter().position(|p| *p == g.pci_bus_id))
        .map(|i| i.to_string())
        .collect()
}

/// `PYTORCH_CUDA_ALLOC_CONF`: only with `--alloc-conf`, never over an inherited setting, and
/// refused where it breaks a flag of the engine.
pub(crate) fn alloc_conf(
    req: &RunRequest,
    engine: Option<Engine>,
    gpus: bool,
    env: &mut BTreeMap<String, String>,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<String>,
    advice: &mut Vec<String>,
) -> Result<(), LaunchError> {
    let rules = crate::engine::rules(engine);
    let conflict = rules
        .expandable_conflict
        .filter(|(flag, _)| req.command.iter().any(|w| w == flag));
    if let Some(k) = ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
        .into_iter()
        .find(|k| req.env.contains_key(*k))
    {
        reasons.push(format!("{k} is already set; left as it is"));
        if req.alloc_conf.is_some() {
            warnings.push(format!(
                "--alloc-conf is not applied: {k} is already set in the environment, and run never changes a variable you set"
            ));
        }
        return Ok(());
    }
    match &req.alloc_conf {
        Some(v) => {
            if let Some((flag, src)) = conflict
                && v.contains("expandable_segments:True")
            {
                return Err(LaunchError::Usage(format!(
                    "--alloc-conf {v:?}: {} with {flag} refuses expandable_segments:True ({src})",
                    rules.name
                )));
            }
            reasons.push("PYTORCH_CUDA_ALLOC_CONF as asked with --alloc-conf".into());
            env.insert("PYTORCH_CUDA_ALLOC_CONF".into(), v.clone());
        }
        None if !gpus => {}
        None => match conflict {
            Some((flag, src)) => advice.push(format!(
                "PYTORCH_CUDA_ALLOC_CONF is not set, and must not hold expandable_segments:True here: {} with {flag} refuses it ({src})",
                rules.name
            )),
            None => advice.push(
                "PYTORCH_CUDA_ALLOC_CONF is not set: for a PyTorch engine, --alloc-conf expandable_segments:True can reduce fragmentation (not with vLLM's --enable-sleep-mode)".into(),
            ),
        },
    }
    Ok(())
}

/// `OMP_NUM_THREADS`: only with `--omp-threads`, never over an inherited value.
#[allow(clippy::too_many_arguments)]
pub(crate) fn omp_threads(
    req: &RunRequest,
    engine: Option<Engine>,
    cpus: &CpuSet,
    gpus: usize,
    env: &mut BTreeMap<String, String>,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<String>,
    advice: &mut Vec<String>,
) {
    let share = req
        .cpus_per_gpu
        .map(u64::from)
        .unwrap_or_else(|| cpus.len() / (gpus.max(1) as u64))
        .max(1);
    if let Some(v) = req.env.get("OMP_NUM_THREADS") {
        reasons.push(format!("OMP_NUM_THREADS={v} is already set; left as it is"));
        if req.omp_threads.is_some() {
            warnings.push(
                "--omp-threads is not applied: OMP_NUM_THREADS is already set in the environment, and run never changes a variable you set".into(),
            );
        }
        return;
    }
    match req.omp_threads {
        Some(OmpThreads::Count(n)) => {
            reasons.push(format!("OMP_NUM_THREADS={n} as asked with --omp-threads"));
            env.insert("OMP_NUM_THREADS".into(), n.to_string());
        }
        Some(OmpThreads::Auto) => {
            reasons.push(format!(
                "OMP_NUM_THREADS={share} (--omp-threads auto): one worker's share, {}",
                if req.cpus_per_gpu.is_some() {
                    "--cpus-per-gpu".to_string()
                } else {
                    format!("{} CPUs over {} GPU(s)", cpus.len(), gpus.max(1))
                }
            ));
            env.insert("OMP_NUM_THREADS".into(), share.to_string());
        }
        None => match crate::engine::rules(engine).sets_omp_threads {
            Some(src) => advice.push(format!(
                "OMP_NUM_THREADS is not set: {} sets it itself when unset ({src}); --omp-threads N overrides",
                crate::engine::rules(engine).name
            )),
            None if gpus > 1 => advice.push(format!(
                "OMP_NUM_THREADS is not set: each of the server's processes may start one OpenMP thread per CPU it may use ({}); --omp-threads auto sets one worker's share ({share})",
                cpus.len()
            )),
            None => {}
        },
    }
}
