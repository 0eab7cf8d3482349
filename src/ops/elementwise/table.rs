//! The elementwise primitives, one row each: what every front end and format needs to know
//! about a primitive that is not code. `ALL`, `name`, the dtype rule (`result_dtype`), the
//! ONNX importer's and exporter's 1:1 mappings, the graph file's names and the Python
//! bindings' lists all read these tables ([`UNARY`], [`BINARY`]); nothing else keeps a list
//! of the primitives.
//!
//! What each primitive computes is code, one `match` arm per backend, and the compiler
//! lists every arm a new variant needs: the scalar reference (`reference.rs`, which cpu:0
//! also runs for ops without a vectorized path), the WGSL (`wgsl.rs`, with helpers in
//! `shaders/prelude.wgsl`) and the derivative (`expr/vjp.rs`). A new primitive is one
//! variant, one row here, one builder line (`graph/build/elementwise.rs`, where its rustdoc
//! lives), those three arms, and its tests.

use super::{BinaryOp, SmallFloat, UnaryOp};
use crate::DType;

/// The dtypes a unary primitive takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// f32 and f16.
    Float,
    /// Every numeric dtype (f32, f16, i32, u32).
    Numeric,
    /// Signed ones (f32, f16, i32).
    Signed,
    /// i32 and u32.
    Int,
    /// bool.
    Bool,
}

impl Accepts {
    fn admits(self, x: DType) -> bool {
        match self {
            Accepts::Float => x.is_float(),
            Accepts::Numeric => x.is_numeric(),
            Accepts::Signed => x.is_signed(),
            Accepts::Int => matches!(x, DType::I32 | DType::U32),
            Accepts::Bool => x == DType::Bool,
        }
    }

    /// The dtypes in words, for errors.
    pub fn describe(self) -> &'static str {
        match self {
            Accepts::Float => "f32",
            Accepts::Numeric => "f32, i32 or u32",
            Accepts::Signed => "f32 or i32",
            Accepts::Int => "i32 or u32",
            Accepts::Bool => "bool",
        }
    }
}

/// One unary primitive's row.
#[derive(Debug, Clone, Copy)]
pub struct UnaryDef {
    pub op: UnaryOp,
    /// Its name in graph files, in expressions and in the Python bindings (the builder
    /// method's name, except for the `round_to` formats).
    pub name: &'static str,
    /// The ONNX op it is, 1:1 (default domain), and the opset that op appeared in: the
    /// importer translates it to this primitive unless a hand-written row in
    /// `onnx/registry.rs` handles attributes or types it cannot, and the exporter writes it
    /// where the opset allows.
    pub onnx: Option<(&'static str, i64)>,
    pub accepts: Accepts,
    /// Gives bool whatever its operand's dtype.
    pub predicate: bool,
}

const fn row(op: UnaryOp, name: &'static str, accepts: Accepts) -> UnaryDef {
    UnaryDef {
        op,
        name,
        onnx: None,
        accepts,
        predicate: false,
    }
}

impl UnaryDef {
    const fn onnx(mut self, op: &'static str, since: i64) -> Self {
        self.onnx = Some((op, since));
        self
    }

