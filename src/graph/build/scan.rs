//! Builders of the scan family: cumulative sums and products along an axis.

use crate::graph::{Graph, Site, Tensor};
use crate::ops::{Declared, Op, Scan, ScanOp};
use crate::{Error, Result};
use std::panic::Location;

impl Graph {
    /// Cumulative sum along `axis` (NumPy's `cumsum`; f32, i32, u32; integers wrap).
    #[track_caller]
    pub fn cumsum(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        self.cumulative(ScanOp::Sum, x, axis, false, false)
    }

    /// Cumulative product along `axis` (NumPy's `cumprod`).
    #[track_caller]
    pub fn cumprod(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        self.cumulative(ScanOp::Prod, x, axis, false, false)
    }

    /// A cumulative sum or product along `axis` with TensorFlow's options: `exclusive` leaves
    /// each element out of its own output (the first output is 0 or 1), `reverse` scans from
    /// the end of the axis.
    #[track_caller]
    pub fn cumulative(
        &mut self,
        op: ScanOp,
        x: Tensor,
        axis: isize,
        exclusive: bool,
        reverse: bool,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let shape = &self.arg(x, op.name(), loc)?.shape;
        let axis = shape.axis(axis).ok_or_else(|| {
            Error::build(
                op.name(),
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
            .of_shapes(&[shape])
        })?;
        let scan = Scan {
            op,
            axis,
            exclusive,
            reverse,
        };
        self.add_op(
            Op::Scan(scan),
            &[x],
            Declared::none(),
            Site::new(op.name(), loc),
        )
    }
}
