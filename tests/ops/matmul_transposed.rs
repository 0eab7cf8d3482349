//! A matmul whose operand is a transpose of the last two axes of a stored value reads it in
//! place (no transpose kernel runs), on cpu:0 and every GPU adapter: transposed A, B or
//! both, batched and broadcast batches, odd sizes, the small-side shapes of an MLP's
//! backward pass, split-K, integers, NaN and infinities, each against a float64 product
//! computed here from the logical (untransposed) operands; the plan of a matmul gradient
//! holds no transpose kernel; every new WGSL variant validates with naga.

use crate::common;

use crate::common::{assert_close, gpus, session_on};
use wgflow::compile::StepKind;
use wgflow::ops::{AdapterKind, Kernel, MatMulKernel};
use wgflow::{DType, Device, Graph, HostTensor, Shape, Tensor};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

/// Multiples of 1/8 in [-1, 1): products and sums up to K of a few thousand are exact in f32.
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13 + i / 5) % 17) as f32 / 8.0 - 1.0)
        .collect()
}

/// `x` (row-major, `batch + [r, c]`) with its last two axes swapped.
fn swap_last(x: &[f32], batch: usize, r: usize, c: usize) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for b in 0..batch {
        for i in 0..r {
            for j in 0..c {
                out[b * r * c + j * r + i] = x[b * r * c + i * c + j];
            }
        }
    }
    out
}

/// `[..batch, m, k] @ [..batch, k, n]` in float64, batch dims broadcast (same rank).
fn reference(
    a: &[f32],
    ba: &[usize],
    b: &[f32],
    bb: &[usize],
    (m, k, n): (usize, usize, usize),
) -> Vec<f64> {
    let batch: Vec<usize> = ba.iter().zip(bb).map(|(&x, &y)| x.max(y)).collect();
    let mut out = Vec::new();
    for bi in 0..batch.iter().product::<usize>() {
        let (mut ia, mut ib, mut rem, mut sta, mut stb) = (0, 0, bi, 1, 1);
        for d in (0..batch.len()).rev() {
            let i = rem % batch[d];
            rem /= batch[d];
            ia += if ba[d] == 1 { 0 } else { i * sta };
            ib += if bb[d] == 1 { 0 } else { i * stb };
            sta *= ba[d];
            stb *= bb[d];
        }
        for i in 0..m {
            for j in 0..n {
                let acc: f64 = (0..k)
                    .map(|kk| a[ia * m * k + i * k + kk] as f64 * b[ib * k * n + kk * n + j] as f64)
                    .sum();
                out.push(acc);
            }
        }
    }
    out
}

/// A constant holding the logical matrix `values` (`batch + [r, c]`), stored transposed and
/// transposed back in the graph when `t`.
fn operand(g: &mut Graph, values: &[f32], batch: &[usize], r: usize, c: usize, t: bool) -> Tensor {
    let nb: usize = batch.iter().product();
    let mut shape = batch.to_vec();
    if t {
        shape.extend([c, r]);
        let stored = HostTensor::new(shape, swap_last(values, nb, r, c)).unwrap();
        let x = g.constant(stored).unwrap();
        let rank = batch.len() as isize + 2;
        let mut perm: Vec<isize> = (0..rank).collect();
        perm.swap(batch.len(), batch.len() + 1);
        g.transpose(x, &perm).unwrap()
    } else {
        shape.extend([r, c]);
        g.constant(HostTensor::new(shape, values.to_vec()).unwrap())
            .unwrap()
    }
}

/// The matmul kernels of the plan of `fetches` on `d`, failing on any transpose kernel.
fn matmuls_without_transposes(g: &Graph, d: Device, fetches: &[Tensor]) -> Vec<MatMulKernel> {
    let mut s = session_on(g, d);
    let plan = s.plan(fetches).unwrap();
    let mut out = Vec::new();
    for st in &plan.steps {
        match &st.kind {
            StepKind::Dispatch {
                kernel: Kernel::Permute(p),
                ..
            } => panic!("a transpose kernel runs on {d}: {p:?}"),
            StepKind::Dispatch {
                kernel: Kernel::MatMul(k),
                ..
            } => out.push(k.clone()),
            _ => {}
        }
    }
    out
}

