//! Multi-GPU and multi-node layouts (issue #30, items 1 and 4): TP × PP × DP × EP within and
//! across nodes, the interconnect between nodes, per-GPU memory ([`memory`]) and the step-time
//! model with communication costed by size, bandwidth and latency ([`step`]). Pure: no I/O.
//! Method, constants with their sources and the measured errors: docs/speed.md, section
//! "Multi-GPU and multi-node"; research: docs/research/multinode.md.

pub mod disagg;
pub mod find;
pub mod memory;
pub mod render;
pub mod step;

use crate::arch::ModelArch;
use crate::gpus::GpuSpec;
use serde::Serialize;

/// How a deployment spreads one model over `nodes × gpus_per_node` GPUs.
///
/// `tp` GPUs share every layer of a pipeline stage, `pp` stages hold consecutive layers, `dp`
/// replicas of that `tp × pp` group serve different requests. `ep` is the expert-parallel size
/// of MoE layers: the routed experts are split, whole, over `ep` GPUs drawn from the `tp × dp`
/// ranks of a stage. Data-parallel attention (the engines' flags for it: docs/speed.md "Sources
/// of the layout rules") is `tp = 1, dp = ep = N`: attention and dense layers whole on every rank, each rank its own
/// sequences, experts split N ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Tensor-parallel size.
    pub tp: u32,
    /// Pipeline-parallel stages.
    pub pp: u32,
    /// Data-parallel replicas (or DP-attention ranks).
    pub dp: u32,
    /// Expert-parallel size (1: experts sliced by TP instead).
    pub ep: u32,
    /// Nodes.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
}

/// Why a layout cannot run a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A size is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// tp × pp × dp differs from the GPUs the nodes hold.
    #[error(
        "tp {tp} × pp {pp} × dp {dp} = {world} GPUs, but {nodes} node(s) × {gpn} GPUs = {gpus}"
    )]
    WorldSize {
        /// Tensor-parallel size.
        tp: u32,
        /// Pipeline stages.
        pp: u32,
        /// Data-parallel size.
        dp: u32,
        /// Their product.
        world: u64,
        /// Nodes.
        nodes: u32,
        /// GPUs per node.
        gpn: u32,
        /// nodes × gpus per node.
        gpus: u64,
    },
    /// EP is not drawn from the TP × DP ranks.
    #[error("ep {ep} must divide tp × dp = {group} (the ranks experts are spread over)")]
    EpGroup {
        /// Expert-parallel size.
        ep: u32,
        /// tp × dp.
        group: u64,
    },
    /// EP on a dense model.
    #[error("ep {0} > 1 on a model without routed experts")]
    EpDense(u32),
    /// EP does not divide the routed experts.
    #[error("{experts} routed experts do not split evenly over ep {ep}")]
    EpExperts {
        /// Routed experts.
        experts: u32,
        /// Expert-parallel size.
        ep: u32,
    },
    /// TP does not divide the attention heads.
    #[error("{heads} attention heads do not split over tp {tp}")]
    TpHeads {
        /// Query heads.
        heads: u32,
        /// Tensor-parallel size.
        tp: u32,
    },
    /// TP neither divides the KV heads nor is a multiple of them.
    #[error("{kv_heads} KV heads: tp {tp} must divide them or be a multiple of them")]
    TpKvHeads {
        /// KV heads.
        kv_heads: u32,
        /// Tensor-parallel size.
        tp: u32,
    },
    /// More stages than layers.
    #[error("pp {pp} exceeds the model's {layers} layers")]
    PpLayers {
        /// Pipeline stages.
        pp: u32,
        /// Layers.
        layers: u32,
    },
}

impl Layout {
    /// One GPU: no parallelism of any kind.
    pub const SINGLE: Layout = Layout {
        tp: 1,
        pp: 1,
        dp: 1,
        ep: 1,
        nodes: 1,
        gpus_per_node: 1,
    };

    /// Total GPUs (`nodes × gpus_per_node`).
    pub fn world(&self) -> u64 {
        u64::from(self.nodes) * u64::from(self.gpus_per_node)
    }

