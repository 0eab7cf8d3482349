// wgflow direct 2-D convolution (NCHW input, OIHW weight, zero padding, dilation, groups):
// one invocation per output element (per channel chunk when split).
{{BINDINGS}}
{{PRELUDE}}
{{FUNC}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let gi = gid.x + gid.y * nwg.x * {{WG}}u;
    if (gi >= {{TOTAL}}) {
        return;
    }
    {{SPLIT}}
    let ox = i % {{OW}};
    let oy = (i / {{OW}}) % {{OH}};
    let o = (i / ({{OW}} * {{OH}})) % {{O}};
    let n = i / ({{OW}} * {{OH}} * {{O}});
    let c0 = (o / {{OG}}) * {{CG}};
    var acc = 0.0;
    for (var c = c_lo; c < c_hi; c = c + 1u) {
        for (var ki = 0u; ki < {{KH}}; ki = ki + 1u) {
            let iy = {{IY}};
            if (iy < 0 || iy >= {{H}}) {
                continue;
            }
            for (var kj = 0u; kj < {{KW}}; kj = kj + 1u) {
                let ix = {{IX}};
                if (ix < 0 || ix >= {{W}}) {
                    continue;
                }
                let xv = in0[((n * {{C}} + c0 + c) * u32({{H}}) + u32(iy)) * u32({{W}}) + u32(ix)];
                let wv = in1[((o * {{CG}} + c) * {{KH}} + ki) * {{KW}} + kj];
                acc = acc + xv * wv;
            }
        }
    }
{{STORE}}
}
