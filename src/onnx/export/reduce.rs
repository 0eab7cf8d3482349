//! Reductions, scans (cumsum) and the indexing family (gather_elements).

use super::{attr_i, attr_ints, attr_s, i64s, onnx_dtype, unsupported, Cx, Ex};
use crate::ops::index::{Index, ScatterReduce};
use crate::ops::{Op, Reduce, ReduceOp, Scan, ScanOp};
use crate::{DType, Result};

pub(super) fn export(ex: &mut Ex, cx: &Cx) -> Result<String> {
    match &cx.node.op {
        Op::Reduce(r) => reduce(ex, cx, r),
        Op::Scan(Scan {
            op: ScanOp::Sum,
            axis,
            exclusive,
            reverse,
        }) => {
            let a = ex.i64s("axis", &[*axis as i64], &[]);
            Ok(ex.op(
                "CumSum",
                vec![cx.x(0), a],
                vec![
                    attr_i("exclusive", *exclusive as i64),
                    attr_i("reverse", *reverse as i64),
                ],
            ))
        }
        Op::Index(Index::GatherElements { axis }) => Ok(ex.op(
            "GatherElements",
            vec![cx.x(0), cx.x(1)],
            vec![attr_i("axis", *axis as i64)],
        )),
        Op::Index(Index::ScatterElements { axis, reduce }) => {
            let reduction = match reduce {
                ScatterReduce::None => "none",
                ScatterReduce::Add => "add",
                ScatterReduce::Mul => "mul",
                ScatterReduce::Max | ScatterReduce::Min => {
                    return Err(unsupported(
                        cx.node.op.name(),
                        "reduction max/min needs opset 18; the exporter writes 17",
                    ))
                }
            };
            Ok(ex.op(
                "ScatterElements",
                vec![cx.x(0), cx.x(1), cx.x(2)],
                vec![attr_i("axis", *axis as i64), attr_s("reduction", reduction)],
            ))
        }
        Op::Index(Index::TopKIndices { .. }) => Err(unsupported(
            cx.node.op.name(),
            "not exported yet (ONNX TopK's indices output, cast to int32, would express it)",
        )),
        Op::Scan(Scan {
            op: ScanOp::Prod, ..
        }) => Err(unsupported(
            cx.node.op.name(),
            "CumProd needs opset 26; the exporter writes 17",
        )),
        op => Err(unsupported(op.name(), "not a reduction, scan or index op")),
    }
}

fn reduce(ex: &mut Ex, cx: &Cx, r: &Reduce) -> Result<String> {
    let x = cx.x(0);
    let keep = (cx.node.shape.rank() == cx.input(0).shape.rank()) as i64;
    if r.axes.is_empty() {
        // Nothing reduced: the value itself (all/any still give bool).
        return Ok(match r.op {
            ReduceOp::All | ReduceOp::Any => cast(ex, x, DType::Bool),
            _ => ex.op("Identity", vec![x], vec![]),
        });
    }
    let axes = i64s(&r.axes);
    // Opset 17: ReduceSum takes its axes as an input, the others as an attribute.
    let attr_form = |ex: &mut Ex, op: &str, x: String| {
        ex.op(
            op,
            vec![x],
            vec![attr_ints("axes", &axes), attr_i("keepdims", keep)],
        )
    };
    Ok(match r.op {
        ReduceOp::Sum => {
            let a = ex.i64_vec("axes", &axes);
            ex.op("ReduceSum", vec![x, a], vec![attr_i("keepdims", keep)])
        }
        ReduceOp::Mean => attr_form(ex, "ReduceMean", x),
        ReduceOp::Max => attr_form(ex, "ReduceMax", x),
        ReduceOp::Min => attr_form(ex, "ReduceMin", x),
        ReduceOp::Prod => attr_form(ex, "ReduceProd", x),
        ReduceOp::All | ReduceOp::Any => {
            // Over 0/1 as int32: all is the minimum, any the maximum.
            let i = cast(ex, x, DType::I32);
            let op = if r.op == ReduceOp::All {
                "ReduceMin"
            } else {
                "ReduceMax"
            };
            let m = attr_form(ex, op, i);
            cast(ex, m, DType::Bool)
        }
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            // One axis (a flattened multi-axis arg reduction has no ONNX op).
            let [axis] = axes[..] else {
                return Err(unsupported(
                    cx.node.op.name(),
                    "ONNX ArgMax/ArgMin take one axis",
                ));
            };
            let op = if r.op == ReduceOp::ArgMax {
                "ArgMax"
            } else {
                "ArgMin"
            };
            let a = ex.op(
                op,
                vec![x],
                vec![
                    attr_i("axis", axis),
                    attr_i("keepdims", keep),
                    attr_i("select_last_index", 0),
                ],
            );
            cast(ex, a, DType::I32)
        }
    })
}

fn cast(ex: &mut Ex, x: String, to: DType) -> String {
    ex.op("Cast", vec![x], vec![attr_i("to", onnx_dtype(to) as i64)])
}
