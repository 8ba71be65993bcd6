//! `inferscope`: the command-line front end. Arguments are parsed and validated here, each
//! command is a thin function over the library crates, and every renderer writes to any
//! `impl Write` so output is testable. Errors are printed once, with their chain, and map to
//! exit codes: 0 fine, 1 findings at or above the chosen severity, 2 usage or input error.
//! A closed pipe (`inferscope snapshot | head`) is success, not an error.

use clap::{Parser, Subcommand};
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
        /// Read sysfs/procfs under DIR instead of / (a fixture tree or unpacked gather archive).
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
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
        /// Read under DIR instead of /.
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
    /// Preflight: find what breaks LLM servers on this host, with evidence and the exact fix.
    Check {
        /// Check a snapshot written by `inferscope snapshot` instead of the machine.
        #[arg(long, value_name = "FILE", conflicts_with = "root")]
        snapshot: Option<PathBuf>,
        /// Read sysfs/procfs under DIR instead of /.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Also check a running server process (CPU affinity, memory placement).
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
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
        /// Print JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
    /// Explain a check code: what it detects, why it matters, how to fix and silence it.
    Explain {
        /// Check code, e.g. MEM006.
        code: String,
    },
    /// Run a server bound to the CPUs and NUMA memory of its GPUs (exec: its signals and exit
    /// code pass through), or print the equivalent numactl/docker/systemd/k8s settings.
    Run(commands::run::RunArgs),
    /// Memory forensics: diagnose an OOM message, analyse a PyTorch memory snapshot.
    #[command(subcommand)]
    Mem(commands::mem::MemCommand),
    /// Show the GPU/NIC link matrix (as `nvidia-smi topo -m`) and the NUMA layout.
    Topo {
        /// Read a snapshot written by `inferscope snapshot` instead of the machine.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["root", "from_nvidia_smi"])]
        snapshot: Option<PathBuf>,
        /// Read pasted `nvidia-smi topo -m` (or `-mp`) text instead of the machine.
        #[arg(long, value_name = "FILE", conflicts_with = "root")]
        from_nvidia_smi: Option<PathBuf>,
        /// Read sysfs/procfs under DIR instead of /.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
}

fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Snapshot { root, import } => commands::snapshot::run(&root, &import, out),
        Command::Gather { out: file, root } => commands::gather::run(&root, &file, out),
        Command::Check {
            snapshot,
            root,
            pid,
            plan,
            only,
            fail_on,
            config,
            list,
            verbose,
            json,
        } => {
            if list {
                render::check::write_list(out)?;
                return Ok(ExitCode::SUCCESS);
            }
            let args = commands::check::CheckArgs {
                snapshot: snapshot.as_deref(),
                root: root.as_deref(),
                pid,
                plan: plan.as_deref(),
                only,
                fail_on: fail_on.parse().map_err(anyhow::Error::msg)?,
                config: config.as_deref(),
                json,
                verbose,
            };
            commands::check::run(&args, out)
        }
        Command::Explain { code } => commands::check::explain(&code, out),
        Command::Run(args) => commands::run::run(args, out),
        Command::Mem(cmd) => commands::mem::run(cmd, out),
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

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run(cli, &mut out).and_then(|code| {
        out.flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = format!("inferscope: error: {e}");
            for cause in e.chain().skip(1) {
                msg.push_str(&format!("\n  caused by: {cause}"));
            }
            eprintln!("{msg}");
            ExitCode::from(2)
        }
    }
}
