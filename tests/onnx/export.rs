//! ONNX export (`wgflow::onnx::export*`): each committed example graph, the `train_digits`
//! models after a few training steps (variables frozen from the session) and a graph of the
//! remaining op mappings are exported, imported back with `import_bytes`, and run on cpu:0
//! and one GPU against the original graph's cpu:0 outputs. Unsupported ops are errors.
//!
//! With `WGFLOW_ONNX_EXPORT_DIR` set, each case is also written there as
//! `<case>/model.onnx` with `test_data_set_0/input_*.pb` (the feeds) and `output_*.pb`
//! (wgflow's outputs), for `scripts/onnx/export_check.py` to run with onnxruntime.

use crate::common::{assert_close, gpus, session_on};
use std::path::PathBuf;
use wgflow::onnx::proto::{tensor_proto::DataType, TensorProto};
use wgflow::onnx::{export_bytes, export_bytes_with_session, import_bytes, ImportOptions, Message};
use wgflow::{Axes, DType, Device, Graph, HostTensor, PadMode, Session, SliceArg, Tensor};

#[allow(dead_code)]
mod models {
    include!("../../graph-examples/models.rs");
}

#[allow(dead_code)]
mod digits {
    include!("../../graph-examples/digits_model.rs");
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("graph-examples")
}

/// Run `fetches` of `g` on cpu:0 (with `session` when given, for its variables), export,
/// import, and check the imported model on cpu:0 and one GPU against those outputs.
fn round_trip(
    case: &str,
    g: &Graph,
    fetches: &[Tensor],
    feeds: &[(Tensor, HostTensor)],
    session: Option<&mut Session>,
) {
    let (want, bytes) = match session {
        Some(s) => (
            s.run(feeds, fetches).unwrap(),
            export_bytes_with_session(s, g, fetches).unwrap(),
        ),
        None => (
            session_on(g, Device::Cpu).run(feeds, fetches).unwrap(),
            export_bytes(g, fetches).unwrap(),
        ),
    };
    let model = import_bytes(&bytes, None, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{case}: re-import: {e}"));
    assert_eq!(model.outputs.len(), fetches.len(), "{case}: outputs");
    let mut new_feeds = Vec::new();
    for input in &model.inputs {
        let (_, v) = feeds
            .iter()
            .find(|(t, _)| g.name(*t).unwrap() == input.name)
            .unwrap_or_else(|| panic!("{case}: no feed for input '{}'", input.name));
        new_feeds.push((input.tensor, v.clone()));
    }
    assert_eq!(new_feeds.len(), feeds.len(), "{case}: inputs");
    let mut devices = vec![Device::Cpu];
    devices.extend(gpus().into_iter().take(1));
    for d in devices {
        let got = session_on(&model.graph, d)
            .run(&new_feeds, &model.output_tensors())
            .unwrap_or_else(|e| panic!("{case} on {d}: {e}"));
        let (rtol, atol) = if d == Device::Cpu {
            (1e-5, 1e-5)
        } else {
            (1e-3, 1e-4)
        };
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_close(&format!("{case} on {d}, output {k}"), a, b, rtol, atol);
        }
    }
    if let Ok(dir) = std::env::var("WGFLOW_ONNX_EXPORT_DIR") {
        let dir = PathBuf::from(dir).join(case);
        let data = dir.join("test_data_set_0");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(dir.join("model.onnx"), &bytes).unwrap();
        for (k, input) in model.inputs.iter().enumerate() {
            let v = &new_feeds[k].1;
            std::fs::write(data.join(format!("input_{k}.pb")), proto(&input.name, v)).unwrap();
        }
        for (k, (o, v)) in model.outputs.iter().zip(&want).enumerate() {
            std::fs::write(data.join(format!("output_{k}.pb")), proto(&o.name, v)).unwrap();
        }
    }
}

