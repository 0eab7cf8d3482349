// wgflow prelude: helpers shared by every generated kernel.

// NaN and infinity as bits read from private variables: Tint (Chrome's WebGPU) rejects a
// constant expression whose value is NaN or infinite (a bitcast of the bits 0x7f800000u).
// Generated code writes any other non-finite constant as `bitcast<f32>(BITSu | wgf_zero_bits)`
// (ops/wgsl.rs `literal`), which is not a constant expression either.
var<private> wgf_nan_bits: u32 = 0x7fc00000u;
var<private> wgf_inf_bits: u32 = 0x7f800000u;
var<private> wgf_zero_bits: u32 = 0u;

// NaN test on the bits: drivers may fold `x != x` to false under fast-math (lavapipe does).
fn wgf_isnan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// max/min that propagate NaN like NumPy (WGSL leaves max(NaN, x) to the driver).
fn wgf_max(a: f32, b: f32) -> f32 {
    return select(max(a, b), a + b, wgf_isnan(a) || wgf_isnan(b));
}

fn wgf_min(a: f32, b: f32) -> f32 {
    return select(min(a, b), a + b, wgf_isnan(a) || wgf_isnan(b));
}

// relu that keeps NaN (max(NaN, 0) is 0 on some drivers).
fn wgf_relu(x: f32) -> f32 {
    return select(max(x, 0.0), x, wgf_isnan(x));
}

// Integer division with WGSL's defined results on every backend (naga's GLSL output does
// not guard them): x / 0 == x and i32::MIN / -1 == i32::MIN.
fn wgf_div_i32(a: i32, b: i32) -> i32 {
    return a / select(b, 1, b == 0 || (a == (-2147483647 - 1) && b == -1));
}

fn wgf_div_u32(a: u32, b: u32) -> u32 {
    return a / select(b, 1u, b == 0u);
}

// float -> int truncates toward zero and saturates; NaN -> 0 (Rust's `as`, defined on every driver).
// The clamp keeps the conversion in range (its upper bound is the largest f32 below 2^31 or
// 2^32); values at or above 2^31 / 2^32 then take the integer maximum, which no f32 equals.
fn wgf_f32_to_i32(x: f32) -> i32 {
    let t = select(i32(clamp(x, -2147483648.0, 2147483520.0)), 2147483647, x >= 2147483648.0);
    return select(t, 0, wgf_isnan(x));
}

fn wgf_f32_to_u32(x: f32) -> u32 {
    let t = select(u32(clamp(x, 0.0, 4294967040.0)), 4294967295u, x >= 4294967296.0);
    return select(t, 0u, wgf_isnan(x));
}

