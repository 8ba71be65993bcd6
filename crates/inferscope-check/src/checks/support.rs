//! Helpers shared by checks, and test data.
//!
//! Test snapshots live in `crates/inferscope-check/testdata/` (see its README). Regenerate with:
//! `for n in <names>; do inferscope snapshot --root fixtures/hosts/$n/root > testdata/$n.json; done`
//! and normalise `source.root` and `captured_at`.

use crate::Outcome;
use crate::outcome::need;
use inferscope_host::{Gpu, GpuDetails, Snapshot};

/// `GPU0 (0000:18:00.0)`: how findings name a GPU.
pub fn gpu_subject(snapshot: &Snapshot, gpu: &Gpu) -> String {
    let i = snapshot
        .gpus
        .iter()
        .position(|g| g.pci_bus_id == gpu.pci_bus_id)
        .unwrap_or(0);
    format!("GPU{i} ({})", gpu.pci_bus_id)
}

/// One outcome per GPU from its driver facts; a GPU without them gets the reason as an unknown.
pub fn per_gpu_details(
    s: &Snapshot,
    mut f: impl FnMut(&Gpu, String, &GpuDetails) -> Outcome,
) -> Vec<Outcome> {
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            match need(&g.details, &subject, "driver facts (NVML)") {
                Ok(d) => f(g, subject, d),
                Err(o) => o,
            }
        })
        .collect()
}

/// Why a host setting fails: what the value does (appended to the evidence after `: `, when
/// there is more to say than the value) and the exact remedy.
pub struct SettingFails {
    /// `every anonymous mapping gets huge pages ...`, or `None` when the evidence says it all.
    pub consequence: Option<String>,
    /// The command or flag that fixes it.
    pub remedy: &'static str,
}

/// The skeleton of a host-setting check: the setting unknown is one unknown outcome; known,
/// `evidence` says what was read and `fails` decides (`None`: pass with the evidence).
pub fn host_setting<T>(
    reading: &inferscope_host::Reading<T>,
    what: &str,
    evidence: impl FnOnce(&T) -> String,
    fails: impl FnOnce(&T) -> Option<SettingFails>,
) -> Vec<Outcome> {
    let value = match need(reading, HOST, what) {
        Ok(v) => v,
        Err(o) => return vec![o],
    };
    let evidence = evidence(value);
    match fails(value) {
        None => vec![Outcome::pass(HOST, evidence)],
        Some(f) => vec![Outcome::fail(
            HOST,
            match f.consequence {
                Some(c) => format!("{evidence}: {c}"),
                None => evidence,
            },
            f.remedy,
        )],
    }
}

/// Subject for host-wide findings.
pub const HOST: &str = "host";

/// Human bytes (`64.0 MiB`).
pub use inferscope_host::units::human_bytes as bytes;

/// Test data and builders.
#[cfg(test)]
pub mod testing {
    use crate::{CheckDef, CheckInput, Outcome, Status, Thresholds};
    use inferscope_host::*;

    /// A fixture snapshot by name (see testdata/README.md).
    pub fn fixture(name: &str) -> Snapshot {
        let text = match name {
            "h100" => include_str!("../../testdata/h100-sxm8-2s-switch-12nic.json"),
            "plx" => include_str!("../../testdata/pcie8-2s-plx-switches.json"),
            "rtx5090" => include_str!("../../testdata/rtx5090-2gpu-workstation.json"),
            "cloud-vm" => include_str!("../../testdata/cloud-vm-2gpu-numa-unknown.json"),
            "asymmetric" => include_str!("../../testdata/dual-socket-5gpu-asymmetric.json"),
            "dev-vm" => include_str!("../../testdata/dev-vm-2core-nogpu.json"),
            other => panic!("no fixture {other}"),
        };
        serde_json::from_str(text).expect("fixture snapshot parses")
    }

    fn v<T>(x: T) -> Reading<T> {
        Reading::value(x)
    }

