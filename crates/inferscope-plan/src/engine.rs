//! Reading the serving command users already have: `inferscope plan -- vllm serve MODEL
//! --tensor-parallel-size 2 ...` (also `python -m vllm.entrypoints.openai.api_server` and the
//! other engines' server commands, each read by its room's parser).
//!
//! The command is parsed, not executed. Each engine's flags that move memory map onto one
//! [`EngineSettings`]; flags known to have no effect on memory are kept in `no_memory_effect`,
//! and every other flag is listed in `ignored` with its value — never silently dropped, so a user
//! sees when the plan did not take a setting into account.

use crate::engines::CommandOptions;
pub use crate::engines::SpeculativeSettings;
pub use crate::engines::llama_cpp::plan::{GpuLayers, LlamaCppSettings};
pub use crate::engines::lmdeploy::settings::LmdeploySettings;
use serde::{Deserialize, Serialize};

/// The one engine identity (issue 32); what each engine does is asked of its room.
pub use inferscope_host::engine::Engine;

/// The engine's server as plan output names it (`text-generation-launcher (TGI)`,
/// `llama-server`): the words golden outputs have always used.
pub fn server_name(engine: Engine) -> &'static str {
    crate::engines::room(engine).server_name()
}

/// Settings that change memory or speed, as the user gave them (`None` = engine default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSettings {
    /// Which engine.
    pub engine: Engine,
    /// Model as given (HF repo id, local path, or GGUF file).
    pub model: Option<String>,
    /// Tensor-parallel size.
    pub tensor_parallel_size: Option<u32>,
    /// Pipeline-parallel size.
    pub pipeline_parallel_size: Option<u32>,
    /// Data-parallel size (replicas of the model inside one server): no per-GPU memory effect,
    /// read for multi-node launches (`run --emit nodes|lws`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_size: Option<u32>,
    /// Maximum context length.
    pub max_model_len: Option<u64>,
    /// vLLM `--max-model-len auto` / `-1` (0.14+): the largest length whose one request fits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_model_len_auto: bool,
    /// vLLM `--kv-cache-memory-bytes` (0.10.2+): the KV cache per GPU, bytes, set directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_memory_bytes: Option<u64>,
    /// Share of GPU memory the engine may use (vLLM `--gpu-memory-utilization`; each room maps
    /// its own flag onto it).
    pub gpu_memory_utilization: Option<f64>,
    /// KV cache dtype (`auto`, `fp8`, `fp8_e5m2`, `q8_0` ...).
    pub kv_cache_dtype: Option<String>,
    /// Maximum concurrent sequences.
    pub max_num_seqs: Option<u32>,
    /// Tokens per scheduler step (chunked prefill budget).
    pub max_num_batched_tokens: Option<u64>,
    /// No CUDA graphs.
    pub enforce_eager: Option<bool>,
    /// Weight quantization method.
    pub quantization: Option<String>,
    /// Weight/activation dtype.
    pub dtype: Option<String>,
    /// KV block size.
    pub block_size: Option<u32>,
    /// Expert parallelism for MoE.
    pub enable_expert_parallel: Option<bool>,
    /// llama.cpp's own settings (`-ngl`, `-ctv`, `-ub`, `-kvu`, `--swa-full`, `-fa`), as keys of
    /// this object in JSON.
    #[serde(flatten)]
    pub llama_cpp: LlamaCppSettings,
    /// The engine keeps no prefix (radix) cache (the room's `--disable-radix-cache`); with a
    /// cap on running requests and no explicit state-pool size, a hybrid model's state pool is
    /// that many states in the room that models one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_radix_cache: bool,
    /// LMDeploy's own settings (`--backend`, `--cache-max-entry-count`, `--quant-policy`,
    /// `--num-gpu-blocks`), as keys of this object in JSON.
    #[serde(flatten)]
    pub lmdeploy: LmdeploySettings,
    /// `--speculative-algorithm` and its flags, and the prefill CUDA graph switch, as keys of
    /// this object in JSON (the room that reads them: `engines::SpeculativeSettings`).
    #[serde(flatten)]
    pub speculative: SpeculativeSettings,
    /// Hybrid (Mamba / linear-attention) state settings, as keys of this object in JSON.
    #[serde(flatten)]
    pub hybrid: HybridSettings,
    /// vLLM `--speculative-config` with a multi-token-prediction method (`mtp`,
    /// `deepseek_mtp`, `qwen3_next_mtp`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_mtp: Option<SpeculativeMtp>,
    /// Flags understood but with no effect on the plan (host, port, API key...).
    pub no_memory_effect: Vec<String>,
    /// Flags the planner does not model, with their values: listed, never dropped.
    pub ignored: Vec<String>,
    /// What the engine may make of the command differently (printed first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Speculative decoding that drafts with the model's own MTP layers (vLLM
