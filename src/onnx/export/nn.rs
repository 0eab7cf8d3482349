//! Matmul, convolution and pooling.

use super::{attr_i, attr_ints, i64s, unsupported, Cx, Ex};
use crate::ops::{Nn, Op, PoolKind, Window};
use crate::Result;

pub(super) fn export(ex: &mut Ex, cx: &Cx) -> Result<String> {
    match &cx.node.op {
        // NumPy's matmul is ONNX's: batched, broadcast, 1-D operands as vectors.
        Op::MatMul(_) => Ok(ex.op("MatMul", vec![cx.x(0), cx.x(1)], vec![])),
        Op::Nn(Nn::Conv2d { window, groups }) => {
            let mut attrs = geometry(window);
            attrs.push(attr_ints("dilations", &i64s(&window.dilation)));
            attrs.push(attr_i("group", *groups as i64));
            Ok(ex.op("Conv", vec![cx.x(0), cx.x(1)], attrs))
        }
        Op::Nn(Nn::Pool { kind, window }) => {
            let mut attrs = geometry(window);
            let op = match kind {
                PoolKind::Max => "MaxPool",
                PoolKind::Avg => {
                    // wgflow's average excludes the padding from the count.
                    attrs.push(attr_i("count_include_pad", 0));
                    "AveragePool"
                }
            };
            Ok(ex.op(op, vec![cx.x(0)], attrs))
        }
        op => Err(unsupported(op.name())),
    }
}

/// Kernel shape, strides and symmetric pads (the output size rounds down, ONNX's default).
fn geometry(w: &Window) -> Vec<crate::onnx::proto::AttributeProto> {
    let [ph, pw] = w.padding;
    vec![
        attr_ints("kernel_shape", &i64s(&w.kernel)),
        attr_ints("strides", &i64s(&w.stride)),
        attr_ints("pads", &i64s(&[ph, pw, ph, pw])),
    ]
}
