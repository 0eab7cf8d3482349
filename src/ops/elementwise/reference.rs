//! Scalar semantics of the elementwise primitives: the CPU reference that every GPU kernel is
//! tested against, and the one place where results the WGSL spec leaves open are defined.
//!
//! Functions without a WGSL builtin use these algorithms (the WGSL twins live in
//! `shaders/prelude.wgsl`):
//! - `erf`: Eigen's/XLA's single-precision rational approximation `x·P(x²)/Q(x²)` on
//!   `x` clamped to `[-4, 4]`; measured max abs and max relative error 4.2e-7 against
//!   Python's `math.erf` on a dense grid (200k points on [-6, 6], 22k log-spaced points near 0).
//!   CPU and GPU run the same operations, so they differ only by rounding (fused
//!   multiply-adds on some drivers), well under 1e-6.
//! - `log1p`, `expm1`: the CPU uses Rust's `ln_1p`/`exp_m1` (libm). GPUs cannot lean on the
//!   driver's `log`/`exp` near 1/0 (Vulkan bounds only log's absolute error there, and lavapipe
//!   is 0.5% off for `log(1 - 1e-5)`), so they use series for small `|x|` (atanh series for
//!   log1p when `|x| < 0.25`, Taylor to degree 8 for expm1 when `|x| < 0.35`) and `x` itself
//!   for `|x| < 1e-8`; measured agreement with NumPy within 2e-6 relative.
//! - `exp`, `sigmoid`, `tanh`, `log`: the branch-free functions of `ops/elementwise/vmath.rs`
//!   (the fused evaluator runs the same code over whole chunks, vectorized): `exp` in f32 with
//!   fused multiply-adds, the others computed in f64 and rounded once; error bounds there and
//!   in `docs/ops_elementwise.md` (all within 1 ulp of f64 over every f32 input).
//! - `softplus(x) = max(x, 0) + log1p(e^-|x|)`: no overflow for large `|x|`.
//! - `softsign(x) = x / (1 + |x|)`, one correctly rounded division; `±1` at `±inf` (the
//!   limit: the formula would give `inf / inf`), NaN stays NaN, `±0` keeps its sign.
//! - `asin`, `acos`, `atan`, `asinh`, `acosh`, `atanh`: libm's f64 functions rounded once
//!   (NaN out of domain, `atanh(±1) = ±inf`, `atan(±inf) = ±π/2`); the GPU twins in the
//!   prelude guard the domain edges the WGSL builtins leave undefined and use `log1p` forms.
//! - `pow`: libm's `powf` (C99), but `x*x`, `x`, `1/x`, `sqrt(x)` for exponents 2, 1, -1, 0.5;
//!   the GPU twin `wgf_pow_f32` decides C99's special cases on the bits.
//! - float `floor_divide`/`remainder`: NumPy's `npy_divmod` on the exact fmod (`%` here,
//!   musl's integer algorithm in `wgf_fmod_f32`).
//!
//! Integer rules (identical on every backend): arithmetic wraps; `div` truncates with
//! `x / 0 == x`; `floor_divide(x, 0) == 0` and `remainder(x, 0) == 0` (NumPy's results, which
//! it pairs with a warning); `i32::MIN // -1 == i32::MIN`; `pow` with a negative exponent is
//! the truncated real result: `1` for base 1, `±1` for base -1, `0` otherwise (including base 0;
//! NumPy raises instead).

use super::vmath;
use super::{BinaryOp, ElementwiseKernel, Node, UnaryOp};
use crate::dtype::{f16_to_f32_word, f32_to_f16_word};
use crate::DType;

