//! Reductions (prod, var, std, argmax, argmin, all, any, logsumexp) and NN ops (log_softmax,
//! layer_norm, linear, conv2d, pooling, batch_norm) against NumPy goldens
//! (`tests/golden/nn.json`, from `tests/golden/gen_nn.py`) on `cpu:0`, then every GPU
//! against `cpu:0`.

use crate::common;

use crate::common::golden::{ints, pair, Case};
use serde_json::Value as Json;
use wgflow::{Axes, Conv2dOptions, Graph, Tensor};

const GOLDEN: &str = include_str!("../golden/nn.json");

fn build(g: &mut Graph, c: &Case, x: &[Tensor]) -> wgflow::Result<Tensor> {
    let a = &c.attrs;
    let axes = || match &a["axes"] {
        Json::Null => Axes::All,
        v => Axes::List(ints(v)),
    };
    let keep = || a["keepdims"].as_bool().unwrap();
    let axis = || a["axis"].as_i64().map(|v| v as isize);
    let ddof = || a["ddof"].as_u64().unwrap() as usize;
    let eps = || a["eps"].as_f64().unwrap() as f32;
    match c.op.as_str() {
        "prod" => g.prod(x[0], axes(), keep()),
        "var" => g.var(x[0], axes(), ddof(), keep()),
        "std" => g.std(x[0], axes(), ddof(), keep()),
        "logsumexp" => g.logsumexp(x[0], axes(), keep()),
        "all" => g.all(x[0], axes(), keep()),
        "any" => g.any(x[0], axes(), keep()),
        "argmax" => g.argmax(x[0], axis(), keep()),
        "argmin" => g.argmin(x[0], axis(), keep()),
        "log_softmax" => g.log_softmax(x[0], axis().unwrap()),
        "layer_norm" => g.layer_norm(x[0], Some(x[1]), Some(x[2]), axis().unwrap(), eps()),
        "linear" => g.linear(x[0], x[1], Some(x[2])),
        "batch_norm" => g.batch_norm(x[0], x[1], x[2], x[3], x[4], eps()),
        "conv2d" => {
            let opts = Conv2dOptions {
                stride: pair(&a["stride"]),
                padding: pair(&a["padding"]),
                dilation: pair(&a["dilation"]),
                groups: a["groups"].as_u64().unwrap() as usize,
            };
            g.conv2d(x[0], x[1], x.get(2).copied(), opts)
        }
        "max_pool2d" => g.max_pool2d(
            x[0],
            pair(&a["kernel"]),
            pair(&a["stride"]),
            pair(&a["padding"]),
        ),
        "avg_pool2d" => g.avg_pool2d(
            x[0],
            pair(&a["kernel"]),
            pair(&a["stride"]),
            pair(&a["padding"]),
        ),
        other => panic!("golden op {other} has no builder"),
    }
}

const OPS: &[&str] = &[
    "prod",
    "var",
    "std",
    "logsumexp",
    "all",
    "any",
    "argmax",
    "argmin",
    "log_softmax",
    "layer_norm",
    "linear",
    "batch_norm",
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
];

#[test]
fn nn_ops_on_cpu_match_numpy() {
    let b = common::golden::build_all(GOLDEN, build);
    assert!(b.cases.len() > 150, "golden file looks truncated");
    common::golden::check_cpu(&b, OPS);
}

#[test]
fn nn_ops_on_every_gpu_match_cpu() {
    let b = common::golden::build_all(GOLDEN, build);
    common::golden::check_gpus(&b);
}

mod props {
    use super::common;
    use proptest::prelude::*;
    use wgflow::{Axes, DType, Device, Graph, HostTensor, Session, Shape};

    /// A shape of rank 1..=4, data with occasional NaN/±inf, and an axis subset written with
    /// randomly negative axes.
    fn case() -> impl Strategy<Value = (Vec<usize>, Vec<f32>, Vec<isize>, bool, usize)> {
        prop::collection::vec(1usize..5, 1..=4).prop_flat_map(|dims| {
            let n: usize = dims.iter().product();
            let r = dims.len();
            let value = prop_oneof![
                20 => -3.0f32..3.0,
                1 => Just(f32::NAN),
                1 => Just(f32::INFINITY),
                1 => Just(f32::NEG_INFINITY),
            ];
            (
                Just(dims),
                prop::collection::vec(value, n),
                prop::collection::vec((any::<bool>(), any::<bool>()), r).prop_map(move |picks| {
                    picks
                        .iter()
                        .enumerate()
                        .filter(|(_, (take, _))| *take)
                        .map(|(k, (_, neg))| {
                            if *neg {
                                k as isize - r as isize
                            } else {
                                k as isize
                            }
                        })
                        .collect::<Vec<isize>>()
                }),
                any::<bool>(),
                0..r,
            )
        })
    }

