//! Reading the attributes of the ops added after the first version of the reader (strided
//! views, concat, take, pad, conv2d, pools, random), each capped before any arithmetic.

use super::super::{err, MAX_ELEMENTS, MAX_RANK, MAX_STRIDE, MAX_WINDOW};
use super::{json_word, short, usize_array};
use crate::ops::{Distribution, Op, PoolKind, RandomSpec, StridedKind, Window};
use crate::ops::{Movement, Nn};
use crate::{DType, Result};
use serde_json::{Map, Value};

/// The arity of `concat`: two or more inputs.
pub(super) const CONCAT: usize = usize::MAX;

/// The ops added after the first version of the reader, with their attributes; `None` if
/// `opname` is none of them.
pub(super) fn parse_new_op(
    obj: &Map<String, Value>,
    opname: &str,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<Op>> {
    let strided = |kind| -> Result<Op> {
        let offset = uint(obj.get("offset"), &field("offset"), MAX_ELEMENTS as u64)? as i64;
        let strides = i64_array(obj.get("strides"), &field("strides"), MAX_STRIDE)?;
        Ok(Op::Movement(Movement::Strided {
            kind,
            offset,
            strides,
        }))
    };
    let axis = || uint(obj.get("axis"), &field("axis"), MAX_RANK as u64).map(|a| a as usize);
    let window = || -> Result<Window> {
        Ok(Window {
            kernel: pair(obj.get("kernel"), &field("kernel"), MAX_ELEMENTS)?,
            stride: pair(obj.get("stride"), &field("stride"), MAX_WINDOW)?,
            padding: pair(obj.get("padding"), &field("padding"), MAX_WINDOW)?,
            dilation: pair(obj.get("dilation"), &field("dilation"), MAX_WINDOW)?,
        })
    };
    let random = |uniform: bool| -> Result<Op> {
        let seed = uint(obj.get("seed"), &field("seed"), u64::MAX)?;
        let [a, b] = f32_pair(obj.get("params"), &field("params"))?;
        let dist = if uniform {
            Distribution::Uniform { low: a, high: b }
        } else {
            Distribution::Normal { mean: a, std: b }
        };
        Ok(Op::Random(RandomSpec { dist, seed }))
    };
    let op = match opname {
        "slice" => strided(StridedKind::Slice)?,
        "flip" => strided(StridedKind::Flip)?,
        "broadcast_to" => strided(StridedKind::BroadcastTo)?,
        "concat" => Op::Movement(Movement::Concat(axis()?)),
        "take" => Op::Movement(Movement::Gather(axis()?)),
        "pad" => Op::Movement(Movement::Pad {
            before: usize_array(obj.get("before"), &field("before"), true)?,
            value: uint(obj.get("value_bits"), &field("value_bits"), u32::MAX as u64)? as u32,
        }),
        "conv2d" => Op::Nn(Nn::Conv2d {
            window: window()?,
            groups: uint(obj.get("groups"), &field("groups"), MAX_ELEMENTS as u64)? as usize,
        }),
        "max_pool2d" => Op::Nn(Nn::Pool {
            kind: PoolKind::Max,
            window: window()?,
        }),
        "avg_pool2d" => Op::Nn(Nn::Pool {
            kind: PoolKind::Avg,
            window: window()?,
        }),
        "random_uniform" => random(true)?,
        "random_normal" => random(false)?,
        _ => return Ok(None),
    };
    Ok(Some(op))
}

/// A non-negative integer at most `cap`.
fn uint(v: Option<&Value>, at: &str, cap: u64) -> Result<u64> {
    match v {
        Some(x) => match x.as_u64() {
            Some(n) if n <= cap => Ok(n),
            _ => Err(err(
                at,
                format!("expected an integer in 0..={cap}, found {}", short(x)),
            )),
        },
        None => Err(err(at, "missing")),
    }
}

/// The entries of a JSON array of at most [`MAX_RANK`] values.
fn array<'a>(v: Option<&'a Value>, at: &str, what: &str) -> Result<&'a Vec<Value>> {
    let a = match v {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(err(
                at,
                format!("expected an array of {what}, found {}", short(other)),
            ))
        }
        None => return Err(err(at, "missing")),
    };
    if a.len() > MAX_RANK {
        return Err(err(
            at,
            format!("{} entries; at most {MAX_RANK} are allowed", a.len()),
        ));
    }
    Ok(a)
}

/// A JSON array of signed integers of magnitude at most `cap`.
fn i64_array(v: Option<&Value>, at: &str, cap: i64) -> Result<Vec<i64>> {
    array(v, at, "integers")?
        .iter()
        .enumerate()
        .map(|(k, x)| match x.as_i64() {
            Some(n) if n.checked_abs().is_some_and(|m| m <= cap) => Ok(n),
            _ => Err(err(
                format!("{at}[{k}]"),
                format!("expected an integer in -{cap}..={cap}, found {}", short(x)),
            )),
        })
        .collect()
}

/// Exactly two non-negative integers at most `cap` (a 2-D window's `[h, w]`).
fn pair(v: Option<&Value>, at: &str, cap: usize) -> Result<[usize; 2]> {
    let a = array(v, at, "integers")?;
    if a.len() != 2 {
        return Err(err(
            at,
            format!("expected 2 entries ([h, w]), found {}", a.len()),
        ));
    }
    let mut out = [0; 2];
    for (k, x) in a.iter().enumerate() {
        out[k] = uint(Some(x), &format!("{at}[{k}]"), cap as u64)? as usize;
    }
    Ok(out)
}

/// Exactly two f32 values, written like constant data (non-finite ones as strings).
fn f32_pair(v: Option<&Value>, at: &str) -> Result<[f32; 2]> {
    let a = array(v, at, "2 numbers")?;
    if a.len() != 2 {
        return Err(err(at, format!("expected 2 numbers, found {}", a.len())));
    }
    let mut out = [0.0; 2];
    for (k, x) in a.iter().enumerate() {
        out[k] = json_word(x, DType::F32)
            .map(f32::from_bits)
            .ok_or_else(|| {
                err(
                    format!("{at}[{k}]"),
                    format!("{} is not a valid f32 value", short(x)),
                )
            })?;
    }
    Ok(out)
}
