// wgflow index-math copy (slice/flip/broadcast_to, concat, pad, gather): each invocation
// computes which input word lands in out[i]. Words are copied untyped.
{{BINDINGS}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= {{N}}) {
        return;
    }
{{BODY}}
}
