//! # The LMDeploy room
//!
//! Everything inferscope knows about LMDeploy (`lmdeploy serve api_server MODEL ...`, PyPI
//! `lmdeploy`), in one place: its command ([`args`]), its KV-cache accounting per backend and
//! release ([`memory`]), the start-up log lines that state its KV cache ([`log`]), the
//! environment it accepts and breaks on and its readiness/metrics endpoints ([`env`]), and the
//! release rules with their sources ([`engine_rules`]).
//!
//! Every rule was read from the source: the 0.18.0 wheel (`pip download lmdeploy==0.18.0
//! --no-deps --only-binary :all:`; Python files and the strings of
//! `turbomind/_turbomind.*.so`) and, for the C++ side and older releases, the tags of
//! github.com/InternLM/lmdeploy (v0.1.0a2 … v0.16.0 and the main branch of 2026-08-21). Each
//! rule names its release, file and function. Pure: no I/O.
//!
//! LMDeploy has two engines behind one command: **TurboMind** (C++/CUDA, the default when it
//! supports the model, `lmdeploy/archs.py` `autoget_backend`) and **PyTorch**
//! (`--backend pytorch`, or the fallback). They size the KV cache differently, so every
//! memory answer takes a [`Backend`].

pub mod args;
pub mod env;
pub mod log;
pub mod memory;
mod room;
pub mod settings;

pub use room::Lmdeploy;

use crate::memory::EngineVersion;
use crate::rules::{Accounting, EngineRules, Rule};

/// Newest release whose source was read.
pub const NEWEST_READ: EngineVersion = EngineVersion {
    major: 0,
    minor: 18,
    patch: 0,
};

/// Stable engine name (`plan --json` `engine_rules.engine`).
pub const ENGINE: &str = "lmdeploy";

/// Which of LMDeploy's two engines serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// TurboMind (C++), the default.
    Turbomind,
    /// The PyTorch engine (`--backend pytorch`).
    Pytorch,
}

impl Backend {
    /// Name as `--backend` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Turbomind => "turbomind",
            Backend::Pytorch => "pytorch",
        }
    }
}

/// `--quant-policy`: the KV-cache storage (`lmdeploy/messages.py` `QuantPolicy`, 0.18.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantPolicy {
    /// 0: the model dtype.
    None,
    /// 4: 4-bit integer K/V with a scale and zero per token and head.
    Int4,
    /// 8: 8-bit integer K/V with a scale and zero per token and head.
    Int8,
    /// 16: FP8 e4m3 K/V, per-tensor scale (PyTorch engine only).
    Fp8,
    /// 17: FP8 e5m2 K/V, per-tensor scale (PyTorch engine only).
    Fp8E5m2,
    /// 42: TurboQuant (K 4-bit, V 2-bit; PyTorch engine only).
    TurboQuant,
}

impl QuantPolicy {
    /// Parse as `--quant-policy` does (`lmdeploy/cli/utils.py` `ArgumentHelper.quant_policy`
    /// `_parse`): a name (`none`, `int4`, `int8`, `fp8`, `fp8_e4m3`, `fp8_e5m2`,
    /// `turbo_quant`, any case) or its number.
    pub fn parse(s: &str) -> Option<QuantPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "0" | "none" => Some(QuantPolicy::None),
            "4" | "int4" => Some(QuantPolicy::Int4),
            "8" | "int8" => Some(QuantPolicy::Int8),
            "16" | "fp8" | "fp8_e4m3" => Some(QuantPolicy::Fp8),
            "17" | "fp8_e5m2" => Some(QuantPolicy::Fp8E5m2),
            "42" | "turbo_quant" => Some(QuantPolicy::TurboQuant),
            _ => None,
        }
    }

    /// The number LMDeploy uses.
    pub fn value(self) -> u32 {
        match self {
            QuantPolicy::None => 0,
            QuantPolicy::Int4 => 4,
            QuantPolicy::Int8 => 8,
            QuantPolicy::Fp8 => 16,
            QuantPolicy::Fp8E5m2 => 17,
            QuantPolicy::TurboQuant => 42,
        }
    }
}

