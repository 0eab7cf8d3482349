//! Devices as data: `gpu:N` and `cpu:0`; device specs as users write them (`gpu:0`, `/GPU:0`,
//! `/device:GPU:0`, `cpu:0`, `gpu`); limits; what a physical device looks like; visibility
//! lists. Nothing here asks the machine what it has: enumerating adapters (`devices()`,
//! `Device::best()`) is the backend's job (`backend/devices.rs`), so this module depends on
//! nothing but the error type.

use crate::{Error, Result};
use std::fmt;

/// A concrete device: `cpu:0` or `gpu:N`, where N indexes [`devices`](crate::devices)' GPU
/// order. [`Device::best`] picks one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Cpu,
    Gpu(usize),
}

impl Device {
    /// Bytes that `numel` elements of `dtype` take on this device: f16 takes 2 bytes on a
    /// GPU, padded to a multiple of 4 (WebGPU's granularity for bindings and copies); one
    /// word per element on `cpu:0`.
    pub fn storage_bytes(self, dtype: crate::DType, numel: u64) -> u64 {
        match self {
            Device::Gpu(_) => (numel * dtype.gpu_size() as u64).next_multiple_of(4),
            Device::Cpu => numel * dtype.size() as u64,
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

/// The device a session uses by default, given whether each GPU (in preference order) is a
/// software adapter: the first visible hardware GPU, else `cpu:0`. Software adapters
/// (lavapipe, llvmpipe, WARP) run on the same cores as `cpu:0` and are slower than it on every
/// workload of docs/performance.md, so they are used only when a scope or
/// `default_device` names them.
pub(crate) fn best_of(software: &[bool], visible: Option<&[usize]>) -> Device {
    (0..software.len())
        .find(|&i| !software[i] && visible.is_none_or(|v| v.contains(&i)))
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

/// One entry of [`devices`](crate::devices).
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

impl PhysicalDevice {
    /// The built-in `cpu:0`, always present.
    pub(crate) fn cpu() -> Self {
        PhysicalDevice {
            device: Device::Cpu,
            name: format!("wgflow CPU ({} threads)", rayon::current_num_threads()),
            backend: "cpu".into(),
            device_type: "cpu".into(),
            driver: format!("wgflow {}", env!("CARGO_PKG_VERSION")),
            limits: DeviceLimits::cpu(),
        }
    }
}

/// The environment variable listing the GPUs a session may use.
pub const VISIBLE_DEVICES_ENV: &str = "WGFLOW_VISIBLE_DEVICES";

/// Parse and check a `WGFLOW_VISIBLE_DEVICES` value against a machine with `gpus` GPUs: an
/// error names the variable and the valid indices when it is malformed or lists a GPU that
/// does not exist.
pub(crate) fn parse_visible_env(value: &str, gpus: usize) -> Result<Vec<usize>> {
    let origin = format!("{VISIBLE_DEVICES_ENV}={value}");
    let list = parse_visible_list(value).map_err(|e| {
        let problem = match e {
            Error::Device { spec, .. } => {
                format!("'{spec}' is not a GPU index (write indices such as 0,1 or gpu:1)")
            }
            other => other.to_string(),
        };
        visibility_error(&origin, &problem, gpus)
    })?;
    check_visible(&list, &origin, gpus)?;
    Ok(list)
}

/// Check that every index of a visibility list names one of `gpus` GPUs; `origin` says where
/// the list came from (the variable and its value, or the session option).
pub(crate) fn check_visible(list: &[usize], origin: &str, gpus: usize) -> Result<()> {
    match list.iter().find(|&&i| i >= gpus) {
        Some(i) => Err(visibility_error(
            origin,
            &format!("gpu:{i} does not exist"),
            gpus,
        )),
        None => Ok(()),
    }
}

fn visibility_error(origin: &str, problem: &str, gpus: usize) -> Error {
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

    #[test]
    fn visibility_against_a_machine() {
        assert_eq!(parse_visible_env("1", 2).unwrap(), vec![1]);
        let e = parse_visible_env("2", 2).unwrap_err().to_string();
        assert!(
            e.contains("gpu:2 does not exist") && e.contains("valid GPU indices: 0, 1"),
            "{e}"
        );
        let e = parse_visible_env("x", 0).unwrap_err().to_string();
        assert!(
            e.contains("'x' is not a GPU index") && e.contains("no GPU adapter"),
            "{e}"
        );
        assert_eq!(best_of(&[false, false], Some(&[1])), Device::Gpu(1));
        assert_eq!(best_of(&[false, false], Some(&[])), Device::Cpu);
        assert_eq!(best_of(&[], None), Device::Cpu);
        // Software adapters are skipped: cpu:0 outruns them.
        assert_eq!(best_of(&[true, true], None), Device::Cpu);
        assert_eq!(best_of(&[false, true], None), Device::Gpu(0));
        assert_eq!(best_of(&[true, false], None), Device::Gpu(1));
        assert_eq!(best_of(&[true, false], Some(&[0])), Device::Cpu);
    }
}
