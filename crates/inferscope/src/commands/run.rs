//! `inferscope run [--gpus LIST | --numa-node NODES] [...] -- CMD ARGS...`: start a server bound
//! to the CPUs and NUMA memory of its GPUs.
//!
//! The command is glue: parse the options, capture (or load) a snapshot, let
//! `inferscope_launch::resolve` make the plan, then do one of three things with it: print it
//! (`--dry-run`, `--json`), print it for another tool (`--emit`), or apply it to this process and
//! `exec` the server ([`act`]). Because the last step is `exec`, not spawn-and-wait, the server
//! *is* this process afterwards: its PID, its signals and its exit status are the ones the caller
//! (a shell, systemd, Kubernetes) sees, with nothing in between to forward them.
//!
//! Binding acts on the live machine only. `--snapshot FILE` and `--root DIR` describe some other
//! machine, so they are accepted with `--dry-run` or `--emit` and refused otherwise.
//!
//! `--numa-node N` is the GPU-less form: it binds to a node directly. It serves CPU-side workers
//! (tokenizer pools, llama.cpp with CPU offload, a router), and it is how the real-exec tests run
//! on machines without a GPU.

pub mod act;

use anyhow::bail;
use inferscope_launch::{
    DeviceIds, Emit, EmitOptions, LaunchError, LaunchPlan, MemMode, RunRequest, emit, parse_gpus,
    parse_nodes, parse_omp_threads, resolve,
};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `--mem` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MemArg {
    /// Allocate only on the GPUs' node(s).
    Bind,
    /// Prefer the (first) GPU's node, fall back to others when it is full.
    Preferred,
    /// Spread pages over the GPUs' nodes.
    Interleave,
}

/// `--device-ids` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceIdsArg {
    /// CUDA indices in PCI bus order.
    Index,
    /// GPU UUIDs.
    Uuid,
}

/// `--emit` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EmitArg {
    /// A `numactl` command line.
    Numactl,
    /// `docker run` flags.
    Docker,
    /// A systemd unit drop-in.
    Systemd,
    /// Kubernetes kubelet settings and a pod.
    K8s,
    /// With --nodes N: one shell command per node of a server spread over N machines.
    Nodes,
    /// With --nodes N: a Kubernetes LeaderWorkerSet (leader + workers) and the leader's Service.
    Lws,
}

/// Arguments of `inferscope run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// GPUs to bind to: numbers as `inferscope topo` shows them (0,1), UUIDs (GPU-...), PCI
    /// addresses, or auto:N for the N best-connected GPUs.
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
    /// Bind to NUMA node(s) directly instead of GPUs (CPU-side workers; hosts without GPUs).
    #[arg(long, value_name = "NODES")]
    pub numa_node: Option<String>,
    /// NUMA memory policy [default: bind on one node, interleave when the GPUs span nodes].
    #[arg(long, value_enum, value_name = "POLICY")]
    pub mem: Option<MemArg>,
    /// Take N CPUs of each GPU's node: the k-th GPU of a node (PCI order) gets the k-th N, so
    /// servers started separately do not overlap. One process tree gets the union: the workers
    /// of a multi-GPU server are not bound one by one.
    #[arg(long, value_name = "N")]
    pub cpus_per_gpu: Option<u32>,
    /// How CUDA_VISIBLE_DEVICES names the GPUs: index (with CUDA_DEVICE_ORDER=PCI_BUS_ID), or
    /// uuid (refused for the engines whose rooms reject UUIDs: `crate::help::device_ids_help`).
    #[arg(
        long,
        value_enum,
        value_name = "FORM",
        default_value = "index",
        help = crate::help::device_ids_help()
    )]
    pub device_ids: DeviceIdsArg,
    /// Set OMP_NUM_THREADS to N, or auto (one worker's share); unset by default.
    #[arg(long, value_name = "N|auto")]
    pub omp_threads: Option<String>,
    /// Set PYTORCH_CUDA_ALLOC_CONF to VALUE; unset by default.
    #[arg(long, value_name = "VALUE")]
    pub alloc_conf: Option<String>,
    /// Print what would be bound and run, and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the equivalent for where the server is deployed, instead of running it.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub emit: Option<EmitArg>,
    /// With --emit docker|k8s: the container image [default: the engine's official image for
    /// --engine-version, or its latest].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// With --emit docker|k8s: the engine release whose official image to use (e.g. 0.10.2).
    #[arg(long, value_name = "VERSION")]
    pub engine_version: Option<String>,
    /// With --emit nodes|lws: machines one server spans (the command is its one-node form).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub nodes: Option<u32>,
    /// With --emit nodes: the leader's address [default: $LEADER_ADDR, set on every node].
    #[arg(long, value_name = "ADDR")]
    pub leader_addr: Option<String>,
    /// With --emit nodes|lws: ib-ndr, ib-hdr, roce-400, roce-200, eth-100 or nvlink-domain.
    #[arg(long, value_name = "NET", value_parser = |s: &str| inferscope_launch::parse_network(s).map_err(|e| e.to_string()))]
    pub network: Option<inferscope_launch::Network>,
    /// Plan from a snapshot written by `inferscope snapshot` (with --dry-run or --emit only).
    #[arg(long, value_name = "FILE", conflicts_with = "root")]
    pub snapshot: Option<PathBuf>,
    /// Plan from sysfs/procfs under DIR (with --dry-run or --emit only).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The server command and its arguments, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

