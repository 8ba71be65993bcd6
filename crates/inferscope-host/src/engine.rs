//! The one identity of a serving engine, below every crate that reasons about engines (issue 32:
//! "Engine" was five types in four crates). What an engine *does* — its flags, memory
//! accounting, rules, speed — lives in its room, `inferscope_plan::engines`; this is only the name.
//!
//! Spellings are a contract: [`Engine::id`] is the JSON value (`serde`), [`Engine::cli_id`] what
//! `plan --engine`, the speed tables and `mem startup` print, [`Engine::parse`] accepts both and
//! the names published benchmarks use.

use crate::log_dialect::LogDialect;
use serde::{Deserialize, Serialize};

/// A serving engine. The order is the speed tables' (docs/speed.md lists engines in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// vLLM (`vllm serve`).
    Vllm,
    /// SGLang (`python -m sglang.launch_server`).
    Sglang,
    /// Hugging Face text-generation-inference (`text-generation-launcher`).
    Tgi,
    /// NVIDIA TensorRT-LLM (speed calibration only).
    Trtllm,
    /// llama.cpp's `llama-server`.
    LlamaCpp,
    /// MLC LLM (speed calibration only).
    Mlc,
    /// Ollama (`ollama serve`).
    Ollama,
    /// LMDeploy (`lmdeploy serve api_server`).
    Lmdeploy,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 8] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::Trtllm,
        Engine::LlamaCpp,
        Engine::Mlc,
        Engine::Ollama,
        Engine::Lmdeploy,
    ];

    /// The JSON id (`vllm`, `sglang`, `tgi`, `trtllm`, `llama_cpp`, `mlc`, `ollama`, `lmdeploy`).
    pub const fn id(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::Trtllm => "trtllm",
            Engine::LlamaCpp => "llama_cpp",
            Engine::Mlc => "mlc",
            Engine::Ollama => "ollama",
            Engine::Lmdeploy => "lmdeploy",
        }
    }

    /// The id `--engine` takes and the speed tables and start-up logs print: as [`Engine::id`]
    /// but `llama.cpp`.
    pub const fn cli_id(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "llama.cpp",
            e => e.id(),
        }
    }

    /// The engine in users' words (`vLLM`, `SGLang`, `TGI`, `llama.cpp`, `TensorRT-LLM` ...).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::Tgi => "TGI",
            Engine::Trtllm => "TensorRT-LLM",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Mlc => "MLC LLM",
            Engine::Ollama => "Ollama",
            Engine::Lmdeploy => "LMDeploy",
        }
    }

    /// From any spelling in use: the ids, `tensorrt-llm`, `llamacpp`, `llama-cpp`,
    /// `llama-server`, `text-generation-inference`, `mlc-llm`, and the names published
    /// benchmarks use (`vLLM (ROCm)`, `TensorRT-LLM`, `llama.cpp (CUDA)`, `MLC LLM`). Case and
    /// punctuation do not matter; a parenthesised suffix is ignored.
    pub fn parse(s: &str) -> Option<Engine> {
        let k: String = s
            .to_ascii_lowercase()
            .chars()
            .take_while(|c| *c != '(')
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        Some(match k.as_str() {
            "vllm" => Engine::Vllm,
            "sglang" => Engine::Sglang,
            "tgi" | "textgenerationinference" => Engine::Tgi,
            "trtllm" | "tensorrtllm" => Engine::Trtllm,
            "llamacpp" | "llamaserver" => Engine::LlamaCpp,
            "mlc" | "mlcllm" => Engine::Mlc,
            "ollama" => Engine::Ollama,
            "lmdeploy" => Engine::Lmdeploy,
            _ => return None,
        })
    }
}

impl Engine {
    /// The Python package the engine ships as (`import PACKAGE`), for engines started with
    /// `python -m`: a module under it belongs to the engine.
    pub const fn python_package(self) -> Option<&'static str> {
        match self {
            Engine::Vllm => Some("vllm"),
            Engine::Sglang => Some("sglang"),
            Engine::Lmdeploy => Some("lmdeploy"),
            _ => None,
        }
    }

    /// Whether `python -m MODULE` starts this engine's server: vLLM's OpenAI entry points
    /// (`vllm.entrypoints.*`), SGLang's `sglang.launch_server`.
    pub fn serves_module(self, module: &str) -> bool {
        match self {
            Engine::Vllm => module.starts_with("vllm.entrypoints"),
            Engine::Sglang => module == "sglang.launch_server",
            _ => false,
        }
    }
}

impl Engine {
    /// Its start-up log phrases, for engines whose log the parser reads through a table
    /// ([`crate::log_dialect`]); `None`: no table (the parser's own code, or not read).
    pub fn log_dialect(self) -> Option<&'static LogDialect> {
        match self {
            Engine::Sglang => Some(&SGLANG_LOG),
            _ => None,
        }
    }
}

