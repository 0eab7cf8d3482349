//! Builders of the reduction family: sum, mean, max, min, prod, all, any, argmax and argmin.
//! Negative axes are resolved here; the shape rule is `ops::reduce::reduce_shape`.

use super::{Axes, Loc};
use crate::graph::{Graph, Site, Tensor};
use crate::ops::{reduce, Declared, Op, Reduce, ReduceOp};
use crate::{Error, Result};
use std::panic::Location;

macro_rules! reduce_builders {
    ($($(#[$doc:meta])* $fn:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $fn(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
            self.reduce(ReduceOp::$op, x, axes.into(), keepdims, Location::caller())
        }
    )*};
}

impl Graph {
    reduce_builders! {
        /// Sum over `axes`.
        sum => Sum;
        /// Mean over `axes`. For integers the sum is divided with truncation (TensorFlow's rule).
        mean => Mean;
        /// Maximum over `axes`; NaN propagates.
        max => Max;
        /// Minimum over `axes`; NaN propagates.
        min => Min;
    }

    /// Product over `axes` (integers wrap).
    #[track_caller]
    pub fn prod(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, x, axes.into(), keepdims, Location::caller())
    }

    /// Whether every element over `axes` is true (non-bool input is tested `!= 0` in the
    /// kernel, not through a cast; NaN is true).
    #[track_caller]
    pub fn all(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::All, x, axes.into(), keepdims, Location::caller())
    }

    /// Whether any element over `axes` is true.
    #[track_caller]
    pub fn any(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Any, x, axes.into(), keepdims, Location::caller())
    }

    /// i32 index of the first maximum along `axis`, or of the flattened tensor with `None`.
    /// NaN counts as the maximum (the first NaN's index is returned), as in NumPy.
    #[track_caller]
    pub fn argmax(&mut self, x: Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        self.arg_reduce(ReduceOp::ArgMax, x, axis, keepdims, Location::caller())
    }

    /// i32 index of the first minimum; NaN counts as the minimum, as in NumPy.
    #[track_caller]
    pub fn argmin(&mut self, x: Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        self.arg_reduce(ReduceOp::ArgMin, x, axis, keepdims, Location::caller())
    }

    fn arg_reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axis: Option<isize>,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let axes = axis.map_or(Axes::All, |a| Axes::List(vec![a]));
        self.reduce(op, x, axes, keepdims, loc)
    }

    /// A reduction over `axes` (negative ones count from the end); all/any and the arg ops
    /// are reductions too.
    pub(crate) fn reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axes: Axes,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let from = &self.arg(x, op.name(), loc)?.shape;
        let list = match &axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let (axes, out) = reduce::reduce_shape(from, list, keepdims)
            .map_err(|m| Error::build(op.name(), loc, m).of_shapes(&[from]))?;
        let site = Site::new(op.name(), loc);
        self.add_op(
            Op::Reduce(Reduce { op, axes }),
            &[x],
            Declared::shape(&out),
            site,
        )
    }
}
