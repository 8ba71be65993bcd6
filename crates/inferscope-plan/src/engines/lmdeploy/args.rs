//! `lmdeploy serve api_server MODEL [flags]` → settings.
//!
//! Recognised forms: `lmdeploy serve api_server …` (any path to the `lmdeploy` script) and
//! `python[3[.x]] -m lmdeploy serve api_server …`, behind `env [-i] [VAR=value]…` or bare
//! `VAR=value` words. Flags are read as the 0.18.0 parser reads them
//! (`lmdeploy/cli/utils.py` `FlexibleArgumentParser.parse_args`: `--flag value` or
//! `--flag=value`, `_` and `-` interchangeable in the name; defaults from
//! `ArgumentHelper` and `lmdeploy/cli/serve.py` `add_parser_api_server`). Flags that do not
//! change memory are listed in [`LmdeployArgs::ignored`], never dropped silently.

use super::{Backend, QuantPolicy};

/// Why a command is not a usable LMDeploy command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// Not `lmdeploy serve api_server`.
    #[error("not an LMDeploy api_server command (expected `lmdeploy serve api_server MODEL ...`)")]
    NotLmdeploy,
    /// `lmdeploy serve api_server` without a model.
    #[error("`lmdeploy serve api_server` needs a model path or Hub id")]
    NoModel,
    /// A flag that takes a value came last.
    #[error("{0} needs a value")]
    MissingValue(String),
    /// A value the engine's parser would refuse.
    #[error("{flag} {value:?}: {why}")]
    BadValue {
        /// The flag.
        flag: String,
        /// The value given.
        value: String,
        /// What the engine accepts.
        why: String,
    },
}

/// What an `lmdeploy serve api_server` command asks for. `None` means "not given: the engine
/// decides" (see [`super::memory`] for what it decides).
#[derive(Debug, Clone, PartialEq)]
pub struct LmdeployArgs {
    /// Model path or Hub id (first positional argument).
    pub model: String,
    /// `--backend` (`None`: TurboMind when it supports the model, else PyTorch).
    pub backend: Option<Backend>,
    /// `--tp` (default 1).
    pub tp: u32,
    /// `--dp` (default 1).
    pub dp: u32,
    /// `--session-len`.
    pub session_len: Option<u64>,
    /// `--max-batch-size` (default by GPU, `lmdeploy/utils.py` `get_max_batch_size`).
    pub max_batch_size: Option<u32>,
    /// `--cache-max-entry-count` (default 0.8; 0.5 up to v0.2.1, which
    /// [`super::memory::plan`] applies when this was not given).
    pub cache_max_entry_count: f64,
    /// `--cache-block-seq-len` (default 64; 128 before v0.3.0, likewise).
    pub cache_block_seq_len: u32,
    /// Which of the two above the command gave (the release's defaults apply to the others).
    pub cache_flags_given: (bool, bool),
    /// `--num-gpu-blocks` (PyTorch; 0 = from memory).
    pub num_gpu_blocks: u64,
    /// `--quant-policy` (default 0).
    pub quant_policy: QuantPolicy,
    /// `--max-prefill-token-num` (default 8192).
    pub max_prefill_token_num: u64,
    /// `--model-format` (`hf`, `awq`, `gptq`, `compressed-tensors`, `fp8`, `mxfp4`).
    pub model_format: Option<String>,
    /// `--dtype` (`auto`, `float16`, `bfloat16`).
    pub dtype: String,
    /// `--enable-prefix-caching`.
    pub enable_prefix_caching: bool,
    /// `--disable-metrics` (0.11+; metrics are on by default) or, in 0.10, no `--enable-metrics`.
    pub metrics: Option<bool>,
    /// `--server-name` (default 0.0.0.0).
    pub server_name: String,
    /// `--server-port` (default 23333).
    pub server_port: u16,
    /// Flags read but without effect on memory, as given.
    pub ignored: Vec<String>,
}

