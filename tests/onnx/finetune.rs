//! Fine-tuning an imported model: `import_trainable` makes the weights variables; their
//! gradients match central finite differences of the loss (float64 arithmetic on the f32
//! losses), a few Adam steps lower the loss on every device, and `Session::save` names the
//! weights as the model does.

use super::common::grad::uniform;
use super::protos::{attr_int, attr_ints, value};
use wgflow::onnx::proto::{
    tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto,
};
use wgflow::onnx::{import_bytes, ImportOptions, Message, Model};
use wgflow::train::{Adam, Optimizer};
use wgflow::{Axes, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_{output}")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

/// Deterministic values in [-0.5, 0.5).
fn values(n: usize, seed: u64) -> Vec<f32> {
    uniform(n, -0.5, 0.5, seed)
}

fn init(name: &str, dims: &[i64], seed: u64) -> TensorProto {
    let n = dims.iter().product::<i64>() as usize;
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        float_data: values(n, seed),
        ..Default::default()
    }
}

/// A small CNN as an exporter writes one: Conv(3→4, 3×3, pad 1) + bias, Clip(0, 6) with
/// scalar bounds, GlobalAveragePool, Flatten, Gemm(4→2, transB) + bias.
fn cnn() -> ModelProto {
    let clip_bound = |name: &str, v: f32| TensorProto {
        name: Some(name.into()),
        data_type: Some(DataType::Float as i32),
        float_data: vec![v],
        ..Default::default()
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![
                node(
                    "Conv",
                    &["x", "conv.weight", "conv.bias"],
                    "c",
                    vec![
                        attr_ints("pads", &[1, 1, 1, 1]),
                        attr_ints("kernel_shape", &[3, 3]),
                    ],
                ),
                node("Clip", &["c", "zero", "six"], "r", vec![]),
                node("GlobalAveragePool", &["r"], "p", vec![]),
                node("Flatten", &["p"], "f", vec![attr_int("axis", 1)]),
                node(
                    "Gemm",
                    &["f", "fc.weight", "fc.bias"],
                    "y",
                    vec![attr_int("transB", 1)],
                ),
            ],
            initializer: vec![
                init("conv.weight", &[4, 3, 3, 3], 1),
                init("conv.bias", &[4], 2),
                init("fc.weight", &[2, 4], 3),
                init("fc.bias", &[2], 4),
                clip_bound("zero", 0.0),
                clip_bound("six", 6.0),
            ],
            input: vec![value("x", &[5, 3, 6, 6])],
            output: vec![value("y", &[5, 2])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The model imported trainable, with `loss = mean((y - target)²)` and the data to feed.
struct Setup {
    model: Model,
    weights: Vec<Tensor>,
    loss: Tensor,
    feeds: Vec<(Tensor, HostTensor)>,
}

fn setup() -> Setup {
    let opts = ImportOptions {
        trainable: true,
        ..Default::default()
    };
    let mut model = import_bytes(&cnn().encode_to_vec(), None, &opts).expect("import");
    let g: &mut Graph = &mut model.graph;
    let weights = g.variables();
    let y = model.outputs[0].tensor;
    let target = g
        .constant(HostTensor::new(vec![5, 2], values(10, 9)).expect("target"))
        .expect("target");
    let d = g.sub(y, target).expect("sub");
    let sq = g.mul(d, d).expect("square");
    let loss = g.mean(sq, Axes::All, false).expect("mean");
    let x = HostTensor::new(
        vec![5, 3, 6, 6],
        values(540, 7).iter().map(|v| v * 4.0).collect(),
    )
    .expect("x");
    Setup {
        feeds: vec![(model.inputs[0].tensor, x)],
        model,
        weights,
        loss,
    }
}

fn session(g: &Graph, device: Device) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(device),
            visible_devices: Some(crate::common::gpu_indices()),
            ..Default::default()
        },
    )
    .expect("session")
}

fn scalar(t: &HostTensor) -> f64 {
    f64::from(t.to_vec::<f32>().expect("f32")[0])
}

#[test]
fn import_trainable_makes_the_weights_variables_named_as_in_the_model() {
    let s = setup();
    let g = &s.model.graph;
    let mut names: Vec<String> = s
        .weights
        .iter()
        .map(|&w| g.name(w).expect("name").to_string())
        .collect();
    names.sort();
    // The scalar clip bounds stay constants.
    assert_eq!(names, ["conv.bias", "conv.weight", "fc.bias", "fc.weight"]);
    let plain =
        import_bytes(&cnn().encode_to_vec(), None, &ImportOptions::default()).expect("import");
    assert!(plain.graph.variables().is_empty());

    let dir = tempfile_dir();
    let path = dir.join("weights.safetensors");
    let mut session = session(g, Device::Cpu);
    session.save(&path, None).expect("save");
    let bytes = std::fs::read(&path).expect("read");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).expect("utf-8");
    for name in ["conv.weight", "conv.bias", "fc.weight", "fc.bias"] {
        assert!(
            header.contains(&format!("\"{name}\"")),
            "{name} not in {header}"
        );
    }
    std::fs::remove_dir_all(dir).ok();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgflow-finetune-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn imported_weights_gradients_match_finite_differences() {
    let mut s = setup();
    let grads = s
        .model
        .graph
        .gradients(s.loss, &s.weights)
        .expect("gradients");
    let grads: Vec<Tensor> = grads.into_iter().map(|g| g.expect("a gradient")).collect();
    let mut session = session(&s.model.graph, Device::Cpu);
    let mut fetches = vec![s.loss];
    fetches.extend(&grads);
    let out = session.run(&s.feeds, &fetches).expect("run");
    for (k, &w) in s.weights.iter().enumerate() {
        let name = s.model.graph.name(w).expect("name").to_string();
        let analytic = out[k + 1].to_vec::<f32>().expect("f32");
        let original = session.read_variable(w).expect("read");
        let base = original.to_vec::<f32>().expect("f32");
        // A few elements of each weight, spread over it.
        let n = base.len();
        for i in [0, n / 3, n / 2, n - 1] {
            let h = 1e-2f32;
            let mut at = |delta: f32| {
                let mut v = base.clone();
                v[i] += delta;
                let t = HostTensor::new(original.dims().to_vec(), v).expect("t");
                session.write_variable(w, &t).expect("write");
                scalar(&session.run(&s.feeds, &[s.loss]).expect("run")[0])
            };
            let numeric = (at(h) - at(-h)) / (2.0 * f64::from(h));
            let a = f64::from(analytic[i]);
            assert!(
                (a - numeric).abs() <= 2e-3 + 2e-2 * numeric.abs(),
                "d loss / d {name}[{i}]: analytic {a}, finite differences {numeric}"
            );
        }
        session.write_variable(w, &original).expect("restore");
    }
}

#[test]
fn adam_steps_lower_the_loss_of_an_imported_model_on_every_device() {
    let mut devices = vec![Device::Cpu];
    devices.extend(crate::common::gpus());
    for device in devices {
        let mut s = setup();
        let step = Adam::new(0.05)
            .minimize(&mut s.model.graph, s.loss, &s.weights)
            .expect("minimize");
        let mut session = session(&s.model.graph, device);
        let mut losses = Vec::new();
        for _ in 0..8 {
            let out = session.run(&s.feeds, &[s.loss, step]).expect("step");
            losses.push(scalar(&out[0]));
        }
        let last = scalar(&session.run(&s.feeds, &[s.loss]).expect("loss")[0]);
        assert!(
            last < 0.5 * losses[0],
            "{device}: loss {losses:?} then {last}, expected it to fall by half"
        );
    }
}
