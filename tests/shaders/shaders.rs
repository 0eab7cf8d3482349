//! naga parses and validates every kind of WGSL that codegen emits, for every dtype it
//! accepts: no GPU needed, so shader bugs surface on any machine.

use crate::common::wgsl::{check, ew};

use wgflow::ops::wgsl::validate;
use wgflow::ops::{
    AdapterKind, BinaryOp, Expr, Kernel, MatMulKernel, PermuteKernel, ReduceKernel, ReduceOp,
    UnaryOp,
};
use wgflow::{DType, Shape};

const UNARY: [UnaryOp; UnaryOp::ALL.len()] = UnaryOp::ALL;
const BINARY: [BinaryOp; BinaryOp::ALL.len()] = BinaryOp::ALL;
const DTYPES: [DType; 5] = [DType::F32, DType::I32, DType::U32, DType::Bool, DType::F16];

#[test]
fn every_elementwise_op_and_dtype_validates() {
    let s = Shape::from([2, 3]);
    let mut n = 0;
    for d in DTYPES {
        for op in UNARY {
            if let Ok(out) = op.result_dtype(d) {
                check(&ew(
                    Expr::unary(op, Expr::input(0)),
                    vec![(s.clone(), d)],
                    s.clone(),
                    out,
                ));
                n += 1;
            }
        }
        for op in BINARY {
            if let Ok(out) = op.result_dtype(d) {
                // Broadcast operands exercise the index math too.
                let inputs = vec![(Shape::from([3]), d), (Shape::from([2, 1]), d)];
                let e = Expr::binary(op, Expr::input(0), Expr::input(1));
                check(&ew(e, inputs, s.clone(), out));
                n += 1;
            }
        }
        for to in DTYPES {
            check(&ew(
                Expr::cast(to, Expr::input(0)),
                vec![(s.clone(), d)],
                s.clone(),
                to,
            ));
            let lit = Expr::lit(d, 0x7f80_0000);
            let sel = Expr::select(Expr::input(0), Expr::input(1), lit);
            check(&ew(
                sel,
                vec![(Shape::scalar(), DType::Bool), (s.clone(), d)],
                s.clone(),
                d,
            ));
            n += 2;
        }
    }
    assert!(n >= 70, "only {n} kernels checked");
}

#[test]
fn reductions_matmul_and_permute_validate() {
    let shape = Shape::from([2, 3, 4]);
    for d in [DType::F32, DType::I32, DType::U32, DType::F16] {
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            for (axes, out) in [
                (vec![0, 1, 2], vec![]),
                (vec![1], vec![2, 4]),
                (vec![0, 2], vec![1, 3, 1]),
                (vec![], vec![2, 3, 4]),
            ] {
                check(&Kernel::Reduce(ReduceKernel {
                    pass: Default::default(),
                    prologue: None,
                    epilogue: None,
                    op,
                    in_shape: shape.clone(),
                    dtype: d,
                    axes,
                    out_shape: Shape::new(out),
                }));
            }
        }
        for (a, b, out) in [
            (
                [3usize, 4].to_vec(),
                [4usize, 5].to_vec(),
                [3usize, 5].to_vec(),
            ),
            (vec![2, 1, 3, 4], vec![3, 4, 2], vec![2, 3, 3, 2]),
            (vec![32, 16], vec![16, 64], vec![32, 64]),
            (vec![2, 1, 8, 4], vec![3, 4, 8], vec![2, 3, 8, 8]),
            // Workgroup-tiled on hardware adapters.
            (vec![128, 32], vec![32, 64], vec![128, 64]),
            (vec![2, 64, 16], vec![16, 128], vec![2, 64, 128]),
        ] {
            let k = MatMulKernel {
                a: Shape::new(a),
                b: Shape::new(b),
                out: Shape::new(out),
                dtype: d,
                block: None,
                tiled: false,
                epilogue: None,
                k_chunk: None,
                transposed: [false; 2],
            };
            check(&Kernel::MatMul(k.clone()));
            for software in [false, true] {
                let blocked = k.blocked_for(&AdapterKind {
                    software,
                    gl: false,
                });
                let divisible = k.out.dims()[k.out.rank() - 2].is_multiple_of(64)
                    && k.out.dims()[k.out.rank() - 1].is_multiple_of(64)
                    && d.is_numeric();
                assert_eq!(blocked.tiled, !software && divisible, "{:?}", k.out);
                check(&Kernel::MatMul(blocked));
            }
        }
    }
    for d in DTYPES {
        check(&Kernel::Permute(PermuteKernel {
            in_shape: shape.clone(),
            perm: vec![2, 0, 1],
            out_shape: Shape::from([4, 2, 3]),
            dtype: d,
        }));
    }
}

