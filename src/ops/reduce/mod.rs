//! Reductions over a set of axes (keepdims or not): sum, mean, max, min, prod, all, any, and
//! argmax/argmin (the index of the first extreme in row-major order of the reduced axes).
//! var, std and logsumexp are composites in `graph/build/composite.rs`.

use crate::dtype::{f16_to_f32_word, f32_to_f16_word};
use crate::ops::elementwise::binary_cpu;
use crate::ops::family::{
    Arity, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef, LowerCx, Lowered, Reject,
};
use crate::ops::wgsl::Writer;
use crate::ops::{BinaryOp, ElementwiseKernel, Epilogue, Expr, Kernel};
use crate::{DType, Shape};

mod cpu;
mod grad;
mod reference;
mod wgsl;
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod file;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    /// Logical and over bool input.
    All,
    /// Logical or over bool input.
    Any,
    /// Row-major index (i32) of the first maximum among the reduced elements; a NaN counts as
    /// the maximum, so the first NaN's index is returned (NumPy's rule).
    ArgMax,
    /// Like `ArgMax` for the minimum; the first NaN wins as well.
    ArgMin,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 9] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
        ReduceOp::All,
        ReduceOp::Any,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }

    /// Whether the op returns an index rather than a folded value.
    pub fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }

    /// The output dtype for an input of dtype `d`.
    pub fn out_dtype(self, d: DType) -> DType {
        match self {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I32,
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod => d,
        }
    }
}

