//! The environment LMDeploy accepts and breaks on, and the endpoints its api_server serves
//! (for `run`'s environment check and `bench`'s readiness wait and metrics scrape). Pure.

use super::Backend;
use super::args::LmdeployArgs;
use crate::memory::EngineVersion;

/// What one LMDeploy start-up accepts and does to its environment (the shape of
/// `inferscope_launch::engine::Rules`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvRules {
    /// Name used in messages and JSON.
    pub name: &'static str,
    /// Whether `CUDA_VISIBLE_DEVICES` may hold `GPU-...` UUIDs for this start-up.
    pub accepts_uuids: bool,
    /// Why (source file and function, release).
    pub uuid_source: &'static str,
    /// Set when the engine sets `OMP_NUM_THREADS` itself: the source. `None`: it does not.
    pub sets_omp_threads: Option<&'static str>,
    /// Set when `expandable_segments:True` in `PYTORCH_CUDA_ALLOC_CONF` is not honoured for
    /// this start-up: (what happens, source).
    pub expandable_conflict: Option<(&'static str, &'static str)>,
    /// Variables the engine sets itself when unset: (variable, source).
    pub sets_env: &'static [(&'static str, &'static str)],
}

const UUID_OK: &str = "TurboMind: lmdeploy/turbomind/turbomind.py _update_engine_config (0.18.0) uses devices = range(device_num), CUDA ordinals the runtime maps through CUDA_VISIBLE_DEVICES (indices or GPU- UUIDs); PyTorch with one GPU: executor/uni_executor.py uses the current device";
const UUID_RAY: &str = "PyTorch engine with tp×dp > 1 runs the Ray executor (lmdeploy/pytorch/engine/executor/__init__.py get_distributed_executor_backend, 0.18.0), whose RayWorkerWrapper.set_assigned_cuda_device looks Ray's integer GPU id up with CUDA_VISIBLE_DEVICES.split(',').index(...): a UUID list raises ValueError";
const EXPANDABLE_RAY: (&str, &str) = (
    "the PyTorch engine's Ray workers drop expandable_segments:True with the warning '\"expandable_segments:True\" is not supported.'",
    "lmdeploy/pytorch/engine/executor/ray_executor.py _update_env_cuda_alloc_conf (0.18.0)",
);
const SETS_ENV: &[(&str, &str)] = &[(
    "TM_LOG_LEVEL",
    "lmdeploy/serve/openai/api_server.py serve (0.18.0): set from --log-level when unset",
)];

/// The PyTorch engine runs Ray workers for this start-up (tp × dp > 1 on CUDA).
fn uses_ray(a: &LmdeployArgs) -> bool {
    a.backend == Some(Backend::Pytorch) && a.tp.saturating_mul(a.dp) > 1
}

/// Environment rules for one command. With no `--backend`, TurboMind is assumed (the default
/// when it supports the model); the Ray rules apply only to `--backend pytorch` with several
/// GPUs.
pub fn rules(a: &LmdeployArgs) -> EnvRules {
    let ray = uses_ray(a);
    EnvRules {
        name: "LMDeploy",
        accepts_uuids: !ray,
        uuid_source: if ray { UUID_RAY } else { UUID_OK },
        // 0.18.0 sets no OMP_NUM_THREADS anywhere (its only thread knobs are Ray's)
        sets_omp_threads: None,
        expandable_conflict: ray.then_some(EXPANDABLE_RAY),
        sets_env: SETS_ENV,
    }
}

/// The api_server's endpoints for one release and command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Readiness: 200 once the engine is up (`None`: the release has none; poll `models`).
    pub health: Option<&'static str>,
    /// Served models (OpenAI).
    pub models: &'static str,
    /// Prometheus metrics, when this start-up serves them.
    pub metrics: Option<&'static str>,
    /// Why metrics are or are not served.
    pub metrics_source: &'static str,
}

const fn ver(major: u32, minor: u32) -> EngineVersion {
    EngineVersion {
        major,
        minor,
        patch: 0,
    }
}

/// Endpoints of `lmdeploy serve api_server` at `version` (`None`: the newest read) for these
/// flags. `/health` since v0.5.0 (`lmdeploy/serve/openai/api_server.py`; 0.18.0
/// `serve/openai/endpoints/management.py` `health`: 200 when healthy or sleeping, 503 else);
/// `/metrics` mounted by `api_server.py` `mount_metrics` when `enable_metrics`: absent before
/// 0.10.0, `--enable-metrics` (off by default) in 0.10.x, on unless `--disable-metrics` from
/// 0.11.0.
pub fn endpoints(version: Option<EngineVersion>, a: &LmdeployArgs) -> Endpoints {
    let v = version.unwrap_or(super::NEWEST_READ);
    let (metrics, metrics_source) = if v < ver(0, 10) {
        (
            None,
            "no Prometheus endpoint before 0.10.0 (lmdeploy/metrics absent)",
        )
    } else if v < ver(0, 11) {
        if a.metrics == Some(true) {
            (Some("/metrics"), "0.10.x: --enable-metrics given")
        } else {
            (None, "0.10.x: metrics off unless --enable-metrics")
        }
    } else if a.metrics == Some(false) {
        (None, "--disable-metrics given")
    } else {
        (
            Some("/metrics"),
            "on by default since 0.11.0 (lmdeploy/cli/utils.py ArgumentHelper.disable_metrics)",
        )
    };
    Endpoints {
        health: (v >= ver(0, 5)).then_some("/health"),
        models: "/v1/models",
        metrics,
        metrics_source,
    }
}

/// Metric names the api_server exports (`lmdeploy/metrics/loggers.py` `PrometheusStatLogger`,
/// the same names in 0.10.0 and 0.18.0): (bench's meaning, metric). Histograms add
/// `_bucket`/`_sum`/`_count`.
pub const METRICS: &[(&str, &str)] = &[
    ("running_requests", "lmdeploy:num_requests_running"),
    ("waiting_requests", "lmdeploy:num_requests_waiting"),
    ("kv_cache_usage_fraction", "lmdeploy:gpu_cache_usage_perc"),
    ("prompt_tokens", "lmdeploy:prompt_tokens_total"),
    ("generation_tokens", "lmdeploy:generation_tokens_total"),
    ("ttft_seconds", "lmdeploy:time_to_first_token_seconds"),
    ("tpot_seconds", "lmdeploy:time_per_output_token_seconds"),
    ("finished_requests", "lmdeploy:request_success_total"),
    ("queue_seconds", "lmdeploy:request_queue_time_seconds"),
];

/// Does a Prometheus exposition text come from LMDeploy? (Any `lmdeploy:` metric name at the
/// start of a sample or `# TYPE` line.)
pub fn is_lmdeploy_metrics(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.strip_prefix("# TYPE ").unwrap_or(l);
        l.starts_with("lmdeploy:")
    })
}
