//! Index and layout ops: `GatherElements`, `ScatterElements` (and the deprecated `Scatter`),
//! `GatherND`, `ScatterND` and `TopK` on wgflow's index family (`ops/index/`: deterministic
//! scatters, no atomics), `Trilu` (a constant mask), `Hardmax` and `OneHot` (comparisons
//! with an iota), `DepthToSpace` and `SpaceToDepth` (reshape, transpose, reshape), and
//! `Swish`.

use super::build::{bad, Cx, Node, Val};
use super::ops_shape::norm_axis;
use super::tensor::HostValue;
use crate::ops::index::ScatterReduce;
use crate::{DType, Result, Tensor};

/// `x · sigmoid(alpha · x)`.
pub(super) fn swish(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let a = cx.scalar(n.float("alpha", 1.0) as f64, cx.g.dtype(x)?)?;
    let ax = cx.g.mul(x, a)?;
    let s = cx.g.sigmoid(ax)?;
    cx.g.mul(x, s)
}

/// `Unique` of a value known at import (its output sizes depend on the values; a fed input
/// is made a constant of the import by `InferenceSession`, once per value): the distinct
/// elements (or slices along `axis`), sorted or in order of first appearance, their first
/// indices, each element's index into them, and their counts.
pub(super) fn unique(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.host(n, 0)?;
    let shape = x.shape().to_vec();
    let (keys, kind): (Vec<f64>, Option<DType>) = match &*x {
        HostValue::Ints { v, dtype, .. } => (v.iter().map(|&i| i as f64).collect(), Some(*dtype)),
        HostValue::Floats(t) => (t.to_f32()?.into_iter().map(f64::from).collect(), None),
    };
    let axis = match n.attr_int("axis") {
        Some(a) => Some(norm_axis(a, shape.len())?),
        None => None,
    };
    // Rows: the slices compared, each `inner`-strided; flattened, every element is one.
    let (rows, outer, inner) = match axis {
        Some(a) => (
            shape[a],
            shape[..a].iter().product::<usize>(),
            shape[a + 1..].iter().product::<usize>(),
        ),
        None => (keys.len(), 1, 1),
    };
    let row = |r: usize| -> Vec<f64> {
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                out.push(keys[(o * rows + r) * inner + i]);
            }
        }
        out
    };
    // Rows keyed by their bits (-0 as +0, every NaN one value, as NumPy's unique): one hash
    // lookup per row, not a scan of the distinct rows so far.
    let bits = |r: usize| -> Vec<u64> {
        row(r)
            .into_iter()
            .map(|v| {
                if v == 0.0 {
                    0
                } else if v.is_nan() {
                    f64::NAN.to_bits()
                } else {
                    v.to_bits()
                }
            })
            .collect()
    };
    let mut slot: std::collections::HashMap<Vec<u64>, usize> = std::collections::HashMap::new();
    let mut firsts: Vec<usize> = Vec::new();
    let mut seen: Vec<usize> = Vec::with_capacity(rows);
    for r in 0..rows {
        let k = *slot.entry(bits(r)).or_insert_with(|| {
            firsts.push(r);
            firsts.len() - 1
        });
        seen.push(k);
    }
    // `order[j]`: the position in the output of the j-th distinct row (by first appearance).
    let mut order: Vec<usize> = (0..firsts.len()).collect();
    if n.int("sorted", 1) != 0 {
        let all: Vec<Vec<f64>> = firsts.iter().map(|&f| row(f)).collect();
        let mut by_value: Vec<usize> = (0..firsts.len()).collect();
        by_value.sort_by(|&a, &b| {
            all[a]
                .iter()
                .zip(&all[b])
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (pos, &j) in by_value.iter().enumerate() {
            order[j] = pos;
        }
        firsts = by_value.iter().map(|&j| firsts[j]).collect();
    }
    let inverse: Vec<i64> = seen.iter().map(|&j| order[j] as i64).collect();
    let mut counts = vec![0i64; firsts.len()];
    for &i in &inverse {
        counts[i as usize] += 1;
    }
    let k = firsts.len();
    let mut y = Vec::with_capacity(k * outer * inner);
    let mut y_shape = shape.clone();
    match axis {
        Some(a) => {
            y_shape[a] = k;
            for o in 0..outer {
                for &f in &firsts {
                    for i in 0..inner {
                        y.push(keys[(o * rows + f) * inner + i]);
                    }
                }
            }
        }
        None => {
            y_shape = vec![k];
            y.extend(firsts.iter().map(|&f| keys[f]));
        }
    }
    let y = match kind {
        Some(dtype) => HostValue::Ints {
            shape: y_shape,
            v: y.iter().map(|&v| v as i64).collect(),
            dtype,
        },
        None => {
            if x.dtype() != DType::F32 {
                return Err(n.unsupported(format!("Unique of {}", x.dtype())));
            }
            let t = crate::HostTensor::new(y_shape, y.iter().map(|&v| v as f32).collect())?;
            HostValue::Floats(t)
        }
    };
    let ints = |v: Vec<i64>| -> Val {
        HostValue::Ints {
            shape: vec![v.len()],
            v,
            dtype: DType::I32,
        }
        .into()
    };
    Ok(vec![
        y.into(),
        ints(firsts.iter().map(|&f| f as i64).collect()),
        ints(inverse),
        ints(counts),
    ])
}

/// An i32 constant of `shape` holding `f(index)` for each element's multi-index.
fn index_constant(cx: &mut Cx, shape: &[usize], f: impl Fn(&[usize]) -> i64) -> Result<Tensor> {
    let count = super::limits::count(shape, cx.opts, "an index constant")?;
    let mut v = super::limits::room(count, "an index constant")?;
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..count {
        v.push(f(&idx));
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    let h = HostValue::Ints {
        shape: shape.to_vec(),
        v,
        dtype: DType::I32,
    };
    cx.constant(&h, "index constant")
}

/// `x[..., idx[i], ...]` along `axis` at every position of `idx` (negative indices wrap).
pub(super) fn gather_elements(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let rank = cx.shape(n, 0)?.len();
    let axis = norm_axis(n.int("axis", 0), rank)?;
    let (x, idx) = (cx.t(n, 0)?, cx.t(n, 1)?);
    cx.g.gather_elements(x, idx, axis as isize)
}

/// The `reduction` attribute of the scatters (opset 16 and later; `none` before).
fn reduction(n: &Node) -> Result<ScatterReduce> {
    let r = n.string("reduction").unwrap_or_else(|| "none".into());
    ScatterReduce::ALL
        .into_iter()
        .find(|x| x.name() == r)
        .ok_or_else(|| {
            bad(format!(
                "reduction '{r}' is not one of none, add, mul, max, min"
            ))
        })
}

pub(super) fn scatter_elements(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let rank = cx.shape(n, 0)?.len();
    let axis = norm_axis(n.int("axis", 0), rank)?;
    let reduce = reduction(n)?;
    let (data, idx, upd) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    cx.g.scatter_elements(data, idx, upd, axis as isize, reduce)
}

/// `GatherND`; with `batch_dims = b`, the leading `b` axes are flattened into one and each
/// index row gets its batch's position as a first coordinate, which makes it a plain
/// `gather_nd` of the flattened data.
pub(super) fn gather_nd(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (x, idx) = (cx.t(n, 0)?, cx.t(n, 1)?);
    let b = usize::try_from(n.int("batch_dims", 0)).map_err(|_| bad("negative batch_dims"))?;
    if b == 0 {
        return cx.g.gather_nd(x, idx);
    }
    let (xs, is) = (cx.shape(n, 0)?, cx.shape(n, 1)?);
    if b >= is.len() || b > xs.len() || xs[..b] != is[..b] {
        return Err(bad(format!(
            "batch_dims {b} needs data {xs:?} and indices {is:?} to share their first {b} axes, \
             with an index axis after them"
        )));
    }
    let batch: usize = xs[..b].iter().product();
    let flat = |rest: &[usize]| -> Vec<isize> {
        std::iter::once(batch as isize)
            .chain(rest.iter().map(|&d| d as isize))
            .collect()
    };
    let x = cx.g.reshape(x, &flat(&xs[b..]))?;
    let idx = cx.g.reshape(idx, &flat(&is[b..]))?;
    let idx = match cx.g.dtype(idx)? {
        DType::I32 => idx,
        _ => cx.g.cast(idx, DType::I32)?,
    };
    let pos = cx.g.arange(0.0, batch as f64, 1.0, DType::I32)?;
    let mut ones = vec![1isize; is.len() - b];
    ones.insert(0, batch as isize);
    let pos = cx.g.reshape(pos, &ones)?;
    let mut rows: Vec<usize> = std::iter::once(batch)
        .chain(is[b..].iter().copied())
        .collect();
    if let Some(last) = rows.last_mut() {
        *last = 1;
    }
    let pos = cx.g.broadcast_to(pos, &rows)?;
    let idx = cx.g.concat(&[pos, idx], -1)?;
    let y = cx.g.gather_nd(x, idx)?;
    let mut out: Vec<isize> = xs[..b].iter().map(|&d| d as isize).collect();
    let got = cx.g.probe_shape(y)?.dims().to_vec();
    out.extend(got[1..].iter().map(|&d| d as isize));
    cx.g.reshape(y, &out)
}

pub(super) fn scatter_nd(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let reduce = reduction(n)?;
    let (data, idx, upd) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    cx.g.scatter_nd(data, idx, upd, reduce)
}

/// `TopK`: values and indices along `axis`, sorted (also when `sorted = 0`, which leaves the
/// order to the backend). `k` is an input from opset 10, an attribute before.
pub(super) fn top_k(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let rank = cx.shape(n, 0)?.len();
    let axis = norm_axis(n.int("axis", -1), rank)?;
    let k = match n.input(1) {
        Some(_) => match cx.ints(n, 1)?.as_slice() {
            [k] => *k,
            other => return Err(bad(format!("k must hold one number, got {other:?}"))),
        },
        None => n.int("k", -1),
    };
    let k = usize::try_from(k).map_err(|_| bad(format!("k = {k} is negative")))?;
    let x = cx.t(n, 0)?;
    let (values, indices) = cx.g.top_k(x, k, axis as isize, n.int("largest", 1) != 0)?;
    Ok(vec![values.into(), indices.into()])
}

pub(super) fn trilu(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let s = cx.shape(n, 0)?;
    if s.len() < 2 {
        return Err(bad("needs rank 2 or more"));
    }
    let k = match n.input(1) {
        Some(_) => *cx
            .ints(n, 1)?
            .first()
            .ok_or_else(|| bad("k must be a scalar"))?,
        None => 0,
    };
    let upper = n.int("upper", 1) != 0;
    let (rows, cols) = (s[s.len() - 2], s[s.len() - 1]);
    let keep = index_constant(cx, &[rows, cols], |i| {
        let d = i[1] as i64 - i[0] as i64;
        (if upper { d >= k } else { d <= k }) as i64
    })?;
    let keep = cx.g.cast(keep, DType::Bool)?;
    let x = cx.t(n, 0)?;
    let z = cx.scalar(0.0, cx.g.dtype(x)?)?;
    cx.g.select(keep, x, z)
}

pub(super) fn hardmax(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x0 = cx.t(n, 0)?;
    let s = cx.g.probe_shape(x0)?.dims().to_vec();
    // Before opset 13: over the flattened trailing dimensions from `axis` (default 1).
    let (x, axis) = if n.opset < 13 {
        let a = norm_axis(n.int("axis", 1), s.len())?;
        let (rows, cols): (usize, usize) = (s[..a].iter().product(), s[a..].iter().product());
        (cx.g.reshape(x0, &[rows as isize, cols as isize])?, 1)
    } else {
        (x0, norm_axis(n.int("axis", -1), s.len())?)
    };
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let mut iota_shape = vec![1; xs.len()];
    iota_shape[axis] = xs[axis];
    let iota = index_constant(cx, &iota_shape, |i| i[axis] as i64)?;
    let dt = cx.g.dtype(x)?;
    let am = cx.g.argmax(x, Some(axis as isize), true)?;
    let hit = cx.g.equal(iota, am)?;
    let y = cx.g.cast(hit, dt)?;
    let back: Vec<isize> = s.iter().map(|&d| d as isize).collect();
    cx.g.reshape(y, &back)
}

pub(super) fn one_hot(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let is = cx.shape(n, 0)?;
    let depth = match &*cx.host(n, 1)? {
        HostValue::Ints { v, .. } => v.first().copied(),
        HostValue::Floats(h) => h.to_f32()?.first().map(|&d| d as i64),
    };
    let depth = depth
        .and_then(|d| usize::try_from(d).ok())
        .filter(|&d| d > 0)
        .ok_or_else(|| bad("depth must be a positive scalar"))?;
    if is.is_empty() {
        return Err(bad(crate::onnx::unsupported(
            "OneHot of a scalar index is unsupported (onnxruntime refuses it)",
        )));
    }
    let r = is.len() + 1;
    let axis = norm_axis(n.int("axis", -1), r)?;
    let mut out = is.clone();
    out.insert(axis, depth);
    super::limits::count(&out, cx.opts, "the OneHot output")?;
    let mut iota_shape = vec![1; r];
    iota_shape[axis] = depth;
    let iota = index_constant(cx, &iota_shape, |i| i[axis] as i64)?;
    let mut idx = cx.t(n, 0)?;
    if cx.g.dtype(idx)? != DType::I32 {
        idx = cx.g.cast(idx, DType::I32)?;
    }
    let (zero, d) = (
        cx.scalar(0.0, DType::I32)?,
        cx.scalar(depth as f64, DType::I32)?,
    );
    let values = cx.t(n, 2)?;
    let g = &mut cx.g;
    let neg = g.less(idx, zero)?;
    let wrapped = g.add(idx, d)?;
    let idx = g.select(neg, wrapped, idx)?;
    let idx = g.expand_dims(idx, axis as isize)?;
    let hit = g.equal(idx, iota)?;
    let take = |g: &mut crate::Graph, i: isize| {
        g.slice(values, &[crate::SliceArg::new(Some(i), Some(i + 1), 1)])
    };
    let (off, on) = (take(g, 0)?, take(g, 1)?);
    let (off, on) = (g.reshape(off, &[])?, g.reshape(on, &[])?);
    g.select(hit, on, off)
}

/// The first `lens[b]` steps along the time axis reversed in each batch entry, the rest
/// kept: one gather along time, its index `lens[b] - 1 - t` where `t < lens[b]`, else `t`.
pub(super) fn reverse_sequence(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let s = cx.shape(n, 0)?;
    let r = s.len();
    let (ta, ba) = (
        norm_axis(n.int("time_axis", 0), r)?,
        norm_axis(n.int("batch_axis", 1), r)?,
    );
    if r < 2 || ta == ba || ta > 1 || ba > 1 {
        return Err(bad(format!(
            "time_axis {ta} and batch_axis {ba} must be 0 and 1 of a tensor of rank 2 or more"
        )));
    }
    let mut tshape = vec![1; r];
    tshape[ta] = s[ta];
    let t = index_constant(cx, &tshape, |i| i[ta] as i64)?;
    let mut lens = cx.t(n, 1)?;
    if cx.g.dtype(lens)? != DType::I32 {
        lens = cx.g.cast(lens, DType::I32)?;
    }
    let mut lshape = vec![1isize; r];
    lshape[ba] = s[ba] as isize;
    let one = cx.scalar(1.0, DType::I32)?;
    let x = cx.t(n, 0)?;
    let g = &mut cx.g;
    let lens = g.reshape(lens, &lshape)?;
    let inside = g.less(t, lens)?;
    let last = g.sub(lens, one)?;
    let rev = g.sub(last, t)?;
    let idx = g.select(inside, rev, t)?;
    let idx = g.broadcast_to(idx, &s)?;
    g.gather_elements(x, idx, ta as isize)
}

/// The inverse of a max pooling: every value written at its flat index (MaxPool's
/// `Indices`) in zeros of the unpooled shape (`output_shape`, or the pooling's inverse).
pub(super) fn max_unpool(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let xs = cx.shape(n, 0)?;
    if xs.len() < 3 {
        return Err(bad(format!("X must be [N, C, D1, ...], got {xs:?}")));
    }
    let k = xs.len() - 2;
    let kernel = n
        .ints("kernel_shape")
        .filter(|v| v.len() == k)
        .ok_or_else(|| bad(format!("kernel_shape must have {k} values")))?;
    let strides = n.ints("strides").unwrap_or_else(|| vec![1; k]);
    let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
    if strides.len() != k || pads.len() != 2 * k {
        return Err(bad(format!(
            "strides {strides:?} or pads {pads:?} do not match {k} axes"
        )));
    }
    // Indices are flat positions in the pooling's inverse shape; an `output_shape` larger
    // than that pads it at the end of each axis (the reference's placement).
    let mut unpooled = xs[..2].to_vec();
    for a in 0..k {
        let d = (xs[a + 2] as i64 - 1) * strides[a] - pads[a] - pads[a + k] + kernel[a];
        unpooled.push(usize::try_from(d).map_err(|_| bad(format!("axis {a} unpools to {d}")))?);
    }
    let out: Vec<usize> = match n.input(2) {
        Some(_) => cx
            .ints(n, 2)?
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| bad(format!("negative size {d}"))))
            .collect::<Result<_>>()?,
        None => unpooled.clone(),
    };
    if out.len() != xs.len() || out.iter().zip(&unpooled).any(|(o, u)| o < u) {
        return Err(bad(format!(
            "output_shape {out:?} is smaller than the unpooled shape {unpooled:?}"
        )));
    }
    let cap = |dims: &[usize]| {
        dims.iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&t| t <= cx.opts.max_elements)
            .ok_or_else(|| bad(format!("shape {dims:?} is over the element cap")))
    };
    let total = cap(&unpooled)?;
    cap(&out)?;
    let (x, mut idx) = (cx.t(n, 0)?, cx.t(n, 1)?);
    if cx.g.dtype(idx)? != DType::I32 {
        idx = cx.g.cast(idx, DType::I32)?;
    }
    let dtype = cx.g.dtype(x)?;
    let g = &mut cx.g;
    let flat = g.reshape(x, &[-1])?;
    let idx = g.reshape(idx, &[-1])?;
    let zeros = g.zeros([total], dtype)?;
    let y = g.scatter_elements(zeros, idx, flat, 0, ScatterReduce::None)?;
    let shape: Vec<isize> = unpooled.iter().map(|&d| d as isize).collect();
    let y = g.reshape(y, &shape)?;
    if out == unpooled {
        return Ok(y);
    }
    let pads: Vec<(usize, usize)> = out.iter().zip(&unpooled).map(|(o, u)| (0, o - u)).collect();
    g.pad(y, &pads, crate::PadMode::Constant(0.0))
}

