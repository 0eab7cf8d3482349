//! `NativeSession`: a [`Session`] behind a mutex. A run converts the feeds while holding the
//! GIL, releases it for the device work (so other Python threads run meanwhile, including
//! other runs of other sessions), and converts the fetched values back.

use crate::convert::{array_from_host, feed_from_array, host_from_array};
use crate::errors::{poisoned, IntoPy};
use crate::graph::{PyGraph, PyTensor};
use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;
use wgflow::{Device, HostTensor, Session, SessionOptions, Tensor};

/// A session over a snapshot of a graph (later nodes of the graph are not in it).
#[pyclass(name = "NativeSession", module = "wgflow._wgflow", frozen)]
pub struct PySession {
    inner: Mutex<Session>,
    default_device: String,
}

type Feeds<'py> = Vec<(PyRef<'py, PyTensor>, Bound<'py, PyUntypedArray>)>;

fn host_feeds(py: Python<'_>, feeds: &Feeds<'_>) -> PyResult<Vec<(Tensor, HostTensor)>> {
    feeds
        .iter()
        .map(|(t, a)| Ok((t.t, feed_from_array(py, a)?)))
        .collect()
}

impl PySession {
    /// `f` on the session with the GIL released: device work (and waiting for another
    /// thread's run of this session) lets other Python threads go on.
    fn locked<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Session) -> wgflow::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut s = self.inner.lock().map_err(|_| None)?;
            f(&mut s).map_err(Some)
        })
        .map_err(|e| match e {
            Some(e) => crate::errors::to_py(py, e),
            None => poisoned(()),
        })
    }
}

#[pymethods]
impl PySession {
    #[new]
    #[pyo3(signature = (graph, soft_placement=false, visible_devices=None, default_device=None, log_device_placement=false))]
    fn new(
        py: Python<'_>,
        graph: &PyGraph,
        soft_placement: bool,
        visible_devices: Option<Vec<usize>>,
        default_device: Option<&str>,
        log_device_placement: bool,
    ) -> PyResult<Self> {
        let default_device = default_device.map(Device::parse).transpose().py_err(py)?;
        let options = SessionOptions {
            soft_placement,
            log_device_placement,
            visible_devices,
            default_device,
            ..SessionOptions::default()
        };
        let g = graph.read(|g| g.clone())?;
        let s = py.detach(|| Session::new(&g, options)).py_err(py)?;
        Ok(PySession {
            default_device: s.default_device().to_string(),
            inner: Mutex::new(s),
        })
    }

    /// Where unscoped nodes run.
    #[getter]
    fn default_device(&self) -> &str {
        &self.default_device
    }

    /// Run: fetched values as NumPy arrays, in order.
    fn run<'py>(
        &self,
        py: Python<'py>,
        feeds: Feeds<'py>,
        fetches: Vec<PyRef<'py, PyTensor>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let fed = host_feeds(py, &feeds)?;
        let fetch: Vec<Tensor> = fetches.iter().map(|t| t.t).collect();
        let out = self.locked(py, |s| s.run(&fed, &fetch))?;
        out.into_iter()
            .map(|h| array_from_host(py, h, false))
            .collect()
    }

    /// Seconds each of `runs` calls of Rust's `Session::run` took, timed in Rust with the
    /// feeds converted once: the baseline `benches/python_overhead.py` interleaves with
    /// Python's own calls in one process.
    fn _time_runs<'py>(
        &self,
        py: Python<'py>,
        feeds: Feeds<'py>,
        fetches: Vec<PyRef<'py, PyTensor>>,
        runs: usize,
    ) -> PyResult<Vec<f64>> {
        let fed = host_feeds(py, &feeds)?;
        let fetch: Vec<Tensor> = fetches.iter().map(|t| t.t).collect();
        self.locked(py, |s| {
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let t = std::time::Instant::now();
                s.run(&fed, &fetch)?;
                times.push(t.elapsed().as_secs_f64());
            }
            Ok(times)
        })
    }

    fn read_variable<'py>(
        &self,
        py: Python<'py>,
        v: PyRef<'py, PyTensor>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = v.t;
        let h = self.locked(py, |s| s.read_variable(v))?;
        array_from_host(py, h, false)
    }

    fn write_variable(
        &self,
        py: Python<'_>,
        v: PyRef<'_, PyTensor>,
        value: &Bound<'_, PyUntypedArray>,
    ) -> PyResult<()> {
        let h = host_from_array(py, value)?;
        let v = v.t;
        self.locked(py, |s| s.write_variable(v, &h))
    }

    /// Save variables (all, or `variables`) to a safetensors file.
    #[pyo3(signature = (path, variables=None))]
    fn save(
        &self,
        py: Python<'_>,
        path: &str,
        variables: Option<Vec<PyRef<'_, PyTensor>>>,
    ) -> PyResult<()> {
        let vars: Option<Vec<Tensor>> = variables.map(|v| v.iter().map(|t| t.t).collect());
        self.locked(py, |s| s.save(path, vars.as_deref()))
    }

    fn restore(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        self.locked(py, |s| s.restore(path))
    }

    /// The memory plan for `fetches` with these feeds: per device, the arena's peak bytes,
    /// the lower bound (most bytes live at once), the bytes without reuse and the constants'.
    fn memory<'py>(
        &self,
        py: Python<'py>,
        feeds: Feeds<'py>,
        fetches: Vec<PyRef<'py, PyTensor>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let fed = host_feeds(py, &feeds)?;
        let fetch: Vec<Tensor> = fetches.iter().map(|t| t.t).collect();
        let plan = self.locked(py, |s| s.plan_for(&fed, &fetch))?;
        let out = PyDict::new(py);
        for (device, m) in &plan.memory {
            let d = PyDict::new(py);
            d.set_item("peak_bytes", m.peak_bytes)?;
            d.set_item("lower_bound_bytes", m.lower_bound_bytes)?;
            d.set_item("no_reuse_bytes", m.no_reuse_bytes)?;
            d.set_item("constant_bytes", m.constant_bytes)?;
            d.set_item("steps", plan.steps.len())?;
            out.set_item(device.to_string(), d)?;
        }
        Ok(out)
    }

    /// What the session has created so far (plans, pipelines, buffers, runs).
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.lock().map_err(poisoned)?.counters();
        let d = PyDict::new(py);
        d.set_item("plans_compiled", c.plans_compiled)?;
        d.set_item("pipelines_created", c.pipelines_created)?;
        d.set_item("bind_groups_created", c.bind_groups_created)?;
        d.set_item("buffers_created", c.buffers_created)?;
        d.set_item("runs", c.runs)?;
        d.set_item("cpu_prepared_bytes", c.cpu_prepared_bytes)?;
        Ok(d)
    }
}
