// f16 support, appended (after an `enable f16;` line) to kernels that store or round f16.
// f16 values are computed as f32: loads widen, every f16 result is rounded with
// wgf_round_f16, and stores narrow with wgf_to_f16. The CPU does the same (dtype.rs).

// f32 -> f16, round to nearest even, with NumPy's results for overflow (±inf): WGSL leaves
// the conversion of an out-of-range finite value indeterminate. The NaN test uses the bits
// (not x != x, which fast-math drivers fold) and needs nothing from the prelude.
fn wgf_to_f16(x: f32) -> f16 {
    var y = x;
    let bits = bitcast<u32>(x) & 0x7fffffffu;
    if bits <= 0x7f800000u && abs(x) >= 65520.0 {
        // ±inf with x's sign, computed from x: Tint rejects constant infinities.
        y = bitcast<f32>((bitcast<u32>(x) & 0x80000000u) | 0x7f800000u);
    }
    return f16(y);
}

fn wgf_to_f16_v4(v: vec4<f32>) -> vec4<f16> {
    return vec4<f16>(wgf_to_f16(v.x), wgf_to_f16(v.y), wgf_to_f16(v.z), wgf_to_f16(v.w));
}

// x rounded to the nearest f16 value, kept in f32.
fn wgf_round_f16(x: f32) -> f32 {
    return f32(wgf_to_f16(x));
}
