//! Elementwise ops: unary, binary, select and cast, and the `Expr` tree that fusion, codegen
//! and the CPU backend share. A fused kernel is one `Expr` over indexed inputs, each read with
//! NumPy broadcasting against the kernel's output shape (broadcasting composes, so inlining a
//! producer into its consumer never changes which element an input supplies).

use crate::backend::gpu::codegen::{self, Writer};
use crate::{DType, Shape};

pub use super::elementwise_cpu::{binary_cpu, cast_cpu, unary_cpu};

/// Unary elementwise primitives.
///
/// `erf`, `log1p`, `expm1` and `softplus` have no WGSL builtin; both backends evaluate them
/// with the algorithms documented in [`elementwise_cpu`](super::elementwise_cpu).
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
    Erf,
    /// `log(1 + e^x)`, evaluated as `max(x, 0) + log1p(e^-|x|)` so it never overflows.
    Softplus,
    IsNan,
    IsInf,
    IsFinite,
    LogicalNot,
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
}

impl UnaryOp {
    /// Every unary primitive (for exhaustive tests).
    pub const ALL: [UnaryOp; 24] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Sign,
        UnaryOp::Reciprocal,
        UnaryOp::Rsqrt,
        UnaryOp::Log1p,
        UnaryOp::Expm1,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Erf,
        UnaryOp::Softplus,
        UnaryOp::IsNan,
        UnaryOp::IsInf,
        UnaryOp::IsFinite,
        UnaryOp::LogicalNot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Sign => "sign",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Erf => "erf",
            UnaryOp::Softplus => "softplus",
            UnaryOp::IsNan => "isnan",
            UnaryOp::IsInf => "isinf",
            UnaryOp::IsFinite => "isfinite",
            UnaryOp::LogicalNot => "logical_not",
        }
    }

    /// Produces bool whatever its operand's dtype.
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite | UnaryOp::LogicalNot
        )
    }

    /// Defined on every numeric dtype (not only f32).
    fn accepts_integers(self) -> bool {
        matches!(
            self,
            UnaryOp::Abs
                | UnaryOp::Relu
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Sign
                | UnaryOp::IsNan
                | UnaryOp::IsInf
                | UnaryOp::IsFinite
        )
    }

    /// The dtype rule: `Err` names the dtypes this op accepts.
    pub fn result_dtype(self, x: DType) -> Result<DType, &'static str> {
        let ok = match self {
            UnaryOp::Neg => x.is_signed(),
            UnaryOp::LogicalNot => x == DType::Bool,
            op if op.accepts_integers() => x.is_numeric(),
            _ => x.is_float(),
        };
        match (ok, self) {
            (true, op) if op.is_predicate() => Ok(DType::Bool),
            (true, _) => Ok(x),
            (false, UnaryOp::Neg) => Err("f32 or i32"),
            (false, UnaryOp::LogicalNot) => Err("bool"),
            (false, op) if op.accepts_integers() => Err("f32, i32 or u32"),
            (false, _) => Err("f32"),
        }
    }
}

