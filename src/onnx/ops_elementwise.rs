//! Elementwise ops: arithmetic, comparisons, logic, activations, `Where`, `Clip`.

use super::build::{bad, Cx, Node, Val};
use crate::ops::{BinaryOp, UnaryOp};
use crate::{DType, Graph, Result, Tensor};

pub(super) type Binary = fn(&mut Graph, Tensor, Tensor) -> Result<Tensor>;

/// An ONNX op that is one binary primitive (its row of the elementwise table), folded on the
/// host when both inputs are known at import. The importer's lowest opset is 7, so the
/// legacy `broadcast` attribute never reaches it.
pub(super) fn binary_primitive(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let op = BinaryOp::from_onnx(n.op).ok_or_else(|| bad("not a binary primitive"))?;
    if let Some(v) = super::host_fold::binary(cx, n)? {
        return Ok(v);
    }
    let (a, b) = (cx.t(n, 0)?, cx.t(n, 1)?);
    Ok(vec![cx.g.binary_op(op, a, b)?.into()])
}

/// An ONNX op that is one unary primitive (its row of the elementwise table).
pub(super) fn primitive(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let op = UnaryOp::from_onnx(n.op).ok_or_else(|| bad("not a unary primitive"))?;
    let x = cx.t(n, 0)?;
    cx.g.unary_op(op, x)
}

pub(super) fn where_(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (c, a, b) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    cx.g.select(c, a, b)
}

/// `~x`. A uint64 (held in u32) is refused: its complement never fits 32 bits.
pub(super) fn bitwise_not(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let uint64 = super::proto::tensor_proto::DataType::Uint64 as i32;
    if n.input(0).and_then(|i| cx.narrow_elem(i)) == Some(uint64) {
        return Err(bad(
            "BitwiseNot of uint64: the complement does not fit the 32 bits uint64 is held in",
        ));
    }
    let x = cx.t(n, 0)?;
    Ok(vec![Val::T(cx.g.bitwise_not(x)?)])
}

/// `x << y` or `x >> y` (arithmetic for signed types) in the width of x's ONNX type: a
/// shift past the width, or a negative one, shifts every bit out: 0 (or -1 for a negative x
/// shifted right).
/// Built from multiplications and floor divisions by powers of two, in two steps of at most
/// 2^16 so each factor fits; the import wraps a left shift into the type's range.
pub(super) fn bit_shift(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let (x, y) = (cx.t(n, 0)?, cx.t(n, 1)?);
    let dt = cx.g.dtype(x)?;
    if !matches!(dt, DType::I32 | DType::U32) {
        return Err(bad(format!("BitShift takes integers, got {dt}")));
    }
    let width = n
        .input(0)
        .and_then(|i| cx.narrow_elem(i))
        .and_then(super::tensor::narrow_range)
        .map_or(32, |(lo, hi)| (hi - lo + 1).ilog2() as i64);
    let left = match n.string("direction").as_deref() {
        Some("LEFT") => true,
        Some("RIGHT") => false,
        other => return Err(n.unsupported(format!("direction {other:?}"))),
    };
    let yf = cx.g.cast(y, DType::F32)?;
    let negative = {
        let zero = cx.scalar(0.0, DType::F32)?;
        cx.g.less(yf, zero)?
    };
    let full = cx.scalar(width as f64, DType::F32)?;
    let yf = cx.g.select(negative, full, yf)?;
    let yc = cx.g.clip(yf, 0.0, width as f64)?;
    let a = cx.g.clip(yc, 0.0, 16.0)?;
    let b = cx.g.sub(yc, a)?;
    let two = cx.scalar(2.0, DType::F32)?;
    let mut v = x;
    for e in [a, b] {
        let p = cx.g.pow(two, e)?;
        let p = cx.g.cast(p, dt)?;
        v = if left {
            cx.g.mul(v, p)?
        } else if dt == DType::U32 {
            cx.g.div(v, p)?
        } else {
            // Floor division: (v - v mod p) / p, exact.
            let r = cx.g.remainder(v, p)?;
            let d = cx.g.sub(v, r)?;
            cx.g.div(d, p)?
        };
    }
    Ok(vec![v.into()])
}

