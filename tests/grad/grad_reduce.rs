//! Gradients of the reductions and scans, and of the composites built on reductions: finite
//! differences where the function is smooth at the inputs, hand-computed values at ties,
//! NaNs and zeros.

use crate::common;
use crate::common::grad::{check, rand};
use crate::common::{assert_close, gpus, session_on};
use wgflow::{Axes, DType, Device, Graph, HostTensor, Result, Tensor};

const EPS: f32 = 1e-2;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

/// `shape` filled with distinct values at least 0.1 apart (in a scrambled order), so that
/// no max/min is tied or changes under a finite-difference step.
fn distinct(shape: &[usize], seed: u64) -> HostTensor {
    let n: usize = shape.iter().product();
    let keys = common::grad::uniform(n, 0.0, 1.0, seed);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]));
    let mut v = vec![0.0f32; n];
    for (rank, &i) in order.iter().enumerate() {
        v[i] = rank as f32 * 0.1 - n as f32 * 0.05;
    }
    HostTensor::new(shape.to_vec(), v).unwrap()
}

/// The gradient of `sum(f(x) * dy)` at `x`, on cpu:0 and every GPU, against `want`.
fn hand(
    what: &str,
    f: &dyn Fn(&mut Graph, Tensor) -> Result<Tensor>,
    x: HostTensor,
    dy: HostTensor,
    want: HostTensor,
) {
    let mut g = Graph::new();
    let xt = g.placeholder("x", x.shape().clone(), x.dtype()).unwrap();
    let y = f(&mut g, xt).unwrap();
    let dyt = g.constant(dy).unwrap();
    let dx = g.gradients_with(&[y], &[xt], Some(&[dyt])).unwrap()[0].expect("a gradient");
    let mut devices = vec![Device::Cpu];
    devices.extend(gpus());
    for d in devices {
        let out = session_on(&g, d).run(&[(xt, x.clone())], &[dx]).unwrap();
        assert_close(&format!("{what} on {d}"), &out[0], &want, 1e-6, 1e-6);
    }
}

