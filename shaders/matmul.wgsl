// wgflow batched matmul: one invocation per output element; batch dims broadcast like NumPy.
{{BINDINGS}}
{{PRELUDE}}
{{FUNC}}
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = gid.x + gid.y * nwg.x * {{WG}}u;
    if (o >= {{TOTAL}}) {
        return;
    }
    let n = o % {{N}}u;
    let m = (o / {{N}}u) % {{M}}u;
    let batch = o / ({{M}}u * {{N}}u);
{{BATCH}}
    var acc = {{ZERO}};
    for (var k = 0u; k < k_len; k = k + 1u) {
        acc = acc + {{A}} * {{B}};
    }
{{STORE}}
}
