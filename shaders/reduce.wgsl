// wgflow reduction kernel: one invocation per output element (per chunk of the reduced
// elements, in a partial pass), looping over the reduced axes in row-major order.
{{BINDINGS}}
{{PRELUDE}}
{{FUNC}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let oc = gid.x + gid.y * nwg.x * {{WG}}u;
    if (oc >= {{N}}) {
        return;
    }
    // Kept position `o`, chunk `c` of {{CHUNKS}}; the last chunk takes the remainder.
    let o = oc / {{CHUNKS}}u;
    let c = oc % {{CHUNKS}}u;
    let lo = c * {{CHUNK}}u;
    let hi = select(lo + {{CHUNK}}u, {{R}}u, c + 1u == {{CHUNKS}}u);
{{BASE}}
{{FOLD}}
    {{STORE}};
}
