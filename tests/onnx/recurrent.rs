//! What the conformance suite does not cover for the recurrent and control-flow ops:
//! `sequence_lens` (the suite's reference ignores it) and the errors of control flow that
//! cannot be unrolled at import.

use super::protos::{attr_graph, attr_int, attr_str, float_init, node, typed_value};
use wgflow::onnx::proto::{
    tensor_proto::DataType, GraphProto, ModelProto, OperatorSetIdProto, TensorProto,
};
use wgflow::onnx::{import_bytes, ImportOptions, Message};
use wgflow::{Device, Error, HostTensor, Session, SessionOptions};

fn model(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

const W: f32 = 0.5;
const R: f32 = -0.7;

/// One-unit RNN `h = tanh(W·x + R·h)` over x `[3, 2, 1]` with `sequence_lens = [3, 1]`.
fn rnn(direction: &str, x: &[f32; 6]) -> (Vec<f32>, Vec<f32>) {
    let lens = TensorProto {
        name: Some("lens".into()),
        dims: vec![2],
        data_type: Some(DataType::Int32 as i32),
        int32_data: vec![3, 1],
        ..Default::default()
    };
    let g = GraphProto {
        node: vec![node(
            "RNN",
            &["x", "W", "R", "", "lens"],
            &["y", "y_h"],
            vec![attr_int("hidden_size", 1), attr_str("direction", direction)],
        )],
        initializer: vec![
            float_init("W", &[1, 1, 1], vec![W]),
            float_init("R", &[1, 1, 1], vec![R]),
            lens,
        ],
        input: vec![typed_value("x", &[3, 2, 1], DataType::Float)],
        output: vec![
            typed_value("y", &[3, 1, 2, 1], DataType::Float),
            typed_value("y_h", &[1, 2, 1], DataType::Float),
        ],
        ..Default::default()
    };
    let m = import_bytes(&model(g).encode_to_vec(), None, &ImportOptions::default()).unwrap();
    let opts = SessionOptions {
        default_device: Some(Device::Cpu),
        visible_devices: Some(Vec::new()),
        ..Default::default()
    };
    let mut s = Session::new(&m.graph, opts).unwrap();
    let feed = HostTensor::new(vec![3, 2, 1], x.to_vec()).unwrap();
    let out = s
        .run(&[(m.inputs[0].tensor, feed)], &m.output_tensors())
        .unwrap();
    (out[0].to_f32().unwrap(), out[1].to_f32().unwrap())
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "got {got:?}, want {want:?}");
    }
}

#[test]
fn rnn_sequence_lens_stops_each_batch_entry_at_its_length() {
    // x[t][b]: batch entry 1 has length 1, so only its step 0 counts.
    let x = [1.0, 2.0, -1.0, 5.0, 0.5, -3.0];
    let step = |h: f32, x: f32| (W * x + R * h).tanh();
    // Forward: entry 0 runs 3 steps; entry 1 one step, then zeros in Y and its state kept.
    let (y, yh) = rnn("forward", &x);
    let h0 = [step(0.0, 1.0), step(0.0, 2.0)];
    let h1 = step(h0[0], -1.0);
    let h2 = step(h1, 0.5);
    close(&y, &[h0[0], h0[1], h1, 0.0, h2, 0.0]);
    close(&yh, &[h2, h0[1]]);
    // Reverse: entry 1 starts at its own last step (t = 0).
    let (y, yh) = rnn("reverse", &x);
    let r2 = step(0.0, 0.5);
    let r1 = step(r2, -1.0);
    let r0 = step(r1, 1.0);
    let b1 = step(0.0, 2.0);
    close(&y, &[r0, b1, r1, 0.0, r2, 0.0]);
    close(&yh, &[r0, b1]);
}

fn import_error(g: GraphProto) -> String {
    match import_bytes(&model(g).encode_to_vec(), None, &ImportOptions::default()) {
        Ok(_) => panic!("imported"),
        Err(e @ Error::Onnx { .. }) => e.to_string(),
        Err(e) => panic!("not an Error::Onnx: {e}"),
    }
}

fn branch(out: &str, op: &str) -> GraphProto {
    GraphProto {
        node: vec![node(op, &["x"], &[out], vec![])],
        output: vec![typed_value(out, &[2], DataType::Float)],
        ..Default::default()
    }
}

#[test]
fn if_needs_a_condition_known_at_import() {
    let g = GraphProto {
        node: vec![node(
            "If",
            &["c"],
            &["y"],
            vec![
                attr_graph("then_branch", branch("a", "Relu")),
                attr_graph("else_branch", branch("b", "Neg")),
            ],
        )],
        input: vec![
            typed_value("c", &[], DataType::Bool),
            typed_value("x", &[2], DataType::Float),
        ],
        output: vec![typed_value("y", &[2], DataType::Float)],
        ..Default::default()
    };
    let e = import_error(g.clone());
    assert!(
        e.contains("(If, opset 17)") && e.contains("must be known at import"),
        "{e}"
    );
    // Known at import, the chosen branch is the graph (reading the outer `x`).
    let mut opts = ImportOptions::default();
    opts.constant_inputs
        .insert("c".into(), HostTensor::scalar(false));
    let m = import_bytes(&model(g).encode_to_vec(), None, &opts).unwrap();
    let mut s = Session::new(
        &m.graph,
        SessionOptions {
            default_device: Some(Device::Cpu),
            visible_devices: Some(Vec::new()),
            ..Default::default()
        },
    )
    .unwrap();
    let x = HostTensor::new(vec![2], vec![1.5f32, -2.0]).unwrap();
    let y = s
        .run(&[(m.inputs[0].tensor, x)], &m.output_tensors())
        .unwrap();
    assert_eq!(y[0].to_f32().unwrap(), vec![-1.5, 2.0]);
}

#[test]
fn loop_needs_conditions_known_at_import() {
    // The body's condition is `x_in > 0` on a fed value: it cannot be unrolled.
    let body = GraphProto {
        node: vec![
            node(
                "ReduceSum",
                &["x_in"],
                &["s"],
                vec![attr_int("keepdims", 0)],
            ),
            node("Greater", &["s", "zero"], &["go"], vec![]),
            node("Neg", &["x_in"], &["x_out"], vec![]),
        ],
        input: vec![
            typed_value("i", &[], DataType::Int64),
            typed_value("c", &[], DataType::Bool),
            typed_value("x_in", &[2], DataType::Float),
        ],
        output: vec![
            typed_value("go", &[], DataType::Bool),
            typed_value("x_out", &[2], DataType::Float),
        ],
        ..Default::default()
    };
    let g = GraphProto {
        node: vec![node(
            "Loop",
            &["", "t", "x"],
            &["y"],
            vec![attr_graph("body", body)],
        )],
        initializer: vec![
            float_init("zero", &[], vec![0.0]),
            TensorProto {
                name: Some("t".into()),
                data_type: Some(DataType::Bool as i32),
                int32_data: vec![1],
                ..Default::default()
            },
        ],
        input: vec![typed_value("x", &[2], DataType::Float)],
        output: vec![typed_value("y", &[2], DataType::Float)],
        ..Default::default()
    };
    let e = import_error(g);
    assert!(
        e.contains("(Loop, opset 17)") && e.contains("computed at run time"),
        "{e}"
    );
}
