//! The backward primitives of conv2d and pooling (`conv2d_backprop_input`,
//! `conv2d_backprop_filter`, `max_pool2d_grad`, `avg_pool2d_grad`) on cpu:0 and every GPU:
//! against float64 computed here from the definitions, against the composite rules they
//! replace, their own gradients (second order) against float64, graph files, errors, naga,
//! and the plan of a CNN's backward pass (one kernel per gradient, no pad kernels).

use crate::common;
use crate::common::grad::rand;
use crate::common::{gpus, session_on};
use wgflow::compile::StepKind;
use wgflow::ops::nn::reference;
use wgflow::ops::{Kernel, NnGradKernel, NnGradOp, Window};
use wgflow::{Axes, Conv2dOptions, DType, Device, Graph, HostTensor, Shape, Tensor};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

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

fn f64s(t: &HostTensor) -> Vec<f64> {
    t.to_f32().unwrap().iter().map(|&v| f64::from(v)).collect()
}

fn out_hw(hw: [usize; 2], k: [usize; 2], o: &Conv2dOptions) -> [usize; 2] {
    std::array::from_fn(|a| {
        let span = o.dilation[a] * (k[a] - 1) + 1;
        (hw[a] + 2 * o.padding[a] - span) / o.stride[a] + 1
    })
}