    fn run(
        g: &Graph,
        device: Device,
        feeds: &[(wgflow::Tensor, HostTensor)],
        outs: &[wgflow::Tensor],
    ) -> Vec<HostTensor> {
        let mut s: Session = common::session_on(g, device);
        s.run(feeds, outs).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(24313), ..ProptestConfig::default() })]

        /// Every reduction over random axes, with NaN/inf in the data: every GPU equals `cpu:0`.
        #[test]
        fn reductions_over_random_axes_agree_on_every_gpu((dims, data, axes, keep, arg_axis) in case()) {
            let gpus = common::gpus();
            let mut g = Graph::new();
            let x = g.placeholder("x", Shape::new(dims.clone()), DType::F32).unwrap();
            let a = || Axes::List(axes.clone());
            let outs = vec![
                g.sum(x, a(), keep).unwrap(),
                g.mean(x, a(), keep).unwrap(),
                g.max(x, a(), keep).unwrap(),
                g.min(x, a(), keep).unwrap(),
                g.prod(x, a(), keep).unwrap(),
                g.all(x, a(), keep).unwrap(),
                g.any(x, a(), keep).unwrap(),
                g.var(x, a(), 0, keep).unwrap(),
                g.logsumexp(x, a(), keep).unwrap(),
                g.argmax(x, Some(arg_axis as isize), keep).unwrap(),
                g.argmin(x, None, keep).unwrap(),
            ];
            let feeds = [(x, HostTensor::new(dims.clone(), data.clone()).unwrap())];
            let cpu = run(&g, Device::Cpu, &feeds, &outs);
            for gpu in gpus {
                let got = run(&g, gpu, &feeds, &outs);
                for (k, (o, w)) in got.iter().zip(&cpu).enumerate() {
                    common::assert_close(&format!("{gpu} reduction #{k} of {dims:?} over {axes:?}"), o, w, 1e-5, 1e-6);
                }
            }
        }
    }
}

/// Every op this file tests has a row in docs/ops_nn.md,
/// so the table cannot drift from the code.
#[test]
fn every_tested_op_has_a_docs_row() {
    let doc = include_str!("../../docs/ops_nn.md");
    for op in OPS {
        assert!(
            doc.contains(&format!("| `{op}` |")),
            "docs/ops_nn.md has no row for {op}"
        );
    }
}

#[test]
fn bad_nn_arguments_are_build_errors_naming_the_op_and_caller() {
    use wgflow::{DType, HostTensor};
    let mut g = Graph::new();
    let x = g.placeholder("x", [1, 4, 5, 5], DType::F32).unwrap();
    let w = g.placeholder("w", [6, 3, 3, 3], DType::F32).unwrap();
    let c4 = g.placeholder("c4", [4], DType::F32).unwrap();
    let c3 = g.placeholder("c3", [3], DType::F32).unwrap();
    let b = g
        .constant(HostTensor::new([2], vec![true, false]).unwrap())
        .unwrap();
    let i = g
        .constant(HostTensor::new([2], vec![1i32, 2]).unwrap())
        .unwrap();
    let mut other = Graph::new();
    let foreign = other.placeholder("f", [1, 4, 5, 5], DType::F32).unwrap();
    let big = Conv2dOptions {
        dilation: [4, 4],
        ..Default::default()
    };
    let w4 = g.placeholder("w4", [6, 4, 9, 1], DType::F32).unwrap();
    let errs = [
        g.conv2d(x, w, None, Conv2dOptions::default())
            .unwrap_err()
            .to_string(),
        g.conv2d(
            x,
            w,
            None,
            Conv2dOptions {
                groups: 0,
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string(),
        g.conv2d(x, w4, None, big).unwrap_err().to_string(),
        g.max_pool2d(x, [2, 2], [2, 2], [2, 0])
            .unwrap_err()
            .to_string(),
        g.avg_pool2d(c4, [2, 2], [1, 1], [0, 0])
            .unwrap_err()
            .to_string(),
        g.argmax(b, None, false).unwrap_err().to_string(),
        g.argmin(x, Some(4), false).unwrap_err().to_string(),
        g.var(i, Axes::All, 0, false).unwrap_err().to_string(),
        g.logsumexp(x, [1, 1], false).unwrap_err().to_string(),
        g.batch_norm(x, c4, c4, c3, c4, 1e-5)
            .unwrap_err()
            .to_string(),
        g.batch_norm(foreign, c4, c4, c4, c4, 1e-5)
            .unwrap_err()
            .to_string(),
        g.layer_norm(i, None, None, -1, 1e-5)
            .unwrap_err()
            .to_string(),
        g.prod(b, Axes::All, false).unwrap_err().to_string(),
    ];
    let ops = [
        "conv2d",
        "conv2d",
        "conv2d",
        "max_pool2d",
        "avg_pool2d",
        "argmax",
        "argmin",
        "var",
        "logsumexp",
        "batch_norm",
        "batch_norm",
        "layer_norm",
        "prod",
    ];
    for (e, op) in errs.iter().zip(ops) {
        assert!(e.starts_with(op), "{e}");
        assert!(e.contains("tests/ops/ops_nn.rs"), "{e}");
    }
    assert!(errs[0].contains("groups"), "{}", errs[0]);
    assert!(errs[2].contains("does not fit"), "{}", errs[2]);
    assert!(errs[3].contains("at most half"), "{}", errs[3]);
    assert!(errs[8].contains("repeated"), "{}", errs[8]);
    assert!(errs[10].contains("another graph"), "{}", errs[10]);
}
