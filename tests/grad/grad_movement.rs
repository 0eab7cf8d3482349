//! Gradients of the movement ops against finite differences (slices with steps of every
//! sign, flips, broadcasts, concat, pad, take with repeated, negative and out-of-range
//! indices) and of the composites built from them, plus hand-computed scatter-adds.

use crate::common::grad::{check, rand};
use crate::common::{assert_close, gpus, session_on};
use wgflow::{DType, Device, Graph, HostTensor, PadMode, SliceArg, Tensor};

const EPS: f32 = 1e-2;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

fn s(start: Option<isize>, stop: Option<isize>, step: isize) -> SliceArg {
    SliceArg::new(start, stop, step)
}

fn i32s(shape: &[usize], v: &[i32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

#[test]
fn reshape_and_transpose() {
    let x = [rand(&[3, 4], -1.0, 1.0, 1)];
    check(
        "reshape",
        &|g, x| g.reshape(x[0], &[2, -1]),
        &x,
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    for perm in [[2, 0, 1], [1, 2, 0], [0, 2, 1]] {
        check(
            &format!("transpose {perm:?}"),
            &|g, x| g.transpose(x[0], &perm),
            &[rand(&[2, 3, 4], -1.0, 1.0, 2)],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn slices_with_steps_of_every_sign() {
    let cases: Vec<(&str, Vec<usize>, Vec<SliceArg>)> = vec![
        (
            "range",
            vec![7, 5],
            vec![SliceArg::range(1, 5), SliceArg::range(2, 4)],
        ),
        (
            "step 2",
            vec![7, 5],
            vec![s(Some(1), Some(6), 2), s(None, None, 2)],
        ),
        (
            "step 3 leaving a tail",
            vec![8, 5],
            vec![s(Some(1), None, 3)],
        ),
        (
            "step -1",
            vec![7, 5],
            vec![s(None, None, -1), SliceArg::range(1, 4)],
        ),
        (
            "step -2",
            vec![7, 5],
            vec![s(Some(5), Some(0), -2), s(None, None, -3)],
        ),
        (
            "negative bounds",
            vec![7, 5],
            vec![s(Some(-2), Some(-7), -2), s(Some(-4), Some(-1), 2)],
        ),
        (
            "one element",
            vec![7, 5],
            vec![s(Some(3), Some(4), 5), s(Some(4), None, -7)],
        ),
        (
            "three axes",
            vec![5, 3, 6],
            vec![
                s(None, None, 2),
                s(Some(2), Some(0), -1),
                s(Some(1), None, 4),
            ],
        ),
    ];
    for (what, shape, args) in cases {
        check(
            &format!("slice {what}"),
            &|g, x| g.slice(x[0], &args),
            &[rand(&shape, -1.0, 1.0, 3)],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn flips() {
    for axes in [vec![0], vec![2], vec![0, 2], vec![-1, 1]] {
        check(
            &format!("flip {axes:?}"),
            &|g, x| g.flip(x[0], axes.clone()),
            &[rand(&[3, 4, 5], -1.0, 1.0, 4)],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn broadcasts() {
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![3, 1], vec![2, 3, 4]),
        (vec![4], vec![3, 4]),
        (vec![1, 1], vec![5, 3]),
        (vec![2, 1, 3], vec![2, 4, 3]),
        (vec![], vec![2, 3]),
    ];
    for (from, to) in cases {
        check(
            &format!("broadcast_to {from:?} -> {to:?}"),
            &|g, x| g.broadcast_to(x[0], &to),
            &[rand(&from, -1.0, 1.0, 5)],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn concat_pieces() {
    let xs = [
        rand(&[2, 3, 4], -1.0, 1.0, 6),
        rand(&[2, 1, 4], -1.0, 1.0, 7),
        rand(&[2, 5, 4], -1.0, 1.0, 8),
    ];
    check(
        "concat axis 1",
        &|g, x| g.concat(x, 1),
        &xs,
        &[0, 1, 2],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "concat, middle piece only",
        &|g, x| g.concat(x, -2),
        &xs,
        &[1],
        EPS,
        RTOL,
        ATOL,
    );
    // More pieces than one concat kernel reads: a tree of concats.
    let many: Vec<HostTensor> = (0..8)
        .map(|i| rand(&[i % 3 + 1, 2], -1.0, 1.0, 9 + i as u64))
        .collect();
    let all: Vec<usize> = (0..8).collect();
    check(
        "concat of 8",
        &|g, x| g.concat(x, 0),
        &many,
        &all,
        EPS,
        RTOL,
        ATOL,
    );
    // An empty piece gets an empty gradient.
    let with_empty = [
        rand(&[2, 3], -1.0, 1.0, 20),
        HostTensor::new(vec![2, 0], Vec::<f32>::new()).unwrap(),
    ];
    check(
        "concat with an empty piece",
        &|g, x| g.concat(x, 1),
        &with_empty,
        &[0, 1],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn constant_and_reflect_pads() {
    let x = [rand(&[3, 4], -1.0, 1.0, 21)];
    check(
        "pad",
        &|g, x| g.pad(x[0], &[(1, 2), (0, 3)], PadMode::Constant(0.5)),
        &x,
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "pad one axis",
        &|g, x| g.pad(x[0], &[(2, 0)], PadMode::Constant(0.0)),
        &x,
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "reflect pad",
        &|g, x| g.pad(x[0], &[(2, 1), (1, 3)], PadMode::Reflect),
        &x,
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn take_with_repeated_negative_and_clamped_indices() {
    let x = rand(&[3, 5, 2], -1.0, 1.0, 22);
    let repeated = i32s(&[3, 2], &[4, 0, 4, 4, 1, 0]);
    for axis in [1, -2] {
        check(
            &format!("take axis {axis}, repeated indices"),
            &|g, x| g.take(x[0], x[1], axis),
            &[x.clone(), repeated.clone()],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
    check(
        "take axis 0, negative indices",
        &|g, x| g.take(x[0], x[1], 0),
        &[x.clone(), i32s(&[4], &[-1, 0, -3, -1])],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    // Fed indices out of range are clamped by the forward kernel (7 -> 1, -9 -> -7 -> 0), and
    // the gradient goes to the rows actually read.
    check(
        "take axis 2, clamped indices",
        &|g, x| g.take(x[0], x[1], 2),
        &[x.clone(), i32s(&[5], &[7, -9, 1, 0, -2])],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "take of a vector with a scalar index",
        &|g, x| g.take(x[0], x[1], 0),
        &[rand(&[6], -1.0, 1.0, 23), HostTensor::scalar(4i32)],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn take_scatter_adds_by_hand() {
    // dx[r] = Σ over the j with index j == r of dy[j]; 9 clamps to 3, -5 wraps to -1 and clamps to 0.
    let mut g = Graph::new();
    let x = g.placeholder("x", [4], DType::F32).unwrap();
    let idx = g.placeholder("idx", [6], DType::I32).unwrap();
    let y = g.take(x, idx, 0).unwrap();
    let dy = g.constant([1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let grads = g.gradients_with(&[y], &[x, idx], Some(&[dy])).unwrap();
    assert!(grads[1].is_none(), "indices get no gradient");
    let dx = grads[0].unwrap();
    let feeds = [
        (x, rand(&[4], -1.0, 1.0, 24)),
        (idx, i32s(&[6], &[1, 1, 3, 1, 9, -5])),
    ];
    let want = HostTensor::new(vec![4], vec![6.0f32, 7.0, 0.0, 8.0]).unwrap();
    let mut devices = vec![Device::Cpu];
    devices.extend(gpus());
    for d in devices {
        let out = session_on(&g, d).run(&feeds, &[dx]).unwrap();
        assert_close(
            &format!("take scatter-add on {d}"),
            &out[0],
            &want,
            0.0,
            0.0,
        );
    }
}

#[test]
fn composites_over_movement() {
    type Composite = Box<dyn Fn(&mut Graph, &[Tensor]) -> wgflow::Result<Tensor>>;
    let x = rand(&[2, 3], -1.0, 1.0, 25);
    let cases: Vec<(&str, Composite)> = vec![
        ("tile", Box::new(|g, x| g.tile(x[0], &[2, 1, 3]))),
        (
            "stack",
            Box::new(|g, x| {
                let y = g.neg(x[0])?;
                g.stack(&[x[0], y, x[0]], 1)
            }),
        ),
        (
            "split",
            Box::new(|g, x| {
                let parts = g.split(x[0], 3, 1)?;
                let a = g.mul(parts[0], parts[2])?;
                g.add(a, parts[1])
            }),
        ),
        (
            "squeeze and expand_dims",
            Box::new(|g, x| {
                let e = g.expand_dims(x[0], 1)?;
                let t = g.transpose(e, &[1, 2, 0])?;
                g.squeeze(t, None)
            }),
        ),
    ];
    for (what, f) in &cases {
        check(
            what,
            &|g, xs| f(g, xs),
            std::slice::from_ref(&x),
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}
