//! Empty tensors end to end, as NumPy has them: zero-size placeholders, constants and
//! slices; broadcasting against them; reductions of empty axes (sum 0, prod 1, mean NaN,
//! all true, any false; max/min/argmax a build error naming the axis); matmul with K = 0;
//! zero-size fetches; and no kernel dispatched for an empty output. Every device.

use crate::common;

use wgflow::{Axes, DType, Device, Error, Graph, HostTensor, PadMode, SliceArg};

fn devices() -> Vec<Device> {
    let mut d = common::gpus();
    d.push(Device::Cpu);
    d
}

fn empty(dims: &[usize]) -> HostTensor {
    HostTensor::new(dims.to_vec(), Vec::<f32>::new()).unwrap()
}

#[test]
fn empty_placeholders_broadcast_and_fetch_as_empty_tensors() {
    let mut g = Graph::new();
    let x = g.placeholder("x", vec![2, 0], DType::F32).unwrap();
    let y = g.constant([[1.0f32], [2.0]]).unwrap();
    let s = g.add(x, y).unwrap(); // (2, 0) + (2, 1) -> (2, 0)
    let e = g.exp(s).unwrap();
    let r = g.reshape(e, &[0, 5]).unwrap();
    let c = g.constant(empty(&[0])).unwrap();
    let c2 = g.mul(c, c).unwrap();
    for d in devices() {
        let mut sess = common::session_on(&g, d);
        let out = sess.run(&[(x, empty(&[2, 0]))], &[e, r, c2]).unwrap();
        assert_eq!(out[0].dims(), &[2, 0], "on {d}");
        assert_eq!(out[1].dims(), &[0, 5], "on {d}");
        assert_eq!(out[2].dims(), &[0], "on {d}");
        assert!(out.iter().all(|t| t.is_empty() && t.dtype() == DType::F32));
        // Nothing to compute: not one kernel.
        let plan = sess.plan(&[e, r, c2]).unwrap();
        assert_eq!(plan.dispatch_count(), 0, "on {d}: {}", plan.describe());
    }
}

#[test]
fn reductions_of_empty_axes_follow_numpy() {
    let mut g = Graph::new();
    let x = g.placeholder("x", vec![2, 0], DType::F32).unwrap();
    let i = g.placeholder("i", vec![0, 3], DType::I32).unwrap();
    let fetch = [
        g.sum(x, [1], false).unwrap(),
        g.prod(x, [1], false).unwrap(),
        g.mean(x, [1], false).unwrap(),
        g.sum(x, Axes::All, false).unwrap(),
        g.sum(i, [0], false).unwrap(),
        g.max(x, [0], false).unwrap(), // empty result: allowed
    ];
    let gt = g.greater(x, x).unwrap();
    let logic = [
        g.all(gt, [1], false).unwrap(),
        g.any(gt, [1], false).unwrap(),
    ];
    for d in devices() {
        let mut sess = common::session_on(&g, d);
        let feeds = [
            (x, empty(&[2, 0])),
            (i, HostTensor::new(vec![0, 3], Vec::<i32>::new()).unwrap()),
        ];
        let out = sess.run(&feeds, &fetch).unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            vec![0.0, 0.0],
            "sum on {d}"
        );
        assert_eq!(
            out[1].to_vec::<f32>().unwrap(),
            vec![1.0, 1.0],
            "prod on {d}"
        );
        assert!(
            out[2].to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()),
            "mean on {d}"
        );
        assert_eq!(out[3].item::<f32>().unwrap(), 0.0, "sum of all on {d}");
        assert_eq!(
            out[4].to_vec::<i32>().unwrap(),
            vec![0, 0, 0],
            "int sum on {d}"
        );
        assert_eq!(out[5].dims(), &[0], "max over a kept empty axis on {d}");
        let out = sess.run(&feeds[..1], &logic).unwrap();
        assert_eq!(
            out[0].to_vec::<bool>().unwrap(),
            vec![true, true],
            "all on {d}"
        );
        assert_eq!(
            out[1].to_vec::<bool>().unwrap(),
            vec![false, false],
            "any on {d}"
        );
    }
}

