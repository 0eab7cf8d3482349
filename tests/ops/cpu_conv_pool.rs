//! cpu:0's convolutions with the max pool after them fused in (`KernelDef::absorb`): the
//! convolution's rows computed band by band and pooled while in cache. Against float64
//! (convolution, bias + ReLU and pool computed here); bit for bit against the same direct
//! kernel run unfused and then pooled by the reference, with NaN and infinities in the
//! input, on both direct kernels; the fallback when no direct kernel applies; and through a
//! session, whose plan must run conv + bias + ReLU + pool as one step only when nothing else
//! reads the convolution. And a mean after a convolution, which leaves the bias and ReLU to
//! the convolution's epilogue.

use super::cpu_reduce_conv::{conv_f64, conv_kernel, det, is_avx2, is_avx512};
use wgflow::ops::{
    BinaryOp, Conv2dKernel, CpuIn, Epilogue, Expr, PoolKernel, PoolKind, UnaryOp, Window,
};
use wgflow::{Conv2dOptions, DType, Device, Graph, HostTensor, Session, SessionOptions, Shape};

fn window(kernel: usize, stride: usize, pad: usize) -> Window {
    Window {
        kernel: [kernel; 2],
        stride: [stride; 2],
        padding: [pad; 2],
        dilation: [1, 1],
    }
}

/// `k` with a max pool over `win` after it.
fn with_pool(mut k: Conv2dKernel, win: Window) -> Conv2dKernel {
    let d = k.out.dims().to_vec();
    let [ph, pw] = win.out_hw([d[2], d[3]]).unwrap();
    k.pool = Some(Box::new(PoolKernel {
        kind: PoolKind::Max,
        x: k.out.clone(),
        window: win,
        out: Shape(vec![d[0], d[1], ph, pw]),
    }));
    k
}

/// Float64 max pool of `vals` (`[planes, h, w]`), with each output's tolerance the largest
/// of its window's (the pool itself is exact).
fn pool_f64(
    vals: &[f64],
    tol: &[f64],
    [h, w]: [usize; 2],
    win: &Window,
    [oh, ow]: [usize; 2],
) -> (Vec<f64>, Vec<f64>) {
    let (mut out, mut t) = (Vec::new(), Vec::new());
    for (plane, tp) in vals.chunks(h * w).zip(tol.chunks(h * w)) {
        for oy in 0..oh {
            for ox in 0..ow {
                let (mut m, mut mt) = (f64::NEG_INFINITY, 0f64);
                for ky in 0..win.kernel[0] {
                    for kx in 0..win.kernel[1] {
                        let y = (oy * win.stride[0] + ky) as isize - win.padding[0] as isize;
                        let x = (ox * win.stride[1] + kx) as isize - win.padding[1] as isize;
                        if y < 0 || x < 0 || y >= h as isize || x >= w as isize {
                            continue;
                        }
                        let i = y as usize * w + x as usize;
                        m = m.max(plane[i]);
                        mt = mt.max(tp[i]);
                    }
                }
                out.push(m);
                t.push(mt);
            }
        }
    }
    (out, t)
}

fn words(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// (images, channels in, channels out, kernel, h, w, stride, padding; pool kernel, stride,
/// padding)
type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    [usize; 3],
);

const CASES: [Case; 10] = [
    // SqueezeNet's first layer and pool, smaller.
    (1, 3, 64, 3, 71, 69, 2, 0, [3, 2, 0]),
    // ResNet's: 147 taps (the AVX-512 kernel sums them in one pass); a padded pool.
    (1, 3, 16, 7, 64, 60, 2, 3, [3, 2, 1]),
    // 216 taps, two passes of the AVX-512 kernel: partial sums kept between them.
    (1, 24, 16, 3, 30, 28, 1, 1, [3, 2, 1]),
    // Two images, a channel tail, 2x2 windows.
    (2, 5, 13, 3, 33, 35, 1, 1, [2, 2, 0]),
    // A stride-1 pool whose windows overlap by two rows.
    (1, 8, 20, 3, 30, 29, 1, 1, [3, 1, 1]),
    // A 1x1 over RGB-like input (summed in place on AVX-512).
    (1, 4, 24, 1, 40, 37, 1, 0, [3, 2, 1]),
    // Rows so wide that a task's band holds a few rows: bands carry rows to the next.
    (1, 3, 64, 3, 23, 2100, 1, 1, [3, 2, 1]),
    (1, 3, 128, 3, 19, 1500, 1, 1, [2, 2, 0]),
    // Many channels and rows: several channel runs and ranges of pool rows.
    (1, 3, 128, 3, 150, 150, 2, 0, [3, 2, 0]),
    // A pool as large as the output.
    (1, 2, 9, 3, 12, 11, 1, 0, [5, 3, 0]),
];

