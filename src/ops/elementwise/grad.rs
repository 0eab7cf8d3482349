//! Gradient rules of the elementwise family: each input's gradient is `dy` times the
//! partial derivative of the op, summed over the axes along which the input was broadcast.

use super::{BinaryOp, Elementwise, UnaryOp};
use crate::graph::{Graph, Tensor};
use crate::ops::GradCx;
use crate::{Error, Result};

impl Elementwise {
    /// The vector-Jacobian product of one elementwise node (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let dy = cx.dy;
        let partials: Vec<Option<Tensor>> = match *self {
            Elementwise::Unary(UnaryOp::Neg) => vec![Some(g.neg(dy)?)],
            Elementwise::Binary(BinaryOp::Add) => vec![Some(dy), Some(dy)],
            Elementwise::Binary(BinaryOp::Sub) => vec![Some(dy), Some(g.neg(dy)?)],
            Elementwise::Binary(BinaryOp::Mul) => {
                let (a, b) = (cx.inputs[0], cx.inputs[1]);
                vec![Some(g.mul(dy, b)?), Some(g.mul(dy, a)?)]
            }
            _ => {
                return Err(Error::NotDifferentiable {
                    op: crate::ops::Family::name(self).to_string(),
                    node: cx.name.to_string(),
                    message: "no gradient rule yet".into(),
                })
            }
        };
        unbroadcast(g, cx, partials)
    }
}

/// Each wanted partial summed back to its input's shape; unwanted ones dropped.
fn unbroadcast(
    g: &mut Graph,
    cx: &GradCx<'_>,
    partials: Vec<Option<Tensor>>,
) -> Result<Vec<Option<Tensor>>> {
    partials
        .into_iter()
        .enumerate()
        .map(|(i, p)| match p {
            Some(p) if cx.wants(i) => {
                let shape = g.shape(cx.inputs[i])?.clone();
                g.sum_to(p, &shape).map(Some)
            }
            _ => Ok(None),
        })
        .collect()
}