#[test]
fn fused_trees_and_exact_literals_validate() {
    // ((a*b + c) max 0) * 0.5 + exp(-a), with a scalar literal and a broadcast input.
    let a = || Expr::input(0);
    let f = |v: f32| Expr::lit(DType::F32, v.to_bits());
    let e = Expr::binary(
        BinaryOp::Add,
        Expr::binary(
            BinaryOp::Mul,
            Expr::binary(
                BinaryOp::Maximum,
                Expr::binary(
                    BinaryOp::Add,
                    Expr::binary(BinaryOp::Mul, a(), Expr::input(1)),
                    Expr::input(2),
                ),
                f(0.0),
            ),
            f(0.5),
        ),
        Expr::unary(UnaryOp::Exp, Expr::unary(UnaryOp::Neg, a())),
    );
    let s = Shape::from([1000, 3]);
    let k = ew(
        e,
        vec![
            (s.clone(), DType::F32),
            (Shape::from([3]), DType::F32),
            (Shape::scalar(), DType::F32),
        ],
        s.clone(),
        DType::F32,
    );
    check(&k);
    for v in [
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -0.0,
        1e-45,
        3.4e38,
        0.1,
    ] {
        let e = Expr::binary(BinaryOp::Add, a(), f(v));
        let src = ew(e, vec![(s.clone(), DType::F32)], s.clone(), DType::F32).wgsl();
        validate("literal", &src).unwrap();
        let bits = format!("{:#010x}u", v.to_bits());
        assert!(
            src.contains(&bits) || src.contains(&format!("{v:.1}")),
            "{v} not written exactly:\n{src}"
        );
    }
    // Integer extremes as literals.
    let e = Expr::binary(BinaryOp::Add, a(), Expr::lit(DType::I32, i32::MIN as u32));
    check(&ew(e, vec![(s.clone(), DType::I32)], s, DType::I32));
}

#[test]
fn invalid_wgsl_reports_line_and_column() {
    let err = validate("broken", "fn main() { let x: f32 = 1u; }")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("invalid WGSL in broken") && err.contains("broken:1:"),
        "{err}"
    );
}

#[test]
fn matmul_epilogues_validate_for_every_strategy() {
    for (a, b, out) in [
        ([2, 32, 16], [16, 64], [2, 32, 64]),
        ([2, 64, 16], [16, 64], [2, 64, 64]),
    ] {
        matmul_epilogues_validate_for(DType::F32, &a, &b, &out);
        matmul_epilogues_validate_for(DType::F16, &a, &b, &out);
    }
}

fn matmul_epilogues_validate_for(dt: DType, a: &[usize], b: &[usize], out: &[usize]) {
    use wgflow::ops::Epilogue;
    // relu(acc + bias) * scale + residual, with a bool mask selecting the residual.
    let e = Expr::select(
        Expr::input(4),
        Expr::binary(
            BinaryOp::Add,
            Expr::binary(
                BinaryOp::Mul,
                Expr::unary(
                    UnaryOp::Relu,
                    Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
                ),
                Expr::input(2),
            ),
            Expr::input(3),
        ),
        Expr::input(0),
    );
    let out = Shape::new(out.to_vec());
    let k = MatMulKernel {
        a: Shape::new(a.to_vec()),
        b: Shape::new(b.to_vec()),
        out: out.clone(),
        dtype: dt,
        block: None,
        tiled: false,
        epilogue: Some(Epilogue {
            views: Vec::new(),
            expr: e,
            extra: vec![
                (Shape::from([64]), dt),
                (Shape::scalar(), dt),
                (out.clone(), dt),
                (out, DType::Bool),
            ],
        }),
        k_chunk: None,
        transposed: [false; 2],
    };
    check(&Kernel::MatMul(k.clone()));
    for software in [false, true] {
        let blocked = k.blocked_for(&AdapterKind {
            software,
            gl: false,
        });
        assert!(blocked.block.is_some());
        check(&Kernel::MatMul(blocked));
    }
}

