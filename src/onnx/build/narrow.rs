//! 8- and 16-bit integer element types (held in i32): each value's ONNX type is recorded
//! and results of arithmetic wrapped into its range.

use super::{Cx, Node, Val};
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::{narrow_range, HostValue};
use crate::{DType, Result};

pub(super) fn narrow_of_name(name: &str) -> Option<i32> {
    let e = crate::onnx::proto::tensor_proto::DataType::from_str_name(name)? as i32;
    narrow_range(e).map(|_| e)
}

/// Ops whose integer outputs are indices or sizes, whatever their inputs' type.
const INDEX_OUTPUTS: &[&str] = &["ArgMax", "ArgMin", "Shape", "Size", "NonZero"];
/// Ops whose integer result can leave the range of the type it has in ONNX, which wraps.
const WRAPS: &[&str] = &[
    "BitShift",
    "Add",
    "Sub",
    "Mul",
    "Neg",
    "Abs",
    "Sum",
    "Div",
    "Pow",
    "Cast",
    "CastLike",
    "CumSum",
    "ReduceSum",
    "ReduceProd",
    "ReduceSumSquare",
    "Einsum",
    "MatMul",
    "Gemm",
];

/// Output `k` of `node` with its ONNX element type recorded when it is an 8- or 16-bit
/// integer (explicit for casts and quantization, else the first such input's), and wrapped
/// into that type's range after arithmetic, as the type would wrap.
pub(super) fn narrow_output(
    cx: &mut Cx,
    node: &Node,
    proto: &NodeProto,
    k: usize,
    v: Val,
) -> Result<Val> {
    let name = &proto.output[k];
    cx.narrow.remove(name);
    let is_i32 = match &v {
        Val::T(t) => cx.g.dtype(*t)? == DType::I32,
        Val::Host(h) => h.dtype() == DType::I32,
    };
    if !is_i32 {
        return Ok(v);
    }
    let input_elem = |i: usize| node.input(i).and_then(|n| cx.narrow.get(n).copied());
    let u8 = crate::onnx::proto::tensor_proto::DataType::Uint8 as i32;
    let elem = match node.op {
        "Cast" => Some(node.int("to", 0) as i32),
        "CastLike" => input_elem(1),
        "Constant" => node
            .attr("value")
            .and_then(|a| a.t.as_ref())
            .and_then(|t| t.data_type),
        "QuantizeLinear" => match node.int("output_dtype", 0) as i32 {
            0 => Some(input_elem(2).unwrap_or(u8)),
            e => Some(e),
        },
        "DynamicQuantizeLinear" => Some(u8),
        "QLinearMatMul" | "QLinearConv" | "QLinearAdd" | "QLinearMul" => {
            Some(input_elem(7).unwrap_or(u8))
        }
        "QLinearGlobalAveragePool" => Some(input_elem(4).unwrap_or(u8)),
        "QGemm" if node.input(7).is_some() => Some(input_elem(8).unwrap_or(u8)),
        "QGemm" => None,
        "MatMulInteger" | "ConvInteger" | "DequantizeLinear" => None,
        op if INDEX_OUTPUTS.contains(&op) || (matches!(op, "TopK" | "Unique") && k >= 1) => None,
        _ => (0..node.inputs.len()).find_map(input_elem),
    };
    let Some((elem, (lo, hi))) = elem.and_then(|e| narrow_range(e).map(|r| (e, r))) else {
        return Ok(v);
    };
    cx.narrow.insert(name.clone(), elem);
    if !WRAPS.contains(&node.op) {
        return Ok(v);
    }
    let span = hi - lo + 1;
    Ok(match v {
        Val::Host(h) => match &*h {
            HostValue::Ints { shape, v, dtype } => HostValue::Ints {
                shape: shape.clone(),
                v: v.iter().map(|&x| (x - lo).rem_euclid(span) + lo).collect(),
                dtype: *dtype,
            }
            .into(),
            HostValue::Floats(_) => Val::Host(h),
        },
        Val::T(t) => {
            let (lo_t, span_t) = (
                cx.scalar(lo as f64, DType::I32)?,
                cx.scalar(span as f64, DType::I32)?,
            );
            let shifted = cx.g.sub(t, lo_t)?;
            let r = cx.g.remainder(shifted, span_t)?;
            Val::T(cx.g.add(r, lo_t)?)
        }
    })
}
