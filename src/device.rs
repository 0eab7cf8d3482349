//! Physical devices: every wgpu adapter as `gpu:N`, plus `cpu:0`; device specs as users write
//! them (`gpu:0`, `/GPU:0`, `/device:GPU:0`, `cpu:0`, `gpu`); visibility; `Device::best()`.

use crate::backend::gpu::context::{self, GpuContext};
use crate::{Error, Result};
use std::fmt;
use std::sync::Arc;

/// A concrete device: `cpu:0` or `gpu:N`, where N indexes [`devices`]' GPU order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Cpu,
    Gpu(usize),
}

impl Device {
    /// The best visible GPU (discrete > integrated > virtual > software), else `cpu:0`:
    /// the `torch.device('cuda' if available else 'cpu')` idiom.
    pub fn best() -> Device {
        match visible_gpus_from_env() {
            Ok(v) => best_of(v.as_deref()),
            Err(e) => {
                log::error!("{e}; ignoring {VISIBLE_DEVICES_ENV}");
                best_of(None)
            }
        }
    }

    /// Parse a concrete device spec (`"gpu"` without an index is not concrete: use
    /// [`DeviceSpec::parse`] for scopes).
    pub fn parse(spec: &str) -> Result<Device> {
        let s = DeviceSpec::parse(spec)?;
        match s {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Gpu(Some(i)) => Ok(Device::Gpu(i)),
            DeviceSpec::Gpu(None) => Err(Error::Device {
                spec: spec.into(),
                message: "names no particular GPU; write gpu:N".into(),
            }),
        }
    }

    pub fn is_gpu(self) -> bool {
        matches!(self, Device::Gpu(_))
    }
}

pub(crate) fn best_of(visible: Option<&[usize]>) -> Device {
    let n = context::adapter_count();
    (0..n)
        .find(|i| visible.is_none_or(|v| v.contains(i)))
        .map(Device::Gpu)
        .unwrap_or(Device::Cpu)
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu:0"),
            Device::Gpu(i) => write!(f, "gpu:{i}"),
        }
    }
}

/// A device request as written in a scope: a kind and maybe an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceSpec {
    Cpu,
    /// `gpu` alone means "the best visible GPU".
    Gpu(Option<usize>),
}

impl DeviceSpec {
    /// Accepts `gpu:0`, `GPU:0`, `/GPU:0`, `/device:GPU:0`, `/job:x/device:GPU:0`, `cpu`,
    /// `cpu:0`, `/CPU:0` and `gpu`.
    pub fn parse(spec: &str) -> Result<DeviceSpec> {
        let bad = |message: &str| Error::Device {
            spec: spec.to_string(),
            message: message.to_string(),
        };
        let mut s = spec.trim();
        // TensorFlow's full names carry job/replica/task parts; only the device part matters.
        if let Some(pos) = s.rfind("device:") {
            s = &s[pos + "device:".len()..];
        }
        let s = s.trim_start_matches('/').to_ascii_lowercase();
        let (kind, index) = match s.split_once(':') {
            Some((k, i)) => (k.to_string(), Some(i.to_string())),
            None => (s.clone(), None),
        };
        let index = match index {
            None => None,
            Some(i) => Some(i.parse::<usize>().map_err(|_| {
                bad("the index after ':' must be a non-negative integer, e.g. gpu:0")
            })?),
        };
        match kind.as_str() {
            "cpu" => match index {
                None | Some(0) => Ok(DeviceSpec::Cpu),
                Some(_) => Err(bad("there is one CPU device, cpu:0")),
            },
            "gpu" => Ok(DeviceSpec::Gpu(index)),
            _ => Err(bad("expected gpu:N, /GPU:N, /device:GPU:N, gpu, or cpu:0")),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu:0"),
            DeviceSpec::Gpu(Some(i)) => write!(f, "gpu:{i}"),
            DeviceSpec::Gpu(None) => write!(f, "gpu"),
        }
    }
}

/// Limits of a device that the planner and executor respect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLimits {
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub min_storage_buffer_offset_alignment: u32,
    /// Kernels may store and compute f16 (WebGPU's `shader-f16` feature; always on `cpu:0`).
    pub shader_f16: bool,
}

impl DeviceLimits {
    /// The CPU device has no binding limits; only address space bounds it.
    pub fn cpu() -> Self {
        DeviceLimits {
            max_buffer_size: u64::MAX,
            max_storage_buffer_binding_size: u64::MAX,
            max_storage_buffers_per_shader_stage: u32::MAX,
            max_compute_workgroups_per_dimension: u32::MAX,
            min_storage_buffer_offset_alignment: 4,
            shader_f16: true,
        }
    }
}

