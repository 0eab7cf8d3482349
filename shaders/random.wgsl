// wgflow random kernel: out[i] from Philox4x32-10 of counter [i, 0, 0, 0], or
// [i, run_lo, run_hi, 1] for stateful ops (see src/ops/random.rs).
{{BINDINGS}}
{{PRELUDE}}
// High word of the 64-bit product a*b from 16-bit halves (WGSL has no 64-bit integers).
fn wgf_mulhi(a: u32, b: u32) -> u32 {
    let al = a & 0xffffu;
    let ah = a >> 16u;
    let bl = b & 0xffffu;
    let bh = b >> 16u;
    let hl = ah * bl;
    // Cannot overflow: at most (2^16 - 1) * 2 + (2^16 - 1)^2 = 2^32 - 1.
    let cross = ((al * bl) >> 16u) + (hl & 0xffffu) + al * bh;
    return ah * bh + (hl >> 16u) + (cross >> 16u);
}

fn wgf_philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var k = key;
    for (var round = 0u; round < 10u; round++) {
        if (round > 0u) {
            k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
        }
        let hi0 = wgf_mulhi(0xD2511F53u, c.x);
        let lo0 = 0xD2511F53u * c.x;
        let hi1 = wgf_mulhi(0xCD9E8D57u, c.z);
        let lo1 = 0xCD9E8D57u * c.z;
        c = vec4<u32>(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

// `keep` is false only in theory (a workgroup count no dispatch uses): the select stops drivers
// from contracting the multiply and add into an fma, which would change the last bit.
fn wgf_uniform(w: vec4<u32>, low: f32, high: f32, keep: bool) -> f32 {
    let u = f32(w.x >> 8u) * bitcast<f32>(0x33800000u);
    let p = select(0.0, (high - low) * u, keep);
    return low + p;
}

// cos(2π·u) for u in [0, 1): the same steps as `cos_turns` in src/ops/random.rs (exact
// quarter-turn reduction, then Taylor polynomials), so no driver cos is involved.
fn wgf_cos_turns(u: f32) -> f32 {
    let q = round(u * 4.0);
    let x = (u - q * 0.25) * bitcast<f32>(0x40c90fdbu);
    let x2 = x * x;
    let c = 1.0 + x2 * (bitcast<f32>(0xbf000000u) + x2 * (bitcast<f32>(0x3d2aaaabu)
        + x2 * (bitcast<f32>(0xbab60b61u) + x2 * (bitcast<f32>(0x37d00d01u)
        + x2 * bitcast<f32>(0xb493f27eu)))));
    let s = x * (1.0 + x2 * (bitcast<f32>(0xbe2aaaabu) + x2 * (bitcast<f32>(0x3c088889u)
        + x2 * (bitcast<f32>(0xb9500d01u) + x2 * bitcast<f32>(0x3638ef1du)))));
    let k = u32(q) & 3u;
    return select(select(select(s, -c, k == 2u), -s, k == 1u), c, k == 0u);
}

fn wgf_normal(w: vec4<u32>, mean: f32, sd: f32, keep: bool) -> f32 {
    let u1 = f32((w.x >> 8u) + 1u) * bitcast<f32>(0x33800000u);
    let u2 = f32(w.y >> 8u) * bitcast<f32>(0x33800000u);
    let z = sqrt(-2.0 * wgf_log1p(u1 - 1.0)) * wgf_cos_turns(u2);
    let p = select(0.0, sd * z, keep);
    return mean + p;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{N}}) {
        return;
    }
    let w = wgf_philox({{COUNTER}}, vec2<u32>({{KEY0}}, {{KEY1}}));
    out[i] = {{DIST}}(w, {{A}}, {{B}}, nwg.z != 0xffffffffu);
}
