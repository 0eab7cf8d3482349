//! Builders for indexing along an axis with a tensor of indices (`ops/index/`):
//! `gather_elements` and `scatter_elements`.

use super::{Graph, Site, Tensor};
use crate::ops::index::{Index, ScatterReduce};
use crate::ops::{Declared, Leaf, Op};
use crate::{DType, Error, Result};
use std::panic::Location;

type Loc = &'static Location<'static>;

impl Graph {
    /// `out[c] = x[c with c[axis] = indices[c]]` (NumPy's `take_along_axis`, PyTorch's
    /// `gather`, ONNX `GatherElements`): the output has the indices' shape and `x`'s dtype.
    /// `indices` are i32 of `x`'s rank, no larger than `x` in any dimension but `axis`;
    /// negative ones count from the end, constant ones outside `-n..n` are a build error and
    /// fed ones are clamped to the axis (a GPU kernel cannot raise), as for [`Graph::take`].
    #[track_caller]
    pub fn gather_elements(&mut self, x: Tensor, indices: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        let axis = self.index_axis("gather_elements", x, indices, axis, loc)?;
        let op = Op::Index(Index::GatherElements { axis });
        self.add_op(
            op,
            &[x, indices],
            Declared::none(),
            Site::new("gather_elements", loc),
        )
    }

    /// Start from `data` and combine each of `updates` into `out[c with c[axis] =
    /// indices[c]]` (ONNX `ScatterElements`, PyTorch's `scatter`/`scatter_reduce`): replaced
    /// (`ScatterReduce::None`: of several updates to one element the last in row-major order
    /// wins), added, multiplied, or the max or min taken. `updates` has the indices' shape
    /// and `data`'s dtype; indices follow [`Graph::gather_elements`]. Deterministic on every
    /// device: the same bits on every run (no atomics).
    #[track_caller]
    pub fn scatter_elements(
        &mut self,
        data: Tensor,
        indices: Tensor,
        updates: Tensor,
        axis: isize,
        reduce: ScatterReduce,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let axis = self.index_axis("scatter_elements", data, indices, axis, loc)?;
        let op = Op::Index(Index::ScatterElements { axis, reduce });
        self.add_op(
            op,
            &[data, indices, updates],
            Declared::none(),
            Site::new("scatter_elements", loc),
        )
    }

    /// [`Graph::scatter_elements`] with `ScatterReduce::Add`: `data` plus each update added at
    /// its index (PyTorch's `scatter_add`), in a fixed order on every device.
    #[track_caller]
    pub fn scatter_add(
        &mut self,
        data: Tensor,
        indices: Tensor,
        updates: Tensor,
        axis: isize,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let axis = self.index_axis("scatter_add", data, indices, axis, loc)?;
        let op = Op::Index(Index::ScatterElements {
            axis,
            reduce: ScatterReduce::Add,
        });
        self.add_op(
            op,
            &[data, indices, updates],
            Declared::none(),
            Site::new("scatter_add", loc),
        )
    }

    /// `axis` of `x` normalised, and constant indices checked against it.
    fn index_axis(
        &self,
        op: &str,
        x: Tensor,
        indices: Tensor,
        axis: isize,
        loc: Loc,
    ) -> Result<usize> {
        let shape = &self.arg(x, op, loc)?.shape;
        let k = shape.axis(axis).ok_or_else(|| {
            Error::build(
                op,
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
        })?;
        let n = shape.dims()[k] as i64;
        let index_node = self.arg(indices, op, loc)?;
        if let (Op::Leaf(Leaf::Constant(t)), DType::I32) = (&index_node.op, index_node.dtype) {
            if let Some(&bad) = t
                .words()
                .iter()
                .find(|&&w| !(-n..n).contains(&(w as i32 as i64)))
            {
                return Err(Error::build(
                    op,
                    loc,
                    format!(
                        "index {} is out of range for axis {axis} of size {n}",
                        bad as i32
                    ),
                ));
            }
        }
        Ok(k)
    }
}

impl Graph {
    /// The `k` largest (or smallest) elements along `axis` and their positions, best first:
    /// `(values, indices)` like `torch.topk` / ONNX `TopK` (sorted). Equal elements keep
    /// their order (the lower position first); NaN counts as larger than every number.
    /// f32, i32 or u32; `k` at most the axis' size. The values are a `gather_elements` of
    /// the positions, so gradients flow to the selected elements.
    #[track_caller]
    pub fn top_k(
        &mut self,
        x: Tensor,
        k: usize,
        axis: isize,
        largest: bool,
    ) -> Result<(Tensor, Tensor)> {
        let loc = Location::caller();
        let indices = self.top_k_at(x, k, axis, largest, loc)?;
        let axis = self.arg(x, "top_k", loc)?.shape.axis(axis).unwrap_or(0);
        let values = self.add_op(
            Op::Index(Index::GatherElements { axis }),
            &[x, indices],
            Declared::none(),
            Site::new("top_k", loc),
        )?;
        Ok((values, indices))
    }

    /// The positions alone of [`Graph::top_k`] (i32).
    #[track_caller]
    pub fn top_k_indices(
        &mut self,
        x: Tensor,
        k: usize,
        axis: isize,
        largest: bool,
    ) -> Result<Tensor> {
        self.top_k_at(x, k, axis, largest, Location::caller())
    }

    fn top_k_at(
        &mut self,
        x: Tensor,
        k: usize,
        axis: isize,
        largest: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let shape = &self.arg(x, "top_k", loc)?.shape;
        let axis = shape.axis(axis).ok_or_else(|| {
            Error::build(
                "top_k",
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
        })?;
        self.add_op(
            Op::Index(Index::TopKIndices { axis, k, largest }),
            &[x],
            Declared::none(),
            Site::new("top_k", loc),
        )
    }
}
