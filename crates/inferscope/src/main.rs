//! `inferscope`: the command-line front end. Arguments are parsed and validated here, each
//! command is a thin function over the library crates, and every renderer writes to any
//! `impl Write` so output is testable. Errors are printed once, with their chain, and map to
//! exit codes: 0 fine, 1 findings at or above the chosen severity, 2 usage or input error.
//! A closed pipe (`inferscope snapshot | head`) is success, not an error.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
use clap::{CommandFactory, Parser, Subcommand};
use inferscope::{commands, render};
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Know your GPU inference host.
#[derive(Debug, Parser)]
#[command(name = "inferscope", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print everything known about this host as JSON (the Snapshot).
    Snapshot {
        /// Read sysfs/procfs under DIR instead of / (a fixture tree or an unpacked gather
        /// archive; absent: this machine).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Build the snapshot from tool outputs instead of a machine: `nvidia-smi -q` text,
        /// `nvidia-smi -q -x` XML and/or `lstopo --of xml` (recognised from content).
        #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with = "root")]
        import: Vec<PathBuf>,
    },
    /// Archive exactly the files the probe reads, for bug reports and test fixtures.
    Gather {
        /// Where to write the .tar.gz archive.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Read sysfs/procfs under DIR instead of / (a fixture tree or an unpacked gather
        /// archive; absent: this machine).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Preflight: find what breaks LLM servers on this host, with evidence and the exact fix.
    Check {
        /// Check a snapshot written by `inferscope snapshot` instead of the machine.
        #[arg(long, value_name = "FILE", conflicts_with = "root")]
        snapshot: Option<PathBuf>,
        /// Read sysfs/procfs under DIR instead of / (a fixture tree or an unpacked gather
        /// archive; absent: this machine).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Also check running server processes (CPU affinity, memory placement): one PID, or
        /// several (repeat, space- or comma-separated), as `watch` and `serve` take them.
        #[arg(long = "pid", value_name = "PID", num_args = 1.., value_delimiter = ',')]
        pids: Vec<u32>,
        /// Also check a serving plan: the JSON written by `inferscope plan --json`.
        #[arg(long, value_name = "FILE")]
        plan: Option<PathBuf>,
        /// Run only these checks (comma-separated codes, e.g. MEM006,GPU010).
        #[arg(long, value_name = "CODES", value_delimiter = ',')]
        only: Vec<String>,
        /// Exit 1 when a failure of at least this severity is found.
        #[arg(long, value_name = "SEVERITY", default_value = "error", value_parser = ["info", "warn", "error"])]
        fail_on: String,
        /// Thresholds and per-check overrides (TOML; see docs/checks/README.md).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// List the checks and exit.
        #[arg(long)]
        list: bool,
        /// Also list passed checks.
        #[arg(long, short)]
        verbose: bool,
        /// Judge every GPU, including those CUDA_VISIBLE_DEVICES in the captured environment
        /// hides from the server (by default reported as not in scope).
        #[arg(long)]
        all_gpus: bool,
        /// Print JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
    /// Will this model and these flags fit, how many users, how fast. Paste the serving command
    /// after `--` (the engines' commands: `inferscope::help::plan_about`).
    #[command(about = inferscope::help::plan_about())]
    Plan(Box<PlanCli>),
    /// Explain a check code: what it detects, why it matters, how to fix and silence it.
    Explain {
        /// Check code, e.g. MEM006.
        code: String,
    },
    /// Run a server bound to the CPUs and NUMA memory of its GPUs (exec: its signals and exit
    /// code pass through), or print the equivalent numactl/docker/systemd/k8s settings.
    Run(commands::run::RunArgs),
    /// Benchmark an OpenAI-compatible server (TTFT, TPOT, ITL, E2E, throughput, goodput) with a
    /// bounded, seeded load; write the documented result file.
    Bench(Box<commands::bench::BenchArgs>),
    /// Find the best server configuration for a workload and an SLO: start each candidate of a
    /// --set grid, benchmark it, rank them, and judge the winner against the baseline.
    Tune(Box<commands::tune::TuneArgs>),
    /// Compare two bench results: every metric, significance from repeats or traces, keep, roll
    /// back or inconclusive (exit 1 on roll back; inconclusive exits 0 unless
    /// --fail-on-inconclusive).
    Compare(commands::compare::CompareArgs),
    /// Memory forensics: diagnose an OOM message, analyse a PyTorch memory snapshot.
    #[command(subcommand)]
    Mem(commands::mem::MemCommand),
    /// Sample GPUs and processes (memory, NUMA placement, CPUs, PCIe) into JSON lines, with a
    /// live table and a summary: leak/creep, remote-node drift, PCIe saturation.
    Watch(commands::watch::WatchArgs),
    /// Serve Prometheus metrics: Snapshot facts, check results and watch samples.
    Serve(commands::serve::ServeArgs),
    /// Node Feature Discovery labels (GPU model and count, NVLink, largest tensor-parallel group
    /// on one NUMA node, GPUs per NUMA node, failing checks) for Kubernetes scheduling.
    Labels(commands::labels::LabelsArgs),
    /// Compare the snapshots of several nodes: what differs, the odd node out first (exit 1 when
    /// they differ).
    Diff(commands::diff::DiffArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(hide = true)]
    Completions {
        /// Shell to complete for.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into --dir.
    #[command(hide = true)]
    Man {
        /// Write inferscope.1 and inferscope-COMMAND.1 pages into DIR instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show the GPU/NIC link matrix (as `nvidia-smi topo -m`) and the NUMA layout.
    Topo {
        /// Read a snapshot written by `inferscope snapshot` instead of the machine.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["root", "from_nvidia_smi"])]
        snapshot: Option<PathBuf>,
        /// Read pasted `nvidia-smi topo -m` (or `-mp`) text instead of the machine.
        #[arg(long, value_name = "FILE", conflicts_with = "root")]
        from_nvidia_smi: Option<PathBuf>,
        /// Read sysfs/procfs under DIR instead of / (a fixture tree or an unpacked gather
        /// archive; absent: this machine).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// `inferscope plan` flags.
#[derive(Debug, clap::Args)]
struct PlanCli {
    /// Model: a catalog id (`meta-llama/Llama-3.1-8B-Instruct`), a local Hugging Face folder, a
    /// config.json or a GGUF file. Taken from the serving command when omitted.
    #[arg(long, value_name = "ID|PATH")]
    model: Option<String>,
    /// GPU model from the catalog (`h100-sxm`, `L40S`, `NVIDIA A100-SXM4-80GB`, `rtx-4090`).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["snapshot", "root"])]
    gpu: Option<String>,
    /// An unlisted GPU, by the total memory PyTorch reports for it.
    #[arg(long, value_name = "GIB", conflicts_with_all = ["gpu", "snapshot", "root"])]
    gpu_memory_gib: Option<f64>,
    /// GPUs available (default: the machine's count, or 8 with --gpu).
    #[arg(long, value_name = "N")]
    gpus: Option<u32>,
    /// Plan for the GPUs of a snapshot file instead of this machine.
    #[arg(long, value_name = "FILE", conflicts_with = "root")]
    snapshot: Option<PathBuf>,
    /// Plan for the GPUs of a tree read under DIR.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Tensor-parallel size.
    #[arg(long, value_name = "N")]
    tp: Option<u32>,
    /// Pipeline-parallel size.
    #[arg(long, value_name = "N")]
    pp: Option<u32>,
    /// Context length.
    #[arg(long, value_name = "TOKENS")]
    max_model_len: Option<u64>,
    /// Share of GPU memory the engine may use.
    #[arg(long, value_name = "FRACTION")]
    gpu_memory_utilization: Option<f64>,
    /// KV cache dtype (auto, fp8).
    #[arg(long, value_name = "DTYPE")]
    kv_cache_dtype: Option<String>,
    /// Weight quantization (awq, gptq, fp8, ...), for a checkpoint described as its base model;
    /// or a GGUF file type (Q4_K_M, Q4_0, Q5_K_M, Q8_0, F16, ...) sized tensor by tensor.
    #[arg(long, value_name = "METHOD")]
    quantization: Option<String>,
    /// Maximum concurrent sequences.
    #[arg(long, value_name = "N")]
    max_num_seqs: Option<u32>,
    /// Tokens per scheduler step.
    #[arg(long, value_name = "N")]
    max_num_batched_tokens: Option<u64>,
    /// No CUDA graphs.
    #[arg(long)]
    enforce_eager: bool,
    /// Engine release whose rules to apply (e.g. 0.6.4, 0.20.0; default: newest modelled).
    #[arg(long, value_name = "VERSION")]
    engine_version: Option<String>,
    /// Revision of --model ORG/NAME in the Hugging Face cache or on the Hub: branch, tag or
    /// commit (default main); given, the Hub is asked before the embedded catalog.
    #[arg(long, value_name = "REV")]
    revision: Option<String>,
    /// Concurrent requests of max_model_len the deployment must serve.
    #[arg(long, value_name = "N")]
    concurrency: Option<u32>,
    /// Rank GPU type × count × quantization × KV dtype from the catalog for this workload.
    #[arg(long)]
    find: bool,
    /// With --find: decode tokens/s each sequence must get (the engine's expected figure).
    #[arg(long, value_name = "TOKENS_PER_S", requires = "find")]
    min_tokens_per_s: Option<f64>,
    /// Prompt tokens for the time-to-first-token bound (default min(1024, max_model_len)); with
    /// --find and --output-len, the context is their sum.
    #[arg(long, value_name = "TOKENS")]
    input_len: Option<u64>,
    /// With --find and --input-len: output tokens per request (context = input + output).
    #[arg(long, value_name = "TOKENS", requires = "find")]
    output_len: Option<u64>,
    /// With --find: rows to show (default 25 in the table, all in --json).
    #[arg(long, value_name = "N", requires = "find")]
    top: Option<usize>,
    /// With --find: USD per GPU-hour per catalog GPU (CSV `GPU,USD`; docs/planner.md); ranks
    /// by cost.
    #[arg(long, value_name = "FILE", requires = "find")]
    prices: Option<PathBuf>,
    /// With --find: node counts to rank layouts over (aggregated and P/D), e.g. 1,2,4.
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires_all = ["find", "gpu"])]
    nodes: Vec<u32>,
    /// With --nodes: GPUs per node (default 8).
    #[arg(long, value_name = "N", requires = "nodes")]
    gpus_per_node: Option<u32>,
    /// With --nodes: the network between nodes (ib-ndr, ib-hdr, roce-400, roce-200, eth-100,
    /// nvlink-domain; default ib-ndr).
    #[arg(long, value_name = "NET", requires = "nodes", value_parser = |s: &str| inferscope_launch::parse_network(s).map_err(|e| e.to_string()))]
    network: Option<inferscope_plan::cluster::Network>,
    /// With --nodes: latency targets, e.g. ttft=2s,tpot=50ms.
    #[arg(long, value_name = "LIST", requires = "nodes")]
    slo: Option<inferscope_bench::stats::Slo>,
    /// With --nodes: requests per second the deployment must serve.
    #[arg(long, value_name = "R", requires = "nodes")]
    rate: Option<f64>,
    /// Disk read speed for the model-load bound, GB/s (default 2).
    #[arg(long, value_name = "GBPS")]
    disk_gbps: Option<f64>,
    /// Engine of the expected speed figures (the engines with a fit:
    /// `inferscope::help::speed_engine_help`).
    #[arg(long, value_name = "ENGINE", help = inferscope::help::speed_engine_help())]
    engine: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// The serving command, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl PlanCli {
    fn into_args(self) -> commands::plan::PlanArgs {
        commands::plan::PlanArgs {
            model: self.model,
            gpu: self.gpu,
            gpu_memory_gib: self.gpu_memory_gib,
            gpus: self.gpus,
            snapshot: self.snapshot,
            root: self.root,
            flags: commands::plan::EngineFlags {
                tp: self.tp,
                pp: self.pp,
                max_model_len: self.max_model_len,
                gpu_memory_utilization: self.gpu_memory_utilization,
                kv_cache_dtype: self.kv_cache_dtype,
                quantization: self.quantization,
                max_num_seqs: self.max_num_seqs,
                max_num_batched_tokens: self.max_num_batched_tokens,
                enforce_eager: self.enforce_eager,
            },
            engine_version: self.engine_version,
            revision: self.revision,
            concurrency: self.concurrency,
            find: self.find,
            min_tokens_per_s: self.min_tokens_per_s,
            json: self.json,
            input_len: self.input_len,
            disk_gbps: self.disk_gbps,
            engine: self.engine,
            output_len: self.output_len,
            top: self.top,
            prices: self.prices,
            cluster: commands::plan::ClusterFlags {
                nodes: self.nodes,
                gpus_per_node: self.gpus_per_node,
                network: self.network,
                slo: self.slo,
                rate: self.rate,
            },
            command: self.command,
        }
    }
}

fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Snapshot { root, import } => {
            commands::snapshot::run(&root_or_slash(root), &import, out)
        }
        Command::Gather { out: file, root } => {
            commands::gather::run(&root_or_slash(root), &file, out)
        }
        Command::Check {
            snapshot,
            root,
            pids,
            plan,
            only,
            fail_on,
            config,
            list,
            verbose,
            all_gpus,
            json,
        } => {
            if list {
                render::check::write_list(out)?;
                return Ok(ExitCode::SUCCESS);
            }
            let args = commands::check::CheckArgs {
                snapshot: snapshot.as_deref(),
                root: root.as_deref(),
                pids,
                plan: plan.as_deref(),
                only,
                fail_on: fail_on.parse().map_err(anyhow::Error::msg)?,
                config: config.as_deref(),
                json,
                verbose,
                all_gpus,
            };
            commands::check::run(&args, out)
        }
        Command::Explain { code } => commands::check::explain(&code, out),
        Command::Plan(p) => commands::plan::run(&(*p).into_args(), out),
        Command::Run(args) => commands::run::run(args, out),
        Command::Bench(args) => commands::bench::run(*args, out),
        Command::Tune(args) => commands::tune::run(*args, out),
        Command::Compare(args) => commands::compare::run(args, out),
        Command::Mem(cmd) => commands::mem::run(cmd, out),
        Command::Watch(args) => commands::watch::run(args, out),
        Command::Serve(args) => commands::serve::run(args, out),
        Command::Labels(args) => commands::labels::run(&args, out),
        Command::Diff(args) => commands::diff::run(&args, out),
        Command::Completions { shell } => {
            commands::completions::completions(shell, &mut Cli::command(), out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: None } => {
            commands::completions::man(Cli::command(), out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: Some(dir) } => {
            for p in commands::completions::man_pages(Cli::command(), &dir)? {
                writeln!(out, "{}", p.display())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Topo {
            snapshot,
            root,
            from_nvidia_smi,
            json,
        } => match from_nvidia_smi {
            Some(file) => commands::topo::run_imported(&file, json, out),
            None => commands::topo::run(snapshot.as_deref(), root.as_deref(), json, out),
        },
    }
}

/// `--root DIR`, absent meaning the machine itself (docs/cli.md).
fn root_or_slash(root: Option<PathBuf>) -> PathBuf {
    root.unwrap_or_else(|| PathBuf::from("/"))
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    // `--json` writes through serde_json, whose error keeps the I/O error's kind only
    err.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(io::ErrorKind::BrokenPipe))
    })
}

/// The error as printed: each cause on its own line, every line bounded and with its control
/// characters escaped (a message can quote a megabyte of a hostile file or server answer).
fn error_text(e: &anyhow::Error) -> String {
    use inferscope_host::quote::{clip_line, escape_controls};
    let line = |s: String| escape_controls(&clip_line(&s)).into_owned();
    let mut msg = format!("inferscope: error: {}", line(e.to_string()));
    for cause in e.chain().skip(1) {
        msg.push_str(&format!("\n  caused by: {}", line(cause.to_string())));
    }
    msg
}

fn main() -> ExitCode {
    // `tune`'s keeper (hidden): started by tune itself, never by a user.
    if let Some(code) = commands::tune::keeper::main_if_keeper() {
        return code;
    }
    // HTTPS (the Hub, `bench --url https://…`, `diff` of exporters): rustls needs its crypto
    // provider installed before any client is built, whichever command builds one.
    inferscope_bench::init_tls();
    let cli = Cli::parse();
    let stdout = io::stdout();
    // Every command prints through the escaping writer: no control character from a snapshot,
    // a server or a log reaches the terminal raw (docs/SECURITY.md).
    let mut out = render::escape::Escape::new(io::BufWriter::new(stdout.lock()));
    let result = run(cli, &mut out).and_then(|code| {
        out.into_inner()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_text(&e));
            ExitCode::from(2)
        }
    }
}
