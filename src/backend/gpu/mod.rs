//! The wgpu backend: contexts, WGSL codegen, pipeline cache, and the executor.

pub mod codegen;
pub mod context;
pub mod exec;
pub mod split;

pub use context::GpuContext;