fn t(shape: &[usize], v: &[f32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

/// The axis sets every reduction is checked over, on a `[3, 4, 5]` input.
fn axis_sets() -> Vec<(&'static str, Axes)> {
    vec![
        ("axis 1", Axes::from(1)),
        ("axis -1", Axes::from(-1)),
        ("axes 0 and 2", Axes::from([0, 2])),
        ("all axes", Axes::All),
    ]
}

type Reduction = fn(&mut Graph, Tensor, Axes, bool) -> Result<Tensor>;

fn reductions() -> Vec<(&'static str, Reduction)> {
    vec![
        ("sum", |g, x, a, k| g.sum(x, a, k)),
        ("mean", |g, x, a, k| g.mean(x, a, k)),
        ("max", |g, x, a, k| g.max(x, a, k)),
        ("min", |g, x, a, k| g.min(x, a, k)),
        ("prod", |g, x, a, k| g.prod(x, a, k)),
    ]
}

#[test]
fn reductions_over_axes_with_and_without_keepdims() {
    for (name, op) in reductions() {
        for (which, axes) in axis_sets() {
            for keep in [false, true] {
                let x = if name == "prod" {
                    rand(&[3, 4, 5], 0.6, 1.4, 3)
                } else {
                    distinct(&[3, 4, 5], 3)
                };
                check(
                    &format!("{name} over {which}, keepdims {keep}"),
                    &|g, xs| op(g, xs[0], axes.clone(), keep),
                    &[x],
                    &[0],
                    EPS,
                    RTOL,
                    ATOL,
                );
            }
        }
    }
}

#[test]
fn reductions_of_size_one_axes_and_vectors() {
    for (name, op) in reductions() {
        let x = distinct(&[7], 11);
        let x = if name == "prod" {
            rand(&[7], 0.6, 1.4, 11)
        } else {
            x
        };
        check(
            &format!("{name} of a vector"),
            &|g, xs| op(g, xs[0], Axes::All, false),
            &[x],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
        let x = distinct(&[1, 5, 1], 12);
        let x = if name == "prod" {
            rand(&[1, 5, 1], 0.6, 1.4, 12)
        } else {
            x
        };
        check(
            &format!("{name} over size-1 axes"),
            &|g, xs| op(g, xs[0], Axes::from([0, 2]), false),
            &[x],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn max_and_min_split_ties_equally() {
    // Row 0: two tied maxima; row 1: all three tied; dy = [1, 2].
    let x = t(&[2, 3], &[1.0, 3.0, 3.0, 2.0, 2.0, 2.0]);
    hand(
        "max ties",
        &|g, x| g.max(x, 1, false),
        x.clone(),
        t(&[2], &[1.0, 2.0]),
        t(&[2, 3], &[0.0, 0.5, 0.5, 2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0]),
    );
    hand(
        "min ties, keepdims",
        &|g, x| g.min(x, 1, true),
        x.clone(),
        t(&[2, 1], &[1.0, 2.0]),
        t(&[2, 3], &[1.0, 0.0, 0.0, 2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0]),
    );
    // Over all axes: the three 3s of [[1, 3, 3], [3, 2, 2]] share dy = 3.
    hand(
        "max ties over all axes",
        &|g, x| g.max(x, Axes::All, false),
        t(&[2, 3], &[1.0, 3.0, 3.0, 3.0, 2.0, 2.0]),
        HostTensor::scalar(3.0f32),
        t(&[2, 3], &[0.0, 1.0, 1.0, 1.0, 0.0, 0.0]),
    );
    // Over axis 0 of a [2, 2, 2]: ties in two of four columns.
    hand(
        "max ties over axis 0",
        &|g, x| g.max(x, 0, false),
        t(&[2, 2, 2], &[5.0, 1.0, 2.0, 4.0, 5.0, 0.0, 2.0, 7.0]),
        t(&[2, 2], &[4.0, 1.0, 6.0, 1.0]),
        t(&[2, 2, 2], &[2.0, 1.0, 3.0, 0.0, 2.0, 0.0, 3.0, 1.0]),
    );
}

#[test]
fn max_and_min_send_the_gradient_to_nans() {
    let nan = f32::NAN;
    hand(
        "max with NaNs",
        &|g, x| g.max(x, 1, false),
        t(&[2, 4], &[1.0, nan, 3.0, nan, 1.0, 2.0, 2.0, 0.0]),
        t(&[2], &[1.0, 1.0]),
        t(&[2, 4], &[0.0, 0.5, 0.0, 0.5, 0.0, 0.5, 0.5, 0.0]),
    );
    hand(
        "min with a NaN",
        &|g, x| g.min(x, Axes::All, false),
        t(&[3], &[1.0, -2.0, nan]),
        HostTensor::scalar(2.0f32),
        t(&[3], &[0.0, 0.0, 2.0]),
    );
}

#[test]
fn prod_with_zeros() {
    // Row 0: one zero (its gradient is the product of the others, 6; the others get 0);
    // row 1: two zeros (all 0); row 2: no zero (prod / x).
    let x = t(&[3, 3], &[2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 1.0, 2.0, 4.0]);
    hand(
        "prod with zeros",
        &|g, x| g.prod(x, 1, false),
        x.clone(),
        t(&[3], &[1.0, 1.0, 2.0]),
        t(&[3, 3], &[0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 16.0, 8.0, 4.0]),
    );
    // prod is linear in each element, so central differences are exact at zeros too.
    check(
        "prod with zeros, finite differences",
        &|g, xs| g.prod(xs[0], 1, true),
        &[x],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    // A zero-free group next to zero groups over axis 0.
    let x = t(&[2, 3], &[0.0, 1.5, 0.0, 0.7, -2.0, 0.0]);
    check(
        "prod over axis 0 with zeros",
        &|g, xs| g.prod(xs[0], 0, false),
        &[x],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn index_and_bool_reductions_pass_no_gradient() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [3, 4], DType::F32).unwrap();
    let am = g.argmax(x, Some(1), false).unwrap();
    let y = g.cast(am, DType::F32).unwrap();
    assert_eq!(g.gradients(y, &[x]).unwrap(), vec![None]);
    let an = g.any(x, 0, false).unwrap();
    let y = g.cast(an, DType::F32).unwrap();
    assert_eq!(g.gradients(y, &[x]).unwrap(), vec![None]);
    // Next to a differentiable path, only that path contributes: d(sum(x) + argmin)/dx = 1.
    let s = g.sum(x, Axes::All, false).unwrap();
    let am = g.argmin(x, None, false).unwrap();
    let c = g.cast(am, DType::F32).unwrap();
    let y = g.add(s, c).unwrap();
    let dx = g.gradients(y, &[x]).unwrap()[0].expect("a gradient");
    let out = session_on(&g, Device::Cpu)
        .run(&[(x, rand(&[3, 4], -1.0, 1.0, 5))], &[dx])
        .unwrap();
    assert_eq!(out[0].to_f32().unwrap(), vec![1.0; 12]);
}

#[test]
fn cumsum_in_every_direction() {
    for exclusive in [false, true] {
        for reverse in [false, true] {
            for (shape, axis) in [
                (vec![7], 0),
                (vec![3, 5], 1),
                (vec![4, 3, 2], 0),
                (vec![2, 5, 3], -2),
            ] {
                check(
                    &format!(
                        "cumsum {shape:?} axis {axis} exclusive {exclusive} reverse {reverse}"
                    ),
                    &|g, xs| {
                        g.cumulative(wgflow::ops::ScanOp::Sum, xs[0], axis, exclusive, reverse)
                    },
                    &[rand(&shape, -1.0, 1.0, 21)],
                    &[0],
                    EPS,
                    RTOL,
                    ATOL,
                );
            }
        }
    }
}

#[test]
fn cumprod_in_every_direction_with_and_without_zeros() {
    // Rows: no zero; one zero inside; a zero first and another later; zeros at both ends.
    let zeros = t(
        &[4, 5],
        &[
            0.8, -1.2, 1.1, 0.9, 1.3, //
            1.2, 0.7, 0.0, -1.1, 0.9, //
            0.0, 1.4, 0.6, 0.0, 1.2, //
            0.0, 0.9, 1.3, -0.7, 0.0,
        ],
    );
    for exclusive in [false, true] {
        for reverse in [false, true] {
            let what = format!("exclusive {exclusive} reverse {reverse}");
            let f = move |g: &mut Graph, xs: &[Tensor], axis: isize| {
                g.cumulative(wgflow::ops::ScanOp::Prod, xs[0], axis, exclusive, reverse)
            };
            check(
                &format!("cumprod [3, 6] axis 1 {what}"),
                &|g, xs| f(g, xs, 1),
                &[rand(&[3, 6], 0.5, 1.5, 31)],
                &[0],
                EPS,
                RTOL,
                ATOL,
            );
            check(
                &format!("cumprod [5, 2] axis 0 {what}"),
                &|g, xs| f(g, xs, 0),
                &[rand(&[5, 2], -1.5, -0.5, 32)],
                &[0],
                EPS,
                RTOL,
                ATOL,
            );
            // Each output is linear in each element, so central differences are exact at zeros.
            check(
                &format!("cumprod with zeros {what}"),
                &|g, xs| f(g, xs, 1),
                std::slice::from_ref(&zeros),
                &[0],
                EPS,
                RTOL,
                ATOL,
            );
        }
    }
    // y = [2, 0, 0]: dx0 = 1 + x1 + x1·x2 = 1, dx1 = x0 + x0·x2 = 8, dx2 = x0·x1 = 0.
    hand(
        "cumprod at a zero",
        &|g, x| g.cumprod(x, 0),
        t(&[3], &[2.0, 0.0, 3.0]),
        t(&[3], &[1.0, 1.0, 1.0]),
        t(&[3], &[1.0, 8.0, 0.0]),
    );
}

#[test]
fn composites_over_reductions() {
    type Composite = Box<dyn Fn(&mut Graph, Tensor) -> Result<Tensor>>;
    let cases: Vec<(&str, Composite)> = vec![
        ("mean", Box::new(|g, x| g.mean(x, [0, 2], false))),
        ("var ddof 0", Box::new(|g, x| g.var(x, 1, 0, false))),
        (
            "var ddof 1 over all axes",
            Box::new(|g, x| g.var(x, Axes::All, 1, true)),
        ),
        ("std", Box::new(|g, x| g.std(x, [0, 2], 1, false))),
        ("logsumexp", Box::new(|g, x| g.logsumexp(x, 1, false))),
        (
            "logsumexp over all axes",
            Box::new(|g, x| g.logsumexp(x, Axes::All, true)),
        ),
        ("softmax", Box::new(|g, x| g.softmax(x, -1))),
        ("softmax axis 0", Box::new(|g, x| g.softmax(x, 0))),
        ("log_softmax", Box::new(|g, x| g.log_softmax(x, 1))),
    ];
    for (what, f) in &cases {
        check(
            what,
            &|g, xs| f(g, xs[0]),
            &[distinct(&[3, 4, 5], 41)],
            &[0],
            3e-3,
            RTOL,
            ATOL,
        );
    }
}