impl ElementwiseKernel {
    /// The reference evaluator the fast path is tested against: node by node over whole
    /// arrays, each freed after its last use, one scalar function call per element. No
    /// recursion, so any chain length runs on a small stack, and a chain holds two arrays at
    /// a time.
    #[doc(hidden)]
    pub fn reference(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let dtypes: Vec<DType> = self.inputs.iter().map(|(_, d)| *d).collect();
        let nodes = self.expr.nodes();
        let types = self.expr.dtypes(&dtypes);
        let n = self.out_shape.numel();
        let mut last = vec![0; nodes.len()];
        for (k, node) in nodes.iter().enumerate() {
            for o in node.operands() {
                last[o] = k;
            }
        }
        let mut vals: Vec<Vec<u32>> = Vec::with_capacity(nodes.len());
        for (k, node) in nodes.iter().enumerate() {
            // An operand whose last use is here gives its array to the result.
            let own = |o: usize, vals: &mut Vec<Vec<u32>>| {
                if last[o] == k && node.operands().filter(|&x| x == o).count() == 1 {
                    std::mem::take(&mut vals[o])
                } else {
                    vals[o].clone()
                }
            };
            let v = match *node {
                Node::Input(i) => self.load_cpu(i, inputs[i]),
                Node::Lit(_, w) => vec![w; n],
                Node::Unary(op, a) => {
                    let d = types[a];
                    let mut v = own(a, &mut vals);
                    for w in &mut v {
                        *w = unary_cpu(op, d, *w);
                    }
                    v
                }
                Node::Cast(to, a) => {
                    let from = types[a];
                    let mut v = own(a, &mut vals);
                    for w in &mut v {
                        *w = cast_cpu(from, to, *w);
                    }
                    v
                }
                Node::Binary(op, a, b) => {
                    let d = types[a];
                    let mut v = own(a, &mut vals);
                    for (x, &y) in v.iter_mut().zip(&vals[b]) {
                        *x = binary_cpu(op, d, *x, y);
                    }
                    v
                }
                Node::Select(c, a, b) => (0..n)
                    .map(|i| {
                        if vals[c][i] != 0 {
                            vals[a][i]
                        } else {
                            vals[b][i]
                        }
                    })
                    .collect(),
            };
            for o in node.operands() {
                if last[o] == k {
                    vals[o] = Vec::new();
                }
            }
            vals.push(v);
        }
        vals.pop().unwrap_or_default()
    }

