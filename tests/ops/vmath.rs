//! cpu:0's f32 math functions (`ops/elementwise/vmath.rs`: `exp`, `sigmoid`, `tanh`, `log`),
//! run through the fused evaluator's fast path, against float64: the error in ulps over a
//! sampled sweep of the 2^32 inputs plus dense ranges where the results overflow, underflow to
//! subnormals or round next to 1 (and, with `--ignored`, over every input); special values;
//! identities; agreement bit for bit with the scalar reference `unary_cpu`; and chains of the
//! functions fused into one kernel, against float64.

use rayon::prelude::*;
use wgflow::ops::elementwise::reference::unary_cpu;
use wgflow::ops::elementwise::CPU_CHUNK as CHUNK;
use wgflow::ops::{BinaryOp, CpuIn, ElementwiseKernel, Expr, KernelDef, UnaryOp};
use wgflow::{DType, Shape};

const FUNCS: [UnaryOp; 4] = [UnaryOp::Exp, UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Log];

fn kernel(expr: Expr, inputs: usize, n: usize) -> ElementwiseKernel {
    ElementwiseKernel {
        expr,
        inputs: vec![(Shape::new(vec![n]), DType::F32); inputs],
        out_shape: Shape::new(vec![n]),
        out_dtype: DType::F32,
        views: Vec::new(),
    }
}

/// `op` over `words` through the fast path (chunked, vectorized, parallel).
fn fast(op: UnaryOp, words: &[u32]) -> Vec<u32> {
    let k = kernel(Expr::unary(op, Expr::input(0)), 1, words.len());
    let mut out = vec![0; words.len()];
    k.run_cpu_into(&[CpuIn::Words(words)], &mut out).unwrap();
    out
}

/// The float64 value the f32 result approximates.
fn want(op: UnaryOp, x: f32) -> f64 {
    let x = f64::from(x);
    match op {
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Log => x.ln(),
        _ => unreachable!("no reference for {op:?}"),
    }
}

/// `|got - want|` in units of the f32 ulp of `want`'s binade (2^-149 below the normals); an
/// infinite result counts as ±2^128 (0 ulp where `want` is at least that).
fn ulps(got: f32, want: f64) -> f64 {
    if got.is_infinite() {
        let w = want * f64::from(got.signum());
        return if w >= 2f64.powi(128) {
            0.0
        } else {
            (2f64.powi(128) - w) / 2f64.powi(104)
        };
    }
    let e = ((want.abs().to_bits() >> 52) as i64 - 1023).clamp(-126, 127);
    let ulp = 2f64.powi(e as i32 - 23);
    (f64::from(got) - want).abs() / ulp
}

