//! ONNX import: the conformance suite's node tests on every device (`conformance.rs`) and
//! hostile files (`hostile.rs`), the light models (`light.rs`).

#[path = "../common/mod.rs"]
mod common;

pub mod conformance;
pub mod finetune;
pub mod hostile;
pub mod light;
pub mod recurrent;
