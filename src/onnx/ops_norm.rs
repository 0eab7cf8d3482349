//! Normalisations: `LayerNormalization`, `RMSNormalization`, `InstanceNormalization`,
//! `GroupNormalization`, `LpNormalization`, `LRN`, `MeanVarianceNormalization`, composed from reductions and elementwise ops.

use super::build::{bad, Cx, Node, Val};
use super::ops_shape::norm_axis;
use crate::{Result, Tensor};

pub(super) fn translate(cx: &mut Cx, n: &Node) -> Option<Result<Vec<Val>>> {
    Some(match n.op {
        "LayerNormalization" => layer_norm(cx, n),
        "RMSNormalization" => rms_norm(cx, n).map(|t| vec![t.into()]),
        "InstanceNormalization" => instance_norm(cx, n).map(|t| vec![t.into()]),
        "GroupNormalization" => group_norm(cx, n).map(|t| vec![t.into()]),
        "LpNormalization" => lp_norm(cx, n).map(|t| vec![t.into()]),
        "LRN" => lrn(cx, n).map(|t| vec![t.into()]),
        "MeanVarianceNormalization" => mvn(cx, n).map(|t| vec![t.into()]),
        _ => return None,
    })
}

/// `(x - mean) / sqrt(var + eps)` over `axes`, with the mean and `1 / sqrt(var + eps)`.
fn normalize(cx: &mut Cx, x: Tensor, axes: Vec<isize>, eps: f32) -> Result<[Tensor; 3]> {
    let dt = cx.g.dtype(x)?;
    let e = cx.scalar(eps as f64, dt)?;
    let one = cx.scalar(1.0, dt)?;
    let g = &mut cx.g;
    let m = g.mean(x, axes.clone(), true)?;
    let d = g.sub(x, m)?;
    let sq = g.mul(d, d)?;
    let v = g.mean(sq, axes, true)?;
    let ve = g.add(v, e)?;
    let sd = g.sqrt(ve)?;
    let inv = g.div(one, sd)?;
    Ok([g.div(d, sd)?, m, inv])
}

fn layer_norm(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.t(n, 0)?;
    let r = cx.g.shape(x)?.rank();
    let axis = norm_axis(n.int("axis", -1), r)?;
    let [mut y, mean, inv] = normalize(
        cx,
        x,
        (axis as isize..r as isize).collect(),
        n.float("epsilon", 1e-5),
    )?;
    let scale = cx.t(n, 1)?;
    y = cx.g.mul(y, scale)?;
    if let Some(b) = cx.opt_t(n, 2)? {
        y = cx.g.add(y, b)?;
    }
    Ok(vec![y.into(), mean.into(), inv.into()])
}

fn rms_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.shape(x)?.rank();
    let axis = norm_axis(n.int("axis", -1), r)?;
    let dt = cx.g.dtype(x)?;
    let e = cx.scalar(n.float("epsilon", 1e-5) as f64, dt)?;
    let scale = cx.t(n, 1)?;
    let g = &mut cx.g;
    let sq = g.mul(x, x)?;
    let ms = g.mean(sq, (axis as isize..r as isize).collect::<Vec<_>>(), true)?;
    let me = g.add(ms, e)?;
    let rms = g.sqrt(me)?;
    let y = g.div(x, rms)?;
    g.mul(y, scale)
}

/// `[1, C, 1, ...]` for a per-channel parameter of a rank-`r` input.
fn per_channel(cx: &mut Cx, p: Tensor, r: usize) -> Result<Tensor> {
    let c = cx.g.shape(p)?.numel();
    let mut s = vec![1isize; r];
    s[1] = c as isize;
    cx.g.reshape(p, &s)
}

fn instance_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.shape(x)?.rank();
    if r < 3 {
        return Err(bad("needs [N, C, D1, ...]"));
    }
    let [y, _, _] = normalize(cx, x, (2..r as isize).collect(), n.float("epsilon", 1e-5))?;
    let (s, b) = (cx.t(n, 1)?, cx.t(n, 2)?);
    let (s, b) = (per_channel(cx, s, r)?, per_channel(cx, b, r)?);
    let y = cx.g.mul(y, s)?;
    cx.g.add(y, b)
}