struct Case {
    ba: Vec<usize>,
    bb: Vec<usize>,
    mkn: (usize, usize, usize),
    t: [bool; 2],
}

/// Build every case in one graph, check each plan reads its operands in place, run on
/// every device and compare with float64.
fn run_cases(cases: &[Case], rtol: f32) {
    let mut g = Graph::new();
    let mut ys = Vec::new();
    let mut want = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let (m, k, n) = c.mkn;
        let va = data(c.ba.iter().product::<usize>() * m * k, 2 * i);
        let vb = data(c.bb.iter().product::<usize>() * k * n, 2 * i + 1);
        let a = operand(&mut g, &va, &c.ba, m, k, c.t[0]);
        let b = operand(&mut g, &vb, &c.bb, k, n, c.t[1]);
        let y = g.matmul(a, b).unwrap();
        let r: Vec<f32> = reference(&va, &c.ba, &vb, &c.bb, c.mkn)
            .iter()
            .map(|&x| x as f32)
            .collect();
        want.push(HostTensor::new(g.shape(y).unwrap().clone(), r).unwrap());
        ys.push(y);
    }
    for d in devices() {
        for (c, &y) in cases.iter().zip(&ys) {
            let ks = matmuls_without_transposes(&g, d, &[y]);
            assert!(
                ks.iter().all(|k| k.transposed == c.t),
                "{:?} on {d}: {ks:?}",
                c.t
            );
        }
        let got = session_on(&g, d).run(&[], &ys).unwrap();
        for ((c, got), want) in cases.iter().zip(&got).zip(&want) {
            let what = format!("{:?}{:?} {:?} t={:?} on {d}", c.ba, c.bb, c.mkn, c.t);
            assert_close(&what, got, want, rtol, 1e-5);
        }
    }
}

const BOTH_WAYS: [[bool; 2]; 3] = [[true, false], [false, true], [true, true]];

#[test]
fn odd_sizes_every_side_transposed() {
    let sizes = [1, 3, 17, 33, 65];
    let mut cases = Vec::new();
    for (i, &m) in sizes.iter().enumerate() {
        let k = sizes[(i + 2) % sizes.len()];
        let n = sizes[(i + 4) % sizes.len()];
        for t in BOTH_WAYS {
            cases.push(Case {
                ba: vec![],
                bb: vec![],
                mkn: (m, k, n),
                t,
            });
        }
    }
    cases.push(Case {
        ba: vec![],
        bb: vec![],
        mkn: (257, 3, 17),
        t: [true, true],
    });
    run_cases(&cases, 1e-6);
}

#[test]
fn blocked_and_tiled_shapes_transposed() {
    // Divisible by 4 (register blocks), 16/32 (software blocks) and 64 (hardware tiles).
    let mut cases = Vec::new();
    for mkn in [
        (4, 8, 4),
        (16, 32, 32),
        (64, 16, 64),
        (128, 64, 64),
        (12, 20, 8),
    ] {
        for t in BOTH_WAYS {
            cases.push(Case {
                ba: vec![],
                bb: vec![],
                mkn,
                t,
            });
        }
    }
    run_cases(&cases, 1e-6);
}

#[test]
fn batched_and_broadcast_batches_transposed() {
    let mut cases = Vec::new();
    for (ba, bb, mkn) in [
        (vec![3], vec![3], (5, 7, 9)),
        (vec![2, 1], vec![1, 3], (4, 8, 16)),
        (vec![1], vec![4], (64, 16, 64)),
        (vec![3], vec![1], (17, 33, 3)),
    ] {
        for t in BOTH_WAYS {
            cases.push(Case {
                ba: ba.clone(),
                bb: bb.clone(),
                mkn,
                t,
            });
        }
    }
    run_cases(&cases, 1e-6);
}