#[test]
fn reduction_epilogues_validate_for_every_strategy() {
    reduction_epilogues_validate_for(DType::F32);
    reduction_epilogues_validate_for(DType::F16);
}

fn reduction_epilogues_validate_for(dt: DType) {
    use wgflow::ops::{Epilogue, ReduceStrategy};
    // sqrt(acc + eps) * scale + full
    let e = Expr::binary(
        BinaryOp::Add,
        Expr::binary(
            BinaryOp::Mul,
            Expr::unary(
                UnaryOp::Sqrt,
                Expr::binary(
                    BinaryOp::Add,
                    Expr::input(0),
                    Expr::lit(dt, 1e-5f32.to_bits()),
                ),
            ),
            Expr::input(1),
        ),
        Expr::input(2),
    );
    let mut seen = Vec::new();
    for (shape, axes, out) in [
        (vec![3usize, 5], vec![0usize], vec![5usize]),
        (vec![8, 16], vec![1], vec![8]),
        (vec![2, 8192], vec![1], vec![2]),
    ] {
        let out = Shape::new(out);
        let k = ReduceKernel {
            pass: Default::default(),
            prologue: None,
            epilogue: Some(Epilogue {
                expr: e.clone(),
                extra: vec![(Shape::scalar(), dt), (out.clone(), dt)],
                views: Vec::new(),
            }),
            op: ReduceOp::Mean,
            in_shape: Shape::new(shape),
            dtype: dt,
            axes,
            out_shape: out,
        };
        seen.push(k.strategy());
        check(&Kernel::Reduce(k));
    }
    assert_eq!(
        seen,
        vec![
            ReduceStrategy::Loop,
            ReduceStrategy::RowsVec4,
            ReduceStrategy::Tree
        ]
    );
}

#[test]
fn reduction_prologues_validate_for_every_strategy_and_op() {
    use wgflow::ops::{Epilogue, Prologue, ReduceStrategy};
    let mut seen = Vec::new();
    for dt in [DType::F32, DType::F16, DType::I32] {
        for (shape, axes, out) in [
            (vec![3usize, 5], vec![0usize], vec![5usize]),
            (vec![8, 16], vec![1], vec![8]),
            (vec![2, 8192], vec![1], vec![2]),
        ] {
            let in_shape = Shape::new(shape.clone());
            let mut row = shape.clone();
            *row.last_mut().unwrap() = 1;
            // (in0 - in1) * in2, where(in3, .., in0): full, row-broadcast, column, bool mask.
            let inputs = vec![
                (in_shape.clone(), dt),
                (Shape::new(row), dt),
                (Shape::new(vec![shape[1]]), dt),
                (in_shape.clone(), DType::Bool),
            ];
            let e = Expr::select(
                Expr::input(3),
                Expr::binary(
                    BinaryOp::Mul,
                    Expr::binary(BinaryOp::Sub, Expr::input(0), Expr::input(1)),
                    Expr::input(2),
                ),
                Expr::input(0),
            );
            let out = Shape::new(out);
            for op in [
                ReduceOp::Sum,
                ReduceOp::Max,
                ReduceOp::ArgMin,
                ReduceOp::Any,
            ] {
                let epilogue = (op == ReduceOp::Sum).then(|| Epilogue {
                    expr: Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
                    extra: vec![(out.clone(), dt)],
                    views: Vec::new(),
                });
                let k = ReduceKernel {
                    pass: Default::default(),
                    prologue: Some(Box::new(Prologue {
                        expr: e.clone(),
                        inputs: inputs.clone(),
                    })),
                    epilogue,
                    op,
                    in_shape: in_shape.clone(),
                    dtype: dt,
                    axes: axes.clone(),
                    out_shape: out.clone(),
                };
                seen.push(k.strategy());
                check(&Kernel::Reduce(k));
            }
        }
    }
    for s in [
        ReduceStrategy::Loop,
        ReduceStrategy::RowsVec4,
        ReduceStrategy::Tree,
    ] {
        assert!(seen.contains(&s), "{s:?} not covered: {seen:?}");
    }
}

