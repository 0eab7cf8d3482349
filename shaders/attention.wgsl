// wgflow fused attention pass: one invocation per output row (a query's or a key's); scores
// are recomputed from q and k where they are needed, never stored.
{{BINDINGS}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * {{WG}}u;
    if (r >= {{N}}) {
        return;
    }
{{BODY}}
}