    /// Whether the `tp` GPUs of a stage sit in one node (ranks are placed TP-first, as the
    /// engines number them).
    pub fn tp_within_node(&self) -> bool {
        self.tp <= self.gpus_per_node
    }

    /// Whether the EP group spans nodes.
    pub fn ep_across_nodes(&self) -> bool {
        self.ep > self.gpus_per_node
    }

    /// Whether consecutive pipeline stages sit on different nodes.
    pub fn pp_across_nodes(&self) -> bool {
        self.pp > 1 && u64::from(self.tp) * u64::from(self.pp) > u64::from(self.gpus_per_node)
    }

    /// Every valid layout of `arch` on `nodes × gpus_per_node` GPUs (for `plan --find`): each
    /// tp × pp × dp factorisation of the world size, with ep = 1 and, for MoE models, ep = tp × dp
    /// (experts spread over every rank of a stage, vLLM `--enable-expert-parallel`), plus the
    /// DP-attention form tp = 1, dp = ep. Kept only when [`Layout::validate`] passes; ordered by
    /// (pp, tp, dp, ep).
    pub fn enumerate(arch: &ModelArch, nodes: u32, gpus_per_node: u32) -> Vec<Layout> {
        let world = u64::from(nodes) * u64::from(gpus_per_node);
        let Ok(world) = u32::try_from(world) else {
            return Vec::new();
        };
        let moe = arch.moe.as_ref().is_some_and(|m| m.experts > 0);
        let mut out = Vec::new();
        for pp in (1..=world).filter(|p| world.is_multiple_of(*p)) {
            for tp in (1..=world / pp).filter(|t| (world / pp).is_multiple_of(*t)) {
                let dp = world / pp / tp;
                let eps: &[u32] = if moe { &[1, 0] } else { &[1] };
                for &ep in eps {
                    let ep = if ep == 0 { tp * dp } else { ep };
                    let l = Layout {
                        tp,
                        pp,
                        dp,
                        ep,
                        nodes,
                        gpus_per_node,
                    };
                    if l.validate(arch).is_ok() && !out.contains(&l) {
                        out.push(l);
                    }
                }
            }
        }
        out
    }

    /// Checks the layout against a model, with the engines' rules (each rule's source file and
    /// release: docs/speed.md "Sources of the layout rules"):
    ///
    /// * world size = tp × pp × dp;
    /// * attention heads divisible by tp; KV heads divisible by tp or tp a multiple of them (KV
    ///   heads are replicated when tp ≥ num_kv_heads). MLA has no KV heads to split;
    /// * ep divides tp × dp and the routed experts (an uneven split leaves ranks idle —
    ///   rejected here);
    /// * pp ≤ layers, not "pp divides layers": the remainder goes to the last stages, and a real
    ///   run served Qwen3-235B's 94 layers on pp 4 (`fixtures/speed/multi-gpu.jsonl`).
    pub fn validate(&self, arch: &ModelArch) -> Result<(), LayoutError> {
        for (v, name) in [
            (self.tp, "tp"),
            (self.pp, "pp"),
            (self.dp, "dp"),
            (self.ep, "ep"),
            (self.nodes, "nodes"),
            (self.gpus_per_node, "gpus_per_node"),
        ] {
            if v == 0 {
                return Err(LayoutError::Zero(name));
            }
        }
        let world = u64::from(self.tp) * u64::from(self.pp) * u64::from(self.dp);
        if world != self.world() {
            return Err(LayoutError::WorldSize {
                tp: self.tp,
                pp: self.pp,
                dp: self.dp,
                world,
                nodes: self.nodes,
                gpn: self.gpus_per_node,
                gpus: self.world(),
            });
        }
        let group = u64::from(self.tp) * u64::from(self.dp);
        if !group.is_multiple_of(u64::from(self.ep)) {
            return Err(LayoutError::EpGroup { ep: self.ep, group });
        }
        if self.ep > 1 {
            let experts = arch.moe.as_ref().map_or(0, |m| m.experts);
            if experts == 0 {
                return Err(LayoutError::EpDense(self.ep));
            }
            if !experts.is_multiple_of(self.ep) {
                return Err(LayoutError::EpExperts {
                    experts,
                    ep: self.ep,
                });
            }
        }
        if !arch.num_attention_heads.is_multiple_of(self.tp) {
            return Err(LayoutError::TpHeads {
                heads: arch.num_attention_heads,
                tp: self.tp,
            });
        }
        let kv = arch.num_kv_heads;
        if arch.mla.is_none()
            && kv > 0
            && !kv.is_multiple_of(self.tp)
            && !self.tp.is_multiple_of(kv)
        {
            return Err(LayoutError::TpKvHeads {
                kv_heads: kv,
                tp: self.tp,
            });
        }
        if self.pp > arch.num_layers {
            return Err(LayoutError::PpLayers {
                pp: self.pp,
                layers: arch.num_layers,
            });
        }
        Ok(())
    }
}

