//! Helpers for the naga validation tests (`tests/shaders/*.rs`).

use wgflow::ops::wgsl::validate;
use wgflow::ops::{ElementwiseKernel, Expr, Kernel};
use wgflow::{DType, Shape};

/// naga parses and validates the kernel's WGSL; the panic shows the source.
pub fn check(kernel: &Kernel) {
    let src = kernel.wgsl();
    // The typed f16 decision agrees with what the generated text uses.
    let generated = kernel.as_dyn().wgsl();
    if !matches!(kernel, Kernel::RawWgsl(_)) {
        assert_eq!(
            kernel.as_dyn().uses_f16(),
            generated.contains("f16"),
            "uses_f16 of {}",
            kernel.describe()
        );
    }
    if let Err(e) = validate(&kernel.describe(), &src) {
        panic!("{e}\n--- source ---\n{src}");
    }
    if let Some(c) = constant_non_finite(&src) {
        panic!(
            "{}: `{c}` is a constant NaN or infinity, which Tint (Chrome's WebGPU) rejects\n--- source ---\n{src}",
            kernel.describe()
        );
    }
}

/// A `bitcast<f32>(0x…u)` whose value is NaN or infinite: naga accepts it, Tint does not
/// (the prelude's `wgf_inf_bits`, `wgf_nan_bits` and `wgf_zero_bits` make them run-time).
pub fn constant_non_finite(src: &str) -> Option<String> {
    let pat = "bitcast<f32>(0x";
    let mut rest = src;
    while let Some(i) = rest.find(pat) {
        let hex: String = rest[i + pat.len()..]
            .chars()
            .take_while(|c| c.is_ascii_hexdigit())
            .collect();
        let after = &rest[i + pat.len() + hex.len()..];
        if let Ok(bits) = u32::from_str_radix(&hex, 16) {
            if !f32::from_bits(bits).is_finite() && after.starts_with("u)") {
                return Some(format!("{pat}{hex}u)"));
            }
        }
        rest = &rest[i + pat.len()..];
    }
    None
}

#[test]
fn constant_non_finite_values_are_found() {
    assert!(constant_non_finite("let x = bitcast<f32>(0xff800000u);").is_some());
    assert!(constant_non_finite("let x = bitcast<f32>(0x7fc00000u);").is_some());
    assert!(constant_non_finite("let x = bitcast<f32>(0x7f800000u | wgf_zero_bits);").is_none());
    assert!(constant_non_finite("let x = bitcast<f32>(0x3dcccccdu);").is_none());
}

/// An elementwise kernel of `expr` over plain (contiguous, broadcast) inputs.
pub fn ew(expr: Expr, inputs: Vec<(Shape, DType)>, out: Shape, out_dtype: DType) -> Kernel {
    Kernel::Elementwise(ElementwiseKernel {
        expr,
        inputs,
        out_shape: out,
        out_dtype,
        views: Vec::new(),
    })
}
