//! Movement ops (squeeze, expand_dims, broadcast_to, slice, flip, concat, stack, split, pad,
//! tile, take, one_hot) against NumPy goldens (`tests/golden/movement.json`, from
//! `tests/golden/gen_nn.py`) on `cpu:0`, then every GPU against `cpu:0`.

use crate::common;

use crate::common::golden::{ints, Case};
use serde_json::Value as Json;
use wgflow::{Axes, DType, Device, Graph, HostTensor, PadMode, SliceArg, Tensor};

const GOLDEN: &str = include_str!("../golden/movement.json");

fn opt(v: &Json) -> Option<isize> {
    v.as_i64().map(|v| v as isize)
}

fn build(g: &mut Graph, c: &Case, x: &[Tensor]) -> wgflow::Result<Tensor> {
    let a = &c.attrs;
    let int = |k: &str| a[k].as_i64().unwrap() as isize;
    match c.op.as_str() {
        "squeeze" => match &a["axes"] {
            Json::Null => g.squeeze(x[0], None),
            v => g.squeeze(x[0], Some(&ints(v))),
        },
        "expand_dims" => g.expand_dims(x[0], int("axis")),
        "broadcast_to" => {
            let s: Vec<usize> = ints(&a["shape"]).iter().map(|&d| d as usize).collect();
            g.broadcast_to(x[0], &s)
        }
        "slice" => {
            let args: Vec<SliceArg> = a["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| SliceArg::new(opt(&s[0]), opt(&s[1]), s[2].as_i64().unwrap() as isize))
                .collect();
            g.slice(x[0], &args)
        }
        "flip" => match &a["axes"] {
            Json::Null => g.flip(x[0], Axes::All),
            v => g.flip(x[0], ints(v)),
        },
        "concat" => g.concat(x, int("axis")),
        "stack" => g.stack(x, int("axis")),
        "split" => {
            let parts = g.split(x[0], a["sections"].as_u64().unwrap() as usize, int("axis"))?;
            Ok(parts[a["part"].as_u64().unwrap() as usize])
        }
        "pad" => {
            let pads: Vec<(usize, usize)> = a["pads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p[0].as_u64().unwrap() as usize,
                        p[1].as_u64().unwrap() as usize,
                    )
                })
                .collect();
            let mode = match a["mode"].as_str().unwrap() {
                "constant" => PadMode::Constant(a["value"].as_f64().unwrap()),
                _ => PadMode::Reflect,
            };
            g.pad(x[0], &pads, mode)
        }
        "tile" => {
            let reps: Vec<usize> = ints(&a["reps"]).iter().map(|&d| d as usize).collect();
            g.tile(x[0], &reps)
        }
        "take" => g.take(x[0], x[1], int("axis")),
        "one_hot" => g.one_hot(x[0], a["depth"].as_u64().unwrap() as usize),
        other => panic!("golden op {other} has no builder"),
    }
}

const OPS: &[&str] = &[
    "squeeze",
    "expand_dims",
    "broadcast_to",
    "slice",
    "flip",
    "concat",
    "stack",
    "split",
    "pad",
    "tile",
    "take",
    "one_hot",
];

#[test]
fn movement_ops_on_cpu_match_numpy() {
    let b = common::golden::build_all(GOLDEN, build);
    assert!(b.cases.len() > 50, "golden file looks truncated");
    common::golden::check_cpu(&b, OPS);
}

#[test]
fn movement_ops_on_every_gpu_match_cpu() {
    let b = common::golden::build_all(GOLDEN, build);
    common::golden::check_gpus(&b);
}

/// A movement op whose output exceeds the adapter's largest storage binding runs (bound as
/// several windows) and matches cpu:0.
#[test]
fn a_movement_output_over_the_binding_limit_runs() {
    for gpu in common::gpus() {
        let limit = wgflow::devices()
            .into_iter()
            .find(|d| d.device == gpu)
            .unwrap()
            .limits
            .max_storage_buffer_binding_size;
        let n = (limit / 4 / 2 + 1) as usize;
        let mut g = Graph::new();
        let x = g.placeholder("half", [n], wgflow::DType::F32).unwrap();
        let y = g.tile(x, &[2]).unwrap();
        let data: Vec<f32> = (0..n).map(|i| (i % 1009) as f32).collect();
        let mut s = common::session_on(&g, gpu);
        let out = s
            .run(
                &[(x, HostTensor::new(vec![n], data.clone()).unwrap())],
                &[y],
            )
            .unwrap();
        let got = out[0].to_vec::<f32>().unwrap();
        assert_eq!(got.len(), 2 * n);
        assert!(
            got[..n] == data[..] && got[n..] == data[..],
            "tile on {gpu}"
        );
    }
}

