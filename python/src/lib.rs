//! The native half of the `wgflow` Python package (`wgflow._wgflow`).
//!
//! Everything here is a thin layer over the Rust library: graphs, sessions and ONNX models are
//! the library's own types behind a mutex, tensors are its handles, and errors are its
//! [`wgflow::Error`] mapped by variant to Python exception types (`errors.rs`). The Pythonic
//! surface (operators, context managers, `vectorize`, arrays) is the pure-Python package in
//! `pysrc/wgflow/`, which calls only what this module exports.

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

use pyo3::prelude::*;

mod convert;
mod devices;
mod errors;
mod graph;
mod onnx;
mod session;

#[pymodule]
fn _wgflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<graph::PyGraph>()?;
    m.add_class::<graph::PyTensor>()?;
    m.add_class::<session::PySession>()?;
    m.add_class::<onnx::PyInferenceSession>()?;
    m.add_function(wrap_pyfunction!(devices::physical_devices, m)?)?;
    m.add_function(wrap_pyfunction!(devices::visible_from_env, m)?)?;
    m.add_function(wrap_pyfunction!(devices::best_device, m)?)?;
    m.add_function(wrap_pyfunction!(devices::parse_device, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::import_trainable, m)?)?;
    m.add_function(wrap_pyfunction!(graph::unary_primitives, m)?)?;
    m.add_function(wrap_pyfunction!(graph::binary_primitives, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