/// Long reductions split into partial passes (chunks, then the chunks' results): every pass
/// of every op, dtype and layout validates, and no invocation loops over more than a few
/// thousand elements (llvmpipe silently ends loops after 65,535 iterations).
#[test]
fn split_reduction_passes_validate() {
    use wgflow::ops::{Pass, ReduceStrategy};
    let mut kinds = Vec::new();
    for (dims, axes, out) in [
        (vec![20_000_000usize], vec![0usize], vec![]),
        (vec![3, 5_592_407], vec![1], vec![3]),
        (vec![100, 200_000], vec![1], vec![100]),
        (vec![4_194_305, 4], vec![0], vec![4]),
        (vec![3, 70_001, 5], vec![1], vec![3, 5]),
        (vec![70_001, 3, 5], vec![0, 2], vec![3]),
    ] {
        for (op, dtypes) in [
            (ReduceOp::Sum, &DTYPES[..]),
            (ReduceOp::Mean, &[DType::F32, DType::I32, DType::F16][..]),
            (ReduceOp::Max, &[DType::F32, DType::U32, DType::F16][..]),
            (ReduceOp::Prod, &[DType::F32, DType::I32][..]),
            (ReduceOp::Any, &[DType::Bool, DType::F32][..]),
            (ReduceOp::ArgMin, &[DType::F32, DType::I32][..]),
        ] {
            for &d in dtypes {
                if (op == ReduceOp::Sum && d == DType::Bool) || (op.is_arg() && axes.len() > 1) {
                    continue;
                }
                let whole = ReduceKernel {
                    pass: Pass::Whole,
                    prologue: None,
                    epilogue: None,
                    op,
                    in_shape: Shape::new(dims.clone()),
                    dtype: d,
                    axes: axes.clone(),
                    out_shape: Shape::new(out.clone()),
                };
                let passes = whole.passes();
                assert!(passes.len() >= 2, "{op:?} over {dims:?} is not split");
                for k in passes {
                    kinds.push((k.strategy(), std::mem::discriminant(&k.pass)));
                    check(&Kernel::Reduce(k));
                }
            }
        }
    }
    for s in [
        ReduceStrategy::Loop,
        ReduceStrategy::RowsVec4,
        ReduceStrategy::Tree,
    ] {
        assert!(kinds.iter().any(|k| k.0 == s), "{s:?} not exercised");
    }
    for p in [
        Pass::Partial { chunk: 1 },
        Pass::MeanOfPartials { count: 1 },
        Pass::ArgOfPartials { chunks: 1 },
        Pass::Whole,
    ] {
        let want = std::mem::discriminant(&p);
        assert!(kinds.iter().any(|k| k.1 == want), "{p:?} not exercised");
    }
}

