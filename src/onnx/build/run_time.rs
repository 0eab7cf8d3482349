//! Run-time dimensions during import: host values computed from the graph's probe sizes,
//! and ops whose translation would be unrolled over a run-time size.

use super::{Cx, Node, Val};
use crate::onnx::tensor::HostValue;
use crate::Result;

/// A value this large in a host value computed from run-time dimensions holds a probe size
/// (the smallest is 131071): it stands for a run-time size.
pub(super) const PROBE_LIKE: f64 = 65536.0;

pub(super) fn probe_like(h: &HostValue) -> bool {
    match h {
        HostValue::Ints { v, .. } => v.iter().any(|&x| x.unsigned_abs() >= PROBE_LIKE as u64),
        HostValue::Floats(t) => t
            .to_f32()
            .is_ok_and(|v| v.iter().any(|x| x.abs() as f64 >= PROBE_LIKE)),
    }
}

/// Ops whose translation walks spatial positions one by one (windows, taps, scales).
const SPATIAL: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "LpPool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "GlobalLpPool",
    "MaxUnpool",
    "Resize",
    "Upsample",
    "RoiAlign",
    "MaxRoiPool",
    "DepthToSpace",
    "SpaceToDepth",
    "Col2Im",
    "GridSample",
    "DeformConv",
];

/// Why `node` cannot take its input's run-time dimensions: its translation is unrolled
/// over them (a recurrence over a run-time sequence, a convolution over a run-time height).
pub(super) fn unrolled_over_run_time(cx: &Cx, node: &Node) -> Result<Option<String>> {
    let Some(Val::T(x)) = node.input(0).and_then(|i| cx.vals.get(i)) else {
        return Ok(None);
    };
    let dims = cx.g.dims(*x)?;
    let run_time = |axes: &mut dyn Iterator<Item = usize>| {
        axes.filter_map(|a| dims.get(a))
            .find(|d| d.known().is_none())
            .map(ToString::to_string)
    };
    let found = if SPATIAL.contains(&node.op) {
        run_time(&mut (2..dims.len())).map(|d| {
            format!(
                "({d}) are spatial sizes, which {} is unrolled over",
                node.op
            )
        })
    } else if matches!(node.op, "RNN" | "GRU" | "LSTM") {
        let axis = if node.int("layout", 0) == 1 { 1 } else { 0 };
        run_time(&mut std::iter::once(axis)).map(|d| {
            format!(
                "({d}) are the sequence length, which {} is unrolled over",
                node.op
            )
        })
    } else if matches!(
        node.op,
        "EyeLike" | "CenterCropPad" | "ReverseSequence" | "Col2Im"
    ) {
        run_time(&mut (0..dims.len())).map(|d| format!("({d}) are sizes {} is built for", node.op))
    } else {
        None
    };
    Ok(found)
}