/// Every (output, weight tap, input cell) triple of a forward conv2d, in float64:
/// `f(n, o, oy, ox, c_in, c_w, ki, kj, iy, ix)`.
#[allow(clippy::type_complexity)]
fn conv_triples(
    xs: [usize; 4],
    ws: [usize; 4],
    o: &Conv2dOptions,
    mut f: impl FnMut([usize; 4], [usize; 4], [usize; 4]),
) {
    let [n, _, h, wd] = xs;
    let [oc, cg, kh, kw] = ws;
    let og = oc / o.groups;
    let [oh, ow] = out_hw([h, wd], [kh, kw], o);
    for b in 0..n {
        for oo in 0..oc {
            let g = oo / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    for c in 0..cg {
                        for ki in 0..kh {
                            let iy =
                                (oy * o.stride[0] + ki * o.dilation[0]).checked_sub(o.padding[0]);
                            let Some(iy) = iy.filter(|&v| v < h) else {
                                continue;
                            };
                            for kj in 0..kw {
                                let ix = (ox * o.stride[1] + kj * o.dilation[1])
                                    .checked_sub(o.padding[1]);
                                let Some(ix) = ix.filter(|&v| v < wd) else {
                                    continue;
                                };
                                f([b, oo, oy, ox], [oo, c, ki, kj], [b, g * cg + c, iy, ix]);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn at(d: [usize; 4], i: [usize; 4]) -> usize {
    ((i[0] * d[1] + i[1]) * d[2] + i[2]) * d[3] + i[3]
}

/// (y, dx, dw) of `sum(conv2d(x, w) * dy)` in float64.
fn conv_f64(
    x: &[f64],
    w: &[f64],
    dy: &[f64],
    xs: [usize; 4],
    ws: [usize; 4],
    o: &Conv2dOptions,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let [oh, ow] = out_hw([xs[2], xs[3]], [ws[2], ws[3]], o);
    let ys = [xs[0], ws[0], oh, ow];
    let mut y = vec![0.0; ys.iter().product()];
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; w.len()];
    conv_triples(xs, ws, o, |yi, wi, xi| {
        let (yi, wi, xi) = (at(ys, yi), at(ws, wi), at(xs, xi));
        y[yi] += x[xi] * w[wi];
        dx[xi] += dy[yi] * w[wi];
        dw[wi] += dy[yi] * x[xi];
    });
    (y, dx, dw)
}

fn assert_near(what: &str, got: &HostTensor, want: &[f64], tol: f64) {
    let g = got.to_f32().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: size");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        if b.is_nan() {
            assert!(a.is_nan(), "{what}[{i}]: {a} vs NaN");
            continue;
        }
        assert!(
            (f64::from(a) - b).abs() <= tol * scale,
            "{what}[{i}]: {a} vs {b} (tolerance {tol} of {scale})"
        );
    }
}

struct ConvCase {
    x: [usize; 4],
    w: [usize; 4],
    o: Conv2dOptions,
}

fn conv_cases() -> Vec<ConvCase> {
    let c = |x, w, o| ConvCase { x, w, o };
    vec![
        c([2, 3, 7, 6], [4, 3, 3, 2], opts([1, 1], [0, 0], [1, 1], 1)),
        c([2, 3, 7, 6], [4, 3, 3, 2], opts([2, 2], [1, 1], [1, 1], 1)),
        c([1, 4, 9, 8], [6, 2, 3, 3], opts([2, 1], [1, 2], [2, 1], 2)),
        c([1, 4, 6, 6], [4, 1, 3, 3], opts([1, 1], [1, 1], [1, 1], 4)),
        c([1, 2, 5, 5], [2, 2, 1, 1], opts([3, 3], [0, 0], [1, 1], 1)),
        // The CNN of W7 and train_digits: 1 -> 16 -> 32 channels, 3x3, padding 1.
        c([3, 1, 8, 8], [16, 1, 3, 3], opts([1, 1], [1, 1], [1, 1], 1)),
        c(
            [2, 16, 4, 4],
            [32, 16, 3, 3],
            opts([1, 1], [1, 1], [1, 1], 1),
        ),
        // The filter gradient split into chunks of positions (2 of 1024 and 1600 in all).
        c(
            [4, 1, 20, 20],
            [1, 1, 3, 3],
            opts([1, 1], [1, 1], [1, 1], 1),
        ),
    ]
}

fn conv_inputs(c: &ConvCase, seed: u64) -> (HostTensor, HostTensor, HostTensor) {
    let [oh, ow] = out_hw([c.x[2], c.x[3]], [c.w[2], c.w[3]], &c.o);
    (
        rand(&c.x, -1.0, 1.0, seed),
        rand(&c.w, -1.0, 1.0, seed + 1),
        rand(&[c.x[0], c.w[0], oh, ow], -1.0, 1.0, seed + 2),
    )
}

/// Both conv gradients, as primitives and as the composite rules, against float64.
fn check_conv_case(c: &ConvCase, seed: u64, tol: f64) {
    let (x, w, dy) = conv_inputs(c, seed);
    let (_, want_dx, want_dw) = conv_f64(&f64s(&x), &f64s(&w), &f64s(&dy), c.x, c.w, &c.o);
    let mut g = Graph::new();
    let (xt, wt, dyt) = (
        g.constant(x).unwrap(),
        g.constant(w).unwrap(),
        g.constant(dy).unwrap(),
    );
    let hw = [c.x[2], c.x[3]];
    let k = [c.w[2], c.w[3]];
    let dx = g.conv2d_backprop_input(dyt, wt, hw, c.o).unwrap();
    let dw = g.conv2d_backprop_filter(xt, dyt, k, c.o).unwrap();
    let dx_ref = reference::conv2d_backprop_input(&mut g, dyt, wt, hw, c.o).unwrap();
    let dw_ref = reference::conv2d_backprop_filter(&mut g, xt, dyt, k, c.o).unwrap();
    assert_eq!(g.shape(dx).unwrap().dims(), &c.x);
    assert_eq!(g.shape(dw).unwrap().dims(), &c.w);
    for d in devices() {
        let mut s = session_on(&g, d);
        let out = s.run(&[], &[dx, dw, dx_ref, dw_ref]).unwrap();
        let what = format!("{:?} {:?} {:?} on {d}", c.x, c.w, c.o);
        assert_near(&format!("dx {what}"), &out[0], &want_dx, tol);
        assert_near(&format!("dw {what}"), &out[1], &want_dw, tol);
        assert_near(&format!("composite dx {what}"), &out[2], &want_dx, tol);
        assert_near(&format!("composite dw {what}"), &out[3], &want_dw, tol);
    }
}

#[test]
fn conv_gradients_match_float64_and_the_composite_rules() {
    for (i, c) in conv_cases().iter().enumerate() {
        check_conv_case(c, 100 + 10 * i as u64, 1e-5);
    }
}

/// Past the loop budget: the input gradient sums output channels in chunks (2,600 output
/// channels × 13 iterations > 32,768), the filter gradient (n, oy, ox) positions (33,800 >
/// 32,768); a reduction adds the chunks on every device.
#[test]
fn conv_gradients_split_past_the_loop_budget() {
    let big_o = ConvCase {
        x: [1, 1, 3, 3],
        w: [2600, 1, 3, 3],
        o: opts([1, 1], [1, 1], [1, 1], 1),
    };
    let big_q = ConvCase {
        x: [2, 1, 130, 130],
        w: [1, 1, 3, 3],
        o: opts([1, 1], [1, 1], [1, 1], 1),
    };
    for (c, name) in [(&big_o, "channels"), (&big_q, "positions")] {
        let mut g = Graph::new();
        let (x, w, dy) = conv_inputs(c, 7);
        let (xt, wt, dyt) = (
            g.constant(x).unwrap(),
            g.constant(w).unwrap(),
            g.constant(dy).unwrap(),
        );
        let dx = g
            .conv2d_backprop_input(dyt, wt, [c.x[2], c.x[3]], c.o)
            .unwrap();
        let dw = g
            .conv2d_backprop_filter(xt, dyt, [c.w[2], c.w[3]], c.o)
            .unwrap();
        let plan = session_on(&g, Device::Cpu).plan(&[dx, dw]).unwrap();
        assert!(
            plan.describe().contains("sum over axes [0]"),
            "{name}: {}",
            plan.describe()
        );
    }
    check_conv_case(&big_o, 21, 1e-5);
    check_conv_case(&big_q, 31, 1e-4);
}

/// First maximum of each window in float64 (`None` when all of it is padding).
fn pool_f64(
    x: &[f64],
    xs: [usize; 4],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    mut f: impl FnMut(usize, usize, &[usize]),
) -> [usize; 2] {
    let [n, c, h, w] = xs;
    let o = [
        (h + 2 * p[0] - k[0]) / s[0] + 1,
        (w + 2 * p[1] - k[1]) / s[1] + 1,
    ];
    for nc in 0..n * c {
        for oy in 0..o[0] {
            for ox in 0..o[1] {
                let mut cells = Vec::new();
                for ki in 0..k[0] {
                    for kj in 0..k[1] {
                        let iy = (oy * s[0] + ki).checked_sub(p[0]).filter(|&v| v < h);
                        let ix = (ox * s[1] + kj).checked_sub(p[1]).filter(|&v| v < w);
                        if let (Some(iy), Some(ix)) = (iy, ix) {
                            cells.push((nc * h + iy) * w + ix);
                        }
                    }
                }
                let _ = x;
                f(nc, oy * o[1] + ox, &cells);
            }
        }
    }
    o
}

/// max and avg pooling's gradients in float64: the max goes to the first cell equal to
/// the window's maximum (the first NaN when there is one).
fn pool_grads_f64(
    x: &[f64],
    dy: &[f64],
    xs: [usize; 4],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut dmax = vec![0.0; x.len()];
    let mut davg = vec![0.0; x.len()];
    let mut gathered = Vec::new();
    let o = pool_f64(x, xs, k, s, p, |_, _, _| {});
    let per = o[0] * o[1];
    pool_f64(x, xs, k, s, p, |nc, i, cells| {
        let g = dy[nc * per + i];
        let first = match cells.iter().find(|&&c| x[c].is_nan()) {
            Some(&c) => c,
            None => {
                let m = cells
                    .iter()
                    .map(|&c| x[c])
                    .fold(f64::NEG_INFINITY, f64::max);
                *cells.iter().find(|&&c| x[c] == m).unwrap()
            }
        };
        dmax[first] += g;
        gathered.push(first);
        for &c in cells {
            davg[c] += g / cells.len() as f64;
        }
    });
    let picked = gathered.iter().map(|&c| c as f64).collect();
    (dmax, davg, picked)
}

#[test]
fn pool_gradients_match_float64_and_the_composite_rules_with_ties_nan_and_infinities() {
    type Case = ([usize; 4], [usize; 2], [usize; 2], [usize; 2]);
    let cases: [Case; 7] = [
        ([2, 3, 8, 8], [2, 2], [2, 2], [0, 0]),
        ([2, 2, 9, 7], [3, 3], [2, 2], [0, 0]),
        ([1, 2, 6, 6], [3, 3], [1, 1], [0, 0]),
        ([1, 2, 7, 9], [3, 3], [2, 2], [1, 1]),
        ([1, 1, 6, 5], [3, 2], [1, 1], [1, 1]),
        ([2, 2, 5, 7], [2, 2], [1, 2], [1, 0]),
        ([1, 1, 4, 4], [4, 4], [1, 1], [2, 2]),
    ];
    for (ci, &(xs, k, s, p)) in cases.iter().enumerate() {
        // Values on a coarse grid, so windows tie; a NaN, and -inf / +inf cells.
        let n: usize = xs.iter().product();
        let mut xv: Vec<f32> = common::grad::uniform(n, 0.0, 4.0, 50 + ci as u64)
            .iter()
            .map(|v| v.floor() - 2.0)
            .collect();
        xv[n / 3] = f32::NAN;
        xv[n / 2] = f32::NEG_INFINITY;
        xv[n - 1] = f32::INFINITY;
        if ci == 0 {
            // A whole window of -inf, and one of equal values.
            for j in [0, 1, 8, 9] {
                xv[j] = f32::NEG_INFINITY;
            }
            for j in [2, 3, 10, 11] {
                xv[j] = 1.0;
            }
        }
        let x = HostTensor::new(xs.to_vec(), xv).unwrap();
        let x64 = f64s(&x);
        let o = pool_f64(&x64, xs, k, s, p, |_, _, _| {});
        let dy = rand(&[xs[0], xs[1], o[0], o[1]], -1.0, 1.0, 70 + ci as u64);
        let (want_max, want_avg, _) = pool_grads_f64(&x64, &f64s(&dy), xs, k, s, p);
        // avg of a window holding ±inf or NaN does not matter for its gradient.
        let mut g = Graph::new();
        let (xt, dyt) = (g.constant(x).unwrap(), g.constant(dy).unwrap());
        let hw = [xs[2], xs[3]];
        let dmax = g.max_pool2d_grad(xt, dyt, k, s, p).unwrap();
        let davg = g.avg_pool2d_grad(dyt, hw, k, s, p).unwrap();
        let rmax = reference::max_pool2d_grad(&mut g, xt, dyt, k, s, p).unwrap();
        let ravg = reference::avg_pool2d_grad(&mut g, dyt, hw, k, s, p).unwrap();
        for d in devices() {
            let out = session_on(&g, d)
                .run(&[], &[dmax, davg, rmax, ravg])
                .unwrap();
            let what = format!("pool {xs:?} k{k:?} s{s:?} p{p:?} on {d}");
            assert_near(&format!("max {what}"), &out[0], &want_max, 1e-6);
            assert_near(&format!("avg {what}"), &out[1], &want_avg, 1e-6);
            assert_near(&format!("composite max {what}"), &out[2], &want_max, 1e-6);
            assert_near(&format!("composite avg {what}"), &out[3], &want_avg, 1e-6);
        }
    }
}

/// `sum(f(..) * r)`'s gradients with respect to the primitive's inputs.
fn second_order(g: &mut Graph, out: Tensor, r: Tensor, wrt: &[Tensor]) -> Vec<Tensor> {
    let prod = g.mul(out, r).unwrap();
    let loss = g.sum(prod, Axes::All, false).unwrap();
    g.gradients(loss, wrt)
        .unwrap()
        .into_iter()
        .map(|t| t.unwrap())
        .collect()
}

#[test]
fn the_backward_primitives_have_gradients() {
    let c = ConvCase {
        x: [2, 4, 7, 6],
        w: [6, 2, 3, 2],
        o: opts([2, 1], [1, 1], [1, 2], 2),
    };
    let (x, w, dy) = conv_inputs(&c, 5);
    let rx = rand(&c.x, -1.0, 1.0, 8);
    let rw = rand(&c.w, -1.0, 1.0, 9);
    let (x64, w64, dy64) = (f64s(&x), f64s(&w), f64s(&dy));
    // d/d(dy) sum(dx(dy, w) * rx) = conv2d(rx, w); d/dw = filter gradient of rx against dy.
    let (want_ddy_in, _, want_dw_in) = conv_f64(&f64s(&rx), &w64, &dy64, c.x, c.w, &c.o);
    // d/dx sum(dw(x, dy) * rw) = input gradient of dy against rw; d/d(dy) = conv2d(x, rw).
    let (want_ddy_f, want_dx_f, _) = conv_f64(&x64, &f64s(&rw), &dy64, c.x, c.w, &c.o);
    let mut g = Graph::new();
    let (xt, wt, dyt) = (
        g.placeholder("x", c.x, DType::F32).unwrap(),
        g.placeholder("w", c.w, DType::F32).unwrap(),
        g.placeholder("dy", dy.shape().0.clone(), DType::F32)
            .unwrap(),
    );
    let (rxt, rwt) = (g.constant(rx.clone()).unwrap(), g.constant(rw).unwrap());
    let dx = g
        .conv2d_backprop_input(dyt, wt, [c.x[2], c.x[3]], c.o)
        .unwrap();
    let dw = g
        .conv2d_backprop_filter(xt, dyt, [c.w[2], c.w[3]], c.o)
        .unwrap();
    let gi = second_order(&mut g, dx, rxt, &[dyt, wt]);
    let gf = second_order(&mut g, dw, rwt, &[xt, dyt]);
    // Pools: d/d(dy) sum(avg_grad(dy) * r) = avg_pool2d(r); max: r at each first maximum.
    let ps = [2, 3, 6, 6];
    let px = rand(&ps, -1.0, 1.0, 3);
    let pdy = rand(&[2, 3, 3, 3], -1.0, 1.0, 4);
    let pr = rand(&ps, -1.0, 1.0, 6);
    let pxt = g.placeholder("px", ps, DType::F32).unwrap();
    let pdyt = g.placeholder("pdy", [2, 3, 3, 3], DType::F32).unwrap();
    let prt = g.constant(pr.clone()).unwrap();
    let dmax = g
        .max_pool2d_grad(pxt, pdyt, [3, 3], [2, 2], [1, 1])
        .unwrap();
    let davg = g
        .avg_pool2d_grad(pdyt, [6, 6], [3, 3], [2, 2], [1, 1])
        .unwrap();
    let gm = second_order(&mut g, dmax, prt, &[pdyt, pxt]);
    let ga = second_order(&mut g, davg, prt, &[pdyt]);
    let pr64 = f64s(&pr);
    let (_, _, firsts) = pool_grads_f64(&f64s(&px), &f64s(&pdy), ps, [3, 3], [2, 2], [1, 1]);
    let want_gather: Vec<f64> = firsts.iter().map(|&c| pr64[c as usize]).collect();
    let mut want_avg = vec![0.0; 2 * 3 * 9];
    pool_f64(&pr64, ps, [3, 3], [2, 2], [1, 1], |nc, i, cells| {
        want_avg[nc * 9 + i] = cells.iter().map(|&c| pr64[c]).sum::<f64>() / cells.len() as f64;
    });
    let feeds = [(xt, x), (wt, w), (dyt, dy), (pxt, px), (pdyt, pdy)];
    for d in devices() {
        let fetch = [gi[0], gi[1], gf[0], gf[1], gm[0], gm[1], ga[0]];
        let out = session_on(&g, d).run(&feeds, &fetch).unwrap();
        assert_near(
            &format!("d(dy) of backprop_input on {d}"),
            &out[0],
            &want_ddy_in,
            1e-5,
        );
        assert_near(
            &format!("dw of backprop_input on {d}"),
            &out[1],
            &want_dw_in,
            1e-5,
        );
        assert_near(
            &format!("dx of backprop_filter on {d}"),
            &out[2],
            &want_dx_f,
            1e-5,
        );
        assert_near(
            &format!("d(dy) of backprop_filter on {d}"),
            &out[3],
            &want_ddy_f,
            1e-5,
        );
        assert_near(
            &format!("d(dy) of max_pool2d_grad on {d}"),
            &out[4],
            &want_gather,
            1e-6,
        );
        assert_near(
            &format!("dx of max_pool2d_grad on {d}"),
            &out[5],
            &vec![0.0; 2 * 3 * 36],
            0.0,
        );
        assert_near(
            &format!("d(dy) of avg_pool2d_grad on {d}"),
            &out[6],
            &want_avg,
            1e-6,
        );
    }
}

/// W7's CNN: its backward pass runs one kernel per conv and pool gradient, and none of the
/// composite rules' pads, stacks or scans.
#[test]
fn a_cnn_backward_pass_runs_the_primitives() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [64, 1, 8, 8], DType::F32).unwrap();
    let w1 = g.constant(rand(&[16, 1, 3, 3], -0.5, 0.5, 1)).unwrap();
    let w2 = g.constant(rand(&[32, 16, 3, 3], -0.5, 0.5, 2)).unwrap();
    let o = opts([1, 1], [1, 1], [1, 1], 1);
    let h = g.conv2d(x, w1, None, o).unwrap();
    let h = g.relu(h).unwrap();
    let h = g.max_pool2d(h, [2, 2], [2, 2], [0, 0]).unwrap();
    let h = g.conv2d(h, w2, None, o).unwrap();
    let h = g.relu(h).unwrap();
    let h = g.max_pool2d(h, [2, 2], [2, 2], [0, 0]).unwrap();
    let loss = g.sum(h, Axes::All, false).unwrap();
    let grads: Vec<Tensor> = g
        .gradients(loss, &[w1, w2])
        .unwrap()
        .into_iter()
        .map(|t| t.unwrap())
        .collect();
    let plan = session_on(&g, Device::Cpu).plan(&grads).unwrap();
    let mut ops = Vec::new();
    for s in &plan.steps {
        if let StepKind::Dispatch { kernel, .. } = &s.kind {
            match kernel {
                Kernel::NnGrad(k) => ops.push(k.op),
                Kernel::Pad(_) | Kernel::Concat(_) | Kernel::Scan(_) => {
                    panic!(
                        "a composite kernel in the backward pass:\n{}",
                        plan.describe()
                    )
                }
                _ => {}
            }
        }
    }
    ops.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(
        ops,
        [
            NnGradOp::ConvFilter,
            NnGradOp::ConvFilter,
            NnGradOp::ConvInput,
            NnGradOp::MaxPool,
            NnGradOp::MaxPool
        ],
        "{}",
        plan.describe()
    );
}

#[test]
fn graph_files_keep_the_backward_primitives() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [1, 4, 7, 6], DType::F32).unwrap();
    let w = g.placeholder("w", [6, 2, 3, 2], DType::F32).unwrap();
    let dy = g.placeholder("dy", [1, 6, 4, 6], DType::F32).unwrap();
    let o = opts([2, 1], [1, 1], [1, 2], 2);
    let a = g.conv2d_backprop_input(dy, w, [7, 6], o).unwrap();
    let b = g.conv2d_backprop_filter(x, dy, [3, 2], o).unwrap();
    let py = g.placeholder("py", [1, 4, 4, 3], DType::F32).unwrap();
    let c = g.max_pool2d_grad(x, py, [3, 2], [2, 2], [1, 0]).unwrap();
    let d = g
        .avg_pool2d_grad(py, [7, 6], [3, 2], [2, 2], [1, 0])
        .unwrap();
    let text = g.to_json().unwrap();
    for op in [
        "conv2d_backprop_input",
        "conv2d_backprop_filter",
        "max_pool2d_grad",
        "avg_pool2d_grad",
    ] {
        assert!(text.contains(op), "{op} in {text}");
    }
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_json().unwrap(), text);
    let feeds = |g: &Graph| -> Vec<(Tensor, HostTensor)> {
        [
            ("x", &[1, 4, 7, 6][..]),
            ("w", &[6, 2, 3, 2]),
            ("dy", &[1, 6, 4, 6]),
            ("py", &[1, 4, 4, 3]),
        ]
        .iter()
        .enumerate()
        .map(|(i, (n, s))| (g.tensor(n).unwrap(), rand(s, -1.0, 1.0, i as u64)))
        .collect()
    };
    let names = [a, b, c, d].map(|t| g.name(t).unwrap().to_string());
    let fa = session_on(&g, Device::Cpu)
        .run(&feeds(&g), &[a, b, c, d])
        .unwrap();
    let hf: Vec<Tensor> = names.iter().map(|n| h.tensor(n).unwrap()).collect();
    let fb = session_on(&h, Device::Cpu).run(&feeds(&h), &hf).unwrap();
    for (p, q) in fa.iter().zip(&fb) {
        assert_eq!(p.words(), q.words());
    }
}

