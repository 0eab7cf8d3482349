// wgflow prelude: helpers shared by every generated kernel.

// NaN test on the bits: drivers may fold `x != x` to false under fast-math (lavapipe does).
fn wgf_isnan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// max/min that propagate NaN like NumPy (WGSL leaves max(NaN, x) to the driver).
fn wgf_max(a: f32, b: f32) -> f32 {
    return select(max(a, b), a + b, wgf_isnan(a) || wgf_isnan(b));
}

fn wgf_min(a: f32, b: f32) -> f32 {
    return select(min(a, b), a + b, wgf_isnan(a) || wgf_isnan(b));
}

// relu that keeps NaN (max(NaN, 0) is 0 on some drivers).
fn wgf_relu(x: f32) -> f32 {
    return select(max(x, 0.0), x, wgf_isnan(x));
}

// Integer division with WGSL's defined results on every backend (naga's GLSL output does
// not guard them): x / 0 == x and i32::MIN / -1 == i32::MIN.
fn wgf_div_i32(a: i32, b: i32) -> i32 {
    return a / select(b, 1, b == 0 || (a == (-2147483647 - 1) && b == -1));
}

fn wgf_div_u32(a: u32, b: u32) -> u32 {
    return a / select(b, 1u, b == 0u);
}

// float -> int truncates toward zero and saturates; NaN -> 0 (Rust's `as`, defined on every driver).
fn wgf_f32_to_i32(x: f32) -> i32 {
    return select(i32(clamp(x, -2147483648.0, 2147483520.0)), 0, wgf_isnan(x));
}

fn wgf_f32_to_u32(x: f32) -> u32 {
    return select(u32(clamp(x, 0.0, 4294967040.0)), 0u, wgf_isnan(x));
}