impl BinaryOp {
    /// Every binary primitive (for exhaustive tests).
    pub const ALL: [BinaryOp; 18] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Pow,
        BinaryOp::Equal,
        BinaryOp::Less,
        BinaryOp::Greater,
        BinaryOp::NotEqual,
        BinaryOp::LessEqual,
        BinaryOp::GreaterEqual,
        BinaryOp::LogicalAnd,
        BinaryOp::LogicalOr,
        BinaryOp::LogicalXor,
        BinaryOp::FloorDiv,
        BinaryOp::Remainder,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Pow => "pow",
            BinaryOp::Equal => "equal",
            BinaryOp::Less => "less",
            BinaryOp::Greater => "greater",
            BinaryOp::NotEqual => "not_equal",
            BinaryOp::LessEqual => "less_equal",
            BinaryOp::GreaterEqual => "greater_equal",
            BinaryOp::LogicalAnd => "logical_and",
            BinaryOp::LogicalOr => "logical_or",
            BinaryOp::LogicalXor => "logical_xor",
            BinaryOp::FloorDiv => "floor_divide",
            BinaryOp::Remainder => "remainder",
        }
    }

    /// Produces bool from operands of any (shared) dtype.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::Less
                | BinaryOp::Greater
                | BinaryOp::NotEqual
                | BinaryOp::LessEqual
                | BinaryOp::GreaterEqual
        )
    }

    pub fn is_logical(self) -> bool {
        matches!(
            self,
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::LogicalXor
        )
    }

    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Maximum
                | BinaryOp::Minimum
                | BinaryOp::Equal
                | BinaryOp::NotEqual
                | BinaryOp::LogicalAnd
                | BinaryOp::LogicalOr
                | BinaryOp::LogicalXor
        )
    }

    /// The dtype rule for operands of dtype `x` (both operands must already agree).
    pub fn result_dtype(self, x: DType) -> Result<DType, &'static str> {
        match self {
            BinaryOp::Equal | BinaryOp::NotEqual => Ok(DType::Bool),
            op if op.is_comparison() && x.is_numeric() => Ok(DType::Bool),
            op if op.is_logical() && x == DType::Bool => Ok(DType::Bool),
            op if op.is_logical() => Err("bool"),
            _ if !x.is_numeric() => Err("f32, i32 or u32"),
            _ => Ok(x),
        }
    }
}

/// An elementwise expression over a kernel's inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Input `i` of the kernel, broadcast to the output shape.
    Input(usize),
    /// A literal, stored as its 32-bit word so that it is written bit-exactly.
    Lit(DType, u32),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `where(cond, a, b)`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(DType, Box<Expr>),
}

impl Expr {
    /// The dtype this expression produces given the dtypes of the kernel inputs.
    pub fn dtype(&self, inputs: &[DType]) -> DType {
        match self {
            Expr::Input(i) => inputs[*i],
            Expr::Lit(d, _) => *d,
            Expr::Unary(op, _) if op.is_predicate() => DType::Bool,
            Expr::Unary(_, a) => a.dtype(inputs),
            Expr::Binary(op, _, _) if op.is_comparison() => DType::Bool,
            Expr::Binary(_, a, _) => a.dtype(inputs),
            Expr::Select(_, a, _) => a.dtype(inputs),
            Expr::Cast(d, _) => *d,
        }
    }

    /// Number of primitive operations in the tree (used in kernel names and reports).
    pub fn op_count(&self) -> usize {
        match self {
            Expr::Input(_) | Expr::Lit(..) => 0,
            Expr::Unary(_, a) | Expr::Cast(_, a) => 1 + a.op_count(),
            Expr::Binary(_, a, b) => 1 + a.op_count() + b.op_count(),
            Expr::Select(c, a, b) => 1 + c.op_count() + a.op_count() + b.op_count(),
        }
    }

    /// Replace every `Input(i)` with `f(i)`.
    pub fn substitute(&self, f: &mut impl FnMut(usize) -> Expr) -> Expr {
        match self {
            Expr::Input(i) => f(*i),
            Expr::Lit(d, w) => Expr::Lit(*d, *w),
            Expr::Unary(op, a) => Expr::Unary(*op, Box::new(a.substitute(f))),
            Expr::Binary(op, a, b) => {
                Expr::Binary(*op, Box::new(a.substitute(f)), Box::new(b.substitute(f)))
            }
            Expr::Select(c, a, b) => Expr::Select(
                Box::new(c.substitute(f)),
                Box::new(a.substitute(f)),
                Box::new(b.substitute(f)),
            ),
            Expr::Cast(d, a) => Expr::Cast(*d, Box::new(a.substitute(f))),
        }
    }

    /// Short description, e.g. `add(mul(in0, in1), in2)`.
    pub fn describe(&self) -> String {
        match self {
            Expr::Input(i) => format!("in{i}"),
            Expr::Lit(d, w) => lit_text(*d, *w),
            Expr::Unary(op, a) => format!("{}({})", op.name(), a.describe()),
            Expr::Binary(op, a, b) => format!("{}({}, {})", op.name(), a.describe(), b.describe()),
            Expr::Select(c, a, b) => {
                format!(
                    "where({}, {}, {})",
                    c.describe(),
                    a.describe(),
                    b.describe()
                )
            }
            Expr::Cast(d, a) => format!("cast<{d}>({})", a.describe()),
        }
    }
}

