//! Scans: cumulative sums and products along one axis (NumPy's `cumsum`/`cumprod`), with
//! TensorFlow's `exclusive` (each output leaves out its own element) and `reverse` (from the
//! end of the axis) options.
//!
//! Results are sequential in the axis order, like NumPy's, within chunks of [`SCAN_CHUNK`]
//! elements: a long axis runs as three kernels (each chunk's total; an exclusive scan of the
//! totals; each chunk scanned from its prefix), so that no invocation loops more than
//! [`SCAN_CHUNK`] times (see [`super::LOOP_LIMIT`]) and long axes spread over many
//! invocations. Integers wrap; NaN propagates. `cpu:0` runs the same passes in the same order.
//!
//! Graph files:
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `cumsum` `cumprod` | 1 | `axis`; `exclusive`, `reverse`: booleans |

use super::family::{
    Arg, Arity, Declared, Family, GradCx, KernelClass, KernelDef, LowerCx, Lowered, Reject,
};
use super::Kernel;
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, Shape};
use file::ScanAttrs;

mod file;
mod grad;
mod reference;
mod wgsl;

/// Elements one invocation scans (the longest loop of a scan kernel).
pub const SCAN_CHUNK: usize = 2048;

/// How a scan combines elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanOp {
    Sum,
    Prod,
}

impl ScanOp {
    pub const ALL: [ScanOp; 2] = [ScanOp::Sum, ScanOp::Prod];

    pub fn name(self) -> &'static str {
        match self {
            ScanOp::Sum => "cumsum",
            ScanOp::Prod => "cumprod",
        }
    }

    fn identity(self, d: DType) -> u32 {
        match (self, d) {
            (ScanOp::Sum, _) => 0,
            (ScanOp::Prod, DType::F32 | DType::F16) => 1.0f32.to_bits(),
            (ScanOp::Prod, DType::I32 | DType::U32 | DType::Bool) => 1,
        }
    }

    fn combine(self, d: DType, a: u32, b: u32) -> u32 {
        match (self, d) {
            (ScanOp::Sum, DType::F32 | DType::F16) => {
                (f32::from_bits(a) + f32::from_bits(b)).to_bits()
            }
            (ScanOp::Prod, DType::F32 | DType::F16) => {
                (f32::from_bits(a) * f32::from_bits(b)).to_bits()
            }
            (ScanOp::Sum, DType::I32 | DType::U32 | DType::Bool) => a.wrapping_add(b),
            // The low 32 bits of a product are the same signed or unsigned.
            (ScanOp::Prod, DType::I32 | DType::U32 | DType::Bool) => a.wrapping_mul(b),
        }
    }
}

/// The dtypes a scan accepts (f16 and bool accumulate in another type in NumPy; cast first).
pub fn check_dtype(op: ScanOp, d: DType) -> Result<(), Reject> {
    match d {
        DType::F32 | DType::I32 | DType::U32 => Ok(()),
        DType::F16 | DType::Bool => Err(Reject::dtype(format!(
            "{} of {d} is not supported (expects f32, i32 or u32; cast first)",
            op.name()
        ))),
    }
}

/// A scan of the input along `axis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scan {
    pub op: ScanOp,
    pub axis: usize,
    /// Output `k` folds the elements before `k` only (the first output is the identity).
    pub exclusive: bool,
    /// Scan from the end of the axis.
    pub reverse: bool,
}

/// Which part of a chunked scan a kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanPass {
    /// The whole axis in one chunk: `out` has the input's shape.
    Whole,
    /// Each chunk's fold: `out` is `[outer, chunks, inner]`.
    Totals,
    /// Each chunk scanned starting from input 1, the exclusive scan of the totals.
    FromPrefix,
}

/// A scan kernel over the input viewed as `[outer, n, inner]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanKernel {
    pub op: ScanOp,
    pub exclusive: bool,
    pub reverse: bool,
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    pub dtype: DType,
    pub pass: ScanPass,
}

impl ScanKernel {
    fn chunk(&self) -> usize {
        match self.pass {
            ScanPass::Whole => self.n.max(1),
            ScanPass::Totals | ScanPass::FromPrefix => SCAN_CHUNK,
        }
    }

    fn chunks(&self) -> usize {
        self.n.div_ceil(self.chunk()).max(1)
    }

    fn invocations(&self) -> u64 {
        (self.outer * self.chunks() * self.inner) as u64
    }
}

/// `[outer, n, inner]` of `shape` around `axis`.
fn split_at_axis(shape: &Shape, axis: usize) -> (usize, usize, usize) {
    let dims = shape.dims();
    let outer = dims[..axis].iter().product();
    let inner = dims[axis + 1..].iter().product();
    (outer, dims[axis], inner)
}

impl Scan {
    fn kernel(&self, outer: usize, n: usize, inner: usize, d: DType, pass: ScanPass) -> ScanKernel {
        ScanKernel {
            op: self.op,
            exclusive: self.exclusive,
            reverse: self.reverse,
            outer,
            n,
            inner,
            dtype: d,
            pass,
        }
    }

