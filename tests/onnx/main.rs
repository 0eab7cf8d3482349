//! ONNX import: the conformance suite's node tests on every device (`conformance.rs`) and
//! hostile files (`hostile.rs`).

#[path = "../common/mod.rs"]
mod common;

pub mod conformance;
pub mod hostile;
pub mod recurrent;
