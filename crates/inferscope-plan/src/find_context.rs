//! The context `plan --find` sizes every request for. Pure: the flags' values in, the length
//! and the reason to print out.

use crate::ModelArch;
use crate::engine::EngineSettings;

/// The context `--find` plans every request for, and why: `--max-model-len`, the pasted
/// command's, `--input-len` + `--output-len`, else the model's full context (what the engines
/// reserve when no length is given; said first in the output, with the answer at 8k beside it).
pub fn find_context(
    max_model_len: Option<u64>,
    settings: Option<&EngineSettings>,
    input_len: Option<u64>,
    output_len: Option<u64>,
    arch: &ModelArch,
) -> Result<(u64, String, bool), String> {
    if let Some(l) = max_model_len {
        return Ok((l, "--max-model-len".into(), false));
    }
    if let Some(l) = settings.and_then(|s| s.max_model_len) {
        return Ok((l, "the serving command's context flag".into(), false));
    }
    match (input_len, output_len) {
        (Some(i), Some(o)) => Ok((
            i.saturating_add(o),
            format!("--input-len {i} + --output-len {o}"),
            false,
        )),
        (Some(_), None) | (None, Some(_)) => Err(
            "--find needs both --input-len and --output-len to size the context (or --max-model-len)"
                .into(),
        ),
        (None, None) => Ok((
            arch.max_position_embeddings,
            format!(
                "the model's full context ({} tokens, max_position_embeddings) — what vLLM reserves when --max-model-len is not given; pass --max-model-len N or --input-len/--output-len for your requests",
                arch.max_position_embeddings
            ),
            true,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_then_lengths_then_the_full_context() {
        let arch = crate::catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap();
        assert_eq!(
            find_context(Some(4096), None, Some(1), Some(2), &arch)
                .unwrap()
                .0,
            4096
        );
        let (l, why, d) = find_context(None, None, Some(1000), Some(24), &arch).unwrap();
        assert_eq!(
            (l, why.as_str(), d),
            (1024, "--input-len 1000 + --output-len 24", false)
        );
        let (l, _, d) = find_context(None, None, None, None, &arch).unwrap();
        assert_eq!((l, d), (arch.max_position_embeddings, true));
        assert!(find_context(None, None, Some(1), None, &arch).is_err());
    }
}