/// SGLang's start-up log (moved here from `startup_log.rs`'s own code, issue 32), from its
/// source: `model_runner.py` (`load_model`: "Load weight begin/end … avail mem=X GB, mem
/// usage=Y GB"; `init_memory_pool`: "KV Cache is allocated. #tokens: N, K size: X GB, V size:
/// Y GB" or "KV size: X GB"; "Memory pool end. avail mem=X GB"), `cuda_graph_runner.py`
/// ("Capture cuda graph end … mem usage=X GB"), `scheduler.py` ("max_total_num_tokens=N, …");
/// "GB" there is GiB (`get_available_gpu_memory` divides by 1 << 30). The arguments dump is
/// `server_args=ServerArgs(...)` (a dataclass repr, `key=value`); "Init torch distributed
/// ends." and the two failure phrases are as recorded in fixtures/servers/ logs.
static SGLANG_LOG: LogDialect = {
    use crate::log_dialect::{FigureUnit::*, LogFigure as F, LogLine};
    const fn mem(key: &'static str, after: &'static str) -> F {
        F {
            key,
            after,
            unit: Memory,
        }
    }
    const fn count(key: &'static str, after: &'static str, unit: &'static str) -> F {
        F {
            key,
            after,
            unit: Count(unit),
        }
    }
    const fn line(
        phrases: &'static [&'static str],
        names_engine: bool,
        figures: &'static [F],
        fails: bool,
    ) -> LogLine {
        LogLine {
            phrases,
            names_engine,
            figures,
            fails,
        }
    }
    LogDialect {
        own_lines: &[
            "server_args=ServerArgs(",
            "Load weight begin.",
            "KV Cache is allocated.",
        ],
        run_starts: &["server_args=ServerArgs("],
        names: &[&["server_args=ServerArgs("], &["sglang", "launch_server"]],
        args: Some(("ServerArgs(", '=')),
        command: Some("sglang serve "),
        lines: &[
            line(
                &["Load weight begin."],
                true,
                &[mem("avail_before_weights", "avail mem=")],
                false,
            ),
            line(
                &["Load weight end."],
                true,
                &[
                    mem("avail_after_weights", "avail mem="),
                    mem("weights", "mem usage="),
                ],
                false,
            ),
            line(
                &["KV Cache is allocated."],
                true,
                &[
                    count("kv_cache_tokens", "#tokens:", "tokens"),
                    mem("k_size", "K size:"),
                    mem("v_size", "V size:"),
                    mem("kv_cache", "KV size:"),
                ],
                false,
            ),
            // hybrid models (`mamba_pool` `MambaPool.__init__`, 0.5.x): "Mamba Cache is
            // allocated. max_mamba_cache_size: N, conv_state size: X GB, ssm_state size: Y GB"
            line(
                &["Mamba Cache is allocated."],
                true,
                &[
                    count("state_pool_requests", "max_mamba_cache_size:", "requests"),
                    mem("state_conv", "conv_state size:"),
                    mem("state_ssm", "ssm_state size:"),
                ],
                false,
            ),
            line(
                &["Memory pool end."],
                false,
                &[mem("avail_after_kv_pool", "avail mem=")],
                false,
            ),
            line(
                &["Capture cuda graph end."],
                false,
                &[mem("cuda_graph", "mem usage=")],
                false,
            ),
            line(
                &["Init torch distributed ends."],
                false,
                &[mem("distributed_init", "mem usage=")],
                false,
            ),
            line(
                &["max_total_num_tokens="],
                true,
                &[
                    count("kv_cache_tokens", "max_total_num_tokens=", "tokens"),
                    count("max_running_requests", "max_running_requests=", "requests"),
                    count("max_model_len", "context_len=", "tokens"),
                ],
                false,
            ),
            line(
                &[
                    "Not enough memory. Please try to increase --mem-fraction-static",
                    "leave no GPU memory for the KV cache",
                ],
                true,
                &[],
                true,
            ),
        ],
        // out-of-memory phases: `model_runner.py` `profile_max_num_token` / `init_memory_pool`,
        // `cuda_graph_runner.py` `capture` / `capture_one_batch_size` ("Capture cuda graph
        // failed")
        oom_phases: &[
            (
                "graph_capture",
                &[
                    "Capture cuda graph failed",
                    "capture_one_batch_size",
                    "cuda_graph_runner",
                ],
            ),
            ("kv_cache_allocation", &["init_memory_pool"]),
            ("profile_run", &["profile_max_num_token"]),
        ],
    }
};

/// `#[serde(serialize_with = "cli_id")]` for fields whose JSON has always been the
/// [`Engine::cli_id`] spelling (the speed report: `"llama.cpp"`).
pub fn cli_id<S: serde::Serializer>(e: &Engine, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(e.cli_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_parses_back() {
        for e in Engine::ALL {
            assert_eq!(Engine::parse(e.id()), Some(e));
            assert_eq!(Engine::parse(e.cli_id()), Some(e));
            assert_eq!(Engine::parse(e.name()), Some(e));
            assert_eq!(serde_json::to_value(e).unwrap(), serde_json::json!(e.id()));
        }
        assert_eq!(Engine::parse("llama.cpp (CUDA)"), Some(Engine::LlamaCpp));
        assert_eq!(Engine::parse("foo"), None);
    }
}
