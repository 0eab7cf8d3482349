//! Models in the shapes exporters write them (scripts/onnx/export_patterns.py): int64 ids and
//! mask with symbolic `batch` and `sequence`, run at three sizes through one
//! `InferenceSession` and one `Session`, against onnxruntime's outputs.

use std::path::{Path, PathBuf};
use wgflow::onnx::{import, ImportOptions, InferenceSession};
use wgflow::{DType, Device, Dim, HostTensor, Session, SessionOptions};

const SIZES: [(usize, usize); 3] = [(1, 7), (8, 128), (29, 7)];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-patterns")
}

/// A committed `.npy` (ids and ArgMax outputs are int64 there: read as i32).
fn npy(model: &str, (b, s): (usize, usize), name: &str) -> HostTensor {
    wgflow::npy::read(dir().join(format!("{model}.{b}x{s}.{name}.npy"))).unwrap()
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(crate::common::gpus());
    d
}

fn options(device: Device) -> SessionOptions {
    SessionOptions {
        default_device: Some(device),
        visible_devices: Some(crate::common::gpu_indices()),
        ..Default::default()
    }
}

fn check(model: &str, size: (usize, usize), got: &[HostTensor], on: &str) {
    let names = ["logits", "predictions", "pooler_logits"];
    assert_eq!(got.len(), names.len());
    for (g, name) in got.iter().zip(names) {
        let want = npy(model, size, name);
        let what = format!("{model} {size:?} {name} on {on}");
        assert_eq!(g.dims(), want.dims(), "{what}");
        if name == "predictions" {
            assert_eq!(g.dtype(), DType::I32, "{what}");
            assert_eq!(
                g.to_vec::<i32>().unwrap(),
                want.to_vec::<i32>().unwrap(),
                "{what}"
            );
        } else {
            crate::common::assert_close(&what, g, &want, 1e-4, 1e-5);
        }
    }
}

/// One import, one session: batches of 1, 8 and 29 and sequences of 7 and 128, each with a
/// plan of its own, all matching onnxruntime.
#[test]
fn symbolic_batch_and_sequence_in_one_session() {
    let path = dir().join("encoder.onnx");
    let model = import(&path, &ImportOptions::default()).unwrap();
    let ids = &model.inputs[0];
    assert_eq!(ids.name, "input_ids");
    assert!(ids.is_int64());
    assert_eq!(ids.dims, [Dim::named("batch"), Dim::named("sequence")]);
    assert!(model.graph.has_unknown_dims());
    assert_eq!(
        model.outputs[0].dims,
        [Dim::named("batch"), Dim::named("sequence"), Dim::Known(40)]
    );
    assert!(model.outputs[1].is_int64());
    for device in devices() {
        let mut session = Session::new(&model.graph, options(device)).unwrap();
        for size in SIZES {
            let feeds = [
                (model.inputs[0].tensor, npy("encoder", size, "input_ids")),
                (
                    model.inputs[1].tensor,
                    npy("encoder", size, "attention_mask"),
                ),
            ];
            let got = session.run(&feeds, &model.output_tensors()).unwrap();
            check("encoder", size, &got, &device.to_string());
        }
    }
}

/// By names, as onnxruntime's `run(None, {...})`: the symbolic model through one import, the
/// model whose position ids are `Range(0, sequence)` (data from a size) through one import
/// per size, both right at every size and on every device.
#[test]
fn inference_session_by_names_at_every_size() {
    for (model, per_binding) in [("encoder", false), ("bert_positions", true)] {
        for device in devices() {
            let mut s = InferenceSession::new(
                &dir().join(format!("{model}.onnx")),
                ImportOptions::default(),
                options(device),
            )
            .unwrap();
            assert_eq!(
                s.per_binding().is_some(),
                per_binding,
                "{model}: {:?}",
                s.per_binding()
            );
            if let Some(why) = s.per_binding() {
                assert!(
                    // The session binds sizes itself: no advice to pin them.
                    why.contains("pos_ids") && !why.contains("--dim"),
                    "{why}"
                );
            }
            let names: Vec<&str> = s.outputs().iter().map(|o| o.name.as_str()).collect();
            assert_eq!(names, ["logits", "predictions", "pooler_logits"]);
            assert!(s.outputs()[1].is_int64() && s.inputs()[0].is_int64());
            // Twice round, so cached plans and imports are hit as well as made.
            for size in SIZES.iter().chain(&SIZES) {
                let feeds = [
                    ("input_ids", npy(model, *size, "input_ids")),
                    ("attention_mask", npy(model, *size, "attention_mask")),
                ];
                let got = s.run(None, &feeds).unwrap();
                check(model, *size, &got, &device.to_string());
            }
            // One output by name, and an inner value by its ONNX name.
            let size = SIZES[0];
            let feeds = [
                ("input_ids", npy(model, size, "input_ids")),
                ("attention_mask", npy(model, size, "attention_mask")),
            ];
            // By value (the Python binding's path): the same values, nothing copied.
            let owned = s.run_owned(None, feeds.to_vec()).unwrap();
            check(model, size, &owned, &device.to_string());
            let got = s.run(Some(&["pooler_logits", "merged"]), &feeds).unwrap();
            crate::common::assert_close(
                "pooler_logits",
                &got[0],
                &npy(model, size, "pooler_logits"),
                1e-4,
                1e-5,
            );
            assert_eq!(got[1].dims(), [1, 7, 16]);
        }
    }
}

/// Feeds that disagree, name nothing, or leave a size unknown are errors that say which.
#[test]
fn inference_session_errors_name_the_feed() {
    let mut s = InferenceSession::new(
        &dir().join("bert_positions.onnx"),
        ImportOptions::default(),
        options(Device::Cpu),
    )
    .unwrap();
    let ids = HostTensor::from_i64([2, 3], &[1, 2, 3, 4, 5, 6]).unwrap();
    let mask = HostTensor::from_i64([2, 4], &[1; 8]).unwrap();
    let e = s
        .run(
            None,
            &[("input_ids", ids.clone()), ("attention_mask", mask)],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("sequence") && e.contains("input_ids"), "{e}");
    let e = s
        .run(None, &[("ids", ids.clone())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("input_ids, attention_mask"), "{e}");
    let e = s
        .run(None, &[("input_ids", ids.clone())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("attention_mask") && e.contains("not fed"), "{e}");
    let e = s
        .run(
            Some(&["nope"]),
            &[
                ("input_ids", ids.clone()),
                (
                    "attention_mask",
                    HostTensor::from_i64([2, 3], &[1; 6]).unwrap(),
                ),
            ],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope"), "{e}");
    // An id past int32 is refused where it is made, naming its index.
    let e = HostTensor::from_i64([2], &[5, i64::MAX])
        .unwrap_err()
        .to_string();
    assert!(e.contains("index 1"), "{e}");
    // A pinned size makes a static graph, as before.
    let mut opts = ImportOptions::default();
    opts.dims.insert("batch".into(), 8);
    opts.dims.insert("sequence".into(), 128);
    let m = import(&dir().join("encoder.onnx"), &opts).unwrap();
    assert!(!m.graph.has_unknown_dims());
    assert_eq!(m.inputs[0].shape.dims(), [8, 128]);
}
