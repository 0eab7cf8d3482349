//! Ops computed at import on the host: those whose output size depends on input values
//! (`NonZero`, `Compress`'s condition, `NonMaxSuppression`), which must be known at import
//! (`InferenceSession` makes a fed one a constant of a per-value import, as for `Unique`),
//! and generators of constants (`HannWindow`, `HammingWindow`, `BlackmanWindow`, `EyeLike`,
//! `OptionalHasElement` of an absent input).

use super::build::{bad, Cx, Node, Val};
use super::ops_shape::norm_axis;
use super::tensor::{map_dtype, HostValue};
use crate::{DType, HostTensor, Result};

/// Tensors are never absent once imported: only an input left out has no element.
pub(super) fn optional_has_element(_: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    Ok(vec![ints(
        vec![],
        vec![n.input(0).is_some() as i64],
        DType::Bool,
    )])
}

pub(super) fn optional_get_element(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    cx.t(n, 0).map(|t| vec![Val::T(t)])
}

fn ints(shape: Vec<usize>, v: Vec<i64>, dtype: DType) -> Val {
    HostValue::Ints { shape, v, dtype }.into()
}

/// A value known at import as f64s (ints exactly, floats widened).
fn numbers(h: &HostValue) -> Result<Vec<f64>> {
    Ok(match h {
        HostValue::Ints { v, .. } => v.iter().map(|&x| x as f64).collect(),
        HostValue::Floats(t) => t.to_f32()?.into_iter().map(f64::from).collect(),
    })
}

/// The indices of the non-zero elements, `[rank, count]`, in row-major order.
pub(super) fn non_zero(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.host(n, 0)?;
    let shape = x.shape().to_vec();
    let v = numbers(&x)?;
    let hits: Vec<usize> = (0..v.len()).filter(|&i| v[i] != 0.0).collect();
    let rank = shape.len();
    let mut out = vec![0i64; rank * hits.len()];
    for (k, &flat) in hits.iter().enumerate() {
        let mut rem = flat;
        for a in (0..rank).rev() {
            out[a * hits.len() + k] = (rem % shape[a]) as i64;
            rem /= shape[a];
        }
    }
    Ok(vec![ints(vec![rank, hits.len()], out, DType::I32)])
}

/// The slices along `axis` (or the elements of the flattened input) whose condition is true;
/// positions past the condition's length are dropped.
pub(super) fn compress(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let cond = numbers(&*cx.host(n, 1)?)?;
    let shape = cx.shape(n, 0)?;
    let mut x = cx.t(n, 0)?;
    let axis = match n.attr_int("axis") {
        Some(a) => norm_axis(a, shape.len())?,
        None => {
            x = cx.g.reshape(x, &[-1])?;
            0
        }
    };
    let len = cx.g.probe_shape(x)?.dims()[axis];
    if cond.len() > len {
        return Err(bad(format!(
            "the condition has {} values for an axis of {len}",
            cond.len()
        )));
    }
    let keep: Vec<i32> = (0..cond.len())
        .filter(|&i| cond[i] != 0.0)
        .map(|i| i as i32)
        .collect();
    let count = keep.len();
    let idx = cx.g.constant(HostTensor::new(vec![count], keep)?)?;
    Ok(vec![Val::T(cx.g.take(x, idx, axis as isize)?)])
}

