//! Normalisations: `BatchNormalization`, `LayerNormalization`, `RMSNormalization`, `InstanceNormalization`,
//! `GroupNormalization`, `LpNormalization`, `LRN`, `MeanVarianceNormalization`, composed from reductions and elementwise ops.

use super::build::{bad, Cx, Node, Val};
use super::ops_shape::norm_axis;
use super::tensor::HostValue;
use crate::{DType, HostTensor, Result, Tensor};

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

pub(super) fn layer_norm(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
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

pub(super) fn rms_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
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
    let c = cx.g.probe_shape(p)?.numel();
    let mut s = vec![1isize; r];
    s[1] = c as isize;
    cx.g.reshape(p, &s)
}

pub(super) fn instance_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
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
pub(super) fn group_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let shape = cx.g.probe_shape(x)?.dims().to_vec();
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
    if cx.g.probe_shape(s)?.numel() == c {
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

pub(super) fn lp_norm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
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
pub(super) fn lrn(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let shape = cx.g.probe_shape(x)?.dims().to_vec();
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
pub(super) fn mvn(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
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

pub(super) fn batch_norm(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let training = n.opset >= 14 && n.int("training_mode", 0) != 0;
    if !training && n.n_outputs == 1 {
        if let Some(y) = affine_batch_norm(cx, n)? {
            return Ok(vec![y.into()]);
        }
    }
    let (x, s, b, m, v) = (
        cx.t(n, 0)?,
        cx.t(n, 1)?,
        cx.t(n, 2)?,
        cx.t(n, 3)?,
        cx.t(n, 4)?,
    );
    let eps = n.float("epsilon", 1e-5);
    // Training mode (opset 14+: the attribute; before, extra outputs meant training with
    // saved statistics, which is not supported): normalise with the batch's own mean and
    // (population) variance over every axis but 1, and return the running statistics
    // `running·momentum + batch·(1 - momentum)`.
    if !training {
        if n.n_outputs > 1 {
            return Err(n.unsupported("BatchNormalization's training outputs before opset 14"));
        }
        return Ok(vec![cx.g.batch_norm(x, m, v, s, b, eps)?.into()]);
    }
    let r = cx.g.probe_shape(x)?.rank();
    if r < 2 {
        return Err(bad(format!("input of rank {r} (want N, C, …)")));
    }
    let axes: Vec<isize> = (0..r as isize).filter(|&a| a != 1).collect();
    let dt = cx.g.dtype(x)?;
    let bm = cx.g.mean(x, axes.clone(), false)?;
    let bv = cx.g.var(x, axes, 0, false)?;
    let y = cx.g.batch_norm(x, bm, bv, s, b, eps)?;
    let momentum = n.float("momentum", 0.9) as f64;
    let (keep, take) = (cx.scalar(momentum, dt)?, cx.scalar(1.0 - momentum, dt)?);
    let mut blend = |run: Tensor, batch: Tensor| -> Result<Tensor> {
        let a = cx.g.mul(run, keep)?;
        let c = cx.g.mul(batch, take)?;
        cx.g.add(a, c)
    };
    let (rm, rv) = (blend(m, bm)?, blend(v, bv)?);
    Ok(vec![y.into(), rm.into(), rv.into()])
}

/// Inference normalization with constant statistics (one not folded into a convolution,
/// e.g. DenseNet's before each one) as `x · scale + shift` per channel, the two vectors
/// computed at import in float64 (as onnxruntime folds it): two elementwise ops instead of
/// four. `None` when a parameter is not a constant f32 vector of the channel count.
fn affine_batch_norm(cx: &mut Cx, n: &Node) -> Result<Option<Tensor>> {
    let dims = cx.shape(n, 0)?;
    if dims.len() < 2 || cx.dtype(n, 0)? != DType::F32 || (1..5).any(|i| !cx.known(n, i)) {
        return Ok(None);
    }
    let c = dims[1];
    let names: Vec<&str> = (1..5).map(|i| n.req(i)).collect::<Result<_>>()?;
    let Some(p) = cx.constant_f32s(&names) else {
        return Ok(None);
    };
    if p.iter().any(|(_, v)| v.len() != c) {
        return Ok(None);
    }
    let eps = n.float("epsilon", 1e-5) as f64;
    let (s, b, m, v) = (&p[0].1, &p[1].1, &p[2].1, &p[3].1);
    let scale: Vec<f64> = (0..c)
        .map(|i| s[i] as f64 / (v[i] as f64 + eps).sqrt())
        .collect();
    let shift: Vec<f32> = (0..c)
        .map(|i| (b[i] as f64 - m[i] as f64 * scale[i]) as f32)
        .collect();
    let scale: Vec<f32> = scale.iter().map(|&v| v as f32).collect();
    let mut shape = vec![1; dims.len() - 1];
    shape[0] = c;
    let x = cx.t(n, 0)?;
    let per_channel = |v: Vec<f32>| HostTensor::new(shape.clone(), v).map(HostValue::Floats);
    let scale = cx.constant(&per_channel(scale)?, "batch_norm_scale")?;
    let shift = cx.constant(&per_channel(shift)?, "batch_norm_shift")?;
    let y = cx.g.mul(x, scale)?;
    Ok(Some(cx.g.add(y, shift)?))
}
