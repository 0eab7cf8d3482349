//! Gradients of the elementwise family: every rule against central finite differences on
//! cpu:0 (binary ops with broadcasting both ways), every GPU against cpu:0; the conventions at
//! kinks and ties (relu/abs at 0, maximum/minimum ties, clip at its bounds, pow with a
//! negative or zero base, where) against hand-computed values on every device; casts; the
//! ops that stop gradients; second derivatives; and the fusion of a backward chain.

use crate::common::grad::{check, rand, uniform};
use crate::common::{assert_close, gpus, session_on};
use wgflow::{f16, Axes, DType, Device, Graph, HostTensor, Result, Session, Tensor};

type Unary = fn(&mut Graph, Tensor) -> Result<Tensor>;
type Binary = fn(&mut Graph, Tensor, Tensor) -> Result<Tensor>;

/// Values uniform in `[lo, hi)`, each moved to at least `margin` from every point of `kinks`
/// (so a finite difference never straddles one).
fn away(shape: &[usize], lo: f32, hi: f32, seed: u64, kinks: &[f32], margin: f32) -> HostTensor {
    let n = shape.iter().product();
    let v: Vec<f32> = uniform(n, lo, hi, seed)
        .into_iter()
        .map(|mut x| {
            for &k in kinks {
                if (x - k).abs() < margin {
                    x = if x < k { k - margin } else { k + margin };
                }
            }
            x
        })
        .collect();
    HostTensor::new(shape.to_vec(), v).unwrap()
}

/// Multiples of 0.1 in about `[-2, 2]`, plus `offset`: two tensors with offsets 0 and 0.05
/// never come closer than 0.05, so `maximum`/`minimum` have no ties within a step.
fn grid(shape: &[usize], seed: u64, offset: f32) -> HostTensor {
    let n = shape.iter().product();
    let v: Vec<f32> = uniform(n, -2.0, 2.0, seed)
        .into_iter()
        .map(|x| (x * 10.0).round() / 10.0 + offset)
        .collect();
    HostTensor::new(shape.to_vec(), v).unwrap()
}

fn all_devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

/// Devices that run f16: cpu:0 and the GPUs with `shader-f16`.
fn f16_devices() -> Vec<Device> {
    let has: Vec<Device> = wgflow::devices()
        .into_iter()
        .filter(|d| d.device.is_gpu() && d.limits.shader_f16)
        .map(|d| d.device)
        .collect();
    let mut d = vec![Device::Cpu];
    d.extend(gpus().into_iter().filter(|g| has.contains(g)));
    d
}

/// `gradients(sum(f(xs)), xs)` for constant inputs (so `dy` is all ones), on every device,
/// each against `want` (exact up to `atol`).
fn expect_grads(
    what: &str,
    f: &dyn Fn(&mut Graph, &[Tensor]) -> Result<Tensor>,
    inputs: &[HostTensor],
    want: &[HostTensor],
    devices: &[Device],
    atol: f32,
) {
    let mut g = Graph::new();
    let xs: Vec<Tensor> = inputs
        .iter()
        .map(|t| g.constant(t.clone()).unwrap())
        .collect();
    let y = f(&mut g, &xs).unwrap();
    let loss = g.sum(y, Axes::All, false).unwrap();
    let grads = g.gradients(loss, &xs).unwrap();
    let fetch: Vec<Tensor> = grads
        .iter()
        .map(|d| d.unwrap_or_else(|| panic!("{what}: a gradient is None")))
        .collect();
    for &d in devices {
        let out = session_on(&g, d).run(&[], &fetch).unwrap();
        for (k, (got, want)) in out.iter().zip(want).enumerate() {
            assert_close(&format!("{what} on {d}: d/dx{k}"), got, want, 0.0, atol);
        }
    }
}

