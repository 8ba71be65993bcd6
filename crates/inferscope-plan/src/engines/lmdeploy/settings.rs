//! LMDeploy settings with no vLLM counterpart, read from a pasted `lmdeploy serve api_server`
//! command (`plan -- lmdeploy serve api_server ...`): the backend, the fraction rule's F, the KV
//! storage and a fixed block count. The flags with a vLLM counterpart (`--tp`, `--session-len`,
//! `--max-batch-size`, `--max-prefill-token-num`, `--cache-block-seq-len`, `--dtype`) map onto
//! the shared settings ([`super::room`]'s option table).

use super::{Backend, QuantPolicy};
use serde::{Deserialize, Serialize};

/// LMDeploy-only flags that change the plan (JSON keys of `engine_settings`, absent when not
/// given).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LmdeploySettings {
    /// `--backend` (`turbomind` or `pytorch`; not given: TurboMind, its default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// `--cache-max-entry-count` (default 0.8; TurboMind before 0.15: ≥ 1 is a block count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_max_entry_count: Option<f64>,
    /// `--quant-policy` as its number (0, 4, 8, 16, 17, 42).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant_policy: Option<u32>,
    /// `--num-gpu-blocks` (PyTorch engine; 0 = from memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_gpu_blocks: Option<u64>,
    /// `--model-format` (`hf`, `awq`, `gptq`, `compressed-tensors`, `fp8`, `mxfp4`): the
    /// checkpoint's format; `awq`/`gptq`/`fp8`/`mxfp4` size the weights as that quantization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_format: Option<String>,
}

impl LmdeploySettings {
    /// Take one of the flags above, checked as LMDeploy 0.18.0's parser and config checks do
    /// (`lmdeploy/cli/utils.py` `ArgumentHelper`, `lmdeploy/messages.py` `__post_init__`).
    /// `Err`: the error the engine would give, in words.
    /// `--a_b` is `--a-b` (0.18.0 `FlexibleArgumentParser.parse_args`).
    pub fn set(&mut self, flag: &str, v: &str) -> Result<(), String> {
        let flag = &flag.replace('_', "-");
        match flag.as_str() {
            "--backend" => match v {
                "turbomind" | "pytorch" => self.backend = Some(v.to_string()),
                _ => return Err(format!("{flag} {v:?}: expected turbomind or pytorch")),
            },
            "--cache-max-entry-count" => {
                let f: f64 = v
                    .parse()
                    .map_err(|_| format!("{flag} {v:?}: expected a number"))?;
                if !f.is_finite() || f <= 0.0 {
                    return Err(format!("{flag} {v}: must be > 0"));
                }
                self.cache_max_entry_count = Some(f);
            }
            "--quant-policy" => {
                let q = QuantPolicy::parse(v).ok_or_else(|| {
                    format!(
                        "{flag} {v:?}: expected 0/4/8/16/17/42 or none/int4/int8/fp8/fp8_e5m2/turbo_quant"
                    )
                })?;
                self.quant_policy = Some(q.value());
            }
            "--num-gpu-blocks" => {
                self.num_gpu_blocks = Some(
                    v.parse()
                        .map_err(|_| format!("{flag} {v:?}: expected a whole number"))?,
                )
            }
            // 0.18.0 lmdeploy/cli/utils.py ArgumentHelper.model_format choices
            "--model-format" => match v {
                "hf" | "awq" | "gptq" | "compressed-tensors" | "fp8" | "mxfp4" => {
                    self.model_format = Some(v.to_string())
                }
                _ => {
                    return Err(format!(
                        "{flag} {v:?}: expected hf, awq, gptq, compressed-tensors, fp8 or mxfp4"
                    ));
                }
            },
            _ => return Err(format!("{flag}: not an LMDeploy-only setting")),
        }
        Ok(())
    }

    /// The weight quantization `--model-format` names, as the planner spells it (`None`: the
    /// checkpoint's own config decides; `hf` and `compressed-tensors` are read from it).
    pub fn weight_quantization(&self) -> Option<&'static str> {
        match self.model_format.as_deref() {
            Some("awq") => Some("awq"),
            Some("gptq") => Some("gptq"),
            Some("fp8") => Some("fp8"),
            Some("mxfp4") => Some("mxfp4"),
            _ => None,
        }
    }

    /// The backend asked for (`None`: not given).
    pub fn backend(&self) -> Option<Backend> {
        match self.backend.as_deref() {
            Some("pytorch") => Some(Backend::Pytorch),
            Some("turbomind") => Some(Backend::Turbomind),
            _ => None,
        }
    }

    /// The KV storage asked for (default: the model dtype).
    pub fn quant_policy(&self) -> QuantPolicy {
        self.quant_policy
            .and_then(|n| QuantPolicy::parse(&n.to_string()))
            .unwrap_or(QuantPolicy::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_checked_as_the_engine_checks_them() {
        let mut s = LmdeploySettings::default();
        s.set("--backend", "pytorch").unwrap();
        s.set("--cache-max-entry-count", "0.5").unwrap();
        s.set("--quant-policy", "int4").unwrap();
        s.set("--num_gpu_blocks", "100").unwrap();
        s.set("--model-format", "awq").unwrap();
        assert_eq!(s.weight_quantization(), Some("awq"));
        assert_eq!(s.backend(), Some(Backend::Pytorch));
        assert_eq!(s.quant_policy(), QuantPolicy::Int4);
        assert_eq!(s.cache_max_entry_count, Some(0.5));
        assert_eq!(s.num_gpu_blocks, Some(100));
        for (f, v) in [
            ("--backend", "vllm"),
            ("--cache-max-entry-count", "0"),
            ("--cache-max-entry-count", "nan"),
            ("--quant-policy", "3"),
            ("--num-gpu-blocks", "-1"),
            ("--model-format", "gguf"),
            ("--tp", "2"),
        ] {
            let e = s.set(f, v).unwrap_err();
            assert!(e.starts_with(f), "{e}");
        }
    }
}
