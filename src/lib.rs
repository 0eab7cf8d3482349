//! # wgflow
//!
//! Static dataflow graphs of tensor ops, compiled to WGSL compute pipelines and run through
//! `wgpu` — or on a built-in CPU device when no GPU exists. TensorFlow 1.x graph mode for
//! WebGPU.
//!
//! The mental model: **graph → plan → steps**. You build a [`Graph`] once (constants,
//! placeholders, ops, name and device scopes). A [`Session`] compiles the part of it your
//! fetches need into a [`Plan`](compile::Plan) — pruned, placed on devices, fused, scheduled,
//! with every intermediate given an offset in one arena per device — and runs that plan as
//! many times as you like.
//!
//! ```
//! use wgflow::{Graph, Session, SessionOptions, DType, HostTensor};
//!
//! # fn main() -> wgflow::Result<()> {
//! let mut g = Graph::new();
//! let x = g.placeholder("x", [3], DType::F32)?;
//! let b = g.constant([4.0f32, 5.0, 6.0])?;
//! let y = g.add(x, b)?;                  // shape and dtype are checked here
//! let z = g.relu(y)?;
//!
//! let mut s = Session::new(&g, SessionOptions::default())?; // best GPU, else cpu:0
//! let out = s.run(&[(x, HostTensor::from([1.0f32, -9.0, 3.0]))], &[z])?;
//! assert_eq!(out[0].to_vec::<f32>()?, vec![5.0, 0.0, 9.0]);
//! # Ok(()) }
//! ```
//!
//! Pin work to a device with a scope (`with tf.device('/GPU:0')`): `g.device("gpu:0", |g| ...)`.
//! List devices with [`devices()`]; pick one with [`Device::best()`].

// Library code returns errors: a panic on input a user controls would abort their program
// (or poison a page's module). Tests may unwrap.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::todo,
        clippy::unimplemented
    )
)]

pub mod backend;
pub mod checkpoint;
pub mod compile;
pub mod device;
pub mod dtype;
pub mod error;
pub mod files;
pub mod graph;
pub mod host;
pub mod id;
pub mod npy;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod ops;
pub mod session;
pub mod shape;
pub mod trace;
pub mod train;

pub use backend::{devices, visible_devices};
pub use device::{Device, DeviceSpec, PhysicalDevice};
pub use dtype::DType;
pub use error::{BuildKind, Error, FeedKind, HostKind, OnnxKind, Result};
pub use graph::{Axes, Binding, Dim, Graph, Tensor};
pub use graph::{Conv2dOptions, PadMode};
/// IEEE half precision, the host type of [`DType::F16`] tensors (re-exported from `half`).
pub use half::f16;
pub use host::{Element, HostTensor, SharedWords};
pub use id::{Id, IdVec};
pub use ops::{Initializer, SliceArg};
pub use session::{Counters, Session, SessionOptions};
pub use shape::Shape;

/// The README's code blocks are compiled and run as doctests, so the quickstart stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}
