//! `inferscope-bench`: measure an OpenAI-compatible LLM server honestly, and decide whether a
//! change should be kept.
//!
//! The crate follows the project's capture / reason / show split:
//!
//! * **Pure**: [`schedule`] (when each request is meant to be sent, from a seed), [`sse`]
//!   (incremental, bounded Server-Sent-Events parser), [`dataset`] (prompts), [`stats`] (HDR
//!   histograms over raw records), [`compare`] (metric deltas, verdict), [`significance`] (request-level bootstrap, between-run tests, sizing), [`plot`]
//!   (hand-written SVG) and [`result`] (the documented result file).
//! * **Tokens**: [`tokenizer`] counts generated text with a local `tokenizer.json` when the
//!   server reports no usage.
//! * **Tuning** (pure): [`tune`] (placeholders, grid, successive halving, Pareto front, journal
//!   lines; [`tune::ranking`], [`tune::verdict`], [`tune::report`]) and [`capacity`] (the highest
//!   Poisson rate meeting an SLO attainment target).
//! * **I/O**: [`client`] (one request over reqwest/tokio, recording every chunk time),
//!   [`exec`] (drives one schedule through the client and collects [`record::RequestRecord`]s),
//!   [`capacity::find`] (the search's probe runs), and `tune`'s session
//!   ([`tune::session`], [`tune::rounds`], [`tune::journal`], [`tune::server`],
//!   [`tune::keeper`]): this crate also **spawns and stops the candidate servers** of
//!   `inferscope tune`, each in its own process group under the keeper, and writes the journal
//!   and report files. What it needs of the binary (the planner, NVML, `run --emit`, the
//!   bounded reader) comes through [`tune::session::Host`].
//!
//! Design decisions worth knowing:
//!
//! * The client records facts (intended send time, actual send time, every content chunk's
//!   arrival, usage, status, error class) and nothing else; every figure is computed afterwards.
//!   Latencies are measured from the *intended* send time so a saturated client or server cannot
//!   hide its queueing (coordinated omission).
//! * Every run is bounded: sending stops at `--requests`/`--duration` (or `--max-duration`), every
//!   request at `--timeout` (and `--idle-timeout` between bytes), so a server that never ends a
//!   stream cannot hang a run; SSE lines are capped at 1 MiB and bodies at 16 MiB.
//! * tokio timers have millisecond granularity: the open-loop dispatcher sleeps until absolute
//!   deadlines computed from the schedule and sends every overdue arrival on each wake, so timer
//!   error never accumulates and never shortens a measured latency.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod capacity;
pub mod client;
pub mod compare;
pub mod dataset;
pub mod energy;
pub mod exec;
pub mod explain;
pub mod metric;
pub mod plot;
pub mod record;
pub mod replicas;
pub mod result;
pub mod reuse;
pub mod run;
pub mod schedule;
pub mod scrape;
pub mod server_metrics;
pub mod sessions;
pub mod setup;
pub mod significance;
pub mod sse;
pub mod stats;
pub mod tokenizer;
pub mod tune;
pub mod workload;

/// Whether this build can talk HTTPS (the `tls` feature: rustls with ring).
pub const TLS_ENABLED: bool = cfg!(feature = "tls");

/// Install rustls' ring provider for HTTPS clients built outside this crate (the Hub client of
/// `plan`); a no-op without the `tls` feature or when already installed.
pub fn init_tls() {
    #[cfg(feature = "tls")]
    {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Durations are parsed one way across the tool (issue 21): the host model's parser, re-exported
/// here so bench's callers keep their import path.
pub use inferscope_host::units::{DurationError, parse_duration};