#[test]
fn mismatched_shapes_are_errors_naming_the_op_and_the_call() {
    let mut g = Graph::new();
    let w = g.placeholder("w", [6, 2, 3, 3], DType::F32).unwrap();
    let dy = g.placeholder("dy", [1, 6, 4, 4], DType::F32).unwrap();
    let x = g.placeholder("x", [1, 4, 6, 6], DType::F32).unwrap();
    let o = opts([1, 1], [0, 0], [1, 1], 2);
    // A 3x3 window over 7x7 gives 5x5, not dy's 4x4.
    let e = g
        .conv2d_backprop_input(dy, w, [7, 7], o)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("conv2d_backprop_input") && e.contains("nn_backward.rs") && e.contains("4x4"),
        "{e}"
    );
    let e = g
        .conv2d_backprop_filter(x, dy, [3, 3], opts([1, 1], [0, 0], [1, 1], 3))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("conv2d_backprop_filter") && e.contains("groups"),
        "{e}"
    );
    let e = g
        .max_pool2d_grad(x, dy, [2, 2], [2, 2], [0, 0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_pool2d_grad"), "{e}");
    let e = g
        .avg_pool2d_grad(dy, [8, 8], [2, 2], [2, 2], [2, 2])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("avg_pool2d_grad") && e.contains("padding"),
        "{e}"
    );
    let i = g.placeholder("i", [1, 6, 4, 4], DType::I32).unwrap();
    let e = g
        .conv2d_backprop_input(i, w, [6, 6], o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("f32"), "{e}");
}