/// `--speculative-config '{"method": "mtp", "num_speculative_tokens": N}'`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeculativeMtp {
    /// The method as written (`mtp`, `deepseek_mtp`, …).
    pub method: String,
    /// `num_speculative_tokens`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_speculative_tokens: Option<u64>,
}

/// The engines' flags for hybrid models' recurrent state: vLLM `--mamba-cache-dtype` (conv
/// state) and `--mamba-ssm-cache-dtype` (`vllm/config/cache.py` `CacheConfig`); an engine with
/// a separate state pool maps its pool's size and share onto the last two (its room's flags).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HybridSettings {
    /// vLLM `--mamba-cache-dtype` (`auto` = the model's dtype).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba_cache_dtype: Option<String>,
    /// vLLM `--mamba-ssm-cache-dtype` (and the other rooms' SSM-state dtype flags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba_ssm_cache_dtype: Option<String>,
    /// vLLM `--enable-prefix-caching` (`true`) / `--no-enable-prefix-caching` (`false`): how
    /// many blocks a request's state takes (`hybrid::state_blocks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_prefix_caching: Option<bool>,
    /// vLLM `--mamba-cache-mode` (`none`, `align`, `all`; 0.15–0.33, no effect from 0.32 for
    /// `all`): how prefix caching keeps the state ([`crate::hybrid::mamba_cache_mode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba_cache_mode: Option<String>,
    /// vLLM `--gdn-prefill-backend` (0.33+): only `flashinfer` exports prefill checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdn_prefill_backend: Option<String>,
    /// `num_speculative_tokens` of vLLM `--speculative-config`, any method: a state group holds
    /// one more block per draft token (`MambaSpec.num_speculative_blocks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_tokens: Option<u64>,
    /// A separate state pool's size: requests whose state the pool holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mamba_cache_size: Option<u64>,
    /// A separate state pool's share: state pool : token pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba_full_memory_ratio: Option<f64>,
}

