//! The scripted server (crates/inferscope-testkit, shared by every test and benchmark) and the
//! client side the bench tests build the same way.

#![allow(dead_code)]

#[allow(unused_imports)]
pub use inferscope_testkit::{Mode, Script, TestServer, pin_this_thread, start, start_in_thread};
use std::time::Duration;

/// The client's runtime, as the product builds it (one thread): the tests measure what users run.
pub fn runtime() -> tokio::runtime::Runtime {
    inferscope_bench::run::client_runtime().unwrap()
}

/// Completions requests to the scripted server, with these time limits.
pub fn completions(
    stream: bool,
    timeout: Duration,
    idle_timeout: Duration,
) -> inferscope_bench::client::RequestSettings {
    inferscope_bench::client::RequestSettings {
        api: inferscope_bench::client::Api::Completions,
        model: "scripted".into(),
        stream,
        ignore_eos: true,
        temperature: 0.0,
        timeout,
        idle_timeout,
    }
}

pub mod streams;
