//! Branch-free f32 math for `cpu:0`: the semantics of `exp`, `sigmoid`, `tanh` and `log` on
//! the CPU (the scalar reference [`unary_cpu`](crate::ops::elementwise::reference::unary_cpu) and the
//! fused evaluator call these same functions, so both agree bit for bit).
//!
//! Every function is straight-line arithmetic with selects instead of branches, so that a loop
//! over a slice vectorizes once it is inlined into a caller compiled for AVX2+FMA or AVX-512
//! (`ops/elementwise/cpu.rs`). They use only IEEE operations whose results are fixed by the
//! standard (`mul_add` is the fused multiply-add on every target, through libm where the CPU
//! lacks one), so the bits do not depend on the CPU or on vectorization.
//!
//! Error bounds, measured against f64 (`tests/ops/vmath.rs`: a sampled and dense sweep, and with
//! `--ignored` all 2^32 inputs), in ulps of the result's binade (2^-149 among subnormals):
//! - [`exp`]: f32 throughout (the speed that matters: W2); see its docs for the bound.
//! - [`sigmoid`], [`tanh`], [`log`]: computed in f64 (4 lanes per AVX2 register) to about
//!   1e-11 relative and rounded once, so within 0.5 ulp plus that.

/// `e^x` in f32: `n = round(x·log2 e)`, `r = x - n·ln 2_hi` by a fused multiply-add (exact;
/// `ln 2` split into an f32 head and tail `c`), `e^(r+c) = (1 + r) + (r²·q(r) + c·(1 + r))`
/// with `q` the Taylor series to degree 6 (truncation below 2e-10 relative on
/// `|r| ≤ ln2/2`) and `1 + r` carried as a sum and its exact rounding error, so that only the
/// last addition rounds by a sizeable fraction of an ulp; scaled by
/// `2^n` as two exact powers of two, so a subnormal result is rounded once. `x` is clamped to
/// `[-104, 89]` first: beyond it the result is 0 or +inf. NaN gives `x + x` (the input,
/// quieted); `±0` and subnormal inputs give 1.
///
/// Measured over all 2^32 inputs: at most 0.857 ulp from `exp` in f64 (the worst where the
/// result is subnormal, rounded twice: `p` to f32, then to the subnormal grid), overflow to
/// +inf and underflow to subnormals and 0 included (an infinite result counts as 2^128).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // 1.5·2^23: adding it rounds a float of magnitude below 2^22 to an integer.
    const SHIFT: f32 = 12_582_912.0;
    const LN2_HI: f32 = std::f32::consts::LN_2;
    // ln 2 - LN2_HI, rounded to f32.
    const LN2_LO: f32 = -1.904_654_3e-9;
    // 1/k! for k = 8 down to 2.
    const Q: [f32; 7] = [
        1.0 / 40320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ];
    let xc = x.clamp(-104.0, 89.0);
    let t = xc.mul_add(std::f32::consts::LOG2_E, SHIFT);
    let n = t - SHIFT;
    // Exact: x and n·LN2_HI are close, and the difference has at most 24 significant bits.
    let r = (-n).mul_add(LN2_HI, xc);
    // The reduction's tail, kept apart: e^(r + c) = e^r + c·e^r to well below an ulp.
    let c = -n * LN2_LO;
    let mut q = Q[0];
    for k in &Q[1..] {
        q = q.mul_add(r, *k);
    }
    // 1 + r as a rounded sum and its exact error (|r| < 1), so the only rounding of the
    // order of an ulp is the last addition.
    let s = 1.0 + r;
    let err = (1.0 - s) + r;
    let tail = (r * r).mul_add(q, c.mul_add(r, c));
    let p = s + (err + tail);
    // n ∈ [-150, 128]: two halves, each a normal power of two.
    let k = (t.to_bits() as i32).wrapping_sub(SHIFT.to_bits() as i32);
    let k1 = k >> 1;
    let k2 = k.wrapping_sub(k1);
    let s1 = f32::from_bits((k1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((k2.wrapping_add(127) as u32) << 23);
    let y = p * s1 * s2;
    if x.is_nan() {
        x + x
    } else {
        y
    }
}

/// `e^x` in f64 for `x` in `[-700, 700]` (callers clamp), relative error below 1e-11 (enough
/// for one rounding to f32 to stay within 0.5 ulp + 2e-4): `r = x - n·ln 2` (`|r| ≤ 0.35`)
/// by a fused multiply-add, Taylor to degree 9 by fused multiply-adds, times `2^n` built in
/// the exponent.
#[inline(always)]
fn exp_f64(x: f64) -> f64 {
    // Adding 1.5·2^52 rounds a double of magnitude below 2^51 to an integer.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    // 1/k! for k = 9 down to 2.
    const C: [f64; 8] = [
        1.0 / 362880.0,
        1.0 / 40320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ];
    let t = x.mul_add(std::f64::consts::LOG2_E, SHIFT);
    let n = t - SHIFT;
    let r = (-n).mul_add(std::f64::consts::LN_2, x);
    let mut p = C[0];
    for c in &C[1..] {
        p = p.mul_add(r, *c);
    }
    let p = p.mul_add(r, 1.0).mul_add(r, 1.0);
    let k = t.to_bits().wrapping_sub(SHIFT.to_bits());
    p * f64::from_bits(k.wrapping_add(1023) << 52)
}

/// `1 / (1 + e^-x)`, computed in f64 (`x` clamped to `[-120, 40]`, where the result is
/// already 0 or 1) and rounded once: within 0.5 ulp plus 1e-11 relative, subnormal results
/// included. NaN gives `x + x`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let xd = f64::from(x).clamp(-120.0, 40.0);
    let y = (1.0 / (1.0 + exp_f64(-xd))) as f32;
    if x.is_nan() {
        x + x
    } else {
        y
    }
}