/// Split-K partial products (every strategy) and matmuls of vectors, with a bias row along M
/// when B is a vector.
#[test]
fn split_k_and_vector_matmuls_validate() {
    use wgflow::ops::Epilogue;
    let k = 70_000 * 4;
    for (a, b, out) in [
        (vec![1, k], vec![k, 1], vec![1, 1]),
        (vec![4, k], vec![k, 4], vec![4, 4]),
        (vec![64, k], vec![2, k, 64], vec![2, 64, 64]),
        (vec![k], vec![k], vec![]),
        (vec![3, 5], vec![5], vec![3]),
        (vec![8], vec![2, 8, 16], vec![2, 16]),
    ] {
        for d in [DType::F32, DType::I32, DType::F16] {
            let k = MatMulKernel {
                a: Shape::new(a.clone()),
                b: Shape::new(b.clone()),
                out: Shape::new(out.clone()),
                dtype: d,
                block: None,
                tiled: false,
                epilogue: None,
                k_chunk: None,
                transposed: [false; 2],
            };
            let (first, sum) = k.passes();
            for software in [false, true] {
                let kind = AdapterKind {
                    software,
                    gl: false,
                };
                let adapted = first.blocked_for(&kind);
                check(&Kernel::MatMul(adapted.clone()));
                assert!(Kernel::MatMul(adapted).loop_iterations() < Some(40_000));
            }
            if let Some(sum) = sum {
                assert!(first.k_chunk.is_some());
                check(&Kernel::Reduce(sum));
            }
        }
    }
    let bias_along_m = MatMulKernel {
        a: Shape::from([2, 6, 5]),
        b: Shape::from([5]),
        out: Shape::from([2, 6]),
        dtype: DType::F32,
        block: None,
        tiled: false,
        epilogue: Some(Epilogue {
            expr: Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
            extra: vec![(Shape::from([6]), DType::F32)],
            views: Vec::new(),
        }),
        k_chunk: None,
        transposed: [false; 2],
    };
    let wgsl = Kernel::MatMul(bias_along_m.clone()).wgsl();
    assert!(wgsl.contains("in2[m]"), "{wgsl}");
    check(&Kernel::MatMul(bias_along_m));
}

/// Tensors over the binding limit are bound as several windows: the rewritten WGSL of every
/// kernel kind (every binding split in three) still validates.
#[test]
fn kernels_with_split_bindings_validate() {
    use wgflow::backend::gpu::split::{split_bindings, Split};
    let mut kernels = vec![
        ew(
            Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
            vec![
                (Shape::from([8, 16]), DType::F32),
                (Shape::from([8, 1]), DType::F32),
            ],
            Shape::from([8, 16]),
            DType::F32,
        ),
        ew(
            Expr::unary(UnaryOp::Neg, Expr::input(0)),
            vec![(Shape::from([64]), DType::F16)],
            Shape::from([64]),
            DType::F16,
        ),
        Kernel::Permute(PermuteKernel {
            in_shape: Shape::from([3, 5]),
            perm: vec![1, 0],
            out_shape: Shape::from([5, 3]),
            dtype: DType::F32,
        }),
    ];
    for (dims, axes, out) in [
        (vec![20_000_000usize], vec![0usize], vec![]),
        (vec![100, 4096], vec![1], vec![100]),
        (vec![5, 7], vec![0], vec![7]),
    ] {
        for k in (ReduceKernel {
            pass: Default::default(),
            prologue: None,
            epilogue: None,
            op: ReduceOp::Sum,
            in_shape: Shape::new(dims),
            dtype: DType::F32,
            axes,
            out_shape: Shape::new(out),
        })
        .passes()
        {
            kernels.push(Kernel::Reduce(k));
        }
    }
    for kind in [
        AdapterKind::default(),
        AdapterKind {
            software: true,
            gl: false,
        },
    ] {
        kernels.push(Kernel::MatMul(
            MatMulKernel {
                // Batched: an unbatched blocked product reads K from A's binding, which
                // is never split (see `MatMulKernel::shares_k`).
                a: Shape::from([2, 64, 32]),
                b: Shape::from([32, 16]),
                out: Shape::from([2, 64, 16]),
                dtype: DType::F32,
                block: None,
                tiled: false,
                epilogue: None,
                k_chunk: None,
                transposed: [false; 2],
            }
            .blocked_for(&kind),
        ));
    }
    for k in kernels {
        let src = k.wgsl();
        let n = src.matches("@binding(").count();
        let splits: Vec<Split> = (0..n)
            .map(|b| Split {
                binding: b,
                window_elems: 1000,
                windows: 3,
                first_extra: n + 2 * b,
            })
            .collect();
        let split = split_bindings(&src, &splits).unwrap();
        assert_eq!(split.matches("@binding(").count(), 3 * n);
        if let Err(e) = validate(&k.describe(), &split) {
            panic!("{e}\n--- source ---\n{split}");
        }
    }
}
