//! User kernels: typed elementwise functions (Numba `@vectorize`, CuPy `ElementwiseKernel`)
//! and raw WGSL kernels (CuPy `RawKernel`).
//!
//! A typed elementwise function is a Rust closure over [`Var`]s, traced once into an
//! expression tree. Applying it picks the signature matching the input dtypes, types the
//! tree's literals, and stores the resulting [`Expr`] in one graph node, so it lowers to an
//! ordinary elementwise kernel: it fuses with its neighbours and runs on every device.
//!
//! A raw WGSL kernel is the user's shader, validated by naga when the node is built and run
//! as-is on a GPU. See [`RawWgsl`] for the binding convention.

use super::elementwise::{BinaryOp, ElementwiseKernel, Expr, Node, UnaryOp};
use super::family::{
    Arity, Declared, Family, GradCx, KernelClass, KernelDef, LowerCx, Lowered, Reject,
};
use super::Kernel;
use crate::{DType, Shape};
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod file;
mod grad;
mod raw;

pub use raw::{Invocations, OutputFn, OutputRule, RawKernel, RawWgsl};

// ---------------------------------------------------------------------------------------
// Typed elementwise functions
// ---------------------------------------------------------------------------------------

/// An untyped trace of the closure: literals stay "weak" until a signature gives them a type.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Input(usize),
    Float(f64),
    Int(i64),
    Bool(bool),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    Select(usize, usize, usize),
    Cast(DType, usize),
}

struct Tape {
    generation: u64,
    terms: Vec<Term>,
}

thread_local! {
    static TAPE: RefCell<Tape> = const { RefCell::new(Tape { generation: 0, terms: Vec::new() }) };
}

/// A value inside an elementwise function: an input, a literal, or an operation on them.
///
/// `Var` is a cheap `Copy` handle valid only while its function is being traced by
/// [`ElementwiseFn::new`]; use it with the operators `+ - * /` and unary `-` (also with `f32`
/// and `i32` literals on either side) and the methods below. Literals take the dtype of the
/// operand they meet (see [`ElementwiseFn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    generation: u64,
    index: usize,
}

fn push(term: Term) -> Var {
    TAPE.with(|t| {
        let mut t = t.borrow_mut();
        t.terms.push(term);
        Var {
            generation: t.generation,
            index: t.terms.len() - 1,
        }
    })
}

impl From<f32> for Var {
    fn from(v: f32) -> Var {
        push(Term::Float(v as f64))
    }
}

impl From<i32> for Var {
    fn from(v: i32) -> Var {
        push(Term::Int(v as i64))
    }
}

impl From<u32> for Var {
    fn from(v: u32) -> Var {
        push(Term::Int(v as i64))
    }
}

impl From<bool> for Var {
    fn from(v: bool) -> Var {
        push(Term::Bool(v))
    }
}

