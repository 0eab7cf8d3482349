//! cpu:0's fast reductions and convolutions: every reduction against float64 (or exact
//! integer) references computed here and, bit for bit, against the scalar reference kernels
//! (`reference`, which fold in the WGSL kernels' order) at the sizes where the
//! parallel split, the strategies and the partial passes change; accuracy past 2^24 terms;
//! NaN, infinities, integer wrap-around, arg ties and f16. Convolutions (im2col + sgemm)
//! against a float64 direct convolution over random shapes, strides, paddings, dilations,
//! groups and channel counts, with the fused bias/ReLU epilogue; pooling against its
//! reference.

use crate::common;

use wgflow::ops::{
    Conv2dKernel, CpuIn, Pass, PoolKernel, PoolKind, ReduceKernel, ReduceOp, Window,
};
use wgflow::{f16, Axes, Conv2dOptions, DType, Device, Graph, HostTensor, Shape};

/// xorshift32 values in [-1, 1) with three decimals (so sums are exact in f64).
pub(crate) fn det(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// For each kept position (row-major), the input indices it folds, in row-major order of
/// the reduced axes.
fn groups(dims: &[usize], axes: &[usize]) -> Vec<Vec<usize>> {
    let kept: Vec<usize> = (0..dims.len()).filter(|a| !axes.contains(a)).collect();
    let n_out: usize = kept.iter().map(|&a| dims[a]).product();
    let mut out = vec![Vec::new(); n_out];
    let total: usize = dims.iter().product();
    // Visit inputs in the order (kept index, reduced index) by sorting on that key.
    let mut keyed: Vec<(usize, usize, usize)> = Vec::with_capacity(total);
    let mut idx = vec![0usize; dims.len()];
    for i in 0..total {
        let (mut o, mut k) = (0, 0);
        for &a in &kept {
            o = o * dims[a] + idx[a];
        }
        for &a in axes {
            k = k * dims[a] + idx[a];
        }
        keyed.push((o, k, i));
        for a in (0..dims.len()).rev() {
            idx[a] += 1;
            if idx[a] < dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    keyed.sort_unstable();
    for (o, _, i) in keyed {
        out[o].push(i);
    }
    out
}

fn kernel(op: ReduceOp, dims: &[usize], axes: &[usize], dtype: DType) -> ReduceKernel {
    let out: Vec<usize> = (0..dims.len())
        .filter(|a| !axes.contains(a))
        .map(|a| dims[a])
        .collect();
    ReduceKernel {
        op,
        in_shape: Shape(dims.to_vec()),
        dtype,
        axes: axes.to_vec(),
        out_shape: Shape(out),
        epilogue: None,
        prologue: None,
        pass: Pass::Whole,
    }
}

/// Runs the kernels `op` lowers to (partial passes included) on `words`, fast and reference,
/// asserting every pass agrees bit for bit; returns the final words.
fn chain(op: ReduceOp, dims: &[usize], axes: &[usize], dtype: DType, words: &[u32]) -> Vec<u32> {
    let mut prev = words.to_vec();
    for p in kernel(op, dims, axes, dtype).passes() {
        let ins: Vec<&[u32]> = match p.pass {
            Pass::ArgOfPartials { .. } => vec![words, &prev],
            _ => vec![&prev],
        };
        let want = p.reference(&ins);
        let mut got = vec![0xdead_beef; p.out_shape.numel()];
        let cpu_in: Vec<CpuIn<'_>> = ins.iter().map(|w| CpuIn::Words(w)).collect();
        p.run_cpu_into(&cpu_in, &mut got).unwrap();
        assert_eq!(got.len(), want.len());
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{} over {axes:?} of {dtype} {dims:?} ({:?}, {:?}): output {i} is {:#x}, the reference {:#x}",
                op.name(),
                p.pass,
                p.strategy(),
                got[i],
                want[i]
            );
        }
        prev = got;
    }
    prev
}

/// Every nonempty subset of `0..rank`.
fn subsets(rank: usize) -> Vec<Vec<usize>> {
    (1..1u32 << rank)
        .map(|m| (0..rank).filter(|&a| m >> a & 1 == 1).collect())
        .collect()
}

/// Checks the f32 results of `op` over `axes` against float64 of `x`.
fn check_f32(op: ReduceOp, dims: &[usize], axes: &[usize], x: &[f32], got: &[u32]) {
    let what = format!("{} over {axes:?} of f32 {dims:?}", op.name());
    for (o, members) in groups(dims, axes).iter().enumerate() {
        let vals: Vec<f64> = members.iter().map(|&i| x[i] as f64).collect();
        let g = got[o];
        let gf = f32::from_bits(g) as f64;
        let abs: f64 = vals.iter().map(|v| v.abs()).sum();
        let n = vals.len() as f64;
        // Blocked sums: the error stays near (64 + n / 64 + log n) eps * sum |x|.
        let tol = (80.0 + n / 32.0) * f32::EPSILON as f64 * abs + 1e-30;
        let first_best = |better: &dyn Fn(f64, f64) -> bool| {
            let mut at = 0;
            for (i, &v) in vals.iter().enumerate() {
                if better(v, vals[at]) {
                    at = i;
                }
            }
            at as u32
        };
        match op {
            ReduceOp::Sum => {
                let want: f64 = vals.iter().sum();
                assert!((gf - want).abs() <= tol, "{what}[{o}]: {gf} vs {want}");
            }
            ReduceOp::Mean => {
                let want = vals.iter().sum::<f64>() / n;
                assert!((gf - want).abs() <= tol / n, "{what}[{o}]: {gf} vs {want}");
            }
            ReduceOp::Prod => {
                let want: f64 = vals.iter().product();
                let rel = 4.0 * n * f32::EPSILON as f64;
                assert!(
                    (gf - want).abs() <= rel * want.abs() + 1e-37,
                    "{what}[{o}]: {gf} vs {want}"
                );
            }
            ReduceOp::Max => {
                let want = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(gf, want, "{what}[{o}]");
            }
            ReduceOp::Min => {
                let want = vals.iter().cloned().fold(f64::INFINITY, f64::min);
                assert_eq!(gf, want, "{what}[{o}]");
            }
            ReduceOp::ArgMax => assert_eq!(g, first_best(&|v, b| v > b), "{what}[{o}]"),
            ReduceOp::ArgMin => assert_eq!(g, first_best(&|v, b| v < b), "{what}[{o}]"),
            ReduceOp::All => assert_eq!(g, vals.iter().all(|&v| v != 0.0) as u32, "{what}[{o}]"),
            ReduceOp::Any => assert_eq!(g, vals.iter().any(|&v| v != 0.0) as u32, "{what}[{o}]"),
        }
    }
}

/// Checks the i32 results of `op` against exact (wrapping) integer folds of `x`.
fn check_i32(op: ReduceOp, dims: &[usize], axes: &[usize], x: &[i32], got: &[u32]) {
    let what = format!("{} over {axes:?} of i32 {dims:?}", op.name());
    for (o, members) in groups(dims, axes).iter().enumerate() {
        let vals: Vec<i32> = members.iter().map(|&i| x[i]).collect();
        let n = vals.len() as i64;
        let sum = vals.iter().map(|&v| v as i64).sum::<i64>();
        let want: i32 = match op {
            ReduceOp::Sum => sum as i32,
            // TensorFlow's rule: the (wrapped) sum divided with truncation.
            ReduceOp::Mean => (sum as i32).wrapping_div(n as i32),
            ReduceOp::Prod => vals.iter().fold(1i32, |a, &v| a.wrapping_mul(v)),
            ReduceOp::Max => *vals.iter().max().unwrap(),
            ReduceOp::Min => *vals.iter().min().unwrap(),
            ReduceOp::ArgMax => vals
                .iter()
                .position(|v| v == vals.iter().max().unwrap())
                .unwrap() as i32,
            ReduceOp::ArgMin => vals
                .iter()
                .position(|v| v == vals.iter().min().unwrap())
                .unwrap() as i32,
            ReduceOp::All => vals.iter().all(|&v| v != 0) as i32,
            ReduceOp::Any => vals.iter().any(|&v| v != 0) as i32,
        };
        assert_eq!(got[o] as i32, want, "{what}[{o}]");
    }
}

/// Every op over every axis subset of rank-3 and rank-4 shapes (odd sizes, vec4 rows, size 1
/// axes), f32 against float64 and i32 exactly, each kernel bit for bit against the reference.
#[test]
fn every_op_over_every_axis_set_of_rank_3_and_4() {
    for dims in [
        vec![3, 5, 7],
        vec![2, 3, 4, 8],
        vec![4, 1, 6, 5],
        vec![1, 9, 1, 12],
    ] {
        let n: usize = dims.iter().product();
        let x = det(n, n as u32);
        // Products of many terms stay in range near 1; logical ops see zeros.
        let near_one: Vec<f32> = x.iter().map(|v| 1.0 + v / 8.0).collect();
        let with_zeros: Vec<f32> = x.iter().map(|&v| if v < -0.5 { 0.0 } else { v }).collect();
        let ints: Vec<i32> = x.iter().map(|v| (v * 1000.0) as i32 * 2_000_000).collect();
        for axes in subsets(dims.len()) {
            for op in ReduceOp::ALL {
                let data = match op {
                    ReduceOp::Prod => &near_one,
                    ReduceOp::All | ReduceOp::Any => &with_zeros,
                    _ => &x,
                };
                let words: Vec<u32> = data.iter().map(|v| v.to_bits()).collect();
                let got = chain(op, &dims, &axes, DType::F32, &words);
                check_f32(op, &dims, &axes, data, &got);
                let iw: Vec<u32> = ints.iter().map(|&v| v as u32).collect();
                let got = chain(op, &dims, &axes, DType::I32, &iw);
                check_i32(op, &dims, &axes, &ints, &got);
                chain(op, &dims, &axes, DType::U32, &iw);
            }
        }
    }
}

/// The fast kernel against the reference, bit for bit, at the sizes where a strategy, the
/// partial passes or the parallel split change: rows of 4095..8193 (vec4 and tree, split or
/// not), 63..65 rows (the tree's limit), outputs around the parallel threshold, column
/// layouts with tiles and chunked partial sums, middle axes, and empty and one-element ones.
#[test]
fn fast_kernels_fold_exactly_like_the_reference_at_every_boundary() {
    let shapes: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![0, 5], vec![1]),
        (vec![5, 0], vec![1]),
        (vec![1], vec![0]),
        (vec![1, 1], vec![0, 1]),
        (vec![3, 4095], vec![1]),
        (vec![3, 4096], vec![1]),
        (vec![64, 4100], vec![1]),
        (vec![65, 4100], vec![1]),
        (vec![2, 8192], vec![1]),
        (vec![2, 8193], vec![1]),
        (vec![1, 40_000], vec![1]),
        (vec![70, 8196], vec![1]),
        (vec![4095, 16], vec![1]),
        (vec![4097, 16], vec![1]),
        (vec![333, 7], vec![1]),
        (vec![8193, 3], vec![0]),
        (vec![4097, 130], vec![0]),
        (vec![3, 9001, 5], vec![1]),
        (vec![3, 9001, 5], vec![0, 2]),
        (vec![5, 3, 2, 7], vec![1, 2]),
        (vec![2, 70, 3, 129], vec![0, 2]),
    ];
    for (dims, axes) in shapes {
        let n: usize = dims.iter().product();
        let x = det(n, 7 + n as u32);
        let near_one: Vec<u32> = x.iter().map(|v| (1.0 + v / 64.0f32).to_bits()).collect();
        let words: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
        let ints: Vec<u32> = x.iter().map(|v| (v * 1e6) as i32 as u32).collect();
        let halves: Vec<u32> = x
            .iter()
            .map(|&v| f16::from_f32(v).to_bits() as u32)
            .collect();
        let r: usize = axes.iter().map(|&a| dims[a]).product();
        for op in ReduceOp::ALL {
            let no_identity = matches!(
                op,
                ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
            );
            if no_identity && r == 0 {
                continue;
            }
            let data = if op == ReduceOp::Prod {
                &near_one
            } else {
                &words
            };
            let got = chain(op, &dims, &axes, DType::F32, data);
            if n > 0 && n < 200_000 {
                let xs: Vec<f32> = data.iter().map(|&w| f32::from_bits(w)).collect();
                check_f32(op, &dims, &axes, &xs, &got);
            }
            chain(op, &dims, &axes, DType::I32, &ints);
            chain(op, &dims, &axes, DType::U32, &ints);
            chain(op, &dims, &axes, DType::F16, &halves);
        }
    }
}

