//! The `onnx` package's nine light models (real architectures, 38–1,746 nodes) on every device.
//!
//! Their weights are `ConstantOfShape` (one value per tensor), so the outputs the package
//! stores are a uniform softmax: matching them shows the model imports and runs, little more.
//! The numbers are checked with random weights: each `ConstantOfShape` weight is replaced by
//! deterministic pseudo-random values (`randomized`, the same rules as
//! `scripts/onnx/light_golden.py`), and the output and the logits (the final Softmax's input)
//! are compared with onnxruntime's, computed by that script and committed in
//! `tests/data/onnx-light/random/`.
//!
//! cpu:0 runs all nine; a GPU runs SqueezeNet and ShuffleNet (a software GPU
//! compiles a pipeline per convolution shape, minutes for all nine); `WGFLOW_ONNX_LIGHT=all`
//! runs all nine everywhere.

use std::path::PathBuf;
use std::time::Instant;
use wgflow::onnx::proto::{
    tensor_proto::DataType, AttributeProto, ModelProto, NodeProto, TensorProto, ValueInfoProto,
};
use wgflow::onnx::{import, import_bytes, load_tensor, ImportOptions, Message, Model};
use wgflow::{Device, HostTensor, Session, SessionOptions};

const MODELS: [&str; 9] = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-light")
}

/// `onnx.backend.test.runner.Runner.generate_dummy_data(random=False)`: `arange(n) / n`.
fn dummy(dims: &[usize]) -> HostTensor {
    let n: usize = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i as f64 / n as f64) as f32).collect();
    HostTensor::new(dims.to_vec(), data).expect("dummy input")
}

/// Worst `|got - want| / (atol + rtol |want|)` over the output (≤ 1 passes).
fn worst(got: &[f32], want: &[f32]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&a, &b)| (a as f64 - b as f64).abs() / (1e-5 + 1e-3 * (b as f64).abs()))
        .fold(
            0.0,
            |m, r| if r.is_nan() { f64::INFINITY } else { m.max(r) },
        )
}

fn run(model: &Model, device: Device) -> Result<Vec<HostTensor>, String> {
    let [input] = &model.inputs[..] else {
        return Err(format!("{} inputs", model.inputs.len()));
    };
    let options = SessionOptions {
        default_device: Some(device),
        visible_devices: Some(crate::common::gpu_indices()),
        ..Default::default()
    };
    let mut session = Session::new(&model.graph, options).map_err(|e| e.to_string())?;
    session
        .run(
            &[(input.tensor, dummy(input.shape.dims()))],
            &model.output_tensors(),
        )
        .map_err(|e| e.to_string())
}

fn run_model(name: &str, device: Device) -> Result<f64, String> {
    let path = dir().join(format!("light_{name}.onnx"));
    let model = import(&path, &ImportOptions::default()).map_err(|e| e.to_string())?;
    let want_bytes = std::fs::read(dir().join(format!("light_{name}_output_0.pb")))
        .map_err(|e| e.to_string())?;
    let (_, want) =
        load_tensor(&want_bytes, &ImportOptions::default()).map_err(|e| e.to_string())?;
    let got = &run(&model, device)?[0];
    if got.dims() != want.dims() {
        return Err(format!("shape {:?}, want {:?}", got.dims(), want.dims()));
    }
    let (g, w) = (
        got.to_f32().map_err(|e| e.to_string())?,
        want.to_f32().map_err(|e| e.to_string())?,
    );
    Ok(worst(&g, &w))
}