impl LmdeployArgs {
    pub(crate) fn new(model: String) -> LmdeployArgs {
        LmdeployArgs {
            model,
            backend: None,
            tp: 1,
            dp: 1,
            session_len: None,
            max_batch_size: None,
            cache_max_entry_count: 0.8,
            cache_block_seq_len: 64,
            cache_flags_given: (false, false),
            num_gpu_blocks: 0,
            quant_policy: QuantPolicy::None,
            max_prefill_token_num: 8192,
            model_format: None,
            dtype: "auto".into(),
            enable_prefix_caching: false,
            metrics: None,
            server_name: "0.0.0.0".into(),
            server_port: 23333,
            ignored: Vec::new(),
        }
    }
}

/// Flags that are switches (`store_true`) in 0.18.0; everything else takes one value.
const SWITCHES: &[&str] = &[
    "--allow-credentials",
    "--ssl",
    "--disable-fastapi-docs",
    "--allow-terminate-by-client",
    "--enable-abort-handling",
    "--trust-remote-code",
    "--eager-mode",
    "--empty-init",
    "--enable-prefix-caching",
    "--disable-metrics",
    "--enable-metrics",
    "--enable-microbatch",
    "--enable-eplb",
    "--language-model-only",
    "--enable-return-routed-experts",
    "--use-logn-attn",
    "--stream-output",
];

/// Flags that take several values (`nargs='+'`/`'*'`): their values run to the next flag.
const MULTI: &[&str] = &[
    "--allow-origins",
    "--allow-methods",
    "--allow-headers",
    "--api-keys",
    "--cudagraph-capture-batch-sizes",
    "--allowed-media-domains",
    "--adapters",
];

/// Where `lmdeploy serve api_server` starts in `argv`, after launchers; `None` if it is not one.
pub fn locate(argv: &[String]) -> Option<usize> {
    let mut i = 0;
    // `env [-i|-u NAME] VAR=value ... CMD` and bare `VAR=value CMD`
    if argv.first().is_some_and(|w| base(w) == "env") {
        i = 1;
        while let Some(w) = argv.get(i) {
            if w == "-u" || w == "--unset" {
                i += 2;
            } else if w.starts_with('-') || is_assignment(w) {
                i += 1;
            } else {
                break;
            }
        }
    }
    while argv.get(i).is_some_and(|w| is_assignment(w)) {
        i += 1;
    }
    let first = argv.get(i)?;
    let b = base(first);
    if b == "lmdeploy" {
        i += 1;
    } else if b.starts_with("python") {
        // python [-u|-O ...] -m lmdeploy
        i += 1;
        while argv.get(i).is_some_and(|w| w.starts_with('-') && w != "-m") {
            i += 1;
        }
        if argv.get(i).map(String::as_str) != Some("-m")
            || argv.get(i + 1).map(String::as_str) != Some("lmdeploy")
        {
            return None;
        }
        i += 2;
    } else {
        return None;
    }
    if argv.get(i).map(String::as_str) == Some("serve")
        && argv.get(i + 1).map(String::as_str) == Some("api_server")
    {
        Some(i + 2)
    } else {
        None
    }
}

/// Is this an `lmdeploy serve api_server` command (through `env`, `python -m`)?
pub fn is_lmdeploy(argv: &[String]) -> bool {
    locate(argv).is_some()
}

fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && !k.starts_with('-')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The 0.18.0 parser's spelling: `--a_b` is `--a-b` (`FlexibleArgumentParser.parse_args`).
fn canonical(flag: &str) -> String {
    match flag.strip_prefix("--") {
        Some(rest) => format!("--{}", rest.replace('_', "-")),
        None => flag.to_string(),
    }
}

fn bad(flag: &str, value: &str, why: &str) -> ArgsError {
    ArgsError::BadValue {
        flag: flag.into(),
        value: value.into(),
        why: why.into(),
    }
}

fn int<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, ArgsError> {
    value
        .parse()
        .map_err(|_| bad(flag, value, "expected a whole number"))
}

