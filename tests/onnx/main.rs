//! ONNX import: the conformance suite's node tests on every device (`conformance.rs`),
//! hostile files (`hostile.rs`) and the attention family's errors (`attention.rs`).

#[path = "../common/mod.rs"]
mod common;

pub mod attention;
pub mod conformance;
pub mod hostile;