/// Worst error of `op` over inputs `k * step` for `k` in `range` (and the input where it
/// occurs); checks NaN in ⇔ NaN out, and the fast path against `unary_cpu` on every 61st input.
fn sweep(op: UnaryOp, step: u64, range: std::ops::Range<u64>) -> (f64, f32) {
    const BATCH: u64 = 1 << 22;
    let mut worst = (0.0, 0.0f32);
    let mut lo = range.start;
    while lo < range.end {
        let hi = (lo + BATCH).min(range.end);
        let words: Vec<u32> = (lo..hi).map(|k| (k * step) as u32).collect();
        let got = fast(op, &words);
        let w = words
            .par_iter()
            .zip(&got)
            .enumerate()
            .map(|(i, (&w, &g))| {
                let (x, y) = (f32::from_bits(w), f32::from_bits(g));
                if i % 61 == 0 {
                    assert_eq!(g, unary_cpu(op, DType::F32, w), "{op:?}({x:e}): reference");
                }
                let r = want(op, x);
                if r.is_nan() {
                    assert!(y.is_nan(), "{op:?}({x:e}) = {y:e}, want NaN");
                    return (0.0, x);
                }
                let e = ulps(y, r);
                assert!(e <= 1.0, "{op:?}({x:e}) = {y:e}: {e} ulps from {r:e}");
                (e, x)
            })
            .reduce(|| (0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
        if w.0 > worst.0 {
            worst = w;
        }
        lo = hi;
    }
    worst
}

fn bits(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// Every 389th f32 (every exponent, sign and NaN class), then every input in the ranges where
/// results overflow, underflow to subnormals or to 0, round to 1 or next to it, and around the
/// switches between formulas.
#[test]
fn every_function_is_within_one_ulp_on_a_dense_sweep() {
    let step: u64 = if cfg!(debug_assertions) { 4093 } else { 389 };
    let dense = |a: f32, b: f32| {
        let (a, b) = (bits(a).min(bits(b)), bits(a).max(bits(b)));
        if cfg!(debug_assertions) {
            a..a + 4096
        } else {
            a..b
        }
    };
    for op in FUNCS {
        let mut worst = sweep(op, step, 0..(1u64 << 32) / step);
        let ranges: Vec<(f32, f32)> = match op {
            UnaryOp::Exp => vec![
                (88.0, 89.0),
                (-87.0, -105.0),
                (2f32.powi(-25), 2f32.powi(-23)),
                (-(2f32.powi(-26)), -(2f32.powi(-24))),
                (0.3, 0.4),
            ],
            UnaryOp::Sigmoid => vec![(-87.0, -105.0), (15.0, 18.0), (0.5, 1.0), (-1.0, -0.5)],
            UnaryOp::Tanh => vec![(2f32.powi(-14), 2f32.powi(-12)), (8.5, 10.0), (0.5, 1.0)],
            _ => vec![(0.7, 1.5), (f32::from_bits(1), f32::from_bits(1 << 16))],
        };
        for (a, b) in ranges {
            let w = sweep(op, 1, dense(a, b));
            if w.0 > worst.0 {
                worst = w;
            }
        }
        eprintln!("{op:?}: worst {} ulp at {:e}", worst.0, worst.1);
    }
}

/// All 2^32 inputs of one function (a few minutes each on 2 cores; run with
/// `cargo test --release --test vmath -- --ignored --nocapture`). Last run's worst errors are
/// in `docs/ops_elementwise.md`.
fn every_input(op: UnaryOp) {
    let (e, x) = sweep(op, 1, 0..1u64 << 32);
    eprintln!("{op:?}: worst {e} ulp at {x:e} over all 2^32 inputs");
}

#[test]
#[ignore]
fn exp_on_every_input() {
    every_input(UnaryOp::Exp)
}

#[test]
#[ignore]
fn sigmoid_on_every_input() {
    every_input(UnaryOp::Sigmoid)
}

#[test]
#[ignore]
fn tanh_on_every_input() {
    every_input(UnaryOp::Tanh)
}

#[test]
#[ignore]
fn log_on_every_input() {
    every_input(UnaryOp::Log)
}

#[test]
fn special_values() {
    let inf = f32::INFINITY;
    let ln = |x: f32| f64::from(x).ln() as f32;
    let cases: [(UnaryOp, f32, f32); 27] = [
        (UnaryOp::Exp, 0.0, 1.0),
        (UnaryOp::Exp, -0.0, 1.0),
        (UnaryOp::Exp, inf, inf),
        (UnaryOp::Exp, -inf, 0.0),
        (UnaryOp::Exp, 89.0, inf),
        (UnaryOp::Exp, -104.0, 0.0),
        (UnaryOp::Exp, f32::from_bits(1), 1.0),
        (UnaryOp::Sigmoid, 0.0, 0.5),
        (UnaryOp::Sigmoid, -0.0, 0.5),
        (UnaryOp::Sigmoid, inf, 1.0),
        (UnaryOp::Sigmoid, -inf, 0.0),
        (UnaryOp::Sigmoid, 20.0, 1.0),
        (UnaryOp::Tanh, 0.0, 0.0),
        (UnaryOp::Tanh, -0.0, -0.0),
        (UnaryOp::Tanh, inf, 1.0),
        (UnaryOp::Tanh, -inf, -1.0),
        (UnaryOp::Tanh, f32::from_bits(1), f32::from_bits(1)),
        (UnaryOp::Tanh, -1e-30, -1e-30),
        (UnaryOp::Log, 1.0, 0.0),
        (UnaryOp::Log, 0.0, -inf),
        (UnaryOp::Log, -0.0, -inf),
        (UnaryOp::Log, inf, inf),
        (UnaryOp::Log, f32::from_bits(1), ln(f32::from_bits(1))),
        (UnaryOp::Log, f32::MIN_POSITIVE, ln(f32::MIN_POSITIVE)),
        (UnaryOp::Log, f32::MAX, ln(f32::MAX)),
        (UnaryOp::Log, std::f32::consts::E, ln(std::f32::consts::E)),
        (UnaryOp::Log, 2.0, std::f32::consts::LN_2),
    ];
    for (op, x, y) in cases {
        let got = f32::from_bits(fast(op, &[x.to_bits()])[0]);
        assert_eq!(
            got.to_bits(),
            y.to_bits(),
            "{op:?}({x:e}) = {got:e}, want {y:e}"
        );
        assert_eq!(unary_cpu(op, DType::F32, x.to_bits()), y.to_bits());
    }
    for op in FUNCS {
        for x in [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001)] {
            let got = f32::from_bits(fast(op, &[x.to_bits()])[0]);
            assert!(got.is_nan(), "{op:?}(NaN) = {got:e}");
        }
    }
    for x in [-1.0, -1e-30, -inf, -f32::from_bits(1)] {
        assert!(f32::from_bits(fast(UnaryOp::Log, &[x.to_bits()])[0]).is_nan());
    }
    // exp's subnormal results: e^-100 = 3.72e-44 (27 ulps of 2^-149), correctly rounded.
    let y = f32::from_bits(fast(UnaryOp::Exp, &[(-100.0f32).to_bits()])[0]);
    assert!(y.is_subnormal());
    assert_eq!(
        y.to_bits(),
        ((-100f64).exp() / 2f64.powi(-149)).round() as u32
    );
}

/// tanh is odd bit for bit, sigmoid lies in [0, 1] with sigmoid(x) + sigmoid(-x) ≈ 1, and
/// log(exp(x)) ≈ x, over every 4099th f32.
#[test]
fn identities() {
    let words: Vec<u32> = (0..(1u64 << 32) / 4099)
        .map(|k| (k * 4099) as u32)
        .filter(|&w| !f32::from_bits(w).is_nan())
        .collect();
    let neg: Vec<u32> = words.iter().map(|w| w ^ 0x8000_0000).collect();
    let (t, tn) = (fast(UnaryOp::Tanh, &words), fast(UnaryOp::Tanh, &neg));
    let (s, sn) = (fast(UnaryOp::Sigmoid, &words), fast(UnaryOp::Sigmoid, &neg));
    let e = fast(UnaryOp::Exp, &words);
    let le = fast(UnaryOp::Log, &e);
    for i in 0..words.len() {
        let x = f32::from_bits(words[i]);
        assert_eq!(t[i] ^ 0x8000_0000, tn[i], "tanh(-{x:e})");
        let (a, b) = (f32::from_bits(s[i]), f32::from_bits(sn[i]));
        assert!((0.0..=1.0).contains(&a), "sigmoid({x:e}) = {a:e}");
        assert!(
            (a + b - 1.0).abs() <= 1.2e-7,
            "sigmoid(±{x:e}): {a:e} + {b:e}"
        );
        let y = f32::from_bits(le[i]);
        if (-80.0..80.0).contains(&x) && x.abs() > 1e-3 {
            assert!(
                (y - x).abs() <= 2e-7 * x.abs().max(1.0),
                "log(exp({x:e})) = {y:e}"
            );
        }
    }
}

/// Chains of the functions in one fused kernel, against float64, at sizes around the chunk.
#[test]
fn fused_chains_against_float64() {
    use UnaryOp as U;
    let u = |op, e| Expr::unary(op, e);
    let b = |op, x, y| Expr::binary(op, x, y);
    let x = || Expr::input(0);
    // tanh(x)·sigmoid(x) + log(exp(x) + 1), and exp(tanh(log(sigmoid(x)))), and W2.
    let chain1 = b(
        BinaryOp::Add,
        b(BinaryOp::Mul, u(U::Tanh, x()), u(U::Sigmoid, x())),
        u(
            U::Log,
            b(
                BinaryOp::Add,
                u(U::Exp, x()),
                Expr::lit(DType::F32, 1f32.to_bits()),
            ),
        ),
    );
    let chain2 = u(U::Exp, u(U::Tanh, u(U::Log, u(U::Sigmoid, x()))));
    let f1 = |x: f64| x.tanh() / (1.0 + (-x).exp()) + (x.exp() + 1.0).ln();
    let f2 = |x: f64| (1.0 / (1.0 + (-x).exp())).ln().tanh().exp();
    for n in [1, CHUNK - 1, CHUNK + 1, 3 * CHUNK + 5, (1 << 18) + 7] {
        let xs: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 4001) as f32 / 100.0 - 20.0)
            .collect();
        let words: Vec<u32> = xs.iter().map(|x| x.to_bits()).collect();
        for (e, f) in [(&chain1, &f1 as &dyn Fn(f64) -> f64), (&chain2, &f2)] {
            let k = kernel(e.clone(), 1, n);
            let mut out = vec![0; n];
            k.run_cpu_into(&[CpuIn::Words(&words)], &mut out).unwrap();
            for (i, (&x, &o)) in xs.iter().zip(&out).enumerate() {
                let (g, w) = (f32::from_bits(o), f(f64::from(x)));
                assert!(
                    (f64::from(g) - w).abs() <= 4e-7 * w.abs().max(1.0),
                    "{}: n {n}, element {i}: f({x}) = {g}, want {w}",
                    e.describe()
                );
            }
        }
    }
}
