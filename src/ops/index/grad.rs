//! Gradients of the index ops, built from the ops themselves.
//!
//! * gather: `dx = scatter_add(zeros_like(x), indices, dy)`.
//! * scatter add: `ddata = dy`, `dupdates = gather(dy, indices)`.
//! * scatter none: an update reaches the output only if no later update (in row-major
//!   order, i.e. a larger axis position, the other coordinates being the same) targets its
//!   position, and a data element only if no update does. The winners are found exactly by
//!   scattering each update's axis position and gathering it back.
//! * mul, max and min are not differentiable here (an error naming the node).
//! * top-k positions: none (integers); top-k values are a gather, so theirs flows.

use super::{Index, ScatterReduce};
use crate::graph::{Graph, Tensor};
use crate::ops::family::GradCx;
use crate::{DType, Error, Result};

pub(super) fn grad(op: Index, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
    match op {
        // Positions are piecewise constant in `x`: no gradient flows through them (the
        // values, a gather of them, carry it).
        Index::TopKIndices { .. } => Ok(vec![None]),
        Index::GatherElements { axis } => {
            if !cx.wants(0) {
                return Ok(vec![None, None]);
            }
            let x = cx.inputs[0];
            let (shape, dtype) = (g.shape(x)?.clone(), g.dtype(x)?);
            let zeros = g.zeros(shape, dtype)?;
            let dx = g.scatter_elements(
                zeros,
                cx.inputs[1],
                cx.dy,
                axis as isize,
                ScatterReduce::Add,
            )?;
            Ok(vec![Some(dx), None])
        }
        Index::ScatterElements { axis, reduce } => {
            let (idx, updates) = (cx.inputs[1], cx.inputs[2]);
            let a = axis as isize;
            match reduce {
                ScatterReduce::Add => {
                    let dd = cx.wants(0).then_some(cx.dy);
                    let du = if cx.wants(2) {
                        Some(g.gather_elements(cx.dy, idx, a)?)
                    } else {
                        None
                    };
                    Ok(vec![dd, None, du])
                }
                ScatterReduce::None => {
                    let dd = if cx.wants(0) {
                        let (shape, dtype) = (g.shape(updates)?.clone(), g.dtype(updates)?);
                        let zeros = g.zeros(shape, dtype)?;
                        Some(g.scatter_elements(cx.dy, idx, zeros, a, ScatterReduce::None)?)
                    } else {
                        None
                    };
                    let du = if cx.wants(2) {
                        Some(winners_grad(g, cx.dy, idx, axis)?)
                    } else {
                        None
                    };
                    Ok(vec![dd, None, du])
                }
                ScatterReduce::Mul | ScatterReduce::Max | ScatterReduce::Min => {
                    Err(Error::NotDifferentiable {
                        op: "scatter_elements".into(),
                        node: cx.name.to_string(),
                        message: format!(
                            "reduce '{}' has no gradient rule (only 'none' and 'add')",
                            reduce.name()
                        ),
                    })
                }
            }
        }
    }
}

/// `dy` gathered at each update's target where that update is the last to write it, else 0.
fn winners_grad(g: &mut Graph, dy: Tensor, idx: Tensor, axis: usize) -> Result<Tensor> {
    let ishape = g.shape(idx)?.clone();
    let n = ishape.dims()[axis];
    // Each update's position along the axis, as i32.
    let pos = g.arange(0.0, n as f64, 1.0, DType::I32)?;
    let mut along = vec![1isize; ishape.rank()];
    along[axis] = n as isize;
    let pos = g.reshape(pos, &along)?;
    let pos = g.broadcast_to(pos, ishape.dims())?;
    let (dshape, dtype) = (g.shape(dy)?.clone(), g.dtype(dy)?);
    let last = g.full(dshape, DType::I32, -1.0)?;
    let last = g.scatter_elements(last, idx, pos, axis as isize, ScatterReduce::None)?;
    let back = g.gather_elements(last, idx, axis as isize)?;
    let wins = g.equal(back, pos)?;
    let got = g.gather_elements(dy, idx, axis as isize)?;
    let zeros = g.zeros(ishape, dtype)?;
    g.select(wins, got, zeros)
}