fn lit_text(d: DType, w: u32) -> String {
    match d {
        DType::F32 => format!("{}", f32::from_bits(w)),
        DType::F16 => format!("{}", half::f16::from_bits(w as u16)),
        DType::I32 => format!("{}", w as i32),
        DType::U32 => format!("{w}"),
        DType::Bool => format!("{}", w != 0),
    }
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
    /// Input `i`'s view, if it is read through one.
    pub fn view(&self, i: usize) -> Option<&InputView> {
        self.views.get(i).and_then(Option::as_ref)
    }

    /// Whether any input is read through a view.
    pub fn has_views(&self) -> bool {
        self.views.iter().any(Option::is_some)
    }
}

// ---------------------------------------------------------------- CPU reference kernel

impl ElementwiseKernel {
    /// Evaluate on the CPU. `inputs[i]` holds input `i`'s words in row-major order.
    pub fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let dtypes: Vec<DType> = self.inputs.iter().map(|(_, d)| *d).collect();
        self.eval(&self.expr, inputs, &dtypes)
    }

    fn eval(&self, e: &Expr, inputs: &[&[u32]], dtypes: &[DType]) -> Vec<u32> {
        let n = self.out_shape.numel();
        match e {
            Expr::Input(i) => {
                let (shape, _) = &self.inputs[*i];
                let data = inputs[*i];
                if let Some(view) = self.view(*i) {
                    let strides = view.strides_over(shape, &self.out_shape);
                    let dims = self.out_shape.dims();
                    return (0..n)
                        .map(|lin| {
                            let (mut rem, mut at) = (lin, view.offset);
                            for k in (0..dims.len()).rev() {
                                at += (rem % dims[k]) as i64 * strides[k];
                                rem /= dims[k];
                            }
                            data[at as usize]
                        })
                        .collect();
                }
                if shape == &self.out_shape {
                    return data.to_vec();
                }
                let strides = shape.broadcast_strides(&self.out_shape);
                let dims = self.out_shape.dims();
                let mut out = Vec::with_capacity(n);
                let mut coord = vec![0usize; dims.len()];
                for _ in 0..n {
                    let off: usize = coord.iter().zip(&strides).map(|(c, s)| c * s).sum();
                    out.push(data[off]);
                    for ax in (0..dims.len()).rev() {
                        coord[ax] += 1;
                        if coord[ax] < dims[ax] {
                            break;
                        }
                        coord[ax] = 0;
                    }
                }
                out
            }
            Expr::Lit(_, w) => vec![*w; n],
            Expr::Unary(op, a) => {
                let d = a.dtype(dtypes);
                let mut v = self.eval(a, inputs, dtypes);
                for w in &mut v {
                    *w = unary_cpu(*op, d, *w);
                }
                v
            }
            Expr::Binary(op, a, b) => {
                let d = a.dtype(dtypes);
                let va = self.eval(a, inputs, dtypes);
                let vb = self.eval(b, inputs, dtypes);
                va.iter()
                    .zip(&vb)
                    .map(|(&x, &y)| binary_cpu(*op, d, x, y))
                    .collect()
            }
            Expr::Select(c, a, b) => {
                let vc = self.eval(c, inputs, dtypes);
                let va = self.eval(a, inputs, dtypes);
                let vb = self.eval(b, inputs, dtypes);
                (0..n)
                    .map(|i| if vc[i] != 0 { va[i] } else { vb[i] })
                    .collect()
            }
            Expr::Cast(to, a) => {
                let from = a.dtype(dtypes);
                let mut v = self.eval(a, inputs, dtypes);
                for w in &mut v {
                    *w = cast_cpu(from, *to, *w);
                }
                v
            }
        }
    }
}

// ---------------------------------------------------------------- WGSL kernel