/// Shape rule: `axes` (possibly negative, possibly `None` for all) against `input`.
/// Returns the sorted, de-duplicated axes and the output shape.
pub fn reduce_shape(
    input: &Shape,
    axes: Option<&[isize]>,
    keepdims: bool,
) -> Result<(Vec<usize>, Shape), String> {
    let mut resolved = Vec::new();
    match axes {
        None => resolved.extend(0..input.rank()),
        Some(list) => {
            for &a in list {
                let ax = input.axis(a).ok_or_else(|| {
                    format!(
                        "axis {a} is out of range for shape {input} (rank {})",
                        input.rank()
                    )
                })?;
                if resolved.contains(&ax) {
                    return Err(format!("axis {a} is repeated in {list:?}"));
                }
                resolved.push(ax);
            }
        }
    }
    resolved.sort_unstable();
    let dims = input
        .dims()
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (resolved.contains(&i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect::<Vec<_>>();
    Ok((resolved, Shape(dims)))
}

/// NumPy's rule for empty reductions: max, min, argmax and argmin have no identity, so
/// reducing a zero-size axis into a non-empty result is an error naming the axis.
pub fn check_empty(op: ReduceOp, input: &Shape, axes: &[usize], out: &Shape) -> Result<(), String> {
    let empty = axes.iter().find(|&&a| input.dims()[a] == 0);
    match empty {
        Some(a)
            if out.numel() > 0
                && matches!(
                    op,
                    ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
                ) =>
        {
            Err(format!(
                "axis {a} of shape {input} has size zero: {} of an empty sequence has no value",
                op.name()
            ))
        }
        _ => Ok(()),
    }
}

/// Elementwise work fused in front of a reduction (set by fusion): the reduced values are
/// `expr` over `inputs`, each broadcast to the reduction's input shape, computed as they are
/// loaded, so they never reach memory (`sum(x * x)`, softmax's `sum(exp(x - max))`).
#[derive(Debug, Clone, PartialEq)]
pub struct Prologue {
    pub expr: Expr,
    pub inputs: Vec<(Shape, DType)>,
}

/// A reduction of one input over `axes` (sorted, unique).
#[derive(Debug, Clone, PartialEq)]
pub struct ReduceKernel {
    pub op: ReduceOp,
    pub in_shape: Shape,
    pub dtype: DType,
    pub axes: Vec<usize>,
    pub out_shape: Shape,
    /// Elementwise work applied to each result before it is stored (set by fusion); its
    /// extra inputs have the output's shape or one element.
    pub epilogue: Option<Epilogue>,
    /// Elementwise work that produces the reduced values (set by fusion). Its inputs take
    /// the reduced tensor's place among the kernel's inputs.
    pub prologue: Option<Box<Prologue>>,
    /// Which part of a split reduction this kernel computes (set by lowering, see
    /// [`ReduceKernel::passes`]).
    pub pass: Pass,
}

/// Long reductions run as several kernels, so that no invocation loops over more than a few
/// thousand elements. Besides spreading the work over many workgroups, this is what keeps
/// results right on Mesa's llvmpipe/lavapipe: it ends every loop of an invocation after
/// 65,535 iterations in total (gallivm's loop limiter), silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Pass {
    /// The whole reduction in one kernel.
    #[default]
    Whole,
    /// Folds the reduced elements (in row-major order of the reduced axes) in `chunk`-long
    /// pieces, the last one taking the remainder: the output is the kept dims followed by
    /// one axis of `max(1, count / chunk)` partial results. `Mean` folds as `Sum`; an arg op
    /// returns each piece's winning index among all reduced elements.
    Partial { chunk: usize },
    /// `Mean` over partial sums that cover `count` elements.
    MeanOfPartials { count: usize },
    /// argmax/argmin over the winners of `chunks` pieces: reads the original sources and,
    /// in the binding after them, the partial pass's indices.
    ArgOfPartials { chunks: usize },
}

impl ReduceKernel {
    fn split(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>) {
        let strides = self.in_shape.strides();
        let (mut kd, mut ks, mut rd, mut rs) = (vec![], vec![], vec![], vec![]);
        for (i, &d) in self.in_shape.dims().iter().enumerate() {
            if self.axes.contains(&i) {
                rd.push(d);
                rs.push(strides[i]);
            } else {
                kd.push(d);
                ks.push(strides[i]);
            }
        }
        (kd, ks, rd, rs)
    }

    /// Number of input elements folded into each output element.
    pub fn reduced_count(&self) -> usize {
        self.axes.iter().map(|&a| self.in_shape.dims()[a]).product()
    }

    /// Kernel inputs that feed the reduced values: the prologue's inputs, or the tensor.
    pub fn sources(&self) -> usize {
        self.prologue.as_ref().map_or(1, |p| p.inputs.len())
    }
}

/// The row-major offset of element `linear` of `dims` laid out with `strides`.
fn offset(linear: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut rem = linear;
    let mut off = 0;
    for k in (0..dims.len()).rev() {
        off += (rem % dims[k]) * strides[k];
        rem /= dims[k];
    }
    off
}

/// How a reduction walks its input. The CPU kernel follows the same order as the WGSL one,
/// so sums agree bit for bit between `cpu:0` and every GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceStrategy {
    /// One invocation per output, looping over the reduced axes in row-major order.
    Loop,
    /// Contiguous rows whose length divides by 4: one invocation per row with vec4 loads into
    /// four lane accumulators, folded as `(l0 ∘ l1) ∘ (l2 ∘ l3)`. Many short rows.
    RowsVec4,
    /// Few long contiguous rows: a workgroup of 256 per row; thread `t` folds elements `t`,
    /// `t + 256`, … (coalesced), then a tree in workgroup memory.
    Tree,
}

/// Rows at least this long, when there are at most [`TREE_MAX_ROWS`] of them, use a tree.
const TREE_MIN_LEN: usize = 4096;
const TREE_MAX_ROWS: usize = 64;
const TREE_WG: usize = 256;
/// Elements a [`Pass::Partial`] chunk holds, per strategy: every invocation loops at most
/// twice this (over vec4s for `RowsVec4`, per thread for `Tree`), far below llvmpipe's
/// 65,535-iteration limit, and sums stay accurate (each thread adds at most 64 terms in a
/// tree, or blocks of [`SUM_BLOCK`]).
const LOOP_CHUNK: usize = 4096;
const VEC4_CHUNK: usize = 4 * 1024;
const TREE_CHUNK: usize = TREE_WG * 64;
/// Arg reductions run at most two passes, so the second reads at most this many winners.
const MAX_ARG_CHUNKS: usize = 16384;
/// Sums add this many terms into a block sum before adding the block to the total.
const SUM_BLOCK: usize = 64;

