//! Elementwise ops: unary, binary, select and cast, and the kernels over the `Expr` DAG that
//! fusion, codegen and the CPU backend share. A fused kernel is one `Expr` over indexed inputs, each read with
//! NumPy broadcasting against the kernel's output shape (broadcasting composes, so inlining a
//! producer into its consumer never changes which element an input supplies).

use super::family::{
    Arity, CpuIn, Declared, Family, GradCx, KernelClass, KernelDef, LowerCx, Lowered, Reject,
};
use super::Kernel;
use crate::graph::def::{NodeDef, NodeIn};
use crate::graph::{Graph, Tensor};
use crate::ops::wgsl::Writer;
use crate::{DType, Shape};

pub use reference::{binary_cpu, cast_cpu, unary_cpu};

mod cpu;
pub(crate) use cpu::RangeProgram;
pub mod expr;
pub mod file;
pub(crate) mod grad;
pub mod reference;
pub mod table;
pub(crate) mod vmath;
mod wgsl;

pub use expr::{Expr, Node};
pub use wgsl::expr_fn_wgsl;

/// Unary elementwise primitives.
///
/// `erf`, `log1p`, `expm1` and `softplus` have no WGSL builtin; both backends evaluate them
/// with the algorithms documented in [`reference`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    Relu,
    Floor,
    Ceil,
    /// Round half to even (NumPy's `round`/`rint`).
    Round,
    Sign,
    Reciprocal,
    Rsqrt,
    Log1p,
    Expm1,
    Sin,
    Cos,
    /// Tangent; ±inf at odd multiples of π/2 only where f32 reaches them (it never does
    /// exactly), NaN at ±inf.
    Tan,
    Erf,
    /// `log(1 + e^x)`, evaluated as `max(x, 0) + log1p(e^-|x|)` so it never overflows.
    Softplus,
    /// `x / (1 + |x|)`; ±1 at ±inf (the limit, where the formula would give inf/inf).
    Softsign,
    /// Inverse sine; NaN outside `[-1, 1]`.
    Asin,
    /// Inverse cosine; NaN outside `[-1, 1]`.
    Acos,
    /// Inverse tangent; `±π/2` at `±inf`.
    Atan,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine; NaN below 1.
    Acosh,
    /// Inverse hyperbolic tangent; `±inf` at `±1`, NaN outside `[-1, 1]`.
    Atanh,
    IsNan,
    IsInf,
    IsFinite,
    LogicalNot,
    /// `!x`, every bit flipped (i32, u32).
    BitNot,
    /// Rounded to the nearest bfloat16 (ties to even; NaN and ±inf kept), held in f32: how
    /// imported bfloat16 values are kept at bfloat16 precision between ops.
    RoundBf16,
    /// Rounded to the nearest value of a float8 or float4 format (ties to even), held in
    /// f32; past the format's largest finite value it becomes what the format's overflow
    /// gives ([`SmallFloat`]). How imported float8/float4 values keep their precision.
    RoundTo(SmallFloat),
}

/// The float8 and float4 formats ONNX defines, held in f32 between ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SmallFloat {
    /// 4 exponent bits, 3 mantissa bits; no infinity, largest 448; overflow is NaN.
    F8E4M3Fn,
    /// As `F8E4M3Fn` with exponent bias 8 and no -0; largest 240; overflow is NaN.
    F8E4M3FnUz,
    /// 5 exponent bits, 2 mantissa bits (IEEE-like); largest 57344; overflow is ±inf.
    F8E5M2,
    /// As `F8E5M2` with exponent bias 16, no infinity and no -0; overflow is NaN.
    F8E5M2FnUz,
    /// 2 exponent bits, 1 mantissa bit; no infinity or NaN: overflow saturates at ±6 and NaN
    /// becomes -0 (what `ml_dtypes`, onnx's reference, gives).
    F4E2M1,
}

