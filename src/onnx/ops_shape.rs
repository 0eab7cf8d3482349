//! Movement, shape and constant ops: `Reshape`, `Transpose`, `Slice`, `Concat`, `Gather`, …
//! and the shape arithmetic (`Shape`, `Size`, `ConstantOfShape`, `Range`) that folds on the
//! host when its inputs are known at import.

use super::build::{bad, Cx, Node, Val};
use super::limits::{self, host_vec, MAX_HOST_ELEMENTS};
use super::tensor::{checked_dims, map_dtype, HostValue};
use crate::{DType, HostTensor, PadMode, Result, SliceArg, Tensor};

fn one(t: Tensor) -> Result<Vec<Val>> {
    Ok(vec![Val::T(t)])
}

fn host_ints(shape: Vec<usize>, v: Vec<i64>, dtype: DType) -> Result<Vec<Val>> {
    Ok(vec![HostValue::Ints { shape, v, dtype }.into()])
}

/// `axis` in `-rank..rank` as an index. A scalar has no axis at all: callers index the
/// shape with the result, so rank 0 refuses every axis.
pub(super) fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(bad(format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// The input's integer values when it is an integer host value (for folding on the host).
fn host_ints_of(cx: &mut Cx, n: &Node, i: usize) -> Option<(Vec<usize>, Vec<i64>, DType)> {
    if !cx.known(n, i) {
        return None;
    }
    match &*cx.host(n, i).ok()? {
        HostValue::Ints { shape, v, dtype } => Some((shape.clone(), v.clone(), *dtype)),
        HostValue::Floats(_) => None,
    }
}

pub(super) fn one_val(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    if let Some((s, v, d)) = host_ints_of(cx, n, 0) {
        return host_ints(s, v, d);
    }
    one(cx.t(n, 0)?)
}

pub(super) fn dropout(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    // training_mode must be known at import (false): a fed one could switch dropout on.
    // In training mode only a ratio of 0, known at import, keeps every element.
    if n.opset >= 12 && n.input(2).is_some() && cx.ints(n, 2)?.first().is_some_and(|&m| m != 0) {
        let ratio = match n.input(1) {
            Some(_) => match &*cx.host(n, 1)? {
                HostValue::Floats(h) => h.to_f32()?.first().copied().unwrap_or(0.5),
                HostValue::Ints { v, .. } => v.first().copied().unwrap_or(0) as f32,
            },
            None => 0.5,
        };
        if ratio != 0.0 {
            return Err(n.unsupported("Dropout in training mode with a ratio other than 0"));
        }
    }
    let x = cx.t(n, 0)?;
    let mut out = vec![Val::T(x)];
    if n.n_outputs > 1 {
        let shape = cx.shape(n, 0)?;
        let count = limits::count(&shape, cx.opts, "the mask")?;
        let mut v = host_vec(count, "the mask")?;
        v.resize(count, 1);
        out.push(
            HostValue::Ints {
                shape,
                v,
                dtype: DType::Bool,
            }
            .into(),
        );
    }
    Ok(out)
}

pub(super) fn constant(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    if let Some(t) = n.tensor("value", cx.opts)? {
        return Ok(vec![t.into()]);
    }
    if n.has("value_float") {
        return Ok(vec![HostValue::Floats(HostTensor::scalar(
            n.float("value_float", 0.0),
        ))
        .into()]);
    }
    if let Some(v) = n.floats("value_floats") {
        return Ok(vec![
            HostValue::Floats(HostTensor::new(vec![v.len()], v)?).into()
        ]);
    }
    if n.has("value_int") {
        return host_ints(vec![], vec![n.int("value_int", 0)], DType::I32);
    }
    if let Some(v) = n.ints("value_ints") {
        return host_ints(vec![v.len()], v, DType::I32);
    }
    Err(n.unsupported("a Constant without a tensor, float(s) or int(s) value"))
}

pub(super) fn shape(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let r = s.len() as i64;
    let clamp = |x: i64| (if x < 0 { x + r } else { x }).clamp(0, r) as usize;
    let start = clamp(n.int("start", 0));
    let end = clamp(n.int("end", r)).max(start);
    let v: Vec<i64> = s[start..end].iter().map(|&d| d as i64).collect();
    host_ints(vec![v.len()], v, DType::I32)
}

pub(super) fn size(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    host_ints(vec![], vec![s.iter().product::<usize>() as i64], DType::I32)
}

pub(super) fn constant_of_shape(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let dims = cx.ints(n, 0)?;
    let shape = checked_dims(&dims, cx.opts).map_err(bad)?;
    let count: usize = shape.iter().product();
    let value = n.tensor("value", cx.opts)?;
    if count > MAX_HOST_ELEMENTS {
        // Too large to fold: a broadcast scalar in the graph, which allocates nothing here.
        let (x, dtype) = match &value {
            None => (0.0, DType::F32),
            Some(HostValue::Ints { v, dtype, .. }) => (first(v)? as f64, *dtype),
            Some(HostValue::Floats(h)) => (f64::from(first(&h.to_f32()?)?), h.dtype()),
        };
        if !dtype.is_float() && i32::try_from(x as i64).is_err() && dtype != DType::U32 {
            return Err(bad(format!("value {x} does not fit {dtype}")));
        }
        let one_value = cx.scalar(x, dtype)?;
        return one(cx.g.broadcast_to(one_value, &shape)?);
    }

    Ok(vec![match value {
        None => HostValue::Floats(HostTensor::new(shape, filled(count, 0f32)?)?),
        Some(HostValue::Ints { v, dtype, .. }) => {
            let x = *v
                .first()
                .ok_or_else(|| bad("value must have one element"))?;
            HostValue::Ints {
                shape,
                v: filled(count, x)?,
                dtype,
            }
        }
        Some(HostValue::Floats(h)) => {
            let w = *h
                .words()
                .first()
                .ok_or_else(|| bad("value must have one element"))?;
            HostValue::Floats(HostTensor::from_words(
                shape.into(),
                h.dtype(),
                filled(count, w)?,
            )?)
        }
    }
    .into()])
}

/// `count` copies of `w`, folded on the host.
fn filled<T: Clone>(count: usize, w: T) -> Result<Vec<T>> {
    let mut v = host_vec(count, "ConstantOfShape")?;
    v.resize(count, w);
    Ok(v)
}

pub(super) fn range(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let (a, b, c) = (cx.host(n, 0)?, cx.host(n, 1)?, cx.host(n, 2)?);
    let opts = cx.opts;
    match (&*a, &*b, &*c) {
        (
            HostValue::Ints { v: s, dtype, .. },
            HostValue::Ints { v: l, .. },
            HostValue::Ints { v: d, .. },
        ) => {
            let (s, l, d) = (first(s)?, first(l)?, first(d)?);
            if d == 0 {
                return Err(bad("delta is 0"));
            }
            // In i128: `limit - start` of two int64s can overflow i64.
            let span = (i128::from(l) - i128::from(s)) as f64 / d as f64;
            let count = limits::length(span.ceil().max(0.0), opts, "the Range's length")?;
            let mut v = host_vec(count, "Range")?;
            v.extend((0..count as i64).map(|i| s.wrapping_add(i.wrapping_mul(d))));
            host_ints(vec![count], v, *dtype)
        }
        (HostValue::Floats(s), HostValue::Floats(l), HostValue::Floats(d)) => {
            let (s, l, d) = (s.to_f32()?, l.to_f32()?, d.to_f32()?);
            let (s, l, d) = (first(&s)?, first(&l)?, first(&d)?);
            if !(s.is_finite() && l.is_finite() && d.is_finite()) || d == 0.0 {
                return Err(bad(format!(
                    "start {s}, limit {l} and delta {d} must be finite with a nonzero delta"
                )));
            }
            let span = ((l - s) / d).ceil().max(0.0);
            let count = limits::length(f64::from(span), opts, "the Range's length")?;
            let mut v: Vec<f32> = host_vec(count, "Range")?;
            v.extend((0..count).map(|i| s + i as f32 * d));
            let h = HostTensor::new(vec![count], v)?;
            let h = match a.dtype() {
                DType::F16 => HostTensor::new(
                    vec![count],
                    h.to_f32()?.into_iter().map(crate::f16::from_f32).collect(),
                )?,
                _ => h,
            };
            Ok(vec![HostValue::Floats(h).into()])
        }
        _ => Err(bad(crate::onnx::wrong_dtype(
            "start, limit and delta must share one numeric type",
        ))),
    }
}

fn first<T: Copy>(v: &[T]) -> Result<T> {
    v.first()
        .copied()
        .ok_or_else(|| bad("expected a scalar, got an empty tensor"))
}

pub(super) fn cast(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let to = if n.op == "CastLike" {
        cx.dtype(n, 1)?
    } else {
        let elem = n.int("to", 0) as i32;
        map_dtype(elem, cx.opts).map_err(bad)?
    };
    if let Some((s, v, _)) = host_ints_of(cx, n, 0) {
        if matches!(to, DType::I32 | DType::U32 | DType::Bool) {
            let v = if to == DType::Bool {
                v.into_iter().map(|x| (x != 0) as i64).collect()
            } else {
                v
            };
            return host_ints(s, v, to);
        }
    }
    let x = cx.t(n, 0)?;
    one(cx.g.cast(x, to)?)
}

/// A reinterpretation of each element's bits in another type of the same width: between
/// integer types (held in i32 or u32 and wrapped into the target's range by the import) a
/// cast; between float and integer types unsupported (no bit-level view in the graph).
pub(super) fn bit_cast(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let to_elem = n.int("to", 0) as i32;
    let to = map_dtype(to_elem, cx.opts).map_err(bad)?;
    let from = cx.dtype(n, 0)?;
    let x = cx.t(n, 0)?;
    if from.is_float() || to.is_float() {
        let from_elem = n.input(0).and_then(|i| cx.narrow_elem(i));
        let same = from == to && from_elem.is_none_or(|e| e == to_elem);
        if !same {
            return Err(n.unsupported("BitCast to or from a floating-point type"));
        }
        return one(x);
    }
    one(cx.g.cast(x, to)?)
}

/// Each axis of `axes` cropped (centred; an odd excess leaves the extra element at the end)
/// or zero-padded (likewise) to the size `shape` gives it.
pub(super) fn center_crop_pad(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let target = cx.ints(n, 1)?;
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(a, s.len()))
            .collect::<Result<_>>()?,
        None => (0..s.len()).collect(),
    };
    if target.len() != axes.len() {
        return Err(bad(format!(
            "shape {target:?} does not match axes {axes:?}"
        )));
    }
    let mut x = cx.t(n, 0)?;
    let mut pads = vec![(0usize, 0usize); s.len()];
    for (&a, &t) in axes.iter().zip(&target) {
        let t = usize::try_from(t).map_err(|_| bad(format!("negative size {t}")))?;
        let d = s[a];
        if t < d {
            let start = (d - t) / 2;
            x = if t == 0 {
                return Err(bad(crate::onnx::unsupported(
                    "a crop to size 0 is unsupported",
                )));
            } else {
                let mut args = vec![SliceArg::full(); a];
                args.push(SliceArg::new(
                    Some(start as isize),
                    Some((start + t) as isize),
                    1,
                ));
                cx.g.slice(x, &args)?
            };
        } else if t > d {
            let extra = t - d;
            pads[a] = (extra / 2, extra - extra / 2);
        }
    }
    if pads.iter().any(|&(b, e)| b + e > 0) {
        if pads.iter().map(|&(b, e)| b + e).sum::<usize>() > cx.opts.max_elements {
            return Err(bad("the padded result is over the element cap"));
        }
        x = cx.g.pad(x, &pads, PadMode::Constant(0.0))?;
    }
    one(x)
}