    const fn predicate(mut self) -> Self {
        self.predicate = true;
        self
    }
}

use Accepts::{Bool, Float, Int, Numeric, Signed};
use UnaryOp as U;

/// Every unary primitive, in [`UnaryOp::ALL`]'s order.
#[rustfmt::skip]
pub const UNARY: [UnaryDef; 39] = [
    row(U::Neg, "neg", Signed).onnx("Neg", 1),
    row(U::Abs, "abs", Numeric).onnx("Abs", 1),
    row(U::Exp, "exp", Float).onnx("Exp", 1),
    row(U::Log, "log", Float).onnx("Log", 1),
    row(U::Sqrt, "sqrt", Float).onnx("Sqrt", 1),
    row(U::Tanh, "tanh", Float).onnx("Tanh", 1),
    row(U::Sigmoid, "sigmoid", Float).onnx("Sigmoid", 1),
    row(U::Relu, "relu", Numeric).onnx("Relu", 1),
    row(U::Floor, "floor", Numeric).onnx("Floor", 1),
    row(U::Ceil, "ceil", Numeric).onnx("Ceil", 1),
    row(U::Round, "round", Numeric).onnx("Round", 11),
    row(U::Sign, "sign", Numeric).onnx("Sign", 9),
    row(U::Reciprocal, "reciprocal", Float).onnx("Reciprocal", 1),
    row(U::Rsqrt, "rsqrt", Float),
    row(U::Log1p, "log1p", Float),
    row(U::Expm1, "expm1", Float),
    row(U::Sin, "sin", Float).onnx("Sin", 7),
    row(U::Cos, "cos", Float).onnx("Cos", 7),
    row(U::Tan, "tan", Float).onnx("Tan", 7),
    row(U::Erf, "erf", Float).onnx("Erf", 9),
    row(U::Softplus, "softplus", Float).onnx("Softplus", 1),
    row(U::Softsign, "softsign", Float).onnx("Softsign", 1),
    row(U::Asin, "asin", Float).onnx("Asin", 7),
    row(U::Acos, "acos", Float).onnx("Acos", 7),
    row(U::Atan, "atan", Float).onnx("Atan", 7),
    row(U::Asinh, "asinh", Float).onnx("Asinh", 9),
    row(U::Acosh, "acosh", Float).onnx("Acosh", 9),
    row(U::Atanh, "atanh", Float).onnx("Atanh", 9),
    row(U::IsNan, "isnan", Numeric).predicate().onnx("IsNaN", 9),
    // ONNX's IsInf has attributes (which signs); its import row is hand-written.
    row(U::IsInf, "isinf", Numeric).predicate().onnx("IsInf", 10),
    row(U::IsFinite, "isfinite", Numeric).predicate(),
    row(U::LogicalNot, "logical_not", Bool).predicate().onnx("Not", 1),
    // Hand-written import row too: a uint64 operand is refused.
    row(U::BitNot, "bitwise_not", Int).onnx("BitwiseNot", 18),
    row(U::RoundBf16, "round_bf16", Float),
    row(U::RoundTo(SmallFloat::F8E4M3Fn), "round_f8e4m3fn", Float),
    row(U::RoundTo(SmallFloat::F8E4M3FnUz), "round_f8e4m3fnuz", Float),
    row(U::RoundTo(SmallFloat::F8E5M2), "round_f8e5m2", Float),
    row(U::RoundTo(SmallFloat::F8E5M2FnUz), "round_f8e5m2fnuz", Float),
    row(U::RoundTo(SmallFloat::F4E2M1), "round_f4e2m1", Float),
];

/// What a variant without a row would get: a name that says so.
static UNLISTED: UnaryDef = row(UnaryOp::Neg, "unlisted_unary_primitive", Float);

const fn all_ops() -> [UnaryOp; UNARY.len()] {
    let mut out = [UnaryOp::Neg; UNARY.len()];
    let mut i = 0;
    while i < UNARY.len() {
        out[i] = UNARY[i].op;
        i += 1;
    }
    out
}

impl UnaryOp {
    /// Every unary primitive (for exhaustive tests), from [`UNARY`].
    pub const ALL: [UnaryOp; UNARY.len()] = all_ops();

    /// This primitive's row.
    pub fn def(self) -> &'static UnaryDef {
        // `every_unary_primitive_has_one_row` keeps the fallback unreachable.
        UNARY.iter().find(|d| d.op == self).unwrap_or(&UNLISTED)
    }

    /// Its name in graph files and expressions.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The primitive of that name.
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UNARY.iter().find(|d| d.name == name).map(|d| d.op)
    }

    /// The primitive an ONNX op (default domain) is, 1:1.
    pub fn from_onnx(op: &str) -> Option<UnaryOp> {
        UNARY
            .iter()
            .find(|d| d.onnx.is_some_and(|(o, _)| o == op))
            .map(|d| d.op)
    }

    /// Produces bool whatever its operand's dtype.
    pub fn is_predicate(self) -> bool {
        self.def().predicate
    }

    /// The dtype rule: `Err` names the dtypes this op accepts.
    pub fn result_dtype(self, x: DType) -> Result<DType, &'static str> {
        let d = self.def();
        match (d.accepts.admits(x), d.predicate) {
            (true, true) => Ok(DType::Bool),
            (true, false) => Ok(x),
            (false, _) => Err(d.accepts.describe()),
        }
    }
}

