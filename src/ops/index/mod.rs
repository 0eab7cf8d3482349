//! Indexing along one axis with a tensor of indices: `gather_elements` (NumPy's
//! `take_along_axis`, PyTorch's `gather`, ONNX `GatherElements`), `scatter_elements`
//! (ONNX `ScatterElements`, PyTorch's `scatter`/`scatter_add`/`scatter_reduce`), and the
//! indices of the `k` largest or smallest elements (`top_k`'s indices; its values are a
//! `gather_elements` of them).
//!
//! With `indices` of the same rank as `x` (every dimension but `axis` at most `x`'s):
//!
//! * `gather_elements(x, indices, axis)[c] = x[c with c[axis] = indices[c]]`; the output has
//!   the indices' shape.
//! * `scatter_elements(data, indices, updates, axis, reduce)` starts from `data` and, for
//!   every position `c` of `updates` (the indices' shape) in row-major order, combines
//!   `updates[c]` into `out[c with c[axis] = indices[c]]`: replaced (`none`; the last update
//!   of a position wins), added, multiplied, or the maximum or minimum taken.
//!
//! Indices are i32; a negative index counts from the end of the axis, and an index still
//! outside the axis is clamped to it, as `take` does (a GPU kernel cannot raise; constant
//! indices are checked when the node is built).
//!
//! **Deterministic**: no atomics. A scatter runs one invocation per output element, which
//! walks the updates that can reach it in order, so every device adds in the same order and
//! gives the same bits on every run; `cpu:0` walks the updates once, in the same order per
//! element. The cost is `data elements × indices' axis length` on a GPU: fine for the
//! ONNX-style uses (small axes), not meant for embedding-table gradients of 50k rows.
//! An axis longer than [`SCATTER_CHUNK`] runs as several passes over chunks of it, in order,
//! so no invocation loops past llvmpipe's limit ([`super::LOOP_LIMIT`]).
//!
//! Graph files:
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `gather_elements` | 2 (x, indices) | `axis` |
//! | `scatter_elements` | 3 (data, indices, updates) | `axis`, `reduce`: `none`, `add`, `mul`, `max` or `min` |
//! | `top_k_indices` | 1 | `axis`, `k`, `largest`: boolean |
//!
//! **Top k.** The output holds, along `axis`, the positions of the `k` largest (or smallest)
//! elements, best first; equal elements keep their order (the lower position first), and NaN
//! counts as larger than every number (PyTorch's rule), `-0.0` equal to `0.0`. A GPU computes
//! each element's rank by comparing it with its whole row (`n²` compares a row, no sorting
//! network, no shared memory), so an axis is limited to [`super::LOOP_LIMIT`] elements;
//! `cpu:0` sorts each row.

mod grad;
mod reference;
mod wgsl;

use super::family::{Arity, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef, Reject};
use super::family::{LowerCx, Lowered};
use super::Kernel;
use crate::graph::def::{NodeDef, NodeIn, NodeOut, UInt, MAX_RANK};
use crate::graph::{Graph, Tensor};
use crate::{DType, Shape};
use serde::{Deserialize, Serialize};

/// Positions of the indices' axis one scatter pass walks (its longest loop).
pub const SCATTER_CHUNK: usize = 4096;

/// How a scatter combines an update with what is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScatterReduce {
    /// Replace; of several updates to one position, the last in row-major order wins.
    None,
    Add,
    Mul,
    /// The larger (NaN if either is NaN).
    Max,
    /// The smaller (NaN if either is NaN).
    Min,
}

impl ScatterReduce {
    pub const ALL: [ScatterReduce; 5] = [
        ScatterReduce::None,
        ScatterReduce::Add,
        ScatterReduce::Mul,
        ScatterReduce::Max,
        ScatterReduce::Min,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScatterReduce::None => "none",
            ScatterReduce::Add => "add",
            ScatterReduce::Mul => "mul",
            ScatterReduce::Max => "max",
            ScatterReduce::Min => "min",
        }
    }
}