/// ONNX `Reshape`'s target: `0` copies the input's dimension (unless `allowzero`), `-1` is
/// inferred.
fn reshape_dims(from: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let total: usize = from.iter().product();
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        out.push(match d {
            0 if !allowzero => *from.get(i).ok_or_else(|| {
                bad(format!(
                    "shape {spec:?} copies dimension {i}, which the input lacks"
                ))
            })?,
            -1 if infer.is_none() => {
                infer = Some(i);
                1
            }
            d if d >= 0 => d as usize,
            _ => return Err(bad(format!("bad reshape target {spec:?}"))),
        });
    }
    if let Some(i) = infer {
        let known: usize = out.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(bad(format!("cannot reshape {from:?} to {spec:?}")));
        }
        out[i] = total / known;
    }
    if out.iter().product::<usize>() != total {
        return Err(bad(format!(
            "cannot reshape {from:?} ({total} elements) to {spec:?}"
        )));
    }
    Ok(out)
}

fn to_reshape(cx: &mut Cx, n: &Node, dims: Vec<usize>) -> Result<Vec<Val>> {
    if let Some((_, v, d)) = host_ints_of(cx, n, 0) {
        return host_ints(dims, v, d);
    }
    let x = cx.t(n, 0)?;
    let d: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
    one(cx.g.reshape(x, &d)?)
}