/// The network between nodes (`--network` in issue #30), per GPU: HGX nodes carry one NIC per
/// GPU (DeepSeek-V3 report: one 400 Gb/s CX7 per H800; GKE A4 and CoreWeave HGX alike), so a
/// GPU's cross-node traffic gets one NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// InfiniBand NDR, 400 Gb/s per port (ConnectX-7).
    IbNdr,
    /// InfiniBand HDR, 200 Gb/s per port (ConnectX-6).
    IbHdr,
    /// RoCE v2 at 400 Gb/s.
    Roce400,
    /// RoCE v2 at 200 Gb/s.
    Roce200,
    /// 100 Gb/s Ethernet without RDMA (NCCL over TCP sockets).
    Eth100,
    /// One NVLink domain across trays (GB200 NVL72's NVLink switch): nodes talk over NVLink.
    NvlinkDomain,
}

/// The network a snapshot's NICs suggest, with the reason in words. A snapshot records which
/// functions are RDMA devices (`infiniband/` in sysfs) and their interface names, not the link
/// rate or layer, so the generation is assumed and said: RDMA with an `ib*` interface (the IPoIB
/// naming of `ibp24s0`) → InfiniBand, NDR assumed (the HGX H100/H200 pairing); RDMA with
/// Ethernet names → RoCE, 400 Gb/s assumed; no RDMA NIC → 100 Gb/s Ethernet over TCP.
/// `--network` overrides it.
pub fn network_from_nics(nics: &[inferscope_host::Nic]) -> (Network, String) {
    let rdma: Vec<&inferscope_host::Nic> =
        nics.iter().filter(|n| !n.rdma_devices.is_empty()).collect();
    if rdma.is_empty() {
        return (
            Network::Eth100,
            String::from("no RDMA NIC in the snapshot: NCCL over TCP, 100 Gb/s assumed"),
        );
    }
    let ib = rdma
        .iter()
        .any(|n| n.net_devices.iter().any(|d| d.starts_with("ib")));
    let names: Vec<String> = rdma.iter().map(|n| n.display_name()).collect();
    if ib {
        (
            Network::IbNdr,
            format!(
                "{} RDMA NIC(s) with InfiniBand interfaces ({}); link rate not in the snapshot, NDR 400 Gb/s assumed",
                rdma.len(),
                names.join(", ")
            ),
        )
    } else {
        (
            Network::Roce400,
            format!(
                "{} RDMA NIC(s) with Ethernet interfaces ({}): RoCE; link rate not in the snapshot, 400 Gb/s assumed",
                rdma.len(),
                names.join(", ")
            ),
        )
    }
}

/// Bandwidth and latency of a [`Network`], with where they come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkSpec {
    /// Line rate per GPU per direction, GB/s.
    pub line_gbps: f64,
    /// Share of the line rate collectives reach.
    pub efficiency: f64,
    /// Seconds per small collective or hand-over crossing it (latency term α).
    pub latency_s: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

impl NetworkSpec {
    /// Bytes per second a collective moves per GPU per direction.
    pub fn bytes_per_s(&self) -> f64 {
        self.line_gbps * self.efficiency * 1e9
    }
}

impl Network {
    /// The five `--network` presets (and the NVLink domain).
    pub const ALL: [Network; 6] = [
        Network::IbNdr,
        Network::IbHdr,
        Network::Roce400,
        Network::Roce200,
        Network::Eth100,
        Network::NvlinkDomain,
    ];