/// Chunk `c`'s half-open range of `count` reduced elements: `chunk` long, the last one
/// `count - (chunks - 1) * chunk` long (so at least `chunk`).
fn chunk_range(c: usize, chunk: usize, chunks: usize, count: usize) -> (usize, usize) {
    let lo = c * chunk;
    (lo, if c + 1 == chunks { count } else { lo + chunk })
}

/// The additive identity that keeps a sum of `-0.0`s at `-0.0` (as NumPy's is).
fn sum_identity(d: DType) -> u32 {
    match d {
        DType::F32 | DType::F16 => 0x8000_0000,
        _ => 0,
    }
}

impl ReduceKernel {
    /// The strategy this kernel uses (chosen by shape; the same on every device).
    pub fn strategy(&self) -> ReduceStrategy {
        self.fast_path().map_or(ReduceStrategy::Loop, |(s, _)| s)
    }

    /// Invocations of the WGSL kernel.
    pub fn invocations(&self) -> u64 {
        let n = self.out_shape.numel() as u64;
        match self.strategy() {
            ReduceStrategy::Tree => n * TREE_WG as u64,
            _ => n,
        }
    }

    /// `(chunk length, chunks)` of the reduced elements each output folds.
    fn chunking(&self) -> (usize, usize) {
        let r = self.reduced_count();
        match self.pass {
            Pass::Partial { chunk } => (chunk, (r / chunk.max(1)).max(1)),
            _ => (r, 1),
        }
    }

    /// Number of kept (not reduced) positions.
    fn kept(&self) -> usize {
        self.in_shape.numel() / self.reduced_count().max(1)
    }

    /// A vectorised or tree strategy and the row length, when the reduced axes are the
    /// trailing ones (each output folds one contiguous row) and the op folds values.
    fn fast_path(&self) -> Option<(ReduceStrategy, usize)> {
        let rank = self.in_shape.rank();
        let trailing = self
            .axes
            .iter()
            .enumerate()
            .all(|(i, &a)| a == rank - self.axes.len() + i);
        let folds = matches!(
            self.op,
            ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min
        );
        if self.axes.is_empty() || !trailing || !folds || !self.dtype.is_numeric() {
            return None;
        }
        let r = self.reduced_count();
        let rows = self.kept();
        if r >= TREE_MIN_LEN && rows <= TREE_MAX_ROWS {
            Some((ReduceStrategy::Tree, r))
        } else if r >= 8 && r.is_multiple_of(4) {
            Some((ReduceStrategy::RowsVec4, r))
        } else {
            None
        }
    }

    /// The kernels this reduction runs as, in order: itself when every invocation's loop is
    /// short, else partial passes over chunks and a final pass (see [`Pass`]). Each fold pass
    /// reads the previous one's output; an [`Pass::ArgOfPartials`] pass reads the original
    /// sources and then the partial indices.
    pub fn passes(self) -> Vec<ReduceKernel> {
        let r = self.reduced_count();
        if self.op.is_arg() {
            let chunk = LOOP_CHUNK.max(r.div_ceil(MAX_ARG_CHUNKS));
            if r < 2 * chunk || self.pass != Pass::Whole {
                return vec![self];
            }
            let chunks = r / chunk;
            let partial = ReduceKernel {
                pass: Pass::Partial { chunk },
                out_shape: self.partial_shape(chunks),
                ..self.clone()
            };
            let last = ReduceKernel {
                pass: Pass::ArgOfPartials { chunks },
                ..self
            };
            return vec![partial, last];
        }
        let chunk = match self.strategy() {
            ReduceStrategy::Tree => TREE_CHUNK,
            ReduceStrategy::RowsVec4 => VEC4_CHUNK,
            ReduceStrategy::Loop => LOOP_CHUNK,
        };
        if r < 2 * chunk || matches!(self.pass, Pass::Partial { .. }) {
            return vec![self];
        }
        let chunks = r / chunk;
        let mean_count = match self.pass {
            Pass::MeanOfPartials { count } => count,
            _ => r,
        };
        let partial = ReduceKernel {
            op: if self.op == ReduceOp::Mean {
                ReduceOp::Sum
            } else {
                self.op
            },
            pass: Pass::Partial { chunk },
            out_shape: self.partial_shape(chunks),
            epilogue: None,
            ..self.clone()
        };
        let in_shape = partial.out_shape.clone();
        let rest = ReduceKernel {
            axes: vec![in_shape.rank() - 1],
            in_shape,
            prologue: None,
            pass: if self.op == ReduceOp::Mean {
                Pass::MeanOfPartials { count: mean_count }
            } else {
                Pass::Whole
            },
            ..self
        };
        let mut all = vec![partial];
        all.extend(rest.passes());
        all
    }

