// wgflow argmax/argmin: one invocation per output element; the first extreme wins, and a NaN
// counts as the extreme (NumPy's rule), so the first NaN's index is returned.
{{BINDINGS}}
{{PRELUDE}}
{{FUNC}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = gid.x + gid.y * nwg.x * {{WG}}u;
    if (o >= {{N}}) {
        return;
    }
{{BASE}}
    var best = {{INIT}};
    var at = 0u;
    for (var r = 1u; r < {{R}}; r = r + 1u) {
{{OFFSET}}
        let v = {{LOAD}};
        if ({{BETTER}}) {
            best = v;
            at = r;
        }
    }
    out[o] = i32(at);
}