fn wgf_isinf(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn wgf_isfinite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// Ordered float comparisons that are false (and != true) for NaN even under fast-math.
fn wgf_ne(a: f32, b: f32) -> bool {
    return wgf_isnan(a) || wgf_isnan(b) || a != b;
}

fn wgf_le(a: f32, b: f32) -> bool {
    return !(wgf_isnan(a) || wgf_isnan(b)) && a <= b;
}

fn wgf_ge(a: f32, b: f32) -> bool {
    return !(wgf_isnan(a) || wgf_isnan(b)) && a >= b;
}

// sign with sign(±0) == +0 and sign(NaN) == NaN (NumPy). Built from the bits with integer ops
// only: float forms get pattern-matched into a driver sign() that returns -0.0 for zeros
// (lavapipe and llvmpipe both do).
fn wgf_sign(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let bits = select(0u, (b & 0x80000000u) | 0x3f800000u, (b & 0x7fffffffu) != 0u);
    return select(bitcast<f32>(bits), x, wgf_isnan(x));
}

// Round to the nearest bfloat16 (ties to even) on the bits; a NaN stays a (quiet) NaN
// instead of truncating to inf.
fn wgf_round_bfloat16(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let r = (b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u;
    return select(bitcast<f32>(r), bitcast<f32>((b | 0x00400000u) & 0xffff0000u), wgf_isnan(x));
}

// x rounded, ties to even, to a float8/float4 format held in f32 (`m` mantissa bits, smallest
// normal exponent `emin`, largest finite `maxv`): scaled by a power of two so the format's
// quantum is 1, rounded, scaled back, all exact. Past `maxv` it becomes the f32 with bits
// `ovf` signed as x; NaN (tested on the bits, so that no fast-math folds it) becomes bits
// `nan`. Same steps as `round_small_float` in src/ops/elementwise/reference.rs.
fn wgf_round_small_float(x: f32, m: i32, emin: i32, maxv: f32, ovf: u32, nan: u32, unsigned_zero: bool) -> f32 {
    let b = bitcast<u32>(x);
    let biased = i32((b >> 23u) & 0xffu);
    if (biased == 255 && (b & 0x7fffffu) != 0u) {
        return bitcast<f32>(nan);
    }
    let e = clamp(biased - 127, emin, 16);
    let a = bitcast<f32>(b & 0x7fffffffu);
    let up = bitcast<f32>(u32(127 + m - e) << 23u);
    let down = bitcast<f32>(u32(127 - m + e) << 23u);
    var q = bitcast<u32>(round(a * up) * down);
    if (bitcast<f32>(q) > maxv) {
        q = ovf;
    }
    if (q == 0u && unsigned_zero) {
        return 0.0;
    }
    return bitcast<f32>(q | (b & 0x80000000u));
}

// erf: Eigen's rational approximation x*P(x^2)/Q(x^2) on x clamped to [-4, 4]; max abs and
// relative error 4.2e-7 (see src/ops/elementwise_cpu.rs, which runs the same steps).
fn wgf_erf(v: f32) -> f32 {
    let x = clamp(v, -4.0, 4.0);
    let x2 = x * x;
    var p = bitcast<f32>(0xaf95df0bu);
    p = x2 * p + bitcast<f32>(0x32edffeeu);
    p = x2 * p + bitcast<f32>(0xb60cff51u);
    p = x2 * p + bitcast<f32>(0xb86ec2d2u);
    p = x2 * p + bitcast<f32>(0xba40ac63u);
    p = x2 * p + bitcast<f32>(0xbb41a1f6u);
    p = x2 * p + bitcast<f32>(0xbc83dbd4u);
    var q = bitcast<f32>(0xb77460cdu);
    q = x2 * q + bitcast<f32>(0xb95fbd29u);
    q = x2 * q + bitcast<f32>(0xbadc924eu);
    q = x2 * q + bitcast<f32>(0xbbf19bf8u);
    q = x2 * q + bitcast<f32>(0xbc69b6a7u);
    return select(x * p / q, v, wgf_isnan(v));
}

// log1p and expm1 avoid the driver's log/exp near their ill-conditioned points: Vulkan only
// bounds log's absolute error (2^-21) near 1, which lavapipe really does lose. Small |x| use
// series; tiny |x| (and denormals, which drivers may flush) return x itself.
// log1p: 2·atanh(s) = 2(s + s³/3 + … + s⁹/9) with s = x/(2+x) for |x| < 0.25 (|s| < 0.143,
// truncation < 2e-8 relative); log(1 + x) elsewhere (|log(1+x)| > 0.22 there).
fn wgf_log1p(x: f32) -> f32 {
    let s = x / (2.0 + x);
    let s2 = s * s;
    let series = 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (0.2 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0)))));
    let r = select(log(1.0 + x), series, abs(x) < 0.25);
    return select(r, x, abs(x) < 1e-8 || wgf_isnan(x));
}

// expm1: Taylor x + x²/2! + … + x⁸/8! for |x| < 0.35 (truncation < 2e-8 relative);
// exp(x) - 1 elsewhere (|result| > 0.29 there, so the subtraction loses little).
fn wgf_expm1(x: f32) -> f32 {
    let p = 1.0 + x * (1.0 / 2.0 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0
        + x * (1.0 / 720.0 + x * (1.0 / 5040.0 + x * (1.0 / 40320.0)))))));
    let r = select(exp(x) - 1.0, x * p, abs(x) < 0.35);
    return select(r, x, abs(x) < 1e-8 || wgf_isnan(x));
}

// softplus(x) = max(x, 0) + log1p(e^-|x|): never overflows; NaN stays NaN.
fn wgf_softplus(x: f32) -> f32 {
    return wgf_relu(x) + wgf_log1p(exp(-abs(x)));
}

// softsign(x) = x / (1 + |x|); ±1 at ±inf (the limit; the formula gives inf/inf = NaN).
fn wgf_softsign(x: f32) -> f32 {
    return select(x / (1.0 + abs(x)), sign(x), wgf_isinf(x));
}