#[test]
fn bad_movement_arguments_are_build_errors_naming_the_op_and_caller() {
    let mut g = Graph::new();
    let x = g
        .constant(HostTensor::new([2, 3], vec![0.0f32; 6]).unwrap())
        .unwrap();
    let idx = g
        .constant(HostTensor::new([2], vec![1i32, 2]).unwrap())
        .unwrap();
    let bad_idx = g
        .constant(HostTensor::new([2], vec![0i32, -3]).unwrap())
        .unwrap();
    let errs = [
        g.take(x, bad_idx, 0).unwrap_err().to_string(),
        g.take(x, x, 0).unwrap_err().to_string(),
        g.slice(x, &[SliceArg::new(None, None, 0)])
            .unwrap_err()
            .to_string(),
        g.squeeze(x, Some(&[0])).unwrap_err().to_string(),
        g.expand_dims(x, 4).unwrap_err().to_string(),
        g.broadcast_to(x, &[3, 3]).unwrap_err().to_string(),
        g.concat(&[x, idx], 0).unwrap_err().to_string(),
        g.split(x, 2, 1).unwrap_err().to_string(),
        g.pad(x, &[(2, 0)], PadMode::Reflect)
            .unwrap_err()
            .to_string(),
        g.tile(x, &[usize::MAX, 2]).unwrap_err().to_string(),
        g.one_hot(x, 3).unwrap_err().to_string(),
    ];
    let ops = [
        "take",
        "take",
        "slice",
        "squeeze",
        "expand_dims",
        "broadcast_to",
        "concat",
        "split",
        "pad",
        "tile",
        "one_hot",
    ];
    for (e, op) in errs.iter().zip(ops) {
        assert!(e.starts_with(op), "{e}");
        assert!(e.contains("tests/ops/ops_movement.rs"), "{e}");
    }
    assert!(errs[0].contains("index -3 is out of range"), "{}", errs[0]);
    assert!(errs[2].contains("step cannot be zero"), "{}", errs[2]);
    assert!(errs[9].contains("overflow"), "{}", errs[9]);
}

/// Every op this file tests has a row in docs/ops_nn.md.
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

mod props {
    use super::common;
    use proptest::prelude::*;
    use wgflow::{DType, Device, Graph, HostTensor, PadMode, SliceArg};

    fn arg() -> impl Strategy<Value = SliceArg> {
        (
            prop::option::of(-6isize..6),
            prop::option::of(-6isize..6),
            prop_oneof![-3isize..0, 1isize..4],
        )
            .prop_map(|(a, b, s)| SliceArg::new(a, b, s))
    }

    /// The value at output index `i` of a constant pad, computed coordinate by coordinate.
    fn padded_at(
        i: usize,
        dims: &[usize],
        pads: &[(usize, usize)],
        data: &[i32],
        value: i32,
    ) -> i32 {
        let out: Vec<usize> = dims.iter().zip(pads).map(|(d, p)| d + p.0 + p.1).collect();
        let (mut rest, mut src, mut stride) = (i, 0, 1);
        for k in (0..dims.len()).rev() {
            let c = rest % out[k];
            rest /= out[k];
            match c.checked_sub(pads[k].0) {
                Some(c) if c < dims[k] => src += c * stride,
                _ => return value,
            }
            stride *= dims[k];
        }
        data[src]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(991), ..ProptestConfig::default() })]

        /// Constant pads on every axis of 0- to 4-D tensors (zero-size pads and rows
        /// included) on `cpu:0`'s row-copying path, against the coordinate rule.
        #[test]
        fn constant_pads_on_every_axis_match_the_coordinate_rule(
            dims in prop::collection::vec(1usize..5, 0..=4),
            pads in prop::collection::vec((0usize..3, 0usize..3), 4),
        ) {
            let n: usize = dims.iter().product();
            let data: Vec<i32> = (0..n as i32).map(|v| v * 3 + 1).collect();
            let pads = &pads[..dims.len()];
            let mut g = Graph::new();
            let x = g.placeholder("x", dims.clone(), DType::I32).unwrap();
            let y = g.pad(x, pads, PadMode::Constant(-7.0)).unwrap();
            let feeds = [(x, HostTensor::new(dims.clone(), data.clone()).unwrap())];
            let got = common::session_on(&g, Device::Cpu).run(&feeds, &[y]).unwrap();
            let got = got[0].to_vec::<i32>().unwrap();
            for (i, v) in got.iter().enumerate() {
                prop_assert_eq!(*v, padded_at(i, &dims, pads, &data, -7), "{:?} {:?} at {}", dims, pads, i);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(24317), ..ProptestConfig::default() })]

        /// Random slices (any step sign), flips, pads, tiles and concats of a random i32 tensor:
        /// every GPU equals `cpu:0` word for word. Empty slices must be build errors.
        #[test]
        fn random_movement_agrees_on_every_gpu(
            dims in prop::collection::vec(1usize..5, 1..=3),
            args in prop::collection::vec(arg(), 0..=3),
            pad in (0usize..3, 0usize..3),
            reps in prop::collection::vec(1usize..3, 1..=3),
        ) {
            let n: usize = dims.iter().product();
            let data: Vec<i32> = (0..n as i32).map(|v| v * 7 - 11).collect();
            let mut g = Graph::new();
            let x = g.placeholder("x", dims.clone(), DType::I32).unwrap();
            let mut outs = vec![g.flip(x, -1).unwrap(), g.tile(x, &reps).unwrap()];
            outs.push(g.pad(x, &[pad], PadMode::Constant(-5.0)).unwrap());
            outs.push(g.concat(&[x, outs[0], x], 0).unwrap());
            let args: Vec<SliceArg> = args.into_iter().take(dims.len()).collect();
            match g.slice(x, &args) {
                Ok(s) => outs.push(s),
                Err(e) => prop_assert!(e.to_string().contains("empty"), "{}", e),
            }
            let feeds = [(x, HostTensor::new(dims.clone(), data).unwrap())];
            let cpu = common::session_on(&g, Device::Cpu).run(&feeds, &outs).unwrap();
            for gpu in common::gpus() {
                let got = common::session_on(&g, gpu).run(&feeds, &outs).unwrap();
                for (k, (o, w)) in got.iter().zip(&cpu).enumerate() {
                    prop_assert_eq!(o.words(), w.words(), "{} output #{} of {:?} {:?}", gpu, k, dims, args);
                }
            }
        }
    }
}