pub(super) fn reshape(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let spec = if n.opset < 5 {
        n.ints("shape").unwrap_or_default()
    } else {
        cx.ints(n, 1)?
    };
    let from = cx.shape(n, 0)?;
    let dims = reshape_dims(&from, &spec, n.int("allowzero", 0) != 0)?;
    to_reshape(cx, n, dims)
}

pub(super) fn flatten(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let r = s.len() as i64;
    let a = n.int("axis", 1);
    if a < -r || a > r {
        return Err(bad(format!("axis {a} is out of range for rank {r}")));
    }
    let a = if a < 0 { a + r } else { a } as usize;
    let dims = vec![s[..a].iter().product(), s[a..].iter().product()];
    to_reshape(cx, n, dims)
}

pub(super) fn transpose(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let r = cx.shape(n, 0)?.len();
    let perm: Vec<isize> = match n.ints("perm") {
        Some(p) => p.iter().map(|&p| p as isize).collect(),
        None => (0..r as isize).rev().collect(),
    };
    let x = cx.t(n, 0)?;
    one(cx.g.transpose(x, &perm)?)
}

/// Axes from the attribute (before `since`) or input 1.
fn axes_arg(cx: &mut Cx, n: &Node, since: i64, input: usize) -> Result<Option<Vec<i64>>> {
    if n.opset < since {
        Ok(n.ints("axes"))
    } else {
        cx.opt_ints(n, input)
    }
}

