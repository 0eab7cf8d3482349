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