#[test]
fn reductions_without_identity_over_an_empty_axis_are_build_errors() {
    let mut g = Graph::new();
    let x = g.placeholder("x", vec![3, 0], DType::F32).unwrap();
    let errors = [
        g.max(x, [1], false).unwrap_err(),
        g.min(x, Axes::All, true).unwrap_err(),
        g.argmax(x, Some(-1), false).unwrap_err(),
        g.argmin(x, Some(1), false).unwrap_err(),
    ];
    for e in errors {
        assert!(matches!(e, Error::Build { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("axis 1") && msg.contains("size zero"), "{msg}");
        assert!(
            msg.contains("empty_tensors.rs"),
            "points at the caller: {msg}"
        );
    }
}

#[test]
fn matmul_with_k_zero_gives_zeros_and_empty_slices_work() {
    let mut g = Graph::new();
    let a = g.placeholder("a", vec![3, 0], DType::F32).unwrap();
    let b = g.placeholder("b", vec![0, 4], DType::F32).unwrap();
    let m = g.matmul(a, b).unwrap();
    let bias = g.constant([1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mb = g.add(m, bias).unwrap();
    let x = g.constant([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
    // x[:, 5:5] is empty; concatenating it adds nothing; padding it gives the pad value.
    let s = g
        .slice(x, &[SliceArg::full(), SliceArg::range(5, 5)])
        .unwrap();
    let cat = g.concat(&[x, s], 1).unwrap();
    let row = g.slice(x, &[SliceArg::range(1, 1)]).unwrap();
    let padded = g
        .pad(row, &[(1, 0), (0, 0)], PadMode::Constant(7.0))
        .unwrap();
    for d in devices() {
        let mut sess = common::session_on(&g, d);
        let out = sess
            .run(
                &[(a, empty(&[3, 0])), (b, empty(&[0, 4]))],
                &[m, mb, s, cat, padded],
            )
            .unwrap();
        assert_eq!(out[0].dims(), &[3, 4]);
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            vec![0.0; 12],
            "matmul on {d}"
        );
        assert_eq!(
            out[1].to_vec::<f32>().unwrap(),
            [1.0, 2.0, 3.0, 4.0].repeat(3),
            "matmul + bias on {d}"
        );
        assert_eq!(out[2].dims(), &[2, 0], "empty slice on {d}");
        assert_eq!(
            out[3].to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "concat with an empty piece on {d}"
        );
        assert_eq!(out[4].dims(), &[1, 3]);
        assert_eq!(
            out[4].to_vec::<f32>().unwrap(),
            vec![7.0; 3],
            "pad of empty on {d}"
        );
    }
}

#[test]
fn creation_ops_make_empty_tensors() {
    let mut g = Graph::new();
    let r = g.arange(5.0, 5.0, 1.0, DType::F32).unwrap();
    let back = g.arange(5.0, 0.0, 1.0, DType::I32).unwrap();
    let l = g.linspace(0.0, 1.0, 0, true).unwrap();
    let z = g.zeros(vec![4usize, 0], DType::F32).unwrap();
    for d in devices() {
        let mut sess = common::session_on(&g, d);
        let out = sess.run(&[], &[r, back, l, z]).unwrap();
        let dims: Vec<Vec<usize>> = out.iter().map(|t| t.dims().to_vec()).collect();
        assert_eq!(dims, vec![vec![0], vec![0], vec![0], vec![4, 0]], "on {d}");
    }
}

#[test]
fn empty_tensors_survive_graph_files() {
    let mut g = Graph::new();
    let x = g.placeholder("x", vec![0, 3], DType::F32).unwrap();
    let c = g.constant(empty(&[0, 3])).unwrap();
    let s = g.add(x, c).unwrap();
    let t = g.sum(s, [0], false).unwrap();
    let h = Graph::from_json(&g.to_json().unwrap()).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    let mut sess = common::session_on(&h, Device::Cpu);
    let x2 = h.tensor("x").unwrap();
    let t2 = h.tensor(g.name(t).unwrap()).unwrap();
    let out = sess.run(&[(x2, empty(&[0, 3]))], &[t2]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0; 3]);
}