#[test]
fn small_side_shapes_of_an_mlp_backward_pass() {
    // Forward [256,512]@[512,10]; dW = xᵀ·dy as [512,256]ᵀ@[256,10]; dx = dy·Wᵀ as
    // [256,10]@[512,10]ᵀ; and the first layer's dW = [784,256]ᵀ@[256,512].
    let cases = vec![
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (256, 512, 10),
            t: [false, false],
        },
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (512, 256, 10),
            t: [true, false],
        },
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (256, 10, 512),
            t: [false, true],
        },
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (784, 256, 512),
            t: [true, false],
        },
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (33, 65, 31),
            t: [true, true],
        },
        // A conv filter gradient (cpu:0's direct kernel: few columns, long K), and one with
        // rows left over after its 4-row blocks.
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (16, 4096, 9),
            t: [false, true],
        },
        Case {
            ba: vec![],
            bb: vec![],
            mkn: (7, 1500, 3),
            t: [true, false],
        },
    ];
    run_cases(&cases, 1e-6);
}

/// A few rows of A against a long K (cpu:0's `few_rows` kernel: up to 16 rows, or 32 over a
/// transposed B, read where it lies: 16-column strips of a row-major B, four-column dot
/// products of a transposed one) in every layout: rows left over after blocks of 4 and 2, strips and quads cut short by N, K not a
/// multiple of 8, N split over threads, and batches stacked into rows or run one by one.
#[test]
fn few_rows_against_long_k_in_every_layout() {
    let layouts = [[false, false], [false, true], [true, false], [true, true]];
    let mut cases = Vec::new();
    for (i, &(m, k, n)) in [
        (2, 64, 16),
        (3, 67, 17),
        (5, 256, 1030),
        (8, 256, 1024),
        (16, 129, 100),
        (7, 300, 5),
        (13, 64, 1),
    ]
    .iter()
    .enumerate()
    {
        for t in [layouts[i % 4], layouts[(i + 1) % 4], layouts[(i + 2) % 4]] {
            cases.push(Case {
                ba: vec![],
                bb: vec![],
                mkn: (m, k, n),
                t,
            });
        }
    }
    // Up to 32 rows when B is stored transposed (a linear layer's `x · Wᵀ`).
    for (mkn, t) in [
        ((24, 100, 37), [false, true]),
        ((32, 64, 9), [true, true]),
        ((31, 72, 6), [false, true]),
    ] {
        cases.push(Case {
            ba: vec![],
            bb: vec![],
            mkn,
            t,
        });
    }
    for t in layouts {
        cases.push(Case {
            ba: vec![3],
            bb: vec![1],
            mkn: (4, 96, 40),
            t,
        });
        cases.push(Case {
            ba: vec![2],
            bb: vec![2],
            mkn: (6, 80, 33),
            t,
        });
    }
    run_cases(&cases, 1e-6);
}

#[test]
fn split_k_reads_transposed_chunks() {
    // K over K_CHUNK: partial products over chunks of K, each reading its chunk in place.
    let k = wgflow::ops::matmul::K_CHUNK + 5;
    let cases: Vec<Case> = BOTH_WAYS
        .iter()
        .map(|&t| Case {
            ba: vec![],
            bb: vec![],
            mkn: (3, k, 2),
            t,
        })
        .collect();
    run_cases(&cases, 1e-5);
}

