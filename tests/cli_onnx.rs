//! `wgflow run` on an ONNX model: a symbolic dimension bound with `--dim`, the model's output
//! as the default fetch, compared with values computed here by hand.

mod common;

use std::process::Command;
use wgflow::onnx::proto::{
    tensor_proto::DataType, tensor_shape_proto::dimension::Value as Dim,
    tensor_shape_proto::Dimension, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use wgflow::onnx::Message;
use wgflow::{Device, HostTensor};

fn value(name: &str, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(d.clone()),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = relu(x) + b` with `x: [N, 3]` and `b` an initializer.
fn model() -> ModelProto {
    let node = |op: &str, i: &[&str], o: &str| NodeProto {
        op_type: Some(op.into()),
        input: i.iter().map(|s| s.to_string()).collect(),
        output: vec![o.into()],
        ..Default::default()
    };
    let dims = [Dim::DimParam("N".into()), Dim::DimValue(3)];
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![node("Relu", &["x"], "r"), node("Add", &["r", "b"], "y")],
            initializer: vec![TensorProto {
                name: Some("b".into()),
                dims: vec![3],
                data_type: Some(DataType::Float as i32),
                float_data: vec![10.0, 20.0, 30.0],
                ..Default::default()
            }],
            input: vec![value("x", &dims)],
            output: vec![value("y", &dims)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn run_an_onnx_model_with_a_bound_dimension() {
    let dir = std::env::temp_dir().join(format!("wgflow-cli-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relu_add.onnx");
    std::fs::write(&path, model().encode_to_vec()).unwrap();
    let x = [-1.0f32, 2.0, -3.0, 4.0, 0.5, -0.5];
    let feed = dir.join("x.npy");
    wgflow::npy::write(&feed, &HostTensor::new(vec![2, 3], x.to_vec()).unwrap()).unwrap();
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v.max(0.0) + [10.0, 20.0, 30.0][i % 3])
        .collect();
    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    for dev in devices {
        let out = dir.join(format!("out-{}", dev.to_string().replace(':', "")));
        let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
            .args(["run", path.to_str().unwrap(), "--dim", "N=2", "--device"])
            .arg(dev.to_string())
            .arg("--feed")
            .arg(format!("x={}", feed.display()))
            .arg("--out")
            .arg(&out)
            .env_remove("WGFLOW_VISIBLE_DEVICES")
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let files: Vec<_> = std::fs::read_dir(&out).unwrap().flatten().collect();
        assert_eq!(files.len(), 1, "one output file");
        let got = wgflow::npy::read(files[0].path()).unwrap();
        assert_eq!(got.dims(), &[2, 3]);
        assert_eq!(got.to_vec::<f32>().unwrap(), want, "on {dev}");
    }
    // Without the binding the symbolic dimension is named in the error.
    let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["run", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("--dim N=SIZE"));
    // `validate` imports the model and summarises it, and names the unbound dimension.
    let ok = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["validate", path.to_str().unwrap(), "--dim", "N=2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        stdout.contains(": ok, nodes: ") && stdout.contains("placeholders: 1"),
        "{stdout}"
    );
    let unbound = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!unbound.status.success());
    assert!(String::from_utf8_lossy(&unbound.stderr).contains("--dim N=SIZE"));
    let _ = std::fs::remove_dir_all(&dir);
}
