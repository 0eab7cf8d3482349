//! Builders of the elementwise family: math, comparisons, logic and integer arithmetic, `where`
//! and `cast`; composites (`square`, `silu`, `gelu`, `leaky_relu`, `elu`, `clip`) over those
//! primitives.
//!
//! # dtype policy
//! wgflow never promotes implicitly: both operands of a binary op must have the same dtype, or
//! the builder fails with an error naming both dtypes and asking for an explicit
//! [`cast`](Graph::cast). Each op then accepts the dtypes its docs list (f32, i32, u32, bool);
//! logical ops take bool only, comparisons return bool.

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::elementwise::SmallFloat;
use crate::ops::{BinaryOp, Declared, Elementwise, Op, UnaryOp};
use crate::{DType, Error, Result};
use std::panic::Location;

impl Graph {
    unary_builders! {
        /// `-x` (f32, i32).
        neg => Neg;
        /// `|x|`.
        abs => Abs;
        /// `e^x` (f32).
        exp => Exp;
        /// Natural logarithm (f32).
        log => Log;
        /// Square root (f32).
        sqrt => Sqrt;
        /// Hyperbolic tangent (f32).
        tanh => Tanh;
        /// `1 / (1 + e^-x)` (f32).
        sigmoid => Sigmoid;
        /// `max(x, 0)`; NaN stays NaN.
        relu => Relu;
        /// Largest integer ≤ x (f32; identity on i32/u32).
        floor => Floor;
        /// Smallest integer ≥ x (f32; identity on i32/u32).
        ceil => Ceil;
        /// Round half to even, like NumPy's `round`/`rint` (f32; identity on i32/u32).
        round => Round;
        /// -1, 0 or 1 (f32, i32, u32); `sign(±0.0) == +0.0`, `sign(NaN)` is NaN.
        sign => Sign;
        /// `1 / x` (f32).
        reciprocal => Reciprocal;
        /// `1 / sqrt(x)` (f32).
        rsqrt => Rsqrt;
        /// `ln(1 + x)`, accurate for small x (f32).
        log1p => Log1p;
        /// `e^x - 1`, accurate for small x (f32).
        expm1 => Expm1;
        /// Sine (f32). GPUs may lose accuracy for |x| far beyond 2π.
        sin => Sin;
        /// Cosine (f32).
        cos => Cos;
        /// Tangent (f32), `tan(x)`; like `sin`, GPUs may lose accuracy for |x| far beyond 2π.
        tan => Tan;
        /// The error function (f32): a rational approximation with max error 4.2e-7
        /// (see `ops/elementwise/reference.rs`).
        erf => Erf;
        /// `ln(1 + e^x)`, computed without overflow (f32).
        softplus => Softplus;
        /// `x / (1 + |x|)` (f32); ±1 at ±inf.
        softsign => Softsign;
        /// Inverse sine (f32); NaN outside `[-1, 1]`.
        asin => Asin;
        /// Inverse cosine (f32); NaN outside `[-1, 1]`.
        acos => Acos;
        /// Inverse tangent (f32); `±π/2` at `±inf`.
        atan => Atan;
        /// Inverse hyperbolic sine (f32).
        asinh => Asinh;
        /// Inverse hyperbolic cosine (f32); NaN below 1.
        acosh => Acosh;
        /// Inverse hyperbolic tangent (f32); `±inf` at `±1`, NaN outside `[-1, 1]`.
        atanh => Atanh;
        /// NaN test → bool (f32; always false for integers).
        isnan => IsNan;
        /// ±inf test → bool (f32; always false for integers).
        isinf => IsInf;
        /// Neither NaN nor ±inf → bool (f32; always true for integers).
        isfinite => IsFinite;
        /// `!x` (bool).
        logical_not => LogicalNot;
        /// `!x`, every bit flipped (i32, u32).
        bitwise_not => BitNot;
        /// Rounded to the nearest bfloat16, ties to even (f32 in, f32 out; NaN and ±inf
        /// kept): computing "in bfloat16" one op at a time.
        round_bf16 => RoundBf16;
    }