#[test]
fn integer_products_transposed() {
    let (m, k, n) = (5, 7, 3);
    let va: Vec<i32> = (0..m * k).map(|i| (i as i32 * 7) % 11 - 5).collect();
    let vb: Vec<i32> = (0..k * n).map(|i| (i as i32 * 5) % 13 - 6).collect();
    let mut want = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|kk| va[i * k + kk] * vb[kk * n + j]).sum();
        }
    }
    let t_of = |x: &[i32], r: usize, c: usize| {
        let mut o = vec![0; x.len()];
        for i in 0..r {
            for j in 0..c {
                o[j * r + i] = x[i * c + j];
            }
        }
        o
    };
    let mut g = Graph::new();
    let at = g
        .constant(HostTensor::new(vec![k, m], t_of(&va, m, k)).unwrap())
        .unwrap();
    let bt = g
        .constant(HostTensor::new(vec![n, k], t_of(&vb, k, n)).unwrap())
        .unwrap();
    let a = g.transpose(at, &[1, 0]).unwrap();
    let b = g.transpose(bt, &[1, 0]).unwrap();
    let y = g.matmul(a, b).unwrap();
    let want = HostTensor::new(vec![m, n], want).unwrap();
    for d in devices() {
        matmuls_without_transposes(&g, d, &[y]);
        let got = session_on(&g, d).run(&[], &[y]).unwrap();
        assert_close(&format!("i32 on {d}"), &got[0], &want, 0.0, 0.0);
    }
}

#[test]
fn nan_and_infinities_propagate_through_transposed_reads() {
    // A = [[1, nan], [inf, 1], [2, 3]] stored transposed, B = [[1, 0], [0, 1]] stored
    // transposed: NaN · 0 and inf · 0 are NaN, so rows 0 and 1 of A @ B are [NaN, NaN] and
    // [inf, NaN], and of A @ [[0], [1]] NaN and NaN.
    let a_logical = [1.0, f32::NAN, f32::INFINITY, 1.0, 2.0, 3.0];
    let mut g = Graph::new();
    let a = operand(&mut g, &a_logical, &[], 3, 2, true);
    let b = operand(&mut g, &[1.0, 0.0, 0.0, 1.0], &[], 2, 2, true);
    let c = operand(&mut g, &[0.0, 1.0], &[], 2, 1, false);
    let y = g.matmul(a, b).unwrap();
    let z = g.matmul(a, c).unwrap();
    let want_y = HostTensor::new(
        vec![3, 2],
        vec![f32::NAN, f32::NAN, f32::INFINITY, f32::NAN, 2.0, 3.0],
    )
    .unwrap();
    let want_z = HostTensor::new(vec![3, 1], vec![f32::NAN, f32::NAN, 3.0]).unwrap();
    for d in devices() {
        matmuls_without_transposes(&g, d, &[y, z]);
        let got = session_on(&g, d).run(&[], &[y, z]).unwrap();
        assert_close(&format!("nan/inf y on {d}"), &got[0], &want_y, 0.0, 0.0);
        assert_close(&format!("nan/inf z on {d}"), &got[1], &want_z, 0.0, 0.0);
    }
}

