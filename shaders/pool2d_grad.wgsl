// wgflow 2-D pooling gradients over NCHW, gathered: one invocation per input element sums
// what each window covering it sends back (no atomics: the same bits on every run).
// max: a window's whole dy goes to its first maximum (row-major window order, the order
// the forward folds in; the first NaN when the maximum is NaN), recomputed from x.
// avg: each window sends dy / (its count of in-bounds cells).
{{BINDINGS}}
{{PRELUDE}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{TOTAL}}) {
        return;
    }
    let ix = i32(i % {{WU}});
    let iy = i32((i / {{WU}}) % {{HU}});
    let nc = i / ({{WU}} * {{HU}});
    // Windows whose span [o*s - p, o*s - p + k - 1] holds the element.
    let ty = iy + {{PH}};
    let tx = ix + {{PW}};
    let oy_lo = select(0, (ty - {{KH}} + {{SH}}) / {{SH}}, ty >= {{KH}});
    let ox_lo = select(0, (tx - {{KW}} + {{SW}}) / {{SW}}, tx >= {{KW}});
    let oy_hi = min({{OH}} - 1, ty / {{SH}});
    let ox_hi = min({{OW}} - 1, tx / {{SW}});
    var acc = 0.0;
    for (var oy = oy_lo; oy <= oy_hi; oy = oy + 1) {
        for (var ox = ox_lo; ox <= ox_hi; ox = ox + 1) {
            let g = dy[(nc * {{OHU}} + u32(oy)) * {{OWU}} + u32(ox)];
            let y0 = oy * {{SH}} - {{PH}};
            let x0 = ox * {{SW}} - {{PW}};
{{BODY}}
        }
    }
    out[i] = acc;
}
