//! MLC LLM: speed calibration only (its fitted efficiency); no memory accounting or command
//! options modelled.

use super::{EngineRoom, NotModelled};
use crate::speed::engines::{EngineEfficiency, row};
use inferscope_host::engine::Engine;

/// The room.
pub struct Mlc;

impl EngineRoom for Mlc {
    fn engine(&self) -> Engine {
        Engine::Mlc
    }

    fn speed(&self) -> Result<EngineEfficiency, NotModelled> {
        // fitted by tests/speed_accuracy.rs on the calibration half of fixtures/speed/cases.jsonl
        Ok(row(
            Engine::Mlc,
            (
                0.68,
                0.38,
                1.00e-05,
                5.00e-05,
                "calibration half: 1 mlc case(s)",
            ),
        ))
    }
}