/// A serialized `TensorProto` of `v` named `name`.
fn proto(name: &str, v: &HostTensor) -> Vec<u8> {
    let (dt, raw): (DataType, Vec<u8>) = match v.dtype() {
        DType::F32 => (DataType::Float, v.bytes().to_vec()),
        DType::I32 => (DataType::Int32, v.bytes().to_vec()),
        DType::U32 => (DataType::Uint32, v.bytes().to_vec()),
        DType::Bool => (DataType::Bool, v.words().iter().map(|&w| w as u8).collect()),
        DType::F16 => (
            DataType::Float16,
            v.words()
                .iter()
                .flat_map(|&w| (w as u16).to_le_bytes())
                .collect(),
        ),
    };
    TensorProto {
        dims: v.dims().iter().map(|&d| d as i64).collect(),
        data_type: Some(dt as i32),
        raw_data: Some(raw),
        name: Some(name.into()),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A deterministic f32 input.
fn input(shape: &[usize], k: usize) -> HostTensor {
    models::det_weights(shape, k, 1.0)
}

#[test]
fn graph_files_round_trip() {
    for name in ["add", "softmax"] {
        let g = Graph::load(examples().join(format!("{name}.json"))).unwrap();
        let last = g.tensors().last().unwrap();
        round_trip(name, &g, &[last], &[], None);
    }
    let g = Graph::load(examples().join("mlp.json")).unwrap();
    let x = g.tensor("x").unwrap();
    let xv = wgflow::npy::read(examples().join("mlp.feeds/x.npy")).unwrap();
    let last = g.tensors().last().unwrap();
    round_trip("mlp", &g, &[last], &[(x, xv)], None);
}

#[test]
fn cnn_and_transformer_round_trip() {
    let mut g = Graph::new();
    let x = g.placeholder("x", models::CNN_INPUT, DType::F32).unwrap();
    let y = models::build_cnn(&mut g, x).unwrap();
    round_trip("cnn", &g, &[y], &[(x, input(&models::CNN_INPUT, 7))], None);

    let mut g = Graph::new();
    let x = g
        .placeholder("x", models::TRANSFORMER_INPUT, DType::F32)
        .unwrap();
    let y = models::build_transformer(&mut g, x).unwrap();
    let xv = input(&models::TRANSFORMER_INPUT, 9);
    round_trip("transformer", &g, &[y], &[(x, xv)], None);
}

/// The `train_digits` models after a few SGD steps: the batch loss and the test accuracy
/// (take, log_softmax, one_hot, argmax, equal, cast, mean over the dataset constants).
#[test]
fn trained_digits_models_round_trip() {
    use wgflow::train::{Optimizer, Sgd};
    let data = digits::load_digits(&digits::data_dir()).unwrap();
    for (model, steps) in [(digits::Model::Mlp, 5), (digits::Model::Cnn, 1)] {
        let mut d = digits::build_digits(&data, model, 3).unwrap();
        let train = Sgd::new(0.1)
            .minimize(&mut d.graph, d.loss, &d.params)
            .unwrap();
        let mut s = session_on(&d.graph, Device::Cpu);
        let batch = |k: i32| HostTensor::new([16], (0..16).map(|i| i * 7 + k).collect::<Vec<_>>());
        for k in 0..steps {
            s.run_targets(&[(d.batch, batch(k).unwrap())], &[train])
                .unwrap();
        }
        let feeds = [(d.batch, batch(99).unwrap())];
        let case = format!("digits_{}", model.name());
        // ONNX files here have static shapes: the graph with its batch size bound.
        let fixed = d.graph.with_dims(&[("batch", 16)]).unwrap();
        round_trip(&case, &fixed, &[d.loss, d.accuracy], &feeds, Some(&mut s));
    }
}

/// Slices, flips, broadcasts, pads, concat, take, reductions, cumsum, comparisons, casts,
/// `where`, floor division and remainders, fused layer norm and cross-entropy.
#[test]
fn other_mappings_round_trip() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3, 4], DType::F32).unwrap();
    let i = g.placeholder("i", [3], DType::I32).unwrap();
    let mut outs = Vec::new();
    let s = g
        .slice(x, &[SliceArg::full(), SliceArg::new(Some(2), None, -2)])
        .unwrap();
    outs.push(g.slice(s, &[SliceArg::range(1, 2)]).unwrap());
    outs.push(g.flip(x, Axes::List(vec![0, 2])).unwrap());
    let r = g.reshape(x, &[2, 3, 1, 4]).unwrap();
    outs.push(g.broadcast_to(r, &[5, 2, 3, 2, 4]).unwrap());
    outs.push(
        g.pad(x, &[(1, 0), (0, 2), (1, 1)], PadMode::Constant(0.5))
            .unwrap(),
    );
    outs.push(g.concat(&[x, x], 1).unwrap());
    outs.push(g.take(x, i, 2).unwrap());
    outs.push(g.max(x, Axes::List(vec![0, 2]), true).unwrap());
    outs.push(g.mean(x, Axes::List(vec![1]), false).unwrap());
    outs.push(g.sum(x, Axes::All, false).unwrap());
    outs.push(g.argmax(x, Some(1), false).unwrap());
    outs.push(g.cumsum(x, 2).unwrap());
    let three = g.constant(HostTensor::scalar(0.3f32)).unwrap();
    let c = g.greater(x, three).unwrap();
    outs.push(g.all(c, Axes::List(vec![2]), false).unwrap());
    outs.push(g.not_equal(x, three).unwrap());
    let neg = g.neg(x).unwrap();
    outs.push(g.select(c, x, neg).unwrap());
    outs.push(g.cast(x, DType::I32).unwrap());
    outs.push(g.floor_divide(x, three).unwrap());
    outs.push(g.remainder(x, three).unwrap());
    let a = g.abs(x).unwrap();
    outs.push(g.rsqrt(a).unwrap());
    let e = g.exp(x).unwrap();
    outs.push(g.log1p(e).unwrap());
    outs.push(g.isfinite(x).unwrap());
    let seven = g
        .constant(HostTensor::new([3], vec![7, -7, 8]).unwrap())
        .unwrap();
    let three_i = g
        .constant(HostTensor::new([3], vec![2, 2, -3]).unwrap())
        .unwrap();
    outs.push(g.floor_divide(seven, three_i).unwrap());
    outs.push(g.remainder(seven, three_i).unwrap());
    // The fused row ops: LayerNormalization, SoftmaxCrossEntropyLoss over [.., C] rows.
    let gamma = g
        .constant(HostTensor::new([4], vec![1.0f32, 0.5, 2.0, -1.0]).unwrap())
        .unwrap();
    let beta = g
        .constant(HostTensor::new([4], vec![0.0f32, 0.25, -0.5, 1.0]).unwrap())
        .unwrap();
    outs.push(g.layer_norm(x, Some(gamma), Some(beta), -1, 1e-3).unwrap());
    let labels = g
        .constant(HostTensor::new([2, 3], vec![0i32, 3, 1, 2, 2, 0]).unwrap())
        .unwrap();
    outs.push(g.sparse_softmax_cross_entropy(x, labels).unwrap());
    // ScatterElements with reduction = add, two updates landing on one element.
    let idx = g
        .constant(HostTensor::new([2, 2], vec![1i32, 0, 1, 1]).unwrap())
        .unwrap();
    let upd = g
        .slice(
            x,
            &[
                SliceArg::range(0, 2),
                SliceArg::range(0, 1),
                SliceArg::range(0, 2),
            ],
        )
        .unwrap();
    let upd = g.reshape(upd, &[2, 2]).unwrap();
    let base = g
        .slice(
            x,
            &[
                SliceArg::range(1, 2),
                SliceArg::range(1, 3),
                SliceArg::range(2, 4),
            ],
        )
        .unwrap();
    let base = g.reshape(base, &[2, 2]).unwrap();
    outs.push(g.scatter_add(base, idx, upd, 1).unwrap());
    let xv = input(&[2, 3, 4], 5);
    let iv = HostTensor::new([3], vec![3, 0, 1]).unwrap();
    round_trip("mappings", &g, &outs, &[(x, xv), (i, iv)], None);
}