macro_rules! var_binary_ops {
    ($($trait:ident $method:ident => $op:ident;)*) => {$(
        impl std::ops::$trait<Var> for Var {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<f32> for Var {
            type Output = Var;
            fn $method(self, rhs: f32) -> Var {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<i32> for Var {
            type Output = Var;
            fn $method(self, rhs: i32) -> Var {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<Var> for f32 {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                Var::from(self).binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<Var> for i32 {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                Var::from(self).binary(BinaryOp::$op, rhs)
            }
        }
    )*};
}

var_binary_ops! {
    Add add => Add;
    Sub sub => Sub;
    Mul mul => Mul;
    Div div => Div;
}

impl std::ops::Neg for Var {
    type Output = Var;
    fn neg(self) -> Var {
        self.unary(UnaryOp::Neg)
    }
}

impl Var {
    /// Marks the result invalid if an operand came from another trace (checked when the
    /// trace ends, so operators need not return `Result`).
    fn checked(self, operands: &[Var]) -> Var {
        match operands.iter().find(|o| o.generation != self.generation) {
            Some(_) => Var {
                generation: u64::MAX,
                index: self.index,
            },
            None => self,
        }
    }

    fn unary(self, op: UnaryOp) -> Var {
        push(Term::Unary(op, self.index)).checked(&[self])
    }

    fn binary(self, op: BinaryOp, rhs: impl Into<Var>) -> Var {
        let rhs = rhs.into();
        push(Term::Binary(op, self.index, rhs.index)).checked(&[self, rhs])
    }

    /// `e^x`.
    pub fn exp(self) -> Var {
        self.unary(UnaryOp::Exp)
    }
    /// Natural logarithm.
    pub fn log(self) -> Var {
        self.unary(UnaryOp::Log)
    }
    /// Square root.
    pub fn sqrt(self) -> Var {
        self.unary(UnaryOp::Sqrt)
    }
    /// Hyperbolic tangent.
    pub fn tanh(self) -> Var {
        self.unary(UnaryOp::Tanh)
    }
    /// `1 / (1 + e^-x)`.
    pub fn sigmoid(self) -> Var {
        self.unary(UnaryOp::Sigmoid)
    }
    /// `max(x, 0)`.
    pub fn relu(self) -> Var {
        self.unary(UnaryOp::Relu)
    }
    /// `|x|`.
    pub fn abs(self) -> Var {
        self.unary(UnaryOp::Abs)
    }
    /// Elementwise maximum (NaN propagates).
    pub fn max(self, other: impl Into<Var>) -> Var {
        self.binary(BinaryOp::Maximum, other)
    }
    /// Elementwise minimum (NaN propagates).
    pub fn min(self, other: impl Into<Var>) -> Var {
        self.binary(BinaryOp::Minimum, other)
    }
    /// `self ^ other` (f32).
    pub fn pow(self, other: impl Into<Var>) -> Var {
        self.binary(BinaryOp::Pow, other)
    }
    /// `self == other` → bool.
    pub fn equal(self, other: impl Into<Var>) -> Var {
        self.binary(BinaryOp::Equal, other)
    }
    /// `self < other` → bool.
    pub fn less(self, other: impl Into<Var>) -> Var {
        self.binary(BinaryOp::Less, other)
    }
    /// `self > other` → bool.
    pub fn greater(self, other: impl Into<Var>) -> Var {
        self.binary(BinaryOp::Greater, other)
    }
    /// Convert to `dtype` with [`crate::Graph::cast`]'s rules.
    pub fn cast(self, dtype: DType) -> Var {
        push(Term::Cast(dtype, self.index)).checked(&[self])
    }
}

/// `where(cond, a, b)` inside an elementwise function.
pub fn select(cond: Var, a: impl Into<Var>, b: impl Into<Var>) -> Var {
    let (a, b) = (a.into(), b.into());
    push(Term::Select(cond.index, a.index, b.index)).checked(&[cond, a, b])
}

/// One typed signature, e.g. `f32(f32, f32)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub ret: DType,
    pub args: Vec<DType>,
}

impl Signature {
    /// Parse `ret(arg, arg, ...)` with dtype names `f32 f16 i32 u32 bool` (Numba's `float32`,
    /// `int32`, `uint32` are accepted too).
    pub fn parse(s: &str) -> Result<Signature, String> {
        let bad = |why: &str| format!("bad signature '{s}': {why} (expected e.g. 'f32(f32, f32)')");
        let s2 = s.trim();
        let open = s2.find('(').ok_or_else(|| bad("no '('"))?;
        let inner = s2[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| bad("it must end with ')'"))?;
        let dtype = |name: &str| {
            let name = name.trim();
            let canon = match name {
                "float32" => "f32",
                "float16" => "f16",
                "int32" => "i32",
                "uint32" => "u32",
                "boolean" => "bool",
                other => other,
            };
            DType::parse(canon).ok_or_else(|| bad(&format!("unknown dtype '{name}'")))
        };
        let ret = dtype(&s2[..open])?;
        let args = if inner.trim().is_empty() {
            Vec::new()
        } else {
            inner.split(',').map(dtype).collect::<Result<Vec<_>, _>>()?
        };
        Ok(Signature { ret, args })
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<String> = self.args.iter().map(|d| d.to_string()).collect();
        write!(f, "{}({})", self.ret, args.join(", "))
    }
}

/// A user-defined elementwise function with typed signatures (Numba's
/// `@vectorize(['float32(float32, float32)', 'int32(int32, int32)'])`).
///
/// The closure is traced once, here. Literals in it are *weak*: each takes the dtype of the
/// operand it meets under the chosen signature (NumPy's rule for Python scalars), so
/// `|[a, b]| a * b + 1.0` serves both `f32(f32, f32)` and `i32(i32, i32)`. A float literal
/// becomes an integer only if it is a whole number in range (`1.0` → `1`; `0.5` with an
/// `i32` operand is an error when applied), an integer literal becomes `f32` only if it is
/// exactly representable (|v| ≤ 2^24). A literal meeting only literals is `f32` (float)
/// or `i32` (integer). The result is cast to the signature's return dtype if it differs
/// (Numba's rule), e.g. a comparison under `f32(f32, f32)` yields `0.0`/`1.0`.
///
/// ```
/// # fn main() -> wgflow::Result<()> {
/// use wgflow::ops::custom::ElementwiseFn;
/// let fma1 = ElementwiseFn::new("fma1", |[a, b]| a * b + 1.0)
///     .signature("f32(f32, f32)")?
///     .signature("i32(i32, i32)")?;
/// let mut g = wgflow::Graph::new();
/// let a = g.constant([1i32, 2, 3])?;
/// let y = g.apply(&fma1, &[a, a])?;
/// let mut s = wgflow::Session::new(&g, Default::default())?;
/// assert_eq!(s.run(&[], &[y])?[0].to_vec::<i32>()?, vec![2, 5, 10]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ElementwiseFn {
    name: String,
    arity: usize,
    terms: Vec<Term>,
    /// Set when the closure used a `Var` of another trace.
    foreign: bool,
    signatures: Vec<Signature>,
}

impl ElementwiseFn {
    /// Trace `body`, a closure over an array of `N` [`Var`]s: `|[a, b]| a * b + 1.0`.
    pub fn new<const N: usize>(name: &str, body: impl Fn([Var; N]) -> Var) -> ElementwiseFn {
        let arity = N;
        let generation = TAPE.with(|t| {
            let mut t = t.borrow_mut();
            t.generation += 1;
            t.terms.clear();
            t.generation
        });
        let out = body(std::array::from_fn(|i| push(Term::Input(i))));
        let mut terms = TAPE.with(|t| std::mem::take(&mut t.borrow_mut().terms));
        let foreign = out.generation != generation || out.index >= terms.len();
        // The result is the last term; keep the trace compact by moving it there.
        if !foreign && out.index + 1 != terms.len() {
            let t = terms[out.index].clone();
            terms.push(t);
        }
        ElementwiseFn {
            name: name.to_string(),
            arity,
            terms,
            foreign,
            signatures: Vec::new(),
        }
    }

    /// Add a typed signature such as `"f32(f32, f32)"`; its argument count must match the
    /// closure's.
    #[track_caller]
    pub fn signature(mut self, sig: &str) -> crate::Result<ElementwiseFn> {
        let location = std::panic::Location::caller();
        let op = format!("kernel '{}'", self.name);
        let bad = |m: String, kind: crate::BuildKind| crate::Error::Build {
            op: op.clone(),
            location,
            message: m,
            kind,
        };
        // A signature declares dtypes: one that does not parse is a dtype error (Python's
        // TypeError, as Numba's `@vectorize` raises).
        let s = Signature::parse(sig)
            .map_err(|m| bad(m, crate::BuildKind::DType { inputs: Vec::new() }))?;
        if s.args.len() != self.arity {
            return Err(bad(
                format!(
                    "signature '{s}' has {} argument(s) but the function takes {}",
                    s.args.len(),
                    self.arity
                ),
                crate::BuildKind::Arity {
                    expected: self.arity.to_string(),
                    got: s.args.len(),
                },
            ));
        }
        if self.signatures.contains(&s) {
            return Err(bad(
                format!("signature '{s}' was given twice"),
                crate::BuildKind::Value,
            ));
        }
        self.signatures.push(s);
        Ok(self)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn arity(&self) -> usize {
        self.arity
    }

    pub fn signatures(&self) -> &[Signature] {
        &self.signatures
    }

    /// The signature whose arguments are `dtypes` and the typed expression for it.
    pub fn resolve(&self, dtypes: &[DType]) -> Result<(Signature, Expr), String> {
        if self.foreign {
            return Err("the function used a Var that was not created while tracing it".into());
        }
        if dtypes.len() != self.arity {
            return Err(format!(
                "takes {} input(s), got {}",
                self.arity,
                dtypes.len()
            ));
        }
        let sig = self
            .signatures
            .iter()
            .find(|s| s.args == dtypes)
            .ok_or_else(|| {
                let given: Vec<String> = dtypes.iter().map(|d| d.to_string()).collect();
                let have: Vec<String> = self.signatures.iter().map(|s| s.to_string()).collect();
                format!(
                    "no signature matches input dtypes ({}); signatures: [{}]",
                    given.join(", "),
                    have.join(", ")
                )
            })?;
        let root = self.terms.len().checked_sub(1).ok_or("empty trace")?;
        let mut expr = self.typed(root, None, dtypes)?;
        if expr.dtype(dtypes) != sig.ret {
            expr = Expr::cast(sig.ret, expr);
        }
        Ok((sig.clone(), expr))
    }

    fn is_literal(&self, i: usize) -> bool {
        matches!(self.terms[i], Term::Float(_) | Term::Int(_) | Term::Bool(_))
    }

    /// Type term `i`; a weak literal takes `want` if given.
    fn typed(&self, i: usize, want: Option<DType>, ins: &[DType]) -> Result<Expr, String> {
        let term = self.terms.get(i).ok_or("broken trace")?;
        let pair = |a: usize, b: usize| -> Result<(Expr, Expr), String> {
            let (x, y) = match (self.is_literal(a), self.is_literal(b)) {
                (true, false) => {
                    let y = self.typed(b, None, ins)?;
                    (self.typed(a, Some(y.dtype(ins)), ins)?, y)
                }
                (false, true) | (true, true) => {
                    let x = self.typed(a, None, ins)?;
                    (x.clone(), self.typed(b, Some(x.dtype(ins)), ins)?)
                }
                (false, false) => (self.typed(a, None, ins)?, self.typed(b, None, ins)?),
            };
            Ok((x, y))
        };
        Ok(match *term {
            Term::Input(k) => Expr::input(k),
            Term::Float(v) => lit_float(v, want.unwrap_or(DType::F32))?,
            Term::Int(v) => lit_int(v, want.unwrap_or(DType::I32))?,
            Term::Bool(v) => match want {
                None | Some(DType::Bool) => Expr::lit(DType::Bool, v as u32),
                Some(d) => return Err(format!("literal {v} used where a {d} is expected")),
            },
            Term::Unary(op, a) => {
                let x = self.typed(a, want, ins)?;
                let d = x.dtype(ins);
                op.result_dtype(d).map_err(|ok| {
                    format!("{} of {d} is not supported (expects {ok})", op.name())
                })?;
                Expr::unary(op, x)
            }
            Term::Binary(op, a, b) => {
                let (x, y) = pair(a, b)?;
                let (dx, dy) = (x.dtype(ins), y.dtype(ins));
                if dx != dy {
                    return Err(format!(
                        "{} of {dx} and {dy}: operands must share a dtype; use .cast()",
                        op.name()
                    ));
                }
                op.result_dtype(dx).map_err(|ok| {
                    format!("{} of {dx} is not supported (expects {ok})", op.name())
                })?;
                Expr::binary(op, x, y)
            }
            Term::Select(c, a, b) => {
                let c = self.typed(c, Some(DType::Bool), ins)?;
                if c.dtype(ins) != DType::Bool {
                    return Err(format!(
                        "select condition must be bool, got {}",
                        c.dtype(ins)
                    ));
                }
                let (x, y) = pair(a, b)?;
                if x.dtype(ins) != y.dtype(ins) {
                    return Err(format!(
                        "select branches have dtypes {} and {}; use .cast()",
                        x.dtype(ins),
                        y.dtype(ins)
                    ));
                }
                Expr::select(c, x, y)
            }
            Term::Cast(d, a) => Expr::cast(d, self.typed(a, None, ins)?),
        })
    }
}

fn lit_float(v: f64, d: DType) -> Result<Expr, String> {
    match d {
        DType::F32 => Ok(Expr::lit(d, (v as f32).to_bits())),
        // Rounded to nearest like an f32 literal; f16 arithmetic computes in f32 anyway.
        DType::F16 => Ok(Expr::lit(
            d,
            crate::dtype::f32_to_f16_word((v as f32).to_bits()),
        )),
        DType::I32 if v.fract() == 0.0 && v >= i32::MIN as f64 && v <= i32::MAX as f64 => {
            Ok(Expr::lit(d, v as i32 as u32))
        }
        DType::U32 if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 => {
            Ok(Expr::lit(d, v as u32))
        }
        _ => Err(format!(
            "literal {v} cannot be {d} without losing its value; write a {d} literal or use .cast()"
        )),
    }
}

fn lit_int(v: i64, d: DType) -> Result<Expr, String> {
    match d {
        DType::F32 if v.unsigned_abs() <= 1 << 24 => Ok(Expr::lit(d, (v as f32).to_bits())),
        DType::F16 if v.unsigned_abs() <= 1 << 11 => Ok(Expr::lit(
            d,
            crate::dtype::f32_to_f16_word((v as f32).to_bits()),
        )),
        DType::I32 if i32::try_from(v).is_ok() => Ok(Expr::lit(d, v as i32 as u32)),
        DType::U32 if u32::try_from(v).is_ok() => Ok(Expr::lit(d, v as u32)),
        _ => Err(format!(
            "literal {v} cannot be {d} without losing its value; use .cast()"
        )),
    }
}

/// The op payload of an applied typed elementwise function.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomElementwise {
    /// The function's name.
    pub name: String,
    /// The expression over the node's inputs, typed for the chosen signature.
    pub expr: Expr,
}

/// Type-check a typed expression over inputs of `ins` dtypes; returns its dtype.
pub fn check_expr(e: &Expr, ins: &[DType]) -> Result<DType, String> {
    let mut types: Vec<DType> = Vec::with_capacity(e.nodes().len());
    for node in e.nodes() {
        let d = match *node {
            Node::Input(i) => *ins
                .get(i)
                .ok_or_else(|| format!("input {i} is used but there are {} inputs", ins.len()))?,
            Node::Lit(d, _) => d,
            Node::Unary(op, a) => {
                let d = types[a];
                op.result_dtype(d)
                    .map_err(|ok| format!("{} of {d} is not supported (expects {ok})", op.name()))?
            }
            Node::Binary(op, a, b) => {
                let (x, y) = (types[a], types[b]);
                if x != y {
                    return Err(format!(
                        "{} of {x} and {y}: operands must share a dtype",
                        op.name()
                    ));
                }
                op.result_dtype(x)
                    .map_err(|ok| format!("{} of {x} is not supported (expects {ok})", op.name()))?
            }
            Node::Select(c, a, b) => {
                let (c, x, y) = (types[c], types[a], types[b]);
                if c != DType::Bool || x != y {
                    return Err(format!(
                        "where({c}, {x}, {y}) needs a bool condition and equal branches"
                    ));
                }
                x
            }
            Node::Cast(d, _) => d,
        };
        types.push(d);
    }
    types
        .last()
        .copied()
        .ok_or_else(|| "empty expression".to_string())
}

// ---------------------------------------------------------------------------------------
// The family
// ---------------------------------------------------------------------------------------

/// A user's kernel applied to a node's inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Custom {
    /// A typed elementwise function (fuses like the built-in elementwise ops).
    Elementwise(Box<CustomElementwise>),
    /// Raw WGSL, GPU only.
    Raw(Arc<RawWgsl>),
}

impl Family for Custom {
    /// A raw kernel's WGSL may spell out sizes; a typed elementwise function cannot.
    fn rebinds(&self) -> bool {
        matches!(self, Custom::Elementwise(_))
    }

    fn name(&self) -> &'static str {
        match self {
            Custom::Elementwise(_) => "custom",
            Custom::Raw(_) => "raw_wgsl",
        }
    }

    fn arity(&self) -> Arity {
        Arity::Any
    }

    fn is_elementwise(&self) -> bool {
        matches!(self, Custom::Elementwise(_))
    }

    fn is_gpu_only(&self) -> bool {
        matches!(self, Custom::Raw(_))
    }

    /// A function: its expression's dtype over inputs broadcast together. A raw kernel: its
    /// [`OutputRule`], which must give a non-empty output (a raw kernel always writes).
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        match self {
            Custom::Elementwise(c) => {
                let dtypes: Vec<DType> = inputs.iter().map(|i| i.1).collect();
                let dtype = check_expr(&c.expr, &dtypes).map_err(Reject::dtype)?;
                let mut shape = Shape::scalar();
                for (s, _) in inputs {
                    shape = Shape::broadcast(&shape, s).ok_or_else(|| {
                        let all: Vec<String> = inputs.iter().map(|i| i.0.to_string()).collect();
                        format!("shapes {} cannot broadcast", all.join(", "))
                    })?;
                }
                Ok((shape, dtype))
            }
            Custom::Raw(r) => {
                let (shape, dtype) = r
                    .output_for(inputs)
                    .map_err(|m| format!("output rule: {m}"))?;
                if shape.dims().contains(&0) {
                    return Err(Reject::from(format!(
                        "output shape {shape} is empty or too large"
                    )));
                }
                let mut dtypes: Vec<DType> = inputs.iter().map(|i| i.1).collect();
                dtypes.push(dtype);
                r.check_bindings(&dtypes).map_err(Reject::dtype)?;
                Ok((shape, dtype))
            }
        }
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        file::write_attrs(self, out)
    }

    fn unsavable(&self) -> Option<String> {
        match self {
            Custom::Raw(r) if !r.gradients.is_empty() => Some(format!(
                "raw kernel '{}' carries gradient kernels, which graph files cannot hold",
                r.name
            )),
            _ => file::unsavable(self),
        }
    }

    /// A function: its expression differentiated symbolically ([`Expr::vjp`]), one new
    /// function node per input gradient. A raw kernel: its gradient kernels
    /// ([`RawWgsl::with_gradient`]), or [`Error::NotDifferentiable`](crate::Error::NotDifferentiable)
    /// for an input without one.
    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        match self {
            Custom::Elementwise(c) => c.vjp(g, cx),
            Custom::Raw(r) => r.vjp(g, cx),
        }
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(self, g, node, x)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        Ok(cx.dispatch(match self {
            Custom::Elementwise(c) => {
                Kernel::Elementwise(ElementwiseKernel::of(c.expr.clone(), cx))
            }
            Custom::Raw(r) => {
                let workgroup_size = r.check(cx.args.len())?;
                Kernel::RawWgsl(RawKernel {
                    name: r.name.clone(),
                    source: r.source.clone(),
                    entry_point: r.entry_point.clone(),
                    workgroup_size,
                    invocations: match r.invocations {
                        Invocations::PerOutputElement => cx.shape.numel() as u64,
                        Invocations::Fixed(n) => n,
                    },
                })
            }
        }))
    }
}

impl KernelDef for RawKernel {
    fn kind(&self) -> &'static str {
        "raw_wgsl"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Custom
    }

    fn describe(&self) -> String {
        format!("raw WGSL '{}' ({})", self.name, self.entry_point)
    }

    fn wgsl(&self) -> String {
        self.source.clone()
    }

    /// A user's source carries its own `enable` directives.
    fn uses_f16(&self) -> bool {
        false
    }

    /// Never called: raw kernels have no CPU implementation.
    fn run_reference(&self, _inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        Err(crate::Error::Internal(format!(
            "{} has no CPU implementation (raw WGSL runs on GPUs only)",
            self.describe()
        )))
    }

    fn has_cpu(&self) -> bool {
        false
    }

    fn binding_windows(&self) -> bool {
        false
    }

    fn invocations(&self) -> u64 {
        self.invocations
    }

    fn workgroup_size(&self) -> u32 {
        self.workgroup_size
    }

    fn entry_point(&self) -> &str {
        &self.entry_point
    }
}
