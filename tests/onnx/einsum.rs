//! `Einsum` against a float64 sum over every assignment of the labels (computed here, one
//! loop per case), on every device: matmuls, batches, diagonals, traces, sums, outer
//! products, three operands, implicit outputs and ellipses; and one import serving two
//! batch sizes when the batch is a run-time dimension.

use super::common;
use super::common::grad::uniform;
use super::protos::{node, typed_value};
use std::collections::BTreeMap;
use wgflow::onnx::proto::tensor_proto::DataType;
use wgflow::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, OperatorSetIdProto, ValueInfoProto,
};
use wgflow::onnx::{ImportOptions, InferenceSession, Message};
use wgflow::{HostTensor, SessionOptions};

fn model(eq: &str, inputs: Vec<ValueInfoProto>) -> ModelProto {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("x{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let attr = AttributeProto {
        name: Some("equation".into()),
        r#type: Some(wgflow::onnx::proto::attribute_proto::AttributeType::String as i32),
        s: Some(eq.as_bytes().to_vec()),
        ..Default::default()
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(12),
        }],
        graph: Some(GraphProto {
            node: vec![node("Einsum", &refs, &["y"], vec![attr])],
            input: inputs,
            output: vec![ValueInfoProto {
                name: Some("y".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The labels of each operand and of the output (letters only; implicit output: the labels
/// used once, alphabetically).
fn parse(eq: &str) -> (Vec<Vec<char>>, Vec<char>) {
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq, None),
    };
    let ins: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
    let out = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let all: Vec<char> = ins.iter().flatten().copied().collect();
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| all.iter().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            once
        }
    };
    (ins, out)
}

/// Σ over every label assignment of the operands' product, in float64.
fn reference(eq: &str, shapes: &[Vec<usize>], data: &[Vec<f32>]) -> (Vec<usize>, Vec<f64>) {
    let (ins, out) = parse(eq);
    let mut size: BTreeMap<char, usize> = BTreeMap::new();
    for (labels, shape) in ins.iter().zip(shapes) {
        for (l, &d) in labels.iter().zip(shape) {
            size.insert(*l, d);
        }
    }
    let labels: Vec<char> = size.keys().copied().collect();
    let out_shape: Vec<usize> = out.iter().map(|l| size[l]).collect();
    let mut y = vec![0f64; out_shape.iter().product()];
    let total: usize = labels.iter().map(|l| size[l]).product();
    let flat = |ls: &[char], at: &BTreeMap<char, usize>| -> usize {
        ls.iter().fold(0, |acc, l| acc * size[l] + at[l])
    };
    for mut k in 0..total {
        let mut at = BTreeMap::new();
        for l in labels.iter().rev() {
            at.insert(*l, k % size[l]);
            k /= size[l];
        }
        let p: f64 = ins
            .iter()
            .zip(data)
            .map(|(ls, d)| d[flat(ls, &at)] as f64)
            .product();
        y[flat(&out, &at)] += p;
    }
    (out_shape, y)
}

/// `eq` (with `reference_eq`, its ellipsis spelled out, for the float64 side) on every
/// device.
fn check(eq: &str, reference_eq: &str, shapes: &[Vec<usize>]) {
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| uniform(s.iter().product(), -1.0, 1.0, 40 + i as u64))
        .collect();
    let (want_shape, want) = reference(reference_eq, shapes, &data);
    let inputs = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let dims: Vec<i64> = s.iter().map(|&d| d as i64).collect();
            typed_value(&format!("x{i}"), &dims, DataType::Float)
        })
        .collect();
    let bytes = model(eq, inputs).encode_to_vec();
    for device in std::iter::once(wgflow::Device::Cpu).chain(common::gpus()) {
        let options = SessionOptions {
            default_device: Some(device),
            visible_devices: Some(common::gpu_indices()),
            ..Default::default()
        };
        let mut s =
            InferenceSession::from_bytes(bytes.clone(), None, ImportOptions::default(), options)
                .unwrap_or_else(|e| panic!("{eq}: {e}"));
        let feeds: Vec<(String, HostTensor)> = shapes
            .iter()
            .zip(&data)
            .enumerate()
            .map(|(i, (s, d))| {
                (
                    format!("x{i}"),
                    HostTensor::new(s.clone(), d.clone()).unwrap(),
                )
            })
            .collect();
        let feeds: Vec<(&str, HostTensor)> =
            feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let got = s
            .run(None, &feeds)
            .unwrap_or_else(|e| panic!("{eq} on {device}: {e}"));
        assert_eq!(got[0].dims(), &want_shape[..], "{eq} on {device}");
        for (i, (&g, &w)) in got[0].to_f32().unwrap().iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{eq} on {device}: y[{i}] = {g}, float64 {w}"
            );
        }
    }
}