/// The family's ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Index {
    /// `gather_elements(x, indices)` along `axis`.
    GatherElements { axis: usize },
    /// `scatter_elements(data, indices, updates)` along `axis`.
    ScatterElements { axis: usize, reduce: ScatterReduce },
    /// The i32 positions of the `k` largest (or smallest) elements along `axis`, best first.
    TopKIndices {
        axis: usize,
        k: usize,
        largest: bool,
    },
}

/// What an [`IndexKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexKernelOp {
    Gather,
    /// The updates at positions `lo..hi` of the indices' axis (one pass of a scatter).
    Scatter {
        reduce: ScatterReduce,
        lo: usize,
        hi: usize,
    },
    /// Each element's rank in its row; the `k` best write their positions (`index` is the
    /// output's shape).
    TopK {
        largest: bool,
    },
}

/// One gather, one pass of a scatter, or a top-k: inputs `(x, indices)`, `(data, indices,
/// updates)` or `(x)`.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexKernel {
    pub op: IndexKernelOp,
    pub axis: usize,
    /// The shape of `x` (gather) or `data` (scatter).
    pub data: Shape,
    /// The shape of the indices (and of the updates, and of a gather's or top-k's output).
    pub index: Shape,
    pub dtype: DType,
}

impl IndexKernel {
    /// The output's shape: the indices' (gather) or the data's (scatter).
    pub fn out_shape(&self) -> &Shape {
        match self.op {
            IndexKernelOp::Gather | IndexKernelOp::TopK { .. } => &self.index,
            IndexKernelOp::Scatter { .. } => &self.data,
        }
    }

    /// The output's dtype: i32 positions for a top-k, else the data's.
    pub fn out_dtype(&self) -> DType {
        match self.op {
            IndexKernelOp::TopK { .. } => DType::I32,
            _ => self.dtype,
        }
    }

    /// The position along an axis of length `n` that an index word selects: negative
    /// indices count from the end, then the result is clamped to the axis.
    pub fn position(index: u32, n: usize) -> usize {
        let (k, n) = (index as i32 as i64, n as i64);
        (if k < 0 { k + n } else { k }).clamp(0, (n - 1).max(0)) as usize
    }
}

/// The dtypes a scatter with `reduce` accepts: replacing moves any dtype; reductions compute
/// on f32, i32 and u32.
fn check_reduce_dtype(reduce: ScatterReduce, d: DType) -> Result<(), Reject> {
    match (reduce, d) {
        (ScatterReduce::None, _) | (_, DType::F32 | DType::I32 | DType::U32) => Ok(()),
        _ => Err(Reject::dtype(format!(
            "scatter_elements with reduce '{}' on {d} is not supported (expects f32, i32 or \
             u32; cast first)",
            reduce.name()
        ))),
    }
}

/// The rule both ops share: indices of `index_shape`, i32, of `data`'s rank, every dimension
/// but `axis` at most `data`'s, and a non-empty axis to index unless there are no indices.
fn check_indices(
    data: &Shape,
    index: &(Shape, DType),
    axis: usize,
    what: &str,
) -> Result<(), Reject> {
    let (ishape, idtype) = index;
    if *idtype != DType::I32 {
        return Err(Reject::dtype(format!("indices must be i32, got {idtype}")));
    }
    if axis >= data.rank() {
        return Err(format!("axis {axis} is out of range for {what} of shape {data}").into());
    }
    if ishape.rank() != data.rank() {
        return Err(format!("indices {ishape} must have the rank of {what} {data}").into());
    }
    for (d, (&i, &x)) in ishape.dims().iter().zip(data.dims()).enumerate() {
        if d != axis && i > x {
            return Err(format!(
                "indices {ishape} are larger than {what} {data} in dimension {d} (only \
                 the axis {axis} may differ)"
            )
            .into());
        }
    }
    if ishape.numel() > 0 && data.dims()[axis] == 0 {
        return Err(format!(
            "indices {ishape} select along axis {axis} of {what} {data}, which is empty"
        )
        .into());
    }
    Ok(())
}

