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
//! variant, one row here (and its index, next to the table), one builder line (`graph/build/elementwise.rs`, where its rustdoc
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
/// `ALL`, `def`, `name`, `from_name` and `from_onnx` of a primitive enum, read from its
/// table; `index` (the enum's own exhaustive rule) places each variant at its row.
macro_rules! lookups {
    ($op:ident, $def:ident, $table:ident, $first:expr) => {
        impl $op {
            /// Every primitive (for exhaustive tests), in its table's order.
            pub const ALL: [$op; $table.len()] = {
                let mut out = [$first; $table.len()];
                let mut i = 0;
                while i < $table.len() {
                    out[i] = $table[i].op;
                    i += 1;
                }
                out
            };

            /// This primitive's row (`every_primitive_has_its_row` checks the indices).
            pub fn def(self) -> &'static $def {
                &$table[self.index()]
            }

            /// Its name in graph files and expressions.
            pub fn name(self) -> &'static str {
                self.def().name
            }

            /// The primitive of that name.
            pub fn from_name(name: &str) -> Option<$op> {
                $table.iter().find(|d| d.name == name).map(|d| d.op)
            }

            /// The primitive an ONNX op (default domain) is, 1:1.
            pub fn from_onnx(op: &str) -> Option<$op> {
                $table
                    .iter()
                    .find(|d| d.onnx.is_some_and(|(o, _)| o == op))
                    .map(|d| d.op)
            }
        }
    };
}

lookups!(UnaryOp, UnaryDef, UNARY, UnaryOp::Neg);
lookups!(BinaryOp, BinaryDef, BINARY, BinaryOp::Add);

impl UnaryOp {
    /// Its row in [`UNARY`]: an exhaustive match, so a new variant does not build until it
    /// has one. A constant-time lookup, since `cpu:0`'s reference asks per element.
    const fn index(self) -> usize {
        match self {
            U::Neg => 0,
            U::Abs => 1,
            U::Exp => 2,
            U::Log => 3,
            U::Sqrt => 4,
            U::Tanh => 5,
            U::Sigmoid => 6,
            U::Relu => 7,
            U::Floor => 8,
            U::Ceil => 9,
            U::Round => 10,
            U::Sign => 11,
            U::Reciprocal => 12,
            U::Rsqrt => 13,
            U::Log1p => 14,
            U::Expm1 => 15,
            U::Sin => 16,
            U::Cos => 17,
            U::Tan => 18,
            U::Erf => 19,
            U::Softplus => 20,
            U::Softsign => 21,
            U::Asin => 22,
            U::Acos => 23,
            U::Atan => 24,
            U::Asinh => 25,
            U::Acosh => 26,
            U::Atanh => 27,
            U::IsNan => 28,
            U::IsInf => 29,
            U::IsFinite => 30,
            U::LogicalNot => 31,
            U::BitNot => 32,
            U::RoundBf16 => 33,
            U::RoundTo(SmallFloat::F8E4M3Fn) => 34,
            U::RoundTo(SmallFloat::F8E4M3FnUz) => 35,
            U::RoundTo(SmallFloat::F8E5M2) => 36,
            U::RoundTo(SmallFloat::F8E5M2FnUz) => 37,
            U::RoundTo(SmallFloat::F4E2M1) => 38,
        }
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

impl BinaryOp {
    /// Its row in [`BINARY`]: the enum is fieldless and declared in the table's order.
    const fn index(self) -> usize {
        self as usize
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

    /// Each row sits at its variant's index, once; names and ONNX ops lead back to it.
    #[test]
    fn every_primitive_has_its_row() {
        for (i, d) in UNARY.iter().enumerate() {
            assert_eq!(d.op.index(), i, "{d:?}");
            assert_eq!(UnaryOp::from_name(d.name), Some(d.op));
            if let Some((o, _)) = d.onnx {
                assert_eq!(UnaryOp::from_onnx(o), Some(d.op));
            }
        }
        for (i, d) in BINARY.iter().enumerate() {
            assert_eq!(d.op.index(), i, "{d:?}");
            assert_eq!(BinaryOp::from_name(d.name), Some(d.op));
            if let Some((o, _)) = d.onnx {
                assert_eq!(BinaryOp::from_onnx(o), Some(d.op));
            }
        }
    }
}