/// One entry of [`devices`].
#[derive(Debug, Clone)]
pub struct PhysicalDevice {
    pub device: Device,
    pub name: String,
    /// `vulkan`, `gl`, `metal`, `dx12`, or `cpu` for the built-in device.
    pub backend: String,
    /// `discrete`, `integrated`, `virtual`, `software` (e.g. lavapipe) or `other`.
    pub device_type: String,
    pub driver: String,
    pub limits: DeviceLimits,
}

impl fmt::Display for PhysicalDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<7} {:<34} {:<7} {:<10} max_buffer={} max_binding={}",
            self.device.to_string(),
            self.name,
            self.backend,
            self.device_type,
            self.limits.max_buffer_size,
            self.limits.max_storage_buffer_binding_size
        )
    }
}

/// Every physical device, GPUs first in preference order, then `cpu:0` (always present).
/// Visibility is not applied here: see [`visible_devices`].
pub fn devices() -> Vec<PhysicalDevice> {
    let mut list = context::adapter_infos();
    list.push(PhysicalDevice {
        device: Device::Cpu,
        name: "wgflow reference CPU".into(),
        backend: "cpu".into(),
        device_type: "cpu".into(),
        driver: format!("wgflow {}", env!("CARGO_PKG_VERSION")),
        limits: DeviceLimits::cpu(),
    });
    list
}

/// The environment variable listing the GPUs a session may use.
pub const VISIBLE_DEVICES_ENV: &str = "WGFLOW_VISIBLE_DEVICES";

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
    let Ok(value) = std::env::var(VISIBLE_DEVICES_ENV) else {
        return Ok(None);
    };
    let origin = format!("{VISIBLE_DEVICES_ENV}={value}");
    let list = parse_visible_list(&value).map_err(|e| {
        let problem = match e {
            Error::Device { spec, .. } => {
                format!("'{spec}' is not a GPU index (write indices such as 0,1 or gpu:1)")
            }
            other => other.to_string(),
        };
        visibility_error(&origin, &problem)
    })?;
    check_visible(&list, &origin)?;
    Ok(Some(list))
}

/// Check that every index of a visibility list names a GPU that exists; `origin` says where
/// the list came from (the variable and its value, or the session option).
pub(crate) fn check_visible(list: &[usize], origin: &str) -> Result<()> {
    let gpus = context::adapter_count();
    match list.iter().find(|&&i| i >= gpus) {
        Some(i) => Err(visibility_error(origin, &format!("gpu:{i} does not exist"))),
        None => Ok(()),
    }
}

fn visibility_error(origin: &str, problem: &str) -> Error {
    let gpus = context::adapter_count();
    let valid = match gpus {
        0 => "none: there is no GPU adapter, so leave the list empty".to_string(),
        n => (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
    };
    Error::Device {
        spec: origin.to_string(),
        message: format!("{problem}; valid GPU indices: {valid} (cpu:0 is always visible)"),
    }
}

/// Parse a visibility list such as `0,1` or `gpu:1`.
pub fn parse_visible_list(list: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let i =
            match part.parse::<usize>() {
                Ok(i) => i,
                Err(_) => match DeviceSpec::parse(part)? {
                    DeviceSpec::Gpu(Some(i)) => i,
                    _ => return Err(Error::Device {
                        spec: part.into(),
                        message:
                            "visible devices are GPU indices such as 0,1 (cpu:0 is always visible)"
                                .into(),
                    }),
                },
            };
        out.push(i);
    }
    Ok(out)
}

/// The wgpu context of `gpu:N`, created on first use.
pub(crate) fn gpu_context(index: usize) -> Result<Arc<GpuContext>> {
    context::get(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_spellings() {
        for s in [
            "gpu:0",
            "/GPU:0",
            "/device:GPU:0",
            "/job:localhost/replica:0/task:0/device:GPU:0",
            "GPU:0",
        ] {
            assert_eq!(
                DeviceSpec::parse(s).unwrap(),
                DeviceSpec::Gpu(Some(0)),
                "{s}"
            );
        }
        assert_eq!(DeviceSpec::parse("gpu").unwrap(), DeviceSpec::Gpu(None));
        assert_eq!(DeviceSpec::parse("/CPU:0").unwrap(), DeviceSpec::Cpu);
        assert_eq!(DeviceSpec::parse("cpu").unwrap(), DeviceSpec::Cpu);
        assert!(DeviceSpec::parse("tpu:0")
            .unwrap_err()
            .to_string()
            .contains("expected gpu:N"));
        assert!(DeviceSpec::parse("cpu:1").is_err());
        assert!(DeviceSpec::parse("gpu:x").is_err());
        assert_eq!(parse_visible_list("0, 2").unwrap(), vec![0, 2]);
        assert_eq!(parse_visible_list("").unwrap(), Vec::<usize>::new());
        assert!(parse_visible_list("cpu:0").is_err());
    }
}