pub(super) fn fold_inputs(cx: &mut Cx, n: &Node, f: Binary) -> Result<Vec<Val>> {
    let count = n.inputs.len();
    let mut acc = cx.t(n, 0)?;
    for i in 1..count {
        let x = cx.t(n, i)?;
        acc = f(&mut cx.g, acc, x)?;
    }
    if n.op == "Mean" && count > 1 {
        let dt = cx.g.dtype(acc)?;
        let c = cx.scalar(count as f64, dt)?;
        acc = cx.g.div(acc, c)?;
    }
    Ok(vec![acc.into()])
}

pub(super) fn pow(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let (x, mut y) = (cx.t(n, 0)?, cx.t(n, 1)?);
    let dt = cx.g.dtype(x)?;
    if cx.g.dtype(y)? != dt {
        y = cx.g.cast(y, dt)?;
    }
    Ok(vec![cx.g.pow(x, y)?.into()])
}

/// `Mod`: `fmod = 0` is Python's `%` (sign of the divisor, [`Graph::remainder`]); `fmod = 1`
/// is C's `fmod` (sign of the dividend): the remainder less `b` where it is non-zero and
/// the signs differ.
pub(super) fn modulo(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let (a, b) = (cx.t(n, 0)?, cx.t(n, 1)?);
    let r = cx.g.remainder(a, b)?;
    if n.int("fmod", 0) == 0 {
        return Ok(vec![r.into()]);
    }
    let dt = cx.g.dtype(a)?;
    let z = cx.scalar(0.0, dt)?;
    let g = &mut cx.g;
    let (an, bn) = (g.less(a, z)?, g.less(b, z)?);
    let differ = g.logical_xor(an, bn)?;
    let nz = g.not_equal(r, z)?;
    let fix = g.logical_and(differ, nz)?;
    let rb = g.sub(r, b)?;
    Ok(vec![g.select(fix, rb, r)?.into()])
}

pub(super) fn clip(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let mut x = cx.t(n, 0)?;
    let dt = cx.g.dtype(x)?;
    let (lo, hi) = if n.opset < 11 {
        let lo = n
            .has("min")
            .then(|| n.float("min", f32::MIN))
            .map(|v| cx.scalar(v as f64, dt))
            .transpose()?;
        let hi = n
            .has("max")
            .then(|| n.float("max", f32::MAX))
            .map(|v| cx.scalar(v as f64, dt))
            .transpose()?;
        (lo, hi)
    } else {
        (cx.opt_t(n, 1)?, cx.opt_t(n, 2)?)
    };
    if let Some(lo) = lo {
        x = cx.g.maximum(x, lo)?;
    }
    if let Some(hi) = hi {
        x = cx.g.minimum(x, hi)?;
    }
    Ok(vec![x.into()])
}

pub(super) fn is_inf(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.t(n, 0)?;
    let (pos, neg) = (
        n.int("detect_positive", 1) != 0,
        n.int("detect_negative", 1) != 0,
    );
    let inf = cx.g.isinf(x)?;
    let y = match (pos, neg) {
        (true, true) => inf,
        (false, false) => {
            let f = cx.scalar(0.0, DType::Bool)?;
            let s = cx.g.probe_shape(x)?.dims().to_vec();
            cx.g.broadcast_to(f, &s)?
        }
        _ => {
            let z = cx.scalar(0.0, cx.g.dtype(x)?)?;
            let side = if pos {
                cx.g.greater(x, z)?
            } else {
                cx.g.less(x, z)?
            };
            cx.g.logical_and(inf, side)?
        }
    };
    Ok(vec![y.into()])
}