pub(super) fn squeeze(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let axes = axes_arg(cx, n, 13, 1)?;
    let drop: Vec<usize> = match axes {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(a, s.len()))
            .collect::<Result<_>>()?,
        None => (0..s.len()).filter(|&i| s[i] == 1).collect(),
    };
    if let Some(&i) = drop.iter().find(|&&i| s[i] != 1) {
        return Err(bad(format!("cannot squeeze axis {i} of size {}", s[i])));
    }
    let dims = (0..s.len())
        .filter(|i| !drop.contains(i))
        .map(|i| s[i])
        .collect();
    to_reshape(cx, n, dims)
}

pub(super) fn unsqueeze(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let axes = axes_arg(cx, n, 13, 1)?.ok_or_else(|| bad("axes are required"))?;
    let r = s.len() + axes.len();
    let mut ones: Vec<usize> = axes
        .iter()
        .map(|&a| norm_axis(a, r))
        .collect::<Result<_>>()?;
    ones.sort_unstable();
    if ones.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad(format!("repeated axis in {axes:?}")));
    }
    let mut rest = s.iter();
    let dims = (0..r)
        .map(|i| {
            if ones.contains(&i) {
                1
            } else {
                rest.next().copied().unwrap_or(1)
            }
        })
        .collect();
    to_reshape(cx, n, dims)
}

