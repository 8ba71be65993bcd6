//! Invariants of a [`Snapshot`], checked after capture and after loading a file a user handed in.
//!
//! Validation reports every broken invariant at once (not just the first), each naming the
//! object involved, so a hand-edited or corrupted snapshot is easy to fix.

use crate::snapshot::Snapshot;
use std::collections::BTreeSet;
use std::fmt;

/// All invariants a snapshot breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors {
    /// One message per broken invariant.
    pub problems: Vec<String>,
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snapshot is inconsistent: {}", self.problems.join("; "))
    }
}

impl Snapshot {
    /// Check the snapshot's invariants: unique ids, disjoint node CPU sets, square distance
    /// matrix, GPUs and NICs that exist in the PCI list and sit on existing nodes.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut problems = Vec::new();
        if self.schema_version != crate::SCHEMA_VERSION {
            problems.push(format!(
                "schema_version {} is not the supported version {}",
                self.schema_version,
                crate::SCHEMA_VERSION
            ));
        }
        let mut node_ids = BTreeSet::new();
        for n in &self.numa_nodes {
            if !node_ids.insert(n.id) {
                problems.push(format!("NUMA node {} appears twice", n.id));
            }
        }
        for (i, a) in self.numa_nodes.iter().enumerate() {
            for b in self.numa_nodes.iter().skip(i + 1) {
                let both = a.cpus.intersection(&b.cpus);
                if !both.is_empty() {
                    problems.push(format!(
                        "NUMA nodes {} and {} both claim CPUs {both}",
                        a.id, b.id
                    ));
                }
            }
            if let Some(d) = a.distances.known()
                && d.len() != self.numa_nodes.len()
            {
                problems.push(format!(
                    "NUMA node {} has {} distances for {} nodes",
                    a.id,
                    d.len(),
                    self.numa_nodes.len()
                ));
            }
        }
        let mut bus_ids = BTreeSet::new();
        for d in &self.pci_devices {
            if !bus_ids.insert(d.bus_id) {
                problems.push(format!("PCI device {} appears twice", d.bus_id));
            }
        }
        let check_node =
            |what: String, node: Option<&crate::NumaNodeId>, problems: &mut Vec<String>| {
                if let Some(id) = node
                    && !node_ids.contains(id)
                {
                    problems.push(format!("{what} is on NUMA node {id}, which does not exist"));
                }
            };
        let mut gpu_ids = BTreeSet::new();
        for g in &self.gpus {
            if !gpu_ids.insert(g.pci_bus_id) {
                problems.push(format!("GPU {} appears twice", g.pci_bus_id));
            }
            // A GPU may be known from the driver alone (an imported nvidia-smi report, or NVML in
            // a container that hides sysfs), so it need not be in the PCI list.
            check_node(
                format!("GPU {}", g.pci_bus_id),
                g.numa_node.known(),
                &mut problems,
            );
        }
        let mut nic_ids = BTreeSet::new();
        for n in &self.nics {
            if !nic_ids.insert(n.pci_bus_id) {
                problems.push(format!("NIC {} appears twice", n.pci_bus_id));
            }
            if !bus_ids.contains(&n.pci_bus_id) {
                problems.push(format!("NIC {} is not in the PCI list", n.pci_bus_id));
            }
            check_node(
                format!("NIC {}", n.pci_bus_id),
                n.numa_node.known(),
                &mut problems,
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors { problems })
        }
    }
}
