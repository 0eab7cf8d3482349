//! Segment sums: `segment_sum(data, ids, segments, axis)` adds the slices of `data` along
//! `axis` that share a segment id (TensorFlow's `unsorted_segment_sum`, JAX's
//! `segment_sum`, the gradient of an embedding lookup):
//!
//! `out[.., r, ..] = Σ data[.., j, ..]` over the positions `j` with `ids[j] == r`, in
//! ascending `j`. `ids` is a 1-D i32 tensor as long as `data`'s `axis`; an id outside
//! `0..segments` adds nothing (TensorFlow drops negative ids; a GPU kernel cannot raise, so
//! too-large ones are dropped too). f32, i32 and u32; integers wrap.
//!
//! **Deterministic**, without atomics and without a `[segments, positions]` matrix: the work
//! is `positions × row` plus a sort of the ids.
//!
//! * `cpu:0` runs one kernel ([`SegmentPass::Direct`]): each task owns a range of output
//!   rows and walks the positions in order, adding the rows that land in its range.
//! * A GPU sorts `(id, position)` pairs with a bitonic network ([`SegmentPass::Keys`], then
//!   one [`SegmentPass::Sort`] pass per compare-exchange stage, `log₂P·(log₂P+1)/2` passes
//!   for `P` positions rounded up to a power of two), then one invocation per output element
//!   finds its segment by binary search and adds its rows in sorted order
//!   ([`SegmentPass::Sum`], in windows of [`SEGMENT_CHUNK`] sorted positions so that no
//!   invocation loops past [`super::LOOP_LIMIT`]).
//!
//! Both add each output's rows in ascending position from zero, so every device gives the
//! same bits on every run.
//!
//! Graph files:
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `segment_sum` | 2 (data, ids) | `axis`, `segments` |

mod cpu;
mod file;
mod grad;
mod reference;
mod wgsl;

use super::family::{run_via_reference, CpuIn, LowerCx, Lowered, Reject};
use super::family::{Arity, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef};
use super::Kernel;
use crate::device::Device;
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, Shape};

/// Sorted positions one [`SegmentPass::Sum`] pass walks (its longest loop).
pub const SEGMENT_CHUNK: usize = 4096;

/// The family's op: a segment sum along `axis` into `segments` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    pub axis: usize,
    pub segments: usize,
}

/// What a [`SegmentKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentPass {
    /// `cpu:0`'s whole segment sum: inputs `(data, ids)`.
    Direct,
    /// The `(id, position)` pairs to sort, `[padded, 2]` u32 words: an id outside the
    /// segments, and the padding, get the id `segments` (sorted last, never summed). Input
    /// `(ids)`.
    Keys,
    /// One compare-exchange stage of the bitonic sort: element `i` and `i ^ stride`, in
    /// ascending order where `i & block == 0`. Input `(keys)`.
    Sort { block: usize, stride: usize },
    /// Each output element's rows among the sorted positions `lo..hi`, added to zero
    /// (`lo == 0`) or to the previous pass's result. Inputs `(keys, data)` or
    /// `(previous, keys, data)`.
    Sum { lo: usize, hi: usize },
}

/// One pass of a segment sum over `data` viewed as `[pre, positions, post]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentKernel {
    pub pass: SegmentPass,
    pub pre: usize,
    pub positions: usize,
    pub post: usize,
    pub segments: usize,
    /// The data's dtype.
    pub dtype: DType,
}

impl SegmentKernel {
    /// Positions rounded up to a power of two (the sort's length).
    pub fn padded(&self) -> usize {
        padded(self.positions)
    }

    /// Words of the output.
    fn out_len(&self) -> usize {
        match self.pass {
            SegmentPass::Keys | SegmentPass::Sort { .. } => 2 * self.padded(),
            SegmentPass::Direct | SegmentPass::Sum { .. } => self.pre * self.segments * self.post,
        }
    }
}

fn padded(positions: usize) -> usize {
    positions.max(1).next_power_of_two()
}

/// The dtypes a segment sum adds.
fn check_dtype(d: DType) -> Result<(), Reject> {
    match d {
        DType::F32 | DType::I32 | DType::U32 => Ok(()),
        _ => Err(Reject::dtype(format!(
            "segment_sum of {d} is not supported (expects f32, i32 or u32; cast first)"
        ))),
    }
}

