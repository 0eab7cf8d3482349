// wgflow conv2d gradients over NCHW/OIHW, gathered (one invocation per result element, no
// atomics, so every run gives the same bits). MODE_INPUT: dx[n, c, iy, ix] sums
// dy[n, o, oy, ox] * w[o, c % CG, ki, kj] over the outputs whose window reads (iy, ix).
// MODE_FILTER: dw[o, c, ki, kj] sums dy[n, o, oy, ox] * x[n, c, oy*s - p + ki*d, ..] over
// (n, oy, ox). Either sums one chunk of its loop when split; a reduction adds the chunks.
{{BINDINGS}}
{{PRELUDE}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let gi = gid.x + gid.y * nwg.x * {{WG}}u;
    if (gi >= {{TOTAL}}) {
        return;
    }
    let i = gi % {{OUTPUTS}};
    let lo = (gi / {{OUTPUTS}}) * {{CHUNK}};
    let hi = min(lo + {{CHUNK}}, {{LOOP}});
    var acc = 0.0;
{{BODY}}
    out[gi] = acc;
}
