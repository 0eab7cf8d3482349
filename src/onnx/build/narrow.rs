//! ONNX element types held in a wider graph dtype: 2- to 16-bit integers (in i32), uint64
//! (in u32), bfloat16, float8 and float4 (in f32). Each value's ONNX type is recorded;
//! results of integer arithmetic are wrapped into the type's range, and bfloat16, float8 and
//! float4 results rounded to the type (saturating unless the node says `saturate=0`).

use super::{Cx, Node, Val};
use crate::onnx::proto::tensor_proto::DataType;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::{narrow_range, small_float, HostValue};
use crate::ops::elementwise::reference::{round_bf16, round_small_float};
use crate::{DType, HostTensor, Result};

/// Whether values of ONNX element type `elem` are held in a wider dtype whose type the
/// import must remember.
pub(super) fn is_held_wide(elem: i32) -> bool {
    narrow_range(elem).is_some()
        || elem == DataType::Uint64 as i32
        || elem == DataType::Bfloat16 as i32
        || small_float(elem).is_some()
}

pub(super) fn narrow_of_name(name: &str) -> Option<i32> {
    let e = DataType::from_str_name(name)? as i32;
    is_held_wide(e).then_some(e)
}

/// The graph dtype that holds ONNX type `elem` (for the types [`is_held_wide`] names).
fn holder(elem: i32) -> DType {
    if elem == DataType::Uint64 as i32 {
        DType::U32
    } else if elem == DataType::Bfloat16 as i32 || small_float(elem).is_some() {
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

/// Ops whose outputs only hold values of their inputs of the same type (moved, picked or
/// compared), which need no rounding again.
const MOVES: &[&str] = &[
    "Identity",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Expand",
    "Tile",
    "Slice",
    "Split",
    "Concat",
    "Gather",
    "GatherElements",
    "GatherND",
    "DepthToSpace",
    "SpaceToDepth",
    "ReverseSequence",
    "Compress",
    "Where",
    "Max",
    "Min",
    "ReduceMax",
    "ReduceMin",
    "MaxPool",
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
    if MOVES.contains(&node.op) {
        // Its values are its inputs' (of the same type), already rounded.
        return Ok(v);
    }
    if elem == DataType::Bfloat16 as i32 {
        return round_floats(cx, v, round_bf16, |g, t| g.round_bf16(t));
    }
    if let Some(to) = small_float(elem) {
        // Float8 casts saturate unless told not to; float4 always does.
        let limit = (node.int("saturate", 1) != 0 && to.overflows()).then(|| to.rule().max);
        return round_floats(
            cx,
            v,
            |w| {
                let x = f32::from_bits(w);
                let x = limit.map_or(x, |m| if x.abs() > m { m.copysign(x) } else { x });
                round_small_float(x.to_bits(), to)
            },
            |g, t| round_small(g, t, to, limit),
        );
    }
    let Some((lo, hi)) = narrow_range(elem).filter(|_| WRAPS.contains(&node.op)) else {
        return Ok(v);
    };
    let from_float = matches!(node.op, "Cast" | "CastLike") && cx.dtype(node, 0)?.is_float();
    if from_float && hi - lo < 255 {
        // A float outside a 2- or 4-bit type's range becomes 0, as onnx's reference
        // (`ml_dtypes`) converts it, not wrapped.
        return Ok(match v {
            Val::Host(h) => map_ints(h, |x| if (lo..=hi).contains(&x) { x } else { 0 }),
            Val::T(t) => {
                let (lo_t, hi_t) = (
                    cx.scalar(lo as f64, DType::I32)?,
                    cx.scalar(hi as f64, DType::I32)?,
                );
                let zero = cx.scalar(0.0, DType::I32)?;
                let above = cx.g.greater_equal(t, lo_t)?;
                let below = cx.g.less_equal(t, hi_t)?;
                let inside = cx.g.logical_and(above, below)?;
                Val::T(cx.g.select(inside, t, zero)?)
            }
        });
    }
    let span = hi - lo + 1;
    Ok(match v {
        Val::Host(h) => map_ints(h, |x| (x - lo).rem_euclid(span) + lo),
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

/// Host integers `h` with `f` applied to each; floats unchanged.
fn map_ints(h: std::rc::Rc<HostValue>, f: impl Fn(i64) -> i64) -> Val {
    match &*h {
        HostValue::Ints { shape, v, dtype } => HostValue::Ints {
            shape: shape.clone(),
            v: v.iter().map(|&x| f(x)).collect(),
            dtype: *dtype,
        }
        .into(),
        HostValue::Floats(_) => Val::Host(h),
    }
}

/// `v`'s floats rounded: on the host word by word with `host`, in the graph with `graph`.
fn round_floats(
    cx: &mut Cx,
    v: Val,
    host: impl Fn(u32) -> u32,
    graph: impl FnOnce(&mut crate::Graph, crate::Tensor) -> Result<crate::Tensor>,
) -> Result<Val> {
    Ok(match v {
        Val::T(t) => Val::T(graph(&mut cx.g, t)?),
        Val::Host(h) => match &*h {
            HostValue::Floats(f) => {
                let words = f.words().iter().map(|&w| host(w)).collect();
                HostValue::Floats(HostTensor::from_words(
                    f.shape().clone(),
                    DType::F32,
                    words,
                )?)
                .into()
            }
            HostValue::Ints { .. } => Val::Host(h),
        },
    })
}

/// Graph input `t` of ONNX type `elem` rounded to it when it is bfloat16, float8 or float4
/// (saturating, as `Cast` does by default); other types pass unchanged.
pub(super) fn round_input(
    g: &mut crate::Graph,
    elem: i32,
    t: crate::Tensor,
) -> Result<crate::Tensor> {
    if elem == DataType::Bfloat16 as i32 {
        return g.round_bf16(t);
    }
    let Some(to) = small_float(elem) else {
        return Ok(t);
    };
    round_small(g, t, to, to.overflows().then(|| to.rule().max))
}

/// `t` rounded to `to`, clipped to `±limit` first when given (saturation).
fn round_small(
    g: &mut crate::Graph,
    t: crate::Tensor,
    to: crate::ops::SmallFloat,
    limit: Option<f32>,
) -> Result<crate::Tensor> {
    let t = match limit {
        Some(m) => g.clip(t, -f64::from(m), f64::from(m))?,
        None => t,
    };
    g.round_to(t, to)
}