pub(super) fn depth_space(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let s = cx.shape(n, 0)?;
    let b = usize::try_from(n.int("blocksize", 0))
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| bad("blocksize must be positive"))?;
    let [nb, c, h, w] =
        <[usize; 4]>::try_from(s.as_slice()).map_err(|_| bad("needs [N, C, H, W]"))?;
    let i = |v: &[usize]| v.iter().map(|&d| d as isize).collect::<Vec<_>>();
    let x = cx.t(n, 0)?;
    let g = &mut cx.g;
    if n.op == "SpaceToDepth" {
        if h % b != 0 || w % b != 0 {
            return Err(bad(format!("{s:?} does not divide into blocks of {b}")));
        }
        let t = g.reshape(x, &i(&[nb, c, h / b, b, w / b, b]))?;
        let perm = if n.string("mode").as_deref() == Some("CRD") {
            [0, 1, 3, 5, 2, 4]
        } else {
            [0, 3, 5, 1, 2, 4]
        };
        let t = g.transpose(t, &perm)?;
        return g.reshape(t, &i(&[nb, c * b * b, h / b, w / b]));
    }
    if c % (b * b) != 0 {
        return Err(bad(format!("{c} channels do not divide by {b}²")));
    }
    let cc = c / (b * b);
    let crd = n.string("mode").as_deref() == Some("CRD");
    let t = if crd {
        let t = g.reshape(x, &i(&[nb, cc, b, b, h, w]))?;
        g.transpose(t, &[0, 1, 4, 2, 5, 3])?
    } else {
        let t = g.reshape(x, &i(&[nb, b, b, cc, h, w]))?;
        g.transpose(t, &[0, 3, 4, 1, 5, 2])?
    };
    g.reshape(t, &i(&[nb, cc, h * b, w * b]))
}