/// One box as `(y1, x1, y2, x2)` with the corners ordered, from either box format.
fn corners(b: &[f64], center: bool) -> [f64; 4] {
    if center {
        let (xc, yc, w, h) = (b[0], b[1], b[2], b[3]);
        [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
    } else {
        [
            b[0].min(b[2]),
            b[1].min(b[3]),
            b[0].max(b[2]),
            b[1].max(b[3]),
        ]
    }
}

/// Whether box `a` suppresses box `b`: intersection over union above `threshold`
/// (onnxruntime's rule: boxes of no area never suppress).
fn suppresses(a: &[f64; 4], b: &[f64; 4], threshold: f64) -> bool {
    let area = |c: &[f64; 4]| (c[2] - c[0]) * (c[3] - c[1]);
    let (aa, ab) = (area(a), area(b));
    if aa <= 0.0 || ab <= 0.0 {
        return false;
    }
    let h = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let w = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = h * w;
    inter / (aa + ab - inter) > threshold
}

/// Greedy non-maximum suppression per batch and class, as onnxruntime does it: candidates
/// above the score threshold by descending score (ties by index), each kept unless a kept
/// box overlaps it by more than the IoU threshold. `[count, 3]` of (batch, class, box).
pub(super) fn non_max_suppression(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let boxes_h = cx.host(n, 0)?;
    let scores_h = cx.host(n, 1)?;
    let (bs, ss) = (boxes_h.shape().to_vec(), scores_h.shape().to_vec());
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(bad(format!(
            "boxes {bs:?} and scores {ss:?} must be [batch, boxes, 4] and [batch, classes, boxes]"
        )));
    }
    let (boxes, scores) = (numbers(&boxes_h)?, numbers(&scores_h)?);
    let scalar = |cx: &mut Cx, i: usize| -> Result<Option<f64>> {
        match n.input(i) {
            Some(_) => Ok(numbers(&*cx.host(n, i)?)?.first().copied()),
            None => Ok(None),
        }
    };
    let max_out = scalar(cx, 2)?.unwrap_or(0.0).max(0.0) as usize;
    let iou = scalar(cx, 3)?.unwrap_or(0.0);
    let score_min = scalar(cx, 4)?;
    let center = match n.int("center_point_box", 0) {
        0 => false,
        1 => true,
        c => return Err(bad(format!("center_point_box {c} is not 0 or 1"))),
    };
    let (batches, classes, count) = (ss[0], ss[1], ss[2]);
    let mut out = Vec::new();
    for b in 0..batches {
        let boxes_b: Vec<[f64; 4]> = (0..count)
            .map(|i| corners(&boxes[(b * count + i) * 4..][..4], center))
            .collect();
        for c in 0..classes {
            let s = &scores[(b * classes + c) * count..][..count];
            let mut order: Vec<usize> = (0..count)
                .filter(|&i| score_min.is_none_or(|m| s[i] > m))
                .collect();
            order.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in order {
                if kept.len() >= max_out {
                    break;
                }
                if kept
                    .iter()
                    .all(|&k| !suppresses(&boxes_b[k], &boxes_b[i], iou))
                {
                    kept.push(i);
                    out.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    let rows = out.len() / 3;
    Ok(vec![ints(vec![rows, 3], out, DType::I32)])
}

/// Hann, Hamming and Blackman windows of a size known at import (periodic by default).
pub(super) fn window(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let size = numbers(&*cx.host(n, 0)?)?
        .first()
        .copied()
        .ok_or_else(|| bad("size must be a scalar"))?;
    if !(0.0..=cx.opts.max_elements as f64).contains(&size) {
        return Err(bad(format!(
            "size {size} is negative or over the {} elements allowed (ImportOptions::max_elements)",
            cx.opts.max_elements
        )));
    }
    let size = size as usize;
    let denom = if n.int("periodic", 1) != 0 {
        size as f64
    } else {
        size as f64 - 1.0
    };
    let tau = std::f64::consts::TAU;
    let w: Vec<f32> = (0..size)
        .map(|i| {
            let x = tau * i as f64 / denom;
            (match n.op {
                "HannWindow" => 0.5 - 0.5 * x.cos(),
                "HammingWindow" => 25.0 / 46.0 - 21.0 / 46.0 * x.cos(),
                _ => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
            }) as f32
        })
        .collect();
    let h = HostTensor::new(vec![size], w)?;
    float_output(cx, n, "output_datatype", h)
}

/// `h` (f32) as `to` (f32 or f16).
fn in_float(h: HostTensor, to: DType) -> Result<HostTensor> {
    if to != DType::F16 {
        return Ok(h);
    }
    let v = h.to_f32()?.into_iter().map(crate::f16::from_f32).collect();
    HostTensor::new(h.dims().to_vec(), v)
}

/// `h` (f32) in the float type attribute `attr` names (f32 by default).
fn float_output(cx: &Cx, n: &Node, attr: &str, h: HostTensor) -> Result<Vec<Val>> {
    let to = map_dtype(n.int(attr, 1) as i32, cx.opts).map_err(bad)?;
    Ok(vec![match to {
        DType::F32 | DType::F16 => HostValue::Floats(in_float(h, to)?).into(),
        other => {
            let v = h.to_f32()?.into_iter().map(|x| x as i64).collect();
            ints(h.dims().to_vec(), v, other)
        }
    }])
}

/// Ones on diagonal `k` of a 2-D shape, in the input's type or the `dtype` attribute's.
pub(super) fn eye_like(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let shape = cx.shape(n, 0)?;
    let [r, c] = shape[..] else {
        return Err(bad(format!("the input must be 2-D, got {shape:?}")));
    };
    if r.saturating_mul(c) > cx.opts.max_elements {
        return Err(bad(format!(
            "{r} x {c} is over the {} elements allowed (ImportOptions::max_elements)",
            cx.opts.max_elements
        )));
    }
    let k = n.int("k", 0);
    let dtype = match n.attr_int("dtype") {
        Some(e) => map_dtype(e as i32, cx.opts).map_err(bad)?,
        None => cx.dtype(n, 0)?,
    };
    let mut v = vec![0i64; r * c];
    for i in 0..r {
        let j = i as i64 + k;
        if (0..c as i64).contains(&j) {
            v[i * c + j as usize] = 1;
        }
    }
    Ok(vec![match dtype {
        DType::F32 | DType::F16 => {
            let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            HostValue::Floats(in_float(HostTensor::new(vec![r, c], f)?, dtype)?).into()
        }
        d => ints(vec![r, c], v, d),
    }])
}
