// wgflow fused row kernel: one workgroup per row of {{D}} values, its invocations striding
// over the row; partial sums and maxima meet in workgroup memory.
{{BINDINGS}}
var<workgroup> part: array<f32, {{WG}}>;

// The workgroup's sum of `v` (every invocation gets it). The first barrier lets every
// invocation read the previous result before `part` is overwritten.
fn tree_sum(t: u32, v: f32) -> f32 {
    workgroupBarrier();
    part[t] = v;
    workgroupBarrier();
    for (var s = {{WG}}u / 2u; s > 0u; s = s / 2u) {
        if (t < s) {
            part[t] = part[t] + part[t + s];
        }
        workgroupBarrier();
    }
    return part[0];
}

fn tree_max(t: u32, v: f32) -> f32 {
    workgroupBarrier();
    part[t] = v;
    workgroupBarrier();
    for (var s = {{WG}}u / 2u; s > 0u; s = s / 2u) {
        if (t < s) {
            part[t] = max(part[t], part[t + s]);
        }
        workgroupBarrier();
    }
    return part[0];
}

@compute @workgroup_size({{WG}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // No early return: every invocation must reach the barriers.
    let row_id = wid.x + wid.y * nwg.x;
    let row = min(row_id, {{ROWS}}u - 1u);
    let valid = row_id < {{ROWS}}u;
    let t = lid.x;
    let base = row * {{D}}u;
{{BODY}}
}