// Inverse trigonometric and hyperbolic functions. The WGSL builtins leave the domain edges
// undefined (asin/acos outside [-1, 1], acosh below 1, atanh at ±1) and drivers' accuracy
// varies, so these are written out: atan is Cephes' atanf (range reduction to |x| ≤ tan(π/8)
// and a degree-9 odd polynomial, 2 ulp), the others reduce to atan, log and log1p without
// cancellation. Out of domain gives NaN; the sign of the input (±0 included) is kept where the
// function is odd.
fn wgf_with_sign_of(r: f32, x: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(r) & 0x7fffffffu) | (bitcast<u32>(x) & 0x80000000u));
}

fn wgf_atan(x: f32) -> f32 {
    var a = abs(x);
    var base = 0.0;
    if (a > 2.414213562373095) {
        base = 1.5707963267948966;
        a = -1.0 / a;
    } else if (a > 0.41421356237309503) {
        base = 0.7853981633974483;
        a = (a - 1.0) / (a + 1.0);
    }
    let z = a * a;
    let p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
        - 3.33329491539e-1) * z * a + a;
    return select(wgf_with_sign_of(base + p, x), x, wgf_isnan(x));
}

fn wgf_asin(x: f32) -> f32 {
    let r = wgf_atan(x / sqrt(max((1.0 - x) * (1.0 + x), 0.0)));
    return select(r, bitcast<f32>(wgf_nan_bits), abs(x) > 1.0 || wgf_isnan(x));
}

fn wgf_acos(x: f32) -> f32 {
    let r = 2.0 * wgf_atan(sqrt(max((1.0 - x) / (1.0 + x), 0.0)));
    return select(r, bitcast<f32>(wgf_nan_bits), abs(x) > 1.0 || wgf_isnan(x));
}

fn wgf_asinh(x: f32) -> f32 {
    let a = abs(x);
    let small = wgf_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a)));
    let r = select(small, wgf_log(a) + 0.6931471805599453, a > 4096.0);
    return select(wgf_with_sign_of(r, x), x, wgf_isnan(x) || a < 1e-8);
}

fn wgf_acosh(x: f32) -> f32 {
    let t = x - 1.0;
    let small = wgf_log1p(t + sqrt(max(2.0 * t + t * t, 0.0)));
    let r = select(small, wgf_log(x) + 0.6931471805599453, x > 4096.0);
    return select(r, bitcast<f32>(wgf_nan_bits), !(x >= 1.0));
}

fn wgf_atanh(x: f32) -> f32 {
    let a = abs(x);
    let r = 0.5 * wgf_log1p(2.0 * a / (1.0 - a));
    let inf = bitcast<f32>(wgf_inf_bits);
    let y = wgf_with_sign_of(select(r, inf, a == 1.0), x);
    return select(select(y, x, a < 1e-8), bitcast<f32>(wgf_nan_bits), !(a <= 1.0));
}

// Integer floor division and remainder with NumPy's sign rules; a divisor of 0 gives 0 and
// i32::MIN // -1 == i32::MIN (the divisor is guarded because naga's GLSL output is not).
fn wgf_floordiv_i32(a: i32, b: i32) -> i32 {
    let bs = select(b, 1, b == 0 || (a == (-2147483647 - 1) && b == -1));
    let q = a / bs;
    let r = a - q * bs;
    return select(select(q, q - 1, r != 0 && ((r < 0) != (bs < 0))), 0, b == 0);
}

fn wgf_rem_i32(a: i32, b: i32) -> i32 {
    let bs = select(b, 1, b == 0 || (a == (-2147483647 - 1) && b == -1));
    let r = a - (a / bs) * bs;
    return select(select(r, r + bs, r != 0 && ((r < 0) != (bs < 0))), 0, b == 0);
}

fn wgf_floordiv_u32(a: u32, b: u32) -> u32 {
    return select(a / select(b, 1u, b == 0u), 0u, b == 0u);
}

fn wgf_rem_u32(a: u32, b: u32) -> u32 {
    let bs = select(b, 1u, b == 0u);
    return select(a - (a / bs) * bs, 0u, b == 0u);
}