impl From<MemArg> for MemMode {
    fn from(m: MemArg) -> Self {
        match m {
            MemArg::Bind => MemMode::Bind,
            MemArg::Preferred => MemMode::Preferred,
            MemArg::Interleave => MemMode::Interleave,
        }
    }
}

impl EmitArg {
    /// The one-machine format; `None` for the multi-node ones (`multi_node`).
    fn one_machine(self) -> Option<Emit> {
        match self {
            EmitArg::Numactl => Some(Emit::Numactl),
            EmitArg::Docker => Some(Emit::Docker),
            EmitArg::Systemd => Some(Emit::Systemd),
            EmitArg::K8s => Some(Emit::K8s),
            EmitArg::Nodes | EmitArg::Lws => None,
        }
    }
}

/// The environment of this process as UTF-8 pairs (others cannot matter to the variables
/// `run` sets).
fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Plan, then print, emit, or bind and exec. Returns only when nothing is executed.
pub fn run(args: RunArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let multi = matches!(args.emit, Some(EmitArg::Nodes | EmitArg::Lws));
    if multi || args.nodes.is_some() || args.leader_addr.is_some() || args.network.is_some() {
        return multi_node(&args, out);
    }
    let planning_only = args.dry_run || args.emit.is_some();
    let target = match (&args.gpus, &args.numa_node) {
        (Some(_), Some(_)) => {
            bail!("--gpus and --numa-node exclude each other: bind to GPUs or to nodes")
        }
        (Some(g), None) => parse_gpus(g)?,
        (None, Some(n)) => parse_nodes(n)?,
        (None, None) => bail!(
            "say what to bind to: --gpus 0,1 | --gpus GPU-UUID,... | --gpus auto:N, or --numa-node N"
        ),
    };
    if (args.image.is_some() || args.engine_version.is_some())
        && !matches!(
            args.emit,
            Some(EmitArg::Docker | EmitArg::K8s | EmitArg::Lws)
        )
    {
        bail!(
            "{} chooses the container image of --emit docker or --emit k8s; add one of them",
            if args.image.is_some() {
                "--image"
            } else {
                "--engine-version"
            }
        );
    }
    if args.json && !args.dry_run {
        bail!("--json prints the plan of --dry-run; add --dry-run");
    }
    if !planning_only && (args.snapshot.is_some() || args.root.is_some()) {
        bail!(
            "refusing to bind from {}: binding acts on this machine only; add --dry-run or --emit to plan for the machine it describes",
            if args.snapshot.is_some() {
                "--snapshot"
            } else {
                "--root"
            }
        );
    }
    if args.command.is_empty() {
        return Err(LaunchError::NoCommand.into());
    }
    let snapshot = match (&args.snapshot, &args.root) {
        (Some(file), _) => crate::load::snapshot_file(file)?,
        (None, Some(dir)) => super::capture_root(dir)?,
        (None, None) => super::capture_root(Path::new("/"))?,
    };
    let env = if args.snapshot.is_some() || args.root.is_some() {
        snapshot.env.clone()
    } else {
        process_env()
    };
    let request = RunRequest {
        target,
        mem: args.mem.map(MemMode::from),
        cpus_per_gpu: args.cpus_per_gpu,
        env,
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        device_ids: match args.device_ids {
            DeviceIdsArg::Index => DeviceIds::Index,
            DeviceIdsArg::Uuid => DeviceIds::Uuid,
        },
        omp_threads: args
            .omp_threads
            .as_deref()
            .map(parse_omp_threads)
            .transpose()?,
        alloc_conf: args.alloc_conf.clone(),
    };
    let plan = resolve(&snapshot, &request)?;
    // Emitted before the warnings are printed, so a refusal is the only line on stderr.
    let emitted = match args.emit {
        Some(format) => {
            let Some(format) = format.one_machine() else {
                bail!("--emit nodes|lws needs --nodes N");
            };
            let opts = EmitOptions {
                image: args.image.clone(),
                engine_version: args.engine_version.clone(),
            };
            Some(emit(&plan, format, &opts)?)
        }
        None => None,
    };
    for w in &plan.warnings {
        eprintln!("inferscope: warning: {w}");
    }
    if let Some(text) = emitted {
        out.write_all(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        // A dry run is read and pasted, not executed: secret flag values, secret-named
        // variables and URL credentials are not shown (`--emit` output is a deployment file
        // and keeps the command as given).
        let mut plan = plan;
        plan.command = inferscope_host::redact::command(&plan.command);
        for (k, v) in plan.env.iter_mut() {
            *v = inferscope_host::redact::env_value(k, v).into_owned();
        }
        if args.json {
            serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&plan))?;
            writeln!(out)?;
        } else {
            write_plan(&plan, out)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    out.flush()?;
    let err = act::bind_and_exec(plan, &args.command);
    Err(err)
}

/// `--emit nodes|lws --nodes N`: no binding here; each node binds itself.
fn multi_node(args: &RunArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let format = match args.emit {
        Some(EmitArg::Nodes) => inferscope_launch::MultiNodeFormat::Nodes,
        Some(EmitArg::Lws) => inferscope_launch::MultiNodeFormat::Lws,
        _ => bail!(
            "--nodes, --leader-addr and --network describe a multi-node server: add --emit nodes or --emit lws"
        ),
    };
    let Some(nodes) = args.nodes else {
        bail!("--emit nodes|lws needs --nodes N (the machines one server spans)");
    };
    if args.gpus.is_some() || args.numa_node.is_some() || args.dry_run {
        bail!(
            "--emit nodes|lws writes what every node runs; binding (--gpus, --numa-node, --dry-run) is each node's own `inferscope run`"
        );
    }
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let opts = inferscope_launch::MultiNodeOptions {
        nodes,
        leader_addr: args.leader_addr.clone(),
        image: args.image.clone(),
        engine_version: args.engine_version.clone(),
        network: args.network,
    };
    out.write_all(inferscope_launch::emit_multi_node(&command, format, &opts)?.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The `--dry-run` text.
pub fn write_plan(plan: &LaunchPlan, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "Dry run{}: nothing is bound or run.",
        if plan.live {
            ""
        } else {
            " (planned from a snapshot, not this machine)"
        }
    )?;
    writeln!(out)?;
    for g in &plan.gpus {
        writeln!(
            out,
            "  GPU      {} {} {} node {}",
            g.label,
            g.pci_bus_id,
            g.uuid
                .as_ref()
                .map(|u| u.0.as_str())
                .unwrap_or("(UUID unknown)"),
            g.numa_node
        )?;
    }
    writeln!(
        out,
        "  engine   {}",
        inferscope_launch::engine::rules(plan.engine).name
    )?;
    writeln!(out, "  CPUs     {} ({} CPUs)", plan.cpus, plan.cpus.len())?;
    for w in &plan.workers {
        writeln!(out, "  worker   {} slot {} CPUs {}", w.gpu, w.slot, w.cpus)?;
    }
    match &plan.memory {
        Some(m) => writeln!(out, "  memory   {} node {}", m.policy, m.nodes)?,
        None => writeln!(out, "  memory   policy unchanged")?,
    }
    for (k, v) in &plan.env {
        writeln!(out, "  env      {k}={v}")?;
    }
    // Inherited visibility variables stay as they are for `run`; an --emit artifact sets the
    // planned selection anyway, so the dry run shows what that is.
    for (k, v) in &plan.gpu_selection {
        if plan.env.get(k) != Some(v) {
            writeln!(
                out,
                "  emit env {k}={v} (kept from the environment by run itself; --emit output sets it)"
            )?;
        }
    }
    writeln!(
        out,
        "  exec     {}",
        inferscope_launch::emit::shell_command_line(&plan.command)
    )?;
    writeln!(out)?;
    writeln!(out, "Why:")?;
    for r in &plan.reasons {
        writeln!(out, "  - {r}")?;
    }
    if !plan.advice.is_empty() {
        writeln!(out)?;
        writeln!(out, "Advice (not set):")?;
        for a in &plan.advice {
            writeln!(out, "  - {a}")?;
        }
    }
    if !plan.warnings.is_empty() {
        writeln!(out)?;
        writeln!(out, "Warnings:")?;
        for w in &plan.warnings {
            writeln!(out, "  - {w}")?;
        }
    }
    Ok(())
}
