//! The embedded model catalog: Hugging Face `config.json` files under `data/models/`, looked up
//! by repo id (case-insensitive). Each `<org>__<name>.json` has a `<org>__<name>.SOURCE.md`
//! saying whether it is a verbatim copy of a real config (the project's fixtures) or derived from
//! a sibling's, and what was changed.
//!
//! Quantized checkpoints of a known architecture that are not listed can be planned as the base
//! model plus `--quantization`; [`lookup`] also strips common quantization suffixes
//! (`-AWQ`, `-GPTQ-Int4`, `-FP8`, ...) to find the base when the exact id is absent.

use crate::arch::{ModelArch, PlanError, Quantization, from_hf_config};

/// `(repo id, config.json)` for every catalog model, sorted by id (case-insensitive).
pub static MODELS: &[(&str, &str)] = &[
    (
        "deepseek-ai/DeepSeek-R1",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1-Distill-Llama-70B.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1-Distill-Llama-8B.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1-Distill-Qwen-1.5B.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1-Distill-Qwen-14B.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1-Distill-Qwen-32B.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        include_str!("../data/models/deepseek-ai__DeepSeek-R1-Distill-Qwen-7B.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        include_str!("../data/models/deepseek-ai__DeepSeek-V2-Lite-Chat.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V3",
        include_str!("../data/models/deepseek-ai__DeepSeek-V3.json"),
    ),
    (
        "facebook/opt-125m",
        include_str!("../data/models/facebook__opt-125m.json"),
    ),
    (
        "facebook/opt-6.7b",
        include_str!("../data/models/facebook__opt-6.7b.json"),
    ),
    (
        "google/gemma-2-27b-it",
        include_str!("../data/models/google__gemma-2-27b-it.json"),
    ),
    (
        "google/gemma-2-9b-it",
        include_str!("../data/models/google__gemma-2-9b-it.json"),
    ),
    (
        "google/gemma-3-12b-it",
        include_str!("../data/models/google__gemma-3-12b-it.json"),
    ),
    (
        "google/gemma-3-27b-it",
        include_str!("../data/models/google__gemma-3-27b-it.json"),
    ),
    (
        "google/gemma-3-4b-it",
        include_str!("../data/models/google__gemma-3-4b-it.json"),
    ),
    (
        "google/gemma-4-26B-A4B",
        include_str!("../data/models/google__gemma-4-26B-A4B.json"),
    ),
    (
        "google/gemma-4-31B-it",
        include_str!("../data/models/google__gemma-4-31B-it.json"),
    ),
    (
        "ibm-granite/granite-3.3-8b-instruct",
        include_str!("../data/models/ibm-granite__granite-3.3-8b-instruct.json"),
    ),
    (
        "ibm-granite/granite-4.0-micro",
        include_str!("../data/models/ibm-granite__granite-4.0-micro.json"),
    ),
    (
        "meta-llama/Llama-2-13b-hf",
        include_str!("../data/models/meta-llama__Llama-2-13b-hf.json"),
    ),
    (
        "meta-llama/Llama-2-70b-hf",
        include_str!("../data/models/meta-llama__Llama-2-70b-hf.json"),
    ),
    (
        "meta-llama/Llama-2-7b-hf",
        include_str!("../data/models/meta-llama__Llama-2-7b-hf.json"),
    ),
    (
        "meta-llama/Llama-3.1-405B-Instruct",
        include_str!("../data/models/meta-llama__Llama-3.1-405B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-3.1-70B-Instruct",
        include_str!("../data/models/meta-llama__Llama-3.1-70B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        include_str!("../data/models/meta-llama__Llama-3.1-8B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-3.2-1B-Instruct",
        include_str!("../data/models/meta-llama__Llama-3.2-1B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-3.2-3B-Instruct",
        include_str!("../data/models/meta-llama__Llama-3.2-3B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-3.3-70B-Instruct",
        include_str!("../data/models/meta-llama__Llama-3.3-70B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        include_str!("../data/models/meta-llama__Llama-4-Maverick-17B-128E-Instruct.json"),
    ),
    (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
        include_str!("../data/models/meta-llama__Llama-4-Maverick-17B-128E-Instruct-FP8.json"),
    ),
    (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        include_str!("../data/models/meta-llama__Llama-4-Scout-17B-16E-Instruct.json"),
    ),
    (
        "meta-llama/Meta-Llama-3-70B-Instruct",
        include_str!("../data/models/meta-llama__Meta-Llama-3-70B-Instruct.json"),
    ),
    (
        "meta-llama/Meta-Llama-3-8B",
        include_str!("../data/models/meta-llama__Meta-Llama-3-8B.json"),
    ),
    (
        "meta-llama/Meta-Llama-3-8B-Instruct",
        include_str!("../data/models/meta-llama__Meta-Llama-3-8B-Instruct.json"),
    ),
    (
        "mgoin/phi-2-super-marlin",
        include_str!("../data/models/mgoin__phi-2-super-marlin.json"),
    ),
    (
        "microsoft/phi-1_5",
        include_str!("../data/models/microsoft__phi-1_5.json"),
    ),
    (
        "microsoft/phi-2",
        include_str!("../data/models/microsoft__phi-2.json"),
    ),
    (
        "microsoft/Phi-3-mini-4k-instruct",
        include_str!("../data/models/microsoft__Phi-3-mini-4k-instruct.json"),
    ),
    (
        "microsoft/Phi-3.5-mini-instruct",
        include_str!("../data/models/microsoft__Phi-3.5-mini-instruct.json"),
    ),
    (
        "microsoft/phi-4",
        include_str!("../data/models/microsoft__phi-4.json"),
    ),
    (
        "mistralai/Mistral-7B-Instruct-v0.3",
        include_str!("../data/models/mistralai__Mistral-7B-Instruct-v0.3.json"),
    ),
    (
        "mistralai/Mistral-7B-v0.1",
        include_str!("../data/models/mistralai__Mistral-7B-v0.1.json"),
    ),
    (
        "mistralai/Mistral-Small-24B-Instruct-2501",
        include_str!("../data/models/mistralai__Mistral-Small-24B-Instruct-2501.json"),
    ),
    (
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        include_str!("../data/models/mistralai__Mixtral-8x22B-Instruct-v0.1.json"),
    ),
    (
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        include_str!("../data/models/mistralai__Mixtral-8x7B-Instruct-v0.1.json"),
    ),
    (
        "nvidia/Gemma-4-26B-A4B-NVFP4",
        include_str!("../data/models/nvidia__Gemma-4-26B-A4B-NVFP4.json"),
    ),
    (
        "nvidia/Gemma-4-31B-IT-NVFP4",
        include_str!("../data/models/nvidia__Gemma-4-31B-IT-NVFP4.json"),
    ),
    (
        "openai/gpt-oss-120b",
        include_str!("../data/models/openai__gpt-oss-120b.json"),
    ),
    (
        "openai/gpt-oss-20b",
        include_str!("../data/models/openai__gpt-oss-20b.json"),
    ),
    (
        "Qwen/Qwen2.5-0.5B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-0.5B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-0.5B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-0.5B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-0.5B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-0.5B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-1.5B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-1.5B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-1.5B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-1.5B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-1.5B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-1.5B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-14B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-14B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-14B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-14B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-14B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-32B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-32B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-32B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-32B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-32B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-3B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-3B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-3B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-3B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-3B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-3B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-72B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-72B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-72B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-72B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-72B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-7B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-7B-Instruct.json"),
    ),
    (
        "Qwen/Qwen2.5-7B-Instruct-AWQ",
        include_str!("../data/models/Qwen__Qwen2.5-7B-Instruct-AWQ.json"),
    ),
    (
        "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4",
        include_str!("../data/models/Qwen__Qwen2.5-7B-Instruct-GPTQ-Int4.json"),
    ),
    (
        "Qwen/Qwen2.5-Coder-32B-Instruct",
        include_str!("../data/models/Qwen__Qwen2.5-Coder-32B-Instruct.json"),
    ),
    (
        "Qwen/Qwen3-0.6B",
        include_str!("../data/models/Qwen__Qwen3-0.6B.json"),
    ),
    (
        "Qwen/Qwen3-0.6B-FP8",
        include_str!("../data/models/Qwen__Qwen3-0.6B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-1.7B",
        include_str!("../data/models/Qwen__Qwen3-1.7B.json"),
    ),
    (
        "Qwen/Qwen3-1.7B-FP8",
        include_str!("../data/models/Qwen__Qwen3-1.7B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-14B",
        include_str!("../data/models/Qwen__Qwen3-14B.json"),
    ),
    (
        "Qwen/Qwen3-14B-FP8",
        include_str!("../data/models/Qwen__Qwen3-14B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-235B-A22B",
        include_str!("../data/models/Qwen__Qwen3-235B-A22B.json"),
    ),
    (
        "Qwen/Qwen3-235B-A22B-FP8",
        include_str!("../data/models/Qwen__Qwen3-235B-A22B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-235B-A22B-Instruct-2507",
        include_str!("../data/models/Qwen__Qwen3-235B-A22B-Instruct-2507.json"),
    ),
    (
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        include_str!("../data/models/Qwen__Qwen3-235B-A22B-Instruct-2507-FP8.json"),
    ),
    (
        "Qwen/Qwen3-30B-A3B",
        include_str!("../data/models/Qwen__Qwen3-30B-A3B.json"),
    ),
    (
        "Qwen/Qwen3-30B-A3B-FP8",
        include_str!("../data/models/Qwen__Qwen3-30B-A3B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-32B",
        include_str!("../data/models/Qwen__Qwen3-32B.json"),
    ),
    (
        "Qwen/Qwen3-32B-FP8",
        include_str!("../data/models/Qwen__Qwen3-32B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-4B",
        include_str!("../data/models/Qwen__Qwen3-4B.json"),
    ),
    (
        "Qwen/Qwen3-4B-FP8",
        include_str!("../data/models/Qwen__Qwen3-4B-FP8.json"),
    ),
    (
        "Qwen/Qwen3-8B",
        include_str!("../data/models/Qwen__Qwen3-8B.json"),
    ),
    (
        "Qwen/Qwen3-8B-FP8",
        include_str!("../data/models/Qwen__Qwen3-8B-FP8.json"),
    ),
    (
        "Qwen/QwQ-32B",
        include_str!("../data/models/Qwen__QwQ-32B.json"),
    ),
    (
        "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic",
        include_str!("../data/models/RedHatAI__Llama-3.3-70B-Instruct-fp8-dynamic.json"),
    ),
    (
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
        include_str!("../data/models/RedHatAI__Meta-Llama-3.1-8B-Instruct-quantized.w4a16.json"),
    ),
    (
        "teknium/OpenHermes-2.5-Mistral-7B",
        include_str!("../data/models/teknium__OpenHermes-2.5-Mistral-7B.json"),
    ),
    (
        "TheBloke/Llama-2-7B-GPTQ",
        include_str!("../data/models/TheBloke__Llama-2-7B-GPTQ.json"),
    ),
    (
        "TheBloke/zephyr-7B-beta-AWQ",
        include_str!("../data/models/TheBloke__zephyr-7B-beta-AWQ.json"),
    ),
    (
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        include_str!("../data/models/TinyLlama__TinyLlama-1.1B-Chat-v1.0.json"),
    ),
];

/// Repo ids in the catalog.
pub fn ids() -> impl Iterator<Item = &'static str> {
    MODELS.iter().map(|(id, _)| *id)
}

fn find(id: &str) -> Option<&'static (&'static str, &'static str)> {
    let id = id.trim().trim_end_matches('/');
    MODELS
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(id))
        .or_else(|| {
            // a bare name (`Llama-3.1-8B-Instruct`) or a local path ending in the repo name
            let name = id.rsplit('/').next().unwrap_or(id);
            let mut hits = MODELS.iter().filter(|(k, _)| {
                k.rsplit('/')
                    .next()
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
            });
            let first = hits.next()?;
            if hits.next().is_some() {
                None
            } else {
                Some(first)
            }
        })
}

const QUANT_SUFFIXES: &[(&str, &str)] = &[
    ("-gptq-int4", "gptq"),
    ("-gptq-int8", "gptq"),
    ("-gptq", "gptq"),
    ("-awq", "awq"),
    ("-fp8-dynamic", "fp8"),
    ("-fp8", "fp8"),
    ("-nvfp4", "nvfp4"),
    ("-mxfp4", "mxfp4"),
    ("-bnb-4bit", "bitsandbytes"),
];

/// The architecture of catalog model `id`. Unknown ids with a quantization suffix resolve to the
/// base model with that quantization.
pub fn lookup(id: &str) -> Result<ModelArch, PlanError> {
    if let Some((_, json)) = find(id) {
        return from_hf_config(json);
    }
    let lower = id.trim().to_ascii_lowercase();
    for (suffix, method) in QUANT_SUFFIXES {
        if let Some(pos) = lower.find(suffix) {
            let base = &id.trim()[..pos];
            if let Some((_, json)) = find(base) {
                let mut arch = from_hf_config(json)?;
                let mut q = Quantization::from_method(method)
                    .ok_or_else(|| PlanError::UnknownModel(id.to_string()))?;
                if let Some(bits) = lower[pos..].strip_prefix("-gptq-int8").map(|_| 8) {
                    q.bits = bits;
                }
                arch.quantization = Some(q);
                return Ok(arch);
            }
        }
    }
    Err(PlanError::UnknownModel(id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_parses() {
        for (id, json) in MODELS {
            let a = from_hf_config(json).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert!(a.num_layers > 0, "{id}");
        }
    }

    #[test]
    fn sorted_and_unique() {
        for w in MODELS.windows(2) {
            assert!(
                w[0].0.to_ascii_lowercase() < w[1].0.to_ascii_lowercase(),
                "{} / {}",
                w[0].0,
                w[1].0
            );
        }
    }

    #[test]
    fn case_insensitive_and_suffixes() {
        assert!(lookup("META-LLAMA/llama-3.1-8b-instruct").is_ok());
        assert!(lookup("Llama-3.1-8B-Instruct").is_ok());
        let a = lookup("meta-llama/Llama-3.1-8B-Instruct-AWQ").unwrap();
        assert_eq!(a.quantization.unwrap().method, "awq");
        assert!(matches!(
            lookup("nobody/nothing"),
            Err(PlanError::UnknownModel(_))
        ));
    }
}