    binary_builders! {
        /// `a + b` with NumPy broadcasting. Integer arithmetic wraps.
        add => Add;
        /// `a - b`.
        sub => Sub;
        /// `a * b`.
        mul => Mul;
        /// `a / b`. Integer division truncates toward zero; `x / 0 == x` for integers
        /// (WGSL's defined result, reproduced on `cpu:0`).
        div => Div;
        /// Elementwise maximum; NaN propagates like NumPy's `maximum`.
        maximum => Maximum;
        /// Elementwise minimum; NaN propagates.
        minimum => Minimum;
        /// `a ^ b` (f32, i32, u32). f32 follows C99/NumPy on every device: `(-2)^3 == -8`,
        /// `(-2)^0.5` is NaN, `x^0 == 1` and `1^y == 1` even for NaN, `pow(x, 2) == x*x`.
        /// Integers wrap; a negative i32 exponent gives the truncated real result
        /// (1 for base 1, ±1 for base -1, else 0) where NumPy raises.
        pow => Pow;
        /// `a == b` → bool.
        equal => Equal;
        /// `a < b` → bool.
        less => Less;
        /// `a > b` → bool.
        greater => Greater;
        /// `a != b` → bool (any dtype); NaN != anything.
        not_equal => NotEqual;
        /// `a <= b` → bool (f32, i32, u32); false if either is NaN.
        less_equal => LessEqual;
        /// `a >= b` → bool (f32, i32, u32); false if either is NaN.
        greater_equal => GreaterEqual;
        /// `a && b` (bool).
        logical_and => LogicalAnd;
        /// `a || b` (bool).
        logical_or => LogicalOr;
        /// `a != b` on bools (bool).
        logical_xor => LogicalXor;
        /// `⌊a / b⌋` (f32, i32, u32), NumPy's `//`. Integers: `x // 0 == 0` (NumPy's result,
        /// without its warning); `i32::MIN // -1 == i32::MIN` (wraps). Floats: NumPy's
        /// `npy_divmod` on an exact `fmod` (`-7 // 2 == -4`, `x // 0 == ±inf`, `0 // 0` NaN).
        floor_divide => FloorDiv;
        /// `a - b·⌊a / b⌋` (f32, i32, u32) with the sign of the divisor, like NumPy's `%`.
        /// Integers: `x % 0 == 0`. Floats: exact (`fmod`, then `+ b` if the signs differ):
        /// `7 % -2 == -1`, `x % 0` is NaN, `5 % inf == 5`, `-5 % inf == inf` as in NumPy.
        remainder => Remainder;
        /// `a & b` (i32, u32).
        bitwise_and => BitAnd;
        /// `a | b` (i32, u32).
        bitwise_or => BitOr;
        /// `a ^ b` (i32, u32).
        bitwise_xor => BitXor;
    }

    /// `where(cond, a, b)`: elementwise choice with broadcasting over all three.
    #[track_caller]
    pub fn select(&mut self, cond: Tensor, a: Tensor, b: Tensor) -> Result<Tensor> {
        let op = Op::Elementwise(Elementwise::Select);
        let site = Site::new("where", Location::caller());
        self.add_op(op, &[cond, a, b], Declared::none(), site)
    }

    /// Convert to `dtype`. Float→int truncates toward zero and saturates (NaN → 0);
    /// anything→bool is `x != 0`; i32↔u32 reinterpret the bits.
    #[track_caller]
    pub fn cast(&mut self, x: Tensor, dtype: DType) -> Result<Tensor> {
        let op = Op::Elementwise(Elementwise::Cast(dtype));
        let site = Site::new("cast", Location::caller());
        self.add_op(op, &[x], Declared::none(), site)
    }