fn t(shape: &[usize], v: &[f32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

const EPS: f32 = 1e-2;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

#[test]
fn unary_rules_match_finite_differences() {
    let s = [3, 4];
    let ints: Vec<f32> = (-3..=3).map(|i| i as f32).collect();
    let halves: Vec<f32> = (-3..=3).map(|i| i as f32 + 0.5).collect();
    let cases: Vec<(&str, Unary, HostTensor)> = vec![
        ("neg", |g, x| g.neg(x), rand(&s, -2.0, 2.0, 1)),
        ("abs", |g, x| g.abs(x), away(&s, -2.0, 2.0, 2, &[0.0], 0.1)),
        ("exp", |g, x| g.exp(x), rand(&s, -2.0, 2.0, 3)),
        ("log", |g, x| g.log(x), rand(&s, 0.3, 3.0, 4)),
        ("sqrt", |g, x| g.sqrt(x), rand(&s, 0.3, 3.0, 5)),
        ("tanh", |g, x| g.tanh(x), rand(&s, -2.0, 2.0, 6)),
        ("sigmoid", |g, x| g.sigmoid(x), rand(&s, -3.0, 3.0, 7)),
        (
            "relu",
            |g, x| g.relu(x),
            away(&s, -2.0, 2.0, 8, &[0.0], 0.1),
        ),
        (
            "floor",
            |g, x| g.floor(x),
            away(&s, -2.5, 2.5, 9, &ints, 0.05),
        ),
        (
            "ceil",
            |g, x| g.ceil(x),
            away(&s, -2.5, 2.5, 10, &ints, 0.05),
        ),
        (
            "round",
            |g, x| g.round(x),
            away(&s, -2.5, 2.5, 11, &halves, 0.05),
        ),
        (
            "sign",
            |g, x| g.sign(x),
            away(&s, -2.0, 2.0, 12, &[0.0], 0.1),
        ),
        (
            "reciprocal",
            |g, x| g.reciprocal(x),
            away(&s, -2.0, 2.0, 13, &[0.0], 0.4),
        ),
        ("rsqrt", |g, x| g.rsqrt(x), rand(&s, 0.3, 3.0, 14)),
        ("log1p", |g, x| g.log1p(x), rand(&s, -0.5, 2.0, 15)),
        ("expm1", |g, x| g.expm1(x), rand(&s, -2.0, 2.0, 16)),
        ("sin", |g, x| g.sin(x), rand(&s, -3.0, 3.0, 17)),
        ("cos", |g, x| g.cos(x), rand(&s, -3.0, 3.0, 18)),
        ("tan", |g, x| g.tan(x), rand(&s, -1.2, 1.2, 28)),
        ("erf", |g, x| g.erf(x), rand(&s, -2.0, 2.0, 19)),
        ("softplus", |g, x| g.softplus(x), rand(&s, -3.0, 3.0, 20)),
        ("softsign", |g, x| g.softsign(x), rand(&s, -3.0, 3.0, 21)),
        ("asin", |g, x| g.asin(x), rand(&s, -0.8, 0.8, 22)),
        ("acos", |g, x| g.acos(x), rand(&s, -0.8, 0.8, 23)),
        ("atan", |g, x| g.atan(x), rand(&s, -3.0, 3.0, 24)),
        ("asinh", |g, x| g.asinh(x), rand(&s, -3.0, 3.0, 25)),
        ("acosh", |g, x| g.acosh(x), rand(&s, 1.5, 4.0, 26)),
        ("atanh", |g, x| g.atanh(x), rand(&s, -0.8, 0.8, 27)),
    ];
    for (name, f, x) in cases {
        check(name, &|g, x| f(g, x[0]), &[x], &[0], EPS, RTOL, ATOL);
    }
}

/// Operands for a binary op: `a` of shape `sa`, `b` of shape `sb`.
type Operands = fn(&[usize], &[usize]) -> (HostTensor, HostTensor);

#[test]
fn binary_rules_match_finite_differences_with_broadcasting() {
    let cases: Vec<(&str, Binary, Operands)> = vec![
        (
            "add",
            |g, a, b| g.add(a, b),
            |sa, sb| (rand(sa, -2.0, 2.0, 1), rand(sb, -2.0, 2.0, 2)),
        ),
        (
            "sub",
            |g, a, b| g.sub(a, b),
            |sa, sb| (rand(sa, -2.0, 2.0, 3), rand(sb, -2.0, 2.0, 4)),
        ),
        (
            "mul",
            |g, a, b| g.mul(a, b),
            |sa, sb| (rand(sa, -2.0, 2.0, 5), rand(sb, -2.0, 2.0, 6)),
        ),
        (
            "div",
            |g, a, b| g.div(a, b),
            |sa, sb| (rand(sa, -2.0, 2.0, 7), away(sb, -2.0, 2.0, 8, &[0.0], 0.5)),
        ),
        (
            "maximum",
            |g, a, b| g.maximum(a, b),
            |sa, sb| (grid(sa, 9, 0.0), grid(sb, 10, 0.05)),
        ),
        (
            "minimum",
            |g, a, b| g.minimum(a, b),
            |sa, sb| (grid(sa, 11, 0.05), grid(sb, 12, 0.0)),
        ),
        (
            "pow",
            |g, a, b| g.pow(a, b),
            |sa, sb| (rand(sa, 0.5, 2.0, 13), rand(sb, -2.0, 2.0, 14)),
        ),
        // The other operand order: the broadcast operand is the base.
        (
            "pow (broadcast base)",
            |g, a, b| g.pow(b, a),
            |sa, sb| (rand(sa, -2.0, 2.0, 15), rand(sb, 0.5, 2.0, 16)),
        ),
    ];
    for (sa, sb) in [(&[3, 4][..], &[4][..]), (&[2, 1, 3][..], &[1, 4, 1][..])] {
        for (name, f, make) in &cases {
            let (a, b) = make(sa, sb);
            let what = format!("{name} {sa:?} with {sb:?}");
            check(
                &what,
                &|g, x| f(g, x[0], x[1]),
                &[a, b],
                &[0, 1],
                EPS,
                RTOL,
                ATOL,
            );
        }
    }
}

/// Element pairs `(i, j)` of `a` and `b` that meet in their broadcast.
fn broadcast_pairs(sa: &[usize], sb: &[usize]) -> Vec<(usize, usize)> {
    let r = sa.len().max(sb.len());
    let pad = |s: &[usize]| [vec![1; r - s.len()], s.to_vec()].concat();
    let (pa, pb) = (pad(sa), pad(sb));
    let out: Vec<usize> = pa.iter().zip(&pb).map(|(x, y)| *x.max(y)).collect();
    let index = |s: &[usize], c: &[usize]| {
        s.iter()
            .zip(c)
            .fold(0, |acc, (&d, &c)| acc * d + if d == 1 { 0 } else { c })
    };
    let mut c = vec![0; r];
    let mut pairs = Vec::new();
    for _ in 0..out.iter().product::<usize>() {
        pairs.push((index(&pa, &c), index(&pb, &c)));
        for k in (0..r).rev() {
            c[k] += 1;
            if c[k] < out[k] {
                break;
            }
            c[k] = 0;
        }
    }
    pairs
}

#[test]
fn remainder_and_floor_divide_match_finite_differences_away_from_jumps() {
    // d/da remainder = 1, d/db = -floor(a/b); floor_divide is piecewise constant (zero
    // gradient). Seeds are searched until no a/b is within 0.03 of an integer: a step of
    // 3e-3 moves a/b by at most 2·3e-3/0.8² < 0.01.
    for (sa, sb) in [(&[3, 4][..], &[4][..]), (&[2, 1, 3][..], &[1, 4, 1][..])] {
        let pairs = broadcast_pairs(sa, sb);
        let operands = |seed: u64| {
            let a = uniform(sa.iter().product(), -2.0, 2.0, seed);
            let b: Vec<f32> = uniform(sb.iter().product(), 0.8, 1.6, seed + 1000)
                .into_iter()
                .enumerate()
                .map(|(i, v)| if i % 2 == 1 { -v } else { v })
                .collect();
            (a, b)
        };
        let seed = (1..1000u64)
            .find(|&s| {
                let (a, b) = operands(s);
                pairs.iter().all(|&(i, j)| {
                    let q = a[i] / b[j];
                    (q - q.round()).abs() > 0.03
                })
            })
            .expect("a seed without near-integer quotients");
        let (a, b) = operands(seed);
        let inputs = [t(sa, &a), t(sb, &b)];
        let what = format!("remainder {sa:?} with {sb:?}");
        check(
            &what,
            &|g, x| g.remainder(x[0], x[1]),
            &inputs,
            &[0, 1],
            3e-3,
            RTOL,
            ATOL,
        );
        let what = format!("floor_divide {sa:?} with {sb:?}");
        check(
            &what,
            &|g, x| g.floor_divide(x[0], x[1]),
            &inputs,
            &[0, 1],
            3e-3,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn remainder_gradient_by_hand() {
    // a = 7, b = 2: 7 % 2 = 1, floor(7/2) = 3; a = -7, b = 2: floor = -4; a = 7, b = -2: -4.
    expect_grads(
        "remainder",
        &|g, x| g.remainder(x[0], x[1]),
        &[t(&[3], &[7.0, -7.0, 7.0]), t(&[3], &[2.0, 2.0, -2.0])],
        &[t(&[3], &[1.0, 1.0, 1.0]), t(&[3], &[-3.0, 4.0, 4.0])],
        &all_devices(),
        0.0,
    );
}

#[test]
fn where_matches_finite_differences_and_hand_values() {
    // cond [3,1], a [3,4], b [4]: every operand broadcasts.
    let cond = HostTensor::new(vec![3, 1], vec![true, false, true]).unwrap();
    let c2 = cond.clone();
    check(
        "where",
        &move |g, x| {
            let c = g.constant(c2.clone())?;
            g.select(c, x[0], x[1])
        },
        &[rand(&[3, 4], -2.0, 2.0, 1), rand(&[4], -2.0, 2.0, 2)],
        &[0, 1],
        EPS,
        RTOL,
        ATOL,
    );
    // cond [2,1], a [1,3], b [2,3]: a collects the rows where cond holds, b the others.
    let cond = HostTensor::new(vec![2, 1], vec![true, false]).unwrap();
    expect_grads(
        "where",
        &move |g, x| {
            let c = g.constant(cond.clone())?;
            g.select(c, x[0], x[1])
        },
        &[t(&[1, 3], &[1.0, 2.0, 3.0]), t(&[2, 3], &[4.0; 6])],
        &[
            t(&[1, 3], &[1.0, 1.0, 1.0]),
            t(&[2, 3], &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
        ],
        &all_devices(),
        0.0,
    );
}

#[test]
fn maximum_and_minimum_split_ties_equally() {
    // Ties at (0,0) and (1,1); b [1] broadcasts to all four elements.
    let a = t(&[2, 2], &[1.0, 2.0, 3.0, 1.0]);
    let b = t(&[1], &[1.0]);
    expect_grads(
        "maximum",
        &|g, x| g.maximum(x[0], x[1]),
        &[a.clone(), b.clone()],
        &[t(&[2, 2], &[0.5, 1.0, 1.0, 0.5]), t(&[1], &[1.0])],
        &all_devices(),
        0.0,
    );
    expect_grads(
        "minimum",
        &|g, x| g.minimum(x[0], x[1]),
        &[a, b],
        &[t(&[2, 2], &[0.5, 0.0, 0.0, 0.5]), t(&[1], &[3.0])],
        &all_devices(),
        0.0,
    );
}

#[test]
fn clip_gives_half_at_its_bounds() {
    // clip = minimum(maximum(x, -1), 1): inside 1, outside 0, and exactly at a bound the
    // tie of maximum (at -1) or minimum (at 1) splits the gradient: 1/2 (TensorFlow's
    // ClipByValue gives 1 there).
    expect_grads(
        "clip",
        &|g, x| g.clip(x[0], -1.0, 1.0),
        &[t(&[7], &[-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])],
        &[t(&[7], &[0.0, 0.5, 1.0, 1.0, 1.0, 0.5, 0.0])],
        &all_devices(),
        0.0,
    );
    check(
        "clip",
        &|g, x| g.clip(x[0], -1.0, 1.0),
        &[away(&[3, 4], -2.0, 2.0, 3, &[-1.0, 1.0], 0.1)],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn pow_with_negative_and_zero_bases() {
    // a:  -2  -2   0   0   0   2    0.5
    // b:   3   2   2   0   1   3   -1
    // y:  -8   4   0   1   0   8    2
    // d/da = b·a^(b-1), 0 where b == 0: 12, -4, 0, 0, 1, 12, -4
    // d/db = y·ln(a) where a > 0, else 0: 0, 0, 0, 0, 0, 8 ln 2, 2 ln 0.5
    let ln2 = std::f32::consts::LN_2;
    expect_grads(
        "pow",
        &|g, x| g.pow(x[0], x[1]),
        &[
            t(&[7], &[-2.0, -2.0, 0.0, 0.0, 0.0, 2.0, 0.5]),
            t(&[7], &[3.0, 2.0, 2.0, 0.0, 1.0, 3.0, -1.0]),
        ],
        &[
            t(&[7], &[12.0, -4.0, 0.0, 0.0, 1.0, 12.0, -4.0]),
            t(&[7], &[0.0, 0.0, 0.0, 0.0, 0.0, 8.0 * ln2, -2.0 * ln2]),
        ],
        &all_devices(),
        1e-5,
    );
    // A negative base with an integer exponent, against finite differences (d/da only:
    // d/db is 0 there by convention, and a^b is NaN beside an integer b).
    let b = HostTensor::new(vec![4], vec![1.0f32, 2.0, 3.0, -2.0]).unwrap();
    check(
        "pow, negative base",
        &move |g, x| {
            let b = g.constant(b.clone())?;
            g.pow(x[0], b)
        },
        &[rand(&[3, 4], -2.0, -0.5, 21)],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn relu_abs_and_sign_at_zero() {
    let x = t(&[4], &[-1.0, 0.0, 2.0, -0.0]);
    let devices = all_devices();
    expect_grads(
        "relu",
        &|g, x| g.relu(x[0]),
        std::slice::from_ref(&x),
        &[t(&[4], &[0.0, 0.0, 1.0, 0.0])],
        &devices,
        0.0,
    );
    expect_grads(
        "abs",
        &|g, x| g.abs(x[0]),
        std::slice::from_ref(&x),
        &[t(&[4], &[-1.0, 0.0, 1.0, 0.0])],
        &devices,
        0.0,
    );
    // Piecewise constant: zeros (a tensor, not None), also at the jumps.
    let zeros = t(&[4], &[0.0; 4]);
    for (name, f) in [
        ("sign", (|g, x| g.sign(x)) as Unary),
        ("floor", |g, x| g.floor(x)),
        ("ceil", |g, x| g.ceil(x)),
        ("round", |g, x| g.round(x)),
    ] {
        let x = t(&[4], &[-1.0, 0.0, 0.5, 2.3]);
        expect_grads(
            name,
            &|g, x| f(g, x[0]),
            &[x],
            std::slice::from_ref(&zeros),
            &devices,
            0.0,
        );
    }
}

#[test]
fn special_values_of_smooth_rules() {
    // sqrt and rsqrt reuse their output: d sqrt(4) = 1/4, d rsqrt(4) = -1/16; tanh and
    // sigmoid saturate to 0 without NaN; exp(0) = 1; log(0.5) = 2; erf'(0) = 2/sqrt(pi).
    let devices = all_devices();
    let cases: Vec<(&str, Unary, f32, f32)> = vec![
        ("sqrt", |g, x| g.sqrt(x), 4.0, 0.25),
        ("rsqrt", |g, x| g.rsqrt(x), 4.0, -1.0 / 16.0),
        ("tanh", |g, x| g.tanh(x), 30.0, 0.0),
        ("sigmoid", |g, x| g.sigmoid(x), -100.0, 0.0),
        ("exp", |g, x| g.exp(x), 0.0, 1.0),
        ("log", |g, x| g.log(x), 0.5, 2.0),
        (
            "erf",
            |g, x| g.erf(x),
            0.0,
            std::f32::consts::FRAC_2_SQRT_PI,
        ),
        ("softplus", |g, x| g.softplus(x), 0.0, 0.5),
        ("softsign", |g, x| g.softsign(x), -3.0, 1.0 / 16.0),
        // tan(π/4) = 1: the slope is 1 + 1 = 2.
        ("tan", |g, x| g.tan(x), std::f32::consts::FRAC_PI_4, 2.0),
        ("asin", |g, x| g.asin(x), 0.6, 1.25),
        ("atan", |g, x| g.atan(x), 2.0, 0.2),
        ("acosh", |g, x| g.acosh(x), 1.25, 1.0 / 0.75),
        ("reciprocal", |g, x| g.reciprocal(x), -2.0, -0.25),
    ];
    // Two elements: a one-element constant would become a literal in the kernel, and the
    // WGSL writer prints `-{x}` of a negative literal as `--100.0` (reported separately).
    for (name, f, x, want) in cases {
        expect_grads(
            name,
            &|g, x| f(g, x[0]),
            &[t(&[2], &[x, x])],
            &[t(&[2], &[want, want])],
            &devices,
            2e-6,
        );
    }
}

#[test]
fn casts_between_floats_pass_the_gradient_in_the_input_dtype() {
    let c: Vec<f16> = [0.1f32, 1.0 / 3.0, 2.5].map(f16::from_f32).to_vec();
    let want: Vec<f32> = c.iter().map(|v| v.to_f32()).collect();
    // f32 → f16 → · c (f16): d/dx = c, cast back to f32.
    let ch = HostTensor::new(vec![3], c.clone()).unwrap();
    expect_grads(
        "cast f32 to f16",
        &move |g, x| {
            let h = g.cast(x[0], DType::F16)?;
            let k = g.constant(ch.clone())?;
            g.mul(h, k)
        },
        &[t(&[3], &[1.0, 2.0, 3.0])],
        &[t(&[3], &want)],
        &f16_devices(),
        0.0,
    );
    // f16 → f32 → · c (f32): the gradient is f16, c rounded to f16.
    let x16 = HostTensor::new(vec![3], [1.0f32, 2.0, 3.0].map(f16::from_f32).to_vec()).unwrap();
    let want16 = HostTensor::new(vec![3], c).unwrap();
    expect_grads(
        "cast f16 to f32",
        &|g, x| {
            let f = g.cast(x[0], DType::F32)?;
            let k = g.constant([0.1f32, 1.0 / 3.0, 2.5])?;
            g.mul(f, k)
        },
        &[x16],
        &[want16],
        &f16_devices(),
        0.0,
    );
    // f32 → f32 is the identity.
    check(
        "cast f32 to f32",
        &|g, x| {
            let c = g.cast(x[0], DType::F32)?;
            g.mul(c, x[0])
        },
        &[rand(&[3, 4], -2.0, 2.0, 5)],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn integer_and_boolean_paths_stop_the_gradient() {
    let mut g = Graph::new();
    let x = g.constant(t(&[3], &[1.5, -2.5, 3.0])).unwrap();
    let xi = g.constant([4i32, -7, 9]).unwrap();
    // Through an integer cast.
    let i = g.cast(x, DType::I32).unwrap();
    let through_int = g.cast(i, DType::F32).unwrap();
    // Through comparisons and predicates.
    let zero = g
        .full(wgflow::Shape::new(Vec::<usize>::new()), DType::F32, 0.0)
        .unwrap();
    let pos = g.greater(x, zero).unwrap();
    let through_bool = g.cast(pos, DType::F32).unwrap();
    let nan = g.isnan(x).unwrap();
    let through_isnan = g.cast(nan, DType::F32).unwrap();
    // Integer arithmetic (floor_divide, remainder, pow) on an integer input.
    let two = g.constant([2i32]).unwrap();
    let q = g.floor_divide(xi, two).unwrap();
    let r = g.remainder(xi, two).unwrap();
    let p = g.pow(xi, two).unwrap();
    let qr = g.add(q, r).unwrap();
    let qrp = g.add(qr, p).unwrap();
    let through_ints = g.cast(qrp, DType::F32).unwrap();
    for (what, y) in [
        ("cast to i32", through_int),
        ("comparison", through_bool),
        ("isnan", through_isnan),
    ] {
        let y = g.sum(y, Axes::All, false).unwrap();
        assert_eq!(g.gradients(y, &[x]).unwrap(), vec![None], "{what}");
    }
    let y = g.sum(through_ints, Axes::All, false).unwrap();
    assert_eq!(g.gradients(y, &[xi]).unwrap(), vec![None], "integer ops");
    // The condition of where gets nothing; the branches do.
    let w = g.select(pos, x, zero).unwrap();
    let w = g.sum(w, Axes::All, false).unwrap();
    let d = g.gradients(w, &[x]).unwrap();
    let out = session_on(&g, Device::Cpu)
        .run(&[], &[d[0].unwrap()])
        .unwrap();
    assert_close(
        "where's branch",
        &out[0],
        &t(&[3], &[1.0, 0.0, 1.0]),
        0.0,
        0.0,
    );
}

#[test]
fn second_derivatives_through_the_rules() {
    // d²/dx² sin = -sin; d²/dx² tanh = -2·tanh·(1 - tanh²); d²/dx² x³ (pow) = 6x.
    let xs = [-1.3f32, -0.2, 0.4, 1.1];
    type F = fn(f64) -> f64;
    let cases: Vec<(&str, Unary, F)> = vec![
        ("sin", |g, x| g.sin(x), |x| -x.sin()),
        (
            "tanh",
            |g, x| g.tanh(x),
            |x| -2.0 * x.tanh() * (1.0 - x.tanh().powi(2)),
        ),
        (
            "pow 3",
            |g, x| {
                let three = g.full(wgflow::Shape::new(Vec::<usize>::new()), DType::F32, 3.0)?;
                g.pow(x, three)
            },
            |x| 6.0 * x,
        ),
    ];
    for (name, f, want) in cases {
        let mut g = Graph::new();
        let x = g.constant(t(&[4], &xs)).unwrap();
        let y = f(&mut g, x).unwrap();
        let y = g.sum(y, Axes::All, false).unwrap();
        let d1 = g.gradients(y, &[x]).unwrap()[0].unwrap();
        let d1 = g.sum(d1, Axes::All, false).unwrap();
        let d2 = g.gradients(d1, &[x]).unwrap()[0].unwrap();
        let want: Vec<f32> = xs.iter().map(|&v| want(v as f64) as f32).collect();
        for d in all_devices() {
            let out = session_on(&g, d).run(&[], &[d2]).unwrap();
            assert_close(
                &format!("{name}'' on {d}"),
                &out[0],
                &t(&[4], &want),
                1e-5,
                1e-5,
            );
        }
    }
}

#[test]
fn a_backward_chain_fuses() {
    // y = tanh(x·b + exp(x)) with b [32] broadcast over x [64, 32]. The backward graph has
    // seven elementwise nodes (tanh's 1 - t² and its product with dy: three; mul's two
    // products; exp's product; the sum of x's two gradients), the broadcast seed and the
    // sum over b's broadcast axis. It needs:
    //  1. h = dy·(1 - tanh(x·b + exp(x))²): read by both gradients and reading x in full, so
    //     too costly to recompute: one kernel (the forward tanh fuses into it);
    //  2. dx = h·b + h·exp(x): one kernel;
    //  3. db = sum over rows of h·x: one reduction with h·x as its prologue.
    // Three kernels; unfused it would be one per node.
    let mut g = Graph::new();
    let x = g.placeholder("x", [64, 32], DType::F32).unwrap();
    let b = g.placeholder("b", [32], DType::F32).unwrap();
    let xb = g.mul(x, b).unwrap();
    let e = g.exp(x).unwrap();
    let s = g.add(xb, e).unwrap();
    let y = g.tanh(s).unwrap();
    let loss = g.sum(y, Axes::All, false).unwrap();
    let before = g.len();
    let d = g.gradients(loss, &[x, b]).unwrap();
    let backward_elementwise = g
        .nodes()
        .skip(before)
        .filter(|(_, n)| n.op.family().is_elementwise())
        .count();
    assert!(
        backward_elementwise >= 7,
        "{backward_elementwise} backward elementwise nodes"
    );
    let (dx, db) = (d[0].unwrap(), d[1].unwrap());
    let xv = rand(&[64, 32], -1.0, 1.0, 1);
    let bv = rand(&[32], -1.0, 1.0, 2);
    let feeds = [(x, xv.clone()), (b, bv.clone())];
    // Values in f64: dtanh = 1 - tanh², dx = dtanh·(b + e^x), db = Σ_rows dtanh·x.
    let (xs, bs) = (xv.to_f32().unwrap(), bv.to_f32().unwrap());
    let mut want_dx = vec![0f32; 64 * 32];
    let mut want_db = vec![0f64; 32];
    for r in 0..64 {
        for c in 0..32 {
            let (xv, bv) = (xs[r * 32 + c] as f64, bs[c] as f64);
            let th = (xv * bv + xv.exp()).tanh();
            let h = 1.0 - th * th;
            want_dx[r * 32 + c] = (h * (bv + xv.exp())) as f32;
            want_db[c] += h * xv;
        }
    }
    let want_db: Vec<f32> = want_db.iter().map(|&v| v as f32).collect();
    for dev in all_devices() {
        let mut s: Session = session_on(&g, dev);
        let plan = s.plan(&[dx, db]).unwrap();
        assert!(
            plan.dispatch_count() <= 3,
            "on {dev}: the backward chain runs {} kernels, want at most 3:\n{}",
            plan.dispatch_count(),
            plan.describe()
        );
        let out = s.run(&feeds, &[dx, db]).unwrap();
        assert_close(
            &format!("dx on {dev}"),
            &out[0],
            &t(&[64, 32], &want_dx),
            1e-4,
            1e-5,
        );
        assert_close(
            &format!("db on {dev}"),
            &out[1],
            &t(&[32], &want_db),
            1e-4,
            1e-4,
        );
    }
}

#[test]
fn empty_inputs_give_empty_and_zero_gradients() {
    // x [0, 3] with b [3]: dx is empty, and b's gradient sums over no rows: zeros.
    expect_grads(
        "tanh(x·b + x) over no rows",
        &|g, x| {
            let p = g.mul(x[0], x[1])?;
            let s = g.add(p, x[0])?;
            g.tanh(s)
        },
        &[t(&[0, 3], &[]), t(&[3], &[1.0, 2.0, 3.0])],
        &[t(&[0, 3], &[]), t(&[3], &[0.0; 3])],
        &all_devices(),
        0.0,
    );
}
