//! `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss`: the class axis gathered at the
//! targets (a flat `take`, as `GatherElements`), weighted, with `ignore_index` masked out.

use super::build::{bad, Cx, Node, Val};
use crate::{DType, Result, Tensor};

pub(super) fn nll_loss(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    nll(cx, n, x)
}

/// The loss and the log-probabilities.
pub(super) fn softmax_cross_entropy(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.t(n, 0)?;
    let lp = cx.g.log_softmax(x, 1)?;
    Ok(vec![nll(cx, n, lp)?.into(), lp.into()])
}

/// `-x[n, t[n, d...], d...] * w[t]` reduced as `reduction` says; `x` is `[N, C, d...]` and the
/// target (input 1) `[N, d...]`.
fn nll(cx: &mut Cx, n: &Node, x: Tensor) -> Result<Tensor> {
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let ts = cx.shape(n, 1)?;
    if xs.len() < 2 || ts.len() + 1 != xs.len() || ts[0] != xs[0] || ts[1..] != xs[2..] {
        return Err(bad(format!("input {xs:?} and target {ts:?} do not match")));
    }
    let c = xs[1];
    let mut t = cx.t(n, 1)?;
    if cx.g.dtype(t)? != DType::I32 {
        t = cx.g.cast(t, DType::I32)?;
    }
    let dt = cx.g.dtype(x)?;
    // Ignored targets read class 0 and are masked out afterwards.
    let keep = match n.has("ignore_index") {
        true => {
            let ii = cx.scalar(n.int("ignore_index", 0) as f64, DType::I32)?;
            Some(cx.g.not_equal(t, ii)?)
        }
        false => None,
    };
    if let Some(k) = keep {
        let zero = cx.scalar(0.0, DType::I32)?;
        t = cx.g.select(k, t, zero)?;
    }
    // flat index of x[n, t, d] = n * C * D + t * D + d, with D the product of the d dims.
    let d: usize = xs[2..].iter().product();
    let count: usize = ts.iter().product();
    let base: Vec<i64> = (0..count)
        .map(|i| ((i / d.max(1)) * c * d + i % d.max(1)) as i64)
        .collect();
    let base = cx.constant(
        &super::tensor::HostValue::Ints {
            shape: ts.clone(),
            v: base,
            dtype: DType::I32,
        },
        "loss index",
    )?;
    let stride = cx.scalar(d as f64, DType::I32)?;
    let g = &mut cx.g;
    let off = g.mul(t, stride)?;
    let idx = g.add(base, off)?;
    let flat = g.reshape(x, &[-1])?;
    let picked = g.take(flat, idx, 0)?;
    let mut loss = g.neg(picked)?;
    let mut weight = match n.input(2) {
        Some(_) => {
            let w = cx.t(n, 2)?;
            Some(cx.g.take(w, t, 0)?)
        }
        None => None,
    };
    if let Some(k) = keep {
        let mask = cx.g.cast(k, dt)?;
        weight = Some(match weight {
            Some(w) => cx.g.mul(w, mask)?,
            None => mask,
        });
    }
    if let Some(w) = weight {
        loss = cx.g.mul(loss, w)?;
    }
    let all: Vec<isize> = (0..ts.len() as isize).collect();
    match n.string("reduction").as_deref().unwrap_or("mean") {
        "none" => Ok(loss),
        "sum" => cx.g.sum(loss, all, false),
        "mean" => match weight {
            None => cx.g.mean(loss, all, false),
            Some(w) => {
                let s = cx.g.sum(loss, all.clone(), false)?;
                let ws = cx.g.sum(w, all, false)?;
                cx.g.div(s, ws)
            }
        },
        r => Err(n.unsupported(format!("reduction '{r}'"))),
    }
}