/// `tanh x`: `x` itself for `|x| < 2^-13` (where that is the correctly rounded result), else
/// `(e - 1)/(e + 1)` with `e = e^(2|x|)` in f64 (`|x|` clamped to 10, where tanh rounds to 1),
/// rounded once and given `x`'s sign: within 0.5 ulp plus 2e-9 relative. Odd exactly;
/// NaN gives `x + x`.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = f64::from(x.abs()).min(10.0);
    let e = exp_f64(2.0 * a);
    let y = (((e - 1.0) / (e + 1.0)) as f32).copysign(x);
    if x.is_nan() {
        x + x
    } else if x.abs() < 1.0 / 8192.0 {
        x
    } else {
        y
    }
}

/// Natural log: `x = 2^e·m` from the bits (subnormals scaled by 2^23 first), `m` in
/// `[√2/2, √2)`, `ln m = 2·atanh(s)`, `s = (m-1)/(m+1)`, by its series to `s^13` in f64
/// (truncation below 1e-11 relative), plus `e·ln 2`, rounded once: within 0.5 ulp plus
/// 1e-11 relative. `log(±0) = -inf`, `log(x < 0)` and `log(-inf)` are NaN, `log(+inf) = +inf`,
/// `log(1) = +0`; NaN gives `x + x`.
#[inline(always)]
pub fn log(x: f32) -> f32 {
    // 1/(2k+1) for k = 6 down to 1.
    const C: [f64; 6] = [
        1.0 / 13.0,
        1.0 / 11.0,
        1.0 / 9.0,
        1.0 / 7.0,
        1.0 / 5.0,
        1.0 / 3.0,
    ];
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - if sub { 150 } else { 127 };
    let m = f64::from(f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000));
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = f64::from(if big { e + 1 } else { e });
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut p = C[0];
    for c in &C[1..] {
        p = p * s2 + c;
    }
    let lm = 2.0 * s + 2.0 * s * (s2 * p);
    let y = (e * std::f64::consts::LN_2 + lm) as f32;
    if x.is_nan() {
        x + x
    } else if x == f32::INFINITY {
        x
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x < 0.0 {
        f32::NAN
    } else {
        y
    }
}

/// Lanes of [`lane_sum_map`] and [`lane_max`].
const LANES: usize = 16;

/// `Σ f(x[i])` in 16 interleaved partial sums, then the tail: vectorizable, and a fixed order,
/// so the same bits on every run (the row kernels of attention and `ops/rows`).
#[inline(always)]
pub fn lane_sum_map(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let (chunks, tail) = x.as_chunks::<LANES>();
    let mut acc = [0.0f32; LANES];
    for c in chunks {
        for l in 0..LANES {
            acc[l] += f(c[l]);
        }
    }
    acc.iter().sum::<f32>() + tail.iter().map(|&v| f(v)).sum::<f32>()
}

/// `Σ x[i]` as [`lane_sum_map`] adds.
#[inline(always)]
pub fn lane_sum(x: &[f32]) -> f32 {
    lane_sum_map(x, |v| v)
}

/// The largest element in 16 interleaved lanes (a serial `max` chain is latency-bound); NaN
/// is ignored, and an empty or all-NaN slice gives `-inf`.
#[inline(always)]
pub fn lane_max(x: &[f32]) -> f32 {
    let (chunks, tail) = x.as_chunks::<LANES>();
    let mut acc = [f32::NEG_INFINITY; LANES];
    for c in chunks {
        for l in 0..LANES {
            acc[l] = acc[l].max(c[l]);
        }
    }
    acc.iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// `v as i32` (saturating, NaN to 0) in a form LLVM vectorizes: Rust's `as` compiles to a
/// scalar loop of compares, which made a quantizer's rounding chain 3× slower.
#[inline(always)]
pub fn f32_to_i32(v: f32) -> i32 {
    const TOP: f32 = 2_147_483_648.0;
    let c = if v.is_nan() {
        0.0
    } else {
        v.clamp(-TOP, 2_147_483_520.0)
    };
    // SAFETY: `c` is finite and within i32's range.
    let t = unsafe { c.to_int_unchecked::<i32>() };
    if v >= TOP {
        i32::MAX
    } else {
        t
    }
}

/// `v as u32` (saturating, NaN to 0), vectorizable as [`f32_to_i32`] is.
#[inline(always)]
pub fn f32_to_u32(v: f32) -> u32 {
    const TOP: f32 = 4_294_967_296.0;
    let c = if v.is_nan() {
        0.0
    } else {
        v.clamp(0.0, 4_294_967_040.0)
    };
    // SAFETY: `c` is finite and within u32's range.
    let t = unsafe { c.to_int_unchecked::<u32>() };
    if v >= TOP {
        u32::MAX
    } else {
        t
    }
}
