//! The scans' gradient rules, built as graph nodes with the public builders.

use super::{Scan, ScanOp};
use crate::graph::{Graph, Tensor};
use crate::ops::family::GradCx;
use crate::DType;
use crate::Shape;

impl Scan {
    /// The cumulative sum of `t` in the other direction, with this scan's `exclusive`.
    pub(super) fn back(&self, g: &mut Graph, t: Tensor) -> crate::Result<Tensor> {
        let axis = self.axis as isize;
        g.cumulative(ScanOp::Sum, t, axis, self.exclusive, !self.reverse)
    }

    /// The gradient of a cumprod, exact with zeros. Where no zero comes before or at `j` in
    /// scan order, `dx_j = Σ_{i reads j} dy_i·y_i / x_j` (a backward cumsum of `dy·y`,
    /// TensorFlow's rule). At the first zero `z`, `y_i / x_z` is not defined, but it is the
    /// product of the others, which is `y'_i` for the cumprod `y'` of `x` with `x_z`
    /// replaced by 1: `dx_z` is the backward cumsum of `dy·y'` at `z`. After the first zero,
    /// every product that reads `x_j` also reads `x_z = 0`, so `dx_j = 0`.
    pub(super) fn prod_grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Tensor> {
        let (x, y, dy) = (cx.inputs[0], cx.output, cx.dy);
        let dtype = g.dtype(x)?;
        let axis = self.axis as isize;
        let scalar = |g: &mut Graph, d: DType, v: f64| g.full(Shape::scalar(), d, v);
        let zero = scalar(g, dtype, 0.0)?;
        let one = scalar(g, dtype, 1.0)?;
        let is0 = g.equal(x, zero)?;
        // How many zeros lie at or before each position, in scan order (i32: exact).
        let count = g.cast(is0, DType::I32)?;
        let seen = g.cumulative(ScanOp::Sum, count, axis, false, self.reverse)?;
        let none = scalar(g, DType::I32, 0.0)?;
        let before_zero = g.equal(seen, none)?;
        let first = scalar(g, DType::I32, 1.0)?;
        let at_first = g.equal(seen, first)?;
        let first_zero = g.logical_and(is0, at_first)?;
        let safe = g.select(is0, one, x)?;
        let dyy = g.mul(dy, y)?;
        let s = self.back(g, dyy)?;
        let before = g.div(s, safe)?;
        let x1 = g.select(first_zero, one, x)?;
        let y1 = g.cumulative(ScanOp::Prod, x1, axis, self.exclusive, self.reverse)?;
        let dyy1 = g.mul(dy, y1)?;
        let at_zero = self.back(g, dyy1)?;
        let after = g.select(first_zero, at_zero, zero)?;
        g.select(before_zero, before, after)
    }
}