/// Bidirectional (NumPy) broadcast of two shapes.
pub(super) fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() < r {
            1
        } else {
            s[i + s.len() - r]
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            _ => Err(bad(format!("shapes {a:?} and {b:?} do not broadcast"))),
        })
        .collect()
}

pub(super) fn expand(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let spec = cx.ints(n, 1)?;
    let spec = checked_dims(&spec, cx.opts).map_err(bad)?;
    let out = broadcast(&s, &spec)?;
    let x = cx.t(n, 0)?;
    if out == s {
        return one(x);
    }
    one(cx.g.broadcast_to(x, &out)?)
}

pub(super) fn concat(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let count = n.inputs.len();
    let rank = cx.shape(n, 0)?.len();
    let axis = norm_axis(n.int("axis", 0), rank)?;
    let hosts: Option<Vec<_>> = (0..count).map(|i| host_ints_of(cx, n, i)).collect();
    if let Some(hosts) = hosts.filter(|h| h.iter().all(|(s, _, _)| s.len() == rank)) {
        let outer: usize = hosts[0].0[..axis].iter().product();
        let mut shape = hosts[0].0.clone();
        shape[axis] = hosts.iter().map(|(s, _, _)| s[axis]).sum();
        let mut v = Vec::with_capacity(shape.iter().product());
        for o in 0..outer {
            for (s, x, _) in &hosts {
                let chunk: usize = s[axis..].iter().product();
                v.extend_from_slice(&x[o * chunk..(o + 1) * chunk]);
            }
        }
        return host_ints(shape, v, hosts[0].2);
    }
    let xs: Vec<Tensor> = (0..count).map(|i| cx.t(n, i)).collect::<Result<_>>()?;
    one(cx.g.concat(&xs, axis as isize)?)
}

/// `x[..., start:stop, ...]` along `axis` (step 1).
fn slice_axis(cx: &mut Cx, x: Tensor, axis: usize, start: usize, stop: usize) -> Result<Tensor> {
    let mut args = vec![SliceArg::full(); axis];
    args.push(SliceArg::new(Some(start as isize), Some(stop as isize), 1));
    cx.g.slice(x, &args)
}