/// `n` values in [-0.5, 0.5): splitmix64 of (seed, index), top 24 bits (as the script).
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    (1..=n as u64)
        .map(|i| {
            let mut z = (seed << 32).wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

/// The node that finally consumes `name` (through Unsqueeze/Reshape) and the input position.
fn role<'a>(nodes: &'a [NodeProto], name: &str) -> Option<(&'a NodeProto, usize)> {
    let consumer = |name: &str| {
        nodes.iter().find_map(|n| {
            let i = n.input.iter().position(|x| x == name)?;
            Some((n, i))
        })
    };
    let (mut n, mut i) = consumer(name)?;
    while matches!(n.op_type.as_deref(), Some("Unsqueeze" | "Reshape")) && i == 0 {
        (n, i) = consumer(n.output.first()?)?;
    }
    Some((n, i))
}

/// `value = offset + scale * u` for a weight consumed by `node` at input `pos`.
fn offset_and_scale(node: &NodeProto, pos: usize, dims: &[i64]) -> (f32, f32) {
    let attr = |name: &str| -> Option<&AttributeProto> {
        node.attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    };
    match (node.op_type.as_deref().unwrap_or(""), pos) {
        ("Conv", 1) => (
            0.0,
            (24.0 / dims[1..].iter().product::<i64>() as f64).sqrt() as f32,
        ),
        ("Gemm", 1) => {
            let trans_b = attr("transB").and_then(|a| a.i).unwrap_or(0) != 0;
            let fan_in = if trans_b { dims[1] } else { dims[0] };
            (0.0, (12.0 / fan_in as f64).sqrt() as f32)
        }
        ("BatchNormalization", 1) => (1.0, 0.2),
        ("BatchNormalization", 4) => (1.0, 0.4),
        ("Mul", _) => (1.0, 0.2),
        _ => (0.0, 0.2),
    }
}

/// The light model with random weights, and the final Softmax's input as a second output.
fn randomized(name: &str) -> Result<Vec<u8>, String> {
    let bytes =
        std::fs::read(dir().join(format!("light_{name}.onnx"))).map_err(|e| e.to_string())?;
    let mut m = ModelProto::decode(&bytes[..]).map_err(|e| e.to_string())?;
    let g = m.graph.as_mut().ok_or("no graph")?;
    let shapes: std::collections::HashMap<String, Vec<i64>> = g
        .initializer
        .iter()
        .map(|t| {
            let raw = t.raw_data.as_deref().unwrap_or_default();
            let dims = if t.int64_data.is_empty() {
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect()
            } else {
                t.int64_data.clone()
            };
            (t.name.clone().unwrap_or_default(), dims)
        })
        .collect();
    let (mut kept, mut weights, mut k) = (Vec::new(), Vec::new(), 0u64);
    for n in &g.node {
        if n.op_type.as_deref() != Some("ConstantOfShape") {
            kept.push(n.clone());
            continue;
        }
        k += 1;
        let dims = shapes
            .get(&n.input[0])
            .ok_or("ConstantOfShape without a shape")?;
        let (consumer, pos) = role(&g.node, &n.output[0]).ok_or("an unused weight")?;
        let (offset, scale) = offset_and_scale(consumer, pos, dims);
        let count = dims.iter().product::<i64>() as usize;
        weights.push(TensorProto {
            name: Some(n.output[0].clone()),
            dims: dims.clone(),
            data_type: Some(DataType::Float as i32),
            float_data: uniform(count, k)
                .iter()
                .map(|u| offset + scale * u)
                .collect(),
            ..Default::default()
        });
    }
    if kept.last().and_then(|n| n.op_type.as_deref()) == Some("Softmax") {
        let logits = kept
            .last()
            .and_then(|n| n.input.first())
            .cloned()
            .unwrap_or_default();
        g.output.push(ValueInfoProto {
            name: Some(logits),
            ..Default::default()
        });
    }
    g.node = kept;
    g.initializer.extend(weights);
    Ok(m.encode_to_vec())
}

/// Worst `|got - want|` over `1e-5 + 1e-3 max(|want|, 1e-2 max|want|)`: elementwise for
/// values near the output's scale, relative to that scale for values that cancel to near zero.
fn worst_scaled(got: &[f32], want: &[f32]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, &b| m.max((b as f64).abs()));
    got.iter()
        .zip(want)
        .map(|(&a, &b)| {
            let b = b as f64;
            (a as f64 - b).abs() / (1e-5 + 1e-3 * b.abs().max(1e-2 * scale))
        })
        .fold(
            0.0,
            |m, r| if r.is_nan() { f64::INFINITY } else { m.max(r) },
        )
}

fn run_random(name: &str, device: Device) -> Result<f64, String> {
    let model = import_bytes(&randomized(name)?, None, &ImportOptions::default())
        .map_err(|e| e.to_string())?;
    let bytes =
        std::fs::read(dir().join(format!("random/{name}.f32"))).map_err(|e| e.to_string())?;
    let want: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut got = Vec::new();
    for t in run(&model, device)? {
        got.extend(t.to_f32().map_err(|e| e.to_string())?);
    }
    if got.len() != want.len() {
        return Err(format!("{} values, want {}", got.len(), want.len()));
    }
    // The output, then the logits: each against its own scale.
    let first = model.outputs[0].shape.dims().iter().product::<usize>();
    Ok(
        worst_scaled(&got[..first], &want[..first])
            .max(worst_scaled(&got[first..], &want[first..])),
    )
}

fn devices_and_models() -> Vec<(Device, Vec<&'static str>)> {
    let all = std::env::var("WGFLOW_ONNX_LIGHT").is_ok_and(|v| v == "all");
    let mut list = vec![(Device::Cpu, MODELS.to_vec())];
    for gpu in crate::common::gpus() {
        let models = if all {
            MODELS.to_vec()
        } else {
            vec!["squeezenet", "shufflenet"]
        };
        list.push((gpu, models));
    }
    list
}

fn check(what: &str, f: fn(&str, Device) -> Result<f64, String>) {
    let mut failures = Vec::new();
    for (device, models) in devices_and_models() {
        for name in models {
            let t = Instant::now();
            let r = f(name, device);
            eprintln!(
                "{what} {name} on {device}: {} ({:.1} s)",
                match &r {
                    Ok(w) => format!("worst error {w:.3} of tolerance"),
                    Err(e) => e.clone(),
                },
                t.elapsed().as_secs_f64()
            );
            match r {
                Ok(w) if w <= 1.0 => {}
                Ok(w) => failures.push(format!("{name} on {device}: {w:.2}× tolerance")),
                Err(e) => failures.push(format!("{name} on {device}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn light_models_match_stored_outputs() {
    check("light", run_model);
}

#[test]
fn light_models_with_random_weights_match_onnxruntime() {
    check("random-weight", run_random);
}