#[test]
fn every_backward_kernel_validates_with_naga() {
    let window = |k: [usize; 2], s: [usize; 2], p: [usize; 2], d: [usize; 2]| Window {
        kernel: k,
        stride: s,
        padding: p,
        dilation: d,
    };
    let mut kernels = Vec::new();
    for op in [NnGradOp::ConvInput, NnGradOp::ConvFilter] {
        for (x, w, y, win, groups) in [
            (
                [2, 4, 9, 8],
                [6, 2, 3, 3],
                [2, 6, 5, 8],
                window([3, 3], [2, 1], [1, 2], [2, 1]),
                2,
            ),
            (
                [1, 1, 3, 3],
                [2600, 1, 3, 3],
                [1, 2600, 3, 3],
                window([3, 3], [1, 1], [1, 1], [1, 1]),
                1,
            ),
            (
                [2, 1, 130, 130],
                [1, 1, 3, 3],
                [2, 1, 130, 130],
                window([3, 3], [1, 1], [1, 1], [1, 1]),
                1,
            ),
        ] {
            let k = NnGradKernel {
                op,
                x: Shape(x.to_vec()),
                w: Shape(w.to_vec()),
                y: Shape(y.to_vec()),
                window: win,
                groups,
                chunk: None,
            };
            let (first, sum) = k.clone().passes();
            kernels.push(Kernel::NnGrad(k));
            kernels.push(Kernel::NnGrad(first));
            kernels.extend(sum.map(Kernel::Reduce));
        }
    }
    for op in [NnGradOp::MaxPool, NnGradOp::AvgPool] {
        kernels.push(Kernel::NnGrad(NnGradKernel {
            op,
            x: Shape(vec![2, 3, 7, 9]),
            w: Shape(vec![3, 1, 3, 3]),
            y: Shape(vec![2, 3, 4, 5]),
            window: window([3, 3], [2, 2], [1, 1], [1, 1]),
            groups: 3,
            chunk: None,
        }));
    }
    assert!(
        kernels
            .iter()
            .filter(|k| matches!(k, Kernel::Reduce(_)))
            .count()
            >= 2
    );
    for k in &kernels {
        common::wgsl::check(k);
    }
}
