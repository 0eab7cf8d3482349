//! Property test: for random broadcastable shape pairs and random values, every binary
//! elementwise op on every dtype it accepts gives the same result on every GPU as on `cpu:0`.
//!
//! Each case builds one graph holding every (op, dtype) pair for its shapes and runs it once
//! per device, so a case costs one plan per device.

use crate::common;

use proptest::prelude::*;
use wgflow::ops::{BinaryOp, UnaryOp};
use wgflow::{DType, Device, Graph, HostTensor, Shape, Tensor};

/// Two shapes that broadcast: an output shape, and each operand a suffix of it with some
/// axes set to 1.
fn shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    prop::collection::vec(1usize..5, 0..4).prop_flat_map(|out| {
        let r = out.len();
        (
            Just(out),
            0..=r,
            0..=r,
            prop::collection::vec(any::<bool>(), r),
            prop::collection::vec(any::<bool>(), r),
        )
            .prop_map(move |(out, ka, kb, ma, mb)| {
                let pick = |k: usize, mask: &[bool]| -> Vec<usize> {
                    (r - k..r)
                        .map(|i| if mask[i] { 1 } else { out[i] })
                        .collect()
                };
                (pick(ka, &ma), pick(kb, &mb))
            })
    })
}

const F32_POOL: [f32; 15] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    -3.75,
    0.5,
    7.0,
    1e-3,
    f32::NAN,
    f32::INFINITY,
    -2.0,
    1e-40,
    3e38,
    -1.5e-39,
];

fn values(dtype: DType, shape: &[usize], seed: &[u32]) -> HostTensor {
    let n: usize = shape.iter().product();
    let words = (0..n)
        .map(|i| {
            let r = seed[i % seed.len()]
                .wrapping_mul(2_654_435_761)
                .wrapping_add(i as u32 * 40_503);
            match dtype {
                DType::F32 => F32_POOL[(r % 15) as usize].to_bits(),
                DType::F16 => wgflow::f16::from_f32(F32_POOL[(r % 15) as usize]).to_bits() as u32,
                DType::I32 => ((r % 41) as i32 - 20) as u32,
                DType::U32 => r % 21,
                DType::Bool => r % 2,
            }
        })
        .collect();
    HostTensor::from_words(Shape::new(shape.to_vec()), dtype, words).unwrap()
}

