//! Resolution: [`RunRequest`] + [`Snapshot`] → [`LaunchPlan`].
//!
//! The steps, in order: name the GPUs (or nodes); place each GPU on a NUMA node; take the CPUs of
//! those nodes (or each GPU's `--cpus-per-gpu` slot) and intersect them with the cgroup; choose
//! the memory policy from the nodes and intersect its nodes with the cgroup's memory nodes; then
//! the environment. Every choice appends a sentence to `reasons`, every compromise to `warnings`.

use crate::auto;
use crate::engine::Engine;
use crate::env::{self, EnvCtx};
use crate::error::LaunchError;
use crate::plan::{LaunchPlan, MemoryPlan, PlannedGpu, WorkerSlice};
use crate::request::{GpuRef, MemMode, RunRequest, Target};
use inferscope_host::{CpuSet, Gpu, GpuVendor, NodeSet, NumaNodeId, Reading, Snapshot};
use std::collections::BTreeMap;

/// Memory in use above which a chosen GPU gets a warning (another server may be on it).
const BUSY_BYTES: u64 = 1 << 30;

/// The cgroup limits recorded in the snapshot; `None` where unknown (never "no limit").
pub(crate) struct Limits {
    pub cpus: Option<CpuSet>,
    pub mems: Option<NodeSet>,
    pub path: String,
}

pub(crate) fn limits(s: &Snapshot, warnings: &mut Vec<String>) -> Limits {
    match &s.settings.cgroup {
        Reading::Value(cg) => {
            let cpus = match &cg.cpus_effective {
                Reading::Value(c) => Some(c.clone()),
                Reading::Unknown(u) => {
                    warnings.push(format!(
                        "the cgroup's allowed CPUs are unknown ({}); CPUs are not intersected with them, and the kernel may refuse some",
                        u.detail
                    ));
                    None
                }
            };
            let mems = match &cg.mems_effective {
                Reading::Value(m) => Some(m.clone()),
                Reading::Unknown(u) => {
                    warnings.push(format!(
                        "the cgroup's allowed memory nodes are unknown ({}); memory nodes are not intersected with them",
                        u.detail
                    ));
                    None
                }
            };
            Limits {
                cpus,
                mems,
                path: cg.path.clone(),
            }
        }
        Reading::Unknown(u) => {
            warnings.push(format!(
                "the cgroup is unknown ({}); CPUs and memory nodes are not intersected with its limits",
                u.detail
            ));
            Limits {
                cpus: None,
                mems: None,
                path: String::new(),
            }
        }
    }
}

/// `GPU3 (0000:5e:00.0)`.
pub(crate) fn gpu_name(index: usize, g: &Gpu) -> String {
    format!("GPU{index} ({})", g.pci_bus_id)
}

pub(crate) fn node_cpus(s: &Snapshot, id: NumaNodeId) -> Option<&CpuSet> {
    s.numa_nodes.iter().find(|n| n.id == id).map(|n| &n.cpus)
}

/// The NUMA node a GPU is placed on, with a note when it had to be derived; `Err(detail)` when
/// it cannot be told.
pub(crate) fn gpu_node(
    s: &Snapshot,
    index: usize,
    g: &Gpu,
) -> Result<(NumaNodeId, Option<String>), String> {
    let detail = match &g.numa_node {
        Reading::Value(n) => return Ok((*n, None)),
        Reading::Unknown(u) => u.detail.clone(),
    };
    let cpu_nodes: Vec<_> = s.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).collect();
    if let [only] = cpu_nodes.as_slice() {
        return Ok((
            only.id,
            Some(format!(
                "GPU{index}'s NUMA node is not reported by the kernel; node {} is the only node with CPUs",
                only.id
            )),
        ));
    }
    if let Some(local) = g.local_cpus.known().filter(|l| !l.is_empty())
        && let Some(n) = cpu_nodes.iter().find(|n| local.is_subset(&n.cpus))
    {
        return Ok((
            n.id,
            Some(format!(
                "GPU{index}'s NUMA node is not reported by the kernel; its local CPUs {local} place it on node {}",
                n.id
            )),
        ));
    }
    Err(detail)
}

