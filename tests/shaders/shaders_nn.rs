//! naga parses and validates every WGSL kernel the reduction, movement and NN families emit,
//! for every dtype each accepts, including edge geometries (scalars, size-1 axes, negative
//! strides, padding, groups). No GPU needed.

use crate::common::wgsl::check;

use wgflow::ops::{
    ConcatKernel, Conv2dKernel, GatherKernel, Kernel, PadKernel, PoolKernel, PoolKind,
    ReduceKernel, ReduceOp, StridedKernel, StridedKind, Window,
};
use wgflow::{DType, Shape};

#[test]
fn reductions_validate_for_every_dtype_and_axes() {
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[], &[]),
        (&[2, 3, 4], &[1]),
        (&[2, 3, 4], &[0, 2]),
        (&[5, 1], &[0, 1]),
    ];
    for (dims, axes) in shapes {
        let in_shape = Shape::new(dims.to_vec());
        let out: Vec<usize> = (0..dims.len())
            .filter(|k| !axes.contains(k))
            .map(|k| dims[k])
            .collect();
        let cases = [
            (
                ReduceOp::Prod,
                vec![DType::F32, DType::I32, DType::U32, DType::F16],
            ),
            (ReduceOp::Sum, vec![DType::F16]),
            (ReduceOp::Mean, vec![DType::F16]),
            (ReduceOp::Max, vec![DType::F16]),
            (
                ReduceOp::ArgMax,
                vec![DType::F32, DType::I32, DType::U32, DType::F16],
            ),
            (
                ReduceOp::ArgMin,
                vec![DType::F32, DType::I32, DType::U32, DType::F16],
            ),
            (
                ReduceOp::All,
                vec![DType::Bool, DType::F32, DType::I32, DType::U32, DType::F16],
            ),
            (
                ReduceOp::Any,
                vec![DType::Bool, DType::F32, DType::I32, DType::U32, DType::F16],
            ),
        ];
        for (op, dtypes) in cases {
            for dtype in dtypes {
                check(&Kernel::Reduce(ReduceKernel {
                    pass: Default::default(),
                    prologue: None,
                    epilogue: None,
                    op,
                    in_shape: in_shape.clone(),
                    dtype,
                    axes: axes.to_vec(),
                    out_shape: Shape::new(out.clone()),
                }));
            }
        }
    }
}

#[test]
fn movement_kernels_validate() {
    for dtype in [DType::F32, DType::F16] {
        movement_kernels_validate_for(dtype);
    }
}

fn movement_kernels_validate_for(dtype: DType) {
    for (kind, out, offset, strides) in [
        (StridedKind::Slice, vec![3, 2], 7i64, vec![-4i64, 2]),
        (StridedKind::Flip, vec![4], 3, vec![-1]),
        (StridedKind::BroadcastTo, vec![2, 3, 4], 0, vec![0, 1, 0]),
        (StridedKind::Slice, vec![], 2, vec![]),
    ] {
        check(&Kernel::Strided(StridedKernel {
            kind,
            out_shape: Shape::new(out),
            offset,
            strides,
            dtype,
        }));
    }
    for n in 1..=6 {
        check(&Kernel::Concat(ConcatKernel {
            in_shapes: (0..n).map(|k| Shape::new(vec![2, k + 1])).collect(),
            axis: 1,
            out_shape: Shape::new(vec![2, n * (n + 1) / 2]),
            dtype,
            pool: None,
        }));
    }
    check(&Kernel::Pad(PadKernel {
        in_shape: Shape::new(vec![2, 3]),
        before: vec![1, 0],
        value: 1.5f32.to_bits(),
        out_shape: Shape::new(vec![4, 5]),
        dtype,
    }));
    check(&Kernel::Gather(GatherKernel {
        x_shape: Shape::new(vec![4, 3]),
        indices: 5,
        axis: 0,
        out_shape: Shape::new(vec![5, 3]),
        dtype,
    }));
    check(&Kernel::Gather(GatherKernel {
        x_shape: Shape::new(vec![1]),
        indices: 1,
        axis: 0,
        out_shape: Shape::new(vec![]),
        dtype,
    }));
}