impl Family for Segment {
    fn name(&self) -> &'static str {
        "segment_sum"
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(2)
    }

    /// `data`'s shape with `axis` of length `segments`; ids are 1-D i32 of `axis`' length.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        let [(data, dtype), (ids, idtype)] = inputs else {
            return Err("segment_sum takes data and segment ids".into());
        };
        check_dtype(*dtype)?;
        let Some(&m) = data.dims().get(self.axis) else {
            return Err(Reject::from(format!(
                "axis {} is out of range for data of shape {data}",
                self.axis
            )));
        };
        if *idtype != DType::I32 {
            return Err(Reject::dtype(format!(
                "segment ids must be i32, got {idtype}"
            )));
        }
        if ids.dims() != [m] {
            return Err(Reject::from(format!(
                "segment ids {ids} must be 1-D of the length of data {data} along axis {} ({m})",
                self.axis
            )));
        }
        if self.segments > u32::MAX as usize - 1 {
            return Err(Reject::from(format!(
                "{} segments is too many",
                self.segments
            )));
        }
        let mut dims = data.dims().to_vec();
        dims[self.axis] = self.segments;
        Ok((Shape(dims), *dtype))
    }

    fn rebinds(&self) -> bool {
        true
    }

    /// No positions: every segment is empty, so zeros.
    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        EmptyInput::Fill(0)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let dims = cx.in_shape(0).dims();
        let (pre, positions, post) = (
            dims[..self.axis].iter().product(),
            dims[self.axis],
            dims[self.axis + 1..].iter().product(),
        );
        let (segments, dtype) = (self.segments, cx.dtype);
        let kernel = |pass| SegmentKernel {
            pass,
            pre,
            positions,
            post,
            segments,
            dtype,
        };
        if cx.device == Device::Cpu {
            return Ok(cx.dispatch(Kernel::Segment(kernel(SegmentPass::Direct))));
        }
        let (data, ids) = (cx.args[0], cx.args[1]);
        let k = kernel(SegmentPass::Keys);
        let (p, m) = (k.padded(), k.positions);
        let key_shape = Shape(vec![p, 2]);
        let mut keys = cx.partial_as(Kernel::Segment(k), key_shape.clone(), DType::U32, vec![ids]);
        let mut block = 2;
        while block <= p {
            let mut stride = block / 2;
            while stride >= 1 {
                let k = kernel(SegmentPass::Sort { block, stride });
                keys = cx.partial_as(
                    Kernel::Segment(k),
                    key_shape.clone(),
                    DType::U32,
                    vec![keys],
                );
                stride /= 2;
            }
            block *= 2;
        }
        let (mut lo, mut prev) = (0, None);
        loop {
            let hi = (lo + SEGMENT_CHUNK).min(m);
            let k = Kernel::Segment(kernel(SegmentPass::Sum { lo, hi }));
            let mut inputs: Vec<_> = prev.into_iter().collect();
            inputs.extend([keys, data]);
            if hi == m {
                return Ok(Lowered::Dispatch { kernel: k, inputs });
            }
            prev = Some(cx.partial(k, cx.shape.clone(), inputs));
            lo = hi;
        }
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        out.attrs(&file::SegmentAttrs::of(self))
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        (node.op == "segment_sum").then(|| node.attrs::<file::SegmentAttrs>().map(|a| a.op()))
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        g.segment_sum(x[0], x[1], self.segments, self.axis as isize)
    }

    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        grad::grad(*self, g, cx)
    }
}

impl KernelDef for SegmentKernel {
    fn kind(&self) -> &'static str {
        match self.pass {
            SegmentPass::Keys | SegmentPass::Sort { .. } => "segment_sort",
            SegmentPass::Direct | SegmentPass::Sum { .. } => "segment_sum",
        }
    }

    fn class(&self) -> KernelClass {
        match self.pass {
            SegmentPass::Keys | SegmentPass::Sort { .. } => KernelClass::Movement,
            SegmentPass::Direct | SegmentPass::Sum { .. } => KernelClass::Reduce,
        }
    }

    fn flops(&self, _out_elements: u64) -> Option<u64> {
        match self.pass {
            SegmentPass::Keys | SegmentPass::Sort { .. } => None,
            SegmentPass::Direct => Some((self.pre * self.positions * self.post) as u64),
            SegmentPass::Sum { lo, hi } => Some((self.pre * (hi - lo) * self.post) as u64),
        }
    }

    fn describe(&self) -> String {
        let what = format!(
            "[{}, {}, {}] into {} segments",
            self.pre, self.positions, self.post, self.segments
        );
        match self.pass {
            SegmentPass::Direct => format!("segment_sum {what}"),
            SegmentPass::Keys => format!("segment_sum {what}: sort keys of {}", self.padded()),
            SegmentPass::Sort { block, stride } => {
                format!("segment_sum {what}: bitonic stage {block}/{stride}")
            }
            SegmentPass::Sum { lo, hi } => {
                format!("segment_sum {what}: sorted positions {lo}..{hi}")
            }
        }
    }

    fn wgsl(&self) -> String {
        wgsl::source(self)
    }

    fn uses_f16(&self) -> bool {
        false
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        reference::run(self, inputs)
    }

    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        match (self.pass, inputs) {
            (SegmentPass::Direct, [CpuIn::Words(data), CpuIn::Words(ids)]) => {
                cpu::direct(self, data, ids, out)
            }
            _ => run_via_reference(self, inputs, out),
        }
    }

    fn invocations(&self) -> u64 {
        match self.pass {
            SegmentPass::Keys | SegmentPass::Sort { .. } => self.padded() as u64,
            SegmentPass::Direct | SegmentPass::Sum { .. } => self.out_len() as u64,
        }
    }

    fn loop_iterations(&self) -> Option<u64> {
        match self.pass {
            SegmentPass::Keys | SegmentPass::Sort { .. } => None,
            SegmentPass::Direct => Some(self.positions as u64),
            // The binary search, then the window.
            SegmentPass::Sum { lo, hi } => Some((hi - lo) as u64 + 33),
        }
    }
}
