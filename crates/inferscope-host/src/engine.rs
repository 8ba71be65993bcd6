//! The one identity of a serving engine, below every crate that reasons about engines (issue 32:
//! "Engine" was five types in four crates). What an engine *does* — its flags, memory
//! accounting, rules, speed — lives in its room, `inferscope_plan::engines`; this is only the name.
//!
//! Spellings are a contract: [`Engine::id`] is the JSON value (`serde`), [`Engine::cli_id`] what
//! `plan --engine`, the speed tables and `mem startup` print, [`Engine::parse`] accepts both and
//! the names published benchmarks use.

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
