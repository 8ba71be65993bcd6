//! What the user asked for: the parsed `--gpus` / `--numa-node` target, `--mem`,
//! `--cpus-per-gpu`, the inherited environment and the command.
//!
//! Parsing is here rather than in the binary so that every spelling the issue allows
//! (`0,1`, `GPU-UUID,...`, `auto:N`, PCI addresses) is tested without a process, and so that a bad
//! list gives the same one-line [`LaunchError`] whoever calls it.

use crate::error::LaunchError;
use inferscope_host::{NodeSet, NumaNodeId, PciBusId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Longest `--gpus` / `--numa-node` text accepted (a 64-GPU list of UUIDs is ~2.6 KB).
pub const MAX_LIST_TEXT: usize = 16 * 1024;

/// One GPU named on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuRef {
    /// `GPUn` as `inferscope topo` and `nvidia-smi` number them (PCI bus order).
    Index(u32),
    /// A UUID (`GPU-...`) or a unique prefix of one.
    Uuid(String),
    /// A PCI address (`0000:17:00.0`, NVML's `00000000:17:00.0`, or `17:00.0`).
    Pci(PciBusId),
}

impl fmt::Display for GpuRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuRef::Index(i) => write!(f, "{i}"),
            GpuRef::Uuid(u) => f.write_str(u),
            GpuRef::Pci(p) => write!(f, "{p}"),
        }
    }
}

/// What to bind to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// These GPUs, in this order (the order of `CUDA_VISIBLE_DEVICES`).
    Gpus(Vec<GpuRef>),
    /// The best N GPUs (`auto:N`).
    Auto(u32),
    /// NUMA nodes directly, no GPU (`--numa-node`): CPU-side workers, or hosts without GPUs.
    Nodes(Vec<NumaNodeId>),
}

/// NUMA memory policy (`set_mempolicy(2)` modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemMode {
    /// `MPOL_BIND`: allocate only on these nodes.
    Bind,
    /// `MPOL_PREFERRED`: allocate on this node while it has free memory, else elsewhere.
    Preferred,
    /// `MPOL_INTERLEAVE`: spread pages round-robin over these nodes.
    Interleave,
}

impl MemMode {
    /// The name used by `--mem`, systemd's `NUMAPolicy=` and this crate's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MemMode::Bind => "bind",
            MemMode::Preferred => "preferred",
            MemMode::Interleave => "interleave",
        }
    }
}

impl fmt::Display for MemMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MemMode {
    type Err = LaunchError;
    fn from_str(s: &str) -> Result<Self, LaunchError> {
        match s {
            "bind" => Ok(MemMode::Bind),
            "preferred" => Ok(MemMode::Preferred),
            "interleave" => Ok(MemMode::Interleave),
            other => Err(LaunchError::Usage(format!(
                "--mem {:?}: expected bind, preferred or interleave",
                truncate(other)
            ))),
        }
    }
}

/// Everything `inferscope run` was asked, minus where the snapshot came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequest {
    /// GPUs, `auto:N`, or NUMA nodes.
    pub target: Target,
    /// `--mem`; `None` chooses (bind for one node, interleave across nodes).
    pub mem: Option<MemMode>,
    /// `--cpus-per-gpu N`.
    pub cpus_per_gpu: Option<u32>,
    /// The environment the server would inherit (the caller's, or the snapshot's recorded one
    /// when planning for another machine); decides which variables are left alone.
    pub env: BTreeMap<String, String>,
    /// The server command and its arguments.
    pub command: Vec<String>,
    /// `--device-ids`: how `CUDA_VISIBLE_DEVICES` names the GPUs (index by default).
    #[serde(default)]
    pub device_ids: DeviceIds,
    /// `--omp-threads N|auto`; `None` leaves `OMP_NUM_THREADS` unset.
    #[serde(default)]
    pub omp_threads: Option<OmpThreads>,
    /// `--alloc-conf VALUE`; `None` leaves `PYTORCH_CUDA_ALLOC_CONF` unset.
    #[serde(default)]
    pub alloc_conf: Option<String>,
}

/// How the GPU visibility variable names GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceIds {
    /// CUDA ordinals in PCI bus order (with `CUDA_DEVICE_ORDER=PCI_BUS_ID`): every engine parses them.
    #[default]
    Index,
    /// `GPU-...` UUIDs: refused for engines that parse entries as integers.
    Uuid,
}

/// `--omp-threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OmpThreads {
    /// Exactly N.
    Count(u32),
    /// One worker's share: `--cpus-per-gpu N`, else the bound CPUs divided by the GPUs.
    Auto,
}

