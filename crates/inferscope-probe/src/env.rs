//! The environment variables that change how inference servers use GPUs, CPUs and memory.
//!
//! Read from `/proc/self/environ` under the root (not `std::env`) so a gathered archive replays
//! them. Only variables that matter are kept, and values of anything that looks like a secret
//! are replaced, because snapshots get pasted into bug reports.

use crate::fsroot::FsRoot;
use inferscope_formats::environ;
use std::collections::BTreeMap;

/// Exact names kept.
const NAMES: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_HIP_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "LD_PRELOAD",
    "HUGGING_FACE_HUB_TOKEN",
];

/// Prefixes kept, besides each engine's own (its room's `env_prefixes`).
const PREFIXES: &[&str] = &[
    "NCCL_",
    "HF_",
    "TORCH_",
    "TRANSFORMERS_",
    "UCX_",
    "GOMP_",
    "KMP_",
];

/// Secret names, recorded only as present (their value is [`REDACTED`]), even though they do not
/// change how a server uses the hardware: a bug report may need to know that a key was set.
const PRESENCE_ONLY: &[&str] = &["OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"];

/// Placeholder written instead of a secret value.
pub use inferscope_host::redact::REDACTED;

/// True when the variable matters for serving (or its presence matters: [`PRESENCE_ONLY`]).
pub fn is_relevant(name: &str) -> bool {
    NAMES.contains(&name)
        || PRESENCE_ONLY.contains(&name)
        || PREFIXES.iter().any(|p| name.starts_with(p))
        || inferscope_host::engine::Engine::ALL.into_iter().any(|e| {
            inferscope_plan::engines::room(e)
                .env_prefixes()
                .iter()
                .any(|p| name.starts_with(p))
        })
}

/// True when the variable's value must not be recorded (see [`inferscope_host::redact`]).
pub fn is_secret(name: &str) -> bool {
    inferscope_host::redact::is_secret_name(name)
}

/// Relevant variables; secret names recorded as [`REDACTED`], credentials in URLs and
/// token-shaped substrings removed from every other value.
pub fn filter(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(k, _)| is_relevant(k))
        .map(|(k, v)| {
            let v = inferscope_host::redact::env_value(&k, &v).into_owned();
            (k, v)
        })
        .collect()
}

/// Read the relevant environment of the capturing process (empty when not readable).
pub fn probe_env(fs: &FsRoot) -> BTreeMap<String, String> {
    match fs.read_bytes("proc/self/environ") {
        Ok(bytes) => filter(environ::parse(&bytes)),
        Err(_) => BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engines_own_variables_are_kept() {
        // the prefixes come from the engines' rooms; an unrelated variable is not kept
        for kept in [
            "VLLM_USE_V1",
            "TGI_WIGGLE_ROOM",
            "LLAMA_ARG_N_GPU_LAYERS",
            "OLLAMA_NUM_PARALLEL",
            "NCCL_DEBUG",
        ] {
            assert!(is_relevant(kept), "{kept}");
        }
        for e in inferscope_plan::engines::Engine::ALL {
            for prefix in inferscope_plan::engines::room(e).env_prefixes() {
                assert!(is_relevant(&format!("{prefix}ENABLE_X")), "{prefix}");
            }
        }
        assert!(!is_relevant("EDITOR"));
    }

    #[test]
    fn keeps_serving_vars_and_redacts_secrets() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("CUDA_VISIBLE_DEVICES", "1,0"),
            ("NCCL_P2P_DISABLE", "1"),
            ("HF_TOKEN", "hf_abc"),
            ("VLLM_API_KEY", "sk-1"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("OPENAI_API_KEY", "sk-live"),
            ("HF_ENDPOINT", "https://me:pw@mirror.example/"),
            ("VLLM_EXTRA", "--api-key=hf_abcdefghijklmnopqrstuvwxyz"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        let env = filter(vars);
        assert_eq!(
            env.get("CUDA_VISIBLE_DEVICES").map(String::as_str),
            Some("1,0")
        );
        assert_eq!(env.get("HF_TOKEN").map(String::as_str), Some(REDACTED));
        assert_eq!(env.get("VLLM_API_KEY").map(String::as_str), Some(REDACTED));
        assert_eq!(
            env.get("OPENAI_API_KEY").map(String::as_str),
            Some(REDACTED)
        );
        assert_eq!(
            env.get("HF_ENDPOINT").map(String::as_str),
            Some("https://me:<redacted>@mirror.example/")
        );
        assert_eq!(
            env.get("VLLM_EXTRA").map(String::as_str),
            Some("--api-key=<redacted>")
        );
        assert!(!env.contains_key("PATH"));
        assert!(!env.contains_key("AWS_SECRET_ACCESS_KEY"));
    }
}