impl EngineSettings {
    fn new(engine: Engine) -> Self {
        EngineSettings {
            engine,
            model: None,
            tensor_parallel_size: None,
            pipeline_parallel_size: None,
            data_parallel_size: None,
            max_model_len: None,
            max_model_len_auto: false,
            kv_cache_memory_bytes: None,
            gpu_memory_utilization: None,
            kv_cache_dtype: None,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            enforce_eager: None,
            quantization: None,
            dtype: None,
            block_size: None,
            enable_expert_parallel: None,
            llama_cpp: LlamaCppSettings::default(),
            disable_radix_cache: false,
            lmdeploy: LmdeploySettings::default(),
            speculative: SpeculativeSettings::default(),
            hybrid: HybridSettings::default(),
            speculative_mtp: None,
            no_memory_effect: Vec::new(),
            ignored: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// A command the planner cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EngineError(pub String);

fn err(msg: impl Into<String>) -> EngineError {
    EngineError(msg.into())
}

/// Which engine a command runs, and where its own arguments start: the detector `run` and
/// `mem startup` share ([`inferscope_host::engine_command`]), so wrappers (`env -u X`, `nohup`,
/// `numactl ... --`) never change the engine.
/// The servers the planner reads: every room's server commands, in [`Engine::ALL`]'s order.
fn known() -> String {
    server_commands().collect::<Vec<_>>().join(", ")
}

fn server_commands() -> impl Iterator<Item = &'static str> {
    Engine::ALL
        .into_iter()
        .flat_map(|e| crate::engines::room(e).server_commands().iter().copied())
}

fn detect(args: &[String]) -> Result<(Engine, usize), EngineError> {
    use inferscope_host::engine_command::{Found, find};
    match find(args) {
        Found::Engine { kind, args } => Ok((kind, args)),
        Found::NoCommand => Err(err(
            "no command after `--` (expected e.g. `vllm serve MODEL ...`)",
        )),
        Found::PythonScript { program } => Err(err(format!(
            "`{program}` without `-m MODULE`: cannot tell which engine runs"
        ))),
        Found::PythonModule { module, .. } => Err(err(format!(
            "python module `{module}` is not a serving engine inferscope knows ({})",
            server_commands()
                .filter_map(|c| c.strip_prefix("python -m "))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Found::VllmNotServe { .. } => Err(err(
            "`vllm` without `serve`: only `vllm serve MODEL ...` is a server",
        )),
        Found::Other { program } => Err(err(format!(
            "`{program}` is not a serving engine inferscope knows ({})",
            known()
        ))),
    }
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, EngineError> {
    v.parse()
        .map_err(|_| err(format!("{flag} {v:?}: expected a number")))
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Context lengths like `32768`, `32k`, `1M` (vLLM accepts the suffixes).
fn parse_len(flag: &str, v: &str) -> Result<u64, EngineError> {
    let lower = v.to_ascii_lowercase();
    let (digits, mult) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1024),
        Some('m') => (&lower[..lower.len() - 1], 1024 * 1024),
        _ => (lower.as_str(), 1),
    };
    let n: u64 = parse_num(flag, digits)?;
    n.checked_mul(mult)
        .ok_or_else(|| err(format!("{flag} {v:?}: too large")))
}

/// `human_readable_int`: `k`/`m`/`g` are powers of 1000 (decimals allowed), `K`/`M`/`G` powers
/// of 1024 (no decimals), else a plain integer ([`CommandOptions::human_readable_ints`]).
fn human_readable_int(flag: &str, v: &str) -> Result<u64, EngineError> {
    let v = v.trim();
    let bad = || {
        err(format!(
            "{flag} {v:?}: expected an integer such as 4G, 4000m or 4294967296"
        ))
    };
    let Some(last) = v.chars().last() else {
        return Err(bad());
    };
    let number = &v[..v.len() - last.len_utf8()];
    let decimal = match last {
        'k' => Some(1e3),
        'm' => Some(1e6),
        'g' => Some(1e9),
        _ => None,
    };
    let binary: Option<u64> = match last {
        'K' => Some(1 << 10),
        'M' => Some(1 << 20),
        'G' => Some(1 << 30),
        _ => None,
    };
    let is_number = |n: &str| {
        !n.is_empty()
            && n.split('.').count() <= 2
            && n.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    if let Some(m) = decimal.filter(|_| is_number(number)) {
        let x: f64 = number.parse().map_err(|_| bad())?;
        let b = (x * m).floor();
        return if b.is_finite() && b < 1e19 {
            Ok(b as u64)
        } else {
            Err(bad())
        };
    }
    if let Some(m) = binary.filter(|_| is_number(number)) {
        if number.contains('.') {
            return Err(err(format!(
                "{flag} {v:?}: Decimals are not allowed with binary suffixes like {last} (vLLM's \
                 words); did you mean {number}{}?",
                last.to_ascii_lowercase()
            )));
        }
        let n: u64 = number.parse().map_err(|_| bad())?;
        return n.checked_mul(m).ok_or_else(bad);
    }
    v.parse::<u64>().map_err(|_| bad())
}

/// A flag the pasted command uses that the `--engine-version` release does not have: that
/// release's own error (its room's answer). `None`: accepted.
pub fn refused_by_release(s: &EngineSettings, version: Option<&str>) -> Option<String> {
    crate::engines::room(s.engine).refused_by_release(s, version?)
}

/// What one flag means for the plan: the vocabulary the rooms' option tables map onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Meaning {
    Tp,
    Pp,
    /// Data-parallel size: no per-GPU memory effect (listed with the ignored flags), read by
    /// multi-node launches.
    Dp,
    MaxLen,
    KvBytes,
    GpuUtil,
    KvDtype,
    MaxSeqs,
    BatchedTokens,
    Eager,
    Quant,
    Dtype,
    Block,
    ExpertParallel,
    GpuLayers,
    KvDtypeV,
    Ubatch,
    KvUnified(bool),
    SwaFull,
    FlashAttn,
    TensorSplit,
    SplitMode,
    Model,
    MambaConvDtype,
    MambaSsmDtype,
    MambaPoolSize,
    MambaRatio,
    /// vLLM `--mamba-cache-mode`.
    MambaCacheMode,
    /// vLLM `--gdn-prefill-backend`.
    GdnPrefillBackend,
    /// The prefix (radix) cache is off (a switch).
    NoRadixCache,
    /// vLLM's prefix caching on (`true`) or off (`false`) (a switch).
    PrefixCaching(bool),
    /// vLLM `--speculative-config JSON`.
    SpeculativeConfig,
    /// An LMDeploy-only setting (`LmdeploySettings::set`); takes a value.
    Lmdeploy,
    /// `--speculative-algorithm` and its flags (`SpeculativeSettings::set`); takes a value.
    Speculative,
    /// The prefill CUDA graph turned off (`SpeculativeSettings::switch`).
    PrefillGraphOff,
    /// Known, no memory effect; takes a value.
    Inert,
    /// Known, no memory effect; a switch.
    InertSwitch,
}

fn meaning(opts: &CommandOptions, flag: &str) -> Option<Meaning> {
    let f = if opts.underscores_as_dashes {
        flag.replace('_', "-")
    } else {
        flag.to_string()
    };
    (opts.meaning)(&f)
}

/// Parse a serving command (the words after `inferscope plan --`).
///
/// One piece (~160 lines): a single pass over the words, one arm per flag meaning.
pub fn parse_command(args: &[String]) -> Result<EngineSettings, EngineError> {
    let (engine, start) = detect(args)?;
    let room = crate::engines::room(engine);
    // an engine the planner cannot size is said as such, not read as another engine
    let opts = room.memory().and_then(|_| room.options()).map_err(|x| {
        err(format!(
            "{x}: not a serving engine the planner reads ({})",
            known()
        ))
    })?;
    let mut s = EngineSettings::new(engine);
    let mut i = start;
    // `vllm serve MODEL` takes the model as the first positional argument.
    if opts.model_positional && args.get(i).is_some_and(|a| !a.starts_with('-')) {
        s.model = args.get(i).cloned();
        i += 1;
    }
    while let Some(word) = args.get(i) {
        i += 1;
        if !word.starts_with('-') {
            s.ignored.push(word.clone());
            continue;
        }
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (word.clone(), None),
        };
        // A following word is this flag's value unless it is itself a flag (a negative number
        // such as `-1` is a value).
        let looks_like_flag = |a: &str| {
            a.starts_with("--")
                || a.strip_prefix('-').is_some_and(|rest| {
                    !rest.is_empty() && !rest.starts_with(|c: char| c.is_ascii_digit())
                })
        };
        let next_value = args.get(i).filter(|a| !looks_like_flag(a));
        // The engine's own parser first: a flag it refuses is an error here too; an
        // abbreviation it accepts means the flag it stands for.
        let checked = crate::flags::check_with(opts, &flag);
        let resolved = match &checked {
            crate::flags::FlagCheck::Known(canon) => meaning(opts, canon),
            _ => None,
        };
        let m = meaning(opts, &flag).or(resolved);
        if m.is_none() {
            match checked {
                crate::flags::FlagCheck::Unknown(near) => {
                    return Err(err(format!(
                        "{flag}: not an option of {} ({}){}",
                        server_name(engine),
                        opts.parser,
                        near.map_or(String::new(), |n| format!("; did you mean {n}?"))
                    )));
                }
                crate::flags::FlagCheck::Ambiguous(hits) => s.warnings.push(format!(
                    "{flag} abbreviates several options ({}); the engine's parser refuses an ambiguous abbreviation in releases where it is one",
                    hits.join(", ")
                )),
                crate::flags::FlagCheck::Known(_) => {}
            }
        }
        let Some(m) = m else {
            // Known to the engine, not to the planner: keep it, with what looks like its value.
            match (inline, next_value) {
                (Some(v), _) => s.ignored.push(format!("{flag}={v}")),
                (None, Some(next)) => {
                    s.ignored.push(format!("{flag} {next}"));
                    i += 1;
                }
                (None, None) => s.ignored.push(flag),
            }
            continue;
        };
        let is_switch = matches!(
            m,
            Meaning::Eager
                | Meaning::ExpertParallel
                | Meaning::InertSwitch
                | Meaning::KvUnified(_)
                | Meaning::SwaFull
                | Meaning::NoRadixCache
                | Meaning::PrefixCaching(_)
                | Meaning::PrefillGraphOff
        ) || (m == Meaning::FlashAttn
            // `-fa` was a switch before llama.cpp took `on|off|auto`.
            && !next_value.is_some_and(|v| matches!(v.as_str(), "on" | "off" | "auto")));
        let value = if is_switch {
            // Switches may carry an explicit value (`--enforce-eager=false`).
            inline.clone()
        } else {
            match (inline, args.get(i)) {
                (Some(v), _) => Some(v),
                (None, Some(next)) => {
                    i += 1;
                    Some(next.clone())
                }
                (None, None) => return Err(err(format!("{flag} needs a value"))),
            }
        };
        let v = value.clone().unwrap_or_default();
        match m {
            Meaning::Tp => s.tensor_parallel_size = Some(parse_num(&flag, &v)?),
            Meaning::Pp => s.pipeline_parallel_size = Some(parse_num(&flag, &v)?),
            Meaning::Dp => {
                s.data_parallel_size = Some(parse_num(&flag, &v)?);
                // each replica holds the whole model: the plan per GPU is unchanged
                s.ignored.push(format!("{flag} {v}"));
            }
            Meaning::MaxLen if opts.zero_len_is_model_default && v == "0" => s.max_model_len = None,
            Meaning::MaxLen if opts.auto_len && (v == "-1" || v.eq_ignore_ascii_case("auto")) => {
                s.max_model_len = None;
                s.max_model_len_auto = true;
            }
            Meaning::MaxLen if opts.human_readable_ints => {
                s.max_model_len = Some(human_readable_int(&flag, &v)?)
            }
            Meaning::MaxLen => s.max_model_len = Some(parse_len(&flag, &v)?),
            Meaning::KvBytes => s.kv_cache_memory_bytes = Some(human_readable_int(&flag, &v)?),
            Meaning::GpuUtil => {
                let u: f64 = parse_num(&flag, &v)?;
                if !(u > 0.0 && u <= 1.0) {
                    return Err(err(format!("{flag} {v}: expected a fraction in (0, 1]")));
                }
                s.gpu_memory_utilization = Some(u);
            }
            Meaning::KvDtype => s.kv_cache_dtype = Some(v),
            Meaning::MambaConvDtype | Meaning::MambaSsmDtype => {
                if !v.eq_ignore_ascii_case("auto") && crate::arch::Dtype::parse(&v).is_none() {
                    return Err(err(format!(
                        "{flag} {v:?}: expected auto, float32, float16 or bfloat16"
                    )));
                }
                let d = Some(v).filter(|v| !v.eq_ignore_ascii_case("auto"));
                if m == Meaning::MambaConvDtype {
                    s.hybrid.mamba_cache_dtype = d;
                } else {
                    s.hybrid.mamba_ssm_cache_dtype = d;
                }
            }
            Meaning::MambaCacheMode => match v.as_str() {
                "none" | "align" | "all" => s.hybrid.mamba_cache_mode = Some(v),
                _ => return Err(err(format!("{flag} {v:?}: expected none, align or all"))),
            },
            Meaning::GdnPrefillBackend => {
                s.hybrid.gdn_prefill_backend = Some(v.to_ascii_lowercase())
            }
            Meaning::MambaPoolSize => s.hybrid.max_mamba_cache_size = Some(parse_num(&flag, &v)?),
            Meaning::MambaRatio => {
                let r: f64 = parse_num(&flag, &v)?;
                if !(r > 0.0 && r.is_finite()) {
                    return Err(err(format!("{flag} {v}: expected a positive ratio")));
                }
                s.hybrid.mamba_full_memory_ratio = Some(r);
            }
            Meaning::MaxSeqs if opts.minus_one_seqs_is_auto && v == "-1" => s.max_num_seqs = None,
            Meaning::MaxSeqs => s.max_num_seqs = Some(parse_num(&flag, &v)?),
            Meaning::BatchedTokens if opts.human_readable_ints => {
                s.max_num_batched_tokens = Some(human_readable_int(&flag, &v)?)
            }
            Meaning::BatchedTokens => s.max_num_batched_tokens = Some(parse_len(&flag, &v)?),
            Meaning::Eager => {
                s.enforce_eager = Some(
                    value
                        .as_deref()
                        .map(parse_bool)
                        .unwrap_or(Some(true))
                        .unwrap_or(true),
                )
            }
            Meaning::PrefixCaching(on) => {
                let set = value
                    .as_deref()
                    .map(parse_bool)
                    .unwrap_or(Some(true))
                    .unwrap_or(true);
                s.hybrid.enable_prefix_caching = Some(on == set);
            }
            Meaning::ExpertParallel => {
                s.enable_expert_parallel = Some(
                    value
                        .as_deref()
                        .map(parse_bool)
                        .unwrap_or(Some(true))
                        .unwrap_or(true),
                )
            }
            Meaning::Quant => s.quantization = Some(v),
            Meaning::Dtype => s.dtype = Some(v),
            Meaning::Block => s.block_size = Some(parse_num(&flag, &v)?),
            Meaning::GpuLayers => {
                s.llama_cpp.gpu_layers = Some(GpuLayers::parse(&v).ok_or_else(|| {
                    err(format!(
                        "{flag} {v:?}: expected a number of layers, all or auto"
                    ))
                })?)
            }
            Meaning::KvDtypeV => s.llama_cpp.cache_type_v = Some(v),
            Meaning::Ubatch => s.llama_cpp.ubatch_size = Some(parse_len(&flag, &v)?),
            Meaning::KvUnified(on) => s.llama_cpp.kv_unified = Some(on),
            Meaning::SwaFull => s.llama_cpp.swa_full = true,
            Meaning::NoRadixCache => s.disable_radix_cache = true,
            Meaning::Lmdeploy => s.lmdeploy.set(&flag, &v).map_err(err)?,
            Meaning::Speculative => s.speculative.set(&flag, &v).map_err(err)?,
            Meaning::PrefillGraphOff => {
                if value.as_deref().map(parse_bool) != Some(Some(false)) {
                    s.speculative.switch(&flag)
                }
            }
            Meaning::FlashAttn => {
                s.llama_cpp.flash_attn = Some(value.unwrap_or_else(|| "on".into()))
            }
            Meaning::TensorSplit => {
                // llama.cpp's arg.cpp splits on `,` or `/`: proportions, not all zero
                let parts: Option<Vec<f64>> = v
                    .split([',', '/'])
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| {
                        p.trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite() && *x >= 0.0)
                    })
                    .collect();
                match parts {
                    Some(p) if !p.is_empty() && p.len() <= 128 && p.iter().any(|x| *x > 0.0) => {
                        s.llama_cpp.tensor_split = Some(p)
                    }
                    _ => {
                        return Err(err(format!(
                            "{flag} {v:?}: expected proportions per GPU such as 3,1"
                        )));
                    }
                }
            }
            Meaning::SplitMode => match v.as_str() {
                "none" | "layer" | "row" => s.llama_cpp.split_mode = Some(v),
                _ => {
                    return Err(err(format!("{flag} {v:?}: expected none, layer or row")));
                }
            },
            Meaning::Model => s.model = Some(v),
            Meaning::SpeculativeConfig => {
                // not JSON: listed as not modelled, as before this flag was read
                let j: serde_json::Value = serde_json::from_str(&v).unwrap_or_default();
                let method = j.get("method").and_then(serde_json::Value::as_str);
                // every method's draft tokens take state blocks in a hybrid model
                s.hybrid.speculative_tokens = j
                    .get("num_speculative_tokens")
                    .and_then(serde_json::Value::as_u64);
                match method {
                    // every *_mtp method is the model's own MTP layers (vLLM's
                    // `SpeculativeConfig` maps them to "mtp")
                    Some(m) if m == "mtp" || m.ends_with("_mtp") => {
                        let tokens = j
                            .get("num_speculative_tokens")
                            .and_then(serde_json::Value::as_u64);
                        s.speculative_mtp = Some(SpeculativeMtp {
                            method: m.to_string(),
                            num_speculative_tokens: tokens,
                        });
                    }
                    // n-gram look-up drafts hold no weights or KV
                    Some("ngram") => s.no_memory_effect.push(format!("{flag} {v}")),
                    // a separate draft model (EAGLE, Medusa, a small model): not modelled
                    _ => s.ignored.push(format!("{flag} {v}")),
                }
            }
            Meaning::Inert => s.no_memory_effect.push(format!("{flag} {v}")),
            Meaning::InertSwitch => s.no_memory_effect.push(flag),
        }
    }
    if s.model.is_none() {
        return Err(err("the command names no model"));
    }
    // These lists are printed and written to `--json`, which users paste into bug reports:
    // `--api-key KEY`, `--hf-token=T` and URL credentials must not be in them.
    for list in [&mut s.ignored, &mut s.no_memory_effect] {
        for entry in list.iter_mut() {
            let words: Vec<String> = entry.split(' ').map(str::to_string).collect();
            *entry = inferscope_host::redact::command(&words).join(" ");
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn vllm_lengths_read_as_vllm_reads_them() {
        // vllm/engine/arg_utils.py human_readable_int: k = 1000, K = 1024
        for (flag, want) in [
            ("32K", 32_768),
            ("32k", 32_000),
            ("25.6k", 25_600),
            ("4096", 4096),
        ] {
            let s = parse_command(&words(&format!(
                "vllm serve m --max-model-len {flag} --max-num-batched-tokens {flag}"
            )))
            .unwrap();
            assert_eq!(s.max_model_len, Some(want), "{flag}");
            assert_eq!(s.max_num_batched_tokens, Some(want), "{flag}");
        }
        assert!(parse_command(&words("vllm serve m --max-model-len 1.5K")).is_err());
        // llama.cpp's -c is a plain integer: unchanged
        let s = parse_command(&words("llama-server -m x.gguf -c 4096")).unwrap();
        assert_eq!(s.max_model_len, Some(4096));
    }

    #[test]
    fn vllm_serve_with_memory_flags_and_unknowns() {
        let s = parse_command(&words(
            "vllm serve Qwen/Qwen2.5-72B-Instruct-AWQ --tensor-parallel-size 2 --max-model-len 32k \
             --gpu-memory-utilization=0.92 --kv-cache-dtype fp8 --enforce-eager --port 8000 \
             --trust-remote-code --speculative-config {\"n\":1} --disable-custom-all-reduce",
        ))
        .unwrap();
        assert_eq!(s.engine, Engine::Vllm);
        assert_eq!(s.model.as_deref(), Some("Qwen/Qwen2.5-72B-Instruct-AWQ"));
        assert_eq!(s.tensor_parallel_size, Some(2));
        // vLLM's human_readable_int: lower-case k is decimal (32,000), upper-case K binary
        assert_eq!(s.max_model_len, Some(32_000));
        assert_eq!(s.gpu_memory_utilization, Some(0.92));
        assert_eq!(s.kv_cache_dtype.as_deref(), Some("fp8"));
        assert_eq!(s.enforce_eager, Some(true));
        assert_eq!(s.no_memory_effect, ["--port 8000", "--trust-remote-code"]);
        assert_eq!(
            s.ignored,
            [
                "--speculative-config {\"n\":1}",
                "--disable-custom-all-reduce"
            ]
        );
    }

    #[test]
    fn secrets_in_pasted_commands_are_not_kept() {
        let s = parse_command(&words(
            "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz vllm serve m --api-key sk-live-1 --hf-token=hf_x \
             --download-dir https://u:pw@mirror/x",
        ))
        .unwrap();
        let all = format!("{:?} {:?}", s.ignored, s.no_memory_effect);
        for secret in ["hf_abc", "sk-live-1", "hf_x", ":pw@"] {
            assert!(!all.contains(secret), "{secret} in {all}");
        }
        assert!(all.contains("--api-key <redacted>"), "{all}");
    }

    #[test]
    fn other_engines() {
        let s = parse_command(&words(
            "python -m vllm.entrypoints.openai.api_server --model facebook/opt-125m",
        ))
        .unwrap();
        assert_eq!(s.model.as_deref(), Some("facebook/opt-125m"));
        let s = parse_command(&words(
            "text-generation-launcher --model-id mistralai/Mistral-7B-Instruct-v0.3 --num-shard 2 --max-total-tokens 4096 --quantize awq",
        ))
        .unwrap();
        assert_eq!(
            (s.engine, s.tensor_parallel_size, s.quantization.as_deref()),
            (Engine::Tgi, Some(2), Some("awq"))
        );
        let s = parse_command(&words(
            "llama-server -m tiny.gguf -c 4096 -ngl 99 -np 4 --port 8080",
        ))
        .unwrap();
        assert_eq!(
            (
                s.engine,
                s.max_model_len,
                s.max_num_seqs,
                s.llama_cpp.gpu_layers
            ),
            (
                Engine::LlamaCpp,
                Some(4096),
                Some(4),
                Some(GpuLayers::Count(99))
            )
        );
        // llama.cpp's own spellings: -ngl all|auto, -np -1 and -c 0 (auto), -fa with or
        // without a value, -ctv/-ub/-kvu/--swa-full.
        let s = parse_command(&words(
            "llama-server -m m.gguf -c 0 -np -1 -ngl all -fa on -ctv q8_0 -ub 256 -kvu --swa-full",
        ))
        .unwrap();
        assert_eq!(s.max_model_len, None);
        assert_eq!(s.max_num_seqs, None);
        assert_eq!(
            s.llama_cpp.gpu_layers,
            Some(GpuLayers::Word(
                crate::engines::llama_cpp::plan::GpuLayersWord::All
            ))
        );
        let l = &s.llama_cpp;
        assert_eq!(l.flash_attn.as_deref(), Some("on"));
        assert_eq!(l.cache_type_v.as_deref(), Some("q8_0"));
        assert_eq!(l.ubatch_size, Some(256));
        assert_eq!((l.kv_unified, l.swa_full), (Some(true), true));
        assert!(s.ignored.is_empty(), "{:?}", s.ignored);
        let s = parse_command(&words("llama-server -fa -m m.gguf -ngl auto -no-kvu")).unwrap();
        assert_eq!(s.llama_cpp.flash_attn.as_deref(), Some("on"));
        assert_eq!(s.model.as_deref(), Some("m.gguf"));
        assert_eq!(s.llama_cpp.kv_unified, Some(false));
        let e = parse_command(&words("llama-server -m m.gguf -ngl lots")).unwrap_err();
        assert!(
            e.0.contains("expected a number of layers, all or auto"),
            "{e}"
        );
        let s = parse_command(&words("llama-server -m m.gguf -ts 3/1 -sm layer")).unwrap();
        assert_eq!(s.llama_cpp.tensor_split, Some(vec![3.0, 1.0]));
        assert_eq!(s.llama_cpp.split_mode.as_deref(), Some("layer"));
        for (cmd, msg) in [
            (
                "llama-server -m m -ts 0,0",
                "-ts \"0,0\": expected proportions per GPU such as 3,1",
            ),
            (
                "llama-server -m m --tensor-split a,b",
                "expected proportions",
            ),
            ("llama-server -m m -ts -1,2", "expected proportions"),
            (
                "llama-server -m m -sm rows",
                "-sm \"rows\": expected none, layer or row",
            ),
        ] {
            let e = parse_command(&words(cmd)).unwrap_err();
            assert!(e.0.contains(msg), "{cmd}: {e}");
        }
    }

    #[test]
    fn bad_commands_are_one_clear_error() {
        for (cmd, msg) in [
            ("", "no command after `--`"),
            ("vllm bench x", "`vllm` without `serve`"),
            ("python train.py", "without `-m MODULE`"),
            ("ollama serve", "memory not modelled for Ollama"),
            (
                "vllm serve m --tensor-parallel-size two",
                "expected a number",
            ),
            (
                "vllm serve m --gpu-memory-utilization 1.5",
                "expected a fraction",
            ),
            ("vllm serve m --max-model-len", "needs a value"),
            ("vllm serve --port 8000", "names no model"),
        ] {
            let e = parse_command(&words(cmd)).unwrap_err();
            assert!(e.0.contains(msg), "{cmd}: {}", e.0);
        }
    }
}