// Integer power by squaring with wrapping products; i32 shares it through the bits.
fn wgf_pow_u32(a: u32, e: u32) -> u32 {
    var r = 1u;
    var b = a;
    var k = e;
    while (k != 0u) {
        if ((k & 1u) == 1u) {
            r = r * b;
        }
        b = b * b;
        k = k >> 1u;
    }
    return r;
}

// A negative exponent gives the truncated real result: 1, ±1 for base -1, else 0.
fn wgf_pow_i32(a: i32, e: i32) -> i32 {
    let neg = select(select(0, 1, a == 1), select(1, -1, (e & 1) == 1), a == -1);
    return select(bitcast<i32>(wgf_pow_u32(bitcast<u32>(a), bitcast<u32>(e))), neg, e < 0);
}

// Natural log that keeps its relative accuracy near 1, where drivers only bound the absolute
// error (lavapipe is 0.5% off at 1 - 1e-5): x - 1 is exact there (Sterbenz), so use log1p.
// Subnormal inputs (which lavapipe's log misreads as ~2^-127) are taken from their bits:
// x = b · 2^-149 exactly, so log(x) = log(f32(b)) - 149·ln 2.
fn wgf_log(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let r = select(log(x), wgf_log1p(x - 1.0), abs(x - 1.0) < 0.25);
    return select(r, log(f32(b)) - 103.27892990343185, b > 0u && b < 0x00800000u);
}

// tanh(x) = t / (t + 2) with t = expm1(2x), x clamped to ±15 (tanh(±15) is ±1 in f32): the
// drivers' own tanh loses all relative accuracy for small |x| (lavapipe: tanh(1e-40) = 3e-8)
// and some overflow to inf/inf for large |x|. NaN and tiny |x| (tanh(x) = x) pass through.
fn wgf_tanh(x: f32) -> f32 {
    let t = wgf_expm1(2.0 * clamp(x, -15.0, 15.0));
    return select(t / (t + 2.0), x, abs(x) < 1e-8 || wgf_isnan(x));
}

// pow with the C99/NumPy special cases, decided on the bits (fast-math drivers fold NaN tests
// and leave builtin pow undefined for x < 0 and at pow(0, 0)): x**±0 == 1 and 1**y == 1 even
// for NaN, signed zeros and infinities by the parity of integral y (|y| >= 2^24 is even),
// (-1)**±inf == 1, negative x with non-integral y is NaN. The magnitude is exp2(y·log2|x|) like
// WGSL's pow, but log2 near 1 comes from log1p (drivers bound only its absolute error there:
// 0.9999**-10000 was 0.03% off) and log2 of subnormals from their bits. y = 2, 1, -1 and 0.5
// give x*x, x, 1/x and sqrt(x), which are exact or correctly rounded.
fn wgf_pow_f32(x: f32, y: f32) -> f32 {
    let xb = bitcast<u32>(x);
    let yb = bitcast<u32>(y);
    let ax = abs(x);
    let ay = abs(y);
    let axb = xb & 0x7fffffffu;
    let ayb = yb & 0x7fffffffu;
    let x_neg = (xb >> 31u) == 1u;
    let y_neg = (yb >> 31u) == 1u;
    // Every f32 of magnitude >= 2^23 is an integer; >= 2^24, an even one.
    let y_int = ayb >= 0x4b000000u || floor(ay) == ay;
    let y_odd = y_int && ayb < 0x4b800000u && (u32(ay) & 1u) == 1u;

    let lx = select(log2(ax), log2(f32(axb)) - 149.0, axb < 0x00800000u);
    let l2 = select(lx, wgf_log1p(ax - 1.0) * 1.4426950408889634, abs(ax - 1.0) < 0.25);
    // exp2 of a tiny t must be 1 (lavapipe's exp2(-1e-45) is 1 - 2^-24); results below 2^-126
    // are scaled from 2^64 above, since the drivers' exp2 flushes subnormal results to zero.
    let t = y * l2;
    var r = select(exp2(t), exp2(t + 64.0) * bitcast<f32>(0x1f800000u), t < -126.0);
    if (abs(t) < 4e-8) {
        r = 1.0;
    }
    if (x_neg && y_odd) {
        r = -r;
    }
    if (x_neg && !y_int) {
        r = bitcast<f32>(wgf_nan_bits);
    }
    if (yb == 0x40000000u) {
        r = x * x;
    }
    if (yb == 0x3f800000u) {
        r = x;
    }
    if (yb == 0xbf800000u) {
        r = 1.0 / x;
    }
    if (yb == 0x3f000000u) {
        r = sqrt(x);
    }
    let odd_sign = select(0u, xb & 0x80000000u, y_odd);
    if (axb == 0u) {
        r = bitcast<f32>(select(0u, 0x7f800000u, y_neg) | odd_sign);
    }
    if (axb == 0x7f800000u) {
        r = bitcast<f32>(select(0x7f800000u, 0u, y_neg) | odd_sign);
    }
    if (ayb == 0x7f800000u) {
        r = bitcast<f32>(select(0u, 0x7f800000u, (axb < 0x3f800000u) == y_neg));
        if (axb == 0x3f800000u) {
            r = 1.0;
        }
    }
    if (wgf_isnan(x) || wgf_isnan(y)) {
        r = bitcast<f32>(wgf_nan_bits);
    }
    if (ayb == 0u || xb == 0x3f800000u) {
        r = 1.0;
    }
    return r;
}