impl ElementwiseKernel {
    /// Whether the kernel moves four elements per invocation with `vec4` loads and stores:
    /// every input is either the output's shape or a single element, and the element count
    /// divides by four. (vec4 storage access nearly doubles throughput on lavapipe and is
    /// what real GPUs' memory systems want too.)
    pub fn vectorized(&self) -> bool {
        let n = self.out_shape.numel();
        n.is_multiple_of(4)
            && !self.has_views()
            && self
                .inputs
                .iter()
                .all(|(s, _)| s == &self.out_shape || s.numel() == 1)
    }

    /// Invocations the WGSL kernel is dispatched with.
    pub fn invocations(&self) -> u64 {
        let n = self.out_shape.numel() as u64;
        if self.vectorized() {
            n / 4
        } else {
            n
        }
    }

    /// The WGSL source of this kernel (template `shaders/elementwise.wgsl`).
    pub fn wgsl(&self) -> String {
        let dtypes: Vec<DType> = self.inputs.iter().map(|(_, d)| *d).collect();
        let vec = self.vectorized();
        let full = |s: &Shape| vec && s == &self.out_shape;
        let mut bindings = Writer::new();
        for (i, (s, d)) in self.inputs.iter().enumerate() {
            codegen::storage_binding_vec(&mut bindings, i, &format!("in{i}"), *d, full(s));
        }
        codegen::storage_binding_vec(&mut bindings, self.inputs.len(), "out", self.out_dtype, vec);

        // The expression is one function of scalars, applied once per element.
        let params: Vec<String> = dtypes
            .iter()
            .enumerate()
            .map(|(i, d)| format!("x{i}: {}", d.wgsl()))
            .collect();
        let func = format!(
            "fn wgf_expr({}) -> {} {{\n    return {};\n}}",
            params.join(", "),
            self.out_dtype.wgsl(),
            expr_wgsl(&self.expr, &dtypes)
        );

        let mut body = Writer::new();
        body.indent(1);
        let dims = self.out_shape.dims();
        for (i, (shape, d)) in self.inputs.iter().enumerate() {
            if full(shape) {
                let v = codegen::load_vec4(&format!("in{i}"), "i", *d);
                body.line(&format!("let v{i} = {v};"));
                continue;
            }
            let idx = if let Some(view) = self.view(i) {
                let strides = view.strides_over(shape, &self.out_shape);
                super::movement::signed_index(
                    &mut body,
                    &format!("idx{i}"),
                    "i",
                    dims,
                    &strides,
                    view.offset,
                );
                format!("idx{i}")
            } else if shape == &self.out_shape {
                "i".to_string()
            } else if shape.numel() == 1 {
                "0u".to_string()
            } else {
                let strides = shape.broadcast_strides(&self.out_shape);
                codegen::strided_index(&mut body, &format!("idx{i}"), "i", dims, &strides);
                format!("idx{i}")
            };
            body.line(&format!(
                "let x{i} = {};",
                codegen::load(&format!("in{i}"), &idx, *d)
            ));
        }
        if vec {
            let lanes: Vec<String> = ["x", "y", "z", "w"]
                .iter()
                .map(|lane| {
                    let args: Vec<String> = self
                        .inputs
                        .iter()
                        .enumerate()
                        .map(|(i, (s, _))| {
                            if full(s) {
                                format!("v{i}.{lane}")
                            } else {
                                format!("x{i}")
                            }
                        })
                        .collect();
                    format!("wgf_expr({})", args.join(", "))
                })
                .collect();
            let value = format!("vec4<{}>({})", self.out_dtype.wgsl(), lanes.join(", "));
            body.line(&format!(
                "{};",
                codegen::store_vec4("out", "i", &value, self.out_dtype)
            ));
        } else {
            let args: Vec<String> = (0..self.inputs.len()).map(|i| format!("x{i}")).collect();
            body.line(&format!("let y = wgf_expr({});", args.join(", ")));
            body.line(&format!(
                "{};",
                codegen::store("out", "i", "y", self.out_dtype)
            ));
        }

        codegen::fill_template(
            include_str!("../../shaders/elementwise.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("FUNC", func),
                ("N", format!("{}u", self.invocations())),
                ("WG", codegen::WORKGROUP.to_string()),
                ("BODY", body.finish()),
            ],
        )
    }
}

