// wgflow 2-D pooling over NCHW: one invocation per output element; out-of-bounds (padding)
// positions are skipped, so they neither win a max nor count toward an average.
{{BINDINGS}}
{{PRELUDE}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{TOTAL}}) {
        return;
    }
    let ox = i % {{OW}};
    let oy = (i / {{OW}}) % {{OH}};
    let nc = i / ({{OW}} * {{OH}});
    var acc = {{INIT}};
    var count = 0u;
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
            let v = in0[(nc * {{HU}} + u32(iy)) * {{WU}} + u32(ix)];
            acc = {{COMBINE}};
            count = count + 1u;
        }
    }
    out[i] = {{FINISH}};
}