/// Parse `--omp-threads`: a whole number of at least 1, or `auto`.
pub fn parse_omp_threads(text: &str) -> Result<OmpThreads, LaunchError> {
    match text.trim() {
        "auto" => Ok(OmpThreads::Auto),
        t => match t.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(OmpThreads::Count(n)),
            _ => Err(LaunchError::Usage(format!(
                "--omp-threads {:?}: expected a whole number of at least 1, or auto",
                truncate(text)
            ))),
        },
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

/// Parse `--gpus`: `0,1`, `GPU-UUID,...`, PCI addresses (mixed freely), or `auto:N`.
pub fn parse_gpus(text: &str) -> Result<Target, LaunchError> {
    let bad = |why: String| LaunchError::BadGpuList {
        text: truncate(text),
        why,
    };
    if text.len() > MAX_LIST_TEXT {
        return Err(bad(format!("longer than {MAX_LIST_TEXT} bytes")));
    }
    let t = text.trim();
    if let Some(n) = t.strip_prefix("auto:") {
        return match n.trim().parse::<u32>() {
            Ok(0) => Err(bad("auto:N needs N of at least 1".into())),
            Ok(n) => Ok(Target::Auto(n)),
            Err(_) => Err(bad(format!(
                "auto:N needs a whole number of GPUs, found {:?}",
                truncate(n)
            ))),
        };
    }
    if t.is_empty() {
        return Err(bad(
            "empty: give GPU numbers (0,1), UUIDs (GPU-...), PCI addresses, or auto:N".into(),
        ));
    }
    let mut refs: Vec<GpuRef> = Vec::new();
    for entry in t.split(',') {
        let e = entry.trim();
        let r = if e.is_empty() {
            return Err(bad("an empty entry between commas".into()));
        } else if e.bytes().all(|b| b.is_ascii_digit()) {
            GpuRef::Index(
                e.parse()
                    .map_err(|_| bad(format!("GPU number {} is too large", truncate(e))))?,
            )
        } else if let Some(rest) = e.strip_prefix("GPU-") {
            if rest.is_empty() {
                return Err(bad("\"GPU-\" needs at least the start of a UUID".into()));
            }
            GpuRef::Uuid(e.to_string())
        } else if e.starts_with("MIG-") {
            return Err(bad(format!(
                "{}: MIG instances are not supported by `run`; bind to the parent GPU",
                truncate(e)
            )));
        } else if e.contains(':') {
            GpuRef::Pci(e.parse().map_err(|err| bad(format!("{err}")))?)
        } else if let Some(n) = e
            .strip_prefix("GPU")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
        {
            // `GPU3`, as `topo` labels it.
            GpuRef::Index(n)
        } else {
            return Err(bad(format!(
                "{:?} is not a GPU number, a UUID (GPU-...), a PCI address or auto:N",
                truncate(e)
            )));
        };
        if refs.contains(&r) {
            return Err(bad(format!("GPU {r} is named twice")));
        }
        refs.push(r);
    }
    Ok(Target::Gpus(refs))
}

/// Parse `--numa-node`: a node list as the kernel writes it (`0`, `0,1`, `0-1`).
pub fn parse_nodes(text: &str) -> Result<Target, LaunchError> {
    let bad = |why: String| LaunchError::BadNodeList {
        text: truncate(text),
        why,
    };
    if text.len() > MAX_LIST_TEXT {
        return Err(bad(format!("longer than {MAX_LIST_TEXT} bytes")));
    }
    let set: NodeSet = text.trim().parse().map_err(|e| bad(format!("{e}")))?;
    if set.is_empty() {
        return Err(bad("empty: give a node number such as 0".into()));
    }
    // A node list is bounded by the machine, not by the text: `0-4294967295` is refused here
    // rather than expanded.
    if set.len() > 4096 {
        return Err(bad("more than 4096 nodes".into()));
    }
    Ok(Target::Nodes(set.iter().map(NumaNodeId).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_lists() {
        assert_eq!(
            parse_gpus("0,1").unwrap(),
            Target::Gpus(vec![GpuRef::Index(0), GpuRef::Index(1)])
        );
        assert_eq!(parse_gpus(" auto:4 ").unwrap(), Target::Auto(4));
        assert_eq!(
            parse_gpus("GPU-abc,0000:17:00.0,GPU3").unwrap(),
            Target::Gpus(vec![
                GpuRef::Uuid("GPU-abc".into()),
                GpuRef::Pci("0000:17:00.0".parse().unwrap()),
                GpuRef::Index(3)
            ])
        );
        for bad in [
            "",
            "auto:0",
            "auto:x",
            "auto:",
            "0,,1",
            "0,0",
            "GPU-",
            "MIG-1",
            "zz",
            "-1",
            "99999999999",
            "0000:17:00.9",
        ] {
            let e = parse_gpus(bad).unwrap_err();
            assert!(matches!(e, LaunchError::BadGpuList { .. }), "{bad}: {e}");
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn node_lists() {
        assert_eq!(
            parse_nodes("0-1").unwrap(),
            Target::Nodes(vec![NumaNodeId(0), NumaNodeId(1)])
        );
        for bad in ["", "x", "0-4294967295", "1-0"] {
            assert!(parse_nodes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn omp_threads() {
        assert_eq!(parse_omp_threads("auto").unwrap(), OmpThreads::Auto);
        assert_eq!(parse_omp_threads("4").unwrap(), OmpThreads::Count(4));
        for bad in ["0", "-1", "x", ""] {
            assert!(parse_omp_threads(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mem_modes() {
        for m in [MemMode::Bind, MemMode::Preferred, MemMode::Interleave] {
            assert_eq!(m.as_str().parse::<MemMode>().unwrap(), m);
        }
        assert!("local".parse::<MemMode>().is_err());
    }
}