/// `count` members of `set` starting at the `start`-th (0-based), walking ranges so that huge
/// sets cost nothing.
pub(crate) fn slice(set: &CpuSet, start: u64, count: u64) -> CpuSet {
    let mut skip = start;
    let mut want = count;
    let mut out = Vec::new();
    for &(lo, hi) in set.ranges() {
        if want == 0 {
            break;
        }
        let len = u64::from(hi - lo) + 1;
        if skip >= len {
            skip -= len;
            continue;
        }
        let first = u64::from(lo) + skip;
        let take = want.min(len - skip);
        // first + take - 1 <= hi, so both fit in u32.
        out.push((first as u32, (first + take - 1) as u32));
        want -= take;
        skip = 0;
    }
    CpuSet::from_ranges(out)
}

fn describe_source(s: &Snapshot) -> &'static str {
    if s.is_live {
        "this machine"
    } else {
        "the snapshot"
    }
}

fn have_gpus(s: &Snapshot) -> String {
    match s.gpus.len() {
        0 => format!("{} has no GPU", describe_source(s)),
        1 => format!("{} has 1 GPU (GPU0)", describe_source(s)),
        n => format!(
            "{} has {n} GPUs (GPU0-GPU{}); `inferscope topo` lists them",
            describe_source(s),
            n - 1
        ),
    }
}

fn uuid_of(g: &Gpu) -> Option<&inferscope_host::GpuUuid> {
    g.details.known().and_then(|d| d.uuid.known())
}

fn find_gpu(s: &Snapshot, r: &GpuRef) -> Result<usize, LaunchError> {
    let unknown = |have: String| LaunchError::UnknownGpu {
        gpu: r.to_string(),
        have,
    };
    match r {
        GpuRef::Index(i) => {
            let i = *i as usize;
            if i < s.gpus.len() {
                Ok(i)
            } else {
                Err(unknown(have_gpus(s)))
            }
        }
        GpuRef::Pci(p) => s
            .gpus
            .iter()
            .position(|g| g.pci_bus_id == *p)
            .ok_or_else(|| unknown(format!("no GPU at that PCI address; {}", have_gpus(s)))),
        GpuRef::Uuid(u) => {
            let matches: Vec<usize> = s
                .gpus
                .iter()
                .enumerate()
                .filter(|(_, g)| uuid_of(g).is_some_and(|x| x.0.starts_with(u.as_str())))
                .map(|(i, _)| i)
                .collect();
            match matches.as_slice() {
                [one] => Ok(*one),
                [] if s.gpus.iter().all(|g| uuid_of(g).is_none()) => Err(unknown(format!(
                    "GPU UUIDs are unknown in {} (they come from the NVIDIA driver); {}; name GPUs by number instead",
                    describe_source(s),
                    have_gpus(s)
                ))),
                [] => Err(unknown(format!(
                    "no GPU of {} has a UUID starting with it",
                    describe_source(s)
                ))),
                many => Err(unknown(format!(
                    "it is the start of {} GPUs' UUIDs; give more of the UUID",
                    many.len()
                ))),
            }
        }
    }
}

fn gib(bytes: u64) -> String {
    let tenths = (u128::from(bytes) * 10 + (1u128 << 29)) >> 30;
    format!("{}.{} GiB", tenths / 10, tenths % 10)
}

