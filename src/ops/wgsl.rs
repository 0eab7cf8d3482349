//! Kernel IR → WGSL text: a small line writer with indentation, plus the pieces every kernel
//! shares (bindings, broadcast index math, typed loads/stores, bit-exact literals).

use crate::DType;

/// Invocations per workgroup for the 1-D kernels. 256 is the WebGPU default limit of
/// `max_compute_invocations_per_workgroup`, so it is valid on every adapter.
pub const WORKGROUP: u32 = 256;

/// The shared helpers prepended to every kernel.
pub const PRELUDE: &str = include_str!("../../shaders/prelude.wgsl");

/// Accumulates WGSL lines at an indentation level.
#[derive(Default)]
pub struct Writer {
    out: String,
    level: usize,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn indent(&mut self, level: usize) {
        self.level = level;
    }

    pub fn line(&mut self, text: &str) {
        for _ in 0..self.level {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub fn finish(mut self) -> String {
        while self.out.ends_with('\n') {
            self.out.pop();
        }
        self.out
    }
}

/// Declare binding `index` as a storage array of `dtype` named `name`.
///
/// Every binding is `read_write`: several bindings of one kernel may be slices of the same
/// arena buffer, and wgpu forbids one buffer being read-only and writable storage in the same
/// dispatch. The planner guarantees that the slices a kernel writes never overlap its inputs.
pub fn storage_binding(w: &mut Writer, index: usize, name: &str, dtype: DType) {
    w.line(&format!(
        "@group(0) @binding({index}) var<storage, read_write> {name}: array<{}>;",
        dtype.wgsl_storage()
    ));
}

/// Like [`storage_binding`], as `array<vec4<T>>` when `vec4` is set.
pub fn storage_binding_vec(w: &mut Writer, index: usize, name: &str, dtype: DType, vec4: bool) {
    if !vec4 {
        return storage_binding(w, index, name, dtype);
    }
    w.line(&format!(
        "@group(0) @binding({index}) var<storage, read_write> {name}: array<vec4<{}>>;",
        dtype.wgsl_storage()
    ));
}

/// Emit `let name = Σ coord_k(linear) * strides[k]` where `coord_k` are the row-major
/// coordinates of `linear` in `dims`. Axes with stride 0 are skipped.
pub fn strided_index(w: &mut Writer, name: &str, linear: &str, dims: &[usize], strides: &[usize]) {
    let mut terms = Vec::new();
    let mut inner = 1usize;
    for k in (0..dims.len()).rev() {
        if strides[k] != 0 && dims[k] != 1 {
            let coord = if inner == 1 {
                format!("({linear} % {}u)", dims[k])
            } else {
                format!("(({linear} / {inner}u) % {}u)", dims[k])
            };
            terms.push(format!("{coord} * {}u", strides[k]));
        }
        inner *= dims[k];
    }
    if terms.is_empty() {
        w.line(&format!("let {name} = 0u;"));
    } else {
        terms.reverse();
        w.line(&format!("let {name} = {};", terms.join(" + ")));
    }
}

/// A typed load of `array[index]` (bools are stored as u32, f16 is computed as f32).
pub fn load(array: &str, index: &str, dtype: DType) -> String {
    widen(&format!("{array}[{index}]"), dtype)
}

/// A stored scalar `value` as the type kernels compute with.
pub fn widen(value: &str, dtype: DType) -> String {
    match dtype {
        DType::Bool => format!("({value} != 0u)"),
        DType::F16 => format!("f32({value})"),
        _ => value.to_string(),
    }
}

/// A typed load of the vec4 `array[index]` (see [`storage_binding_vec`]), as
/// `vec4<dtype.wgsl()>`.
pub fn load_vec4(array: &str, index: &str, dtype: DType) -> String {
    match dtype {
        DType::Bool => format!("({array}[{index}] != vec4<u32>(0u))"),
        DType::F16 => format!("vec4<f32>({array}[{index}])"),
        _ => format!("{array}[{index}]"),
    }
}

/// A typed store of the `vec4<dtype.wgsl()>` `value` into the vec4 `array[index]`.
pub fn store_vec4(array: &str, index: &str, value: &str, dtype: DType) -> String {
    match dtype {
        DType::Bool => {
            format!("{array}[{index}] = select(vec4<u32>(0u), vec4<u32>(1u), {value})")
        }
        DType::F16 => format!("{array}[{index}] = wgf_to_f16_v4({value})"),
        _ => format!("{array}[{index}] = {value}"),
    }
}

/// A typed store of `value` into `array[index]`.
pub fn store(array: &str, index: &str, value: &str, dtype: DType) -> String {
    match dtype {
        DType::Bool => format!("{array}[{index}] = select(0u, 1u, {value})"),
        DType::F16 => format!("{array}[{index}] = wgf_to_f16({value})"),
        _ => format!("{array}[{index}] = {value}"),
    }
}

/// A bit-exact literal: floats are written as a bitcast of their bits, so no value is lost
/// to decimal printing and inf/NaN are expressible.
pub fn literal(dtype: DType, word: u32) -> String {
    match dtype {
        // f16 values are computed as f32: the literal is the f32 of the same value.
        DType::F16 => literal(DType::F32, crate::dtype::f16_to_f32_word(word)),
        DType::F32 => {
            let v = f32::from_bits(word);
            // Negative literals are parenthesised: the writer puts `-` in front of operands,
            // and `--1.0` is WGSL's decrement token, not a double negation.
            if v.is_finite() && v == v.trunc() && v.abs() < 1e7 && v.is_sign_negative() {
                format!("({v:.1})")
            } else if v.is_finite() && v == v.trunc() && v.abs() < 1e7 {
                format!("{v:.1}")
            } else if v.is_finite() {
                format!("bitcast<f32>({word:#010x}u)")
            } else {
                // Not a constant expression: Tint (Chrome's WebGPU) rejects constant NaN and
                // infinities. `wgf_zero_bits` is the prelude's private 0.
                format!("bitcast<f32>({word:#010x}u | wgf_zero_bits)")
            }
        }
        DType::I32 => {
            let v = word as i32;
            if v == i32::MIN {
                "i32(-2147483647 - 1)".to_string()
            } else {
                format!("i32({v})")
            }
        }
        DType::U32 => format!("{word}u"),
        DType::Bool => (word != 0).to_string(),
    }
}

/// The literal one of a numeric dtype.
pub fn one(dtype: DType) -> String {
    match dtype {
        DType::F32 | DType::F16 => "1.0".into(),
        DType::I32 => "i32(1)".into(),
        DType::U32 => "1u".into(),
        DType::Bool => "true".into(),
    }
}

/// Helpers for kernels that touch f16 (see [`with_f16_support`]).
pub const F16_HELPERS: &str = include_str!("../../shaders/f16.wgsl");

/// Enable f16 and append its helpers when a generated kernel stores or rounds f16 values
/// (`uses_f16`; the `enable` directive must come first, and must be absent where f16 is not
/// used, since it needs the adapter's `shader-f16` feature).
pub fn with_f16_support(source: String, uses_f16: bool) -> String {
    if uses_f16 {
        format!("enable f16;\n{source}\n{F16_HELPERS}")
    } else {
        source
    }
}

/// Substitute `{{NAME}}` placeholders in a shader template. `PRELUDE` is always available.
pub fn fill_template(template: &str, values: &[(&str, String)]) -> String {
    let mut out = template.replace("{{PRELUDE}}", PRELUDE);
    for (name, value) in values {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    debug_assert!(!out.contains("{{"), "unfilled placeholder in:\n{out}");
    // A template without the prelude still gets the private zero its non-finite literals use.
    if out.contains("wgf_zero_bits") && !out.contains("var<private> wgf_zero_bits") {
        out.push_str("\nvar<private> wgf_zero_bits: u32 = 0u;\n");
    }
    out
}

/// Workgroup counts for `invocations` 1-D invocations in workgroups of `workgroup`, folded
/// into a 2-D grid when the count exceeds the per-dimension limit. Kernels recover the index
/// as `gid.x + gid.y * num_workgroups.x * workgroup`.
pub fn grid(invocations: u64, workgroup: u32, max_per_dim: u32) -> Option<(u32, u32)> {
    let groups = invocations.div_ceil(workgroup as u64).max(1);
    let max = max_per_dim.max(1) as u64;
    if groups <= max {
        return Some((groups as u32, 1));
    }
    let y = groups.div_ceil(max);
    if y > max {
        return None;
    }
    let x = groups.div_ceil(y);
    Some((x as u32, y as u32))
}

/// Parse and validate WGSL with naga; the error names the line and column.
pub fn validate(name: &str, source: &str) -> crate::Result<naga::Module> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| crate::Error::Shader {
        kernel: name.to_string(),
        message: e.emit_to_string_with_path(source, name),
    })?;
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    );
    validator
        .validate(&module)
        .map_err(|e| crate::Error::Shader {
            kernel: name.to_string(),
            message: e.emit_to_string_with_path(source, name),
        })?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_folds_into_two_dimensions() {
        assert_eq!(grid(10, 256, 65535), Some((1, 1)));
        assert_eq!(grid(256 * 65535, 256, 65535), Some((65535, 1)));
        let (x, y) = grid(256 * 65536, 256, 65535).unwrap();
        assert!(x as u64 * y as u64 * 256 >= 256 * 65536 && y == 2);
    }

    #[test]
    fn literals_are_bit_exact() {
        assert_eq!(
            literal(DType::F32, f32::INFINITY.to_bits()),
            "bitcast<f32>(0x7f800000u | wgf_zero_bits)"
        );
        assert_eq!(literal(DType::F32, 2.0f32.to_bits()), "2.0");
        assert_eq!(
            literal(DType::F32, 0.1f32.to_bits()),
            "bitcast<f32>(0x3dcccccdu)"
        );
    }
}
