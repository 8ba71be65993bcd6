//! Architectures vLLM dropped, and the last release that ran them: vLLM refuses them at start-up
//! ("Model architecture X was supported in vLLM until vY, and is not supported anymore"), so a
//! plan for a later release would describe a server that never starts.
//!
//! The table is `_PREVIOUSLY_SUPPORTED_MODELS` of vLLM 0.34.0
//! (`vllm/model_executor/models/registry.py`, checked in `_ModelRegistry._raise_for_unsupported`
//! when an architecture is not registered); entries only grow from release to release.

use crate::memory::EngineVersion;

/// (architecture, last vLLM release that supported it).
const REMOVED: &[(&str, &str)] = &[
    ("MotifForCausalLM", "0.10.2"),
    ("Phi3SmallForCausalLM", "0.9.2"),
    ("Phi4FlashForCausalLM", "0.10.2"),
    ("Phi4MultimodalForCausalLM", "0.12.0"),
    ("JAISLMHeadModel", "0.22.0"),
    ("ErnieModel", "0.23.0"),
    ("ErnieForSequenceClassification", "0.23.0"),
    ("ErnieForTokenClassification", "0.23.0"),
    ("InternLM2VEForCausalLM", "0.23.0"),
    ("QWenLMHeadModel", "0.23.0"),
    ("QwenVLForConditionalGeneration", "0.23.0"),
    ("InternLMForCausalLM", "0.23.0"),
    ("DonutForConditionalGeneration", "0.10.2"),
    ("MllamaForConditionalGeneration", "0.10.2"),
    ("XverseForCausalLM", "0.23.0"),
    ("Dots1ForCausalLM", "0.23.0"),
    ("BambaForCausalLM", "0.23.0"),
    ("MiniMaxForCausalLM", "0.23.0"),
    ("MiniMaxText01ForCausalLM", "0.23.0"),
    ("MiniMaxM1ForCausalLM", "0.23.0"),
    ("MiniMaxVL01ForConditionalGeneration", "0.23.0"),
    ("BaiChuanForCausalLM", "0.23.0"),
    ("BaichuanForCausalLM", "0.23.0"),
    ("AquilaModel", "0.24.0"),
    ("AquilaForCausalLM", "0.24.0"),
    ("Grok1ModelForCausalLM", "0.24.0"),
    ("Grok1ForCausalLM", "0.24.0"),
    ("TarsierForConditionalGeneration", "0.24.0"),
    ("Tarsier2ForConditionalGeneration", "0.23.0"),
    ("MantisForConditionalGeneration", "0.24.0"),
    ("MusicFlamingoForConditionalGeneration", "0.24.0"),
    ("AyaVisionForConditionalGeneration", "0.24.0"),
    ("TeleChatForCausalLM", "0.25.0"),
    ("PersimmonForCausalLM", "0.25.0"),
    ("FuyuForCausalLM", "0.25.0"),
    ("Plamo2ForCausalLM", "0.26.0"),
    ("OuroForCausalLM", "0.26.0"),
    ("ArcticForCausalLM", "0.28.0"),
    ("ChameleonForConditionalGeneration", "0.28.0"),
    ("Cheers", "0.28.0"),
    ("CheersForConditionalGeneration", "0.28.0"),
    ("Fairseq2LlamaForCausalLM", "0.28.0"),
    ("FireRedLIDForConditionalGeneration", "0.28.0"),
    ("GritLM", "0.28.0"),
    ("HCXVisionForCausalLM", "0.28.0"),
    ("MPTForCausalLM", "0.28.0"),
    ("MptForCausalLM", "0.28.0"),
    ("RWForCausalLM", "0.28.0"),
    ("StableLMEpochForCausalLM", "0.28.0"),
    ("PrithviGeoSpatialMAE", "0.28.0"),
    ("KeyeForConditionalGeneration", "0.33.0"),
    ("KeyeVL1_5ForConditionalGeneration", "0.33.0"),
];

/// vLLM's refusal of `architecture` in `version` (the newest modelled release when `None`),
/// in vLLM's words plus the release to use instead; `None` when the release still runs it.
pub fn refusal(architecture: &str, version: Option<EngineVersion>) -> Option<String> {
    let (_, last) = REMOVED.iter().find(|(a, _)| *a == architecture)?;
    let last_v = EngineVersion::parse(last)?;
    let v = version.unwrap_or(EngineVersion::LATEST);
    (v > last_v).then(|| {
        format!(
            "model architecture {architecture} was supported in vLLM until v{last}, and is not supported anymore in {v} (vllm/model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS): plan it with --engine-version {last}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_after_its_last_release_only() {
        let v = |s| EngineVersion::parse(s);
        assert!(refusal("MiniMaxM1ForCausalLM", v("0.23.0")).is_none());
        assert!(refusal("MiniMaxM1ForCausalLM", v("0.11.0")).is_none());
        let why = refusal("MiniMaxM1ForCausalLM", v("0.24.0")).unwrap();
        assert!(why.contains("until v0.23.0") && why.contains("--engine-version 0.23.0"));
        // no release given: the newest modelled one, which no longer runs it
        assert!(refusal("BambaForCausalLM", None).is_some());
        assert!(refusal("LlamaForCausalLM", None).is_none());
        // every entry's release parses
        assert!(
            REMOVED
                .iter()
                .all(|(_, l)| EngineVersion::parse(l).is_some())
        );
    }
}
