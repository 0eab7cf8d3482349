//! Gradient rules of the reduction family.
//!
//! * `sum`: `dy` spread back over the reduced axes; `mean`: the same divided by the count.
//! * `max`/`min`: `dy` goes to the positions equal to the result, split equally among tied
//!   positions (TensorFlow's rule: `mask / sum(mask)`, with `mask = x == y`). A group whose
//!   result is NaN sends its gradient to its NaN positions, split among them (PyTorch's
//!   rule), since `NaN == NaN` is false and the mask alone would be empty.
//! * `prod`: `dy · prod(x) / x`, computed without dividing by zero. With `p` the product of
//!   the group's non-zero elements and `z` its number of zeros: a non-zero `x` gets `p / x`
//!   when `z == 0` and 0 otherwise; a zero gets `p` (the product of the others) when
//!   `z == 1` and 0 otherwise. Where `prod(x)` overflows but the product of the others does
//!   not, `p / x` is infinite like the result.
//! * `all`, `any`, `argmax`, `argmin`: no gradient (bool or index outputs).

use super::{Reduce, ReduceOp};
use crate::graph::{Graph, Tensor};
use crate::ops::GradCx;
use crate::{DType, Result, Shape};

impl Reduce {
    /// The vector-Jacobian product of one reduction node (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let x = cx.inputs[0];
        if !cx.wants(0) {
            return Ok(vec![None]);
        }
        let (shape, dtype) = (g.probe_shape(x)?.clone(), g.dtype(x)?);
        if shape.numel() == 0 {
            return Ok(vec![Some(zeros(g, &shape, dtype)?)]);
        }
        let dx = match self.op {
            ReduceOp::Sum => self.spread(g, x, cx.dy)?,
            ReduceOp::Mean => {
                // A count of run-time size is a value the binding fills in.
                let count = g.size_of(x, &self.axes, dtype)?;
                let d = g.div(cx.dy, count)?;
                self.spread(g, x, d)?
            }
            ReduceOp::Max | ReduceOp::Min => self.extreme(g, x, cx)?,
            ReduceOp::Prod => self.product(g, x, cx)?,
            ReduceOp::All | ReduceOp::Any | ReduceOp::ArgMax | ReduceOp::ArgMin => {
                return Ok(vec![None])
            }
        };
        Ok(vec![Some(dx)])
    }

    /// max/min: `dy / count` at each position equal to the result (or NaN where it is NaN).
    fn extreme(&self, g: &mut Graph, x: Tensor, cx: &GradCx<'_>) -> Result<Tensor> {
        let dtype = g.dtype(x)?;
        let y = self.keep(g, x, cx.output)?;
        let hit = g.equal(x, y)?;
        let nan = g.isnan(x)?;
        let hit = g.logical_or(hit, nan)?;
        let mask = g.cast(hit, dtype)?;
        let count = g.sum(mask, self.axes_list(), true)?;
        let dy = self.keep(g, x, cx.dy)?;
        let share = g.div(dy, count)?;
        g.mul(mask, share)
    }

    /// prod: the product of the others, without dividing by zero (see the module docs).
    fn product(&self, g: &mut Graph, x: Tensor, cx: &GradCx<'_>) -> Result<Tensor> {
        let dtype = g.dtype(x)?;
        let zero = g.full(Shape::scalar(), dtype, 0.0)?;
        let one = g.full(Shape::scalar(), dtype, 1.0)?;
        let is0 = g.equal(x, zero)?;
        let nonzero = g.select(is0, one, x)?;
        let p = g.prod(nonzero, self.axes_list(), true)?;
        let zeros = g.cast(is0, dtype)?;
        let z = g.sum(zeros, self.axes_list(), true)?;
        let no_zero = g.equal(z, zero)?;
        let one_zero = g.equal(z, one)?;
        let others = g.div(p, nonzero)?;
        let at_nonzero = g.select(no_zero, others, zero)?;
        let at_zero = g.select(one_zero, p, zero)?;
        let local = g.select(is0, at_zero, at_nonzero)?;
        let dy = self.keep(g, x, cx.dy)?;
        g.mul(local, dy)
    }

    fn axes_list(&self) -> Vec<isize> {
        self.axes.iter().map(|&a| a as isize).collect()
    }

    /// `t` (shaped like the reduction's output) with the reduced axes restored as size 1,
    /// so that it broadcasts against the input.
    fn keep(&self, g: &mut Graph, x: Tensor, t: Tensor) -> Result<Tensor> {
        let kept: Vec<isize> = g
            .probe_shape(x)?
            .0
            .iter()
            .enumerate()
            .map(|(a, &d)| {
                if self.axes.contains(&a) {
                    1
                } else {
                    d as isize
                }
            })
            .collect();
        g.reshape(t, &kept)
    }

    /// `t` (shaped like the reduction's output) with the reduced axes restored as size 1,
    /// then broadcast back to the input's shape.
    pub(super) fn spread(&self, g: &mut Graph, x: Tensor, t: Tensor) -> Result<Tensor> {
        let shape = g.probe_shape(x)?.clone();
        let t = self.keep(g, x, t)?;
        if g.probe_shape(t)? == &shape {
            Ok(t)
        } else {
            g.broadcast_to(t, &shape.0)
        }
    }
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
