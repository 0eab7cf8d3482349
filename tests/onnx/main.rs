//! ONNX import: the conformance suite's node tests on every device (`conformance.rs`),
//! hostile files (`hostile.rs`), the light models (`light.rs`), fine-tuning an imported
//! model (`finetune.rs`), and the attention, recurrent and control-flow translators' own cases.

#[path = "../common/mod.rs"]
mod common;

pub mod attention;
pub mod conformance;
pub mod einsum;
pub mod export;
pub mod finetune;
pub mod fold;
pub mod hostile;
pub mod light;
pub mod patterns;
pub mod peers;
mod protos;
pub mod quantized;
pub mod recurrent;
pub mod untrusted;
