//! The wgpu backend: contexts, pipeline cache, and the executor.

pub mod bytes;
pub mod context;
pub mod exec;
pub mod split;

pub use context::GpuContext;
