//! Models quantized as users quantize them (scripts/onnx/quantized_models.py): dynamic
//! (`DynamicQuantizeLinear` + `MatMulInteger`) and static, in both of onnxruntime's formats
//! (QDQ pairs; QOperator's `QLinearConv`, `QGemm`, `QLinearGlobalAveragePool`), on every
//! device, against onnxruntime.
//!
//! The exact reference is onnxruntime with graph optimizations off, which runs the model's
//! own semantics; its optimizer fuses QDQ pairs into integer kernels that round differently
//! (0.07 apart on the QDQ CNN), so the default run is matched to within quantization noise.

use std::path::{Path, PathBuf};
use wgflow::onnx::{ImportOptions, InferenceSession};
use wgflow::{Device, HostTensor, SessionOptions};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-quantized")
}

fn npy(name: &str, what: &str) -> HostTensor {
    wgflow::npy::read(dir().join(format!("{name}.{what}.npy"))).unwrap()
}

fn max_diff(a: &HostTensor, b: &HostTensor) -> f32 {
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn quantized_models_match_onnxruntime_on_every_device() {
    let mut devices = vec![Device::Cpu];
    devices.extend(crate::common::gpus());
    for name in [
        "mlp_dynamic",
        "encoder_ffn_dynamic",
        "cnn_static_qdq",
        "cnn_static_qoperator",
    ] {
        let (x, exact, ort) = (
            npy(name, "input"),
            npy(name, "unoptimized"),
            npy(name, "output"),
        );
        let scale = exact
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        for &device in &devices {
            let options = SessionOptions {
                default_device: Some(device),
                visible_devices: Some(crate::common::gpu_indices()),
                ..Default::default()
            };
            let mut s = InferenceSession::new(
                &dir().join(format!("{name}.onnx")),
                ImportOptions::default(),
                options,
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = s
                .run(None, &[("x", x.clone())])
                .unwrap_or_else(|e| panic!("{name} on {device}: {e}"));
            assert_eq!(got[0].dims(), exact.dims(), "{name} on {device}");
            let (d_exact, d_ort) = (max_diff(&got[0], &exact), max_diff(&got[0], &ort));
            // cpu:0 computes the model's arithmetic as onnxruntime does; a GPU's f32 division
            // may round a value at a quantization tie the other way: one step of noise.
            let tight = if device == Device::Cpu { 1e-5 } else { 0.1 } * scale.max(1.0);
            assert!(
                d_exact <= tight,
                "{name} on {device}: {d_exact} from onnxruntime (unoptimized)"
            );
            assert!(
                d_ort <= 0.1 * scale.max(1.0),
                "{name} on {device}: {d_ort} from onnxruntime"
            );
        }
    }
}

/// The integer kernels are exact: `MatMulInteger` over K = 1000 (past f32's exact range for
/// the sums) and an 8-bit wrap, against i64 arithmetic here.
#[test]
fn integer_matmul_is_exact_past_f32_range() {
    use wgflow::onnx::proto::{
        tensor_proto::DataType, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
        TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
    };
    use wgflow::onnx::Message;
    // B has 70,000 elements: past the size (2^16) from which the importer makes an integer
    // initializer a graph constant at once instead of an i64 host value.
    let (m, k, n) = (3usize, 1000usize, 70usize);
    let mut rng = crate::common::Rng(17);
    let a: Vec<i32> = (0..m * k).map(|_| rng.below(256) as i32).collect();
    let b: Vec<i32> = (0..k * n).map(|_| rng.below(256) as i32).collect();
    let raw = |v: &[i32]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
    let tensor = |name: &str, dims: &[i64], v: &[i32]| TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Uint8 as i32),
        raw_data: Some(raw(v)),
        ..Default::default()
    };
    let info = |name: &str, elem: DataType, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| wgflow::onnx::proto::tensor_shape_proto::Dimension {
                            value: Some(
                                wgflow::onnx::proto::tensor_shape_proto::dimension::Value::DimValue(
                                    d,
                                ),
                            ),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let node = |op: &str, i: &[&str], o: &str| NodeProto {
        op_type: Some(op.into()),
        input: i.iter().map(|s| s.to_string()).collect(),
        output: vec![o.into()],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![
                node("MatMulInteger", &["a", "b", "az", "bz"], "y"),
                // uint8 + uint8 wraps at 256.
                node("Add", &["a", "a"], "twice"),
            ],
            initializer: vec![
                tensor("b", &[k as i64, n as i64], &b),
                tensor("az", &[], &[7]),
                tensor("bz", &[], &[200]),
            ],
            input: vec![info("a", DataType::Uint8, &[m as i64, k as i64])],
            output: vec![
                info("y", DataType::Int32, &[m as i64, n as i64]),
                info("twice", DataType::Uint8, &[m as i64, k as i64]),
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut devices = vec![Device::Cpu];
    devices.extend(crate::common::gpus());
    for device in devices {
        let options = SessionOptions {
            default_device: Some(device),
            visible_devices: Some(crate::common::gpu_indices()),
            ..Default::default()
        };
        let mut s = InferenceSession::from_bytes(
            model.encode_to_vec(),
            None,
            ImportOptions::default(),
            options,
        )
        .unwrap();
        let feed = HostTensor::new([m, k], a.clone()).unwrap();
        let got = s.run(None, &[("a", feed)]).unwrap();
        let y = got[0].to_vec::<i32>().unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: i64 = (0..k)
                    .map(|p| (a[i * k + p] as i64 - 7) * (b[p * n + j] as i64 - 200))
                    .sum();
                assert_eq!(y[i * n + j] as i64, want, "[{i}, {j}] on {device}");
            }
        }
        let twice = got[1].to_vec::<i32>().unwrap();
        assert!(
            twice.iter().zip(&a).all(|(t, x)| *t == (2 * x) % 256),
            "uint8 wraps on {device}"
        );
    }
}
