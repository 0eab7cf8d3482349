//! Models written by other frameworks' converters — a Keras transformer encoder block through
//! tf2onnx and a scikit-learn MLP regressor through skl2onnx (`scripts/onnx/peer_models.py`)
//! — against onnxruntime's outputs committed beside them, on every device.

use std::path::PathBuf;
use wgflow::onnx::{import, ImportOptions};
use wgflow::{Device, Session, SessionOptions};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-peers")
}

fn check(name: &str, dims: &[(&str, usize)]) {
    let mut opts = ImportOptions::default();
    opts.dims
        .extend(dims.iter().map(|(k, v)| (k.to_string(), *v)));
    let model = import(&dir().join(format!("{name}.onnx")), &opts)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let x = wgflow::npy::read(dir().join(format!("{name}_input.npy"))).expect("input");
    let want = wgflow::npy::read(dir().join(format!("{name}_output.npy"))).expect("output");
    let want = want.to_vec::<f32>().expect("f32");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let mut devices = vec![Device::Cpu];
    devices.extend(crate::common::gpus());
    for device in devices {
        let options = SessionOptions {
            default_device: Some(device),
            visible_devices: Some(crate::common::gpu_indices()),
            ..Default::default()
        };
        let mut session = Session::new(&model.graph, options).expect("session");
        let got = session
            .run(
                &[(model.inputs[0].tensor, x.clone())],
                &model.output_tensors(),
            )
            .unwrap_or_else(|e| panic!("{name} on {device}: {e}"));
        let got = got[0].to_vec::<f32>().expect("f32");
        assert_eq!(got.len(), want.len(), "{name} on {device}");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-3 * b.abs().max(1e-2 * scale),
                "{name} on {device}: [{i}] {a} vs onnxruntime {b}"
            );
        }
    }
}

#[test]
fn keras_transformer_encoder_via_tf2onnx_matches_onnxruntime() {
    check("keras_encoder", &[]);
}

#[test]
fn sklearn_mlp_regressor_via_skl2onnx_matches_onnxruntime() {
    // skl2onnx leaves the batch dimension without a size or a name: bound by position.
    check("sklearn_mlp", &[("X:0", 16)]);
    // Unbound, it is a run-time dimension named by position, sized by the feed.
    check("sklearn_mlp", &[]);
    let unbound = import(&dir().join("sklearn_mlp.onnx"), &ImportOptions::default()).unwrap();
    assert_eq!(unbound.inputs[0].dims[0], wgflow::Dim::named("X:0"));
}