fn rule(rule: &str, value: impl Into<String>, source: &str) -> Rule {
    Rule {
        rule: rule.into(),
        value: value.into(),
        source: source.into(),
    }
}

/// The release whose rules apply to `version`, and why another one stands in.
pub fn resolve_version(version: Option<&str>) -> (EngineVersion, Option<String>, Accounting) {
    // `main`/`latest` mean the newest read here, not vLLM's newest (EngineVersion::LATEST)
    let version = version.filter(|t| {
        let t = t.trim().to_ascii_lowercase();
        !(t == "latest" || t.starts_with("main"))
    });
    match version.map(|t| (t, EngineVersion::parse(t))) {
        None => (
            NEWEST_READ,
            Some(format!(
                "LMDeploy version not given: rules of the newest release read, {NEWEST_READ}"
            )),
            Accounting::Modelled,
        ),
        Some((t, None)) => (
            NEWEST_READ,
            Some(format!(
                "LMDeploy version {t:?} not understood: rules of {NEWEST_READ}"
            )),
            Accounting::Approximate,
        ),
        Some((_, Some(v))) if v > NEWEST_READ => (
            NEWEST_READ,
            Some(format!(
                "LMDeploy {v} is newer than the newest release read: rules of {NEWEST_READ}"
            )),
            Accounting::Approximate,
        ),
        Some((_, Some(v))) => (v, None, Accounting::Modelled),
    }
}

/// The release rules that decide one LMDeploy start-up's KV cache, with their sources
/// (`plan --json` key `engine_rules`).
pub fn engine_rules(version: Option<&str>, backend: Backend) -> EngineRules {
    let (v, note, accounting) = resolve_version(version);
    let mut rules = vec![rule(
        "backend",
        backend.as_str(),
        "lmdeploy/cli/serve.py SubCliServe.api_server: --backend (default turbomind), falling back to pytorch when lmdeploy/archs.py autoget_backend finds TurboMind does not support the model",
    )];
    rules.push(memory::fraction_rule(v, backend));
    rules.push(memory::block_rule(v, backend));
    rules.push(rule(
        "kv_dtype",
        "--quant-policy 0: model dtype; 8/4: int8/int4 K and V plus a scale and zero per token and head in the model dtype; 16/17 (fp8) and 42 only on the PyTorch engine",
        "0.18.0 lmdeploy/messages.py QuantPolicy, TurbomindEngineConfig.__post_init__ (refuses FP8); lmdeploy/pytorch/engine/cache_engine/schema.py build_quant_cache_descs; v0.9.0 src/turbomind/kernels/attention/block.h Layout::token_param_size",
    ));
    rules.push(rule(
        "session_len",
        "--session-len (default: the model's max length); TurboMind cuts it to the tokens the KV cache holds",
        "v0.9.0 src/turbomind/models/llama/LlamaBatch.cc LlamaBatch::LlamaBatch ('No enough blocks for `session_len`'); v0.14.0 src/turbomind/engine/engine.cc CreateSequenceManager",
    ));
    rules.push(rule(
        "max_batch_size",
        "--max-batch-size, default by GPU name: 384 on A100/A800, 1024 on H100/H800/H200/L20Y, 128 otherwise; PyTorch keeps one state slot per batch entry",
        "0.18.0 lmdeploy/utils.py get_max_batch_size; lmdeploy/cli/serve.py api_server",
    ));
    if backend == Backend::Pytorch {
        rules.push(memory::runtime_rule(v));
    }
    EngineRules {
        engine: ENGINE.into(),
        requested_version: version.map(str::to_string),
        rules_of: v.to_string(),
        note,
        accounting,
        rules,
    }
}