    /// Healthy, fully known driver facts for an H100 SXM; tests change one field.
    pub fn healthy_details(index: u32) -> GpuDetails {
        GpuDetails {
            index: v(NvmlIndex(index)),
            uuid: v(GpuUuid(format!(
                "GPU-{index:08x}-0000-0000-0000-000000000000"
            ))),
            name: v("NVIDIA H100 80GB HBM3".to_string()),
            serial: v(format!("165232400{index:04}")),
            memory: v(GpuMemory {
                total_bytes: 85_520_809_984,
                used_bytes: 4 << 20,
                free_bytes: 85_520_809_984 - (4 << 20) - 559_218_688,
                reserved_bytes: v(559_218_688),
            }),
            bar1: v(Bar1Memory {
                total_bytes: 128 << 30,
                used_bytes: 2 << 20,
            }),
            persistence_mode: v(true),
            compute_mode: v("default".to_string()),
            mig: v(MigState {
                mode: PendingMode {
                    current: false,
                    pending: false,
                },
                instances: Vec::new(),
            }),
            ecc: v(EccState {
                mode: v(PendingMode {
                    current: true,
                    pending: true,
                }),
                volatile_uncorrected: v(0),
                aggregate_uncorrected: v(0),
            }),
            memory_repair: v(MemoryRepair {
                retired_pages_single_bit: v(0),
                retired_pages_double_bit: v(0),
                retirement_pending: v(false),
                remapped_rows_correctable: v(0),
                remapped_rows_uncorrectable: v(0),
                remap_pending: v(false),
                remap_failure: v(false),
            }),
            clocks: v(Clocks {
                sm_mhz: v(1980),
                memory_mhz: v(2619),
                sm_max_mhz: v(1980),
                memory_max_mhz: v(2619),
                event_reasons: v(Vec::new()),
            }),
            temperature_c: v(34),
            power_draw_mw: v(72_000),
            power_limit_mw: v(700_000),
            pcie: v(GpuPcie {
                gen_current: v(5),
                gen_max: v(5),
                width_current: v(16),
                width_max: v(16),
                tx_kbytes_per_s: v(0),
                rx_kbytes_per_s: v(0),
                replay_counter: v(0),
            }),
            nvlinks: v((0..18)
                .map(|l| NvLink {
                    link: l,
                    active: true,
                    version: v(4),
                    remote_pci_bus_id: v("0000:05:00.0".parse().unwrap()),
                })
                .collect()),
            cpu_affinity: v("0,2,4,6,8,10".parse().unwrap()),
            memory_affinity: v("0".parse().unwrap()),
            gpu_numa_node: Reading::unknown(
                UnknownReason::NotSupported,
                "NVML GPU NUMA node: Not Supported",
            ),
            processes: v(Vec::new()),
        }
    }

    /// The h100 fixture with healthy driver facts on every GPU, NV18 between all pairs and a
    /// driver that reports CUDA 12.4.
    pub fn h100_with_driver() -> Snapshot {
        let mut s = fixture("h100");
        for (i, g) in s.gpus.iter_mut().enumerate() {
            g.details = Reading::value(healthy_details(i as u32));
        }
        let ids: Vec<PciBusId> = s.gpus.iter().map(|g| g.pci_bus_id).collect();
        s.gpu_pairs = Vec::new();
        for (i, a) in ids.iter().enumerate() {
            for b in ids.iter().skip(i + 1) {
                s.gpu_pairs.push(GpuPair {
                    a: *a,
                    b: *b,
                    common_ancestor: Reading::value(topology::LinkClass::Node),
                    nvlinks: Reading::value(18),
                    p2p_read: Reading::value(P2pStatus::Ok),
                    p2p_write: Reading::value(P2pStatus::Ok),
                });
            }
        }
        s.driver = Reading::value(DriverInfo {
            source: DriverSource::Nvml,
            driver_version: Reading::value("550.90.07".into()),
            cuda_driver_version: Reading::value("12.4".into()),
            nvml_version: Reading::value("12.550.90.07".into()),
            gpu_count: Reading::value(8),
        });
        s
    }

    /// Run one check with default thresholds.
    pub fn check(def: &CheckDef, snapshot: &Snapshot) -> Vec<Outcome> {
        run_with(def, snapshot, None, None, &Thresholds::default())
    }

    /// Run one check with everything.
    pub fn run_with(
        def: &CheckDef,
        snapshot: &Snapshot,
        plan: Option<&PlanFacts>,
        process: Option<&ProcessFacts>,
        thresholds: &Thresholds,
    ) -> Vec<Outcome> {
        (def.run)(&CheckInput {
            snapshot,
            plan,
            process,
            thresholds,
        })
    }

    /// Statuses of outcomes, for compact assertions.
    pub fn statuses(o: &[Outcome]) -> Vec<Status> {
        o.iter().map(|x| x.status).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;
    use inferscope_host::{Reading, UnknownReason};

    #[test]
    fn host_setting_skeleton() {
        let fails = |v: &u32| {
            (*v > 1).then_some(SettingFails {
                consequence: Some("too high".into()),
                remedy: "lower it",
            })
        };
        let out = host_setting(&Reading::value(1u32), "x", |v| format!("x is {v}"), fails);
        assert_eq!(
            (out[0].status, out[0].evidence.as_str()),
            (Status::Pass, "x is 1")
        );
        let out = host_setting(&Reading::value(2u32), "x", |v| format!("x is {v}"), fails);
        assert_eq!(out[0].status, Status::Fail);
        assert_eq!(out[0].evidence, "x is 2: too high");
        assert_eq!(out[0].remedy.as_deref(), Some("lower it"));
        let unknown = Reading::unknown(UnknownReason::PermissionDenied, "/proc/sys/x: denied");
        let out = host_setting(&unknown, "x", |v: &u32| format!("x is {v}"), fails);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Unknown);
        assert_eq!(out[0].subject, HOST);
    }
}