impl Family for Index {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        match self {
            Index::GatherElements { .. } => "gather_elements",
            Index::ScatterElements { .. } => "scatter_elements",
            Index::TopKIndices { .. } => "top_k_indices",
        }
    }

    fn arity(&self) -> Arity {
        match self {
            Index::GatherElements { .. } => Arity::Exactly(2),
            Index::ScatterElements { .. } => Arity::Exactly(3),
            Index::TopKIndices { .. } => Arity::Exactly(1),
        }
    }

    /// Gather: the indices' shape with `x`'s dtype. Scatter: `data`'s shape and dtype, with
    /// updates of the indices' shape and the data's dtype.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        match *self {
            Index::GatherElements { axis } => {
                let [(x, dtype), index] = inputs else {
                    return Err("gather_elements takes x and indices".into());
                };
                check_indices(x, index, axis, "x")?;
                Ok((index.0.clone(), *dtype))
            }
            Index::ScatterElements { axis, reduce } => {
                let [(data, dtype), index, (ushape, udtype)] = inputs else {
                    return Err("scatter_elements takes data, indices and updates".into());
                };
                check_indices(data, index, axis, "data")?;
                if *ushape != index.0 {
                    return Err(Reject::from(format!(
                        "updates {ushape} must have the indices' shape {}",
                        index.0
                    )));
                }
                if udtype != dtype {
                    return Err(Reject::dtype(format!(
                        "updates are {udtype} but data is {dtype} (cast first)"
                    )));
                }
                check_reduce_dtype(reduce, *dtype)?;
                Ok((data.clone(), *dtype))
            }
            Index::TopKIndices { axis, k, .. } => {
                let [(x, dtype)] = inputs else {
                    return Err("top_k takes one input".into());
                };
                if !matches!(dtype, DType::F32 | DType::I32 | DType::U32) {
                    return Err(Reject::dtype(format!(
                        "top_k of {dtype} is not supported (expects f32, i32 or u32)"
                    )));
                }
                let Some(&n) = x.dims().get(axis) else {
                    return Err(Reject::from(format!(
                        "axis {axis} is out of range for shape {x}"
                    )));
                };
                if k > n {
                    return Err(Reject::from(format!(
                        "k = {k} is larger than axis {axis} of {x}"
                    )));
                }
                if n as u64 > super::LOOP_LIMIT {
                    return Err(Reject::from(format!(
                        "top_k along an axis of {n} elements is not supported (at most {})",
                        super::LOOP_LIMIT
                    )));
                }
                let mut dims = x.dims().to_vec();
                dims[axis] = k;
                Ok((Shape(dims), DType::I32))
            }
        }
    }

    /// A gather of no indices is empty (handled before lowering). A scatter of no updates
    /// is its data: lowered as a view of it.
    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        match self {
            Index::GatherElements { .. } => EmptyInput::Impossible,
            Index::ScatterElements { .. } => EmptyInput::Lower,
            // k <= n, so an empty axis means an empty output.
            Index::TopKIndices { .. } => EmptyInput::Impossible,
        }
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let dtype = cx.dtype;
        match *self {
            Index::TopKIndices { axis, largest, .. } => {
                Ok(cx.dispatch(Kernel::Index(IndexKernel {
                    op: IndexKernelOp::TopK { largest },
                    axis,
                    data: cx.in_shape(0).clone(),
                    index: cx.shape.clone(),
                    dtype: cx.in_dtype(0),
                })))
            }
            Index::GatherElements { axis } => Ok(cx.dispatch(Kernel::Index(IndexKernel {
                op: IndexKernelOp::Gather,
                axis,
                data: cx.in_shape(0).clone(),
                index: cx.in_shape(1).clone(),
                dtype,
            }))),
            Index::ScatterElements { axis, reduce } => {
                let (data, index) = (cx.in_shape(0).clone(), cx.in_shape(1).clone());
                let n = index.dims()[axis];
                if index.numel() == 0 {
                    return Ok(Lowered::View(cx.args[0]));
                }
                let (idx, upd) = (cx.args[1], cx.args[2]);
                let pass = |lo: usize| IndexKernel {
                    op: IndexKernelOp::Scatter {
                        reduce,
                        lo,
                        hi: (lo + SCATTER_CHUNK).min(n),
                    },
                    axis,
                    data: data.clone(),
                    index: index.clone(),
                    dtype,
                };
                // Passes in axis order, each from the previous one's result.
                let mut acc = cx.args[0];
                let mut lo = 0;
                while lo + SCATTER_CHUNK < n {
                    let k = Kernel::Index(pass(lo));
                    acc = cx.partial(k, data.clone(), vec![acc, idx, upd]);
                    lo += SCATTER_CHUNK;
                }
                Ok(Lowered::Dispatch {
                    kernel: Kernel::Index(pass(lo)),
                    inputs: vec![acc, idx, upd],
                })
            }
        }
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        match *self {
            Index::GatherElements { axis } => out.attrs(&GatherAttrs {
                axis: UInt(axis as u64),
            }),
            Index::ScatterElements { axis, reduce } => out.attrs(&ScatterAttrs {
                axis: UInt(axis as u64),
                reduce,
            }),
            Index::TopKIndices { axis, k, largest } => out.attrs(&TopKAttrs {
                axis: UInt(axis as u64),
                k: UInt(k as u64),
                largest,
            }),
        }
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        match node.op {
            "gather_elements" => Some(
                node.attrs::<GatherAttrs>()
                    .map(|a| Index::GatherElements { axis: a.axis.get() }),
            ),
            "scatter_elements" => {
                Some(
                    node.attrs::<ScatterAttrs>()
                        .map(|a| Index::ScatterElements {
                            axis: a.axis.get(),
                            reduce: a.reduce,
                        }),
                )
            }
            "top_k_indices" => Some(node.attrs::<TopKAttrs>().map(|a| Index::TopKIndices {
                axis: a.axis.get(),
                k: a.k.get(),
                largest: a.largest,
            })),
            _ => None,
        }
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        match *self {
            Index::GatherElements { axis } => g.gather_elements(x[0], x[1], axis as isize),
            Index::ScatterElements { axis, reduce } => {
                g.scatter_elements(x[0], x[1], x[2], axis as isize, reduce)
            }
            Index::TopKIndices { axis, k, largest } => {
                g.top_k_indices(x[0], k, axis as isize, largest)
            }
        }
    }

    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        grad::grad(*self, g, cx)
    }
}