fn labels(gpus: &[PlannedGpu]) -> String {
    gpus.iter()
        .map(|g| g.label.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Plan a launch. Pure: everything comes from `snapshot` and `req`. The phases follow the
/// module docs; each appends its reasons and warnings to `n`.
pub fn resolve(snapshot: &Snapshot, req: &RunRequest) -> Result<LaunchPlan, LaunchError> {
    let s = snapshot;
    if req.command.is_empty() {
        return Err(LaunchError::NoCommand);
    }
    if req.cpus_per_gpu == Some(0) {
        return Err(LaunchError::Usage(
            "--cpus-per-gpu needs N of at least 1".into(),
        ));
    }
    let mut n = Notes::default();
    let lim = limits(s, &mut n.warnings);
    let sel = select(s, req, &lim)?;
    let gpus = place(s, &sel.indices, &mut n.reasons)?;
    let node_order = node_order(&gpus, sel.node_target.as_deref());
    let nodes: NodeSet = node_order.iter().map(|n| n.0).collect();
    let c = CpuCtx {
        s,
        lim: &lim,
        gpus: &gpus,
        node_order: &node_order,
        nodes: &nodes,
        what: describe_target(&gpus, &node_order, &nodes),
        cgroup_name: if lim.path.is_empty() {
            "this process's cgroup".to_string()
        } else {
            format!("this process's cgroup ({})", lim.path)
        },
    };
    let mut workers: Vec<WorkerSlice> = Vec::new();
    let cpus = match req.cpus_per_gpu {
        Some(per) => c.slot_cpus(per, &mut workers, &mut n)?,
        None => c.node_cpus_in_cgroup(&mut n)?,
    };
    let memory = c.memory_policy(req.mem, &mut n);
    if let Some(r) = sel.auto_reason {
        n.reasons.push(r);
    }
    let (engine, env, gpu_selection, advice) = environment(s, req, &gpus, &cpus, &mut n)?;
    Ok(LaunchPlan {
        live: s.is_live,
        source: s.source.root.clone(),
        gpus,
        nodes,
        cpus,
        memory,
        workers,
        env,
        gpu_selection,
        command: req.command.clone(),
        engine,
        advice,
        reasons: n.reasons,
        warnings: n.warnings,
    })
}

/// What the plan says about itself as it is built.
#[derive(Default)]
struct Notes {
    reasons: Vec<String>,
    warnings: Vec<String>,
}

/// Phase 1: the GPUs named (indices into `s.gpus`), or the NUMA nodes named.
struct Selection {
    indices: Vec<usize>,
    node_target: Option<Vec<NumaNodeId>>,
    auto_reason: Option<String>,
}

fn select(s: &Snapshot, req: &RunRequest, lim: &Limits) -> Result<Selection, LaunchError> {
    match &req.target {
        Target::Gpus(refs) => {
            let mut out = Vec::new();
            for r in refs {
                let i = find_gpu(s, r)?;
                if out.contains(&i) {
                    return Err(LaunchError::BadGpuList {
                        text: refs
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                        why: format!("GPU{i} is named twice"),
                    });
                }
                out.push(i);
            }
            Ok(Selection {
                indices: out,
                node_target: None,
                auto_reason: None,
            })
        }
        Target::Auto(n) => {
            let choice = auto::pick(s, *n, lim.cpus.as_ref())?;
            Ok(Selection {
                indices: choice.gpus,
                node_target: None,
                auto_reason: Some(choice.reason),
            })
        }
        Target::Nodes(ids) => {
            if req.cpus_per_gpu.is_some() {
                return Err(LaunchError::Usage(
                    "--cpus-per-gpu splits a node among GPUs; it does not apply to --numa-node"
                        .into(),
                ));
            }
            for id in ids {
                if node_cpus(s, *id).is_none() {
                    let have: Vec<String> = s.numa_nodes.iter().map(|n| n.id.to_string()).collect();
                    return Err(LaunchError::UnknownNode {
                        node: id.0,
                        have: if have.is_empty() {
                            format!("{} lists no NUMA node", describe_source(s))
                        } else {
                            format!("{} has node(s) {}", describe_source(s), have.join(","))
                        },
                    });
                }
            }
            Ok(Selection {
                indices: Vec::new(),
                node_target: Some(ids.clone()),
                auto_reason: None,
            })
        }
    }
}

/// Phase 2: each selected GPU on its NUMA node.
fn place(
    s: &Snapshot,
    indices: &[usize],
    reasons: &mut Vec<String>,
) -> Result<Vec<PlannedGpu>, LaunchError> {
    let mut gpus: Vec<PlannedGpu> = Vec::new();
    // `indices` come from `find_gpu` or `auto::pick`, so each names a GPU of the snapshot.
    for (i, g) in indices
        .iter()
        .filter_map(|&i| s.gpus.get(i).map(|g| (i, g)))
    {
        let (node, note) = gpu_node(s, i, g).map_err(|detail| LaunchError::GpuNodeUnknown {
            gpu: gpu_name(i, g),
            detail,
        })?;
        if let Some(n) = note {
            reasons.push(n);
        }
        gpus.push(PlannedGpu {
            label: format!("GPU{i}"),
            index: i as u32,
            pci_bus_id: g.pci_bus_id,
            uuid: uuid_of(g).cloned(),
            numa_node: node,
            nvidia: g.vendor == GpuVendor::Nvidia,
        });
    }
    Ok(gpus)
}

/// Nodes in first-use order (the first is the rank-0 worker's).
fn node_order(gpus: &[PlannedGpu], node_target: Option<&[NumaNodeId]>) -> Vec<NumaNodeId> {
    match node_target {
        Some(ids) => ids.to_vec(),
        None => {
            let mut v: Vec<NumaNodeId> = Vec::new();
            for g in gpus {
                if !v.contains(&g.numa_node) {
                    v.push(g.numa_node);
                }
            }
            v
        }
    }
}

/// `GPU0,GPU1 are on node 0`: the start of the CPU reason.
fn describe_target(gpus: &[PlannedGpu], node_order: &[NumaNodeId], nodes: &NodeSet) -> String {
    if gpus.is_empty() {
        format!("--numa-node {nodes} asks for node {nodes}")
    } else if node_order.len() == 1 {
        format!("{} {} on node {nodes}", labels(gpus), is_are(gpus.len()))
    } else {
        let each: Vec<String> = gpus
            .iter()
            .map(|g| format!("{} on node {}", g.label, g.numa_node))
            .collect();
        each.join(", ")
    }
}

/// Phases 3 and 4 (CPUs, memory policy) share what phases 1 and 2 decided.
struct CpuCtx<'a> {
    s: &'a Snapshot,
    lim: &'a Limits,
    gpus: &'a [PlannedGpu],
    node_order: &'a [NumaNodeId],
    nodes: &'a NodeSet,
    /// [`describe_target`].
    what: String,
    cgroup_name: String,
}

impl CpuCtx<'_> {
    fn allowed(&self, set: &CpuSet) -> CpuSet {
        match &self.lim.cpus {
            Some(a) => set.intersection(a),
            None => set.clone(),
        }
    }

    /// A GPU's CPUs: its node's, or its `local_cpulist` when the node is not in the snapshot.
    fn gpu_cpus(&self, p: &PlannedGpu) -> Result<CpuSet, LaunchError> {
        if let Some(c) = node_cpus(self.s, p.numa_node) {
            return Ok(c.clone());
        }
        let g = self.s.gpus.get(p.index as usize);
        g.and_then(|g| g.local_cpus.known().cloned())
            .ok_or_else(|| LaunchError::GpuNodeUnknown {
                gpu: g.map_or_else(|| p.label.clone(), |g| gpu_name(p.index as usize, g)),
                detail: format!("node {} is not in the snapshot", p.numa_node),
            })
    }

    /// Phase 3 with `--cpus-per-gpu N`: each GPU's slot of its node's usable CPUs.
    fn slot_cpus(
        &self,
        per: u32,
        workers: &mut Vec<WorkerSlice>,
        n: &mut Notes,
    ) -> Result<CpuSet, LaunchError> {
        let s = self.s;
        let mut all = CpuSet::new();
        for p in self.gpus {
            let usable = self.allowed(&self.gpu_cpus(p)?);
            // Slot = position among the GPUs placed on the same node, PCI order.
            let slot = s
                .gpus
                .iter()
                .enumerate()
                .take(p.index as usize)
                .filter(|(i, g)| gpu_node(s, *i, g).is_ok_and(|(n, _)| n == p.numa_node))
                .count() as u64;
            let start = slot.saturating_mul(u64::from(per));
            let end = start.saturating_add(u64::from(per));
            if end > usable.len() {
                return Err(LaunchError::NotEnoughCpus {
                    per_gpu: per,
                    detail: format!(
                        "{} is GPU number {} on node {} in PCI order, so its slot is CPUs {}-{} of the node's usable CPUs, but {} allows only {} of them ({}); use a smaller N",
                        p.label,
                        slot + 1,
                        p.numa_node,
                        start.saturating_add(1),
                        end,
                        self.cgroup_name,
                        usable.len(),
                        if usable.is_empty() {
                            "none".to_string()
                        } else {
                            usable.to_string()
                        }
                    ),
                });
            }
            let mine = slice(&usable, start, u64::from(per));
            all = all.union(&mine);
            workers.push(WorkerSlice {
                gpu: p.label.clone(),
                node: p.numa_node,
                slot: slot as u32,
                cpus: mine,
            });
        }
        n.reasons.push(format!(
            "{}; --cpus-per-gpu {per} gives each GPU the {per} usable CPUs of its slot (its position among its node's GPUs in PCI order), so workers started separately do not overlap",
            self.what
        ));
        Ok(all)
    }

    /// Phase 3 without `--cpus-per-gpu`: all CPUs of the nodes, within the cgroup.
    fn node_cpus_in_cgroup(&self, n: &mut Notes) -> Result<CpuSet, LaunchError> {
        let (s, what, cgroup_name, nodes) = (self.s, &self.what, &self.cgroup_name, self.nodes);
        let mut wanted = CpuSet::new();
        if self.gpus.is_empty() {
            for n in self.node_order {
                if let Some(c) = node_cpus(s, *n) {
                    wanted = wanted.union(c);
                }
            }
        } else {
            for p in self.gpus {
                wanted = wanted.union(&self.gpu_cpus(p)?);
            }
        }
        let usable = self.allowed(&wanted);
        if usable.is_empty() {
            let detail = if wanted.is_empty() {
                format!("node {nodes} has no CPUs (a memory-only node); add a node with CPUs")
            } else {
                let mut d = format!(
                    "{what} (CPUs {wanted}), but {cgroup_name} allows only CPUs {}",
                    self.lim
                        .cpus
                        .as_ref()
                        .map(|c| c.to_string())
                        .unwrap_or_default()
                );
                let alternatives = usable_alternatives(s, self.lim.cpus.as_ref());
                if alternatives.is_empty() {
                    d.push_str("; run it in a cgroup that allows those CPUs");
                } else {
                    d.push_str(&format!(
                        "; run it in a cgroup that allows those CPUs, or choose {alternatives}"
                    ));
                }
                d
            };
            return Err(LaunchError::EmptyCpuSet { detail });
        }
        if usable == wanted {
            n.reasons.push(format!(
                "{what}, and {cgroup_name} allows all of {}",
                if self.node_order.len() == 1 {
                    "its CPUs"
                } else {
                    "their CPUs"
                }
            ));
            return Ok(usable);
        }
        n.reasons.push(format!(
            "{what}; {cgroup_name} allows {usable} of their CPUs {wanted}"
        ));
        for node in self.node_order {
            if let Some(c) = node_cpus(s, *node)
                && !c.is_empty()
                && self.allowed(c).is_empty()
            {
                let whose = if self.gpus.is_empty() {
                    format!("node {node}")
                } else {
                    labels(
                        &self
                            .gpus
                            .iter()
                            .filter(|g| g.numa_node == *node)
                            .cloned()
                            .collect::<Vec<_>>(),
                    )
                };
                n.warnings.push(format!(
                    "{cgroup_name} allows none of node {node}'s CPUs ({c}): work for {whose} runs on another node's CPUs"
                ));
            }
        }
        Ok(usable)
    }

    /// Phase 4: the memory policy and its nodes, within the cgroup's memory nodes.
    fn memory_policy(&self, asked: Option<MemMode>, n: &mut Notes) -> Option<MemoryPlan> {
        let (nodes, cgroup_name) = (self.nodes, &self.cgroup_name);
        let spans = self.node_order.len() > 1;
        if spans && !self.gpus.is_empty() {
            let mut w = format!(
                "the GPUs span NUMA nodes {nodes}: CPUs and host memory span sockets, and copies for some GPUs cross the socket link"
            );
            if let Some(alt) = one_node_alternative(self.s, self.gpus.len(), self.lim.cpus.as_ref())
            {
                w.push_str(&format!("; {alt}"));
            }
            n.warnings.push(w);
        }
        let policy = asked.unwrap_or(if spans {
            MemMode::Interleave
        } else {
            MemMode::Bind
        });
        let mut mem_nodes = match policy {
            MemMode::Preferred => self.node_order.first().map(|n| n.0).into_iter().collect(),
            _ => nodes.clone(),
        };
        if let Some(mems) = &self.lim.mems {
            let inter = mem_nodes.intersection(mems);
            if inter.is_empty() {
                n.warnings.push(format!(
                    "{cgroup_name} allows memory only on node(s) {mems}, none of {mem_nodes}: no memory policy is set"
                ));
                mem_nodes = NodeSet::new();
            } else if inter != mem_nodes {
                n.warnings.push(format!(
                    "{cgroup_name} allows memory only on node(s) {mems}: the {policy} policy uses node(s) {inter}, not {mem_nodes}"
                ));
                mem_nodes = if policy == MemMode::Preferred {
                    inter.iter().take(1).collect()
                } else {
                    inter
                };
            }
        }
        if mem_nodes.is_empty() {
            return None;
        }
        let why = match (policy, asked.is_some(), spans) {
            (MemMode::Bind, false, false) => "one node: host memory stays local".to_string(),
            (MemMode::Interleave, false, true) => {
                "the nodes differ: pages are spread evenly (--mem preferred or bind to change)"
                    .to_string()
            }
            (MemMode::Preferred, _, true) => format!(
                "preferred takes one node: the first GPU's (node {mem_nodes}), falling back to others when it is full"
            ),
            _ => "as asked with --mem".to_string(),
        };
        n.reasons
            .push(format!("memory {policy} on node {mem_nodes}: {why}"));
        Some(MemoryPlan {
            policy,
            nodes: mem_nodes,
        })
    }
}

