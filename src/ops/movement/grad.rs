//! Gradient rules of the movement family. Every movement op reads each input element into
//! zero, one or several output positions, so its gradient puts `dy` back where it was read
//! from, adding where an element was read more than once:
//!
//! * reshape: `dy` reshaped back; transpose: `dy` transposed by the inverse permutation.
//! * slice and flip (one strided read, decoded into a start, step and count per axis): `dy`
//!   flipped along the axes read backwards, spread out with zeros between elements along the
//!   axes with steps above 1, then padded with zeros to the input's shape.
//! * broadcast_to: `dy` summed over the broadcast axes ([`Graph::sum_to`]).
//! * concat: `dy` sliced back into the pieces; pad: the interior of `dy`.
//! * take: a `segment_sum` of `dy` into the rows the indices select (so repeated indices
//!   add up, in ascending position, the same bits on every device); the indices are wrapped
//!   and clamped exactly as the forward kernel does, so an out-of-range fed index passes its
//!   gradient to the row it actually read. Work and memory are the size of `dy` and of `x`:
//!   no `[n, m]` one-hot matrix. The indices get no gradient.

use super::{Movement, SliceArg, StridedKind};
use crate::graph::{Graph, PadMode, Tensor};
use crate::ops::GradCx;
use crate::{DType, Error, Result, Shape};

impl Movement {
    /// The vector-Jacobian product of one movement node (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let dy = cx.dy;
        if let Movement::Concat(axis) = self {
            return concat(g, cx, *axis);
        }
        let mut grads: Vec<Option<Tensor>> = vec![None; cx.inputs.len()];
        if !cx.wants(0) {
            return Ok(grads);
        }
        let x = cx.inputs[0];
        let (shape, dtype) = (g.probe_shape(x)?.clone(), g.dtype(x)?);
        if shape.numel() == 0 {
            grads[0] = Some(zeros(g, &shape, dtype)?);
            return Ok(grads);
        }
        grads[0] = Some(match self {
            Movement::Reshape => reshape(g, dy, &shape)?,
            Movement::Permute(perm) => {
                let mut inverse = vec![0isize; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inverse[p] = i as isize;
                }
                g.transpose(dy, &inverse)?
            }
            Movement::Strided {
                kind,
                offset,
                strides,
            } => strided(g, cx, *kind, &shape, *offset, strides)?,
            Movement::Pad { before, .. } => {
                let args: Vec<SliceArg> = before
                    .iter()
                    .zip(&shape.0)
                    .map(|(&b, &n)| SliceArg::range(b as isize, (b + n) as isize))
                    .collect();
                g.slice(dy, &args)?
            }
            Movement::Gather(axis) => {
                // The row count becomes index constants: it must be known at build time.
                if g.dims(x)?[*axis].known().is_none() {
                    return Err(crate::Error::NotDifferentiable {
                        op: "take".into(),
                        node: cx.name.to_string(),
                        message: format!(
                            "the gradient needs a known size along axis {axis}, got {}",
                            crate::graph::dims_text(&g.dims(x)?)
                        ),
                    });
                }
                take(g, dy, cx.inputs[1], &shape, *axis)?
            }
            // Several inputs: answered above.
            Movement::Concat(axis) => return concat(g, cx, *axis),
        });
        Ok(grads)
    }
}

/// The gradient of a concat along `axis`: `dy` sliced back into the pieces.
fn concat(g: &mut Graph, cx: &GradCx<'_>, axis: usize) -> Result<Vec<Option<Tensor>>> {
    let mut grads = Vec::with_capacity(cx.inputs.len());
    let mut start = 0usize;
    for (i, &x) in cx.inputs.iter().enumerate() {
        let shape = g.probe_shape(x)?.clone();
        let n = shape.0[axis];
        grads.push(if !cx.wants(i) {
            None
        } else if shape.numel() == 0 {
            Some(zeros(g, &shape, g.dtype(x)?)?)
        } else {
            let mut args = vec![SliceArg::full(); axis + 1];
            args[axis] = SliceArg::range(start as isize, (start + n) as isize);
            Some(g.slice(cx.dy, &args)?)
        });
        start += n;
    }
    Ok(grads)
}