/// Concats with few output rows and large blocks (a batch-1 concat along channels is one
/// row), whose copies are split in pieces across threads: 1, 2 and 3 rows of blocks that
/// are not multiples of the piece size, against indexing by hand.
#[test]
fn large_concats_with_few_rows_match_indexing() {
    for (outer, sizes) in [
        (1usize, vec![64usize * 3025, 64 * 3025]),
        (2, vec![40_000, 7, 33_000]),
        (3, vec![1, 70_001]),
    ] {
        let mut g = Graph::new();
        let mut parts = Vec::new();
        let mut data = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let v: Vec<i32> = (0..outer * n)
                .map(|j| (j as i32).wrapping_mul(7) ^ (i as i32) << 28)
                .collect();
            let t = g
                .placeholder(&format!("p{i}"), [outer, n], wgflow::DType::I32)
                .unwrap();
            parts.push(t);
            data.push(v);
        }
        let c = g.concat(&parts, 1).unwrap();
        let feeds: Vec<(Tensor, HostTensor)> = parts
            .iter()
            .zip(&data)
            .zip(&sizes)
            .map(|((&t, v), &n)| (t, HostTensor::new([outer, n], v.clone()).unwrap()))
            .collect();
        let got = common::session_on(&g, wgflow::Device::Cpu)
            .run(&feeds, &[c])
            .unwrap()[0]
            .to_vec::<i32>()
            .unwrap();
        let mut want = Vec::new();
        for o in 0..outer {
            for (v, &n) in data.iter().zip(&sizes) {
                want.extend_from_slice(&v[o * n..(o + 1) * n]);
            }
        }
        assert_eq!(got.len(), want.len(), "{outer} rows of {sizes:?}");
        assert!(got == want, "{outer} rows of {sizes:?}");
    }
}

/// A value and a reshape of it (one buffer range) read by one fused kernel: on a GPU the
/// kernel binds the range once (WebGPU refuses two writable bindings of one range), and the
/// result is still `x * x + x` computed here, on every device.
#[test]
fn a_value_and_its_reshape_in_one_kernel_bind_once() {
    let xv: Vec<f32> = vec![-2.5, 0.0, 1.5, 3.0];
    let mut g = Graph::new();
    let x = g.placeholder("x", [4], DType::F32).unwrap();
    let r = g.reshape(x, &[1, 4]).unwrap();
    let p = g.mul(x, r).unwrap();
    let y = g.add(p, x).unwrap();
    let want: Vec<f32> = xv.iter().map(|v| v * v + v).collect();
    for device in std::iter::once(Device::Cpu).chain(common::gpus()) {
        let mut s = common::session_on(&g, device);
        let out = s
            .run(&[(x, HostTensor::new(vec![4], xv.clone()).unwrap())], &[y])
            .unwrap();
        assert_eq!(out[0].dims(), [1, 4], "{device}");
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want, "{device}");
    }
}
