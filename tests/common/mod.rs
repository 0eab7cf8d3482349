//! Shared test helpers: the devices to test on, sessions pinned to one device, comparisons.
#![allow(dead_code)]

pub mod golden;
pub mod wgsl;

use wgflow::{Device, Graph, HostTensor, Session, SessionOptions};

/// Every GPU adapter present. Under `WGFLOW_REQUIRE_GPU=1` an empty list is a failure.
pub fn gpus() -> Vec<Device> {
    let list: Vec<Device> = wgflow::devices()
        .into_iter()
        .map(|d| d.device)
        .filter(|d| d.is_gpu())
        .collect();
    if list.is_empty() {
        if std::env::var("WGFLOW_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!("WGFLOW_REQUIRE_GPU=1 but no GPU adapter was found (install mesa-vulkan-drivers for lavapipe)");
        }
        eprintln!("note: no GPU adapter; GPU checks are skipped");
    }
    list
}

/// A session whose unscoped nodes all run on `device`. Constant folding is off: tests build
/// graphs from constants to check each device's kernels, which folding would replace with
/// the host's results.
pub fn session_on(g: &Graph, device: Device) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(device),
            visible_devices: Some(gpu_indices()),
            fold_constants: false,
            ..Default::default()
        },
    )
    .expect("session")
}

/// Like [`session_on`], with constant folding on (the default for users).
pub fn folding_session_on(g: &Graph, device: Device) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(device),
            visible_devices: Some(gpu_indices()),
            ..Default::default()
        },
    )
    .expect("session")
}

pub fn gpu_indices() -> Vec<usize> {
    wgflow::devices()
        .into_iter()
        .filter_map(|d| match d.device {
            Device::Gpu(i) => Some(i),
            Device::Cpu => None,
        })
        .collect()
}

/// Compare two tensors: same shape and dtype; floats within `atol + rtol * |expected|`,
/// NaN matching NaN and infinities matching exactly; other dtypes exactly.
pub fn assert_close(what: &str, got: &HostTensor, want: &HostTensor, rtol: f32, atol: f32) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    if !got.dtype().is_float() {
        assert_eq!(got.words(), want.words(), "{what}: values {got} vs {want}");
        return;
    }
    let (g, w) = (got.to_f32().unwrap(), want.to_f32().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= atol + rtol * b.abs()
        };
        assert!(ok, "{what}: element {i}: got {a}, want {b} (rtol {rtol}, atol {atol})\n got {got}\nwant {want}");
    }
}
pub mod grad;

/// A small deterministic generator (xorshift64*), so fuzz failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