/// A gather's graph-file attributes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatherAttrs {
    axis: UInt<{ MAX_RANK as u64 }>,
}

/// A top-k's graph-file attributes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopKAttrs {
    axis: UInt<{ MAX_RANK as u64 }>,
    k: UInt<{ u32::MAX as u64 }>,
    largest: bool,
}

/// A scatter's graph-file attributes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScatterAttrs {
    axis: UInt<{ MAX_RANK as u64 }>,
    reduce: ScatterReduce,
}

impl KernelDef for IndexKernel {
    fn kind(&self) -> &'static str {
        match self.op {
            IndexKernelOp::Gather => "gather_elements",
            IndexKernelOp::Scatter { .. } => "scatter_elements",
            IndexKernelOp::TopK { .. } => "top_k",
        }
    }

    fn class(&self) -> KernelClass {
        KernelClass::Movement
    }

    fn describe(&self) -> String {
        match self.op {
            IndexKernelOp::Gather => format!(
                "gather_elements axis {} of {} at {}",
                self.axis, self.data, self.index
            ),
            IndexKernelOp::Scatter { reduce, lo, hi } => format!(
                "scatter_elements ({}) axis {} of {} into {}, positions {lo}..{hi}",
                reduce.name(),
                self.axis,
                self.index,
                self.data
            ),
            IndexKernelOp::TopK { largest } => format!(
                "top_k ({}) axis {} of {} to {}",
                if largest { "largest" } else { "smallest" },
                self.axis,
                self.data,
                self.index
            ),
        }
    }

    fn wgsl(&self) -> String {
        wgsl::source(self)
    }

    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        reference::run(self, inputs)
    }

    fn invocations(&self) -> u64 {
        match self.op {
            IndexKernelOp::TopK { .. } => self.data.numel() as u64,
            _ => self.out_shape().numel() as u64,
        }
    }

    fn loop_iterations(&self) -> Option<u64> {
        match self.op {
            IndexKernelOp::Gather => None,
            IndexKernelOp::Scatter { lo, hi, .. } => Some((hi - lo) as u64),
            IndexKernelOp::TopK { .. } => Some(self.data.dims()[self.axis] as u64),
        }
    }
}