/// Every case through `run_cpu_into` with an epilogue fused in (the dispatcher's choice of
/// path), against float64: bias + ReLU (read per channel), and a full-size residual added
/// before the ReLU (read at each output's own index, so a band's rows misplaced show).
#[test]
fn pooled_convolutions_match_float64() {
    for (i, &(n, c, o, kk, h, wd, s, p, [pk, ps, pp])) in CASES.iter().enumerate() {
        let base = conv_kernel([n, c, h, wd], o, 1, window(kk, s, p));
        let d = base.out.dims().to_vec();
        let (oh, ow) = (d[2], d[3]);
        let x = det(n * c * h * wd, 300 + i as u32);
        let w = det(o * c * kk * kk, 400 + i as u32);
        let (conv, mag) = conv_f64(&base, &x, &w, (0, c));
        let terms = (c * kk * kk) as f64;
        for residual in [false, true] {
            let extra = if residual {
                det(base.out.numel(), 500 + i as u32)
            } else {
                det(o, 500 + i as u32)
            };
            let at = |j: usize| {
                if residual {
                    j
                } else {
                    (j / (oh * ow)) % o
                }
            };
            let mut k = with_pool(base.clone(), window(pk, ps, pp));
            k.epilogue = Some(Epilogue {
                views: Vec::new(),
                expr: Expr::unary(
                    UnaryOp::Relu,
                    Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
                ),
                extra: vec![(
                    if residual {
                        base.out.clone()
                    } else {
                        Shape(vec![o, 1, 1])
                    },
                    DType::F32,
                )],
            });
            let mut out = vec![0xffff_ffff; k.out_shape().numel()];
            let (xw, ww, ew) = (words(&x), words(&w), words(&extra));
            k.run_cpu_into(
                &[CpuIn::Words(&xw), CpuIn::Words(&ww), CpuIn::Words(&ew)],
                &mut out,
            )
            .unwrap();
            let act: Vec<f64> = conv
                .iter()
                .enumerate()
                .map(|(j, &v)| (v + extra[at(j)] as f64).max(0.0))
                .collect();
            let tol: Vec<f64> = mag
                .iter()
                .enumerate()
                .map(|(j, &m)| {
                    (terms + 3.0) * f32::EPSILON as f64 * (m + extra[at(j)].abs() as f64) + 1e-30
                })
                .collect();
            let pd = k.out_shape().dims().to_vec();
            let win = window(pk, ps, pp);
            let (want, wtol) = pool_f64(&act, &tol, [oh, ow], &win, [pd[2], pd[3]]);
            assert_eq!(out.len(), want.len(), "case {i}: length");
            for (j, ((&g, &w), &t)) in out.iter().zip(&want).zip(&wtol).enumerate() {
                let g = f32::from_bits(g) as f64;
                assert!(
                    (g - w).abs() <= t,
                    "case {i} (residual: {residual}) {k:?}: [{j}] {g} vs float64 {w} \
                     (tolerance {t:.2e})"
                );
            }
        }
    }
}