/// How a [`SmallFloat`] rounds: `m` mantissa bits, smallest normal exponent `emin`, largest
/// finite value `max`; past it the f32 with bits `overflow` (signed as the input), a NaN
/// becomes bits `nan`, and `unsigned_zero` formats have no -0.
#[derive(Debug, Clone, Copy)]
pub struct SmallFloatRule {
    pub m: i32,
    pub emin: i32,
    pub max: f32,
    pub overflow: u32,
    pub nan: u32,
    pub unsigned_zero: bool,
}

impl SmallFloat {
    pub const ALL: [SmallFloat; 5] = [
        SmallFloat::F8E4M3Fn,
        SmallFloat::F8E4M3FnUz,
        SmallFloat::F8E5M2,
        SmallFloat::F8E5M2FnUz,
        SmallFloat::F4E2M1,
    ];

    pub fn rule(self) -> SmallFloatRule {
        const NAN: u32 = 0x7fc0_0000;
        const INF: u32 = 0x7f80_0000;
        let (m, emin, max, overflow, unsigned_zero) = match self {
            SmallFloat::F8E4M3Fn => (3, -6, 448.0, NAN, false),
            SmallFloat::F8E4M3FnUz => (3, -7, 240.0, NAN, true),
            SmallFloat::F8E5M2 => (2, -14, 57344.0, INF, false),
            SmallFloat::F8E5M2FnUz => (2, -15, 57344.0, NAN, true),
            SmallFloat::F4E2M1 => (1, 0, 6.0, 6.0f32.to_bits(), false),
        };
        let nan = if self == SmallFloat::F4E2M1 {
            0x8000_0000
        } else {
            NAN
        };
        SmallFloatRule {
            m,
            emin,
            max,
            overflow,
            nan,
            unsigned_zero,
        }
    }

    /// Whether the format has an infinity or NaN that overflow can produce (all but float4,
    /// which saturates).
    pub fn overflows(self) -> bool {
        self != SmallFloat::F4E2M1
    }
}

/// Binary elementwise primitives (both operands share one dtype).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Pow,
    Equal,
    Less,
    Greater,
    NotEqual,
    LessEqual,
    GreaterEqual,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    /// Division rounding toward negative infinity (NumPy's `//`; floats by `npy_divmod`).
    FloorDiv,
    /// Remainder with the sign of the divisor (NumPy's `%`; exact for floats).
    Remainder,
    /// `x & y` (i32, u32).
    BitAnd,
    /// `x | y` (i32, u32).
    BitOr,
    /// `x ^ y` (i32, u32).
    BitXor,
}

/// A strided window onto an input's buffer: a slice, flip, broadcast or transpose that fusion
/// folded into its consumer instead of copying. Element `c` of the input's (apparent) shape is
/// word `offset + Σ c_k · strides[k]` of the bound buffer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InputView {
    pub offset: i64,
    pub strides: Vec<i64>,
}

impl InputView {
    /// Strides over the dimensions of `out`, which `shape` (the apparent shape) broadcasts
    /// to: broadcast axes get stride 0.
    fn strides_over(&self, shape: &Shape, out: &Shape) -> Vec<i64> {
        let (r, ra) = (out.rank(), shape.rank());
        (0..r)
            .map(|k| match k.checked_sub(r - ra) {
                Some(a) if shape.dims()[a] != 1 => self.strides[a],
                _ => 0,
            })
            .collect()
    }
}

/// A fused elementwise kernel: `out = expr(inputs broadcast to out)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementwiseKernel {
    pub expr: Expr,
    pub inputs: Vec<(Shape, DType)>,
    pub out_shape: Shape,
    pub out_dtype: DType,
    /// Per input, a strided view of its buffer (empty, or `None` entries, when inputs are
    /// plain contiguous tensors).
    pub views: Vec<Option<InputView>>,
}