    /// `x * x` (f32, i32, u32; integers wrap).
    #[track_caller]
    pub fn square(&mut self, x: Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, x, x, Location::caller())
    }

    /// `x · sigmoid(x)` (f32).
    #[track_caller]
    pub fn silu(&mut self, x: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        self.float_only("silu", x, loc)?;
        self.name_scope("silu", |g| {
            let s = g.unary(UnaryOp::Sigmoid, x, loc)?;
            g.binary(BinaryOp::Mul, x, s, loc)
        })
    }

    /// GELU (f32): `0.5·x·(1 + erf(x/√2))`, or with `approximate` the tanh form
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    #[track_caller]
    pub fn gelu(&mut self, x: Tensor, approximate: bool) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.float_only("gelu", x, loc)?;
        self.name_scope("gelu", |g| {
            let inner = if approximate {
                let x3 = g.binary(BinaryOp::Mul, x, x, loc)?;
                let x3 = g.binary(BinaryOp::Mul, x3, x, loc)?;
                let c = g.lit(d, 0.044715, loc)?;
                let t = g.binary(BinaryOp::Mul, x3, c, loc)?;
                let t = g.binary(BinaryOp::Add, x, t, loc)?;
                let k = g.lit(d, (2.0 / std::f64::consts::PI).sqrt(), loc)?;
                let t = g.binary(BinaryOp::Mul, t, k, loc)?;
                g.unary(UnaryOp::Tanh, t, loc)?
            } else {
                let k = g.lit(d, std::f64::consts::FRAC_1_SQRT_2, loc)?;
                let t = g.binary(BinaryOp::Mul, x, k, loc)?;
                g.unary(UnaryOp::Erf, t, loc)?
            };
            let one = g.lit(d, 1.0, loc)?;
            let half = g.lit(d, 0.5, loc)?;
            let t = g.binary(BinaryOp::Add, inner, one, loc)?;
            let hx = g.binary(BinaryOp::Mul, x, half, loc)?;
            g.binary(BinaryOp::Mul, hx, t, loc)
        })
    }

    /// `x` where `x >= 0`, else `alpha·x` (f32); NaN stays NaN.
    #[track_caller]
    pub fn leaky_relu(&mut self, x: Tensor, alpha: f32) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.float_only("leaky_relu", x, loc)?;
        self.name_scope("leaky_relu", |g| {
            let zero = g.lit(d, 0.0, loc)?;
            let a = g.lit(d, alpha as f64, loc)?;
            let neg = g.binary(BinaryOp::Less, x, zero, loc)?;
            let ax = g.binary(BinaryOp::Mul, x, a, loc)?;
            g.select(neg, ax, x)
        })
    }

    /// `x` where `x > 0`, else `alpha·(e^x - 1)` (f32); NaN stays NaN.
    #[track_caller]
    pub fn elu(&mut self, x: Tensor, alpha: f32) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.float_only("elu", x, loc)?;
        self.name_scope("elu", |g| {
            let zero = g.lit(d, 0.0, loc)?;
            let a = g.lit(d, alpha as f64, loc)?;
            let pos = g.binary(BinaryOp::Greater, x, zero, loc)?;
            let e = g.unary(UnaryOp::Expm1, x, loc)?;
            let ae = g.binary(BinaryOp::Mul, e, a, loc)?;
            g.select(pos, x, ae)
        })
    }

    /// `x` rounded to the nearest value of a float8 or float4 format, ties to even (f32 in,
    /// f32 out): computing "in float8" one op at a time. Past the format's largest value it
    /// gives what the format's overflow does (NaN, ±inf, or ±6 for float4); clip first to
    /// saturate instead.
    #[track_caller]
    pub fn round_to(&mut self, x: Tensor, to: SmallFloat) -> Result<Tensor> {
        self.unary(UnaryOp::RoundTo(to), x, Location::caller())
    }

    /// `minimum(maximum(x, min), max)` like NumPy's `clip` (f32, i32, u32); NaN propagates.
    /// The bounds must be representable in `x`'s dtype.
    #[track_caller]
    pub fn clip(&mut self, x: Tensor, min: f64, max: f64) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.arg(x, "clip", loc)?.dtype;
        if !d.is_numeric() {
            return Err(Error::build_dtype(
                "clip",
                loc,
                format!("dtype {d} is not supported (expects f32, i32 or u32)"),
                &[d],
            ));
        }
        self.name_scope("clip", |g| {
            let lo = g.lit(d, min, loc)?;
            let hi = g.lit(d, max, loc)?;
            let t = g.binary(BinaryOp::Maximum, x, lo, loc)?;
            g.binary(BinaryOp::Minimum, t, hi, loc)
        })
    }

    /// The unary primitive `op` of `x` (what each of the builders above calls; for callers
    /// that choose the primitive at run time, such as importers and bindings).
    #[track_caller]
    pub fn unary_op(&mut self, op: UnaryOp, x: Tensor) -> Result<Tensor> {
        self.unary(op, x, Location::caller())
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, x: Tensor, loc: Loc) -> Result<Tensor> {
        let site = Site::new(op.name(), loc);
        self.add_op(
            Op::Elementwise(Elementwise::Unary(op)),
            &[x],
            Declared::none(),
            site,
        )
    }

    /// The binary primitive `op` of `a` and `b` (what each of the builders above calls;
    /// for callers that choose the primitive at run time).
    #[track_caller]
    pub fn binary_op(&mut self, op: BinaryOp, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(op, a, b, Location::caller())
    }

    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        a: Tensor,
        b: Tensor,
        loc: Loc,
    ) -> Result<Tensor> {
        let site = Site::new(op.name(), loc);
        self.add_op(
            Op::Elementwise(Elementwise::Binary(op)),
            &[a, b],
            Declared::none(),
            site,
        )
    }
}