#[test]
fn a_transpose_also_fetched_still_runs_once_and_is_read_in_place() {
    let mut g = Graph::new();
    let va = data(12, 1);
    let x = g
        .constant(HostTensor::new(vec![4, 3], va.clone()).unwrap())
        .unwrap();
    let xt = g.transpose(x, &[1, 0]).unwrap();
    let y = g.matmul(xt, x).unwrap();
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&[xt, y]).unwrap();
    let permutes = plan
        .steps
        .iter()
        .filter(|st| {
            matches!(
                st.kind,
                StepKind::Dispatch {
                    kernel: Kernel::Permute(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(permutes, 1, "the fetched transpose is still computed");
    let got = s.run(&[], &[xt, y]).unwrap();
    let want: Vec<f32> = reference(&swap_last(&va, 1, 4, 3), &[], &va, &[], (3, 4, 3))
        .iter()
        .map(|&x| x as f32)
        .collect();
    assert_close(
        "xᵀx",
        &got[1],
        &HostTensor::new(vec![3, 3], want).unwrap(),
        0.0,
        1e-6,
    );
}

#[test]
fn matmul_gradients_launch_no_transpose_kernel() {
    // An MLP layer pair's loss: both weight gradients (xᵀ·dy) and the input gradient
    // (dy·Wᵀ) read their transposed operands in place.
    for d in devices() {
        let mut g = Graph::new();
        let x = g.placeholder("x", vec![8, 12], DType::F32).unwrap();
        let w1 = g
            .constant(HostTensor::new(vec![12, 16], data(192, 3)).unwrap())
            .unwrap();
        let w2 = g
            .constant(HostTensor::new(vec![16, 4], data(64, 4)).unwrap())
            .unwrap();
        let h = g.matmul(x, w1).unwrap();
        let y = g.matmul(h, w2).unwrap();
        let loss = g.sum(y, [0, 1], false).unwrap();
        let grads = g.gradients(loss, &[x, w1, w2]).unwrap();
        let fetches: Vec<Tensor> = grads.into_iter().map(|t| t.unwrap()).collect();
        let mut s = session_on(&g, d);
        let plan = s.plan(&fetches).unwrap();
        let mut transposed = 0;
        for st in &plan.steps {
            if let StepKind::Dispatch { kernel, .. } = &st.kind {
                assert!(
                    !matches!(kernel, Kernel::Permute(_)),
                    "{d}: {}",
                    kernel.describe()
                );
                if let Kernel::MatMul(k) = kernel {
                    transposed += k.transposed.iter().filter(|&&t| t).count();
                }
            }
        }
        assert!(
            transposed >= 3,
            "{d}: {transposed} operands read transposed"
        );
        // d(sum(x W1 W2))/dx = 1 · (W1 W2)ᵀ rows: every row of dx is the row sums of W1 W2.
        let xv = HostTensor::new(vec![8, 12], data(96, 5)).unwrap();
        let got = s.run(&[(x, xv)], &fetches).unwrap();
        let (w1v, w2v) = (data(192, 3), data(64, 4));
        let mut want = [0f64; 12];
        for (i, w) in want.iter_mut().enumerate() {
            for j in 0..16 {
                let row: f64 = (0..4).map(|c| w2v[j * 4 + c] as f64).sum();
                *w += w1v[i * 16 + j] as f64 * row;
            }
        }
        let want: Vec<f32> = (0..8)
            .flat_map(|_| want.iter().map(|&x| x as f32))
            .collect();
        assert_close(
            &format!("dx on {d}"),
            &got[0],
            &HostTensor::new(vec![8, 12], want).unwrap(),
            1e-6,
            1e-5,
        );
    }
}

#[test]
fn transposed_wgsl_variants_validate() {
    for dtype in [DType::F32, DType::F16, DType::I32] {
        for (a, b, out) in [
            (vec![17, 5], vec![5, 3], vec![17, 3]),
            (vec![16, 32], vec![32, 32], vec![16, 32]),
            (vec![64, 64], vec![64, 128], vec![64, 128]),
            (vec![2, 12, 8], vec![8, 16], vec![2, 12, 16]),
            (vec![32, 64], vec![64, 32], vec![32, 32]),
        ] {
            for t in BOTH_WAYS {
                let k = MatMulKernel {
                    a: Shape::new(a.clone()),
                    b: Shape::new(b.clone()),
                    out: Shape::new(out.clone()),
                    dtype,
                    block: None,
                    tiled: false,
                    epilogue: None,
                    k_chunk: None,
                    transposed: t,
                };
                common::wgsl::check(&Kernel::MatMul(k.clone()));
                for software in [false, true] {
                    for gl in [false, true] {
                        let blocked = k.blocked_for(&AdapterKind { software, gl });
                        common::wgsl::check(&Kernel::MatMul(blocked));
                    }
                }
                let (first, _) = MatMulKernel {
                    k_chunk: Some(16),
                    ..k.clone()
                }
                .passes();
                common::wgsl::check(&Kernel::MatMul(first));
            }
        }
    }
}