impl ElementwiseKernel {
    /// The same kernel reading input `keep` where it read input `drop` (which goes), when the
    /// two present the same elements: same dtype, no views, and shapes equal but for leading
    /// 1s (so they broadcast alike). For two inputs bound to one buffer range, which WebGPU
    /// (Dawn) refuses as aliasing writable bindings.
    pub fn merge_input(&self, keep: usize, drop: usize) -> Option<ElementwiseKernel> {
        let (a, b) = (self.inputs.get(keep)?, self.inputs.get(drop)?);
        let trimmed = |s: &Shape| {
            s.0.iter()
                .skip_while(|&&d| d == 1)
                .copied()
                .collect::<Vec<_>>()
        };
        if keep == drop
            || a.1 != b.1
            || trimmed(&a.0) != trimmed(&b.0)
            || self.view(keep).is_some()
            || self.view(drop).is_some()
        {
            return None;
        }
        let renumber = |i: usize| if i > drop { i - 1 } else { i };
        let expr = self
            .expr
            .substitute(&mut |i| Expr::input(renumber(if i == drop { keep } else { i })));
        let mut merged = self.clone();
        merged.expr = expr;
        merged.inputs.remove(drop);
        if drop < merged.views.len() {
            merged.views.remove(drop);
        }
        Some(merged)
    }

    /// Input `i`'s view, if it is read through one.
    pub fn view(&self, i: usize) -> Option<&InputView> {
        self.views.get(i).and_then(Option::as_ref)
    }

    /// Whether any input is read through a view.
    pub fn has_views(&self) -> bool {
        self.views.iter().any(Option::is_some)
    }
}

// ---------------------------------------------------------------- CPU kernels

/// Words per chunk of the CPU fast path (tests aim sizes at its boundaries).
#[doc(hidden)]
pub const CPU_CHUNK: usize = cpu::CHUNK;

/// Output words × steps from which the CPU fast path splits chunks across threads.
#[doc(hidden)]
pub const CPU_PARALLEL_WORK: usize = cpu::PARALLEL_WORK;

impl ElementwiseKernel {
    /// Evaluate on the CPU into a new vector: `inputs[i]` holds input `i`'s words in
    /// row-major order (its whole buffer when read through a view). Chunked, vectorized and
    /// parallel (see [`KernelDef::run_cpu_into`]).
    pub fn run_fast(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let mut out = vec![0; self.out_shape.numel()];
        let ins: Vec<CpuIn<'_>> = inputs.iter().map(|w| CpuIn::Words(w)).collect();
        match cpu::run(self, &ins, &mut out) {
            Ok(()) => out,
            // Inputs inconsistent with the kernel (an internal error upstream): the
            // reference reports them as it always has.
            Err(_) => self.reference(inputs),
        }
    }
}

// ---------------------------------------------------------------- the family

/// The elementwise primitives (fused into [`ElementwiseKernel`]s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elementwise {
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Select,
    /// Conversion to the dtype (saturating for float to integer).
    Cast(DType),
}

impl Elementwise {
    /// The op as an expression over inputs `0..arity`.
    pub fn expr(self) -> Expr {
        match self {
            Elementwise::Unary(u) => Expr::unary(u, Expr::input(0)),
            Elementwise::Binary(b) => Expr::binary(b, Expr::input(0), Expr::input(1)),
            Elementwise::Select => Expr::select(Expr::input(0), Expr::input(1), Expr::input(2)),
            Elementwise::Cast(d) => Expr::cast(d, Expr::input(0)),
        }
    }
}