/// The gradient of a strided read of `dy`'s shape from a contiguous `shape`.
fn strided(
    g: &mut Graph,
    cx: &GradCx<'_>,
    kind: StridedKind,
    shape: &Shape,
    offset: i64,
    strides: &[i64],
) -> Result<Tensor> {
    let (dy, out) = (cx.dy, g.probe_shape(cx.dy)?.clone());
    let dtype = g.dtype(dy)?;
    let undecodable = || Error::NotDifferentiable {
        op: kind.name().to_string(),
        node: cx.name.to_string(),
        message: format!(
            "reading {out} at offset {offset} with strides {strides:?} from {shape} is no {} \
             the builders make, so its gradient is unknown",
            kind.name()
        ),
    };
    if kind == StridedKind::BroadcastTo {
        let expected: Vec<i64> = if out.rank() >= shape.rank() {
            shape
                .broadcast_strides(&out)
                .iter()
                .map(|&s| s as i64)
                .collect()
        } else {
            Vec::new()
        };
        if offset != 0 || expected != strides {
            return Err(undecodable());
        }
        return g.sum_to(dy, shape);
    }
    if out.numel() == 0 {
        return zeros(g, shape, dtype);
    }
    let plan = decode(shape, &out, offset, strides).ok_or_else(undecodable)?;
    // Walk every axis forwards: flip the ones read backwards, so that element `i` of axis
    // `k` comes from position `lo + i·step` with `step > 0`.
    let backwards: Vec<isize> = (0..plan.len())
        .filter(|&k| plan[k].step < 0 && plan[k].count > 1)
        .map(|k| k as isize)
        .collect();
    let mut t = dy;
    if !backwards.is_empty() {
        t = g.flip(t, backwards)?;
    }
    let axes: Vec<(usize, usize, usize)> = plan
        .iter()
        .map(|a| {
            if a.count == 1 {
                (a.start, 1, 1)
            } else {
                let s = a.step.unsigned_abs();
                let lo = if a.step < 0 {
                    a.start - s * (a.count - 1)
                } else {
                    a.start
                };
                (lo, s, a.count)
            }
        })
        .collect();
    // Steps above 1: `[.., c, ..]` → `[.., c, 1, ..]` → pad to `[.., c, s, ..]` → `[.., c·s, ..]`,
    // so element `i` lands at `i·s` with zeros between.
    if axes.iter().any(|&(_, s, _)| s > 1) {
        let mut split = Vec::new();
        let mut pads = Vec::new();
        for &(_, s, c) in &axes {
            split.extend([c, 1]);
            pads.extend([(0, 0), (0, s - 1)]);
        }
        t = reshape(g, t, &Shape(split))?;
        t = g.pad(t, &pads, PadMode::Constant(0.0))?;
        let spread = Shape(axes.iter().map(|&(_, s, c)| s * c).collect());
        t = reshape(g, t, &spread)?;
    }
    // The zeros after the last element may run past the input: cut them, then pad to it.
    let room: Vec<usize> = axes
        .iter()
        .zip(&shape.0)
        .map(|(&(lo, s, c), &n)| (s * c).min(n - lo))
        .collect();
    if axes.iter().zip(&room).any(|(&(_, s, c), &r)| s * c > r) {
        let args: Vec<SliceArg> = room
            .iter()
            .map(|&r| SliceArg::range(0, r as isize))
            .collect();
        t = g.slice(t, &args)?;
    }
    let pads: Vec<(usize, usize)> = axes
        .iter()
        .zip(&room)
        .zip(&shape.0)
        .map(|((&(lo, _, _), &r), &n)| (lo, n - lo - r))
        .collect();
    if pads.iter().any(|&p| p != (0, 0)) {
        t = g.pad(t, &pads, PadMode::Constant(0.0))?;
    }
    Ok(t)
}

/// One axis of a slice: the first index read, the step and the number of elements.
#[derive(Debug, Clone, Copy)]
struct AxisRead {
    start: usize,
    step: isize,
    count: usize,
}

/// The per-axis reads that give exactly `offset` and `strides` over a contiguous, non-empty
/// `input` with the non-empty output `out`, or `None` if it is not such a slice.
fn decode(input: &Shape, out: &Shape, offset: i64, strides: &[i64]) -> Option<Vec<AxisRead>> {
    if out.rank() != input.rank() || strides.len() != input.rank() || offset < 0 {
        return None;
    }
    let contiguous = input.strides();
    let mut rem = offset as u64;
    let mut plan = Vec::with_capacity(input.rank());
    for (k, &n) in input.0.iter().enumerate() {
        let st = contiguous[k] as i64;
        let start = (rem / st as u64) as usize;
        rem %= st as u64;
        let count = out.0[k];
        let step = if count == 1 {
            1
        } else if strides[k] % st == 0 {
            (strides[k] / st) as isize
        } else {
            return None;
        };
        let last = start as i128 + step as i128 * (count as i128 - 1);
        if start >= n || step == 0 || !(0..n as i128).contains(&last) {
            return None;
        }
        plan.push(AxisRead { start, step, count });
    }
    (rem == 0).then_some(plan)
}

