//! Elementwise primitives, `where` and casts.

use super::{attr_i, onnx_dtype, unsupported, Cx, Ex, OPSET};
use crate::ops::{BinaryOp, Elementwise, UnaryOp};
use crate::{DType, Result};

pub(super) fn export(ex: &mut Ex, cx: &Cx, e: Elementwise) -> Result<String> {
    match e {
        Elementwise::Unary(u) => unary(ex, cx, u),
        Elementwise::Binary(b) => binary(ex, cx, b),
        Elementwise::Select => Ok(ex.op("Where", vec![cx.x(0), cx.x(1), cx.x(2)], vec![])),
        Elementwise::Cast(d) => Ok(ex.op(
            "Cast",
            vec![cx.x(0)],
            vec![attr_i("to", onnx_dtype(d) as i64)],
        )),
    }
}

/// A primitive with an ONNX op (its row of the elementwise table) is that op, where opset
/// [`OPSET`] has it; the others are composites of ONNX ops, or refused with the reason.
fn unary(ex: &mut Ex, cx: &Cx, u: UnaryOp) -> Result<String> {
    let x = cx.x(0);
    let dtype = cx.input(0).dtype;
    if let Some((op, since)) = u.def().onnx {
        if since > OPSET {
            return Err(unsupported(
                u.name(),
                &format!("{op} needs opset {since}; the exporter writes {OPSET}"),
            ));
        }
        return Ok(ex.op(op, vec![x], vec![]));
    }
    match u {
        // Float8 and float4 types arrive at opsets 19 and 23.
        UnaryOp::RoundTo(_) => Err(unsupported(
            u.name(),
            &format!("rounding to a precision needs opset 19; the exporter writes {OPSET}"),
        )),
        UnaryOp::RoundBf16 => {
            let bf16 = super::super::proto::tensor_proto::DataType::Bfloat16 as i64;
            let h = ex.op("Cast", vec![x], vec![attr_i("to", bf16)]);
            let back = onnx_dtype(dtype) as i64;
            Ok(ex.op("Cast", vec![h], vec![attr_i("to", back)]))
        }
        UnaryOp::Rsqrt => {
            let s = ex.op("Sqrt", vec![x], vec![]);
            Ok(ex.op("Reciprocal", vec![s], vec![]))
        }
        UnaryOp::Log1p => {
            let one = ex.scalar(1.0, dtype)?;
            let s = ex.op("Add", vec![x, one], vec![]);
            Ok(ex.op("Log", vec![s], vec![]))
        }
        UnaryOp::Expm1 => {
            let one = ex.scalar(1.0, dtype)?;
            let e = ex.op("Exp", vec![x], vec![]);
            Ok(ex.op("Sub", vec![e, one], vec![]))
        }
        UnaryOp::IsFinite => {
            let n = ex.op("IsNaN", vec![x.clone()], vec![]);
            let i = ex.op("IsInf", vec![x], vec![]);
            let o = ex.op("Or", vec![n, i], vec![]);
            Ok(ex.op("Not", vec![o], vec![]))
        }
        // A primitive whose row names no ONNX op and that has no composite above.
        _ => Err(unsupported(
            u.name(),
            "it has no ONNX op in the elementwise table and no composite in the exporter",
        )),
    }
}

fn binary(ex: &mut Ex, cx: &Cx, b: BinaryOp) -> Result<String> {
    let (a, c) = (cx.x(0), cx.x(1));
    let dtype = cx.input(0).dtype;
    let float = matches!(dtype, DType::F32 | DType::F16);
    if let Some((op, since)) = b.def().onnx {
        if since > OPSET {
            return Err(unsupported(
                b.name(),
                &format!("{op} needs opset {since}; the exporter writes {OPSET}"),
            ));
        }
        return Ok(ex.op(op, vec![a, c], vec![]));
    }
    match b {
        BinaryOp::NotEqual => {
            let e = ex.op("Equal", vec![a, c], vec![]);
            Ok(ex.op("Not", vec![e], vec![]))
        }
        BinaryOp::FloorDiv if float => {
            let d = ex.op("Div", vec![a, c], vec![]);
            Ok(ex.op("Floor", vec![d], vec![]))
        }
        BinaryOp::Remainder if float => {
            // a - floor(a / b) * b: the sign of the divisor, like NumPy's `%`.
            let d = ex.op("Div", vec![a.clone(), c.clone()], vec![]);
            let f = ex.op("Floor", vec![d], vec![]);
            let m = ex.op("Mul", vec![f, c], vec![]);
            Ok(ex.op("Sub", vec![a, m], vec![]))
        }
        BinaryOp::Remainder => Ok(ex.op("Mod", vec![a, c], vec![attr_i("fmod", 0)])),
        BinaryOp::FloorDiv => {
            // Integer floor division: a / b truncates; subtract one where the remainder
            // (ONNX `Mod` with the divisor's sign) is non-zero and the signs differ.
            if dtype == DType::U32 {
                return Ok(ex.op("Div", vec![a, c], vec![]));
            }
            let q = ex.op("Div", vec![a.clone(), c.clone()], vec![]);
            let r = ex.op("Mod", vec![a.clone(), c.clone()], vec![attr_i("fmod", 1)]);
            let zero = ex.scalar(0.0, dtype)?;
            let rz = ex.op("Equal", vec![r.clone(), zero.clone()], vec![]);
            let rnz = ex.op("Not", vec![rz], vec![]);
            let rneg = ex.op("Less", vec![r, zero.clone()], vec![]);
            let cneg = ex.op("Less", vec![c, zero], vec![]);
            let differ = ex.op("Xor", vec![rneg, cneg], vec![]);
            let fix = ex.op("And", vec![rnz, differ], vec![]);
            let one = ex.scalar(1.0, dtype)?;
            let q1 = ex.op("Sub", vec![q.clone(), one], vec![]);
            Ok(ex.op("Where", vec![fix, q1, q], vec![]))
        }
        // A primitive whose row names no ONNX op and that has no composite above.
        _ => Err(unsupported(
            b.name(),
            "it has no ONNX op in the elementwise table and no composite in the exporter",
        )),
    }
}