/// The engine recognised, the variables set, the GPU selection as planned and the advice given.
type Environment = (
    Option<Engine>,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
    Vec<String>,
);

/// Phase 5, the environment: only what cannot hurt is set; the rest is advice.
fn environment(
    s: &Snapshot,
    req: &RunRequest,
    gpus: &[PlannedGpu],
    cpus: &CpuSet,
    n: &mut Notes,
) -> Result<Environment, LaunchError> {
    let engine = crate::engine::detect(&req.command);
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut selection: BTreeMap<String, String> = BTreeMap::new();
    let mut advice: Vec<String> = Vec::new();
    if !gpus.is_empty() {
        let mut ctx = EnvCtx {
            s,
            req,
            engine,
            env: &mut env,
            selection: &mut selection,
            reasons: &mut n.reasons,
            warnings: &mut n.warnings,
            advice: &mut advice,
        };
        ctx.visibility(gpus)?;
        busy_gpu_warnings(s, gpus, &mut n.warnings);
        if gpus.len() > 1 {
            n.reasons.push(format!(
                "one process tree: the server and every worker it starts get all of CPUs {cpus} (the union); run does not bind each worker to its own GPU's CPUs"
            ));
        }
    }
    env::alloc_conf(
        req,
        engine,
        !gpus.is_empty(),
        &mut env,
        &mut n.reasons,
        &mut n.warnings,
        &mut advice,
    )?;
    env::omp_threads(
        req,
        engine,
        cpus,
        gpus.len(),
        &mut env,
        &mut n.reasons,
        &mut n.warnings,
        &mut advice,
    );
    Ok((engine, env, selection, advice))
}