    /// The kept dims followed by `chunks`.
    fn partial_shape(&self, chunks: usize) -> Shape {
        let mut dims: Vec<usize> = (0..self.in_shape.rank())
            .filter(|a| !self.axes.contains(a))
            .map(|a| self.in_shape.dims()[a])
            .collect();
        dims.push(chunks);
        Shape(dims)
    }

    /// How many elements a `Mean` divides by.
    fn mean_count(&self) -> usize {
        match self.pass {
            Pass::MeanOfPartials { count } => count,
            _ => self.reduced_count(),
        }
    }

    fn combine_op(&self) -> BinaryOp {
        match self.op {
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Maximum,
            ReduceOp::Min => BinaryOp::Minimum,
            ReduceOp::Sum
            | ReduceOp::Mean
            | ReduceOp::All
            | ReduceOp::Any
            | ReduceOp::ArgMax
            | ReduceOp::ArgMin => BinaryOp::Add,
        }
    }

    fn is_sum(&self) -> bool {
        matches!(self.op, ReduceOp::Sum | ReduceOp::Mean)
    }
}

impl ReduceKernel {
    fn extra(&self) -> &[(Shape, DType)] {
        self.epilogue.as_ref().map_or(&[], |e| e.extra.as_slice())
    }

    /// Whether elementwise work can be fused after this reduction: it folds values (not an
    /// index or a truth value), so the epilogue sees the reduction's own dtype.
    pub fn takes_epilogue(&self) -> bool {
        self.epilogue.is_none()
            && matches!(
                self.op,
                ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min
            )
    }
}

// ---------------------------------------------------------------- the family

/// A reduction of its input over `axes` (sorted, non-negative); keepdims follows from the
/// node's rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduce {
    pub op: ReduceOp,
    pub axes: Vec<usize>,
}

impl Family for Reduce {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(1)
    }

    /// The input without the reduced axes, or with them as 1 when the declared shape keeps
    /// them; `all`/`any` take any dtype and give bool, arg ops give i32, the others keep
    /// their numeric dtype. Max, min and the arg ops of an empty axis have no value.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        let [(input, dtype)] = inputs else {
            return Err(Reject::from(format!(
                "takes 1 input, {} given",
                inputs.len()
            )));
        };
        let logical = matches!(self.op, ReduceOp::All | ReduceOp::Any);
        if !logical && !dtype.is_numeric() {
            return Err(Reject::dtype(format!(
                "dtype {dtype} is not supported (expects f32, i32 or u32)"
            )));
        }
        let sorted = self.axes.windows(2).all(|w| w[0] < w[1]);
        if !sorted || self.axes.iter().any(|&a| a >= input.rank()) {
            return Err(Reject::from(format!(
                "axes {:?} must be sorted, unique and below the rank of shape {input}",
                self.axes
            )));
        }
        let keep = |keepdims: bool| {
            let dims = input.dims().iter().enumerate();
            Shape(
                dims.filter_map(|(i, &d)| match (self.axes.contains(&i), keepdims) {
                    (false, _) => Some(d),
                    (true, true) => Some(1),
                    (true, false) => None,
                })
                .collect(),
            )
        };
        let out = match declared.shape {
            None => keep(false),
            Some(s) if *s == keep(false) || *s == keep(true) => s.clone(),
            Some(s) => {
                return Err(Reject::from(format!(
                    "reducing axes {:?} of shape {input} gives {} or (keeping them) {}, not {s}",
                    self.axes,
                    keep(false),
                    keep(true)
                )))
            }
        };
        check_empty(self.op, input, &self.axes, &out)?;
        Ok((out, self.op.out_dtype(*dtype)))
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let whole = ReduceKernel {
            prologue: None,
            epilogue: None,
            op: self.op,
            in_shape: cx.in_shape(0).clone(),
            dtype: cx.in_dtype(0),
            axes: self.axes.clone(),
            out_shape: cx.shape.clone(),
            pass: Pass::Whole,
        };
        let mut passes = whole.passes();
        let last = passes.pop().ok_or_else(|| {
            crate::Error::Internal(format!("reduction '{}' lowered to no kernel", cx.name))
        })?;
        // Partial passes: each reads the previous one's output (arg ops: i32 indices, the
        // node's dtype).
        let mut prev = cx.args[0];
        for p in passes {
            let shape = p.out_shape.clone();
            prev = cx.partial(Kernel::Reduce(p), shape, vec![prev]);
        }
        let inputs = match last.pass {
            Pass::ArgOfPartials { .. } => vec![cx.args[0], prev],
            _ => vec![prev],
        };
        Ok(Lowered::Dispatch {
            kernel: Kernel::Reduce(last),
            inputs,
        })
    }

    fn on_empty_input(&self, dtype: DType) -> EmptyInput {
        let one = match dtype {
            DType::F32 => 1.0f32.to_bits(),
            DType::F16 => 0x3c00,
            _ => 1,
        };
        match self.op {
            ReduceOp::Sum | ReduceOp::Any => EmptyInput::Fill(0),
            ReduceOp::Prod | ReduceOp::All => EmptyInput::Fill(one),
            // NumPy: the mean of nothing is NaN (with a warning); integer means give 0.
            ReduceOp::Mean => EmptyInput::Fill(match dtype {
                DType::F32 => f32::NAN.to_bits(),
                DType::F16 => 0x7e00,
                _ => 0,
            }),
            // Rejected when built: no identity.
            ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin => {
                EmptyInput::Impossible
            }
        }
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(self, g, node, x)
    }

    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        self.vjp(g, cx)
    }
}