#[test]
fn nn_kernels_validate() {
    let window = Window {
        kernel: [3, 2],
        stride: [2, 1],
        padding: [1, 0],
        dilation: [1, 2],
    };
    check(&Kernel::Conv2d(Conv2dKernel {
        x: Shape::new(vec![2, 4, 7, 6]),
        w: Shape::new(vec![6, 2, 3, 2]),
        window,
        groups: 2,
        out: Shape::new(vec![2, 6, 4, 4]),
        epilogue: None,
        c_chunk: None,
        pool: None,
    }));
    // bias per channel, a scalar, a residual and a bool mask as a fused epilogue.
    use wgflow::ops::{BinaryOp, Epilogue, Expr, UnaryOp};
    let out = Shape::new(vec![2, 6, 4, 4]);
    check(&Kernel::Conv2d(Conv2dKernel {
        x: Shape::new(vec![2, 4, 7, 6]),
        w: Shape::new(vec![6, 2, 3, 2]),
        window,
        groups: 2,
        out: out.clone(),
        epilogue: Some(Epilogue {
            views: Vec::new(),
            expr: Expr::select(
                Expr::input(4),
                Expr::unary(
                    UnaryOp::Relu,
                    Expr::binary(
                        BinaryOp::Add,
                        Expr::binary(BinaryOp::Mul, Expr::input(0), Expr::input(2)),
                        Expr::input(1),
                    ),
                ),
                Expr::input(3),
            ),
            extra: vec![
                (Shape::new(vec![6, 1, 1]), DType::F32),
                (Shape::scalar(), DType::F32),
                (out.clone(), DType::F32),
                (Shape::new(vec![4, 1]), DType::Bool),
            ],
        }),
        c_chunk: None,
        pool: None,
    }));
    // Channels split into chunks (partial convolutions, then a sum).
    let (first, sum) = Conv2dKernel {
        x: Shape::new(vec![1, 8192, 5, 5]),
        w: Shape::new(vec![4, 8192, 3, 3]),
        window,
        groups: 1,
        out: Shape::new(vec![1, 4, 3, 3]),
        epilogue: None,
        c_chunk: None,
        pool: None,
    }
    .passes();
    assert!(first.c_chunk.is_some() && first.loop_iterations() <= 32768);
    check(&Kernel::Conv2d(first));
    check(&Kernel::Reduce(sum.expect("a sum over chunks")));
    for kind in [PoolKind::Max, PoolKind::Avg] {
        check(&Kernel::Pool(PoolKernel {
            kind,
            x: Shape::new(vec![1, 3, 5, 5]),
            window: Window {
                kernel: [3, 3],
                stride: [2, 2],
                padding: [1, 1],
                dilation: [1, 1],
            },
            out: Shape::new(vec![1, 3, 3, 3]),
        }));
    }
}

#[test]
fn index_kernels_validate_for_every_reduce_and_dtype() {
    use wgflow::ops::index::{IndexKernel, IndexKernelOp, ScatterReduce};
    let shapes: [(Vec<usize>, Vec<usize>, usize); 4] = [
        (vec![4, 3], vec![2, 3], 0),
        (vec![4, 3], vec![4, 5], 1),
        (vec![2, 3, 4], vec![1, 2, 7], 2),
        (vec![5], vec![9], 0),
    ];
    for (data, index, axis) in shapes {
        for dtype in [DType::F32, DType::I32, DType::U32, DType::Bool, DType::F16] {
            check(&Kernel::Index(IndexKernel {
                op: IndexKernelOp::Gather,
                axis,
                data: Shape::new(data.clone()),
                index: Shape::new(index.clone()),
                dtype,
            }));
            if matches!(dtype, DType::F32 | DType::I32 | DType::U32) {
                let mut out = index.clone();
                out[axis] = 1.min(data[axis]);
                for largest in [true, false] {
                    check(&Kernel::Index(IndexKernel {
                        op: IndexKernelOp::TopK { largest },
                        axis,
                        data: Shape::new(data.clone()),
                        index: Shape::new(out.clone()),
                        dtype,
                    }));
                }
            }
            for reduce in ScatterReduce::ALL {
                let typed = matches!(dtype, DType::F32 | DType::I32 | DType::U32);
                if reduce != ScatterReduce::None && !typed {
                    continue;
                }
                check(&Kernel::Index(IndexKernel {
                    op: IndexKernelOp::Scatter {
                        reduce,
                        lo: 1,
                        hi: index[axis],
                    },
                    axis,
                    data: Shape::new(data.clone()),
                    index: Shape::new(index.clone()),
                    dtype,
                }));
            }
        }
    }
}

#[test]
fn segment_kernels_validate_for_every_pass_and_dtype() {
    use wgflow::ops::segment::{SegmentKernel, SegmentPass};
    for dtype in [DType::F32, DType::I32, DType::U32] {
        for (pre, positions, post, segments) in [(1, 5, 3, 7), (2, 9000, 1, 1), (3, 1, 4, 2)] {
            let passes = [
                SegmentPass::Direct,
                SegmentPass::Keys,
                SegmentPass::Sort {
                    block: 4,
                    stride: 2,
                },
                SegmentPass::Sum {
                    lo: 0,
                    hi: positions.min(4096),
                },
                SegmentPass::Sum {
                    lo: positions / 2,
                    hi: positions,
                },
            ];
            for pass in passes {
                check(&Kernel::Segment(SegmentKernel {
                    pass,
                    pre,
                    positions,
                    post,
                    segments,
                    dtype,
                }));
            }
        }
    }
}

#[test]
fn attention_kernels_validate_for_every_pass() {
    use wgflow::ops::attention::{AttentionKernel, AttentionPass};
    for pass in AttentionPass::ALL {
        for (heads, tq, tk, d, causal) in
            [(2, 5, 7, 4, true), (1, 3, 3, 1, false), (3, 9, 9, 64, true)]
        {
            check(&Kernel::Attention(AttentionKernel {
                pass,
                heads,
                tq,
                tk,
                d,
                causal,
                scale: 0.125,
            }));
        }
    }
}

#[test]
fn row_kernels_validate_for_every_pass() {
    use wgflow::ops::rows::{RowKernel, RowPass};
    for pass in RowPass::ALL {
        for (rows, d) in [(1, 1), (3, 7), (5, 64), (2, 50_000)] {
            check(&Kernel::Rows(RowKernel {
                pass,
                rows,
                d,
                eps: 1e-5,
            }));
        }
    }
}