/// A chosen GPU with memory already in use may have another server on it.
fn busy_gpu_warnings(s: &Snapshot, gpus: &[PlannedGpu], warnings: &mut Vec<String>) {
    for p in gpus {
        if let Some(m) = s
            .gpus
            .get(p.index as usize)
            .and_then(|g| g.details.known())
            .and_then(|d| d.memory.known())
            && m.used_bytes > BUSY_BYTES
        {
            warnings.push(format!(
                "{} already has {} of {} memory in use: another process may be on it",
                p.label,
                gib(m.used_bytes),
                gib(m.total_bytes)
            ));
        }
    }
}

fn is_are(n: usize) -> &'static str {
    if n == 1 { "is" } else { "are" }
}

/// `GPUs on node 0 (GPU1,GPU2)`-style hint of what the cgroup does allow.
fn usable_alternatives(s: &Snapshot, allowed: Option<&CpuSet>) -> String {
    let Some(allowed) = allowed else {
        return String::new();
    };
    let mut out = Vec::new();
    for n in &s.numa_nodes {
        if n.cpus.is_disjoint(allowed) {
            continue;
        }
        let on: Vec<String> = s
            .gpus
            .iter()
            .enumerate()
            .filter(|(i, g)| gpu_node(s, *i, g).is_ok_and(|(x, _)| x == n.id))
            .map(|(i, _)| format!("GPU{i}"))
            .collect();
        if !on.is_empty() {
            out.push(format!("GPUs on node {} ({})", n.id, on.join(",")));
        }
    }
    out.join(" or ")
}