impl KernelDef for ReduceKernel {
    fn kind(&self) -> &'static str {
        "reduce"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Reduce
    }

    fn flops(&self, _out_elements: u64) -> Option<u64> {
        Some(self.in_shape.numel() as u64)
    }

    fn epilogue_host(&self, extra: &[&Shape]) -> Option<(&Shape, DType, bool)> {
        let fits = extra
            .iter()
            .all(|s| *s == &self.out_shape || s.numel() == 1);
        Some((&self.out_shape, self.dtype, self.takes_epilogue() && fits))
    }

    fn set_epilogue(&mut self, epilogue: Option<Epilogue>) {
        self.epilogue = epilogue;
    }

    fn describe(&self) -> String {
        let of = match &self.prologue {
            None => self.in_shape.to_string(),
            Some(p) => format!("{} {}", p.expr.describe(), self.in_shape),
        };
        let pass = match self.pass {
            Pass::Whole => String::new(),
            Pass::Partial { chunk } => format!(" in chunks of {chunk}"),
            Pass::MeanOfPartials { count } => format!(" of partial sums of {count} elements"),
            Pass::ArgOfPartials { chunks } => format!(" among {chunks} chunk winners"),
        };
        let base = format!("{} over axes {:?} of {of}{pass}", self.op.name(), self.axes);
        match &self.epilogue {
            None => base,
            Some(e) => format!("{base} then {}", e.expr.describe()),
        }
    }

    fn wgsl(&self) -> String {
        ReduceKernel::wgsl(self)
    }

    fn uses_f16(&self) -> bool {
        let f16 = |ins: &[(Shape, DType)]| ins.iter().any(|(_, d)| *d == DType::F16);
        self.dtype == DType::F16
            || self.op.out_dtype(self.dtype) == DType::F16
            || self
                .prologue
                .as_ref()
                .is_some_and(|p| f16(&p.inputs) || p.expr.mentions(DType::F16))
            || self.epilogue.as_ref().is_some_and(Epilogue::uses_f16)
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        ReduceKernel::run_reference(self, inputs)
    }

    fn run_cpu_into(
        &self,
        inputs: &[crate::ops::family::CpuIn<'_>],
        out: &mut [u32],
    ) -> crate::Result<()> {
        ReduceKernel::run_cpu_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        ReduceKernel::invocations(self)
    }
}
