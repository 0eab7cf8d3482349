//! Reductions at the sizes where kernels break, on every device, against float64 computed
//! here: past 2^24 elements (f32's integer precision, and where llvmpipe's loop limiter cut
//! every reduction short), odd tails, every strategy and axis layout, accuracy of f32 sums
//! up to 2^27 terms, and arg-reductions whose winner sits in a later chunk.

use crate::common;

use wgflow::{Axes, DType, Device, Graph, HostTensor, Tensor};

fn devices() -> Vec<Device> {
    let mut d = common::gpus();
    d.push(Device::Cpu);
    d
}

/// Deterministic values in [0, 1) (a multiplicative hash of the index).
fn val(i: usize) -> f32 {
    let h = (i as u32).wrapping_mul(2_654_435_761) ^ (i as u32 >> 7);
    (h >> 8) as f32 / 16_777_216.0
}

/// Float64 reference of sum/max/min/argmax over `axes` of `x` (row-major `dims`).
struct Ref {
    sum: Vec<f64>,
    max: Vec<f32>,
    min: Vec<f32>,
    argmax: Vec<i32>,
    count: usize,
}

fn reference(x: &[f32], dims: &[usize], axes: &[usize]) -> Ref {
    let kept: Vec<usize> = (0..dims.len()).filter(|a| !axes.contains(a)).collect();
    let n_out: usize = kept.iter().map(|&a| dims[a]).product();
    let count: usize = axes.iter().map(|&a| dims[a]).product();
    let mut r = Ref {
        sum: vec![0.0; n_out],
        max: vec![f32::NEG_INFINITY; n_out],
        min: vec![f32::INFINITY; n_out],
        argmax: vec![-1; n_out],
        count,
    };
    let mut idx = vec![0usize; dims.len()];
    for &v in x {
        let (mut o, mut k) = (0, 0);
        for &a in &kept {
            o = o * dims[a] + idx[a];
        }
        for &a in axes {
            k = k * dims[a] + idx[a];
        }
        r.sum[o] += v as f64;
        if v > r.max[o] {
            r.max[o] = v;
            r.argmax[o] = k as i32;
        }
        r.min[o] = r.min[o].min(v);
        for a in (0..dims.len()).rev() {
            idx[a] += 1;
            if idx[a] < dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    r
}

fn check_rel(what: &str, got: &[f32], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs() / w.abs().max(1e-30);
        assert!(
            err <= rtol,
            "{what}[{i}]: got {g}, float64 reference {w} (relative error {err:.2e} > {rtol:.0e})"
        );
    }
}

/// Sum, mean, max, min and (for one axis) argmax of `x` over `axes` on every device.
fn check_layout(dims: &[usize], axes: &[usize], x: Vec<f32>) {
    let r = reference(&x, dims, axes);
    let mut g = Graph::new();
    let t = g.placeholder("x", dims.to_vec(), DType::F32).unwrap();
    let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    let mut fetch: Vec<Tensor> = vec![
        g.sum(t, Axes::List(ax.clone()), false).unwrap(),
        g.mean(t, Axes::List(ax.clone()), false).unwrap(),
        g.max(t, Axes::List(ax.clone()), false).unwrap(),
        g.min(t, Axes::List(ax.clone()), false).unwrap(),
    ];
    if axes.len() == 1 {
        fetch.push(g.argmax(t, Some(ax[0]), false).unwrap());
    }
    let feed = HostTensor::new(dims.to_vec(), x).unwrap();
    let means: Vec<f64> = r.sum.iter().map(|s| s / r.count as f64).collect();
    let exact = |v: &[f32]| -> Vec<f64> { v.iter().map(|&x| x as f64).collect() };
    for d in devices() {
        let what = |op: &str| format!("{op} over {axes:?} of {dims:?} on {d}");
        let mut sess = common::session_on(&g, d);
        let out = sess.run(&[(t, feed.clone())], &fetch).unwrap();
        check_rel(&what("sum"), &out[0].to_f32().unwrap(), &r.sum, 2e-6);
        check_rel(&what("mean"), &out[1].to_f32().unwrap(), &means, 2e-6);
        check_rel(&what("max"), &out[2].to_f32().unwrap(), &exact(&r.max), 0.0);
        check_rel(&what("min"), &out[3].to_f32().unwrap(), &exact(&r.min), 0.0);
        if axes.len() == 1 {
            assert_eq!(
                out[4].to_vec::<i32>().unwrap(),
                r.argmax,
                "{}",
                what("argmax")
            );
        }
    }
}

/// Values in [0, 1) with the largest element last and the smallest just before it, so a
/// kernel that stops early gets max, min, argmax and the sum wrong.
fn tail_heavy(n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(val).collect();
    x[n - 1] = 3.0;
    x[n - 2] = -1.0;
    x
}

#[test]
fn whole_tensor_reductions_past_2_pow_24() {
    let _heavy = crate::heavy();
    for n in [(1 << 24) + 1, 16_781_312, (1 << 24) + 4096 * 3 + 5] {
        check_layout(&[n], &[0], tail_heavy(n));
    }
}

#[test]
fn row_reductions_past_2_pow_24_few_and_many_rows() {
    let _heavy = crate::heavy();
    // Few long rows (tree strategy, odd length) and many rows (vec4 strategy).
    let (rows, len) = (3, 5_592_407);
    check_layout(&[rows, len], &[1], tail_heavy(rows * len));
    let (rows, len) = (100, 200_000);
    check_layout(&[rows, len], &[1], tail_heavy(rows * len));
}

#[test]
fn column_reductions_past_2_pow_24() {
    let _heavy = crate::heavy();
    // Reduced axis first: one invocation per column walks a strided axis (loop strategy).
    let (len, cols) = (4_194_305, 4);
    check_layout(&[len, cols], &[0], tail_heavy(len * cols));
    // Middle axis of three, and two axes at once.
    check_layout(&[3, 70_001, 5], &[1], tail_heavy(3 * 70_001 * 5));
    check_layout(&[3, 70_001, 5], &[0, 2], tail_heavy(3 * 70_001 * 5));
}

#[test]
fn f32_sums_stay_within_2e6_of_float64() {
    let _heavy = crate::heavy();
    // 2^24 terms in [0, 1): the sum the issue measured 1e-4 off.
    let n = 1 << 24;
    check_layout(&[n], &[0], (0..n).map(val).collect());
    // Mean of 10^6 values near 1e4 (measured 2.8e-5 off), as a row and as a column.
    let near = |n: usize| -> Vec<f32> { (0..n).map(|i| 1e4 + val(i)).collect() };
    check_layout(&[1_000_000], &[0], near(1_000_000));
    check_layout(&[1_000_000, 2], &[0], near(2_000_000));
    check_layout(&[2, 1_000_000], &[1], near(2_000_000));
}

/// 2^27 positive terms without a 512 MiB tensor: `a + b` over a broadcast [8192, 16384] grid
/// is fused into the sum, so only `a` and `b` reach memory.
#[test]
fn sum_of_2_pow_27_terms() {
    let _heavy = crate::heavy();
    let (m, n) = (8192usize, 16384usize);
    let a: Vec<f32> = (0..m).map(|i| 0.5 * val(i)).collect();
    let b: Vec<f32> = (0..n).map(|j| 0.5 * val(j + m)).collect();
    let want = n as f64 * a.iter().map(|&v| v as f64).sum::<f64>()
        + m as f64 * b.iter().map(|&v| v as f64).sum::<f64>();
    let mut g = Graph::new();
    let ta = g.constant(HostTensor::new(vec![m, 1], a).unwrap()).unwrap();
    let tb = g.constant(HostTensor::new(vec![1, n], b).unwrap()).unwrap();
    let s = g.add(ta, tb).unwrap();
    let total = g.sum(s, Axes::All, false).unwrap();
    for d in devices() {
        let mut sess = common::session_on(&g, d);
        let out = sess.run(&[], &[total]).unwrap();
        check_rel(
            &format!("sum of 2^27 terms on {d}"),
            &out[0].to_f32().unwrap(),
            &[want],
            2e-6,
        );
    }
}

#[test]
fn arg_reductions_pick_the_first_extreme_across_chunks() {
    let _heavy = crate::heavy();
    let n = 4096 * 7 + 13;
    let base: Vec<f32> = (0..n).map(val).collect();
    // (values set, argmax, argmin or -1 for the first minimum)
    type Case = (Vec<(usize, f32)>, i32, i32);
    let cases: Vec<Case> = vec![
        // Equal maxima in the third and fifth chunk: the first wins.
        (
            vec![(2 * 4096 + 5, 7.0), (4 * 4096 + 1, 7.0)],
            2 * 4096 + 5,
            -1,
        ),
        // The extreme in the remainder of the last chunk.
        (
            vec![(n - 1, 7.0), (n - 2, -7.0)],
            n as i32 - 1,
            n as i32 - 2,
        ),
        // A NaN in a later chunk beats a larger number in an earlier one.
        (vec![(100, 9.0), (5 * 4096, f32::NAN)], 5 * 4096, 5 * 4096),
    ];
    for (set, want_max, want_min) in cases {
        let mut x = base.clone();
        for &(i, v) in &set {
            x[i] = v;
        }
        // NumPy's rule: the first NaN, else the first minimum.
        let want_min = if want_min >= 0 {
            want_min
        } else {
            let m = x.iter().cloned().fold(f32::INFINITY, f32::min);
            x.iter().position(|&v| v == m).unwrap() as i32
        };
        let mut g = Graph::new();
        let t = g.placeholder("x", vec![n], DType::F32).unwrap();
        let amax = g.argmax(t, Some(0), false).unwrap();
        let amin = g.argmin(t, Some(0), false).unwrap();
        for d in devices() {
            let mut sess = common::session_on(&g, d);
            let feed = HostTensor::new(vec![n], x.clone()).unwrap();
            let out = sess.run(&[(t, feed)], &[amax, amin]).unwrap();
            assert_eq!(
                out[0].item::<i32>().unwrap(),
                want_max,
                "argmax {set:?} on {d}"
            );
            assert_eq!(
                out[1].item::<i32>().unwrap(),
                want_min,
                "argmin {set:?} on {d}"
            );
        }
    }
}