/// Parse an `lmdeploy serve api_server` command line (`argv[0]` is the program).
pub fn parse(argv: &[String]) -> Result<LmdeployArgs, ArgsError> {
    let start = locate(argv).ok_or(ArgsError::NotLmdeploy)?;
    let rest = argv.get(start..).unwrap_or_default();
    let mut model = None;
    let mut pending: Vec<(String, Option<String>)> = Vec::new();
    let mut ignored_positional = Vec::new();
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        i += 1;
        if word.starts_with('-') && !word.starts_with("--") {
            // no single-dash option of api_server changes memory (`-h`)
            ignored_positional.push(word.clone());
            continue;
        }
        if !word.starts_with("--") {
            if model.is_none() {
                model = Some(word.clone());
            } else {
                ignored_positional.push(word.clone());
            }
            continue;
        }
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) => (canonical(f), Some(v.to_string())),
            None => (canonical(word), None),
        };
        if SWITCHES.contains(&flag.as_str()) {
            pending.push((flag, None));
        } else if MULTI.contains(&flag.as_str()) {
            let mut vals = inline.into_iter().collect::<Vec<_>>();
            while rest.get(i).is_some_and(|w| !w.starts_with("--")) {
                vals.extend(rest.get(i).cloned());
                i += 1;
            }
            pending.push((flag, Some(vals.join(" "))));
        } else if let Some(v) = inline {
            pending.push((flag, Some(v)));
        } else {
            let v = rest
                .get(i)
                .filter(|w| !w.starts_with("--"))
                .ok_or_else(|| ArgsError::MissingValue(flag.clone()))?;
            i += 1;
            pending.push((flag, Some(v.clone())));
        }
    }
    let mut a = LmdeployArgs::new(model.ok_or(ArgsError::NoModel)?);
    a.ignored = ignored_positional;
    for (flag, value) in pending {
        let v = value.unwrap_or_default();
        match flag.as_str() {
            "--backend" => {
                a.backend = Some(match v.as_str() {
                    "turbomind" => Backend::Turbomind,
                    "pytorch" => Backend::Pytorch,
                    _ => return Err(bad(&flag, &v, "expected turbomind or pytorch")),
                })
            }
            // messages.py __post_init__: `tp >= 1`, `dp >= 1`
            "--tp" | "--dp" => {
                let n: u32 = int(&flag, &v)?;
                if n == 0 {
                    return Err(bad(&flag, &v, "must be ≥ 1"));
                }
                if flag == "--tp" {
                    a.tp = n;
                } else {
                    a.dp = n;
                }
            }
            "--session-len" => a.session_len = Some(int(&flag, &v)?),
            "--max-batch-size" => a.max_batch_size = Some(int(&flag, &v)?),
            "--cache-max-entry-count" => {
                let f: f64 = v.parse().map_err(|_| bad(&flag, &v, "expected a number"))?;
                // messages.py TurbomindEngineConfig.__post_init__: `> 0`
                if !f.is_finite() || f <= 0.0 {
                    return Err(bad(&flag, &v, "must be > 0"));
                }
                a.cache_max_entry_count = f;
                a.cache_flags_given.0 = true;
            }
            "--cache-block-seq-len" => {
                a.cache_block_seq_len = int(&flag, &v)?;
                a.cache_flags_given.1 = true;
                if a.cache_block_seq_len == 0 {
                    return Err(bad(&flag, &v, "must be > 0"));
                }
            }
            "--num-gpu-blocks" => a.num_gpu_blocks = int(&flag, &v)?,
            "--quant-policy" => {
                a.quant_policy = QuantPolicy::parse(&v).ok_or_else(|| {
                    bad(
                        &flag,
                        &v,
                        "expected 0/4/8/16/17/42 or none/int4/int8/fp8/fp8_e5m2/turbo_quant",
                    )
                })?
            }
            "--max-prefill-token-num" => a.max_prefill_token_num = int(&flag, &v)?,
            "--model-format" => a.model_format = Some(v),
            "--dtype" => {
                if !matches!(v.as_str(), "auto" | "float16" | "bfloat16") {
                    return Err(bad(&flag, &v, "expected auto, float16 or bfloat16"));
                }
                a.dtype = v;
            }
            "--enable-prefix-caching" => a.enable_prefix_caching = true,
            "--disable-metrics" => a.metrics = Some(false),
            "--enable-metrics" => a.metrics = Some(true),
            "--server-name" => a.server_name = v,
            "--server-port" => a.server_port = int(&flag, &v)?,
            _ => a.ignored.push(if v.is_empty() {
                flag
            } else {
                format!("{flag} {v}")
            }),
        }
    }
    Ok(a)
}
