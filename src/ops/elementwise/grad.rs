//! Gradient rules of the elementwise family. Each op is a one-node [`Expr`]; its derivative
//! comes from [`Expr::vjp`] (where every rule and convention is written, see
//! `ops/elementwise/expr/vjp.rs`) and is built back into the graph as ordinary elementwise nodes, so a
//! chain's backward pass fuses like its forward pass. Each input's gradient is then summed
//! over the axes along which the input was broadcast.

use super::{Elementwise, Expr, Node};
use crate::graph::{Graph, Tensor};
use crate::ops::GradCx;
use crate::{DType, HostTensor, Result, Shape};
use std::panic::Location;

impl Elementwise {
    /// The vector-Jacobian product of one elementwise node (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let ins = cx
            .inputs
            .iter()
            .map(|&t| g.dtype(t))
            .collect::<Result<Vec<DType>>>()?;
        let mut args = cx.inputs.to_vec();
        args.extend([cx.output, cx.dy]);
        let grads = self.expr().vjp(&ins, cx.wanted);
        grads
            .into_iter()
            .zip(cx.inputs)
            .map(|(e, &x)| {
                let Some(e) = e else { return Ok(None) };
                let d = emit(g, &e, &args)?;
                let shape = g.probe_shape(x)?.clone();
                fit(g, d, &shape).map(Some)
            })
            .collect()
    }
}

/// `e` built as graph nodes, input `i` being `args[i]`: one builder call per operation, one
/// scalar constant per literal (it broadcasts in the binary ops and fusion makes it a literal
/// again).
#[track_caller]
fn emit(g: &mut Graph, e: &Expr, args: &[Tensor]) -> Result<Tensor> {
    let loc = Location::caller();
    let mut at: Vec<Tensor> = Vec::with_capacity(e.nodes().len());
    for node in e.nodes() {
        let t = match *node {
            Node::Input(i) => *args.get(i).ok_or_else(|| {
                crate::Error::Internal(format!(
                    "a gradient expression reads input {i} of {}",
                    args.len()
                ))
            })?,
            Node::Lit(d, w) => g.constant(HostTensor::from_words(Shape::scalar(), d, vec![w])?)?,
            Node::Unary(op, a) => g.unary(op, at[a], loc)?,
            Node::Binary(op, a, b) => g.binary(op, at[a], at[b], loc)?,
            Node::Select(c, a, b) => g.select(at[c], at[a], at[b])?,
            Node::Cast(d, a) => g.cast(at[a], d)?,
        };
        at.push(t);
    }
    at.pop()
        .ok_or_else(|| crate::Error::Internal("an empty gradient expression".into()))
}

/// A gradient brought to its input's `shape`: summed over the axes the input was broadcast
/// along, or, for a gradient that is a constant (a zero), broadcast up to the input's shape.
pub(crate) fn fit(g: &mut Graph, d: Tensor, shape: &Shape) -> Result<Tensor> {
    let have = g.probe_shape(d)?.clone();
    if &have == shape {
        Ok(d)
    } else if Shape::broadcast(&have, shape).as_ref() == Some(shape) {
        g.broadcast_to(d, shape.dims())
    } else {
        g.sum_to(d, shape)
    }
}