fn run(
    g: &Graph,
    device: Device,
    feeds: &[(Tensor, HostTensor)],
    outs: &[Tensor],
) -> Vec<HostTensor> {
    common::session_on(g, device)
        .run(feeds, outs)
        .unwrap_or_else(|e| panic!("{device}: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(24325), ..ProptestConfig::default() })]

    #[test]
    fn binary_ops_on_every_gpu_equal_cpu(
        (sa, sb) in shapes(),
        seed in prop::collection::vec(any::<u32>(), 1..8),
    ) {
        let gpus = common::gpus();
        let mut g = Graph::new();
        let mut feeds = Vec::new();
        let mut outs = Vec::new();
        let mut labels = Vec::new();
        for dtype in [DType::F32, DType::I32, DType::U32, DType::Bool] {
            let (va, vb) = (values(dtype, &sa, &seed), values(dtype, &sb, &seed[1..].iter().chain(&seed[..1]).copied().collect::<Vec<_>>()));
            let a = g.placeholder(&format!("a_{dtype}"), va.shape().clone(), dtype).unwrap();
            let b = g.placeholder(&format!("b_{dtype}"), vb.shape().clone(), dtype).unwrap();
            feeds.push((a, va));
            feeds.push((b, vb));
            for op in BinaryOp::ALL {
                if op.result_dtype(dtype).is_err() {
                    continue;
                }
                let y = match op {
                    BinaryOp::Add => g.add(a, b),
                    BinaryOp::Sub => g.sub(a, b),
                    BinaryOp::Mul => g.mul(a, b),
                    BinaryOp::Div => g.div(a, b),
                    BinaryOp::Maximum => g.maximum(a, b),
                    BinaryOp::Minimum => g.minimum(a, b),
                    // f32 pow of negative bases is NaN on GPUs only (documented on `pow`).
                    BinaryOp::Pow if dtype == DType::F32 => continue,
                    BinaryOp::Pow => g.pow(a, b),
                    BinaryOp::Equal => g.equal(a, b),
                    BinaryOp::Less => g.less(a, b),
                    BinaryOp::Greater => g.greater(a, b),
                    BinaryOp::NotEqual => g.not_equal(a, b),
                    BinaryOp::LessEqual => g.less_equal(a, b),
                    BinaryOp::GreaterEqual => g.greater_equal(a, b),
                    BinaryOp::LogicalAnd => g.logical_and(a, b),
                    BinaryOp::LogicalOr => g.logical_or(a, b),
                    BinaryOp::LogicalXor => g.logical_xor(a, b),
                    BinaryOp::FloorDiv => g.floor_divide(a, b),
                    BinaryOp::Remainder => g.remainder(a, b),
                    BinaryOp::BitAnd => g.bitwise_and(a, b),
                    BinaryOp::BitOr => g.bitwise_or(a, b),
                    BinaryOp::BitXor => g.bitwise_xor(a, b),
                }
                .unwrap();
                let want = Shape::broadcast(g.shape(a).unwrap(), g.shape(b).unwrap()).unwrap();
                prop_assert_eq!(g.shape(y).unwrap(), &want);
                outs.push(y);
                labels.push(format!("{} {dtype} {sa:?} {sb:?}", op.name()));
            }
        }
        let cpu = run(&g, Device::Cpu, &feeds, &outs);
        for gpu in gpus {
            let got = run(&g, gpu, &feeds, &outs);
            for ((o, c), label) in got.iter().zip(&cpu).zip(&labels) {
                // Exact: every op here is correctly rounded (or integer) on both sides.
                common::assert_close(&format!("{gpu} {label}"), o, c, 0.0, 0.0);
            }
        }
    }
}

/// Tolerance (rtol, atol) of each f32 unary primitive on GPUs vs `cpu:0`. Drivers' `exp`
/// loses about |x| ulp in argument reduction (lavapipe: 3e-6 relative at x = 84), so the
/// exp-based ops get |x| ≤ 88 ulp of room.
fn unary_tolerance(op: UnaryOp) -> (f32, f32) {
    match op {
        UnaryOp::Exp | UnaryOp::Expm1 | UnaryOp::Sigmoid | UnaryOp::Tanh | UnaryOp::Softplus => {
            (1.2e-5, 1e-30)
        }
        UnaryOp::Sin | UnaryOp::Cos => (0.0, 4e-6),
        UnaryOp::Erf => (1e-6, 1e-7),
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Relu
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::Sign => (0.0, 0.0),
        _ => (2e-6, 1e-30),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(24313), ..ProptestConfig::default() })]

    /// Every f32 unary primitive over random values in [-30, 30] and of random magnitude in
    /// 1e-40..1e38 (plus one special each): GPU ≈ cpu:0.
    #[test]
    fn unary_f32_ops_on_every_gpu_match_cpu(
        mut xs in prop::collection::vec(
            prop_oneof![-30.0f32..30.0, (-40.0f32..38.0, any::<bool>()).prop_map(|(e, neg)| {
                let v = 10f32.powf(e);
                if neg { -v } else { v }
            })],
            1..40,
        ),
        special in prop::sample::select(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1e-40]),
    ) {
        xs.push(special);
        let gpus = common::gpus();
        let mut g = Graph::new();
        let feed = HostTensor::new([xs.len()], xs.clone()).unwrap();
        let x = g.placeholder("x", [xs.len()], DType::F32).unwrap();
        let mut outs = Vec::new();
        let mut ops = Vec::new();
        for op in UnaryOp::ALL {
            if op.result_dtype(DType::F32).is_err() {
                continue;
            }
            let y = match op {
                UnaryOp::Neg => g.neg(x),
                UnaryOp::Abs => g.abs(x),
                UnaryOp::Exp => g.exp(x),
                UnaryOp::Log => g.log(x),
                UnaryOp::Sqrt => g.sqrt(x),
                UnaryOp::Tanh => g.tanh(x),
                UnaryOp::Sigmoid => g.sigmoid(x),
                UnaryOp::Relu => g.relu(x),
                UnaryOp::Floor => g.floor(x),
                UnaryOp::Ceil => g.ceil(x),
                UnaryOp::Round => g.round(x),
                UnaryOp::Sign => g.sign(x),
                UnaryOp::Reciprocal => g.reciprocal(x),
                UnaryOp::Rsqrt => g.rsqrt(x),
                UnaryOp::Log1p => g.log1p(x),
                UnaryOp::Expm1 => g.expm1(x),
                // ±inf are outside the documented GPU contract of sin/cos.
                // So are |x| > 1e4 (argument reduction is driver-defined).
                UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan
                    if special.is_infinite() || xs.iter().any(|v| v.abs() > 1e4) =>
                {
                    continue
                }
                UnaryOp::Sin => g.sin(x),
                UnaryOp::Cos => g.cos(x),
                UnaryOp::Tan => g.tan(x),
                UnaryOp::Erf => g.erf(x),
                UnaryOp::Softplus => g.softplus(x),
                UnaryOp::Softsign => g.softsign(x),
                UnaryOp::Asin => g.asin(x),
                UnaryOp::Acos => g.acos(x),
                UnaryOp::Atan => g.atan(x),
                UnaryOp::Asinh => g.asinh(x),
                UnaryOp::Acosh => g.acosh(x),
                UnaryOp::Atanh => g.atanh(x),
                UnaryOp::IsNan => g.isnan(x),
                UnaryOp::IsInf => g.isinf(x),
                UnaryOp::IsFinite => g.isfinite(x),
                UnaryOp::LogicalNot | UnaryOp::BitNot => continue,
                UnaryOp::RoundBf16 => g.round_bf16(x),
                UnaryOp::RoundTo(to) => g.round_to(x, to),
            }
            .unwrap();
            outs.push(y);
            ops.push(op);
        }
        let feeds = [(x, feed)];
        let cpu = run(&g, Device::Cpu, &feeds, &outs);
        for gpu in gpus {
            let got = run(&g, gpu, &feeds, &outs);
            for ((o, c), op) in got.iter().zip(&cpu).zip(&ops) {
                let (rtol, atol) = unary_tolerance(*op);
                common::assert_close(&format!("{gpu} {} of {xs:?}", op.name()), o, c, rtol, atol);
            }
        }
    }
}