/// A session on cpu:0 (fusion on, constant folding off).
fn cpu(g: &Graph) -> wgflow::Session {
    common::session_on(g, Device::Cpu)
}

/// 2^24 + 3 terms of 0.1 in one reduction: a naive f32 running sum stalls far below the
/// true value; the blocked, chunked sum stays within 2e-6 of float64.
#[test]
fn a_sum_of_2_pow_24_plus_3_terms_is_accurate() {
    let n = (1 << 24) + 3;
    let x = vec![0.1f32; n];
    let naive = x.iter().fold(0f32, |a, &v| a + v) as f64;
    let want = n as f64 * 0.1f32 as f64;
    assert!(
        (naive - want).abs() > 0.05 * want,
        "the case must defeat a naive sum ({naive} vs {want})"
    );
    let mut g = Graph::new();
    let t = g.constant(HostTensor::new([n], x).unwrap()).unwrap();
    let s = g.sum(t, Axes::All, false).unwrap();
    let m = g.mean(t, Axes::All, false).unwrap();
    let out = cpu(&g).run(&[], &[s, m]).unwrap();
    let got = out[0].item::<f32>().unwrap() as f64;
    assert!((got - want).abs() <= 2e-6 * want, "sum {got} vs {want}");
    let mean = out[1].item::<f32>().unwrap() as f64;
    assert!((mean - 0.1f32 as f64).abs() <= 2e-6 * 0.1, "mean {mean}");
}