    /// From the `--network` spelling (`ib-ndr`, `ib-hdr`, `roce-400`, `roce-200`, `eth-100`,
    /// `nvlink-domain`).
    pub fn parse(s: &str) -> Option<Network> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "ib-ndr" | "ndr" => Network::IbNdr,
            "ib-hdr" | "hdr" => Network::IbHdr,
            "roce-400" => Network::Roce400,
            "roce-200" => Network::Roce200,
            "eth-100" | "tcp" => Network::Eth100,
            "nvlink-domain" | "nvl72" => Network::NvlinkDomain,
            _ => return None,
        })
    }

    /// RDMA (InfiniBand or RoCE): NCCL's IB transport and pinned memory in a pod.
    pub fn rdma(self) -> bool {
        matches!(
            self,
            Network::IbNdr | Network::IbHdr | Network::Roce400 | Network::Roce200
        )
    }

    /// The `--network` spelling.
    pub fn cli_id(self) -> &'static str {
        match self {
            Network::IbNdr => "ib-ndr",
            Network::IbHdr => "ib-hdr",
            Network::Roce400 => "roce-400",
            Network::Roce200 => "roce-200",
            Network::Eth100 => "eth-100",
            Network::NvlinkDomain => "nvlink-domain",
        }
    }

    /// Bandwidth and latency per GPU.
    pub fn spec(self) -> NetworkSpec {
        // RDMA collectives reach ~86 % of the line: DeepEP's normal kernels bottleneck at
        // 43–58 GB/s on 50 GB/s CX7 NDR (DeepEP README @ 0aaa674).
        const RDMA: f64 = 0.86;
        match self {
            Network::IbNdr => NetworkSpec {
                line_gbps: 50.0,
                efficiency: RDMA,
                latency_s: 10e-6,
                source: "400 Gb/s per port (NVIDIA ConnectX-7 datasheet); 86 % from DeepEP's 43 GB/s RDMA bottleneck (DeepEP README @ 0aaa674); 10 µs per small cross-node collective is a judgement (RDMA one-way a few µs plus NCCL's proxy and kernel launch)",
            },
            Network::IbHdr => NetworkSpec {
                line_gbps: 25.0,
                efficiency: RDMA,
                latency_s: 10e-6,
                source: "200 Gb/s per port (NVIDIA ConnectX-6 datasheet); efficiency and latency as ib-ndr",
            },
            Network::Roce400 => NetworkSpec {
                line_gbps: 50.0,
                efficiency: RDMA,
                latency_s: 12e-6,
                source: "400 Gb/s RoCE v2 per NIC (ConnectX-7); efficiency as InfiniBand when PFC/ECN are tuned (llm-d 0.3 validated P/D over RoCE); latency a judgement, a little above InfiniBand",
            },
            Network::Roce200 => NetworkSpec {
                line_gbps: 25.0,
                efficiency: RDMA,
                latency_s: 12e-6,
                source: "200 Gb/s RoCE v2 per NIC; as roce-400",
            },
            Network::Eth100 => NetworkSpec {
                line_gbps: 12.5,
                efficiency: 0.4,
                latency_s: 50e-6,
                source: "100 Gb/s = 12.5 GB/s shared by the node's GPUs is optimistic; NCCL over TCP sockets reaches 'a few GB/s per flow' (docs/research/multinode.md): 40 % and 50 µs per collective are judgements",
            },
            Network::NvlinkDomain => NetworkSpec {
                line_gbps: 900.0,
                efficiency: 0.8,
                latency_s: 5e-6,
                source: "NVLink 5: 1.8 TB/s bidirectional per GPU across the NVL72 switch (NVIDIA GB200 NVL72 page); ~80 % after protocol overhead (NCCL maintainer, nccl-tests issue #212); 5 µs per call as NVLink (gpus.toml link_latency)",
            },
        }
    }
}

/// The link between GPUs of one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntraLink {
    /// NVLink/NVSwitch (true) or PCIe.
    pub nvlink: bool,
    /// GB/s per direction per GPU (datasheet).
    pub gbps_per_direction: f64,
    /// What it is.
    pub description: String,
}

