//! Which inference engine a command starts, and what that engine accepts in its environment.
//!
//! `run` sets as little as it can; each engine's room (`inferscope_plan::engines`) says where
//! even that little would break it, citing the engine's own source for the release it was read
//! from (see docs/run.md, "Engine compatibility"). Unknown programs get the CUDA runtime's own
//! rules.

pub use inferscope_host::engine::Engine;

/// What one engine accepts and does to its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Name used in messages and JSON.
    pub name: &'static str,
    /// Whether `CUDA_VISIBLE_DEVICES` may hold `GPU-...` UUIDs.
    pub accepts_uuids: bool,
    /// Why (source file and function, release).
    pub uuid_source: &'static str,
    /// Set when the engine sets `OMP_NUM_THREADS` itself when it is unset: the source.
    pub sets_omp_threads: Option<&'static str>,
    /// Set when `expandable_segments:True` conflicts with this engine flag: (flag, source).
    pub expandable_conflict: Option<(&'static str, &'static str)>,
}

/// Detect the engine from the server command, through wrappers (`env X=1`, `nohup`,
/// `numactl ... --`, `python -m MODULE`): the detector `plan` and `mem startup` share
/// ([`inferscope_host::engine_command`]). `None`: a program that is no engine inferscope knows.
pub fn detect(command: &[String]) -> Option<Engine> {
    use inferscope_host::engine_command::{Found, find};
    match find(command) {
        Found::Engine { kind, .. } => Some(kind),
        // Any `vllm` subcommand or engine module imports the engine, so its environment rules
        // apply even where `plan` would not call it a server.
        Found::VllmNotServe { .. } => Some(Engine::Vllm),
        Found::PythonModule { module, .. } => {
            inferscope_host::engine_command::module_engine(&module)
        }
        Found::NoCommand | Found::PythonScript { .. } | Found::Other { .. } => None,
    }
}

/// The compatibility row of an engine (its room's,
/// [`inferscope_plan::engines::EngineRoom::environment`]); `None` (an unknown program), or an
/// engine whose environment is not modelled, gets the CUDA runtime's own rules.
pub fn rules(engine: Option<Engine>) -> Rules {
    let room = engine.map(|e| (e, inferscope_plan::engines::room(e).environment()));
    match room {
        Some((e, Ok(r))) => Rules {
            name: e.name(),
            accepts_uuids: r.accepts_uuids,
            uuid_source: r.uuid_source,
            sets_omp_threads: r.sets_omp_threads,
            expandable_conflict: r.expandable_conflict,
        },
        Some((e, Err(_))) => Rules {
            name: e.name(),
            ..CUDA_RUNTIME
        },
        None => CUDA_RUNTIME,
    }
}

/// What the CUDA runtime itself accepts: the rules of a program inferscope knows nothing of.
const CUDA_RUNTIME: Rules = Rules {
    name: "unknown engine",
    accepts_uuids: true,
    uuid_source: "the CUDA runtime accepts indices and GPU- UUIDs in CUDA_VISIBLE_DEVICES (CUDA C Programming Guide, CUDA Environment Variables)",
    sets_omp_threads: None,
    expandable_conflict: None,
};