/// Over groups of channels; the scale and bias are per channel (opset 21) or, before, per
/// group.
fn group_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let shape = cx.g.shape(x)?.dims().to_vec();
    let r = shape.len();
    let groups = usize::try_from(n.int("num_groups", 0))
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| bad("num_groups must be positive"))?;
    if r < 3 || shape[1] % groups != 0 {
        return Err(bad(format!(
            "cannot split {shape:?} into {groups} channel groups"
        )));
    }
    let (nb, c) = (shape[0], shape[1]);
    let rest: usize = shape[2..].iter().product();
    let xg = cx.g.reshape(
        x,
        &[nb as isize, groups as isize, ((c / groups) * rest) as isize],
    )?;
    let [yg, _, _] = normalize(cx, xg, vec![2], n.float("epsilon", 1e-5))?;
    let (s, b) = (cx.t(n, 1)?, cx.t(n, 2)?);
    let back: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    if cx.g.shape(s)?.numel() == c {
        let y = cx.g.reshape(yg, &back)?;
        let (s, b) = (per_channel(cx, s, r)?, per_channel(cx, b, r)?);
        let y = cx.g.mul(y, s)?;
        return cx.g.add(y, b);
    }
    let s = cx.g.reshape(s, &[1, groups as isize, 1])?;
    let b = cx.g.reshape(b, &[1, groups as isize, 1])?;
    let y = cx.g.mul(yg, s)?;
    let y = cx.g.add(y, b)?;
    cx.g.reshape(y, &back)
}

fn lp_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.shape(x)?.rank();
    let axis = norm_axis(n.int("axis", -1), r)? as isize;
    let g = &mut cx.g;
    let norm = match n.int("p", 2) {
        1 => {
            let a = g.abs(x)?;
            g.sum(a, axis, true)?
        }
        2 => {
            let sq = g.mul(x, x)?;
            let s = g.sum(sq, axis, true)?;
            g.sqrt(s)?
        }
        p => return Err(n.unsupported(format!("p = {p} (only 1 and 2)"))),
    };
    // A zero norm leaves its (zero) vector as it is, as the reference does.
    let dt = g.dtype(x)?;
    let zero = cx.scalar(0.0, dt)?;
    let g = &mut cx.g;
    let is_zero = g.equal(norm, zero)?;
    let y = g.div(x, norm)?;
    g.select(is_zero, x, y)
}

/// Local response normalisation across channels: `x / (bias + alpha / size * Σ x²)^beta`,
/// the sum over a window of `size` channels (zero-padded), as shifted slices of `x²`.
fn lrn(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let shape = cx.g.shape(x)?.dims().to_vec();
    let size = usize::try_from(n.int("size", 0))
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| bad("size must be positive"))?;
    if shape.len() < 3 {
        return Err(bad("needs [N, C, D1, ...]"));
    }
    let c = shape[1];
    let dt = cx.g.dtype(x)?;
    let (alpha, beta, bias) = (
        n.float("alpha", 1e-4) as f64,
        n.float("beta", 0.75) as f64,
        n.float("bias", 1.0) as f64,
    );
    let (a, b, k) = (
        cx.scalar(alpha / size as f64, dt)?,
        cx.scalar(-beta, dt)?,
        cx.scalar(bias, dt)?,
    );
    let g = &mut cx.g;
    let sq = g.mul(x, x)?;
    let mut pads = vec![(0, 0); shape.len()];
    pads[1] = ((size - 1) / 2, (size - 1).div_ceil(2));
    let padded = g.pad(sq, &pads, crate::PadMode::Constant(0.0))?;
    let mut sum: Option<Tensor> = None;
    for i in 0..size {
        let part = g.slice(
            padded,
            &[
                crate::SliceArg::full(),
                crate::SliceArg::new(Some(i as isize), Some((i + c) as isize), 1),
            ],
        )?;
        sum = Some(match sum {
            None => part,
            Some(s) => g.add(s, part)?,
        });
    }
    let sum = sum.ok_or_else(|| bad("empty window"))?;
    let scaled = g.mul(sum, a)?;
    let base = g.add(scaled, k)?;
    let factor = g.pow(base, b)?;
    g.mul(x, factor)
}

/// `(x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9)` over `axes` (default `[0, 2, 3]`), the
/// reference's formula (the epsilon is added to the deviation, not the variance).
fn mvn(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.shape(x)?.rank();
    let axes: Vec<isize> = n
        .ints("axes")
        .unwrap_or_else(|| vec![0, 2, 3])
        .iter()
        .map(|&a| norm_axis(a, r).map(|a| a as isize))
        .collect::<Result<_>>()?;
    let dt = cx.g.dtype(x)?;
    let e = cx.scalar(1e-9, dt)?;
    let g = &mut cx.g;
    let m = g.mean(x, axes.clone(), true)?;
    let sq = g.mul(x, x)?;
    let msq = g.mean(sq, axes, true)?;
    let m2 = g.mul(m, m)?;
    let v = g.sub(msq, m2)?;
    let sd = g.sqrt(v)?;
    let den = g.add(sd, e)?;
    let d = g.sub(x, m)?;
    g.div(d, den)
}
