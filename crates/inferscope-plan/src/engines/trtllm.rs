//! TensorRT-LLM: speed calibration only (its fitted efficiency); no memory accounting or
//! command options modelled.

use super::{EngineRoom, NotModelled};
use crate::speed::engines::{EngineEfficiency, row};
use inferscope_host::engine::Engine;

/// The room.
pub struct Trtllm;

impl EngineRoom for Trtllm {
    fn engine(&self) -> Engine {
        Engine::Trtllm
    }

    fn speed(&self) -> Result<EngineEfficiency, NotModelled> {
        // fitted by tests/speed_accuracy.rs on the calibration half of fixtures/speed/cases.jsonl
        Ok(row(
            Engine::Trtllm,
            (
                1.0,
                0.6,
                1.60e-05,
                0.00e+00,
                "calibration half: 4 trtllm case(s)",
            ),
        ))
    }
}
