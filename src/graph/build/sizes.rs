//! `shape_of` and `size_of`: sizes as values (see `ops/sizes`).

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::sizes::Sizes;
use crate::ops::{Declared, Op};
use crate::{DType, Error, HostTensor, Result};
use std::panic::Location;

impl Graph {
    /// `x`'s dimensions as an i32 vector (`tf.shape`): a constant when they are known, else
    /// a value the session fills in from the run's sizes.
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{DType, Graph, HostTensor, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let x = g.placeholder_dyn("x", [None, Some(2)], DType::F32)?;
    /// let s = g.shape_of(x)?;
    /// let mut sess = Session::new(&g, SessionOptions::default())?;
    /// let v = HostTensor::new([3, 2], vec![0.0f32; 6])?;
    /// assert_eq!(sess.run(&[(x, v)], &[s])?[0].to_vec::<i32>()?, [3, 2]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn shape_of(&mut self, x: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        let node = self.arg(x, "shape_of", loc)?;
        if !node.dynamic {
            let dims: Vec<i32> = node
                .shape
                .dims()
                .iter()
                .map(|&d| i32::try_from(d))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| Error::build("shape_of", loc, "a dimension exceeds i32").of_value())?;
            let n = dims.len();
            return self.push_constant(HostTensor::new([n], dims)?, loc);
        }
        self.add_op(
            Op::Sizes(Sizes::ShapeOf),
            &[x],
            Declared::none(),
            Site::new("shape_of", loc),
        )
    }

    /// The product of `x`'s dimensions along `axes` (all of them when empty), a scalar of
    /// `dtype` (f32, f16, i32 or u32): a constant when they are known, else a value the
    /// session fills in from the run's sizes. A mean over a run-time batch divides by it.
    #[track_caller]
    pub fn size_of(&mut self, x: Tensor, axes: &[usize], dtype: DType) -> Result<Tensor> {
        let loc = Location::caller();
        self.size_of_at(x, axes, dtype, loc)
    }

    pub(crate) fn size_of_at(
        &mut self,
        x: Tensor,
        axes: &[usize],
        dtype: DType,
        loc: Loc,
    ) -> Result<Tensor> {
        let node = self.arg(x, "size_of", loc)?;
        if !dtype.is_numeric() {
            return Err(Error::build_dtype(
                "size_of",
                loc,
                format!("dtype {dtype} is not numeric"),
                &[dtype],
            ));
        }
        if let Some(&a) = axes.iter().find(|&&a| a >= node.shape.rank()) {
            return Err(Error::build(
                "size_of",
                loc,
                format!("axis {a} is out of range for rank {}", node.shape.rank()),
            )
            .of_shapes(&[&node.shape]));
        }
        if !node.dynamic {
            let dims = node.shape.dims();
            let n: f64 = if axes.is_empty() {
                dims.iter().map(|&d| d as f64).product()
            } else {
                axes.iter().map(|&a| dims[a] as f64).product()
            };
            return self.full(crate::Shape::scalar(), dtype, n);
        }
        let declared = Declared {
            shape: None,
            dtype: Some(dtype),
        };
        self.add_op(
            Op::Sizes(Sizes::SizeOf(axes.to_vec())),
            &[x],
            declared,
            Site::new("size_of", loc),
        )
    }
}
