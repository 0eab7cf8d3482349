// wgflow elementwise kernel: out[i] = f(inputs broadcast to the output shape), one element per
// invocation, or four (vec4 loads and stores) when every input is full-size or a scalar.
{{BINDINGS}}
{{PRELUDE}}
{{FUNC}}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{N}}) {
        return;
    }
{{BODY}}
}
