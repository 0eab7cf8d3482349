// wgflow elementwise kernel: out[i] = f(inputs broadcast to the output shape).
{{BINDINGS}}
{{PRELUDE}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{N}}) {
        return;
    }
{{BODY}}
}