/// Each direct kernel (AVX2 and, with AVX-512F, AVX-512), forced, pooled by bands against
/// the same kernel unfused and then pooled by the reference: the same sums in the same
/// order, so the same bits, with NaN, infinities and -0 in the input.
#[test]
fn pooled_convolutions_match_the_unfused_kernel_bit_for_bit() {
    for (i, &(n, c, o, kk, h, wd, s, p, [pk, ps, pp])) in CASES.iter().enumerate() {
        let base = conv_kernel([n, c, h, wd], o, 1, window(kk, s, p));
        let k = with_pool(base.clone(), window(pk, ps, pp));
        let pool = k.pool.clone().unwrap();
        let mut x = det(n * c * h * wd, 600 + i as u32);
        let w = det(o * c * kk * kk, 700 + i as u32);
        // Special values where some windows see them and others do not.
        for (j, v) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]
            .into_iter()
            .enumerate()
        {
            let at = (j * 7919 + 13) % x.len();
            x[at] = v;
        }
        for wide in [false, true] {
            let fused = k.run_direct(&x, &w, wide);
            let runs = if wide { is_avx512() } else { is_avx2() };
            assert_eq!(fused.is_some(), runs, "case {i} (wide: {wide}) applies");
            let Some(fused) = fused else { continue };
            let plain = base.run_direct(&x, &w, wide).unwrap();
            let want: Vec<u32> = pool.reference(&words(&plain));
            let got = words(&fused);
            assert!(
                got.iter().any(|v| f32::from_bits(*v).is_nan()),
                "case {i}: some window sees the NaN"
            );
            for (j, (&g, &e)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g,
                    e,
                    "case {i} (wide: {wide}) [{j}]: {} vs unfused {}",
                    f32::from_bits(g),
                    f32::from_bits(e)
                );
            }
        }
    }
}

/// A kernel given a pool where no direct kernel runs (a grouped convolution) computes the
/// whole convolution and then pools it.
#[test]
fn a_pool_without_a_direct_kernel_still_applies() {
    let (n, c, o, h, wd) = (2, 6, 8, 17, 19);
    let base = conv_kernel([n, c, h, wd], o, 2, window(3, 1, 1));
    let k = with_pool(base.clone(), window(3, 2, 1));
    let x = det(n * c * h * wd, 31);
    let w = det(o * 3 * 9, 32);
    let mut out = vec![0xffff_ffff; k.out_shape().numel()];
    k.run_cpu_into(
        &[CpuIn::Words(&words(&x)), CpuIn::Words(&words(&w))],
        &mut out,
    )
    .unwrap();
    let (conv, mag) = conv_f64(&base, &x, &w, (0, 3));
    let tol: Vec<f64> = mag.iter().map(|m| 30.0 * f32::EPSILON as f64 * m).collect();
    let d = k.out_shape().dims().to_vec();
    let (want, wtol) = pool_f64(&conv, &tol, [h, wd], &window(3, 2, 1), [d[2], d[3]]);
    for (j, ((&g, &w), &t)) in out.iter().zip(&want).zip(&wtol).enumerate() {
        let g = f32::from_bits(g) as f64;
        assert!((g - w).abs() <= t + 1e-30, "[{j}] {g} vs float64 {w}");
    }
}