/// What a binary primitive computes from two operands of one dtype, as far as dtypes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryKind {
    /// Numeric operands, a result of their dtype.
    Arithmetic,
    /// Any dtype, a bool result (`equal`, `not_equal`).
    Equality,
    /// Numeric operands, a bool result.
    Ordering,
    /// bool operands and result.
    Logical,
    /// i32 or u32 operands and result.
    Bitwise,
}

/// One binary primitive's row (the fields as [`UnaryDef`]'s).
#[derive(Debug, Clone, Copy)]
pub struct BinaryDef {
    pub op: BinaryOp,
    pub name: &'static str,
    pub onnx: Option<(&'static str, i64)>,
    pub kind: BinaryKind,
}

const fn bin(op: BinaryOp, name: &'static str, kind: BinaryKind) -> BinaryDef {
    BinaryDef {
        op,
        name,
        onnx: None,
        kind,
    }
}

impl BinaryDef {
    const fn onnx(mut self, op: &'static str, since: i64) -> Self {
        self.onnx = Some((op, since));
        self
    }
}

use BinaryKind::{Arithmetic, Bitwise, Equality, Logical, Ordering};
use BinaryOp as B;

/// Every binary primitive, in [`BinaryOp::ALL`]'s order. ONNX's `Max`, `Min` and `Pow` take
/// more operands or mixed types, so their import rows are hand-written; they export 1:1.
#[rustfmt::skip]
pub const BINARY: [BinaryDef; 21] = [
    bin(B::Add, "add", Arithmetic).onnx("Add", 1),
    bin(B::Sub, "sub", Arithmetic).onnx("Sub", 1),
    bin(B::Mul, "mul", Arithmetic).onnx("Mul", 1),
    bin(B::Div, "div", Arithmetic).onnx("Div", 1),
    bin(B::Maximum, "maximum", Arithmetic).onnx("Max", 1),
    bin(B::Minimum, "minimum", Arithmetic).onnx("Min", 1),
    bin(B::Pow, "pow", Arithmetic).onnx("Pow", 1),
    bin(B::Equal, "equal", Equality).onnx("Equal", 1),
    bin(B::Less, "less", Ordering).onnx("Less", 1),
    bin(B::Greater, "greater", Ordering).onnx("Greater", 1),
    bin(B::NotEqual, "not_equal", Equality),
    bin(B::LessEqual, "less_equal", Ordering).onnx("LessOrEqual", 12),
    bin(B::GreaterEqual, "greater_equal", Ordering).onnx("GreaterOrEqual", 12),
    bin(B::LogicalAnd, "logical_and", Logical).onnx("And", 1),
    bin(B::LogicalOr, "logical_or", Logical).onnx("Or", 1),
    bin(B::LogicalXor, "logical_xor", Logical).onnx("Xor", 1),
    bin(B::FloorDiv, "floor_divide", Arithmetic),
    bin(B::Remainder, "remainder", Arithmetic),
    bin(B::BitAnd, "bitwise_and", Bitwise).onnx("BitwiseAnd", 18),
    bin(B::BitOr, "bitwise_or", Bitwise).onnx("BitwiseOr", 18),
    bin(B::BitXor, "bitwise_xor", Bitwise).onnx("BitwiseXor", 18),
];

static UNLISTED_BINARY: BinaryDef = bin(BinaryOp::Add, "unlisted_binary_primitive", Arithmetic);

const fn all_binary() -> [BinaryOp; BINARY.len()] {
    let mut out = [BinaryOp::Add; BINARY.len()];
    let mut i = 0;
    while i < BINARY.len() {
        out[i] = BINARY[i].op;
        i += 1;
    }
    out
}

impl BinaryOp {
    /// Every binary primitive (for exhaustive tests), from [`BINARY`].
    pub const ALL: [BinaryOp; BINARY.len()] = all_binary();

    /// This primitive's row.
    pub fn def(self) -> &'static BinaryDef {
        BINARY
            .iter()
            .find(|d| d.op == self)
            .unwrap_or(&UNLISTED_BINARY)
    }