#[test]
fn einsum_matches_a_float64_sum_over_every_label_assignment() {
    let cases: &[(&str, &str, &[&[usize]])] = &[
        ("ij,jk->ik", "ij,jk->ik", &[&[3, 4], &[4, 5]]),
        ("bij,bjk->bik", "bij,bjk->bik", &[&[2, 3, 4], &[2, 4, 5]]),
        (
            "bhqd,bhkd->bhqk",
            "bhqd,bhkd->bhqk",
            &[&[2, 3, 4, 5], &[2, 3, 6, 5]],
        ),
        ("ii->i", "ii->i", &[&[4, 4]]),
        ("ii", "ii", &[&[3, 3]]),
        ("bii->bi", "bii->bi", &[&[2, 3, 3]]),
        ("ij->ji", "ij->ji", &[&[3, 5]]),
        ("ij->", "ij->", &[&[3, 5]]),
        ("i,i", "i,i", &[&[7], &[7]]),
        ("i,j->ij", "i,j->ij", &[&[3], &[4]]),
        ("kj,ji", "kj,ji", &[&[3, 4], &[4, 2]]),
        ("ab,ab->", "ab,ab->", &[&[3, 4], &[3, 4]]),
        ("...ij,...jk->...ik", "xij,jk->xik", &[&[2, 3, 4], &[4, 5]]),
        (
            "abc,cd,de->abe",
            "abc,cd,de->abe",
            &[&[2, 3, 4], &[4, 5], &[5, 2]],
        ),
        (
            "abcd,cdf->abf",
            "abcd,cdf->abf",
            &[&[2, 3, 4, 2], &[4, 2, 3]],
        ),
        (
            "bn,anm,bm->ba",
            "bn,anm,bm->ba",
            &[&[2, 3], &[4, 3, 5], &[2, 5]],
        ),
    ];
    for (eq, reference_eq, shapes) in cases {
        let shapes: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
        check(eq, reference_eq, &shapes);
    }
}

#[test]
fn einsum_over_a_run_time_batch_serves_two_batch_sizes_in_one_import() {
    let mut x = typed_value("x0", &[1, 3, 4], DataType::Float);
    // The first dimension symbolic.
    if let Some(t) = x.r#type.as_mut() {
        if let Some(wgflow::onnx::proto::type_proto::Value::TensorType(tt)) = t.value.as_mut() {
            if let Some(s) = tt.shape.as_mut() {
                s.dim[0].value = Some(
                    wgflow::onnx::proto::tensor_shape_proto::dimension::Value::DimParam(
                        "batch".into(),
                    ),
                );
            }
        }
    }
    let w = typed_value("x1", &[4, 5], DataType::Float);
    let bytes = model("bij,jk->bik", vec![x, w]).encode_to_vec();
    let mut s = InferenceSession::from_bytes(
        bytes,
        None,
        ImportOptions::default(),
        SessionOptions::default(),
    )
    .unwrap();
    assert!(s.per_binding().is_none(), "{:?}", s.per_binding());
    let wd = uniform(20, -1.0, 1.0, 9);
    for b in [1usize, 6] {
        let xd = uniform(b * 12, -1.0, 1.0, b as u64);
        let feeds = [
            ("x0", HostTensor::new(vec![b, 3, 4], xd.clone()).unwrap()),
            ("x1", HostTensor::new(vec![4, 5], wd.clone()).unwrap()),
        ];
        let got = s.run(None, &feeds).unwrap();
        let (shape, want) = reference(
            "bij,jk->bik",
            &[vec![b, 3, 4], vec![4, 5]],
            &[xd, wd.clone()],
        );
        assert_eq!(got[0].dims(), &shape[..]);
        for (&g, &w) in got[0].to_f32().unwrap().iter().zip(&want) {
            assert!((g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()));
        }
    }
}