// fmod(a, b) exactly, on the integer significands (musl's fmodf, reducing 8 bits per step with
// u32 `%`): WGSL's float `%` is a - b·trunc(a/b), which rounds. A value is m·2^(e - 150) with
// e = max(biased exponent, 1) and the implicit bit in m only for normal numbers.
fn wgf_fmod_f32(a: f32, b: f32) -> f32 {
    let ab = bitcast<u32>(a);
    let sign = ab & 0x80000000u;
    let ua = ab & 0x7fffffffu;
    let ub = bitcast<u32>(b) & 0x7fffffffu;
    if (ub == 0u || ub > 0x7f800000u || ua >= 0x7f800000u) {
        return bitcast<f32>(wgf_nan_bits);
    }
    if (ua < ub) {
        return a;
    }
    if (ua == ub) {
        return bitcast<f32>(sign);
    }
    let ea = max(ua >> 23u, 1u);
    let eb = max(ub >> 23u, 1u);
    let ma = (ua & 0x007fffffu) | select(0u, 0x00800000u, ua >= 0x00800000u);
    let mb = (ub & 0x007fffffu) | select(0u, 0x00800000u, ub >= 0x00800000u);
    // r = ma·2^(ea - eb) mod mb; r < 2^24, so r << 8 still fits in a u32.
    var r = ma % mb;
    var d = ea - eb;
    while (d > 0u) {
        let k = min(d, 8u);
        r = (r << k) % mb;
        d = d - k;
    }
    if (r == 0u) {
        return bitcast<f32>(sign);
    }
    // r·2^(eb - 150) is exact in f32: normalise it, or leave it subnormal.
    let s = countLeadingZeros(r) - 8u;
    let bits = select(r << (eb - 1u), ((eb - s) << 23u) | ((r << s) & 0x007fffffu), eb > s);
    return bitcast<f32>(bits | sign);
}

// NumPy's npy_divmod on f32: (floor_divide, remainder). The quotient (a - mod) / b of the exact
// fmod is nearly an integer: moved down by one when mod takes the divisor's sign, then snapped.
// A zero divisor gives a / b and NaN; a NaN fmod (NaN operand, infinite a) gives NaN for both.
fn wgf_divmod_f32(a: f32, b: f32) -> vec2<f32> {
    let m0 = wgf_fmod_f32(a, b);
    let bb = bitcast<u32>(b);
    let mb = bitcast<u32>(m0);
    if ((bb & 0x7fffffffu) == 0u) {
        return vec2<f32>(a / b, m0);
    }
    if (wgf_isnan(m0)) {
        return vec2<f32>(m0, m0);
    }
    var m = m0;
    var div = (a - m0) / b;
    if ((mb & 0x7fffffffu) != 0u) {
        if ((bb >> 31u) != (mb >> 31u)) {
            m = m + b;
            div = div - 1.0;
        }
    } else {
        m = bitcast<f32>(bb & 0x80000000u);
    }
    var q = bitcast<f32>((bitcast<u32>(a) ^ bb) & 0x80000000u);
    if (div != 0.0) {
        q = floor(div);
        if (div - q > 0.5) {
            q = q + 1.0;
        }
    }
    return vec2<f32>(q, m);
}
