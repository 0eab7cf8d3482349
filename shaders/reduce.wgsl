// wgflow reduction kernel: one invocation per output element, looping over the reduced axes.
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
    var acc = {{INIT}};
    for (var r = {{START}}; r < {{R}}; r = r + 1u) {
{{OFFSET}}
        let v = {{LOAD}};
        acc = {{COMBINE}};
    }
    {{STORE}};
}