/// NaN and infinities propagate in every strategy: vec4 rows, tree rows, short odd rows,
/// columns; argmax/argmin return the first NaN.
#[test]
fn nan_and_infinities_propagate_in_every_layout() {
    for (dims, axis) in [
        (vec![65usize, 4096usize], 1usize),
        (vec![3, 10_000], 1),
        (vec![9, 7], 1),
        (vec![4097, 3], 0),
    ] {
        let n = dims[0] * dims[1];
        let mut x = det(n, 3);
        let r = dims[axis];
        // Position k of output o along the reduced axis.
        let at = |o: usize, k: usize| {
            if axis == 1 {
                o * dims[1] + k
            } else {
                k * dims[1] + o
            }
        };
        let (nan_at, inf_at) = (r / 2, r - 1);
        x[at(0, nan_at)] = f32::NAN;
        x[at(0, nan_at + 1)] = f32::NAN;
        x[at(1, inf_at)] = f32::INFINITY;
        x[at(1, 0)] = f32::NEG_INFINITY;
        x[at(2, 1)] = f32::INFINITY;
        let mut g = Graph::new();
        let t = g
            .constant(HostTensor::new(dims.clone(), x).unwrap())
            .unwrap();
        let a = axis as isize;
        let fetch = [
            g.sum(t, [a], false).unwrap(),
            g.max(t, [a], false).unwrap(),
            g.min(t, [a], false).unwrap(),
            g.argmax(t, Some(a), false).unwrap(),
            g.argmin(t, Some(a), false).unwrap(),
            g.prod(t, [a], false).unwrap(),
        ];
        let out = cpu(&g).run(&[], &fetch).unwrap();
        let what = format!("{dims:?} over axis {axis}");
        let v = |i: usize| out[i].to_f32().unwrap();
        let idx = |i: usize| out[i].to_vec::<i32>().unwrap();
        for i in [0, 1, 2, 5] {
            assert!(
                v(i)[0].is_nan(),
                "{what}: fetch {i} of the NaN row is {}",
                v(i)[0]
            );
        }
        assert_eq!(
            idx(3)[0],
            nan_at as i32,
            "{what}: argmax finds the first NaN"
        );
        assert_eq!(
            idx(4)[0],
            nan_at as i32,
            "{what}: argmin finds the first NaN"
        );
        assert!(v(0)[1].is_nan(), "{what}: inf + -inf is NaN");
        assert_eq!(v(1)[1], f32::INFINITY, "{what}");
        assert_eq!(v(2)[1], f32::NEG_INFINITY, "{what}");
        assert_eq!(idx(3)[1], inf_at as i32, "{what}");
        assert_eq!(idx(4)[1], 0, "{what}");
        assert_eq!(v(0)[2], f32::INFINITY, "{what}: a sum with +inf");
        assert_eq!(v(1)[2], f32::INFINITY, "{what}");
    }
}

/// i32 and u32 sums and products wrap around (two's complement), in short and long rows and
/// in columns.
#[test]
fn integer_sums_and_products_wrap() {
    for (dims, axis) in [
        (vec![3usize, 5usize], 1usize),
        (vec![4, 70_001], 1),
        (vec![9000, 3], 0),
    ] {
        let n = dims[0] * dims[1];
        let x: Vec<i32> = (0..n).map(|i| i32::MAX - (i % 7) as i32).collect();
        let mut g = Graph::new();
        let t = g
            .constant(HostTensor::new(dims.clone(), x.clone()).unwrap())
            .unwrap();
        let u: Vec<u32> = x.iter().map(|&v| v as u32 * 2 + 1).collect();
        let tu = g
            .constant(HostTensor::new(dims.clone(), u.clone()).unwrap())
            .unwrap();
        let a = axis as isize;
        let fetch = [
            g.sum(t, [a], false).unwrap(),
            g.prod(t, [a], false).unwrap(),
            g.sum(tu, [a], false).unwrap(),
            g.max(tu, [a], false).unwrap(),
        ];
        let out = cpu(&g).run(&[], &fetch).unwrap();
        let words = |t: &HostTensor| -> Vec<u32> {
            t.to_vec::<i32>()
                .unwrap()
                .iter()
                .map(|&v| v as u32)
                .collect()
        };
        check_i32(ReduceOp::Sum, &dims, &[axis], &x, &words(&out[0]));
        check_i32(ReduceOp::Prod, &dims, &[axis], &x, &words(&out[1]));
        for (o, m) in groups(&dims, &[axis]).iter().enumerate() {
            let sum = m.iter().fold(0u32, |a, &i| a.wrapping_add(u[i]));
            let max = m.iter().map(|&i| u[i]).max().unwrap();
            assert_eq!(
                out[2].to_vec::<u32>().unwrap()[o],
                sum,
                "u32 sum {dims:?}[{o}]"
            );
            assert_eq!(
                out[3].to_vec::<u32>().unwrap()[o],
                max,
                "u32 max {dims:?}[{o}]"
            );
        }
        // The wrap is real: every exact sum is far outside i32.
        let exact: i64 = groups(&dims, &[axis])[0].iter().map(|&i| x[i] as i64).sum();
        assert!(exact > i32::MAX as i64, "{dims:?}");
    }
}

/// Ties go to the first index in rows and columns, within a chunk and across chunks.
#[test]
fn arg_ties_pick_the_first_index() {
    let mut x = vec![0.0f32; 4 * 9000];
    // Row 0: ties at 5 and 8000 (another chunk of a split reduction); row 1: all equal.
    x[5] = 2.0;
    x[8000] = 2.0;
    x[9000..18_000].fill(1.0);
    // Row 2: minimum ties at 7 and 8; row 3: ties at the last two positions.
    x[18_000 + 7] = -3.0;
    x[18_000 + 8] = -3.0;
    x[27_000 + 8998] = 5.0;
    x[27_000 + 8999] = 5.0;
    let mut g = Graph::new();
    let t = g.constant(HostTensor::new([4, 9000], x).unwrap()).unwrap();
    let tt = g.transpose(t, &[1, 0]).unwrap();
    let fetch = [
        g.argmax(t, Some(1), false).unwrap(),
        g.argmin(t, Some(1), false).unwrap(),
        g.argmax(tt, Some(0), false).unwrap(),
    ];
    let out = cpu(&g).run(&[], &fetch).unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![5, 0, 0, 8998]);
    assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 0, 7, 0]);
    assert_eq!(out[2].to_vec::<i32>().unwrap(), vec![5, 0, 0, 8998]);
}

/// f16 reductions accumulate in f32 and round once: 5000 ones sum to 5000 (an f16 running
/// sum stalls at 2048), and sums, means and maxima match float64 rounded to f16.
#[test]
fn f16_reductions_accumulate_in_f32_and_round_once() {
    let (rows, len) = (5usize, 5000usize);
    let mut x: Vec<f16> = (0..rows * len)
        .map(|i| f16::from_f32(det(1, i as u32 + 1)[0]))
        .collect();
    x[..len].fill(f16::ONE);
    let mut g = Graph::new();
    let t = g
        .constant(HostTensor::new([rows, len], x.clone()).unwrap())
        .unwrap();
    let fetch = [
        g.sum(t, [1], false).unwrap(),
        g.mean(t, [0], false).unwrap(),
        g.max(t, [1], false).unwrap(),
    ];
    let out = cpu(&g).run(&[], &fetch).unwrap();
    let f = |i: usize| out[i].to_vec::<f16>().unwrap();
    assert_eq!(f(0)[0], f16::from_f32(5000.0));
    for r in 0..rows {
        let row = &x[r * len..(r + 1) * len];
        let sum: f64 = row.iter().map(|v| v.to_f64()).sum();
        let got = f(0)[r].to_f64();
        // One rounding to f16 (half an ulp) plus the f32 accumulation's tiny error.
        assert!(
            (got - sum).abs() <= sum.abs() * 2f64.powi(-11) + 1e-3,
            "row {r}: {got} vs {sum}"
        );
        let max = row.iter().map(|v| v.to_f32()).fold(f32::MIN, f32::max);
        assert_eq!(f(2)[r].to_f32(), max);
    }
    for c in [0, 1, 4999] {
        let mean: f64 = (0..rows).map(|r| x[r * len + c].to_f64()).sum::<f64>() / rows as f64;
        assert_eq!(f(1)[c], f16::from_f64(mean), "column {c}");
    }
}

