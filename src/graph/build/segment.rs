//! Builders of the segment family: sums of the slices that share a segment id.

use crate::graph::{Graph, Site, Tensor};
use crate::ops::{Declared, Op, Segment};
use crate::{Error, Result};
use std::panic::Location;

impl Graph {
    /// The sums of `data`'s slices along `axis` that share a segment id: `out[.., r, ..] =
    /// Σ data[.., j, ..]` over the positions `j` with `ids[j] == r` (TensorFlow's
    /// `unsorted_segment_sum`, JAX's `segment_sum`), with `segments` rows along `axis`.
    /// `ids` is 1-D i32, as long as `axis`; ids outside `0..segments` add nothing. f32, i32
    /// or u32. Deterministic: every device adds each row's slices in ascending position, so
    /// the bits are the same on every run and device, and no `[segments, positions]`
    /// intermediate is built (the gradient of `take`, an embedding lookup, is one).
    #[track_caller]
    pub fn segment_sum(
        &mut self,
        data: Tensor,
        ids: Tensor,
        segments: usize,
        axis: isize,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let shape = &self.arg(data, "segment_sum", loc)?.shape;
        let axis = shape.axis(axis).ok_or_else(|| {
            Error::build(
                "segment_sum",
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
            .of_shapes(&[shape])
        })?;
        self.add_op(
            Op::Segment(Segment { axis, segments }),
            &[data, ids],
            Declared::none(),
            Site::new("segment_sum", loc),
        )
    }
}