/// Activations with attributes, composed from primitives.
/// The registry hands it each op named in its match.
pub(super) fn activation(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let op = n.op;
    let x = cx.t(n, 0)?;
    let dt = cx.g.dtype(x)?;
    let c = |cx: &mut Cx, v: f32| cx.scalar(v as f64, dt);
    let y = match op {
        "LeakyRelu" => cx.g.leaky_relu(x, n.float("alpha", 0.01))?,
        "Elu" => cx.g.elu(x, n.float("alpha", 1.0))?,
        "Selu" => {
            let e = cx.g.elu(x, n.float("alpha", 1.673_263_2))?;
            let gm = c(cx, n.float("gamma", 1.050_701))?;
            cx.g.mul(e, gm)?
        }
        "Celu" => {
            // max(0, x) + min(0, alpha * expm1(x / alpha))
            let a = c(cx, n.float("alpha", 1.0))?;
            let z = c(cx, 0.0)?;
            let g = &mut cx.g;
            let xa = g.div(x, a)?;
            let em = g.expm1(xa)?;
            let neg = g.mul(a, em)?;
            let neg = g.minimum(neg, z)?;
            let pos = g.maximum(x, z)?;
            g.add(pos, neg)?
        }
        "ThresholdedRelu" => {
            let a = c(cx, n.float("alpha", 1.0))?;
            let z = c(cx, 0.0)?;
            let gt = cx.g.greater(x, a)?;
            cx.g.select(gt, x, z)?
        }
        "HardSigmoid" | "HardSwish" => {
            let (alpha, beta) = if op == "HardSwish" {
                (1.0 / 6.0, 0.5)
            } else {
                (n.float("alpha", 0.2), n.float("beta", 0.5))
            };
            let (a, b, z, o) = (c(cx, alpha)?, c(cx, beta)?, c(cx, 0.0)?, c(cx, 1.0)?);
            let g = &mut cx.g;
            let ax = g.mul(x, a)?;
            let t = g.add(ax, b)?;
            let t = g.maximum(t, z)?;
            let hs = g.minimum(t, o)?;
            if op == "HardSwish" {
                g.mul(x, hs)?
            } else {
                hs
            }
        }
        "Gelu" => match n.string("approximate").as_deref().unwrap_or("none") {
            "none" => cx.g.gelu(x, false)?,
            "tanh" => cx.g.gelu(x, true)?,
            a => return Err(n.unsupported(format!("approximate = '{a}'"))),
        },
        "PRelu" => {
            let slope = cx.t(n, 1)?;
            let z = c(cx, 0.0)?;
            let lt = cx.g.less(x, z)?;
            let sx = cx.g.mul(x, slope)?;
            cx.g.select(lt, sx, x)?
        }
        "Mish" => {
            let sp = cx.g.softplus(x)?;
            let t = cx.g.tanh(sp)?;
            cx.g.mul(x, t)?
        }
        "Sinh" | "Cosh" => {
            let h = c(cx, 0.5)?;
            let g = &mut cx.g;
            let (e, nx) = (g.exp(x)?, g.neg(x)?);
            let en = g.exp(nx)?;
            let s = if op == "Sinh" {
                g.sub(e, en)?
            } else {
                g.add(e, en)?
            };
            g.mul(s, h)?
        }
        "Shrink" => {
            let (l, b) = (n.float("lambd", 0.5), n.float("bias", 0.0));
            let (lp, ln, bb, z) = (c(cx, l)?, c(cx, -l)?, c(cx, b)?, c(cx, 0.0)?);
            let g = &mut cx.g;
            let (lo, hi) = (g.less(x, ln)?, g.greater(x, lp)?);
            let (xp, xm) = (g.add(x, bb)?, g.sub(x, bb)?);
            let t = g.select(hi, xm, z)?;
            g.select(lo, xp, t)?
        }
        _ => return Err(bad("not an activation")),
    };
    Ok(y)
}