    /// Its name in graph files and expressions.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The primitive of that name.
    pub fn from_name(name: &str) -> Option<BinaryOp> {
        BINARY.iter().find(|d| d.name == name).map(|d| d.op)
    }

    /// The primitive an ONNX op (default domain) is, 1:1.
    pub fn from_onnx(op: &str) -> Option<BinaryOp> {
        BINARY
            .iter()
            .find(|d| d.onnx.is_some_and(|(o, _)| o == op))
            .map(|d| d.op)
    }

    /// Produces bool from operands of any (shared) dtype.
    pub fn is_comparison(self) -> bool {
        matches!(self.def().kind, Equality | Ordering)
    }

    pub fn is_logical(self) -> bool {
        self.def().kind == Logical
    }

    /// The dtype rule for operands of dtype `x` (both operands must already agree).
    pub fn result_dtype(self, x: DType) -> Result<DType, &'static str> {
        match self.def().kind {
            Equality => Ok(DType::Bool),
            Ordering if x.is_numeric() => Ok(DType::Bool),
            Logical if x == DType::Bool => Ok(DType::Bool),
            Logical => Err("bool"),
            Bitwise if matches!(x, DType::I32 | DType::U32) => Ok(x),
            Bitwise => Err("i32 or u32"),
            Ordering | Arithmetic if !x.is_numeric() => Err("f32, i32 or u32"),
            Ordering | Arithmetic => Ok(x),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A variant without a row would take row 0's facts: every variant has exactly one,
    /// and names and ONNX ops are unique.
    #[test]
    fn every_unary_primitive_has_one_row() {
        for (i, d) in UNARY.iter().enumerate() {
            assert_eq!(UNARY.iter().filter(|e| e.op == d.op).count(), 1, "{d:?}");
            assert_eq!(d.op.def().op, d.op);
            assert_eq!(UnaryOp::from_name(d.name), Some(d.op));
            if let Some((o, _)) = d.onnx {
                assert_eq!(UnaryOp::from_onnx(o), Some(d.op));
            }
            assert_eq!(UnaryOp::ALL[i], d.op);
        }
        // The compiler checks this match is exhaustive: a new variant fails to build here
        // until it has a row above.
        for op in UnaryOp::ALL {
            let _: () = match op {
                U::Neg | U::Abs | U::Exp | U::Log | U::Sqrt | U::Tanh | U::Sigmoid | U::Relu => (),
                U::Floor | U::Ceil | U::Round | U::Sign | U::Reciprocal | U::Rsqrt => (),
                U::Log1p | U::Expm1 | U::Sin | U::Cos | U::Tan | U::Erf | U::Softplus => (),
                U::Softsign => (),
                U::Asin | U::Acos | U::Atan | U::Asinh | U::Acosh | U::Atanh => (),
                U::IsNan | U::IsInf | U::IsFinite | U::LogicalNot | U::BitNot => (),
                U::RoundBf16 | U::RoundTo(_) => (),
            };
        }
    }

    #[test]
    fn every_binary_primitive_has_one_row() {
        for (i, d) in BINARY.iter().enumerate() {
            assert_eq!(BINARY.iter().filter(|e| e.op == d.op).count(), 1, "{d:?}");
            assert_eq!(d.op.def().op, d.op);
            assert_eq!(BinaryOp::from_name(d.name), Some(d.op));
            if let Some((o, _)) = d.onnx {
                assert_eq!(BinaryOp::from_onnx(o), Some(d.op));
            }
            assert_eq!(BinaryOp::ALL[i], d.op);
        }
        for op in BinaryOp::ALL {
            let _: () = match op {
                B::Add | B::Sub | B::Mul | B::Div | B::Maximum | B::Minimum | B::Pow => (),
                B::Equal | B::Less | B::Greater | B::NotEqual | B::LessEqual => (),
                B::GreaterEqual | B::LogicalAnd | B::LogicalOr | B::LogicalXor => (),
                B::FloorDiv | B::Remainder | B::BitAnd | B::BitOr | B::BitXor => (),
            };
        }
    }
}
