//! Gradient rules of the reduction family.

use super::{Reduce, ReduceOp};
use crate::graph::{Graph, Tensor};
use crate::ops::GradCx;
use crate::{Error, Result, Shape};

impl Reduce {
    /// The vector-Jacobian product of one reduction node (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let x = cx.inputs[0];
        let dx = match self.op {
            ReduceOp::Sum => self.spread(g, x, cx.dy)?,
            _ => {
                return Err(Error::NotDifferentiable {
                    op: self.op.name().to_string(),
                    node: cx.name.to_string(),
                    message: "no gradient rule yet".into(),
                })
            }
        };
        Ok(vec![Some(dx)])
    }

    /// `t` (shaped like the reduction's output) with the reduced axes restored as size 1,
    /// then broadcast back to the input's shape.
    pub(super) fn spread(&self, g: &mut Graph, x: Tensor, t: Tensor) -> Result<Tensor> {
        let shape = g.shape(x)?.clone();
        let kept = Shape(
            (0..shape.rank())
                .map(|a| {
                    if self.axes.contains(&a) {
                        1
                    } else {
                        shape.0[a]
                    }
                })
                .collect(),
        );
        let dims: Vec<isize> = kept.0.iter().map(|&d| d as isize).collect();
        let t = g.reshape(t, &dims)?;
        if kept == shape {
            Ok(t)
        } else {
            g.broadcast_to(t, &shape.0)
        }
    }
}
