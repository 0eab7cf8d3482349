//! Builders for indexing along an axis with a tensor of indices (`ops/index/`):
//! `gather_elements` and `scatter_elements`.

use crate::graph::{Graph, Site, Tensor};
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
            .of_shapes(&[shape])
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
                )
                .of_value());
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
            .of_shapes(&[shape])
        })?;
        self.add_op(
            Op::Index(Index::TopKIndices { axis, k, largest }),
            &[x],
            Declared::none(),
            Site::new("top_k", loc),
        )
    }
}

impl Graph {
    /// ONNX `GatherND` (`batch_dims = 0`), TensorFlow's `gather_nd`: each row of the last
    /// axis of `indices` (i32, `k` numbers, `1 <= k <= rank`) selects `data[i_0, …, i_k-1]`, a
    /// slice of `data.shape[k:]`; the output is `indices.shape[:-1] + data.shape[k:]`. Each
    /// number wraps once if negative and is then clamped to its dimension (as
    /// [`Graph::take`]). A composite: the numbers become one row index into `data` with its
    /// first `k` dimensions merged, then a `take`.
    #[track_caller]
    pub fn gather_nd(&mut self, data: Tensor, indices: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        self.static_only("gather_nd", &[data, indices], loc)?;
        let (linear, rows, _) = self.nd_rows("gather_nd", data, indices, loc)?;
        let dshape = self.arg(data, "gather_nd", loc)?.shape.clone();
        let k = self
            .arg(indices, "gather_nd", loc)?
            .shape
            .dims()
            .last()
            .copied()
            .unwrap_or(0);
        let mut flat: Vec<isize> = vec![rows as isize];
        flat.extend(dshape.dims()[k..].iter().map(|&d| d as isize));
        let d2 = self.reshape(data, &flat)?;
        self.take(d2, linear, 0)
    }

    /// ONNX `ScatterND`: `data` with each slice `updates[j]` (of `data.shape[k:]`) combined
    /// into `data[indices[j]]` as [`Graph::scatter_elements`] combines (replaced, the last
    /// wins; added; …). `updates` is `indices.shape[:-1] + data.shape[k:]`; indices follow
    /// [`Graph::gather_nd`]. A composite over `scatter_elements`, so it is deterministic.
    #[track_caller]
    pub fn scatter_nd(
        &mut self,
        data: Tensor,
        indices: Tensor,
        updates: Tensor,
        reduce: ScatterReduce,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        self.static_only("scatter_nd", &[data, indices, updates], loc)?;
        let (linear, rows, m) = self.nd_rows("scatter_nd", data, indices, loc)?;
        let dshape = self.arg(data, "scatter_nd", loc)?.shape.clone();
        let ishape = self.arg(indices, "scatter_nd", loc)?.shape.clone();
        let k = ishape.dims().last().copied().unwrap_or(0);
        let mut want = ishape.dims()[..ishape.rank() - 1].to_vec();
        want.extend(&dshape.dims()[k..]);
        let ushape = self.arg(updates, "scatter_nd", loc)?.shape.clone();
        if ushape.dims() != want.as_slice() {
            return Err(Error::build(
                "scatter_nd",
                loc,
                format!(
                    "updates {ushape} must be indices.shape[:-1] + data.shape[{k}:] = {}",
                    crate::Shape(want)
                ),
            )
            .of_shapes(&[&dshape, &ishape, &ushape]));
        }
        let r: usize = dshape.dims()[k..].iter().product();
        let d2 = self.reshape(data, &[rows as isize, r as isize])?;
        let l2 = self.reshape(linear, &[m as isize, 1])?;
        let l2 = self.broadcast_to(l2, &[m, r])?;
        let u2 = self.reshape(updates, &[m as isize, r as isize])?;
        let out = self.scatter_elements(d2, l2, u2, 0, reduce)?;
        let back: Vec<isize> = dshape.dims().iter().map(|&d| d as isize).collect();
        self.reshape(out, &back)
    }

    /// The row of `data` (first `k` dimensions merged) each index tuple selects, wrapped and
    /// clamped per number: `(rows [indices.shape[:-1]], number of rows, number of tuples)`.
    fn nd_rows(
        &mut self,
        op: &str,
        data: Tensor,
        indices: Tensor,
        loc: Loc,
    ) -> Result<(Tensor, usize, usize)> {
        let dshape = self.arg(data, op, loc)?.shape.clone();
        let inode = self.arg(indices, op, loc)?;
        let (ishape, idtype) = (inode.shape.clone(), inode.dtype);
        if idtype != DType::I32 {
            return Err(Error::build_dtype(
                op,
                loc,
                format!("indices must be i32, got {idtype}"),
                &[idtype],
            ));
        }
        let k = match ishape.dims().last() {
            Some(&k) if (1..=dshape.rank()).contains(&k) => k,
            _ => {
                return Err(Error::build(
                    op,
                    loc,
                    format!(
                        "the last dimension of indices {ishape} must be 1..={} (the rank of \
                         data {dshape})",
                        dshape.rank()
                    ),
                )
                .of_shapes(&[&dshape, &ishape]))
            }
        };
        let dims = &dshape.dims()[..k];
        if dims.contains(&0) {
            return Err(Error::build(
                op,
                loc,
                format!("indices select in an empty dimension of data {dshape}"),
            )
            .of_shapes(&[&dshape, &ishape]));
        }
        let rows: usize = dims.iter().product();
        if rows > i32::MAX as usize {
            return Err(Error::build(
                op,
                loc,
                format!("data {dshape} has more than 2^31 rows to index"),
            )
            .of_value());
        }
        let m = ishape.numel() / k;
        let vec = |g: &mut Graph, v: Vec<i32>| g.constant(crate::HostTensor::new([k], v)?);
        let n = vec(self, dims.iter().map(|&d| d as i32).collect())?;
        let hi = vec(self, dims.iter().map(|&d| d as i32 - 1).collect())?;
        let zero = vec(self, vec![0; k])?;
        let mut stride = vec![1i32; k];
        for j in (0..k.saturating_sub(1)).rev() {
            stride[j] = stride[j + 1] * dims[j + 1] as i32;
        }
        let stride = vec(self, stride)?;
        let neg = self.less(indices, zero)?;
        let wrapped = self.add(indices, n)?;
        let wrapped = self.select(neg, wrapped, indices)?;
        let clamped = self.minimum(wrapped, hi)?;
        let clamped = self.maximum(clamped, zero)?;
        let linear = self.matmul(clamped, stride)?;
        Ok((linear, rows, m))
    }
}