/// A fused prologue (`sum(x * x)`) and epilogue (`2 * max + 1`) still apply on cpu:0.
#[test]
fn prologues_and_epilogues_still_apply() {
    let (rows, len) = (70usize, 4100usize);
    let x = det(rows * len, 11);
    let mut g = Graph::new();
    let t = g
        .constant(HostTensor::new([rows, len], x.clone()).unwrap())
        .unwrap();
    let sq = g.mul(t, t).unwrap();
    let ss = g.sum(sq, [1], false).unwrap();
    let mx = g.max(t, [0], false).unwrap();
    let two = g.constant(2.0f32).unwrap();
    let one = g.constant(1.0f32).unwrap();
    let y = g.mul(mx, two).unwrap();
    let y = g.add(y, one).unwrap();
    let out = cpu(&g).run(&[], &[ss, y]).unwrap();
    let ss_got = out[0].to_f32().unwrap();
    for r in 0..rows {
        let want: f64 = x[r * len..(r + 1) * len]
            .iter()
            .map(|&v| v as f64 * v as f64)
            .sum();
        assert!((ss_got[r] as f64 - want).abs() <= 1e-5 * want, "row {r}");
    }
    let y_got = out[1].to_f32().unwrap();
    for c in 0..len {
        let m = (0..rows).map(|r| x[r * len + c]).fold(f32::MIN, f32::max);
        assert_eq!(y_got[c], m * 2.0 + 1.0, "column {c}");
    }
}

/// A fused prologue's rows are evaluated as they are folded (never stored whole), in the
/// chunked passes of a full reduction and in row folds, against float64: a dynamic
/// quantizer's min and max of `relu(x * s + b)`.
#[test]
fn prologues_fold_their_rows_as_they_are_evaluated() {
    let shape = [8usize, 32, 1030];
    let n: usize = shape.iter().product();
    let x = det(n, 5);
    let mut g = Graph::new();
    let t = g
        .constant(HostTensor::new(shape.to_vec(), x.clone()).unwrap())
        .unwrap();
    let s = g.constant(0.5f32).unwrap();
    let b = g.constant(-0.125f32).unwrap();
    let y = g.mul(t, s).unwrap();
    let y = g.add(y, b).unwrap();
    let y = g.relu(y).unwrap();
    let fetch = [
        g.min(y, [0, 1, 2], false).unwrap(),
        g.max(y, [0, 1, 2], false).unwrap(),
        g.sum(y, [0, 1, 2], false).unwrap(),
        g.max(y, [2], false).unwrap(),
        g.mean(y, [1, 2], false).unwrap(),
    ];
    let out = cpu(&g).run(&[], &fetch).unwrap();
    let v: Vec<f64> = x
        .iter()
        .map(|&x| (x as f64 * 0.5 - 0.125).max(0.0))
        .collect();
    let got = |i: usize| out[i].to_f32().unwrap();
    let close = |a: f32, w: f64, tol: f64, what: &str| {
        assert!(
            (a as f64 - w).abs() <= tol * w.abs().max(1e-3),
            "{what}: {a} against {w}"
        );
    };
    let fold = |xs: &[f64], f: fn(f64, f64) -> f64, init: f64| xs.iter().copied().fold(init, f);
    close(got(0)[0], fold(&v, f64::min, f64::MAX), 1e-6, "min");
    close(got(1)[0], fold(&v, f64::max, f64::MIN), 1e-6, "max");
    close(got(2)[0], v.iter().sum(), 1e-5, "sum");
    let row = shape[2];
    for (r, &m) in got(3).iter().enumerate() {
        close(
            m,
            fold(&v[r * row..(r + 1) * row], f64::max, f64::MIN),
            1e-6,
            "row max",
        );
    }
    let per = shape[1] * shape[2];
    for (i, &m) in got(4).iter().enumerate() {
        let want = v[i * per..(i + 1) * per].iter().sum::<f64>() / per as f64;
        close(m, want, 1e-5, "mean");
    }
}

/// Empty reductions and empty outputs on cpu:0: a sum over a zero-size axis is 0, a product
/// 1, and reducing a tensor with no kept positions gives an empty result.
#[test]
fn empty_reductions() {
    let mut g = Graph::new();
    let t = g
        .constant(HostTensor::new([3, 0], Vec::<f32>::new()).unwrap())
        .unwrap();
    let u = g
        .constant(HostTensor::new([0, 4], Vec::<f32>::new()).unwrap())
        .unwrap();
    let fetch = [
        g.sum(t, [1], false).unwrap(),
        g.prod(t, [1], false).unwrap(),
        g.sum(u, [1], false).unwrap(),
        g.max(u, [1], false).unwrap(),
    ];
    let out = cpu(&g).run(&[], &fetch).unwrap();
    assert_eq!(out[0].to_f32().unwrap(), vec![0.0; 3]);
    assert_eq!(out[1].to_f32().unwrap(), vec![1.0; 3]);
    assert!(out[2].to_f32().unwrap().is_empty());
    assert!(out[3].to_f32().unwrap().is_empty());
}

// ---------------------------------------------------------------- convolution and pooling

/// Float64 direct convolution (and the sum of |x·w| per output, for the tolerance) over
/// channels `c_lo..c_hi` of each group.
pub(crate) fn conv_f64(
    k: &Conv2dKernel,
    x: &[f32],
    w: &[f32],
    (c_lo, c_hi): (usize, usize),
) -> (Vec<f64>, Vec<f64>) {
    let d = |s: &Shape| -> [usize; 4] { [s.dims()[0], s.dims()[1], s.dims()[2], s.dims()[3]] };
    let ([n, c_all, h, wd], [o_all, cg, kh, kw], [_, _, oh, ow]) = (d(&k.x), d(&k.w), d(&k.out));
    let og = o_all / k.groups;
    let win = k.window;
    let (mut out, mut mag) = (Vec::new(), Vec::new());
    for b in 0..n {
        for o in 0..o_all {
            let g = o / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let (mut acc, mut m) = (0f64, 0f64);
                    for c in c_lo..c_hi.min(cg) {
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let iy = (oy * win.stride[0] + ki * win.dilation[0]) as isize
                                    - win.padding[0] as isize;
                                let ix = (ox * win.stride[1] + kj * win.dilation[1]) as isize
                                    - win.padding[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[((b * c_all + g * cg + c) * h + iy as usize) * wd
                                    + ix as usize] as f64;
                                let wv = w[((o * cg + c) * kh + ki) * kw + kj] as f64;
                                acc += xv * wv;
                                m += (xv * wv).abs();
                            }
                        }
                    }
                    out.push(acc);
                    mag.push(m);
                }
            }
        }
    }
    (out, mag)
}

/// Compares `got` to float64 within `(K + 2) * eps * Σ|x·w|` per output (K terms summed).
pub(crate) fn check_conv(what: &str, got: &[f32], want: &[f64], mag: &[f64], terms: usize) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &m)) in got.iter().zip(want).zip(mag).enumerate() {
        let tol = (terms as f64 + 2.0) * f32::EPSILON as f64 * m + 1e-30;
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}[{i}]: {g} vs float64 {w} (tolerance {tol:.2e})"
        );
    }
}

/// A convolution of `x` (`[n, c, h, w]`) to `o` channels in `groups` over `window`, with
/// no epilogue.
pub(crate) fn conv_kernel(x: [usize; 4], o: usize, groups: usize, window: Window) -> Conv2dKernel {
    let [n, c, h, wd] = x;
    let [oh, ow] = window.out_hw([h, wd]).unwrap();
    Conv2dKernel {
        x: Shape(x.to_vec()),
        w: Shape(vec![o, c / groups, window.kernel[0], window.kernel[1]]),
        window,
        groups,
        out: Shape(vec![n, o, oh, ow]),
        epilogue: None,
        c_chunk: None,
        pool: None,
    }
}