/// A node holding at least `want` GPUs whose CPUs the cgroup allows, as a hint.
fn one_node_alternative(s: &Snapshot, want: usize, allowed: Option<&CpuSet>) -> Option<String> {
    s.numa_nodes.iter().find_map(|n| {
        if allowed.is_some_and(|a| n.cpus.is_disjoint(a)) {
            return None;
        }
        let on: Vec<String> = s
            .gpus
            .iter()
            .enumerate()
            .filter(|(i, g)| gpu_node(s, *i, g).is_ok_and(|(x, _)| x == n.id))
            .map(|(i, _)| format!("GPU{i}"))
            .collect();
        (on.len() >= want).then(|| {
            format!(
                "{} share node {} (or use --gpus auto:{want})",
                on.join(","),
                n.id
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_walk_ranges() {
        let s: CpuSet = "0,2,4,6,8,10".parse().unwrap();
        assert_eq!(slice(&s, 2, 2).to_string(), "4,6");
        let s: CpuSet = "0-7,16-23".parse().unwrap();
        assert_eq!(slice(&s, 6, 4).to_string(), "6-7,16-17");
        assert_eq!(slice(&s, 16, 4).to_string(), "");
        let huge: CpuSet = "0-4294967295".parse().unwrap();
        assert_eq!(
            slice(&huge, 4294967290, 100).to_string(),
            "4294967290-4294967295"
        );
    }

    #[test]
    fn gib_rounds_to_tenths() {
        assert_eq!(gib(1 << 30), "1.0 GiB");
        assert_eq!(gib(80 * (1 << 30) + (1 << 29)), "80.5 GiB");
        assert_eq!(gib(u64::MAX), "17179869184.0 GiB");
    }

    fn planned(i: u32, node: u32) -> PlannedGpu {
        PlannedGpu {
            label: format!("GPU{i}"),
            index: i,
            pci_bus_id: format!("0000:{:02x}:00.0", 0x18 + i).parse().unwrap(),
            uuid: None,
            numa_node: NumaNodeId(node),
            nvidia: true,
        }
    }

    #[test]
    fn nodes_in_first_use_order_and_the_target_sentence() {
        let gpus = [planned(4, 1), planned(0, 0), planned(5, 1)];
        let order = node_order(&gpus, None);
        assert_eq!(order, [NumaNodeId(1), NumaNodeId(0)]);
        let nodes: NodeSet = order.iter().map(|n| n.0).collect();
        assert_eq!(
            describe_target(&gpus, &order, &nodes),
            "GPU4 on node 1, GPU0 on node 0, GPU5 on node 1"
        );
        let one = [planned(4, 1), planned(5, 1)];
        let order = node_order(&one, None);
        let nodes: NodeSet = order.iter().map(|n| n.0).collect();
        assert_eq!(
            describe_target(&one, &order, &nodes),
            "GPU4,GPU5 are on node 1"
        );
        let asked = [NumaNodeId(1)];
        assert_eq!(node_order(&[], Some(&asked)), asked);
    }

    /// The 8x H100 two-socket host (fixtures/hosts/h100-sxm8-2s-switch-12nic), captured.
    fn h100() -> Snapshot {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/hosts/h100-sxm8-2s-switch-12nic/root");
        inferscope_probe::capture(
            &inferscope_probe::FsRoot::new(&root),
            &inferscope_probe::CaptureOptions {
                captured_at: "2026-12-02T00:00:00Z".into(),
                tool: "inferscope test".into(),
            },
        )
    }

    #[test]
    fn memory_policy_follows_the_nodes_and_the_cgroup() {
        let s = h100();
        let gpus = [planned(0, 0), planned(4, 1)];
        let order = node_order(&gpus, None);
        let nodes: NodeSet = order.iter().map(|n| n.0).collect();
        let lim = Limits {
            cpus: None,
            mems: Some("1".parse().unwrap()),
            path: "/slurm/job1".into(),
        };
        let c = CpuCtx {
            s: &s,
            lim: &lim,
            gpus: &gpus,
            node_order: &order,
            nodes: &nodes,
            what: describe_target(&gpus, &order, &nodes),
            cgroup_name: "this process's cgroup (/slurm/job1)".into(),
        };
        // Two nodes: interleave, cut to the cgroup's node 1, with a warning each.
        let mut n = Notes::default();
        let m = c.memory_policy(None, &mut n).unwrap();
        assert_eq!(m.policy, MemMode::Interleave);
        assert_eq!(m.nodes.to_string(), "1");
        assert_eq!(n.warnings.len(), 2, "{:?}", n.warnings);
        assert!(n.warnings[0].starts_with("the GPUs span NUMA nodes 0-1"));
        // Preferred names the first GPU's node, which the cgroup forbids: no policy at all.
        let mut n = Notes::default();
        assert!(c.memory_policy(Some(MemMode::Preferred), &mut n).is_none());
        assert!(
            n.warnings
                .iter()
                .any(|w| w.contains("no memory policy is set"))
        );
    }
}