#[test]
fn unsupported_ops_and_unfrozen_variables_are_errors() {
    let mut g = Graph::new();
    let r = g.random_uniform([3], 0.0, 1.0, 1).unwrap();
    let y = g.relu(r).unwrap();
    let e = export_bytes(&g, &[y]).unwrap_err().to_string();
    assert!(e.contains("random") && e.contains("no ONNX export"), "{e}");
    // Every family says why it cannot export: a scatter with max needs a later opset.
    let mut g = Graph::new();
    let d = g.placeholder("d", [3], DType::F32).unwrap();
    let i = g.placeholder("i", [2], DType::I32).unwrap();
    let u = g.placeholder("u", [2], DType::F32).unwrap();
    let y = g
        .scatter_elements(d, i, u, 0, wgflow::ops::index::ScatterReduce::Max)
        .unwrap();
    let e = export_bytes(&g, &[y]).unwrap_err().to_string();
    assert!(e.contains("needs opset 18"), "{e}");

    let mut g = Graph::new();
    let v = g
        .variable("w", HostTensor::new([2], vec![1.0f32, 2.0]).unwrap())
        .unwrap();
    let y = g.exp(v).unwrap();
    let e = export_bytes(&g, &[y]).unwrap_err().to_string();
    assert!(
        e.contains("'w'") && e.contains("export_with_session"),
        "{e}"
    );
    let mut s = session_on(&g, Device::Cpu);
    round_trip("variable", &g, &[y], &[], Some(&mut s));

    let e = export_bytes(&g, &[]).unwrap_err().to_string();
    assert!(e.contains("no fetches"), "{e}");
}

#[test]
fn export_writes_a_file_atomically() {
    let dir = std::env::temp_dir().join(format!("wgflow-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut g = Graph::new();
    let x = g.placeholder("x/in put", [2], DType::F32).unwrap();
    let y = g.tanh(x).unwrap();
    let path = dir.join("m.onnx");
    wgflow::onnx::export(&g, &[y, y], &path).unwrap();
    let m = wgflow::onnx::import(&path, &ImportOptions::default()).unwrap();
    assert_eq!(m.inputs[0].name, "x/in_put");
    assert_eq!(m.outputs.len(), 2);
    assert_ne!(m.outputs[0].name, m.outputs[1].name);
    std::fs::remove_dir_all(&dir).unwrap();
}