fn run_conv(k: &Conv2dKernel, x: &[f32], w: &[f32]) -> Vec<f32> {
    let (xw, ww): (Vec<u32>, Vec<u32>) = (
        x.iter().map(|v| v.to_bits()).collect(),
        w.iter().map(|v| v.to_bits()).collect(),
    );
    let mut out = vec![0xffff_ffff; k.out_shape().numel()];
    k.run_cpu_into(&[CpuIn::Words(&xw), CpuIn::Words(&ww)], &mut out)
        .unwrap();
    out.into_iter().map(f32::from_bits).collect()
}

/// Random shapes × strides × paddings × dilations × groups × channel counts, including 1×1
/// kernels, kernels as large as the (padded) input, batch 1, depthwise and odd sizes, against
/// float64.
#[test]
fn convolutions_match_float64_over_random_geometries() {
    let mut s = 12345u32;
    let mut pick = |n: usize| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as usize % n
    };
    let mut tried = 0;
    while tried < 150 {
        let mut groups = [1, 1, 2, 3][pick(4)];
        let mut cg = [1, 2, 3, 5][pick(4)];
        let mut og = [1, 2, 4][pick(3)];
        let (mut n, h, wd) = ([1, 2, 3][pick(3)], 1 + pick(11), 1 + pick(11));
        if pick(4) == 0 {
            // One image through many groups: the group-parallel path, and depthwise taps
            // when each group has one input and one output channel.
            (groups, n) = ([4, 8, 16][pick(3)], 1);
            if pick(2) == 0 {
                (cg, og) = (1, 1);
            }
        }
        let stride = [1 + pick(3), 1 + pick(3)];
        let dilation = [1 + pick(2), 1 + pick(2)];
        let padding = [pick(3), pick(3)];
        let mut kernel = [[1, 2, 3][pick(3)], [1, 2, 3][pick(3)]];
        if pick(6) == 0 {
            // As large as the input: one output pixel per image (with no padding).
            kernel = [h, wd];
        }
        let window = Window {
            kernel,
            stride,
            padding,
            dilation,
        };
        let Ok([oh, ow]) = window.out_hw([h, wd]) else {
            continue;
        };
        tried += 1;
        let (c_all, o_all) = (groups * cg, groups * og);
        let k = Conv2dKernel {
            x: Shape(vec![n, c_all, h, wd]),
            w: Shape(vec![o_all, cg, kernel[0], kernel[1]]),
            window,
            groups,
            out: Shape(vec![n, o_all, oh, ow]),
            epilogue: None,
            c_chunk: None,
            pool: None,
        };
        let x = det(n * c_all * h * wd, tried as u32);
        let w = det(o_all * cg * kernel[0] * kernel[1], 1000 + tried as u32);
        let (want, mag) = conv_f64(&k, &x, &w, (0, cg));
        let terms = cg * kernel[0] * kernel[1];
        let what = format!("conv {k:?}");
        check_conv(&what, &run_conv(&k, &x, &w), &want, &mag, terms);
        // The scalar reference agrees with float64 too (it is what GPUs mirror).
        let xw: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
        let ww: Vec<u32> = w.iter().map(|v| v.to_bits()).collect();
        let r: Vec<f32> = k
            .reference(&[&xw, &ww])
            .into_iter()
            .map(f32::from_bits)
            .collect();
        check_conv(&format!("reference {what}"), &r, &want, &mag, terms);
    }
}

/// (c, o, kernel, h, wd, stride, padding, dilation) of one convolution.
type Case = (
    usize,
    usize,
    [usize; 2],
    usize,
    usize,
    [usize; 2],
    [usize; 2],
    [usize; 2],
);

/// One image with many output pixels (a batch-1 network's early layers): tiles of output
/// columns in parallel, 1x1 stride-1 products read in place, against float64. Sizes reach
/// past a tile (64K im2col floats) and leave ragged last tiles, on any number of threads.
#[test]
fn one_image_column_and_row_tiles_match_float64() {
    let cases: [Case; 9] = [
        // (c, o, kernel, h, wd, stride, padding, dilation)
        (7, 5, [1, 1], 48, 47, [1, 1], [0, 0], [1, 1]),
        (3, 8, [3, 3], 40, 41, [1, 1], [1, 1], [1, 1]),
        (16, 4, [3, 3], 61, 50, [2, 2], [1, 1], [2, 2]),
        (3, 6, [7, 7], 96, 95, [2, 2], [3, 3], [1, 1]),
        (9, 3, [1, 1], 70, 66, [2, 2], [0, 0], [1, 1]),
        (40, 2, [3, 3], 45, 45, [1, 1], [1, 1], [1, 1]),
        // Few pixels, many output channels: row tiles (im2col once, or in place for 1x1).
        (64, 100, [3, 3], 7, 7, [1, 1], [1, 1], [1, 1]),
        (200, 72, [1, 1], 9, 8, [1, 1], [0, 0], [1, 1]),
        (50, 48, [3, 3], 15, 14, [2, 2], [1, 1], [1, 1]),
    ];
    for (i, (c, o, kernel, h, wd, stride, padding, dilation)) in cases.into_iter().enumerate() {
        let window = Window {
            kernel,
            stride,
            padding,
            dilation,
        };
        let [oh, ow] = window.out_hw([h, wd]).unwrap();
        let k = Conv2dKernel {
            x: Shape(vec![1, c, h, wd]),
            w: Shape(vec![o, c, kernel[0], kernel[1]]),
            window,
            groups: 1,
            out: Shape(vec![1, o, oh, ow]),
            epilogue: None,
            c_chunk: None,
            pool: None,
        };
        let x = det(c * h * wd, 40 + i as u32);
        let w = det(o * c * kernel[0] * kernel[1], 50 + i as u32);
        let (want, mag) = conv_f64(&k, &x, &w, (0, c));
        let terms = c * kernel[0] * kernel[1];
        check_conv(
            &format!("one image {k:?}"),
            &run_conv(&k, &x, &w),
            &want,
            &mag,
            terms,
        );
    }
}

/// Grouped and depthwise convolutions large enough for their parallel paths (group × column
/// tiles for one image; planes in parallel for depthwise, batched or not), with strides,
/// paddings and dilations that leave some column taps wholly in the padding.
#[test]
fn grouped_and_depthwise_parallel_paths_match_float64() {
    // (n, groups, cg, og, kernel, h, wd, stride, padding, dilation)
    type Grouped = (
        usize,
        usize,
        usize,
        usize,
        [usize; 2],
        usize,
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
    );
    let cases: [Grouped; 12] = [
        (1, 112, 1, 1, [3, 3], 56, 56, [2, 2], [1, 1], [1, 1]),
        // Depthwise on phase planes: odd sizes, stride 3, window sizes without their own
        // loop, padding wider than the stride, a window as large as the plane.
        (2, 24, 1, 1, [3, 3], 27, 31, [2, 2], [1, 1], [1, 1]),
        (1, 40, 1, 1, [5, 5], 23, 20, [2, 2], [2, 2], [1, 1]),
        (1, 9, 1, 1, [3, 3], 17, 16, [3, 3], [0, 0], [1, 1]),
        (1, 16, 1, 1, [7, 7], 7, 7, [1, 1], [3, 3], [1, 1]),
        (1, 8, 1, 1, [2, 2], 9, 12, [2, 2], [0, 0], [1, 1]),
        (1, 272, 1, 1, [3, 3], 14, 13, [1, 1], [1, 1], [1, 1]),
        (3, 40, 1, 1, [5, 3], 21, 19, [1, 2], [2, 4], [1, 2]),
        (2, 64, 1, 1, [3, 3], 30, 30, [1, 1], [0, 0], [3, 3]),
        (1, 4, 6, 28, [1, 1], 56, 56, [1, 1], [0, 0], [1, 1]),
        (1, 4, 34, 34, [1, 1], 28, 29, [1, 1], [0, 0], [1, 1]),
        (1, 3, 5, 7, [3, 3], 40, 33, [2, 1], [1, 1], [1, 1]),
    ];
    for (i, (n, groups, cg, og, kernel, h, wd, stride, padding, dilation)) in
        cases.into_iter().enumerate()
    {
        let window = Window {
            kernel,
            stride,
            padding,
            dilation,
        };
        let (c, o) = (groups * cg, groups * og);
        let k = conv_kernel([n, c, h, wd], o, groups, window);
        let x = det(n * c * h * wd, 70 + i as u32);
        let w = det(o * cg * kernel[0] * kernel[1], 80 + i as u32);
        let (want, mag) = conv_f64(&k, &x, &w, (0, cg));
        check_conv(
            &format!("grouped {k:?}"),
            &run_conv(&k, &x, &w),
            &want,
            &mag,
            cg * kernel[0] * kernel[1],
        );
    }
}