impl IntraLink {
    /// The link a GPU's catalog entry gives to `gpus` GPUs of a node: NVLink/NVSwitch at half
    /// the bidirectional `gpu_link_gbps`, except NVLink bridges beyond two GPUs (they join pairs
    /// only) and `force_pcie` (a system wired without NVLink); else PCIe at the GPU's generation
    /// and width (`GpuSpec::pcie_gbps_per_direction`; 16 GB/s when unknown).
    pub fn from_gpu(gpu: &GpuSpec, gpus: u32, force_pcie: bool) -> IntraLink {
        let pcie = IntraLink {
            nvlink: false,
            gbps_per_direction: gpu.pcie_gbps_per_direction().unwrap_or(16.0),
            description: format!(
                "PCIe gen {} x{}",
                gpu.pcie_gen.unwrap_or(4),
                gpu.pcie_lanes.unwrap_or(16)
            ),
        };
        match (&gpu.gpu_link, gpu.gpu_link_gbps) {
            _ if force_pcie => pcie,
            (Some(l), Some(_)) if l.contains("bridge") && gpus > 2 => pcie,
            (Some(l), Some(b)) => IntraLink {
                nvlink: true,
                gbps_per_direction: b / 2.0,
                description: l.clone(),
            },
            _ => pcie,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(id: &str) -> ModelArch {
        crate::catalog::lookup(id).unwrap()
    }

    fn layout(tp: u32, pp: u32, dp: u32, ep: u32, nodes: u32, gpn: u32) -> Layout {
        Layout {
            tp,
            pp,
            dp,
            ep,
            nodes,
            gpus_per_node: gpn,
        }
    }

    #[test]
    fn validation_follows_the_engines_rules() {
        let llama = arch("meta-llama/Llama-3.1-70B-Instruct");
        assert_eq!(llama.num_kv_heads, 8);
        assert!(layout(8, 2, 1, 1, 2, 8).validate(&llama).is_ok());
        // 16 > 8 KV heads: replicated (tp a multiple of them), allowed
        assert!(layout(16, 1, 1, 1, 2, 8).validate(&llama).is_ok());
        assert!(matches!(
            layout(8, 1, 1, 1, 2, 8).validate(&llama),
            Err(LayoutError::WorldSize {
                world: 8,
                gpus: 16,
                ..
            })
        ));
        assert!(matches!(
            layout(3, 1, 1, 1, 1, 3).validate(&llama),
            Err(LayoutError::TpHeads { .. })
        ));
        assert!(matches!(
            layout(8, 1, 2, 2, 2, 8).validate(&llama),
            Err(LayoutError::EpDense(2))
        ));
        assert!(matches!(
            layout(1, 0, 1, 1, 1, 1).validate(&llama),
            Err(LayoutError::Zero("pp"))
        ));
        let ds = arch("deepseek-ai/DeepSeek-V3");
        // 256 routed experts: EP 32 (4 nodes x 8) fine, EP 24 not, EP must come from tp x dp
        assert!(layout(1, 1, 32, 32, 4, 8).validate(&ds).is_ok());
        assert!(matches!(
            layout(1, 1, 24, 24, 3, 8).validate(&ds),
            Err(LayoutError::EpExperts {
                experts: 256,
                ep: 24
            })
        ));
        assert!(matches!(
            layout(1, 1, 8, 16, 1, 8).validate(&ds),
            Err(LayoutError::EpGroup { ep: 16, group: 8 })
        ));
        // Qwen3-235B: 94 layers on pp 4 runs (a measured run, fixtures/speed), pp 95 cannot
        let q = arch("Qwen/Qwen3-235B-A22B");
        assert_eq!(q.num_layers, 94);
        assert!(layout(8, 4, 1, 1, 4, 8).validate(&q).is_ok());
        assert!(matches!(
            layout(1, 95, 1, 1, 95, 1).validate(&q),
            Err(LayoutError::PpLayers { .. })
        ));
    }

    #[test]
    fn enumerate_lists_only_valid_layouts() {
        let llama = arch("meta-llama/Llama-3.1-70B-Instruct");
        let ls = Layout::enumerate(&llama, 2, 8);
        assert!(ls.iter().all(|l| l.validate(&llama).is_ok() && l.ep == 1));
        assert!(ls.contains(&layout(8, 2, 1, 1, 2, 8)));
        assert!(ls.contains(&layout(16, 1, 1, 1, 2, 8)));
        assert!(ls.contains(&layout(1, 1, 16, 1, 2, 8)));
        // 80 layers allow pp up to 16; 64 heads allow tp 1..16
        assert_eq!(ls.len(), 15, "{ls:?}");
        let ds = arch("deepseek-ai/DeepSeek-V3");
        let ls = Layout::enumerate(&ds, 4, 8);
        assert!(ls.contains(&layout(1, 1, 32, 32, 4, 8)));
        assert!(ls.contains(&layout(8, 4, 1, 8, 4, 8)));
        assert!(ls.iter().all(|l| l.validate(&ds).is_ok()));
    }

    #[test]
    fn placement_predicates() {
        let l = layout(8, 4, 1, 1, 4, 8);
        assert!(l.tp_within_node() && l.pp_across_nodes() && !l.ep_across_nodes());
        let l = layout(16, 1, 1, 1, 2, 8);
        assert!(!l.tp_within_node());
        let l = layout(1, 1, 72, 72, 9, 8);
        assert!(l.ep_across_nodes() && !l.pp_across_nodes());
    }

    #[test]
    fn network_presets_parse_and_carry_bandwidth() {
        for n in Network::ALL {
            assert_eq!(Network::parse(n.cli_id()), Some(n));
            let s = n.spec();
            assert!(s.bytes_per_s() > 0.0 && s.latency_s > 0.0 && !s.source.is_empty());
        }
        assert_eq!(Network::parse("ib-xdr"), None);
        assert!(Network::IbNdr.spec().bytes_per_s() > Network::IbHdr.spec().bytes_per_s());
        assert!(Network::IbHdr.spec().bytes_per_s() > Network::Eth100.spec().bytes_per_s());
        // 400 Gb/s = 50 GB/s line
        assert!((Network::IbNdr.spec().line_gbps - 50.0).abs() < 1e-9);
    }

    fn nic(bus: &str, rdma: &[&str], net: &[&str]) -> inferscope_host::Nic {
        inferscope_host::Nic {
            pci_bus_id: bus.parse().unwrap(),
            vendor_id: "0x15b3".parse().unwrap(),
            rdma_devices: rdma.iter().map(|s| s.to_string()).collect(),
            net_devices: net.iter().map(|s| s.to_string()).collect(),
            numa_node: inferscope_host::Reading::unknown(
                inferscope_host::UnknownReason::NotCaptured,
                "test",
            ),
        }
    }

    #[test]
    fn network_guessed_from_snapshot_nics() {
        let ib = [
            nic("0000:18:00.0", &["mlx5_0"], &["ibp24s0"]),
            nic("0000:19:00.0", &[], &["eno1"]),
        ];
        let (n, why) = network_from_nics(&ib);
        assert_eq!(n, Network::IbNdr);
        assert!(why.contains("mlx5_0") && why.contains("assumed"), "{why}");
        let roce = [nic("0000:18:00.0", &["mlx5_0"], &["enp24s0np0"])];
        assert_eq!(network_from_nics(&roce).0, Network::Roce400);
        let tcp = [nic("0000:19:00.0", &[], &["eno1"])];
        assert_eq!(network_from_nics(&tcp).0, Network::Eth100);
        assert_eq!(network_from_nics(&[]).0, Network::Eth100);
    }

    #[test]
    fn intra_link_from_the_catalog() {
        let h100 = crate::gpus::lookup("H100 SXM").unwrap();
        let l = IntraLink::from_gpu(h100, 8, false);
        assert!(l.nvlink);
        assert!((l.gbps_per_direction - 450.0).abs() < 1e-9);
        let l = IntraLink::from_gpu(h100, 8, true);
        assert!(!l.nvlink);
        let l40s = crate::gpus::lookup("L40S").unwrap();
        assert!(!IntraLink::from_gpu(l40s, 4, false).nvlink);
        // RTX 3090 Ti: NVLink bridge joins pairs; four GPUs talk over PCIe
        let g = crate::gpus::lookup("RTX 3090 Ti").unwrap();
        assert!(!IntraLink::from_gpu(g, 4, false).nvlink);
    }
}
