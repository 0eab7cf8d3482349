//! Gradients of conv2d and pooling against central finite differences (and, for a conv
//! large enough to be tiled, against float64 in the test), hand-computed max-pool ties, and
//! the NN composites, on cpu:0 and every GPU.

use crate::common::grad::{check, rand, uniform};
use crate::common::{assert_close, gpus, session_on};
use wgflow::{Conv2dOptions, DType, Device, Graph, HostTensor, Tensor};

const EPS: f32 = 3e-3;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

fn opts(
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Conv2dOptions {
    Conv2dOptions {
        stride,
        padding,
        dilation,
        groups,
    }
}

/// conv2d's gradients with respect to the input and the weights.
fn check_conv(what: &str, x: &[usize], w: &[usize], o: Conv2dOptions) {
    check(
        what,
        &|g, t| g.conv2d(t[0], t[1], None, o),
        &[rand(x, -1.0, 1.0, 11), rand(w, -1.0, 1.0, 12)],
        &[0, 1],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn conv2d_stride_1_no_padding_odd_sizes() {
    check_conv(
        "conv 1/0/1",
        &[2, 3, 7, 6],
        &[4, 3, 3, 2],
        opts([1, 1], [0, 0], [1, 1], 1),
    );
}

#[test]
fn conv2d_stride_2_padding_1() {
    // 7 rows padded to 9 with a 3-tap window at stride 2 reach the last row; 6 columns
    // padded to 8 with 2 taps leave the last padded column unread.
    check_conv(
        "conv 2/1/1",
        &[2, 3, 7, 6],
        &[4, 3, 3, 2],
        opts([2, 2], [1, 1], [1, 1], 1),
    );
}

#[test]
fn conv2d_dilation_2() {
    check_conv(
        "conv 1/1/2",
        &[2, 3, 7, 6],
        &[4, 3, 3, 2],
        opts([1, 1], [1, 1], [2, 2], 1),
    );
    check_conv(
        "conv 2/0/2",
        &[2, 3, 7, 6],
        &[4, 3, 3, 2],
        opts([2, 2], [0, 0], [2, 2], 1),
    );
}

#[test]
fn conv2d_mixed_geometry_per_axis() {
    check_conv(
        "conv mixed",
        &[1, 2, 8, 7],
        &[3, 2, 2, 3],
        opts([2, 1], [0, 1], [1, 2], 1),
    );
}

#[test]
fn conv2d_stride_past_the_kernel_and_padding_past_its_reach() {
    // Stride 3 over a 2-tap window skips rows between windows and at the end.
    check_conv(
        "conv stride 3",
        &[1, 2, 8, 7],
        &[2, 2, 2, 2],
        opts([3, 3], [0, 0], [1, 1], 1),
    );
    // Padding 2 is more than (k - 1)·d = 1: the transposed convolution crops instead.
    check_conv(
        "conv pad 2",
        &[1, 2, 5, 4],
        &[2, 2, 2, 2],
        opts([2, 1], [2, 2], [1, 1], 1),
    );
    // A 1x1 kernel with padding: outputs on the border read only zeros.
    check_conv(
        "conv 1x1 pad",
        &[2, 2, 4, 3],
        &[3, 2, 1, 1],
        opts([2, 2], [1, 1], [1, 1], 1),
    );
}

#[test]
fn conv2d_groups_2() {
    check_conv(
        "conv groups 2",
        &[2, 4, 6, 5],
        &[6, 2, 3, 3],
        opts([1, 1], [1, 1], [1, 1], 2),
    );
    check_conv(
        "conv groups 2 strided",
        &[2, 4, 7, 6],
        &[4, 2, 3, 2],
        opts([2, 2], [1, 0], [2, 1], 2),
    );
}

#[test]
fn conv2d_depthwise() {
    check_conv(
        "depthwise",
        &[2, 3, 6, 5],
        &[3, 1, 3, 3],
        opts([1, 1], [1, 1], [1, 1], 3),
    );
    // Channel multiplier 2, strided.
    check_conv(
        "depthwise x2",
        &[2, 3, 7, 6],
        &[6, 1, 3, 3],
        opts([2, 2], [1, 1], [1, 1], 3),
    );
}

#[test]
fn conv2d_one_input_wanted_at_a_time() {
    let (x, w) = (
        rand(&[1, 2, 5, 5], -1.0, 1.0, 3),
        rand(&[2, 2, 3, 3], -1.0, 1.0, 4),
    );
    let f =
        |g: &mut Graph, t: &[Tensor]| g.conv2d(t[0], t[1], None, opts([2, 2], [1, 1], [1, 1], 1));
    check(
        "conv dx only",
        &f,
        &[x.clone(), w.clone()],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    check("conv dw only", &f, &[x, w], &[1], EPS, RTOL, ATOL);
}

/// `dx` and `dw` of `sum(conv2d(x, w) * wts)` in float64, straight from the definition.
fn conv_grads_f64(
    x: &HostTensor,
    w: &HostTensor,
    wts: &HostTensor,
    o: &Conv2dOptions,
) -> (Vec<f32>, Vec<f32>) {
    let (xd, wd, yd) = (x.dims(), w.dims(), wts.dims());
    let (xv, wv, dy) = (
        x.to_f32().unwrap(),
        w.to_f32().unwrap(),
        wts.to_f32().unwrap(),
    );
    let (cg, og) = (wd[1], wd[0] / o.groups);
    let mut dx = vec![0f64; xv.len()];
    let mut dw = vec![0f64; wv.len()];
    for n in 0..yd[0] {
        for oc in 0..yd[1] {
            let grp = oc / og;
            for y in 0..yd[2] {
                for xx in 0..yd[3] {
                    let d = dy[((n * yd[1] + oc) * yd[2] + y) * yd[3] + xx] as f64;
                    for c in 0..cg {
                        let ci = grp * cg + c;
                        for i in 0..wd[2] {
                            let r = (y * o.stride[0] + i * o.dilation[0]) as isize
                                - o.padding[0] as isize;
                            if r < 0 || r >= xd[2] as isize {
                                continue;
                            }
                            for j in 0..wd[3] {
                                let q = (xx * o.stride[1] + j * o.dilation[1]) as isize
                                    - o.padding[1] as isize;
                                if q < 0 || q >= xd[3] as isize {
                                    continue;
                                }
                                let xi =
                                    ((n * xd[1] + ci) * xd[2] + r as usize) * xd[3] + q as usize;
                                let wi = ((oc * cg + c) * wd[2] + i) * wd[3] + j;
                                dx[xi] += d * wv[wi] as f64;
                                dw[wi] += d * xv[xi] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|a| a as f32).collect();
    (f(dx), f(dw))
}

/// Every device, for `gradients_with(conv2d(x, w), [x, w], [dy])`.
fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

#[test]
fn conv2d_weight_gradient_tiled_past_the_loop_budget() {
    // dy's window is 183 x 183 outputs: 183·184 loop iterations is past the 32,768 one
    // invocation may run, so the weight gradient is summed over two tiles of rows.
    let o = opts([1, 1], [1, 1], [2, 2], 1);
    let (xs, ws, ys) = ([1, 2, 185, 185], [3, 2, 3, 3], [1, 3, 183, 183]);
    let (x, w, dy) = (
        rand(&xs, -1.0, 1.0, 21),
        rand(&ws, -1.0, 1.0, 22),
        rand(&ys, -1.0, 1.0, 23),
    );
    let mut g = Graph::new();
    let (xt, wt) = (
        g.constant(x.clone()).unwrap(),
        g.constant(w.clone()).unwrap(),
    );
    let dyt = g.constant(dy.clone()).unwrap();
    let y = g.conv2d(xt, wt, None, o).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), ys);
    let grads = g.gradients_with(&[y], &[xt, wt], Some(&[dyt])).unwrap();
    let (dx, dw) = (grads[0].unwrap(), grads[1].unwrap());
    let (want_dx, want_dw) = conv_grads_f64(&x, &w, &dy, &o);
    let want_dx = HostTensor::new(xs.to_vec(), want_dx).unwrap();
    let want_dw = HostTensor::new(ws.to_vec(), want_dw).unwrap();
    for dev in devices() {
        let got = session_on(&g, dev).run(&[], &[dx, dw]).unwrap();
        assert_close(&format!("tiled dx on {dev}"), &got[0], &want_dx, 1e-4, 1e-4);
        // Each weight gradient sums 33,489 products of values in [-1, 1).
        assert_close(&format!("tiled dw on {dev}"), &got[1], &want_dw, 1e-4, 2e-2);
    }
}

#[test]
fn conv2d_gradients_match_float64_on_every_device() {
    // An independent reference besides finite differences, with groups and every option on.
    let o = opts([2, 1], [1, 2], [1, 2], 2);
    let (x, w, dy) = (
        rand(&[3, 4, 9, 8], -1.0, 1.0, 31),
        rand(&[6, 2, 3, 2], -1.0, 1.0, 32),
        rand(&[3, 6, 5, 10], -1.0, 1.0, 33),
    );
    let mut g = Graph::new();
    let (xt, wt) = (
        g.constant(x.clone()).unwrap(),
        g.constant(w.clone()).unwrap(),
    );
    let dyt = g.constant(dy.clone()).unwrap();
    let y = g.conv2d(xt, wt, None, o).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), [3, 6, 5, 10]);
    let grads = g.gradients_with(&[y], &[xt, wt], Some(&[dyt])).unwrap();
    let (want_dx, want_dw) = conv_grads_f64(&x, &w, &dy, &o);
    let want_dx = HostTensor::new(vec![3, 4, 9, 8], want_dx).unwrap();
    let want_dw = HostTensor::new(vec![6, 2, 3, 2], want_dw).unwrap();
    for dev in devices() {
        let got = session_on(&g, dev)
            .run(&[], &[grads[0].unwrap(), grads[1].unwrap()])
            .unwrap();
        assert_close(&format!("dx on {dev}"), &got[0], &want_dx, 1e-5, 1e-5);
        assert_close(&format!("dw on {dev}"), &got[1], &want_dw, 1e-5, 1e-4);
    }
}

#[test]
fn conv2d_empty_batch_gives_zero_weight_gradient() {
    let mut g = Graph::new();
    let x = g.placeholder("x", vec![0, 2, 5, 5], DType::F32).unwrap();
    let w = g.constant(rand(&[3, 2, 3, 3], -1.0, 1.0, 5)).unwrap();
    let y = g.conv2d(x, w, None, Conv2dOptions::default()).unwrap();
    let l = g.sum(y, wgflow::Axes::All, false).unwrap();
    let grads = g.gradients(l, &[x, w]).unwrap();
    let feed = HostTensor::new(vec![0, 2, 5, 5], Vec::<f32>::new()).unwrap();
    for dev in devices() {
        let got = session_on(&g, dev)
            .run(
                &[(x, feed.clone())],
                &[grads[0].unwrap(), grads[1].unwrap()],
            )
            .unwrap();
        assert_eq!(got[0].dims(), [0, 2, 5, 5], "dx on {dev}");
        assert_eq!(got[1].dims(), [3, 2, 3, 3], "dw on {dev}");
        assert!(
            got[1].to_f32().unwrap().iter().all(|&v| v == 0.0),
            "dw on {dev}"
        );
    }
}

// ---------------------------------------------------------------- pooling

/// Values `0.05·k` for a shuffled `k`: no two cells tie, and neighbours in value are 0.05
/// apart, far beyond the finite-difference step, so no argmax flips.
fn distinct(shape: &[usize], seed: u64) -> HostTensor {
    let n: usize = shape.iter().product();
    let keys = uniform(n, 0.0, 1.0, seed);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]));
    let mut v = vec![0f32; n];
    for (rank, &i) in order.iter().enumerate() {
        v[i] = 0.05 * rank as f32 - 1.0;
    }
    HostTensor::new(shape.to_vec(), v).unwrap()
}

fn check_pool(what: &str, max: bool, x: HostTensor, k: [usize; 2], s: [usize; 2], p: [usize; 2]) {
    check(
        what,
        &|g, t| {
            if max {
                g.max_pool2d(t[0], k, s, p)
            } else {
                g.avg_pool2d(t[0], k, s, p)
            }
        },
        &[x],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn avg_pool_gradients() {
    // Padded cells are left out of each window's count, as the forward divides.
    check_pool(
        "avg 3/2/1",
        false,
        rand(&[2, 3, 7, 6], -1.0, 1.0, 41),
        [3, 3],
        [2, 2],
        [1, 1],
    );
    // 7 rows at stride 2 with a 2-row window: the last row is never read.
    check_pool(
        "avg 2/2/0",
        false,
        rand(&[2, 3, 7, 6], -1.0, 1.0, 42),
        [2, 2],
        [2, 2],
        [0, 0],
    );
    check_pool(
        "avg mixed",
        false,
        rand(&[1, 2, 6, 7], -1.0, 1.0, 43),
        [3, 2],
        [1, 2],
        [1, 1],
    );
    check_pool(
        "avg global",
        false,
        rand(&[2, 2, 4, 3], -1.0, 1.0, 44),
        [4, 3],
        [1, 1],
        [0, 0],
    );
}

#[test]
fn max_pool_gradients() {
    check_pool(
        "max 3/2/1",
        true,
        distinct(&[2, 3, 7, 6], 51),
        [3, 3],
        [2, 2],
        [1, 1],
    );
    check_pool(
        "max 2/2/0",
        true,
        distinct(&[2, 3, 7, 6], 52),
        [2, 2],
        [2, 2],
        [0, 0],
    );
    check_pool(
        "max mixed",
        true,
        distinct(&[1, 2, 6, 7], 53),
        [3, 2],
        [2, 1],
        [1, 1],
    );
    // Overlapping windows (stride 1) send several windows' dy to one cell.
    check_pool(
        "max overlapping",
        true,
        distinct(&[1, 2, 5, 5], 54),
        [3, 3],
        [1, 1],
        [1, 1],
    );
}

/// `dx` of `max_pool2d(x)` with the incoming gradient `dy`, on every device.
fn max_pool_dx(
    x: HostTensor,
    dy: HostTensor,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    want: &[f32],
) {
    let mut g = Graph::new();
    let xt = g.constant(x.clone()).unwrap();
    let dyt = g.constant(dy).unwrap();
    let y = g.max_pool2d(xt, k, s, p).unwrap();
    let dx = g.gradients_with(&[y], &[xt], Some(&[dyt])).unwrap()[0].unwrap();
    let want = HostTensor::new(x.shape().clone(), want.to_vec()).unwrap();
    for dev in devices() {
        let got = session_on(&g, dev).run(&[], &[dx]).unwrap();
        assert_close(&format!("max pool dx on {dev}"), &got[0], &want, 0.0, 0.0);
    }
}

#[test]
fn max_pool_tie_goes_to_the_first_maximum() {
    // 2x2 windows at stride 1 over
    //   1 3 3
    //   3 2 0
    //   1 3 1
    // window (0,0) = [1 3; 3 2]: first 3 at (0,1); window (0,1) = [3 3; 2 0]: (0,1);
    // window (1,0) = [3 2; 1 3]: (1,0); window (1,1) = [2 0; 3 1]: (2,1).
    let x = HostTensor::new(vec![1, 1, 3, 3], vec![1f32, 3., 3., 3., 2., 0., 1., 3., 1.]).unwrap();
    let dy = HostTensor::new(vec![1, 1, 2, 2], vec![1f32, 2., 4., 8.]).unwrap();
    let want = [0., 3., 0., 4., 0., 0., 0., 8., 0.];
    max_pool_dx(x, dy, [2, 2], [1, 1], [0, 0], &want);
}

#[test]
fn max_pool_padding_never_wins_even_at_minus_infinity() {
    // Windows [pad, -inf, -inf] and [-inf, -inf, pad]: both maxima are -inf, and the first
    // in-bounds cell gets each window's dy, never the padding before it.
    let inf = f32::INFINITY;
    let x = HostTensor::new(vec![1, 1, 1, 2], vec![-inf, -inf]).unwrap();
    let dy = HostTensor::new(vec![1, 1, 1, 2], vec![1f32, 2.]).unwrap();
    max_pool_dx(x, dy, [1, 3], [1, 1], [0, 1], &[3., 0.]);
}

#[test]
fn max_pool_nan_gets_the_gradient() {
    // The forward propagates NaN; its gradient goes to the first NaN of the window (the
    // cell the output came from), as in PyTorch.
    let nan = f32::NAN;
    let x = HostTensor::new(vec![1, 1, 2, 3], vec![1f32, nan, 7., nan, 5., 2.]).unwrap();
    let dy = HostTensor::new(vec![1, 1, 1, 2], vec![1f32, 10.]).unwrap();
    // Windows [1 nan; nan 5] → (0,1); [nan 7; 5 2] → (0,1) again.
    max_pool_dx(x, dy, [2, 2], [1, 1], [0, 0], &[0., 11., 0., 0., 0., 0.]);
}

// ---------------------------------------------------------------- composites
// Built from primitives, so their gradients come from the primitives' rules (elementwise,
// reduce, matmul, movement) on branches gelem and gshape; ignored until those land (they
// pass with both merged).

#[test]
fn conv2d_with_bias() {
    check(
        "conv2d + bias",
        &|g, t| g.conv2d(t[0], t[1], Some(t[2]), opts([2, 2], [1, 1], [1, 1], 1)),
        &[
            rand(&[2, 3, 6, 5], -1.0, 1.0, 61),
            rand(&[4, 3, 3, 3], -1.0, 1.0, 62),
            rand(&[4], -1.0, 1.0, 63),
        ],
        &[0, 1, 2],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn softmax_and_log_softmax() {
    let x = rand(&[3, 5], -2.0, 2.0, 71);
    check(
        "softmax",
        &|g, t| g.softmax(t[0], -1),
        std::slice::from_ref(&x),
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "softmax axis 0",
        &|g, t| g.softmax(t[0], 0),
        std::slice::from_ref(&x),
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "log_softmax",
        &|g, t| g.log_softmax(t[0], 1),
        &[x],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn layer_norm_with_gamma_and_beta() {
    check(
        "layer_norm",
        &|g, t| g.layer_norm(t[0], Some(t[1]), Some(t[2]), -1, 1e-5),
        &[
            rand(&[4, 6], -2.0, 2.0, 81),
            rand(&[6], 0.5, 1.5, 82),
            rand(&[6], -1.0, 1.0, 83),
        ],
        &[0, 1, 2],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn batch_norm_every_input() {
    check(
        "batch_norm",
        &|g, t| g.batch_norm(t[0], t[1], t[2], t[3], t[4], 1e-5),
        &[
            rand(&[2, 3, 4, 2], -2.0, 2.0, 91),
            rand(&[3], -0.5, 0.5, 92),
            rand(&[3], 0.5, 1.5, 93),
            rand(&[3], 0.5, 1.5, 94),
            rand(&[3], -1.0, 1.0, 95),
        ],
        &[0, 1, 2, 3, 4],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn linear_with_bias() {
    check(
        "linear",
        &|g, t| g.linear(t[0], t[1], Some(t[2])),
        &[
            rand(&[4, 5], -1.0, 1.0, 101),
            rand(&[5, 3], -1.0, 1.0, 102),
            rand(&[3], -1.0, 1.0, 103),
        ],
        &[0, 1, 2],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn activations() {
    // Away from 0, where leaky_relu and elu have kinks.
    let v: Vec<f32> = uniform(24, 0.2, 2.0, 111)
        .iter()
        .enumerate()
        .map(|(i, &a)| if i % 2 == 0 { a } else { -a })
        .collect();
    let x = HostTensor::new(vec![4, 6], v).unwrap();
    let one = |name: &str, f: &dyn Fn(&mut Graph, Tensor) -> wgflow::Result<Tensor>| {
        check(
            name,
            &|g, t| f(g, t[0]),
            std::slice::from_ref(&x),
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    };
    one("gelu", &|g, t| g.gelu(t, false));
    one("gelu tanh", &|g, t| g.gelu(t, true));
    one("silu", &|g, t| g.silu(t));
    one("leaky_relu", &|g, t| g.leaky_relu(t, 0.1));
    one("elu", &|g, t| g.elu(t, 1.0));
}

#[test]
fn small_cnn_block() {
    // conv (strided, biased) → silu → max pool → avg pool: the rules chained, every parameter.
    check(
        "cnn block",
        &|g, t| {
            let y = g.conv2d(t[0], t[1], Some(t[2]), opts([1, 1], [1, 1], [1, 1], 1))?;
            let y = g.silu(y)?;
            let y = g.max_pool2d(y, [2, 2], [2, 2], [0, 0])?;
            g.avg_pool2d(y, [2, 2], [1, 1], [1, 1])
        },
        &[
            rand(&[2, 2, 6, 5], -1.0, 1.0, 121),
            rand(&[3, 2, 3, 3], -1.0, 1.0, 122),
            rand(&[3], -0.5, 0.5, 123),
        ],
        &[0, 1, 2],
        EPS,
        RTOL,
        ATOL,
    );
}