/// Convolutions with few taps per output (the direct phase-plane kernel on AVX2 CPUs):
/// output channels that are not a multiple of its 6-row tile, odd sizes, strides 1–3,
/// padding, batches, planes of several row bands, 256 taps (its limit) and 1x1 outputs,
/// against float64; and grouped layers like ShuffleNet's, which it leaves to im2col + GEMM
/// (twice as fast on them, measured).
#[test]
fn direct_convolutions_match_float64() {
    // (n, c, o, kernel, h, wd, stride, padding, groups)
    type Direct = (
        usize,
        usize,
        usize,
        [usize; 2],
        usize,
        usize,
        usize,
        usize,
        usize,
    );
    let cases: [Direct; 17] = [
        (1, 3, 64, [3, 3], 224, 224, 2, 0, 1),
        (1, 3, 24, [3, 3], 57, 61, 2, 1, 1),
        (2, 3, 13, [7, 7], 45, 38, 2, 3, 1),
        (1, 16, 7, [3, 3], 29, 30, 1, 1, 1),
        (3, 1, 5, [5, 5], 17, 19, 3, 2, 1),
        (1, 4, 11, [8, 8], 20, 20, 1, 0, 1),
        (1, 64, 6, [2, 2], 9, 8, 2, 0, 1),
        (1, 2, 1, [3, 3], 3, 3, 1, 0, 1),
        (1, 27, 17, [1, 1], 40, 41, 1, 0, 1),
        (1, 136, 136, [1, 1], 28, 28, 1, 0, 4),
        (2, 24, 112, [1, 1], 23, 21, 1, 0, 4),
        (1, 12, 21, [3, 3], 15, 16, 2, 1, 3),
        // More taps than one pass sums (128 on AVX-512): in place into the output (1x1),
        // and through partial sums (3x3), over two images.
        (1, 160, 19, [1, 1], 23, 25, 1, 0, 1),
        (2, 20, 9, [3, 3], 31, 30, 1, 1, 1),
        // Images whose phase planes (64 x 130 x 130 floats each) pass the 4M floats split
        // for one parallel loop: five images in two chunks.
        (5, 64, 16, [3, 3], 128, 128, 1, 1, 1),
        // A batch on few threads (a task per image, splitting its own planes), outputs
        // whose rows are not whole vectors, and channels past the last full block.
        (8, 8, 13, [3, 3], 10, 11, 1, 1, 1),
        (7, 5, 6, [3, 3], 16, 16, 2, 1, 1),
    ];
    for (i, (n, c, o, kernel, h, wd, stride, pad, groups)) in cases.into_iter().enumerate() {
        let window = Window {
            kernel,
            stride: [stride; 2],
            padding: [pad; 2],
            dilation: [1, 1],
        };
        let cg = c / groups;
        let k = conv_kernel([n, c, h, wd], o, groups, window);
        let x = det(n * c * h * wd, 90 + i as u32);
        let w = det(o * cg * kernel[0] * kernel[1], 100 + i as u32);
        let (want, mag) = conv_f64(&k, &x, &w, (0, cg));
        check_conv(
            &format!("direct {k:?}"),
            &run_conv(&k, &x, &w),
            &want,
            &mag,
            cg * kernel[0] * kernel[1],
        );
        // Both direct kernels themselves, wherever they apply (the dispatcher may prefer
        // the GEMM for this geometry on this CPU): on x86_64 with AVX2 (the AVX-512 one
        // with AVX-512F too), every ungrouped case.
        for wide in [false, true] {
            let forced = k.run_direct(&x, &w, wide);
            let runs = if wide { is_avx512() } else { is_avx2() };
            assert_eq!(
                forced.is_some(),
                runs && groups == 1,
                "direct {k:?} (wide: {wide}) applies"
            );
            if let Some(got) = forced {
                check_conv(
                    &format!("forced direct {k:?} (wide: {wide})"),
                    &got,
                    &want,
                    &mag,
                    cg * kernel[0] * kernel[1],
                );
            }
        }
    }
}

pub(crate) fn is_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_avx2() && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

pub(crate) fn is_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A plane with no columns (or rows) but padding: every output reads only padding, so a
/// convolution gives zeros and the phase-plane and direct kernels step aside without a
/// panic.
#[test]
fn empty_planes_with_padding_convolve_to_zeros() {
    for (dims, kernel, groups) in [
        ([1usize, 3usize, 2usize, 0usize], [1usize, 1usize], 1usize),
        ([1, 4, 0, 3], [3, 3], 4),
        ([2, 2, 0, 0], [2, 2], 1),
    ] {
        let window = Window {
            kernel,
            stride: [1, 1],
            padding: [1, 1],
            dilation: [1, 1],
        };
        let Ok([oh, ow]) = window.out_hw([dims[2], dims[3]]) else {
            continue;
        };
        let o = 4;
        let k = Conv2dKernel {
            x: Shape(dims.to_vec()),
            w: Shape(vec![o, dims[1] / groups, kernel[0], kernel[1]]),
            window,
            groups,
            out: Shape(vec![dims[0], o, oh, ow]),
            epilogue: None,
            c_chunk: None,
            pool: None,
        };
        let w = det(o * dims[1] / groups * kernel[0] * kernel[1], 7);
        let got = run_conv(&k, &[], &w);
        assert!(got.iter().all(|&v| v == 0.0), "{dims:?}: {got:?}");
    }
}

/// Images large enough that im2col is built in several pieces, and a kernel split into
/// channel chunks (`[chunks, N, O, OH, OW]` partial sums), against float64.
#[test]
fn blocked_columns_and_channel_chunks_match_float64() {
    let window = Window {
        kernel: [3, 3],
        stride: [1, 1],
        padding: [1, 1],
        dilation: [1, 1],
    };
    // 16 channels × 9 = 144 rows; 110×97 pixels need two pieces of columns.
    let (n, c, h, wd, o) = (2, 16, 110, 97, 3);
    let k = Conv2dKernel {
        x: Shape(vec![n, c, h, wd]),
        w: Shape(vec![o, c, 3, 3]),
        window,
        groups: 1,
        out: Shape(vec![n, o, h, wd]),
        epilogue: None,
        c_chunk: None,
        pool: None,
    };
    let x = det(n * c * h * wd, 5);
    let w = det(o * c * 9, 6);
    let (want, mag) = conv_f64(&k, &x, &w, (0, c));
    check_conv("large image", &run_conv(&k, &x, &w), &want, &mag, c * 9);
    // Channel chunks of 5 (the last one holds 1).
    let small = Conv2dKernel {
        x: Shape(vec![3, 16, 7, 5]),
        w: Shape(vec![4, 8, 3, 3]),
        groups: 2,
        out: Shape(vec![3, 4, 7, 5]),
        c_chunk: Some(3),
        pool: None,
        ..k
    };
    let x = det(3 * 16 * 35, 8);
    let w = det(4 * 8 * 9, 9);
    let got = run_conv(&small, &x, &w);
    assert_eq!(small.chunks(), 3);
    let per = small.out.numel();
    for ci in 0..3 {
        let (want, mag) = conv_f64(&small, &x, &w, (ci * 3, ci * 3 + 3));
        check_conv(
            &format!("chunk {ci}"),
            &got[ci * per..(ci + 1) * per],
            &want,
            &mag,
            27,
        );
    }
}

