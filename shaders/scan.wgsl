// wgflow scan (cumulative sum/product) along one axis of a tensor viewed as
// [OUTER, N, INNER]: one invocation per (outer, chunk, inner) position walks its chunk of the
// axis in order ({{ORDER}}), starting from {{START}}.
{{BINDINGS}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= {{INVOCATIONS}}u) {
        return;
    }
    let o = t / ({{CHUNKS}}u * {{INNER}}u);
    let c = (t / {{INNER}}u) % {{CHUNKS}}u;
    let i = t % {{INNER}}u;
    let lo = c * {{CHUNK}}u;
    let len = min({{CHUNK}}u, {{N}}u - lo);
    let base = o * {{N}}u * {{INNER}}u + i;
    var acc = {{INIT}};
    for (var s = 0u; s < len; s = s + 1u) {
        let k = {{K}};
        let at = base + k * {{INNER}}u;
        let v = {{LOAD}};
{{STEP}}
    }
{{FINISH}}
}
