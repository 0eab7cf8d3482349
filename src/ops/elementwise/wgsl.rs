//! The elementwise kernel's WGSL: one function per fused expression, with vec4 and strided
//! view variants.

use super::*;
use crate::ops::wgsl;

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
            wgsl::storage_binding_vec(&mut bindings, i, &format!("in{i}"), *d, full(s));
        }
        wgsl::storage_binding_vec(&mut bindings, self.inputs.len(), "out", self.out_dtype, vec);

        // The expression is one function of scalars, applied once per element.
        let func = expr_fn_wgsl("wgf_expr", &self.expr, &dtypes, self.out_dtype);

        let mut body = Writer::new();
        body.indent(1);
        let dims = self.out_shape.dims();
        for (i, (shape, d)) in self.inputs.iter().enumerate() {
            if full(shape) {
                let v = wgsl::load_vec4(&format!("in{i}"), "i", *d);
                body.line(&format!("let v{i} = {v};"));
                continue;
            }
            let idx = if let Some(view) = self.view(i) {
                let strides = view.strides_over(shape, &self.out_shape);
                crate::ops::movement::signed_index(
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
                wgsl::strided_index(&mut body, &format!("idx{i}"), "i", dims, &strides);
                format!("idx{i}")
            };
            body.line(&format!(
                "let x{i} = {};",
                wgsl::load(&format!("in{i}"), &idx, *d)
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
                wgsl::store_vec4("out", "i", &value, self.out_dtype)
            ));
        } else {
            let args: Vec<String> = (0..self.inputs.len()).map(|i| format!("x{i}")).collect();
            body.line(&format!("let y = wgf_expr({});", args.join(", ")));
            body.line(&format!(
                "{};",
                wgsl::store("out", "i", "y", self.out_dtype)
            ));
        }

        wgsl::fill_template(
            include_str!("../../../shaders/elementwise.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("FUNC", func),
                ("N", format!("{}u", self.invocations())),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("BODY", body.finish()),
            ],
        )
    }
}

/// `fn NAME(x0: .., x1: ..) -> RET` computing `e` over parameters of `dtypes`, one `let` per
/// operation: WGSL front ends limit how deeply expressions nest (naga stops near 200), and a
/// node used twice is computed once. f16 values are f32 in WGSL: every op that yields f16 is
/// rounded to f16, exactly as `unary_cpu` & co. do.
pub fn expr_fn_wgsl(name: &str, e: &Expr, dtypes: &[DType], ret: DType) -> String {
    let params: Vec<String> = dtypes
        .iter()
        .enumerate()
        .map(|(i, d)| format!("x{i}: {}", d.wgsl()))
        .collect();
    let mut w = Writer::new();
    w.line(&format!(
        "fn {name}({}) -> {} {{",
        params.join(", "),
        ret.wgsl()
    ));
    w.indent(1);
    let types = e.dtypes(dtypes);
    let mut names: Vec<String> = Vec::with_capacity(e.nodes().len());
    for (k, node) in e.nodes().iter().enumerate() {
        let text = node_wgsl(node, &names, &types);
        let rounds = match *node {
            Node::Unary(..) | Node::Binary(..) => true,
            Node::Cast(_, a) => types[a] != DType::F16,
            Node::Input(_) | Node::Lit(..) | Node::Select(..) => false,
        };
        let text = if rounds && types[k] == DType::F16 {
            format!("wgf_round_f16({text})")
        } else {
            text
        };
        if node.is_op() {
            w.line(&format!("let t{k} = {text};"));
            names.push(format!("t{k}"));
        } else {
            names.push(text);
        }
    }
    w.line(&format!("return {};", names[e.root()]));
    w.indent(0);
    w.line("}");
    w.finish()
}

/// One node's WGSL over its operands' names (`Input`s are `xI`, literals their text).
fn node_wgsl(node: &Node, names: &[String], types: &[DType]) -> String {
    match *node {
        Node::Input(i) => format!("x{i}"),
        Node::Lit(d, w) => wgsl::literal(d, w),
        Node::Unary(op, a) => unary_wgsl(op, &names[a], types[a].compute()),
        Node::Binary(op, a, b) => binary_wgsl(op, &names[a], &names[b], types[a].compute()),
        Node::Select(c, a, b) => format!("select({}, {}, {})", names[b], names[a], names[c]),
        Node::Cast(to, a) => cast_wgsl(&names[a], types[a].compute(), to.compute()),
    }
}

fn unary_wgsl(op: UnaryOp, x: &str, d: DType) -> String {
    let zero = wgsl::literal(d, 0);
    let x = x.to_string();
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
        UnaryOp::Tan => format!("tan({x})"),
        UnaryOp::Erf => format!("wgf_erf({x})"),
        UnaryOp::Softplus => format!("wgf_softplus({x})"),
        UnaryOp::Softsign => format!("wgf_softsign({x})"),
        UnaryOp::Asin => format!("wgf_asin({x})"),
        UnaryOp::Acos => format!("wgf_acos({x})"),
        UnaryOp::Atan => format!("wgf_atan({x})"),
        UnaryOp::Asinh => format!("wgf_asinh({x})"),
        UnaryOp::Acosh => format!("wgf_acosh({x})"),
        UnaryOp::Atanh => format!("wgf_atanh({x})"),
        UnaryOp::IsNan if d == DType::F32 => format!("wgf_isnan({x})"),
        UnaryOp::IsInf if d == DType::F32 => format!("wgf_isinf({x})"),
        UnaryOp::IsFinite if d == DType::F32 => format!("wgf_isfinite({x})"),
        UnaryOp::IsNan | UnaryOp::IsInf => "false".to_string(),
        UnaryOp::IsFinite => "true".to_string(),
        UnaryOp::LogicalNot => format!("(!{x})"),
        UnaryOp::BitNot => format!("(~{x})"),
        UnaryOp::RoundBf16 => format!("wgf_round_bfloat16({x})"),
        UnaryOp::RoundTo(to) => {
            let r = to.rule();
            format!(
                "wgf_round_small_float({x}, {}, {}, {}, {}u, {}u, {})",
                r.m,
                r.emin,
                wgsl::literal(DType::F32, r.max.to_bits()),
                r.overflow,
                r.nan,
                r.unsigned_zero
            )
        }
    }
}

fn binary_wgsl(op: BinaryOp, x: &str, y: &str, d: DType) -> String {
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
        BinaryOp::BitAnd => format!("({x} & {y})"),
        BinaryOp::BitOr => format!("({x} | {y})"),
        BinaryOp::BitXor => format!("({x} ^ {y})"),
    }
}

fn cast_wgsl(x: &str, from: DType, to: DType) -> String {
    let to = &to;
    match (from, *to) {
        (f, t) if f == t => x.to_string(),
        // NaN is truthy; drivers may fold `NaN != 0.0` to false, so test the bits.
        (DType::F32, DType::Bool) => format!("(({x} != 0.0) || wgf_isnan({x}))"),
        (_, DType::Bool) => format!("({x} != {})", wgsl::literal(from, 0)),
        (DType::Bool, t) => format!("select({}, {}, {x})", wgsl::literal(t, 0), wgsl::one(t)),
        (DType::F32, DType::U32) => format!("wgf_f32_to_u32({x})"),
        (DType::F32, DType::I32) => format!("wgf_f32_to_i32({x})"),
        (DType::I32, DType::U32) | (DType::U32, DType::I32) => {
            format!("bitcast<{}>({x})", to.wgsl())
        }
        (_, t) => format!("{}({x})", t.wgsl()),
    }
}
