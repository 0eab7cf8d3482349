//! Matmul, convolution, pooling, and the fused row ops (layer normalisation, softmax
//! cross-entropy).

use super::{attr_f, attr_i, attr_ints, attr_s, i64s, unsupported, Cx, Ex};
use crate::ops::rows::{RowPass, Rows};
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
        Op::Rows(Rows {
            pass: RowPass::LayerNorm,
            eps_bits,
        }) => Ok(ex.op(
            "LayerNormalization",
            vec![cx.x(0), cx.x(1), cx.x(2)],
            vec![
                attr_i("axis", -1),
                attr_f("epsilon", f32::from_bits(*eps_bits)),
            ],
        )),
        // ONNX's class axis is 1: the rows are flattened to [N, C], and the losses reshaped
        // back to the labels' shape.
        Op::Rows(Rows {
            pass: RowPass::SoftmaxXent,
            ..
        }) => {
            let c = cx.input(0).shape.dims().last().copied().unwrap_or(1) as i64;
            let rows = ex.i64_vec("shape", &[-1, c]);
            let logits = ex.op("Reshape", vec![cx.x(0), rows], vec![]);
            let flat = ex.i64_vec("shape", &[-1]);
            let labels = ex.op("Reshape", vec![cx.x(1), flat], vec![]);
            let loss = ex.op(
                "SoftmaxCrossEntropyLoss",
                vec![logits, labels],
                vec![attr_s("reduction", "none")],
            );
            let shape = ex.i64_vec("shape", &i64s(cx.node.shape.dims()));
            Ok(ex.op("Reshape", vec![loss, shape], vec![]))
        }
        Op::Nn(
            Nn::Conv2dBackpropInput { .. } | Nn::Conv2dBackpropFilter { .. } | Nn::PoolGrad { .. },
        )
        | Op::Rows(Rows {
            pass: RowPass::LayerNormXhat | RowPass::LayerNormGrad | RowPass::SoftmaxXentGrad,
            ..
        }) => Err(unsupported(
            cx.node.op.name(),
            "a gradient pass; export the forward graph (ONNX has no backward ops in ai.onnx)",
        )),
        op => Err(unsupported(op.name(), "not a matmul, nn or rows op")),
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