/// The gradient of `take(x, indices, axis)` for an `x` of `shape`: a segment sum of `dy`
/// over the rows the gather kernel read (negative indices wrapped once, the rest clamped),
/// deterministic and without a `[rows, indices]` one-hot matrix.
fn take(g: &mut Graph, dy: Tensor, indices: Tensor, shape: &Shape, axis: usize) -> Result<Tensor> {
    let dtype = g.dtype(dy)?;
    let m = g.probe_shape(indices)?.numel();
    let n = shape.0[axis];
    if m == 0 {
        return zeros(g, shape, dtype);
    }
    let i32s = |g: &mut Graph, v: f64| g.full(Shape::scalar(), DType::I32, v);
    let k = reshape(g, indices, &Shape(vec![m]))?;
    let zero = i32s(g, 0.0)?;
    let size = i32s(g, n as f64)?;
    let last = i32s(g, (n - 1) as f64)?;
    let negative = g.less(k, zero)?;
    let wrapped = g.add(k, size)?;
    let k = g.select(negative, wrapped, k)?;
    let k = g.minimum(k, last)?;
    let k = g.maximum(k, zero)?;
    // dy as [.., m, ..]: the indices' dimensions flattened into one axis.
    let mut dims = shape.0[..axis].to_vec();
    dims.push(m);
    dims.extend_from_slice(&shape.0[axis + 1..]);
    let d = reshape(g, dy, &Shape(dims))?;
    // Segment sums add f32, i32 and u32; f16 and bool gradients add in f32 and cast back.
    let native = matches!(dtype, DType::F32 | DType::I32 | DType::U32);
    let d = if native { d } else { g.cast(d, DType::F32)? };
    let dx = g.segment_sum(d, k, n, axis as isize)?;
    if native {
        Ok(dx)
    } else {
        g.cast(dx, dtype)
    }
}

/// `t` reshaped to `shape` (no node when it already has it).
fn reshape(g: &mut Graph, t: Tensor, shape: &Shape) -> Result<Tensor> {
    if g.probe_shape(t)? == shape {
        return Ok(t);
    }
    let dims: Vec<isize> = shape.0.iter().map(|&d| d as isize).collect();
    g.reshape(t, &dims)
}

/// Zeros of `shape`: a broadcast scalar, so no full-size constant is stored.
fn zeros(g: &mut Graph, shape: &Shape, dtype: DType) -> Result<Tensor> {
    let z = g.full(Shape::scalar(), dtype, 0.0)?;
    if shape.rank() == 0 {
        Ok(z)
    } else {
        g.broadcast_to(z, &shape.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::movement::slice_plan;

    #[test]
    fn decode_inverts_slice_plan() {
        let input = Shape(vec![5, 1, 6]);
        let args = [
            SliceArg::new(Some(4), Some(0), -2),
            SliceArg::full(),
            SliceArg::new(Some(1), None, 3),
        ];
        let (out, offset, strides) = slice_plan(&input, &args).unwrap();
        let plan = decode(&input, &out, offset, &strides).unwrap();
        let got: Vec<(usize, isize, usize)> =
            plan.iter().map(|a| (a.start, a.step, a.count)).collect();
        assert_eq!(got, vec![(4, -2, 2), (0, 1, 1), (1, 3, 2)]);
    }

    #[test]
    fn decode_rejects_reads_no_slice_makes() {
        let input = Shape(vec![2, 3]);
        let out = Shape(vec![2, 3]);
        // A stride that is not a multiple of the axis's element stride.
        assert!(decode(&input, &out, 0, &[1, 1]).is_none());
        // Reads past the end of an axis.
        assert!(decode(&input, &out, 1, &[3, 1]).is_none());
        // An offset past the input.
        assert!(decode(&input, &Shape(vec![1, 1]), 6, &[3, 1]).is_none());
        // A rank change (that is a broadcast, not a slice).
        assert!(decode(&input, &Shape(vec![2, 2, 3]), 0, &[0, 3, 1]).is_none());
    }
}