    /// Input `i`'s words at every output index (through its view or broadcast).
    fn load_cpu(&self, i: usize, data: &[u32]) -> Vec<u32> {
        let n = self.out_shape.numel();
        let (shape, _) = &self.inputs[i];
        if let Some(view) = self.view(i) {
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
}

fn f(w: u32) -> f32 {
    f32::from_bits(w)
}

fn fw(x: f32) -> u32 {
    x.to_bits()
}

// Eigen's coefficients as published (f64 text), rounded once to f32.
const ERF_P: [f32; 7] = [
    -2.72614225801306e-10_f64 as f32,
    2.77068142495902e-08_f64 as f32,
    -2.10102402082508e-06_f64 as f32,
    -5.69250639462346e-05_f64 as f32,
    -7.34990630326855e-04_f64 as f32,
    -2.95459980854025e-03_f64 as f32,
    -1.60960333262415e-02_f64 as f32,
];
const ERF_Q: [f32; 5] = [
    -1.45660718464996e-05_f64 as f32,
    -2.13374055278905e-04_f64 as f32,
    -1.68282697438203e-03_f64 as f32,
    -7.37332916720468e-03_f64 as f32,
    -1.42647390514189e-02_f64 as f32,
];

/// The error function, by the approximation described in the module docs; branch-free, so a
/// loop over it vectorizes.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let xc = x.clamp(-4.0, 4.0);
    let x2 = xc * xc;
    let mut p = ERF_P[0];
    for c in &ERF_P[1..] {
        p = x2 * p + c;
    }
    let mut q = ERF_Q[0];
    for c in &ERF_Q[1..] {
        q = x2 * q + c;
    }
    let y = xc * p / q;
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// Coefficients of the `erf` approximation as WGSL-exact f32 words `(P, Q)`, highest degree
/// first, so the prelude and this file cannot drift (a test compares them).
pub fn erf_coefficients() -> (Vec<u32>, Vec<u32>) {
    (
        ERF_P.iter().map(|c| c.to_bits()).collect(),
        ERF_Q.iter().map(|c| c.to_bits()).collect(),
    )
}

/// `base^exp` with wrapping multiplication (square-and-multiply on the bits, so i32 and u32
/// share it: two's-complement products agree modulo 2^32).
fn pow_u32(base: u32, exp: u32) -> u32 {
    let (mut r, mut b, mut k) = (1u32, base, exp);
    while k != 0 {
        if k & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        k >>= 1;
    }
    r
}

fn pow_i32(a: i32, e: i32) -> i32 {
    if e >= 0 {
        return pow_u32(a as u32, e as u32) as i32;
    }
    match a {
        1 => 1,
        -1 if e % 2 == 0 => 1,
        -1 => -1,
        _ => 0,
    }
}

fn floor_div_i32(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    let q = a.wrapping_div(b);
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn rem_i32(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// `a^b` with C99's special cases (libm's `powf`, as NumPy), except that exponents 2, 1, -1
/// and 0.5 give `a*a`, `a`, `1/a` and `sqrt(a)`: glibc's powf is not correctly rounded at
/// ties (`(1 + 2^-12)^2` came out one ulp above `a*a`), and the GPU kernels use these forms.
pub fn pow_f32(a: f32, b: f32) -> f32 {
    match b {
        2.0 => a * a,
        1.0 => a,
        -1.0 => 1.0 / a,
        // sqrt(-0) is -0 and sqrt(-inf) NaN where pow gives +0 and +inf.
        0.5 if a != 0.0 && a != f32::NEG_INFINITY => a.sqrt(),
        _ => a.powf(b),
    }
}

/// NumPy's `npy_divmod` on f32: `(floor_divide, remainder)`. Rust's `%` is the exact fmod;
/// `(a - mod) / b` is then nearly an integer, moved down by one when the remainder takes the
/// divisor's sign and snapped to the nearest integer. `b == 0` gives `(a / b, NaN)`.
pub fn divmod_f32(a: f32, b: f32) -> (f32, f32) {
    let m = a % b;
    if b == 0.0 {
        return (a / b, m);
    }
    if m.is_nan() {
        return (m, m);
    }
    let (mut m, mut div) = (m, (a - m) / b);
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m += b;
            div -= 1.0;
        }
    } else {
        m = 0.0f32.copysign(b);
    }
    let q = if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 {
            f + 1.0
        } else {
            f
        }
    } else {
        0.0f32.copysign(a / b)
    };
    (q, m)
}

#[inline(always)]
pub(crate) fn sign_f32(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else if x.is_nan() {
        x
    } else {
        0.0
    }
}

/// relu is NumPy's maximum(x, 0): NaN stays NaN (WGSL's max(NaN, 0) is 0 on most adapters,
/// so the GPU tests the bits) and relu(-0.0) is the second operand, +0.0.
#[inline(always)]
pub(crate) fn relu_f32(w: u32) -> u32 {
    if f(w) > 0.0 || f(w).is_nan() {
        w
    } else {
        fw(0.0)
    }
}

/// NumPy's maximum: NaN if either is NaN, and, like NumPy and the GPU drivers' max, the
/// second operand for equal values, which decides maximum(0.0, -0.0) == -0.0 (Rust's max
/// leaves it open).
#[inline(always)]
pub(crate) fn maximum_f32(a: f32, c: f32) -> f32 {
    if a.is_nan() || c.is_nan() {
        f32::NAN
    } else if a > c {
        a
    } else {
        c
    }
}

/// NumPy's minimum (the rules of [`maximum_f32`]).
#[inline(always)]
pub(crate) fn minimum_f32(a: f32, c: f32) -> f32 {
    if a.is_nan() || c.is_nan() {
        f32::NAN
    } else if a < c {
        a
    } else {
        c
    }
}

/// One unary op on one element of dtype `d`, with the semantics the WGSL kernel has.
pub fn unary_cpu(op: UnaryOp, d: DType, w: u32) -> u32 {
    let b = |v: bool| v as u32;
    if d == DType::F16 {
        // Computed in f32, rounded once to f16 (predicates return bools).
        let r = unary_cpu(op, DType::F32, f16_to_f32_word(w));
        return if op.is_predicate() {
            r
        } else {
            f32_to_f16_word(r)
        };
    }
    match (d, op) {
        (DType::F32, UnaryOp::Neg) => fw(-f(w)),
        (DType::F32, UnaryOp::Abs) => fw(f(w).abs()),
        (DType::F32, UnaryOp::Exp) => fw(vmath::exp(f(w))),
        (DType::F32, UnaryOp::Log) => fw(vmath::log(f(w))),
        (DType::F32, UnaryOp::Sqrt) => fw(f(w).sqrt()),
        (DType::F32, UnaryOp::Tanh) => fw(vmath::tanh(f(w))),
        (DType::F32, UnaryOp::Sigmoid) => fw(vmath::sigmoid(f(w))),
        (DType::F32, UnaryOp::Relu) => relu_f32(w),
        (DType::F32, UnaryOp::Floor) => fw(f(w).floor()),
        (DType::F32, UnaryOp::Ceil) => fw(f(w).ceil()),
        (DType::F32, UnaryOp::Round) => fw(f(w).round_ties_even()),
        (DType::F32, UnaryOp::Sign) => fw(sign_f32(f(w))),
        (DType::F32, UnaryOp::Reciprocal) => fw(1.0 / f(w)),
        (DType::F32, UnaryOp::Rsqrt) => fw(1.0 / f(w).sqrt()),
        (DType::F32, UnaryOp::Log1p) => fw(f(w).ln_1p()),
        (DType::F32, UnaryOp::Expm1) => fw(f(w).exp_m1()),
        (DType::F32, UnaryOp::Sin) => fw(f(w).sin()),
        (DType::F32, UnaryOp::Cos) => fw(f(w).cos()),
        // In f64 and rounded once: f32's own tan loses digits near the poles.
        (DType::F32, UnaryOp::Tan) => fw((f(w) as f64).tan() as f32),
        (DType::F32, UnaryOp::Erf) => fw(erf(f(w))),
        (DType::F32, UnaryOp::Softplus) => {
            let x = f(w);
            if x.is_nan() {
                w
            } else {
                fw(x.max(0.0) + (-x.abs()).exp().ln_1p())
            }
        }
        (DType::F32, UnaryOp::Softsign) => {
            let x = f(w);
            if x.is_infinite() {
                fw(x.signum())
            } else {
                fw(x / (1.0 + x.abs()))
            }
        }
        // Computed in f64 (libm) and rounded once; f64's functions give NaN out of domain.
        (DType::F32, UnaryOp::Asin) => fw((f(w) as f64).asin() as f32),
        (DType::F32, UnaryOp::Acos) => fw((f(w) as f64).acos() as f32),
        (DType::F32, UnaryOp::Atan) => fw((f(w) as f64).atan() as f32),
        (DType::F32, UnaryOp::Asinh) => fw((f(w) as f64).asinh() as f32),
        (DType::F32, UnaryOp::Acosh) => fw((f(w) as f64).acosh() as f32),
        (DType::F32, UnaryOp::Atanh) => fw((f(w) as f64).atanh() as f32),
        (DType::F32, UnaryOp::IsNan) => b(f(w).is_nan()),
        (DType::F32, UnaryOp::IsInf) => b(f(w).is_infinite()),
        (DType::F32, UnaryOp::IsFinite) => b(f(w).is_finite()),
        (_, UnaryOp::IsNan | UnaryOp::IsInf) => 0,
        (_, UnaryOp::IsFinite) => 1,
        (DType::Bool, UnaryOp::LogicalNot) => b(w == 0),
        (DType::I32 | DType::U32, UnaryOp::BitNot) => !w,
        (DType::F32, UnaryOp::RoundBf16) => round_bf16(w),
        (DType::F32, UnaryOp::RoundTo(to)) => round_small_float(w, to),
        (DType::I32, UnaryOp::Neg) => (w as i32).wrapping_neg() as u32,
        (DType::I32, UnaryOp::Abs) => (w as i32).wrapping_abs() as u32,
        (DType::I32, UnaryOp::Relu) => (w as i32).max(0) as u32,
        (DType::I32, UnaryOp::Sign) => (w as i32).signum() as u32,
        (DType::U32, UnaryOp::Sign) => b(w != 0),
        // abs/relu of u32 and floor/ceil/round of integers are the identity.
        (DType::U32, UnaryOp::Abs | UnaryOp::Relu)
        | (DType::I32 | DType::U32, UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round) => w,
        // Rejected by the dtype rule (`UnaryOp::result_dtype`); the identity keeps the
        // function total. The ops are listed so that a new one must be given a case.
        (
            DType::I32 | DType::U32 | DType::Bool | DType::F16,
            UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Sqrt
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::Reciprocal
            | UnaryOp::Rsqrt
            | UnaryOp::Log1p
            | UnaryOp::Expm1
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Erf
            | UnaryOp::Softplus
            | UnaryOp::Softsign
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Atan
            | UnaryOp::Asinh
            | UnaryOp::Acosh
            | UnaryOp::Atanh
            | UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Relu
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::Sign
            | UnaryOp::LogicalNot
            | UnaryOp::RoundBf16
            | UnaryOp::RoundTo(_),
        )
        | (DType::F32 | DType::Bool | DType::F16, UnaryOp::BitNot)
        | (DType::F32, UnaryOp::LogicalNot) => w,
    }
}

/// One binary op on one element pair of dtype `d`, with the semantics the WGSL kernel has
/// (integer rules in the module docs); `i32::MIN / -1 == i32::MIN`.
pub fn binary_cpu(op: BinaryOp, d: DType, x: u32, y: u32) -> u32 {
    let b = |v: bool| v as u32;
    if d == DType::F16 {
        let r = binary_cpu(op, DType::F32, f16_to_f32_word(x), f16_to_f32_word(y));
        return if op.is_comparison() {
            r
        } else {
            f32_to_f16_word(r)
        };
    }
    match d {
        DType::F32 | DType::F16 => {
            let (a, c) = (f(x), f(y));
            match op {
                BinaryOp::Add => fw(a + c),
                BinaryOp::Sub => fw(a - c),
                BinaryOp::Mul => fw(a * c),
                BinaryOp::Div => fw(a / c),
                BinaryOp::Maximum => fw(maximum_f32(a, c)),
                BinaryOp::Minimum => fw(minimum_f32(a, c)),
                BinaryOp::Pow => fw(pow_f32(a, c)),
                BinaryOp::FloorDiv => fw(divmod_f32(a, c).0),
                BinaryOp::Remainder => fw(divmod_f32(a, c).1),
                BinaryOp::Equal => b(a == c),
                BinaryOp::Less => b(a < c),
                BinaryOp::Greater => b(a > c),
                BinaryOp::NotEqual => b(a != c),
                BinaryOp::LessEqual => b(a <= c),
                BinaryOp::GreaterEqual => b(a >= c),
                // Rejected by the dtype rule; defined so the function is total.
                BinaryOp::LogicalAnd
                | BinaryOp::LogicalOr
                | BinaryOp::LogicalXor
                | BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor => x,
            }
        }
        DType::I32 => {
            let (a, c) = (x as i32, y as i32);
            let r = match op {
                BinaryOp::Add => a.wrapping_add(c),
                BinaryOp::Sub => a.wrapping_sub(c),
                BinaryOp::Mul => a.wrapping_mul(c),
                BinaryOp::Div => {
                    if c == 0 {
                        a
                    } else {
                        a.wrapping_div(c)
                    }
                }
                BinaryOp::Maximum => a.max(c),
                BinaryOp::Minimum => a.min(c),
                BinaryOp::Pow => pow_i32(a, c),
                BinaryOp::FloorDiv => floor_div_i32(a, c),
                BinaryOp::Remainder => rem_i32(a, c),
                BinaryOp::Equal => return b(a == c),
                BinaryOp::Less => return b(a < c),
                BinaryOp::Greater => return b(a > c),
                BinaryOp::NotEqual => return b(a != c),
                BinaryOp::LessEqual => return b(a <= c),
                BinaryOp::GreaterEqual => return b(a >= c),
                BinaryOp::BitAnd => a & c,
                BinaryOp::BitOr => a | c,
                BinaryOp::BitXor => a ^ c,
                // Rejected by the dtype rule; defined so the function is total.
                BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::LogicalXor => a,
            };
            r as u32
        }
        DType::U32 | DType::Bool => match op {
            BinaryOp::Add => x.wrapping_add(y),
            BinaryOp::Sub => x.wrapping_sub(y),
            BinaryOp::Mul => x.wrapping_mul(y),
            BinaryOp::Div => x.checked_div(y).unwrap_or(x),
            BinaryOp::Maximum => x.max(y),
            BinaryOp::Minimum => x.min(y),
            BinaryOp::Pow => pow_u32(x, y),
            BinaryOp::FloorDiv => x.checked_div(y).unwrap_or(0),
            BinaryOp::Remainder => x.checked_rem(y).unwrap_or(0),
            BinaryOp::Equal => b(x == y),
            BinaryOp::Less => b(x < y),
            BinaryOp::Greater => b(x > y),
            BinaryOp::NotEqual => b(x != y),
            BinaryOp::LessEqual => b(x <= y),
            BinaryOp::GreaterEqual => b(x >= y),
            BinaryOp::LogicalAnd => b(x != 0 && y != 0),
            BinaryOp::LogicalOr => b(x != 0 || y != 0),
            BinaryOp::LogicalXor => b((x != 0) != (y != 0)),
            BinaryOp::BitAnd => x & y,
            BinaryOp::BitOr => x | y,
            BinaryOp::BitXor => x ^ y,
        },
    }
}

/// Casts: float→int truncates toward zero and saturates (NaN → 0); x→bool is `x != 0`.
pub fn cast_cpu(from: DType, to: DType, w: u32) -> u32 {
    match (from, to) {
        (a, b) if a == b => w,
        (DType::F16, t) => cast_cpu(DType::F32, t, f16_to_f32_word(w)),
        (f, DType::F16) => f32_to_f16_word(cast_cpu(f, DType::F32, w)),
        (DType::F32, DType::I32) => (f(w) as i32) as u32,
        (DType::F32, DType::U32) => f(w) as u32,
        (DType::F32, DType::Bool) => (f(w) != 0.0) as u32,
        (DType::I32, DType::F32) => fw(w as i32 as f32),
        (DType::U32, DType::F32) => fw(w as f32),
        (DType::Bool, DType::F32) => fw(if w != 0 { 1.0 } else { 0.0 }),
        (DType::I32 | DType::U32 | DType::Bool, DType::Bool) => (w != 0) as u32,
        (DType::Bool, _) => (w != 0) as u32,
        // i32 <-> u32 reinterpret the two's-complement bits, as WGSL's conversions do.
        (DType::I32, DType::U32) | (DType::U32, DType::I32) => w,
        _ => w,
    }
}

/// `x` (f32 bits) rounded to the nearest value of `to`, ties to even, as f32 bits: the value
/// scaled by a power of two so that the format's quantum at its exponent (clamped to the
/// subnormal range below and past every format's range above) is 1, rounded to an integer
/// and scaled back, all exact in f32. `wgf_round_small_float` runs the same steps.
pub fn round_small_float(w: u32, to: super::SmallFloat) -> u32 {
    let r = to.rule();
    let sign = w & 0x8000_0000;
    let biased = ((w >> 23) & 0xff) as i32;
    if biased == 255 && w & 0x007f_ffff != 0 {
        return r.nan;
    }
    let a = f32::from_bits(w & 0x7fff_ffff);
    let e = (biased - 127).clamp(r.emin, 16);
    let up = f32::from_bits(((127 + r.m - e) as u32) << 23);
    let down = f32::from_bits(((127 - r.m + e) as u32) << 23);
    let mut q = ((a * up).round_ties_even() * down).to_bits();
    if f32::from_bits(q) > r.max {
        q = r.overflow;
    }
    if q == 0 && r.unsigned_zero {
        return 0;
    }
    q | sign
}

/// `x` (f32 bits) rounded to the nearest bfloat16, ties to even; a NaN stays a quiet NaN.
pub fn round_bf16(w: u32) -> u32 {
    if f32::from_bits(w).is_nan() {
        return (w | 0x0040_0000) & 0xffff_0000;
    }
    w.wrapping_add(0x7fff + ((w >> 16) & 1)) & 0xffff_0000
}
