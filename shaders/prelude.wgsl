// wgflow prelude: helpers shared by every generated kernel.

// max/min that propagate NaN like NumPy (WGSL leaves max(NaN, x) to the driver).
fn wgf_max(a: f32, b: f32) -> f32 {
    return select(max(a, b), a + b, a != a || b != b);
}

fn wgf_min(a: f32, b: f32) -> f32 {
    return select(min(a, b), a + b, a != a || b != b);
}

// float -> int truncates toward zero and saturates; NaN -> 0 (Rust's `as`, defined on every driver).
fn wgf_f32_to_i32(x: f32) -> i32 {
    return select(i32(clamp(x, -2147483648.0, 2147483520.0)), 0, x != x);
}

fn wgf_f32_to_u32(x: f32) -> u32 {
    return select(u32(clamp(x, 0.0, 4294967040.0)), 0u, x != x);
}