/// WGSL text of an expression whose inputs are bound to `x0, x1, ...`. f16 values are f32
/// in WGSL: every op that yields f16 is rounded to f16, exactly as `unary_cpu` & co. do.
pub fn expr_wgsl(e: &Expr, dtypes: &[DType]) -> String {
    let text = expr_wgsl_unrounded(e, dtypes);
    let rounds = match e {
        Expr::Unary(..) | Expr::Binary(..) => true,
        Expr::Cast(_, a) => a.dtype(dtypes) != DType::F16,
        Expr::Input(_) | Expr::Lit(..) | Expr::Select(..) => false,
    };
    if rounds && e.dtype(dtypes) == DType::F16 {
        format!("wgf_round_f16({text})")
    } else {
        text
    }
}

fn expr_wgsl_unrounded(e: &Expr, dtypes: &[DType]) -> String {
    match e {
        Expr::Input(i) => format!("x{i}"),
        Expr::Lit(d, w) => codegen::literal(*d, *w),
        Expr::Unary(op, a) => {
            let d = a.dtype(dtypes).compute();
            let x = expr_wgsl(a, dtypes);
            let zero = codegen::literal(d, 0);
            match op {
                UnaryOp::Neg => format!("(-{x})"),
                UnaryOp::Abs if d == DType::U32 => x,
                UnaryOp::Abs => format!("abs({x})"),
                UnaryOp::Exp => format!("exp({x})"),
                UnaryOp::Log => format!("wgf_log({x})"),
                UnaryOp::Sqrt => format!("sqrt({x})"),
                // Not the builtin: see wgf_tanh in the prelude (small |x|, overflow, NaN).
                UnaryOp::Tanh => format!("wgf_tanh({x})"),
                UnaryOp::Sigmoid => format!("(1.0 / (1.0 + exp(-{x})))"),
                UnaryOp::Relu if d == DType::U32 => x,
                UnaryOp::Relu if d == DType::F32 => format!("wgf_relu({x})"),
                UnaryOp::Relu => format!("max({x}, {zero})"),
                UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round if d != DType::F32 => x,
                UnaryOp::Floor => format!("floor({x})"),
                UnaryOp::Ceil => format!("ceil({x})"),
                // WGSL's round is specified as ties-to-even.
                UnaryOp::Round => format!("round({x})"),
                UnaryOp::Sign if d == DType::F32 => format!("wgf_sign({x})"),
                UnaryOp::Sign if d == DType::U32 => format!("select(0u, 1u, {x} != 0u)"),
                UnaryOp::Sign => format!("select(select(0, -1, {x} < 0), 1, {x} > 0)"),
                UnaryOp::Reciprocal => format!("(1.0 / {x})"),
                // Not inverseSqrt: its result at 0 and its precision are left to the driver.
                UnaryOp::Rsqrt => format!("(1.0 / sqrt({x}))"),
                UnaryOp::Log1p => format!("wgf_log1p({x})"),
                UnaryOp::Expm1 => format!("wgf_expm1({x})"),
                UnaryOp::Sin => format!("sin({x})"),
                UnaryOp::Cos => format!("cos({x})"),
                UnaryOp::Erf => format!("wgf_erf({x})"),
                UnaryOp::Softplus => format!("wgf_softplus({x})"),
                UnaryOp::IsNan if d == DType::F32 => format!("wgf_isnan({x})"),
                UnaryOp::IsInf if d == DType::F32 => format!("wgf_isinf({x})"),
                UnaryOp::IsFinite if d == DType::F32 => format!("wgf_isfinite({x})"),
                UnaryOp::IsNan | UnaryOp::IsInf => "false".to_string(),
                UnaryOp::IsFinite => "true".to_string(),
                UnaryOp::LogicalNot => format!("(!{x})"),
            }
        }
        Expr::Binary(op, a, b) => {
            let d = a.dtype(dtypes).compute();
            let (x, y) = (expr_wgsl(a, dtypes), expr_wgsl(b, dtypes));
            match op {
                BinaryOp::Add => format!("({x} + {y})"),
                BinaryOp::Sub => format!("({x} - {y})"),
                BinaryOp::Mul => format!("({x} * {y})"),
                BinaryOp::Div if d == DType::I32 => format!("wgf_div_i32({x}, {y})"),
                BinaryOp::Div if d == DType::U32 => format!("wgf_div_u32({x}, {y})"),
                BinaryOp::Div => format!("({x} / {y})"),
                BinaryOp::Maximum if d.is_float() => format!("wgf_max({x}, {y})"),
                BinaryOp::Minimum if d.is_float() => format!("wgf_min({x}, {y})"),
                BinaryOp::Maximum => format!("max({x}, {y})"),
                BinaryOp::Minimum => format!("min({x}, {y})"),
                BinaryOp::Pow if d == DType::I32 => format!("wgf_pow_i32({x}, {y})"),
                BinaryOp::Pow if d == DType::U32 => format!("wgf_pow_u32({x}, {y})"),
                // Not the builtin: see wgf_pow_f32 (negative bases, NaN, zeros, x*x).
                BinaryOp::Pow => format!("wgf_pow_f32({x}, {y})"),
                BinaryOp::Equal => format!("({x} == {y})"),
                BinaryOp::Less => format!("({x} < {y})"),
                BinaryOp::Greater => format!("({x} > {y})"),
                BinaryOp::NotEqual if d == DType::F32 => format!("wgf_ne({x}, {y})"),
                BinaryOp::LessEqual if d == DType::F32 => format!("wgf_le({x}, {y})"),
                BinaryOp::GreaterEqual if d == DType::F32 => format!("wgf_ge({x}, {y})"),
                BinaryOp::NotEqual | BinaryOp::LogicalXor => format!("({x} != {y})"),
                BinaryOp::LessEqual => format!("({x} <= {y})"),
                BinaryOp::GreaterEqual => format!("({x} >= {y})"),
                // Non-short-circuit forms: both operands are plain values.
                BinaryOp::LogicalAnd => format!("({x} & {y})"),
                BinaryOp::LogicalOr => format!("({x} | {y})"),
                BinaryOp::FloorDiv if d == DType::I32 => format!("wgf_floordiv_i32({x}, {y})"),
                BinaryOp::FloorDiv if d == DType::U32 => format!("wgf_floordiv_u32({x}, {y})"),
                BinaryOp::FloorDiv => format!("wgf_divmod_f32({x}, {y}).x"),
                BinaryOp::Remainder if d == DType::I32 => format!("wgf_rem_i32({x}, {y})"),
                BinaryOp::Remainder if d == DType::U32 => format!("wgf_rem_u32({x}, {y})"),
                BinaryOp::Remainder => format!("wgf_divmod_f32({x}, {y}).y"),
            }
        }
        Expr::Select(c, a, b) => format!(
            "select({}, {}, {})",
            expr_wgsl(b, dtypes),
            expr_wgsl(a, dtypes),
            expr_wgsl(c, dtypes)
        ),
        Expr::Cast(to, a) => {
            let from = a.dtype(dtypes).compute();
            let to = &to.compute();
            let x = expr_wgsl(a, dtypes);
            match (from, *to) {
                (f, t) if f == t => x,
                // NaN is truthy; drivers may fold `NaN != 0.0` to false, so test the bits.
                (DType::F32, DType::Bool) => format!("(({x} != 0.0) || wgf_isnan({x}))"),
                (_, DType::Bool) => format!("({x} != {})", codegen::literal(from, 0)),
                (DType::Bool, t) => format!(
                    "select({}, {}, {x})",
                    codegen::literal(t, 0),
                    codegen::one(t)
                ),
                (DType::F32, DType::U32) => format!("wgf_f32_to_u32({x})"),
                (DType::F32, DType::I32) => format!("wgf_f32_to_i32({x})"),
                (DType::I32, DType::U32) | (DType::U32, DType::I32) => {
                    format!("bitcast<{}>({x})", to.wgsl())
                }
                (_, t) => format!("{}({x})", t.wgsl()),
            }
        }
    }
}
