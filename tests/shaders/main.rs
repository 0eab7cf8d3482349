//! Generated WGSL: every kernel kind's shader validates with naga.
//! One test binary (like naga's `tests/naga/main.rs`): each file here is a module, `pub` as
//! its items were when it was a test crate of its own.

#[path = "../common/mod.rs"]
mod common;

pub mod shaders;
pub mod shaders_custom;
pub mod shaders_elementwise;
pub mod shaders_nn;
