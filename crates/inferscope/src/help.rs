//! Help texts that list engines, built from the engines' rooms and the parsers' registrations
//! (issue 32: the binary names no engine of its own), so a new engine appears in them without
//! an edit here.

use inferscope_plan::engines::{Engine, room};

fn names(engines: impl Iterator<Item = Engine>) -> Vec<&'static str> {
    engines.map(Engine::name).collect()
}

/// `plan`'s about: the servers whose commands it reads.
pub fn plan_about() -> String {
    let commands: Vec<&str> = Engine::ALL
        .into_iter()
        .filter_map(|e| room(e).help_command())
        .collect();
    format!(
        "Will this model and these flags fit, how many users, how fast. Paste the serving command \
         after `--` ({})",
        commands.join(", ")
    )
}

/// `plan --engine`: the engines with speed figures.
pub fn speed_engine_help() -> String {
    format!(
        "Engine of the expected speed figures: {} (default: the pasted command's engine, else \
         vllm)",
        inferscope_plan::speed::engines::engine_names().join(", ")
    )
}

/// `mem startup`'s about: the engines whose start-up logs are read.
pub fn startup_about() -> String {
    format!(
        "Read a {} start-up log: the memory the engine measured, the planner's prediction beside \
         it, and for a failed start-up the diagnosis and fixes",
        inferscope_mem::startup::engines_read()
    )
}

/// `bench --server-metrics`: the engines whose metrics are recorded.
pub fn server_metrics_help() -> String {
    format!(
        "Scrape engine metrics (Prometheus text) from this URL while the run goes, instead of the \
         default URL/metrics ({})",
        inferscope_bench::server_metrics::engines_known()
    )
}

/// `run --device-ids`: the engines that refuse UUIDs in `CUDA_VISIBLE_DEVICES`.
pub fn device_ids_help() -> String {
    let refusing = names(
        Engine::ALL
            .into_iter()
            .filter(|e| room(*e).environment().is_ok_and(|r| !r.accepts_uuids)),
    );
    format!(
        "How CUDA_VISIBLE_DEVICES names the GPUs: index (with CUDA_DEVICE_ORDER=PCI_BUS_ID), or \
         uuid (refused for engines that reject UUIDs: {})",
        refusing.join(", ")
    )
}
