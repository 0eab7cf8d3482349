//! Reshape, transpose, strided reads (slices, flips, broadcasts), concat, pad and take.

use super::{attr_i, attr_ints, i64s, Cx, Ex};
use crate::ops::{Movement, StridedKind};
use crate::{HostTensor, Result};

pub(super) fn export(ex: &mut Ex, cx: &Cx, m: &Movement) -> Result<String> {
    let out = cx.node.shape.dims();
    match m {
        Movement::Reshape => {
            let shape = ex.i64_vec("shape", &i64s(out));
            Ok(ex.op("Reshape", vec![cx.x(0), shape], vec![]))
        }
        Movement::Permute(perm) => Ok(ex.op(
            "Transpose",
            vec![cx.x(0)],
            vec![attr_ints("perm", &i64s(perm))],
        )),
        Movement::Concat(axis) => Ok(ex.op(
            "Concat",
            cx.inputs.to_vec(),
            vec![attr_i("axis", *axis as i64)],
        )),
        Movement::Pad { before, value } => {
            let inp = cx.input(0).shape.dims();
            let mut pads = i64s(before);
            for k in 0..out.len() {
                pads.push(out[k] as i64 - inp[k] as i64 - before[k] as i64);
            }
            let pads = ex.i64_vec("pads", &pads);
            let v = HostTensor::from_words(crate::Shape::scalar(), cx.node.dtype, vec![*value])?;
            let name = ex.fresh("pad_value");
            ex.initializer(&name, &v)?;
            Ok(ex.op("Pad", vec![cx.x(0), pads, name], vec![]))
        }
        // ONNX's Gather takes int32 indices; wgflow clamps out-of-range ones (never read by a
        // valid model).
        Movement::Gather(axis) => Ok(ex.op(
            "Gather",
            vec![cx.x(0), cx.x(1)],
            vec![attr_i("axis", *axis as i64)],
        )),
        Movement::Strided {
            kind,
            offset,
            strides,
        } => {
            let inp = cx.input(0).shape.dims();
            if *kind == StridedKind::BroadcastTo && *offset == 0 && is_broadcast(inp, out, strides)
            {
                let shape = ex.i64_vec("shape", &i64s(out));
                return Ok(ex.op("Expand", vec![cx.x(0), shape], vec![]));
            }
            if let Some((starts, ends, steps)) = as_slice(inp, out, *offset, strides) {
                let s = ex.i64_vec("starts", &starts);
                let e = ex.i64_vec("ends", &ends);
                let axes: Vec<i64> = (0..out.len() as i64).collect();
                let a = ex.i64_vec("axes", &axes);
                let st = ex.i64_vec("steps", &steps);
                return Ok(ex.op("Slice", vec![cx.x(0), s, e, a, st], vec![]));
            }
            // Any other strided read: gather the flattened input at the computed positions.
            let positions = positions(out, *offset, strides);
            let idx = ex.i64s("positions", &positions, out);
            let flat = ex.i64_vec("shape", &[-1]);
            let f = ex.op("Reshape", vec![cx.x(0), flat], vec![]);
            Ok(ex.op("Gather", vec![f, idx], vec![attr_i("axis", 0)]))
        }
    }
}

/// Whether `strides` are NumPy's broadcast of contiguous `inp` to `out`.
fn is_broadcast(inp: &[usize], out: &[usize], strides: &[i64]) -> bool {
    if inp.len() > out.len() || strides.len() != out.len() {
        return false;
    }
    let lead = out.len() - inp.len();
    let contiguous = crate::Shape(inp.to_vec()).strides();
    (0..out.len()).all(|k| {
        if k < lead {
            return strides[k] == 0;
        }
        let d = inp[k - lead];
        if d == 1 && out[k] != 1 {
            strides[k] == 0
        } else {
            d == out[k] && (d == 1 || strides[k] == contiguous[k - lead] as i64)
        }
    })
}

/// A same-rank strided read as ONNX `Slice` (starts, ends, steps per axis), when it is one.
fn as_slice(
    inp: &[usize],
    out: &[usize],
    offset: i64,
    strides: &[i64],
) -> Option<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    if inp.len() != out.len() || strides.len() != out.len() || out.contains(&0) {
        return None;
    }
    let contiguous = crate::Shape(inp.to_vec()).strides();
    let (mut starts, mut ends, mut steps) = (vec![], vec![], vec![]);
    let mut rest = offset;
    for k in 0..inp.len() {
        let s = contiguous[k] as i64;
        let (n, o) = (inp[k] as i64, out[k] as i64);
        let start = if s == 0 { 0 } else { rest / s };
        if start >= n || start < 0 {
            return None;
        }
        rest -= start * s;
        let step = if o == 1 {
            1
        } else if s != 0 && strides[k] % s == 0 && strides[k] != 0 {
            strides[k] / s
        } else {
            return None;
        };
        let last = start + (o - 1) * step;
        if last < 0 || last >= n {
            return None;
        }
        // One past the last element read; below zero means "through index 0" (INT64 min-ish).
        let end = last + step.signum();
        starts.push(start);
        ends.push(if end < 0 { -n - 1 } else { end });
        steps.push(step);
    }
    (rest == 0).then_some((starts, ends, steps))
}

/// The flat input position of every output element, row-major.
fn positions(out: &[usize], offset: i64, strides: &[i64]) -> Vec<i64> {
    let n: usize = out.iter().product();
    let mut pos = Vec::with_capacity(n);
    let mut coord = vec![0usize; out.len()];
    for _ in 0..n {
        pos.push(
            offset
                + coord
                    .iter()
                    .zip(strides)
                    .map(|(&c, &s)| c as i64 * s)
                    .sum::<i64>(),
        );
        for k in (0..out.len()).rev() {
            coord[k] += 1;
            if coord[k] < out[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    pos
}