/// Through a session on cpu:0: conv2d + bias + ReLU (fused into the convolution's epilogue)
/// and a strided, dilated grouped conv, against float64.
#[test]
fn fused_bias_and_relu_still_apply() {
    let (n, c, h, wd, o) = (3, 4, 9, 7, 6);
    let x = det(n * c * h * wd, 21);
    let w = det(o * 2 * 3 * 3, 22);
    let bias = det(o, 23);
    let mut g = Graph::new();
    let tx = g
        .constant(HostTensor::new([n, c, h, wd], x.clone()).unwrap())
        .unwrap();
    let tw = g
        .constant(HostTensor::new([o, 2, 3, 3], w.clone()).unwrap())
        .unwrap();
    let tb = g
        .constant(HostTensor::new([o], bias.clone()).unwrap())
        .unwrap();
    let opts = Conv2dOptions {
        stride: [2, 1],
        padding: [1, 2],
        dilation: [1, 2],
        groups: 2,
    };
    let y = g.conv2d(tx, tw, Some(tb), opts).unwrap();
    let y = g.relu(y).unwrap();
    let out = cpu(&g).run(&[], &[y]).unwrap();
    let dims = out[0].shape().dims().to_vec();
    let k = Conv2dKernel {
        x: Shape(vec![n, c, h, wd]),
        w: Shape(vec![o, 2, 3, 3]),
        window: Window {
            kernel: [3, 3],
            stride: opts.stride,
            padding: opts.padding,
            dilation: opts.dilation,
        },
        groups: 2,
        out: Shape(dims.clone()),
        epilogue: None,
        c_chunk: None,
        pool: None,
    };
    let (conv, mag) = conv_f64(&k, &x, &w, (0, 2));
    let p = dims[2] * dims[3];
    let want: Vec<f64> = conv
        .iter()
        .enumerate()
        .map(|(i, &v)| (v + bias[(i / p) % o] as f64).max(0.0))
        .collect();
    let got = out[0].to_f32().unwrap();
    assert!(
        got.contains(&0.0) && got.iter().any(|&v| v > 0.0),
        "ReLU clips some outputs"
    );
    let mag: Vec<f64> = mag.iter().zip(&want).map(|(m, w)| m + w.abs()).collect();
    check_conv("conv + bias + relu", &got, &want, &mag, 18);
}

/// Max and average pooling on cpu:0 agree bit for bit with the scalar reference (NaN, -0.0,
/// padding, strides, planes past the parallel threshold).
#[test]
fn pooling_matches_the_reference() {
    for (dims, kernel, stride, padding) in [
        (
            [2usize, 3usize, 7usize, 9usize],
            [2usize, 2usize],
            [2usize, 2usize],
            [0usize, 0usize],
        ),
        ([1, 1, 5, 5], [3, 3], [1, 1], [1, 1]),
        ([4, 5, 33, 31], [3, 2], [2, 3], [1, 1]),
        ([1, 2, 1, 1], [1, 1], [1, 1], [0, 0]),
        ([64, 16, 8, 8], [2, 2], [2, 2], [0, 0]),
        // Unpadded 3x3 windows (the row-at-a-time path) at strides 1 and 2.
        ([2, 3, 29, 29], [3, 3], [1, 1], [0, 0]),
        ([1, 4, 30, 31], [3, 3], [2, 2], [0, 0]),
        // Phase-plane paths: padded max pools (-inf borders), odd sizes, stride 3, a window
        // size without its own loop. Dims with a last axis of 13 hold only ±0 and -1, so
        // ties decide most windows.
        ([2, 3, 57, 55], [3, 3], [2, 2], [1, 1]),
        ([1, 3, 28, 28], [3, 3], [1, 1], [1, 1]),
        ([1, 2, 11, 13], [3, 3], [2, 2], [1, 1]),
        ([1, 2, 15, 13], [2, 2], [2, 2], [0, 0]),
        ([1, 2, 12, 12], [3, 3], [3, 3], [0, 0]),
        ([1, 2, 9, 10], [7, 7], [1, 1], [0, 0]),
        ([1, 2, 10, 13], [5, 5], [2, 2], [2, 2]),
        // Rows of 16 maxima at a time (AVX-512, stride 2, windows of 3 and 2) and their
        // scalar tails; ±0 ties (`% 13` below) and NaN within the vector steps.
        ([1, 3, 9, 78], [3, 3], [2, 2], [0, 0]),
        ([1, 2, 7, 78], [3, 3], [2, 2], [1, 1]),
        ([1, 2, 6, 78], [2, 2], [2, 2], [0, 0]),
        ([1, 64, 111, 111], [3, 3], [2, 2], [0, 0]),
    ] {
        let n: usize = dims.iter().product();
        let mut x = if dims[3] == 13 || dims[3] == 78 {
            (0..n).map(|i| [0.0, -0.0, -1.0][i % 3]).collect()
        } else {
            det(n, 31)
        };
        x[0] = f32::NAN;
        if n > 3 {
            x[2] = -0.0;
            x[3] = -0.0;
        }
        if n > 400 {
            // Inside a plane, where windows overlap it from every side.
            x[n / 2 + 7] = f32::NAN;
            x[n / 3] = f32::INFINITY;
        }
        if dims[3] == 78 {
            // Inside the first vector step of a row, and in its scalar tail.
            x[78 + 9] = f32::NAN;
            x[2 * 78 + 75] = f32::NAN;
        }
        let words: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
        let window = Window {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
        };
        let [oh, ow] = window.out_hw([dims[2], dims[3]]).unwrap();
        for kind in [PoolKind::Max, PoolKind::Avg] {
            let k = PoolKernel {
                kind,
                x: Shape(dims.to_vec()),
                window,
                out: Shape(vec![dims[0], dims[1], oh, ow]),
            };
            let want = k.reference(&words);
            let mut got = vec![0; want.len()];
            k.run_cpu_into(&[CpuIn::Words(&words)], &mut got).unwrap();
            assert_eq!(got, want, "{kind:?} pooling of {dims:?}");
            assert!(f32::from_bits(got[0]).is_nan(), "{kind:?}: NaN propagates");
            // The path a CPU without AVX-512 runs, where the max pool goes by rows.
            if let Some(portable) = k.run_max_portable(&words) {
                assert_eq!(portable, want, "portable max pooling of {dims:?}");
            }
        }
    }
}