pub(super) fn split(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let axis = norm_axis(n.int("axis", 0), s.len())?;
    let dim = s[axis];
    let sizes: Vec<usize> = match if n.opset < 13 {
        n.ints("split")
    } else {
        cx.opt_ints(n, 1)?
    } {
        Some(v) => v
            .iter()
            .map(|&x| usize::try_from(x).map_err(|_| bad("negative split")))
            .collect::<Result<_>>()?,
        None => {
            let parts = if n.opset >= 18 {
                // At 18 the sizes are the input or `num_outputs`, which names the outputs.
                let p = n
                    .attr_int("num_outputs")
                    .ok_or_else(|| bad("Split at opset 18 needs the split input or num_outputs"))?;
                if usize::try_from(p).ok() != Some(n.n_outputs) {
                    return Err(bad(format!(
                        "num_outputs is {p} but the node has {} outputs",
                        n.n_outputs
                    )));
                }
                n.n_outputs
            } else {
                n.n_outputs
            };
            let each = dim.div_ceil(parts.max(1));
            (0..parts)
                .map(|i| each.min(dim.saturating_sub(i * each)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(bad(format!("split sizes {sizes:?} do not add up to {dim}")));
    }
    let x = cx.t(n, 0)?;
    let mut start = 0;
    let mut out = Vec::new();
    for len in sizes {
        out.push(Val::T(slice_axis(cx, x, axis, start, start + len)?));
        start += len;
    }
    Ok(out)
}

pub(super) fn slice(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let (starts, ends, axes, steps) = if n.opset < 10 {
        let starts = n.ints("starts").ok_or_else(|| bad("starts are required"))?;
        let ends = n.ints("ends").ok_or_else(|| bad("ends are required"))?;
        (starts, ends, n.ints("axes"), None)
    } else {
        (
            cx.ints(n, 1)?,
            cx.ints(n, 2)?,
            cx.opt_ints(n, 3)?,
            cx.opt_ints(n, 4)?,
        )
    };
    if starts.len() != ends.len() {
        return Err(bad("starts and ends differ in length"));
    }
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    let mut args = vec![SliceArg::full(); s.len()];
    for (k, &a) in axes.iter().enumerate() {
        let a = norm_axis(a, s.len())?;
        let (d, step) = (
            s[a] as i64,
            *steps.get(k).ok_or_else(|| bad("steps too short"))?,
        );
        if step == 0 {
            return Err(bad("step 0"));
        }
        let fix = |x: i64| if x < 0 { x.saturating_add(d) } else { x };
        let (mut b, mut e) = (
            fix(starts[k]),
            fix(*ends.get(k).ok_or_else(|| bad("ends too short"))?),
        );
        if step > 0 {
            b = b.clamp(0, d);
            e = e.clamp(0, d);
        } else {
            b = b.clamp(0, (d - 1).max(0));
            e = e.clamp(-1, d - 1);
        }
        // Python reads a stop of -1 as "the last element"; ONNX's -1 is "before the first".
        let stop = if e < 0 { None } else { Some(e as isize) };
        args[a] = SliceArg::new(Some(b as isize), stop, step as isize);
    }
    let x = cx.t(n, 0)?;
    one(cx.g.slice(x, &args)?)
}

pub(super) fn pad(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let r = s.len();
    let mode = n.string("mode").unwrap_or_else(|| "constant".into());
    let (pads, value) = if n.opset < 11 {
        (
            n.ints("pads").ok_or_else(|| bad("pads are required"))?,
            n.float("value", 0.0) as f64,
        )
    } else {
        let value = match n.input(2) {
            Some(_) => match &*cx.host(n, 2)? {
                HostValue::Ints { v, .. } => v.first().copied().unwrap_or(0) as f64,
                HostValue::Floats(h) => h.to_f32()?.first().copied().unwrap_or(0.0) as f64,
            },
            None => 0.0,
        };
        (cx.ints(n, 1)?, value)
    };
    let axes: Vec<usize> = match if n.opset >= 18 {
        cx.opt_ints(n, 3)?
    } else {
        None
    } {
        Some(a) => a.iter().map(|&a| norm_axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(bad(format!(
            "pads {pads:?} do not match {} axes",
            axes.len()
        )));
    }
    let mut before = vec![0i64; r];
    let mut after = vec![0i64; r];
    for (k, &a) in axes.iter().enumerate() {
        before[a] = pads[k];
        after[a] = pads[k + axes.len()];
    }
    let mut x = cx.t(n, 0)?;
    // Negative pads crop first.
    if before.iter().chain(&after).any(|&p| p < 0) {
        let args: Vec<SliceArg> = (0..r)
            .map(|i| {
                let b = (-before[i]).max(0) as isize;
                let e = s[i] as isize - (-after[i]).max(0) as isize;
                SliceArg::new(Some(b), Some(e.max(b)), 1)
            })
            .collect();
        x = cx.g.slice(x, &args)?;
    }
    let pairs: Vec<(usize, usize)> = (0..r)
        .map(|i| (before[i].max(0) as usize, after[i].max(0) as usize))
        .collect();
    if pairs.iter().all(|&(b, e)| b == 0 && e == 0) {
        return one(x);
    }
    match mode.as_str() {
        "constant" => one(cx.g.pad(x, &pairs, PadMode::Constant(value))?),
        "reflect" => one(cx.g.pad(x, &pairs, PadMode::Reflect)?),
        // Each axis as a cyclic gather: position i reads (i - before) mod size.
        "wrap" => {
            for (a, &(b, e)) in pairs.iter().enumerate() {
                let d = cx.g.probe_shape(x)?.dims()[a];
                if b + e == 0 {
                    continue;
                }
                if d == 0 {
                    return Err(bad("wrap padding of an empty axis"));
                }
                let total = d
                    .checked_add(b)
                    .and_then(|t| t.checked_add(e))
                    .filter(|&t| t <= cx.opts.max_elements)
                    .ok_or_else(|| bad("pads over the element cap"))?;
                let idx: Vec<i32> = (0..total)
                    .map(|i| (i as i64 - b as i64).rem_euclid(d as i64) as i32)
                    .collect();
                let idx = cx.g.constant(HostTensor::new(vec![total], idx)?)?;
                x = cx.g.take(x, idx, a as isize)?;
            }
            one(x)
        }
        "edge" => {
            for (a, &(b, e)) in pairs.iter().enumerate() {
                let d = cx.g.probe_shape(x)?.dims()[a];
                if b + e == 0 {
                    continue;
                }
                if d == 0 {
                    return Err(bad("edge padding of an empty axis"));
                }
                let mut parts = Vec::new();
                for (count, at) in [(b, 0), (0, 0), (e, d - 1)] {
                    if count == 0 && parts.len() != 1 {
                        parts.push(None);
                        continue;
                    }
                    parts.push(Some((count, at)));
                }
                let mut xs = Vec::new();
                for (k, p) in parts.into_iter().enumerate() {
                    match (k, p) {
                        (1, _) => xs.push(x),
                        (_, Some((count, at))) => {
                            let edge = slice_axis(cx, x, a, at, at + 1)?;
                            let mut shape = cx.g.probe_shape(x)?.dims().to_vec();
                            shape[a] = count;
                            xs.push(cx.g.broadcast_to(edge, &shape)?);
                        }
                        _ => {}
                    }
                }
                x = cx.g.concat(&xs, a as isize)?;
            }
            one(x)
        }
        m => Err(n.unsupported(format!("pad mode '{m}'"))),
    }
}

pub(super) fn gather(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let s = cx.shape(n, 0)?;
    let axis = norm_axis(n.int("axis", 0), s.len())?;
    if let (Some((ds, dv, dt)), Some((is, iv, _))) =
        (host_ints_of(cx, n, 0), host_ints_of(cx, n, 1))
    {
        let (outer, inner): (usize, usize) =
            (ds[..axis].iter().product(), ds[axis + 1..].iter().product());
        let d = ds[axis] as i64;
        let mut v = Vec::with_capacity(outer * iv.len() * inner);
        for o in 0..outer {
            for &i in &iv {
                let i = if i < 0 { i + d } else { i };
                if !(0..d).contains(&i) {
                    return Err(bad(format!("index {i} is out of range for size {d}")));
                }
                let base = (o * ds[axis] + i as usize) * inner;
                v.extend_from_slice(&dv[base..base + inner]);
            }
        }
        let shape = [&ds[..axis], &is[..], &ds[axis + 1..]].concat();
        return host_ints(shape, v, dt);
    }
    let (x, i) = (cx.t(n, 0)?, cx.t(n, 1)?);
    one(cx.g.take(x, i, axis as isize)?)
}

pub(super) fn tile(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let rank = cx.shape(n, 0)?.len();
    let reps = cx.ints(n, 1)?;
    if rank == 0 || reps.len() != rank {
        return Err(bad(format!(
            "repeats has {} values for an input of rank {rank} (a scalar cannot be tiled)",
            reps.len()
        )));
    }
    let reps: Vec<usize> = reps
        .iter()
        .map(|&r| usize::try_from(r).map_err(|_| bad("negative repeat")))
        .collect::<Result<_>>()?;
    let x = cx.t(n, 0)?;
    one(cx.g.tile(x, &reps)?)
}
