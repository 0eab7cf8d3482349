//! ONNX element types held in a wider graph dtype: 8- and 16-bit integers (in i32), uint64
//! (in u32) and bfloat16 (in f32). Each value's ONNX type is recorded; results of integer
//! arithmetic are wrapped into the type's range, and bfloat16 results rounded to bfloat16.

use super::{Cx, Node, Val};
use crate::onnx::proto::tensor_proto::DataType;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::{narrow_range, round_bf16, HostValue};
use crate::{DType, HostTensor, Result};

/// Whether values of ONNX element type `elem` are held in a wider dtype whose type the
/// import must remember.
pub(super) fn is_held_wide(elem: i32) -> bool {
    narrow_range(elem).is_some()
        || elem == DataType::Uint64 as i32
        || elem == DataType::Bfloat16 as i32
}

pub(super) fn narrow_of_name(name: &str) -> Option<i32> {
    let e = DataType::from_str_name(name)? as i32;
    is_held_wide(e).then_some(e)
}

/// The graph dtype that holds ONNX type `elem` (for the types [`is_held_wide`] names).
fn holder(elem: i32) -> DType {
    if elem == DataType::Uint64 as i32 {
        DType::U32
    } else if elem == DataType::Bfloat16 as i32 {
        DType::F32
    } else {
        DType::I32
    }
}

/// Ops whose integer outputs are indices or sizes, whatever their inputs' type.
const INDEX_OUTPUTS: &[&str] = &["ArgMax", "ArgMin", "Shape", "Size", "NonZero"];
/// Ops whose integer result can leave the range of the type it has in ONNX, which wraps.
const WRAPS: &[&str] = &[
    "BitShift",
    "BitwiseNot",
    "BitCast",
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

/// Output `k` of `node` with its ONNX element type recorded when it is held wide (explicit
/// for casts and quantization, else the first such input's): wrapped into an 8/16-bit
/// type's range after arithmetic, as the type would wrap, and rounded to bfloat16 after
/// every op that computes a bfloat16.
pub(super) fn narrow_output(
    cx: &mut Cx,
    node: &Node,
    proto: &NodeProto,
    k: usize,
    v: Val,
) -> Result<Val> {
    let name = &proto.output[k];
    cx.narrow.remove(name);
    let dtype = match &v {
        Val::T(t) => cx.g.dtype(*t)?,
        Val::Host(h) => h.dtype(),
    };
    if !matches!(dtype, DType::I32 | DType::U32 | DType::F32) {
        return Ok(v);
    }
    let input_elem = |i: usize| node.input(i).and_then(|n| cx.narrow.get(n).copied());
    let u8 = DataType::Uint8 as i32;
    let elem = match node.op {
        "Cast" | "BitCast" => Some(node.int("to", 0) as i32),
        "EyeLike" | "RandomUniformLike" | "RandomNormalLike" if node.has("dtype") => {
            Some(node.int("dtype", 0) as i32)
        }
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
    let Some(elem) = elem.filter(|&e| is_held_wide(e) && holder(e) == dtype) else {
        return Ok(v);
    };
    cx.narrow.insert(name.clone(), elem);
    if elem == DataType::Bfloat16 as i32 {
        return Ok(match v {
            Val::T(t) => Val::T(cx.g.round_bf16(t)?),
            Val::Host(h) => match &*h {
                HostValue::Floats(f) => {
                    let words = f.words().iter().map(|&w| round_bf16(w)).collect();
                    HostValue::Floats(HostTensor::from_words(
                        f.shape().clone(),
                        DType::F32,
                        words,
                    )?)
                    .into()
                }
                HostValue::Ints { .. } => Val::Host(h),
            },
        });
    }
    let Some((lo, hi)) = narrow_range(elem).filter(|_| WRAPS.contains(&node.op)) else {
        return Ok(v);
    };
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