impl Family for Elementwise {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        match self {
            Elementwise::Unary(u) => u.name(),
            Elementwise::Binary(b) => b.name(),
            Elementwise::Select => "where",
            Elementwise::Cast(_) => "cast",
        }
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(match self {
            Elementwise::Unary(_) | Elementwise::Cast(_) => 1,
            Elementwise::Binary(_) => 2,
            Elementwise::Select => 3,
        })
    }

    fn is_elementwise(&self) -> bool {
        true
    }

    /// Inputs broadcast together (NumPy's rules); no implicit promotion: binary operands and
    /// `where`'s branches share a dtype, `where`'s condition is bool.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        let unsupported = |d: DType, ok: &str| {
            Reject::dtype(format!("dtype {d} is not supported (expects {ok})"))
        };
        match (*self, inputs) {
            (Elementwise::Unary(op), [(s, d)]) => Ok((
                s.clone(),
                op.result_dtype(*d).map_err(|ok| unsupported(*d, ok))?,
            )),
            (Elementwise::Cast(to), [(s, _)]) => Ok((s.clone(), to)),
            (Elementwise::Binary(op), [(sa, da), (sb, db)]) => {
                let shape = Shape::broadcast(sa, sb)
                    .ok_or_else(|| format!("shapes {sa} and {sb} cannot broadcast"))?;
                if da != db {
                    return Err(Reject::dtype(format!("dtypes {da} and {db} differ; wgflow does not promote implicitly, cast one operand")));
                }
                Ok((
                    shape,
                    op.result_dtype(*da).map_err(|ok| unsupported(*da, ok))?,
                ))
            }
            (Elementwise::Select, [(sc, dc), (sa, da), (sb, db)]) => {
                if *dc != DType::Bool {
                    return Err(Reject::dtype(format!("condition must be bool, got {dc}")));
                }
                if da != db {
                    return Err(Reject::dtype(format!(
                        "branches have dtypes {da} and {db}; cast one explicitly"
                    )));
                }
                let shape = Shape::broadcast(sa, sb)
                    .and_then(|s| Shape::broadcast(sc, &s))
                    .ok_or_else(|| format!("shapes {sc}, {sa} and {sb} cannot broadcast"))?;
                Ok((shape, *da))
            }
            _ => Err(Reject::from(format!(
                "takes {} input(s), {} given",
                self.arity(),
                inputs.len()
            ))),
        }
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        Ok(cx.dispatch(Kernel::Elementwise(ElementwiseKernel::of(self.expr(), cx))))
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(*self, g, x)
    }

    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        self.vjp(g, cx)
    }
}

impl ElementwiseKernel {
    /// One node's kernel: `expr` over the node's inputs, unfused.
    pub fn of(expr: Expr, cx: &LowerCx<'_>) -> ElementwiseKernel {
        ElementwiseKernel {
            expr,
            inputs: cx.inputs.to_vec(),
            out_shape: cx.shape.clone(),
            out_dtype: cx.dtype,
            views: Vec::new(),
        }
    }
}

impl KernelDef for ElementwiseKernel {
    fn kind(&self) -> &'static str {
        "elementwise"
    }

    fn reads_at_output_index(&self, input: usize, output: &Shape) -> bool {
        self.inputs
            .get(input)
            .is_some_and(|(shape, _)| shape == output && self.view(input).is_none())
    }

    fn class(&self) -> KernelClass {
        KernelClass::Elementwise
    }

    fn flops(&self, out_elements: u64) -> Option<u64> {
        Some(out_elements)
    }

    fn describe(&self) -> String {
        let viewed: Vec<String> = (0..self.inputs.len())
            .filter(|&i| self.view(i).is_some())
            .map(|i| format!("in{i}"))
            .collect();
        if viewed.is_empty() {
            format!("elementwise {}", self.expr.describe())
        } else {
            format!(
                "elementwise {} (strided views of {})",
                self.expr.describe(),
                viewed.join(", ")
            )
        }
    }

    fn wgsl(&self) -> String {
        ElementwiseKernel::wgsl(self)
    }

    fn uses_f16(&self) -> bool {
        self.out_dtype == DType::F16
            || self.inputs.iter().any(|(_, d)| *d == DType::F16)
            || self.expr.mentions(DType::F16)
    }

    /// The fast path into a new vector; inputs it cannot read are an error (the scalar
    /// oracle, [`ElementwiseKernel::reference`], is what the tests compare it with).
    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let mut out = vec![0; self.out_shape.numel()];
        let ins: Vec<CpuIn<'_>> = inputs.iter().map(|w| CpuIn::Words(w)).collect();
        cpu::run(self, &ins, &mut out)?;
        Ok(out)
    }

    /// The fused expression chunk by chunk, in parallel, straight into `out` (see
    /// `ops/elementwise/cpu.rs`).
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        cpu::run(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        ElementwiseKernel::invocations(self)
    }
}
