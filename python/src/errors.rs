//! wgflow's [`Error`] as Python exceptions, by variant and kind, never by message text:
//! `ValueError` for shapes and values, `TypeError` for dtypes and unsupported constructs,
//! `MemoryError` for a host allocation that failed, `RuntimeError` for devices. A builder's
//! refusal goes by its [`BuildKind`]: a dtype or an argument count is a `TypeError`, a shape
//! or an argument's value a `ValueError`; an ONNX import's by its [`OnnxKind`].
//!
//! A builder error carries the Rust caller's location, which for Python users is a line of
//! this crate; it is replaced by the Python caller's file and line (`wgflow._util.caller`).

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use wgflow::{BuildKind, Error, FeedKind, HostKind, OnnxKind};

/// The Python caller's `file:line`, outside the wgflow package; `None` if it cannot be found.
pub fn python_caller(py: Python<'_>) -> Option<String> {
    let util = py.import("wgflow._util").ok()?;
    util.call_method0("caller").ok()?.extract::<String>().ok()
}

/// `text` without the " (built at python/src/…)" a node's site adds: every node a Python
/// program builds is built at the same line of this crate, which tells the user nothing.
fn without_binding_site(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(start) = out.find(" (built at python/src/") {
        match out[start..].find(')') {
            Some(end) => out.replace_range(start..start + end + 1, ""),
            None => break,
        }
    }
    out
}

/// `e` as the Python exception its variant maps to.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Build {
            op,
            location,
            message,
            kind,
        } => {
            let at = python_caller(py).unwrap_or_else(|| location.to_string());
            let text = format!("{op} at {at}: {message}");
            // By the kind the library gives (Python's convention: a wrong argument count is
            // a TypeError too); a builder's other refusals (a name taken, a node that must
            // be a variable, run-time dimensions an op does not take) are ValueErrors.
            let dtype = matches!(kind, BuildKind::DType { .. } | BuildKind::Arity { .. });
            if dtype {
                PyTypeError::new_err(text)
            } else {
                PyValueError::new_err(text)
            }
        }
        Error::ForeignTensor {
            method,
            index,
            location,
        } => {
            let at = python_caller(py).unwrap_or_else(|| location.to_string());
            PyValueError::new_err(format!(
                "{method} at {at}: tensor #{index} belongs to another graph, not this one"
            ))
        }
        e @ Error::Feed { kind, .. } => {
            let text = without_binding_site(&e.to_string());
            match kind {
                FeedKind::DType => PyTypeError::new_err(text),
                _ => PyValueError::new_err(text),
            }
        }
        e @ Error::Host { kind, .. } => {
            let text = without_binding_site(&e.to_string());
            match kind {
                HostKind::DType => PyTypeError::new_err(text),
                HostKind::Alloc => PyMemoryError::new_err(text),
                _ => PyValueError::new_err(text),
            }
        }
        e @ Error::NotDifferentiable { .. } => {
            PyTypeError::new_err(without_binding_site(&e.to_string()))
        }
        e @ Error::Onnx { kind, .. } => match kind {
            OnnxKind::Invalid => PyValueError::new_err(e.to_string()),
            // A dtype, or a construct wgflow does not run (and any kind added later).
            _ => PyTypeError::new_err(e.to_string()),
        },
        e @ (Error::Fetch { .. }
        | Error::Shader { .. }
        | Error::GraphDef { .. }
        | Error::Assign { .. }
        | Error::Checkpoint { .. }) => PyValueError::new_err(without_binding_site(&e.to_string())),
        // Device, Placement, Limit, LoopLimit, Dispatch, Alloc, Gpu, Internal and whatever
        // variants come later: the device or the library, not the user's values.
        e => PyRuntimeError::new_err(without_binding_site(&e.to_string())),
    }
}

/// `Result<T, wgflow::Error>` → `PyResult<T>`.
pub trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for wgflow::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// A poisoned lock (a panic while it was held) as a `RuntimeError`, not a second panic.
pub fn poisoned<T>(_: T) -> PyErr {
    PyRuntimeError::new_err(
        "wgflow: an earlier call panicked while holding this object; create a new one",
    )
}
