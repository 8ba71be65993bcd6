//! How many streamed tokens per second the bench client sustains on one core, against a server
//! that is not the bottleneck. A benchmark, not a test: it prints figures and asserts nothing.
//!
//! `cargo bench -p inferscope-bench --bench client_rate [-- SECONDS STREAMS TOKENS]`
//! (defaults 10 s, 32 streams, 256 tokens per request).
//!
//! The server is this same executable started again as a child process (`--serve`), pinned to
//! CPU 0: the workspace's scripted server (crates/inferscope-testkit, `Mode::Flood`), HTTP/1.1
//! with keep-alive, each token its own chunked-encoding chunk and its own `write` (as vLLM and
//! llama.cpp send them), no pacing. The
//! client is the real `run::execute` (the code `inferscope bench` runs) in this process, pinned
//! to CPU 1; its CPU is this process's, so the server's is not counted.

use inferscope_bench::client::{Api, RequestSettings};
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::run::{BenchPlan, execute};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::Slo;
use inferscope_testkit::{Mode, Script};
use std::process::{Command, Stdio};
use std::time::Duration;

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity only touch
    // the set we pass. A failure (fewer CPUs) leaves the thread unpinned, which is reported.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("could not pin to CPU {cpu}; running unpinned");
        }
    }
}

/// The server process: the workspace's scripted server (crates/inferscope-testkit) in
/// [`Mode::Flood`], on CPU 0; its port goes to `port_file`.
fn serve(port_file: &str) -> std::io::Result<()> {
    pin(0);
    let server = Script::new(Mode::Flood).model("flood").start_in_thread();
    std::fs::write(port_file, server.addr.port().to_string())?;
    loop {
        std::thread::park();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, port_file, ..] = args.as_slice()
        && flag == "--serve"
    {
        return Ok(serve(port_file)?);
    }
    // `cargo bench` passes `--bench`; positional numbers are ours.
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let secs = nums.first().copied().unwrap_or(10);
    let streams = nums.get(1).copied().unwrap_or(32) as u32;
    let tokens = nums.get(2).copied().unwrap_or(256) as u32;

    let dir = tempfile::tempdir()?;
    let port_file = dir.path().join("port");
    let port_path = port_file.to_string_lossy().into_owned();
    let mut server = Command::new(std::env::current_exe()?)
        .args(["--serve", &port_path])
        .stdout(Stdio::null())
        .spawn()?;
    let mut port = None;
    for _ in 0..200 {
        if let Ok(p) = std::fs::read_to_string(&port_file)
            && let Ok(p) = p.trim().parse::<u16>()
        {
            port = Some(p);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let Some(port) = port else {
        let _ = server.kill();
        return Err("the flood server did not start".into());
    };
    pin(1);
    let plan = BenchPlan {
        url: format!("http://127.0.0.1:{port}"),
        request: RequestSettings {
            api: Api::Completions,
            model: String::new(),
            stream: true,
            ignore_eos: true,
            temperature: 0.0,
            timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(10),
        },
        schedule: Schedule::Closed {
            concurrency: streams,
        },
        sweep_steps: 0,
        limits: Limits {
            requests: None,
            duration: Some(Duration::from_secs(secs)),
        },
        warmup: Warmup::Duration(Duration::from_millis(500)),
        max_duration: Duration::from_secs(secs + 30),
        max_inflight: streams,
        max_send_lag: Duration::from_secs(1),
        max_error_rate: 0.5,
        dataset: DatasetSpec::Random {
            input: 8,
            output: tokens,
            spread: 0.0,
        },
        default_max_tokens: tokens,
        seed: 1,
        slo: "ttft=10s".parse::<Slo>()?,
        min_requests: 1,
        started_at: String::new(),
        tool: "client_rate".into(),
        trace: None,
        tokenizer: None,
        server_metrics: None,
        replicas: Default::default(),
    };
    let out = execute(&plan, None, None);
    let _ = server.kill();
    let _ = server.wait();
    let r = out?.result;
    let c = &r.client;
    let cpu = c.cpu_user_s + c.cpu_system_s;
    println!(
        "client_rate: {streams} streams x {tokens} tokens for {secs} s, client on CPU 1, server on CPU 0"
    );
    println!(
        "  measured: {} requests, {} output tokens, {:.0} output tokens/s",
        r.stats.requests.completed, r.stats.output_tokens, r.stats.output_tokens_per_s
    );
    println!(
        "  client CPU (whole run, warm-up included): {:.2} s user + {:.2} s system over {:.2} s wall = {:.0} % of one core; {:.2} µs per token",
        c.cpu_user_s,
        c.cpu_system_s,
        c.wall_s,
        100.0 * cpu / c.wall_s.max(1e-9),
        c.cpu_s_per_output_token.unwrap_or(f64::NAN) * 1e6
    );
    if !r.valid {
        println!("  run not valid: {}", r.invalid_reasons.join("; "));
    }
    Ok(())
}