/// A fused epilogue (bias, residual, ReLU) is applied exactly once to every element on each
/// of cpu:0's convolution paths (direct, direct with few channels, depthwise, column tiles
/// grouped and not, row tiles, batched blocks), some of which apply it to each piece of the
/// output as it is written: against float64, with the residual given as its own input and
/// as the output slot itself (written over in place).
#[test]
fn epilogues_apply_once_on_every_convolution_path() {
    use wgflow::ops::{BinaryOp, Epilogue, Expr, UnaryOp};
    // (n, c, o, kernel, h, wd, stride, padding, groups)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
    );
    let cases: [Case; 11] = [
        (1, 16, 64, 1, 55, 55, 1, 0, 1),
        // Few taps, a small plane, many channels: row tiles before column tiles.
        (1, 32, 128, 1, 27, 27, 1, 0, 1),
        (1, 3, 24, 3, 57, 61, 2, 1, 1),
        (1, 128, 32, 3, 14, 14, 1, 1, 1),
        (2, 3, 13, 3, 9, 11, 1, 1, 1),
        (2, 8, 13, 3, 9, 11, 1, 1, 1),
        (1, 24, 24, 3, 28, 27, 1, 1, 24),
        (1, 136, 136, 1, 28, 28, 1, 0, 4),
        (1, 64, 48, 3, 40, 40, 1, 1, 1),
        (1, 512, 256, 3, 7, 7, 1, 1, 1),
        (2, 64, 40, 3, 9, 9, 1, 1, 1),
    ];
    let expr = Expr::unary(
        UnaryOp::Relu,
        Expr::binary(
            BinaryOp::Add,
            Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
            Expr::input(2),
        ),
    );
    for (i, (n, c, o, kk, h, wd, stride, pad, groups)) in cases.into_iter().enumerate() {
        let window = Window {
            kernel: [kk, kk],
            stride: [stride; 2],
            padding: [pad; 2],
            dilation: [1, 1],
        };
        let cg = c / groups;
        let mut k = conv_kernel([n, c, h, wd], o, groups, window);
        let out = k.out.clone();
        let [_, _, oh, ow] = [0, 1, 2, 3].map(|a| out.dims()[a]);
        k.epilogue = Some(Epilogue {
            views: Vec::new(),
            expr: expr.clone(),
            extra: vec![
                (Shape(vec![o, 1, 1]), DType::F32),
                (out.clone(), DType::F32),
            ],
        });
        let x = det(n * c * h * wd, 300 + i as u32);
        let w = det(o * cg * kk * kk, 310 + i as u32);
        let b = det(o, 320 + i as u32);
        let r = det(out.numel(), 330 + i as u32);
        let (conv, mag) = conv_f64(&k, &x, &w, (0, cg));
        let p = oh * ow;
        let want: Vec<f64> = (0..out.numel())
            .map(|j| (conv[j] + b[(j / p) % o] as f64 + r[j] as f64).max(0.0))
            .collect();
        let mag: Vec<f64> = (0..out.numel())
            .map(|j| mag[j] + (b[(j / p) % o] as f64).abs() + (r[j] as f64).abs())
            .collect();
        let bits = |v: &[f32]| -> Vec<u32> { v.iter().map(|v| v.to_bits()).collect() };
        let (xw, ww, bw, rw) = (bits(&x), bits(&w), bits(&b), bits(&r));
        for in_place in [false, true] {
            let mut got = if in_place {
                rw.clone()
            } else {
                vec![0xffff_ffff; out.numel()]
            };
            let residual = if in_place {
                CpuIn::Output
            } else {
                CpuIn::Words(&rw)
            };
            k.run_cpu_into(
                &[
                    CpuIn::Words(&xw),
                    CpuIn::Words(&ww),
                    CpuIn::Words(&bw),
                    residual,
                ],
                &mut got,
            )
            .unwrap();
            let got: Vec<f32> = got.into_iter().map(f32::from_bits).collect();
            check_conv(
                &format!("case {i} in place {in_place}"),
                &got,
                &want,
                &mag,
                cg * kk * kk + 2,
            );
        }
        // A bias alone, with and without ReLU, in either operand order: the one-pass
        // per-channel form of the epilogue (runs of oh·ow outputs, shorter than a chunk
        // at 9x11).
        for (relu, bias_first) in [(true, false), (false, true), (true, true)] {
            let (x0, x1) = if bias_first {
                (Expr::input(1), Expr::input(0))
            } else {
                (Expr::input(0), Expr::input(1))
            };
            let sum = Expr::binary(BinaryOp::Add, x0, x1);
            let mut kb = k.clone();
            kb.epilogue = Some(Epilogue {
                expr: if relu {
                    Expr::unary(UnaryOp::Relu, sum)
                } else {
                    sum
                },
                extra: vec![(Shape(vec![o, 1, 1]), DType::F32)],
                views: Vec::new(),
            });
            let want: Vec<f64> = (0..out.numel())
                .map(|j| conv[j] + b[(j / p) % o] as f64)
                .map(|v| if relu { v.max(0.0) } else { v })
                .collect();
            let mut got = vec![0xffff_ffff; out.numel()];
            kb.run_cpu_into(
                &[CpuIn::Words(&xw), CpuIn::Words(&ww), CpuIn::Words(&bw)],
                &mut got,
            )
            .unwrap();
            let got: Vec<f32> = got.into_iter().map(f32::from_bits).collect();
            check_conv(
                &format!("case {i} bias, relu {relu}"),
                &got,
                &want,
                &mag,
                cg * kk * kk + 2,
            );
        }
    }
}

/// The per-channel bias + ReLU epilogue on special values: NaN and infinities in the
/// convolution's output and in the bias, `inf + -inf`, and sums that round to -0 (ReLU
/// gives +0), against values worked out by hand, bit for bit.
#[test]
fn bias_relu_epilogue_special_values() {
    use wgflow::ops::{BinaryOp, Epilogue, Expr, UnaryOp};
    let window = Window {
        kernel: [1, 1],
        stride: [1, 1],
        padding: [0, 0],
        dilation: [1, 1],
    };
    // One input channel times weight 1 into four channels: each channel's convolution is
    // the input itself, exactly.
    let mut k = conv_kernel([1, 1, 2, 4], 4, 1, window);
    k.epilogue = Some(Epilogue {
        expr: Expr::unary(
            UnaryOp::Relu,
            Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
        ),
        extra: vec![(Shape(vec![4, 1, 1]), DType::F32)],
        views: Vec::new(),
    });
    let inf = f32::INFINITY;
    let x = [f32::NAN, inf, -inf, -0.0, 0.0, 1.5, -2.0, 0.25];
    let w = [1.0f32; 4];
    let b = [f32::NAN, -inf, 0.5, -0.0];
    let relu = |v: f32| if v > 0.0 || v.is_nan() { v } else { 0.0 };
    let want: Vec<f32> = (0..32).map(|j| relu(x[j % 8] + b[j / 8])).collect();
    // The hand-worked cases this covers.
    assert!(want[8 + 1].is_nan(), "inf + -inf");
    assert_eq!(want[8 + 2].to_bits(), 0, "relu(-inf)");
    assert_eq!(want[24 + 3].to_bits(), 0, "relu(-0 + -0) is +0");
    assert_eq!(want[16 + 6], 0.0);
    assert_eq!(want[16 + 7], 0.75);
    let bits = |v: &[f32]| -> Vec<u32> { v.iter().map(|v| v.to_bits()).collect() };
    let (xw, ww, bw) = (bits(&x), bits(&w), bits(&b));
    let mut got = vec![0xffff_ffff; 32];
    k.run_cpu_into(
        &[CpuIn::Words(&xw), CpuIn::Words(&ww), CpuIn::Words(&bw)],
        &mut got,
    )
    .unwrap();
    for (j, (&g, &e)) in got.iter().zip(&want).enumerate() {
        let g = f32::from_bits(g);
        assert!(
            (g.is_nan() && e.is_nan()) || g.to_bits() == e.to_bits(),
            "element {j}: {g} vs {e}"
        );
    }
}
