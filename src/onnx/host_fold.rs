//! Binary ops over integer values known at import, folded on the host in `i64`: shape
//! arithmetic keeps its exact value (the int64 it has in ONNX; the range check of the dtype
//! policy applies where it becomes a tensor, so `2^31 - 1 + 1` is an error there, never a
//! wrapped `-2^31`), and a comparison or logic op gives a bool known at import (a `Loop`
//! condition `Less(i, 3)` unrolls).

use super::build::{bad, Cx, Node, Val};
use super::limits::MAX_HOST_ELEMENTS;
use super::ops_shape::broadcast;
use super::tensor::HostValue;
use crate::{DType, Result};

/// `n`'s result when it is an arithmetic, comparison or logic op over two host values that
/// can be folded; `None` to build it in the graph as usual.
pub(super) fn binary(cx: &Cx, n: &Node) -> Result<Option<Vec<Val>>> {
    let (Some(a), Some(b)) = (n.input(0), n.input(1)) else {
        return Ok(None);
    };
    // A value computed from run-time sizes (probe sizes) must not be folded into a number.
    // Trainable initializers (variables) are not constants.
    let fixed = cx.known(n, 0) && cx.known(n, 1);
    if n.inputs.len() != 2 || !fixed || cx.is_sym(a) || cx.is_sym(b) {
        return Ok(None);
    }
    let (Val::Host(x), Val::Host(y)) = (cx.val_of(n, 0)?, cx.val_of(n, 1)?) else {
        return Ok(None);
    };
    let Ok(shape) = broadcast(x.shape(), y.shape()) else {
        return Ok(None);
    };
    let count: usize = shape.iter().product();
    if count > MAX_HOST_ELEMENTS || x.dtype() != y.dtype() {
        return Ok(None);
    }
    let v = match (&*x, &*y) {
        (HostValue::Ints { v: p, dtype, .. }, HostValue::Ints { v: q, .. }) => {
            let Some((f, out)) = int_op(n.op, *dtype) else {
                return Ok(None);
            };
            let (ia, ib) = (indexer(&shape, x.shape()), indexer(&shape, y.shape()));
            let v = (0..count)
                .map(|i| f(p[ia(i)], q[ib(i)]))
                .collect::<Result<Vec<i64>>>()?;
            HostValue::Ints {
                shape,
                v,
                dtype: out,
            }
        }
        (HostValue::Floats(p), HostValue::Floats(q)) => {
            let Some(f) = compare(n.op) else {
                return Ok(None);
            };
            let (p, q) = (p.to_f32()?, q.to_f32()?);
            let (ia, ib) = (indexer(&shape, x.shape()), indexer(&shape, y.shape()));
            let v = (0..count)
                .map(|i| i64::from(f(f64::from(p[ia(i)]), f64::from(q[ib(i)]))))
                .collect();
            HostValue::Ints {
                shape,
                v,
                dtype: DType::Bool,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(vec![v.into()]))
}

type IntOp = fn(i64, i64) -> Result<i64>;

fn overflow() -> crate::Error {
    bad("the folded value overflows int64")
}

/// The fold of integer op `op` over `dtype` and its result's dtype.
fn int_op(op: &str, dtype: DType) -> Option<(IntOp, DType)> {
    let arith: Option<IntOp> = match op {
        "Add" => Some(|a, b| a.checked_add(b).ok_or_else(overflow)),
        "Sub" => Some(|a, b| a.checked_sub(b).ok_or_else(overflow)),
        "Mul" => Some(|a, b| a.checked_mul(b).ok_or_else(overflow)),
        // Integer division truncates, as onnxruntime's does.
        "Div" => Some(|a, b| match b {
            0 => Err(bad("integer division by zero")),
            _ => a.checked_div(b).ok_or_else(overflow),
        }),
        _ => None,
    };
    if let Some(f) = arith {
        return matches!(dtype, DType::I32 | DType::U32).then_some((f, dtype));
    }
    let logic: Option<IntOp> = match op {
        "And" => Some(|a, b| Ok(i64::from(a != 0 && b != 0))),
        "Or" => Some(|a, b| Ok(i64::from(a != 0 || b != 0))),
        "Xor" => Some(|a, b| Ok(i64::from((a != 0) != (b != 0)))),
        _ => None,
    };
    if let Some(f) = logic {
        return (dtype == DType::Bool).then_some((f, DType::Bool));
    }
    let cmp: IntOp = match op {
        "Equal" => |a, b| Ok(i64::from(a == b)),
        "Less" => |a, b| Ok(i64::from(a < b)),
        "Greater" => |a, b| Ok(i64::from(a > b)),
        "LessOrEqual" => |a, b| Ok(i64::from(a <= b)),
        "GreaterOrEqual" => |a, b| Ok(i64::from(a >= b)),
        _ => return None,
    };
    Some((cmp, DType::Bool))
}

/// A float comparison (NaN compares false, as in IEEE and onnxruntime).
fn compare(op: &str) -> Option<fn(f64, f64) -> bool> {
    Some(match op {
        "Equal" => |a, b| a == b,
        "Less" => |a, b| a < b,
        "Greater" => |a, b| a > b,
        "LessOrEqual" => |a, b| a <= b,
        "GreaterOrEqual" => |a, b| a >= b,
        _ => return None,
    })
}

/// Maps a flat index of broadcast shape `out` to the flat index into `s` (which broadcasts
/// to it).
fn indexer(out: &[usize], s: &[usize]) -> impl Fn(usize) -> usize {
    let lead = out.len() - s.len();
    let mut strides = vec![0usize; out.len()];
    let mut acc = 1;
    for k in (0..s.len()).rev() {
        if s[k] != 1 {
            strides[lead + k] = acc;
        }
        acc *= s[k];
    }
    let out = out.to_vec();
    move |mut i| {
        let mut at = 0;
        for k in (0..out.len()).rev() {
            let d = out[k].max(1);
            at += (i % d) * strides[k];
            i /= d;
        }
        at
    }
}
