//! naga validates every WGSL kernel of the elementwise family: each unary and binary primitive
//! on each dtype it accepts, a fused composite, and the random kernel for both distributions.
//! Also checks that the `erf` coefficients in `shaders/prelude.wgsl` are the CPU's.

use crate::common::wgsl::{check, ew};

use wgflow::ops::elementwise::reference::erf_coefficients;
use wgflow::ops::wgsl::PRELUDE;
use wgflow::ops::{BinaryOp, Distribution, Expr, Kernel, RandomKernel, RandomSpec, UnaryOp};
use wgflow::{DType, Shape};

const DTYPES: [DType; 4] = [DType::F32, DType::I32, DType::U32, DType::Bool];

#[test]
fn every_unary_and_binary_op_and_dtype_validates() {
    let s = Shape::from([2, 3]);
    let (mut unary, mut binary) = (0, 0);
    for d in DTYPES {
        for op in UnaryOp::ALL {
            if let Ok(out) = op.result_dtype(d) {
                let e = Expr::unary(op, Expr::input(0));
                assert_eq!(e.dtype(&[d]), out, "{} on {d}", op.name());
                check(&ew(e, vec![(s.clone(), d)], s.clone(), out));
                unary += 1;
            }
        }
        for op in BinaryOp::ALL {
            if let Ok(out) = op.result_dtype(d) {
                let inputs = vec![(Shape::from([3]), d), (Shape::from([2, 1]), d)];
                let e = Expr::binary(op, Expr::input(0), Expr::input(1));
                assert_eq!(e.dtype(&[d, d]), out, "{} on {d}", op.name());
                check(&ew(e, inputs, s.clone(), out));
                binary += 1;
            }
        }
    }
    // Every primitive is accepted by at least one dtype, and the counts match the dtype rules
    // (a changed rule shows here and in docs/ops_elementwise.md).
    for op in UnaryOp::ALL {
        assert!(
            DTYPES.iter().any(|&d| op.result_dtype(d).is_ok()),
            "{}",
            op.name()
        );
    }
    assert_eq!((unary, binary), (59, 56));
}

#[test]
fn fused_predicate_chain_validates() {
    // isnan(x) || (floor_divide(i, j) >= 0) with a literal: bool results feeding logic.
    let s = Shape::from([4]);
    let x = Expr::unary(UnaryOp::IsNan, Expr::input(0));
    let q = Expr::binary(BinaryOp::FloorDiv, Expr::input(1), Expr::input(2));
    let ge = Expr::binary(BinaryOp::GreaterEqual, q, Expr::lit(DType::I32, 0));
    let e = Expr::binary(BinaryOp::LogicalOr, x, ge);
    let inputs = vec![
        (s.clone(), DType::F32),
        (s.clone(), DType::I32),
        (Shape::from([]), DType::I32),
    ];
    check(&ew(e, inputs, s, DType::Bool));
}

#[test]
fn random_kernels_validate() {
    for dist in [
        Distribution::Uniform {
            low: -1.5,
            high: 2.0,
        },
        Distribution::Normal {
            mean: 0.0,
            std: 1.0,
        },
    ] {
        for seed in [0, u64::MAX, 0x1234_5678_9abc_def0] {
            check(&Kernel::Random(RandomKernel {
                spec: RandomSpec { dist, seed },
                out_shape: Shape::from([3, 7]),
            }));
        }
    }
}

#[test]
fn prelude_erf_coefficients_match_the_cpu() {
    let body = PRELUDE
        .split("fn wgf_erf")
        .nth(1)
        .and_then(|s| s.split("\n}").next())
        .expect("wgf_erf in the prelude");
    let words: Vec<u32> = body
        .split("bitcast<f32>(0x")
        .skip(1)
        .map(|s| u32::from_str_radix(&s[..8], 16).unwrap())
        .collect();
    let (p, q) = erf_coefficients();
    assert_eq!(words, [p, q].concat());
}

/// Float pow, floor_divide and remainder go through the prelude's bit-exact helpers (not the
/// builtin `pow` or float `%`), fused with casts, on f32 and f16, scalar and vec4 kernels.
#[test]
fn float_pow_divmod_and_casts_use_prelude_helpers_and_validate() {
    let bin = |op, a: Expr, b: Expr| Expr::binary(op, a, b);
    for d in [DType::F32, DType::F16] {
        for n in [8, 7] {
            let s = Shape::from([n]);
            // cast<i32>(pow(x0, 2) + floor_divide(x0, x1) - remainder(x1, x0)) and a cast to u32.
            let two = if d == DType::F16 {
                0x4000
            } else {
                2f32.to_bits()
            };
            let p = bin(BinaryOp::Pow, Expr::input(0), Expr::lit(d, two));
            let q = bin(BinaryOp::FloorDiv, Expr::input(0), Expr::input(1));
            let r = bin(BinaryOp::Remainder, Expr::input(1), Expr::input(0));
            let e = bin(BinaryOp::Sub, bin(BinaryOp::Add, p, q), r);
            let inputs = vec![(s.clone(), d), (s.clone(), d)];
            for to in [DType::I32, DType::U32] {
                let k = ew(Expr::cast(to, e.clone()), inputs.clone(), s.clone(), to);
                let Kernel::Elementwise(ek) = &k else {
                    unreachable!()
                };
                let func = ek.wgsl();
                let func = func
                    .split("fn wgf_expr")
                    .nth(1)
                    .expect("expression function");
                for helper in ["wgf_pow_f32(", "wgf_divmod_f32(", "wgf_f32_to_"] {
                    assert!(func.contains(helper), "{d} no {helper} in {func}");
                }
                assert!(!func.contains(" pow(") && !func.contains("(pow("), "{func}");
                check(&k);
            }
        }
    }
}

/// Two inputs presenting the same elements merge into one (what the GPU executor asks when
/// both are bound to one buffer range); inputs that broadcast differently, differ in dtype or
/// are read through a view do not.
#[test]
fn inputs_presenting_the_same_elements_merge() {
    use wgflow::ops::ElementwiseKernel;
    let expr = Expr::binary(
        BinaryOp::Add,
        Expr::input(0),
        Expr::binary(BinaryOp::Mul, Expr::input(1), Expr::input(2)),
    );
    let k = |shapes: [&[usize]; 3], dtypes: [DType; 3]| ElementwiseKernel {
        expr: expr.clone(),
        inputs: shapes
            .iter()
            .zip(dtypes)
            .map(|(s, d)| (Shape::new(s.to_vec()), d))
            .collect(),
        out_shape: Shape::new(vec![1, 4]),
        out_dtype: DType::F32,
        views: Vec::new(),
    };
    let f = DType::F32;
    let merged = k([&[4], &[1, 4], &[4]], [f, f, f])
        .merge_input(0, 1)
        .unwrap();
    assert_eq!(merged.inputs.len(), 2);
    assert_eq!(merged.expr.describe(), "add(in0, mul(in0, in1))");
    check(&Kernel::Elementwise(merged));
    assert!(k([&[4, 1], &[1, 4], &[4]], [f, f, f])
        .merge_input(0, 1)
        .is_none());
    assert!(k([&[4], &[4], &[4]], [f, DType::I32, f])
        .merge_input(0, 1)
        .is_none());
    assert!(k([&[4], &[4], &[4]], [f, f, f]).merge_input(1, 1).is_none());
}