    /// The exclusive scan of `totals` (`[outer, chunks, inner]`) along its middle axis, as
    /// partial passes: each chunk's starting value.
    fn prefixes(&self, cx: &mut LowerCx<'_>, totals: Arg, shape: (usize, usize, usize)) -> Arg {
        let (outer, n, inner) = shape;
        let d = cx.dtype;
        let of_totals = Scan {
            exclusive: true,
            ..*self
        };
        let full = Shape(vec![outer, n, inner]);
        if n <= SCAN_CHUNK {
            let k = of_totals.kernel(outer, n, inner, d, ScanPass::Whole);
            return cx.partial(Kernel::Scan(k), full, vec![totals]);
        }
        let chunks = n.div_ceil(SCAN_CHUNK);
        let k = of_totals.kernel(outer, n, inner, d, ScanPass::Totals);
        let tt = cx.partial(
            Kernel::Scan(k),
            Shape(vec![outer, chunks, inner]),
            vec![totals],
        );
        let pp = of_totals.prefixes(cx, tt, (outer, chunks, inner));
        let k = of_totals.kernel(outer, n, inner, d, ScanPass::FromPrefix);
        cx.partial(Kernel::Scan(k), full, vec![totals, pp])
    }
}

impl Family for Scan {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(1)
    }

    /// The input's shape and dtype, for f32, i32 and u32 along an existing axis.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        let [(shape, dtype)] = inputs else {
            return Err(Reject::from(format!("{} takes one input", self.name())));
        };
        if self.axis >= shape.rank() {
            return Err(Reject::from(format!(
                "axis {} is out of range for shape {shape}",
                self.axis
            )));
        }
        check_dtype(self.op, *dtype)?;
        Ok((shape.clone(), *dtype))
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        out.attrs(&self.attrs())
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        let op = ScanOp::ALL.into_iter().find(|s| s.name() == node.op)?;
        Some(node.attrs::<ScanAttrs>().map(|a| Scan {
            op,
            axis: a.axis.get(),
            exclusive: a.exclusive,
            reverse: a.reverse,
        }))
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        g.cumulative(
            self.op,
            x[0],
            self.axis as isize,
            self.exclusive,
            self.reverse,
        )
    }

    /// cumsum: the scan of `dy` in the other direction with the same `exclusive` option
    /// (`x_j` reaches the outputs at and after `j` in scan order). cumprod: see
    /// [`Scan::prod_grad`].
    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        if !cx.wants(0) {
            return Ok(vec![None]);
        }
        let dx = match self.op {
            ScanOp::Sum => self.back(g, cx.dy)?,
            ScanOp::Prod => self.prod_grad(g, cx)?,
        };
        Ok(vec![Some(dx)])
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let (outer, n, inner) = split_at_axis(cx.in_shape(0), self.axis);
        let d = cx.dtype;
        if n <= SCAN_CHUNK {
            let k = self.kernel(outer, n, inner, d, ScanPass::Whole);
            return Ok(cx.dispatch(Kernel::Scan(k)));
        }
        let chunks = n.div_ceil(SCAN_CHUNK);
        let k = self.kernel(outer, n, inner, d, ScanPass::Totals);
        let x = cx.args[0];
        let totals = cx.partial(Kernel::Scan(k), Shape(vec![outer, chunks, inner]), vec![x]);
        let prefix = self.prefixes(cx, totals, (outer, chunks, inner));
        Ok(Lowered::Dispatch {
            kernel: Kernel::Scan(self.kernel(outer, n, inner, d, ScanPass::FromPrefix)),
            inputs: vec![x, prefix],
        })
    }
}

impl KernelDef for ScanKernel {
    fn kind(&self) -> &'static str {
        "scan"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Reduce
    }

    // One combine per element of the scanned axis.
    fn flops(&self, _out_elements: u64) -> Option<u64> {
        Some((self.outer * self.n * self.inner) as u64)
    }

    fn describe(&self) -> String {
        let pass = match self.pass {
            ScanPass::Whole => "",
            ScanPass::Totals => " (chunk totals)",
            ScanPass::FromPrefix => " (chunks from their prefixes)",
        };
        format!(
            "{}{}{} of [{}, {}, {}]{pass}",
            if self.exclusive { "exclusive " } else { "" },
            if self.reverse { "reverse " } else { "" },
            self.op.name(),
            self.outer,
            self.n,
            self.inner
        )
    }

    fn wgsl(&self) -> String {
        ScanKernel::wgsl(self)
    }

    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        ScanKernel::run_reference(self, inputs)
    }

    fn invocations(&self) -> u64 {
        ScanKernel::invocations(self)
    }

    fn loop_iterations(&self) -> Option<u64> {
        Some(self.chunk() as u64)
    }
}
