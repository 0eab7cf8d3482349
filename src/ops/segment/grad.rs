//! The segment sum's gradient: each position receives its segment's incoming gradient, a
//! `take` of `dy` (a position whose id is outside the segments receives zero: it reads a
//! zero row appended to `dy`). The ids get none (integers).

use super::Segment;
use crate::graph::{Graph, PadMode, Tensor};
use crate::ops::family::GradCx;
use crate::{DType, Result, Shape};

pub(super) fn grad(op: Segment, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
    if !cx.wants(0) {
        return Ok(vec![None, None]);
    }
    let ids = cx.inputs[1];
    let n = op.segments;
    let rank = g.probe_shape(cx.dy)?.rank();
    let mut pads = vec![(0, 0); rank];
    pads[op.axis] = (0, 1);
    let padded = g.pad(cx.dy, &pads, PadMode::Constant(0.0))?;
    let i32s = |g: &mut Graph, v: f64| g.full(Shape::scalar(), DType::I32, v);
    let (zero, size) = (i32s(g, 0.0)?, i32s(g, n as f64)?);
    let below = g.less(ids, zero)?;
    let above = g.greater_equal(ids, size)?;
    let outside = g.logical_or(below, above)?;
    let rows = g.select(outside, size, ids)?;
    let dx = g.take(padded, rows, op.axis as isize)?;
    Ok(vec![Some(dx), None])
}
