//! Ollama (`ollama serve`): recognised from its command; its environment rules (`run`),
//! no memory, speed or command options modelled.

use super::{EngineRoom, EnvironmentRules, ImageShape, NotModelled, OfficialImage};
use inferscope_host::engine::Engine;

/// The room.
pub struct Ollama;

impl EngineRoom for Ollama {
    fn engine(&self) -> Engine {
        Engine::Ollama
    }

    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        // `run`'s rules, read from the engine's source (docs/run.md "Engine compatibility")
        Ok(EnvironmentRules {
            accepts_uuids: true,
            uuid_source: "docs/gpu.md (ollama) \"GPU Selection\": UUIDs are preferred over numeric IDs",
            sets_omp_threads: None,
            expandable_conflict: None,
        })
    }

    /// The image and its entrypoint, as its own Dockerfile says:
    /// `ollama/ollama`: `ENTRYPOINT ["/bin/ollama"]`, `CMD ["serve"]`: the arguments
    /// after `ollama`.
    fn official_image(&self, s: &ImageShape) -> Result<OfficialImage, NotModelled> {
        Ok(OfficialImage {
            image: format!("ollama/ollama:{}", s.tag("")),
            entrypoint: None,
            args: s.rest.clone(),
            how: "the arguments after ollama: the image's ENTRYPOINT is /bin/ollama",
        })
    }

    fn env_prefixes(&self) -> &'static [&'static str] {
        &["OLLAMA_"]
    }
}
