// wgflow segment sum passes (sort keys, a bitonic stage, sums over sorted positions, or
// cpu:0's direct walk): one invocation per output element or per sort key.
{{BINDINGS}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{N}}) {
        return;
    }
{{BODY}}
}