fn cpu_session(g: &Graph) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            visible_devices: Some(Vec::new()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Through a session: conv2d + bias + ReLU + max_pool2d is one step on a CPU with a direct
/// kernel (its value against float64), two when the ReLU's output is fetched too, and an
/// average pool is never taken in.
#[test]
fn sessions_fuse_the_pool_only_when_nothing_else_reads_the_convolution() {
    let (c, h, wd, o) = (3, 45, 47, 32);
    let x = det(c * h * wd, 41);
    let w = det(o * c * 9, 42);
    let bias = det(o, 43);
    let mut g = Graph::new();
    let tx = g
        .constant(HostTensor::new([1, c, h, wd], x.clone()).unwrap())
        .unwrap();
    let tw = g
        .constant(HostTensor::new([o, c, 3, 3], w.clone()).unwrap())
        .unwrap();
    let tb = g
        .constant(HostTensor::new([o], bias.clone()).unwrap())
        .unwrap();
    let opts = Conv2dOptions {
        stride: [2, 2],
        ..Default::default()
    };
    let y = g.conv2d(tx, tw, Some(tb), opts).unwrap();
    let r = g.relu(y).unwrap();
    let pooled = g.max_pool2d(r, [3, 3], [2, 2], [0, 0]).unwrap();
    let avg = g.avg_pool2d(r, [3, 3], [2, 2], [0, 0]).unwrap();

    let mut s = cpu_session(&g);
    let plan = s.plan(&[pooled]).unwrap();
    let fused = plan.steps.iter().any(|st| {
        let names = st.nodes.join("+");
        names.contains("conv2d") && names.contains("max_pool2d")
    });
    assert_eq!(
        fused,
        is_avx2(),
        "conv + pool in one step exactly where a direct kernel runs:\n{}",
        plan.describe()
    );
    let got = s.run(&[], &[pooled]).unwrap()[0].to_f32().unwrap();
    let base = conv_kernel([1, c, h, wd], o, 1, window(3, 2, 0));
    let (conv, mag) = conv_f64(&base, &x, &w, (0, c));
    let d = base.out.dims().to_vec();
    let p = d[2] * d[3];
    let act: Vec<f64> = conv
        .iter()
        .enumerate()
        .map(|(j, &v)| (v + bias[j / p] as f64).max(0.0))
        .collect();
    let tol: Vec<f64> = mag
        .iter()
        .enumerate()
        .map(|(j, &m)| 32.0 * f32::EPSILON as f64 * (m + bias[j / p].abs() as f64) + 1e-30)
        .collect();
    let [ph, pw] = window(3, 2, 0).out_hw([d[2], d[3]]).unwrap();
    let (want, wtol) = pool_f64(&act, &tol, [d[2], d[3]], &window(3, 2, 0), [ph, pw]);
    assert_eq!(got.len(), want.len());
    for (j, ((&g, &w), &t)) in got.iter().zip(&want).zip(&wtol).enumerate() {
        assert!((g as f64 - w).abs() <= t, "[{j}] {g} vs float64 {w}");
    }

    // The ReLU fetched too: the convolution's output must be stored, so the pool stays
    // apart, and gives the same values.
    let plan = s.plan(&[pooled, r]).unwrap();
    assert!(
        !plan
            .steps
            .iter()
            .any(|st| st.nodes.join("+").contains("max_pool2d")
                && st.nodes.join("+").contains("conv2d")),
        "{}",
        plan.describe()
    );
    let both = s.run(&[], &[pooled, r]).unwrap();
    assert_eq!(both[0].to_f32().unwrap(), got);
    // An average pool reads it as the only consumer in its own plan, but is not fused.
    let plan = s.plan(&[avg]).unwrap();
    assert!(
        !plan
            .steps
            .iter()
            .any(|st| st.nodes.join("+").contains("conv2d")
                && st.nodes.join("+").contains("avg_pool2d")),
        "{}",
        plan.describe()
    );
}

/// A global average pool of `relu(conv + bias)` (SqueezeNet's and ResNet's heads): on a
/// cpu:0 session the bias and ReLU stay the convolution's epilogue (applied in cache) and
/// the mean folds plain values, rather than the mean recomputing them as its prologue;
/// against float64 either way.
#[test]
fn a_mean_after_a_convolution_leaves_bias_and_relu_to_the_convolution() {
    let (c, h, wd, o) = (24, 13, 13, 40);
    let x = det(c * h * wd, 51);
    let w = det(o * c, 52);
    let bias = det(o, 53);
    let mut g = Graph::new();
    let tx = g
        .constant(HostTensor::new([1, c, h, wd], x.clone()).unwrap())
        .unwrap();
    let tw = g
        .constant(HostTensor::new([o, c, 1, 1], w.clone()).unwrap())
        .unwrap();
    let tb = g
        .constant(HostTensor::new([o], bias.clone()).unwrap())
        .unwrap();
    let y = g
        .conv2d(tx, tw, Some(tb), Conv2dOptions::default())
        .unwrap();
    let r = g.relu(y).unwrap();
    let m = g.mean(r, [2, 3], false).unwrap();
    let mut s = cpu_session(&g);
    let plan = s.plan(&[m]).unwrap();
    let names: Vec<String> = plan.steps.iter().map(|st| st.nodes.join("+")).collect();
    assert!(
        names
            .iter()
            .any(|n| n.contains("conv2d") && n.contains("relu") && !n.contains("mean")),
        "bias and ReLU in the convolution's step: {names:?}"
    );
    let got = s.run(&[], &[m]).unwrap()[0].to_f32().unwrap();
    let base = conv_kernel([1, c, h, wd], o, 1, window(1, 1, 0));
    let (conv, mag) = conv_f64(&base, &x, &w, (0, c));
    let p = h * wd;
    for (ch, &g) in got.iter().enumerate() {
        let vals = (0..p).map(|i| (conv[ch * p + i] + bias[ch] as f64).max(0.0));
        let want = vals.sum::<f64>() / p as f64;
        let tol: f64 = (0..p)
            .map(|i| (c as f64 + 3.0) * f32::EPSILON as f64 * (mag[ch * p + i] + 1.0))
            .sum::<f64>()
            / p as f64
            + p as f64 * f32::EPSILON as f64 * want.abs();
        assert!(
            (g as f64 - want).abs() <= tol,
            "channel {ch}: {g} vs float64 {want}"
        );
    }
    assert_eq!(got.len(), o);
}

/// A max pool after a concatenation along channels (SqueezeNet's and Inception's modules)
/// pools each plane from the input that holds it: bit for bit the concatenation pooled by
/// the reference, NaN, infinities and -0 included, over two images and inputs of 1, 5 and
/// 10 channels; one step in a cpu:0 session's plan, none when the concatenation is fetched.
#[test]
fn a_pool_after_a_concatenation_reads_the_inputs_in_place() {
    let (n, h, wd) = (2, 23, 21);
    let chans = [1usize, 5, 10];
    let mut g = Graph::new();
    let mut parts = Vec::new();
    let mut values = Vec::new();
    for (i, &c) in chans.iter().enumerate() {
        let mut v = det(n * c * h * wd, 60 + i as u32);
        for (j, s) in [f32::NAN, f32::INFINITY, -0.0, f32::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            v[(j * 131 + 7 * i) % (n * c * h * wd)] = s;
        }
        parts.push(
            g.constant(HostTensor::new([n, c, h, wd], v.clone()).unwrap())
                .unwrap(),
        );
        values.push(v);
    }
    let cat = g.concat(&parts, 1).unwrap();
    let pooled = g.max_pool2d(cat, [3, 3], [2, 2], [1, 1]).unwrap();
    let mut s = cpu_session(&g);
    let plan = s.plan(&[pooled]).unwrap();
    assert_eq!(plan.dispatch_count(), 1, "{}", plan.describe());
    let got = s.run(&[], &[pooled]).unwrap()[0].words().to_vec();

    // The reference: the concatenation (per image, each input's planes in turn), then the
    // scalar pool.
    let total: usize = chans.iter().sum();
    let mut cat_words = Vec::new();
    for img in 0..n {
        for (v, &c) in values.iter().zip(&chans) {
            cat_words.extend(words(&v[img * c * h * wd..(img + 1) * c * h * wd]));
        }
    }
    let win = window(3, 2, 1);
    let [ph, pw] = win.out_hw([h, wd]).unwrap();
    let pool = PoolKernel {
        kind: PoolKind::Max,
        x: Shape(vec![n, total, h, wd]),
        window: win,
        out: Shape(vec![n, total, ph, pw]),
    };
    let want = pool.reference(&cat_words);
    assert_eq!(got.len(), want.len());
    for (j, (&a, &b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            a,
            b,
            "[{j}]: {} vs {}",
            f32::from_bits(a),
            f32::from_bits(b)
        );
    }
    assert!(got.iter().any(|&v| f32::from_bits(v).is_nan()));

    // Fetching the concatenation too keeps it a step of its own, with the same pool.
    let plan = s.plan(&[pooled, cat]).unwrap();
    assert_eq!(plan.dispatch_count(), 2, "{}", plan.describe());
    let both = s.run(&[], &[pooled, cat]).unwrap();
    assert_eq!(both[0].words(), &got[..]);
    assert_eq!(both[1].words(), &cat_words[..]);
}

/// A bias per channel then ReLU, which the AVX-512 kernel applies to its sums in registers,
/// against the same convolution without an epilogue followed by the reference's bias and
/// ReLU, bit for bit (NaN kept, -0 to +0), with NaN and infinities in the input and a NaN
/// and a -0 bias; and against float64 where the result is finite. Geometries: SqueezeNet's
/// 3x3 at 55x55; 288 taps (two passes over the taps) with a channel tail; two images; a 1x1
/// summed in place; stride 2 over RGB.
#[test]
fn bias_and_relu_in_registers_match_the_separate_pass() {
    // (images, channels in, channels out, kernel, h, w, stride, padding)
    let cases: [[usize; 8]; 5] = [
        [1, 16, 64, 3, 55, 55, 1, 1],
        [1, 32, 20, 3, 14, 13, 1, 1],
        [2, 5, 13, 3, 33, 35, 1, 1],
        [1, 4, 24, 1, 40, 37, 1, 0],
        [1, 3, 64, 3, 71, 69, 2, 0],
    ];
    for (i, &[n, c, o, kk, h, wd, s, p]) in cases.iter().enumerate() {
        let base = conv_kernel([n, c, h, wd], o, 1, window(kk, s, p));
        let plane = base.out.dims()[2] * base.out.dims()[3];
        let mut x = det(n * c * h * wd, 900 + i as u32);
        for (j, v) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]
            .into_iter()
            .enumerate()
        {
            let at = (j * 7919 + 13) % x.len();
            x[at] = v;
        }
        let w = det(o * c * kk * kk, 910 + i as u32);
        let mut bias = det(o, 920 + i as u32);
        bias[1] = f32::NAN;
        bias[2] = -0.0;
        let mut k = base.clone();
        k.epilogue = Some(Epilogue {
            expr: Expr::unary(
                UnaryOp::Relu,
                Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
            ),
            extra: vec![(Shape(vec![o, 1, 1]), DType::F32)],
            views: Vec::new(),
        });
        let (xw, ww, bw) = (words(&x), words(&w), words(&bias));
        let mut got = vec![0xffff_ffff; k.out_shape().numel()];
        k.run_cpu_into(
            &[CpuIn::Words(&xw), CpuIn::Words(&ww), CpuIn::Words(&bw)],
            &mut got,
        )
        .unwrap();
        let mut plain = vec![0xffff_ffff; base.out_shape().numel()];
        base.run_cpu_into(&[CpuIn::Words(&xw), CpuIn::Words(&ww)], &mut plain)
            .unwrap();
        let (conv, mag) = conv_f64(&base, &x, &w, (0, c));
        let terms = (c * kk * kk) as f64;
        let mut nans = 0;
        for (j, (&g, &u)) in got.iter().zip(&plain).enumerate() {
            let b = bias[(j / plane) % o];
            let v = f32::from_bits(u) + b;
            let want = if v > 0.0 || v.is_nan() { v } else { 0.0 };
            assert_eq!(
                g,
                want.to_bits(),
                "case {i} [{j}]: {} vs {want}",
                f32::from_bits(g)
            );
            nans += usize::from(want.is_nan() && !b.is_nan());
            if conv[j].is_finite() && !b.is_nan() {
                let e = (conv[j] + b as f64).max(0.0);
                let t = (terms + 3.0) * f32::EPSILON as f64 * (mag[j] + b.abs() as f64) + 1e-30;
                let g = f32::from_bits(g) as f64;
                assert!((g - e).abs() <= t, "case {i} [{j}]: {g} vs float64 {e}");
            }
        }
        assert!(nans > 0, "case {i}: an input NaN reaches some output");
    }
}
