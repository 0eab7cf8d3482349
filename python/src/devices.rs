//! Devices: the physical list, `WGFLOW_VISIBLE_DEVICES`, the best device.

use crate::errors::IntoPy;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use wgflow::{Device, PhysicalDevice};

fn describe<'py>(py: Python<'py>, d: &PhysicalDevice) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("device", d.device.to_string())?;
    out.set_item("name", &d.name)?;
    out.set_item("kind", &d.device_type)?;
    out.set_item("backend", &d.backend)?;
    out.set_item("driver", &d.driver)?;
    let l = &d.limits;
    let limits = PyDict::new(py);
    limits.set_item("max_buffer_size", l.max_buffer_size)?;
    limits.set_item(
        "max_storage_buffer_binding_size",
        l.max_storage_buffer_binding_size,
    )?;
    limits.set_item(
        "max_storage_buffers_per_shader_stage",
        l.max_storage_buffers_per_shader_stage,
    )?;
    limits.set_item(
        "max_compute_workgroups_per_dimension",
        l.max_compute_workgroups_per_dimension,
    )?;
    limits.set_item(
        "min_storage_buffer_offset_alignment",
        l.min_storage_buffer_offset_alignment,
    )?;
    limits.set_item("shader_f16", l.shader_f16)?;
    out.set_item("limits", limits)?;
    Ok(out)
}

/// Every physical device (GPUs in preference order, then `cpu:0`), as dicts.
#[pyfunction]
pub fn physical_devices(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let list = py.detach(wgflow::devices);
    list.iter().map(|d| describe(py, d)).collect()
}

/// The GPU indices `WGFLOW_VISIBLE_DEVICES` allows (`None`: unset); a bad value is an error.
#[pyfunction]
pub fn visible_from_env(py: Python<'_>) -> PyResult<Option<Vec<usize>>> {
    py.detach(wgflow::backend::visible_gpus_from_env).py_err(py)
}

/// The best device among the visible GPUs (`visible`: indices, `None` for the environment's
/// choice): the first hardware GPU in preference order, else `cpu:0` (software adapters such
/// as lavapipe rank below `cpu:0`, as `Device::best` ranks them).
#[pyfunction]
#[pyo3(signature = (visible=None))]
pub fn best_device(py: Python<'_>, visible: Option<Vec<usize>>) -> String {
    py.detach(|| match visible {
        None => Device::best(),
        Some(v) => wgflow::devices()
            .into_iter()
            .find(|d| match d.device {
                Device::Gpu(i) => v.contains(&i) && d.device_type != "software",
                _ => false,
            })
            .map(|d| d.device)
            .unwrap_or(Device::Cpu),
    })
    .to_string()
}

/// A device spec (`"gpu:0"`, `"/GPU:0"`, `"cpu"`) in wgflow's canonical spelling.
#[pyfunction]
pub fn parse_device(py: Python<'_>, spec: &str) -> PyResult<String> {
    Device::parse(spec).map(|d| d.to_string()).py_err(py)
}
