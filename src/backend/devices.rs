//! What this machine has: every usable wgpu adapter as `gpu:N` (in preference order), then
//! `cpu:0`; which of them are visible; the best one. `crate::device` describes devices; this
//! module asks the backends which exist.

use super::gpu::context;
use crate::device::{self, Device, PhysicalDevice, VISIBLE_DEVICES_ENV};
use crate::Result;

/// Number of usable GPU adapters (`gpu:0` .. `gpu:N-1`).
pub fn gpu_count() -> usize {
    context::adapter_count()
}

/// Every physical device, GPUs first in preference order, then `cpu:0` (always present).
/// Visibility is not applied here: see [`visible_devices`].
pub fn devices() -> Vec<PhysicalDevice> {
    let mut list = context::adapter_infos();
    list.push(PhysicalDevice::cpu());
    list
}

/// The devices visible under `WGFLOW_VISIBLE_DEVICES` (a comma-separated list of GPU indices;
/// empty hides every GPU). `cpu:0` is always visible. A list naming a GPU that does not
/// exist is an error here exactly as it is for a session.
pub fn visible_devices() -> Result<Vec<PhysicalDevice>> {
    let visible = visible_gpus_from_env()?;
    Ok(devices()
        .into_iter()
        .filter(|d| match (d.device, &visible) {
            (Device::Gpu(i), Some(v)) => v.contains(&i),
            _ => true,
        })
        .collect())
}

/// Parse and check `WGFLOW_VISIBLE_DEVICES`: `None` when unset; an error that names the
/// variable and the valid indices when it is malformed or lists a GPU that does not exist.
pub fn visible_gpus_from_env() -> Result<Option<Vec<usize>>> {
    match std::env::var(VISIBLE_DEVICES_ENV) {
        Ok(value) => device::parse_visible_env(&value, gpu_count()).map(Some),
        Err(_) => Ok(None),
    }
}

/// Check a visibility list (e.g. `SessionOptions::visible_devices`) against the GPUs present.
pub(crate) fn check_visible(list: &[usize], origin: &str) -> Result<()> {
    device::check_visible(list, origin, gpu_count())
}

/// The best hardware GPU that `visible` allows, else `cpu:0`.
pub(crate) fn best_of(visible: Option<&[usize]>) -> Device {
    let software: Vec<bool> = context::adapter_infos()
        .iter()
        .map(|d| d.device_type == "software")
        .collect();
    device::best_of(&software, visible)
}

impl Device {
    /// The best visible hardware GPU (discrete > integrated > virtual), else `cpu:0`: the
    /// `torch.device('cuda' if available else 'cpu')` idiom, and the default device of a
    /// session. Software adapters (lavapipe, llvmpipe, WARP: CPUs pretending to be GPUs) rank
    /// below `cpu:0`, which is faster on the same cores (docs/performance.md); they stay
    /// listed as `gpu:N` and run whatever a scope or `default_device` puts there.
    pub fn best() -> Device {
        match visible_gpus_from_env() {
            Ok(v) => best_of(v.as_deref()),
            Err(e) => {
                log::error!("{e}; ignoring {VISIBLE_DEVICES_ENV}");
                best_of(None)
            }
        }
    }
}
