//! `--config FILE`: thresholds and per-check overrides in TOML.
//!
//! ```toml
//! [thresholds]
//! min_dev_shm_bytes = 2147483648   # 2 GiB
//!
//! [checks.CPU001]
//! enabled = false                  # VMs: the hypervisor sets clocks
//!
//! [checks.MEM003]
//! severity = "error"
//! ```
//! Unknown keys are errors, so a misspelt threshold cannot silently keep its default.

use crate::Severity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every number a check compares against. Defaults are documented with their reason in
/// docs/checks/<CODE>.md of the check that uses them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// `/dev/shm` below this fails MEM006 (NCCL and multi-process servers share buffers there;
    /// Docker's default is 64 MiB). Default 1 GiB.
    pub min_dev_shm_bytes: u64,
    /// `vm.swappiness` above this fails MEM003 when swap is on. Default 10.
    pub max_swappiness: u32,
    /// Soft `RLIMIT_MEMLOCK` below this fails MEM007 (pinned host buffers, RDMA). Default 64 GiB;
    /// `unlimited` always passes.
    pub min_memlock_bytes: u64,
    /// GPU memory used before the server starts, above this fails GPU015. Default 1 GiB.
    pub max_preused_gpu_memory_bytes: u64,
    /// Physical cores local to each GPU below this fails CPU002. Default 4.
    pub min_local_cores_per_gpu: u32,
    /// Huge pages reserved above this share of RAM (percent) fails MEM011. Default 10.
    pub max_hugepages_percent_of_ram: u32,
    /// Host RAM headroom needed to load weights, as a factor of checkpoint size (MEM010). Default 1.2.
    pub host_ram_load_factor: f64,
    /// CUDA runtime version the server needs (`12.4`), if not given by the `CUDA_VERSION`
    /// environment variable of NVIDIA's containers (GPU016).
    pub required_cuda_version: Option<String>,
    /// GPU temperature above which GPU014 reports heat even without a throttle reason, °C.
    pub max_gpu_temperature_c: u32,
    /// Share of a process's resident memory allowed on nodes other than its GPUs' nodes, percent
    /// (PROC002). A few percent land remotely anyway (shared libraries first mapped by another
    /// process, page cache); more means the process was not bound. Default 10.
    pub max_remote_memory_percent: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_dev_shm_bytes: 1 << 30,
            max_swappiness: 10,
            min_memlock_bytes: 64 << 30,
            max_preused_gpu_memory_bytes: 1 << 30,
            min_local_cores_per_gpu: 4,
            max_hugepages_percent_of_ram: 10,
            host_ram_load_factor: 1.2,
            required_cuda_version: None,
            max_gpu_temperature_c: 85,
            max_remote_memory_percent: 10,
        }
    }
}

/// Override for one check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckOverride {
    /// `false` silences the check.
    pub enabled: Option<bool>,
    /// Severity instead of the default.
    pub severity: Option<Severity>,
}

/// A whole config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Thresholds.
    pub thresholds: Thresholds,
    /// Per-check overrides by code.
    pub checks: BTreeMap<String, CheckOverride>,
}

/// A config file that does not parse or names an unknown check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl Config {
    /// Parse TOML text; check codes must exist.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text)
            .map_err(|e| ConfigError(e.to_string().trim().replace('\n', " ")))?;
        for code in config.checks.keys() {
            if crate::find(code).is_none() {
                return Err(ConfigError(format!(
                    "[checks.{code}]: no such check (see `inferscope check --list`)"
                )));
            }
        }
        Ok(config)
    }
}
