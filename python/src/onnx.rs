//! `NativeInferenceSession` (onnxruntime's `InferenceSession` interface over
//! [`wgflow::onnx::InferenceSession`]) and the trainable import.

use crate::convert::{array_from_host, feed_from_array};
use crate::errors::{poisoned, IntoPy};
use crate::graph::{PyGraph, PyTensor};
use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use std::sync::Mutex;
use wgflow::onnx::{Declared, ImportOptions, InferenceSession};
use wgflow::{Device, HostTensor, SessionOptions};

/// onnxruntime's type string (`tensor(float)`) for an ONNX element type name.
fn ort_type(onnx_type: &str) -> String {
    let t = match onnx_type {
        "FLOAT" => "float",
        "DOUBLE" => "double",
        "FLOAT16" => "float16",
        "BFLOAT16" => "bfloat16",
        "INT64" => "int64",
        "INT32" => "int32",
        "INT16" => "int16",
        "INT8" => "int8",
        "UINT64" => "uint64",
        "UINT32" => "uint32",
        "UINT16" => "uint16",
        "UINT8" => "uint8",
        "BOOL" => "bool",
        "STRING" => "string",
        other => return format!("tensor({})", other.to_ascii_lowercase()),
    };
    format!("tensor({t})")
}

fn declared<'py>(py: Python<'py>, d: &Declared) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("name", &d.name)?;
    let dims: Vec<Py<PyAny>> = d
        .dims
        .iter()
        .map(|x| match x.known() {
            Some(n) => Ok(n.into_pyobject(py)?.into_any().unbind()),
            None => Ok(x.to_string().into_pyobject(py)?.into_any().unbind()),
        })
        .collect::<PyResult<_>>()?;
    out.set_item("shape", dims)?;
    out.set_item("type", ort_type(&d.onnx_type))?;
    Ok(out)
}

/// An ONNX model ready to run by names.
#[pyclass(name = "NativeInferenceSession", module = "wgflow._wgflow", frozen)]
pub struct PyInferenceSession {
    inner: Mutex<InferenceSession>,
    inputs: Vec<Declared>,
    outputs: Vec<Declared>,
}

#[pymethods]
impl PyInferenceSession {
    #[new]
    #[pyo3(signature = (path, device=None))]
    fn new(py: Python<'_>, path: &str, device: Option<&str>) -> PyResult<Self> {
        let default_device = device.map(Device::parse).transpose().py_err(py)?;
        let options = SessionOptions {
            default_device,
            ..SessionOptions::default()
        };
        let s = py
            .detach(|| InferenceSession::new(Path::new(path), ImportOptions::default(), options))
            .py_err(py)?;
        Ok(PyInferenceSession {
            inputs: s.inputs().to_vec(),
            outputs: s.outputs().to_vec(),
            inner: Mutex::new(s),
        })
    }

    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inputs.iter().map(|d| declared(py, d)).collect()
    }

    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.outputs.iter().map(|d| declared(py, d)).collect()
    }

    /// Run with `feeds` by input name; `fetches` by value name (`None`: every output).
    /// Declared int64 outputs come back as int64.
    fn run<'py>(
        &self,
        py: Python<'py>,
        fetches: Option<Vec<String>>,
        feeds: Vec<(String, Bound<'py, PyUntypedArray>)>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let fed: Vec<(String, HostTensor)> = feeds
            .iter()
            .map(|(n, a)| Ok((n.clone(), feed_from_array(py, a)?)))
            .collect::<PyResult<_>>()?;
        let names: Vec<String> = match &fetches {
            Some(f) => f.clone(),
            None => self.outputs.iter().map(|d| d.name.clone()).collect(),
        };
        let int64: Vec<bool> = names
            .iter()
            .map(|n| self.outputs.iter().any(|d| &d.name == n && d.is_int64()))
            .collect();
        let (fed_names, fed_values): (Vec<String>, Vec<HostTensor>) = fed.into_iter().unzip();
        let out = py
            .detach(|| {
                let mut s = self.inner.lock().map_err(|_| None)?;
                // The one copy is NumPy's memory into `fed`; from there the values move.
                let feeds: Vec<(&str, HostTensor)> = fed_names
                    .iter()
                    .map(String::as_str)
                    .zip(fed_values)
                    .collect();
                let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
                s.run_owned(Some(&fetch), feeds).map_err(Some)
            })
            .map_err(|e| match e {
                Some(e) => crate::errors::to_py(py, e),
                None => poisoned(()),
            })?;
        out.into_iter()
            .zip(int64)
            .map(|(h, wide)| array_from_host(py, h, wide))
            .collect()
    }

    /// Seconds each of `runs` calls of Rust's `InferenceSession::run_owned` took for every
    /// output, timed in Rust with the feeds converted once: `benches/python_overhead.py`'s
    /// in-process baseline.
    fn _time_runs(
        &self,
        py: Python<'_>,
        feeds: Vec<(String, Bound<'_, PyUntypedArray>)>,
        runs: usize,
    ) -> PyResult<Vec<f64>> {
        let fed: Vec<(String, HostTensor)> = feeds
            .iter()
            .map(|(n, a)| Ok((n.clone(), feed_from_array(py, a)?)))
            .collect::<PyResult<_>>()?;
        let names: Vec<&str> = self.outputs.iter().map(|d| d.name.as_str()).collect();
        py.detach(|| {
            let mut s = self.inner.lock().map_err(|_| None)?;
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let feeds: Vec<(&str, HostTensor)> =
                    fed.iter().map(|(n, h)| (n.as_str(), h.clone())).collect();
                let t = std::time::Instant::now();
                s.run_owned(Some(&names), feeds).map_err(Some)?;
                times.push(t.elapsed().as_secs_f64());
            }
            Ok(times)
        })
        .map_err(|e| match e {
            Some(e) => crate::errors::to_py(py, e),
            None => poisoned(()),
        })
    }
}

/// Import an ONNX model as a graph whose initializers are variables (for fine-tuning):
/// returns the graph and its inputs and outputs as `(name, tensor)` lists.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn import_trainable(
    py: Python<'_>,
    path: &str,
) -> PyResult<(PyGraph, Vec<(String, PyTensor)>, Vec<(String, PyTensor)>)> {
    let m = py
        .detach(|| wgflow::onnx::import_trainable(Path::new(path), &ImportOptions::default()))
        .py_err(py)?;
    let ins = m
        .inputs
        .iter()
        .map(|v| (v.name.clone(), PyTensor { t: v.tensor }))
        .collect();
    let outs = m
        .outputs
        .iter()
        .map(|v| (v.name.clone(), PyTensor { t: v.tensor }))
        .collect();
    Ok((PyGraph::wrap(m.graph), ins, outs))
}
