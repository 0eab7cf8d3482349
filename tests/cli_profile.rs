//! `wgflow profile` and `wgflow plan --memory`: the per-op table, the trace and memory files,
//! JSON output, and the errors (bad --runs, existing or unwritable outputs).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use wgflow::onnx::proto::{
    attribute_proto::AttributeType, tensor_proto::DataType,
    tensor_shape_proto::dimension::Value as Dim, tensor_shape_proto::Dimension, type_proto,
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use wgflow::{Device, HostTensor};

fn wgflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env_remove("WGFLOW_VISIBLE_DEVICES")
        .output()
        .expect("run wgflow")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("graph-examples")
}

fn mlp() -> String {
    root().join("mlp.json").display().to_string()
}

fn feed() -> String {
    format!("x={}", root().join("mlp.feeds/x.npy").display())
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgflow-profile-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn profile_prints_the_nodes_and_writes_trace_and_memory() {
    for dev in devices() {
        let dir = scratch(&dev.to_string().replace(':', "_"));
        let trace = dir.join("trace.json");
        let svg = dir.join("memory.svg");
        let out = wgflow(&[
            "profile",
            &mlp(),
            "--feed",
            &feed(),
            "--device",
            &dev.to_string(),
            "--runs",
            "3",
            "--trace",
            &s(&trace),
            "--memory",
            &s(&svg),
        ]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{dev}: {}", text(&out.stderr));
        for node in [
            "layer1/matmul",
            "layer1/relu",
            "layer2/matmul",
            "layer2/add",
        ] {
            assert!(stdout.contains(node), "{dev}: {node} missing:\n{stdout}");
        }
        assert!(
            stdout.contains("matmul") && stdout.contains("GB/s"),
            "{stdout}"
        );
        assert!(
            stdout.contains("median") && stdout.contains("min"),
            "{stdout}"
        );
        let t: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        let events = t["traceEvents"].as_array().unwrap();
        assert!(events
            .iter()
            .any(|e| e["ph"] == "X" && e["name"].as_str().unwrap().contains("layer1/matmul")));
        let svg = std::fs::read_to_string(&svg).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}

#[test]
fn profile_json_parses() {
    let out = wgflow(&[
        "profile",
        &mlp(),
        "--feed",
        &feed(),
        "--device",
        "cpu:0",
        "--runs",
        "2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["runs"], 2);
    assert!(j["by_node"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"].as_str().unwrap().contains("layer2/matmul")));
    assert!(j["untraced_median_ms"].as_f64().unwrap() >= 0.0);
}

#[test]
fn bad_runs_are_refused() {
    for runs in ["0", "many", "-1"] {
        let arg = format!("--runs={runs}");
        let out = wgflow(&["profile", &mlp(), "--feed", &feed(), &arg]);
        assert!(!out.status.success(), "--runs {runs} was accepted");
        assert!(
            text(&out.stderr).contains("--runs"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn existing_outputs_need_force_and_unwritable_paths_fail() {
    let dir = scratch("exists");
    let trace = dir.join("trace.json");
    std::fs::write(&trace, "keep").unwrap();
    let args = |extra: &[&str]| {
        let mut a = vec![
            "profile".to_string(),
            mlp(),
            "--feed".into(),
            feed(),
            "--device".into(),
            "cpu:0".into(),
            "--runs".into(),
            "1".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| wgflow(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run(args(&["--trace", &s(&trace)]));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), "keep");
    let out = run(args(&["--trace", &s(&trace), "--force"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&trace)
        .unwrap()
        .contains("traceEvents"));
    let missing = dir.join("no/such/dir/trace.json");
    let out = run(args(&["--trace", &s(&missing)]));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot write"),
        "{}",
        text(&out.stderr)
    );
    let out = run(args(&["--memory", &s(&dir)]));
    assert!(
        !out.status.success(),
        "a directory as --memory was accepted"
    );
}

#[test]
fn plan_writes_the_memory_svg() {
    let dir = scratch("plan");
    let svg = dir.join("m.svg");
    let out = wgflow(&["plan", &mlp(), "--device", "cpu:0", "--memory", &s(&svg)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("schedule"));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let again = wgflow(&["plan", &mlp(), "--device", "cpu:0", "--memory", &s(&svg)]);
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("already exists"));
}

/// `WGFLOW_TIMING=host` turns GPU timestamps off: GPU steps are then submitted and waited
/// for one by one and labelled `host`; without it, adapters with `TIMESTAMP_QUERY` label
/// theirs `gpu-timestamp`.
#[test]
fn gpu_steps_say_how_they_were_timed() {
    for dev in common::gpus() {
        let args = [
            "profile",
            &mlp(),
            "--feed",
            &feed(),
            "--device",
            &dev.to_string(),
            "--runs",
            "2",
            "--json",
        ];
        let host = Command::new(env!("CARGO_BIN_EXE_wgflow"))
            .args(args)
            .env_remove("WGFLOW_VISIBLE_DEVICES")
            .env("WGFLOW_TIMING", "host")
            .output()
            .unwrap();
        assert!(host.status.success(), "{}", text(&host.stderr));
        let j: serde_json::Value = serde_json::from_slice(&host.stdout).unwrap();
        for row in j["by_kind"].as_array().unwrap() {
            assert_eq!(row["timing"], "host", "{dev}: {row}");
        }
        let out = wgflow(&args);
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for row in j["by_kind"].as_array().unwrap() {
            let t = row["timing"].as_str().unwrap();
            assert!(t == "gpu-timestamp" || t == "host", "{dev}: {row}");
        }
    }
}

/// The issue's own command: no `--feed`, so the placeholder is profiled with zeros (said on
/// stderr) and the trace and memory files are still written.
#[test]
fn profile_without_feeds_uses_zeros_and_says_so() {
    let d = scratch("nofeed");
    let (t, m) = (d.join("t.json"), d.join("m.svg"));
    let out = wgflow(&[
        "profile",
        &mlp(),
        "--runs",
        "2",
        "--trace",
        &s(&t),
        "--memory",
        &s(&m),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("zeros for 'x' (f32 [4, 3])"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("layer1/matmul"),
        "{}",
        text(&out.stdout)
    );
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&t).unwrap()).expect("trace JSON");
    assert!(trace["traceEvents"]
        .as_array()
        .is_some_and(|e| !e.is_empty()));
    assert!(std::fs::read_to_string(&m).unwrap().starts_with("<svg"));
}

/// A float tensor's name and shape, as a graph input or output.
fn value(name: &str, dims: Vec<Dim>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float as i32),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .into_iter()
                        .map(|d| Dimension {
                            value: Some(d),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A float initializer with small deterministic values.
fn weight(name: &str, dims: Vec<i64>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(DataType::Float as i32),
        float_data: (0..dims.iter().product::<i64>())
            .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
            .collect(),
        dims,
        ..Default::default()
    }
}

/// An opset-14 model of `graph`, written to `dir/name`.
fn write_model(dir: &Path, name: &str, graph: GraphProto) -> PathBuf {
    use wgflow::onnx::Message;
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(14),
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.join(name);
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

/// An ONNX LSTM over `x: [seq, batch, 2]` (hidden size 3), both dimensions symbolic: the
/// sequence is unrolled at import, so its length must be known there.
fn lstm_model(dir: &Path) -> PathBuf {
    let lstm = NodeProto {
        op_type: Some("LSTM".into()),
        input: vec!["x".into(), "W".into(), "R".into()],
        output: vec![String::new(), "h".into()],
        attribute: vec![AttributeProto {
            name: Some("hidden_size".into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(3),
            ..Default::default()
        }],
        ..Default::default()
    };
    let graph = GraphProto {
        node: vec![lstm],
        initializer: vec![weight("W", vec![1, 12, 2]), weight("R", vec![1, 12, 3])],
        input: vec![value(
            "x",
            vec![
                Dim::DimParam("seq".into()),
                Dim::DimParam("batch".into()),
                Dim::DimValue(2),
            ],
        )],
        output: vec![value(
            "h",
            vec![
                Dim::DimValue(1),
                Dim::DimParam("batch".into()),
                Dim::DimValue(3),
            ],
        )],
        name: Some("lstm".into()),
        ..Default::default()
    };
    write_model(dir, "lstm.onnx", graph)
}

/// `y = x @ W` over `x: [batch, 3]`, `batch` symbolic: it stays a run-time dimension of the
/// imported graph.
fn matmul_model(dir: &Path) -> PathBuf {
    let matmul = NodeProto {
        op_type: Some("MatMul".into()),
        input: vec!["x".into(), "W".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let batch = || Dim::DimParam("batch".into());
    let graph = GraphProto {
        node: vec![matmul],
        initializer: vec![weight("W", vec![3, 2])],
        input: vec![value("x", vec![batch(), Dim::DimValue(3)])],
        output: vec![value("y", vec![batch(), Dim::DimValue(2)])],
        name: Some("matmul".into()),
        ..Default::default()
    };
    write_model(dir, "matmul.onnx", graph)
}

/// `wgflow profile` binds an ONNX model's run-time dimensions from its feeds, as `wgflow run`
/// does; without a feed it asks for `--dim`, naming the dimension.
#[test]
fn profile_binds_run_time_dimensions_from_the_feeds() {
    let dir = scratch("matmul-sizes");
    let model = s(&matmul_model(&dir));
    let xs: Vec<f32> = (0..15).map(|i| i as f32 / 15.0).collect();
    let err = profile_fed(&dir, &model, HostTensor::new([5, 3], xs).unwrap());
    assert!(!err.contains("--dim"), "{err}");
    let err = profile_unfed(&model);
    assert!(err.contains("--dim batch=SIZE"), "{err}");
}

/// `wgflow profile MODEL --feed x=…` with `x` written to `dir`: it succeeds and its JSON
/// lists the matmul's node; returns stderr.
fn profile_fed(dir: &Path, model: &str, x: HostTensor) -> String {
    let path = dir.join("x.npy");
    std::fs::write(&path, wgflow::npy::to_bytes(&x)).unwrap();
    let fed = format!("x={}", s(&path));
    let out = wgflow(&[
        "profile", model, "--device", "cpu:0", "--feed", &fed, "--runs", "2", "--json",
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let json = text(&out.stdout);
    assert!(json.contains("\"by_node\""), "{json}");
    assert!(json.contains("matmul"), "{json}");
    err
}

/// `wgflow profile MODEL` without feeds: it fails; returns stderr.
fn profile_unfed(model: &str) -> String {
    let out = wgflow(&["profile", model, "--device", "cpu:0", "--runs", "1"]);
    assert!(!out.status.success());
    text(&out.stderr)
}

/// `wgflow profile` on a model whose symbolic sizes are needed at import takes them from
/// the feeds, as `wgflow run` does, and says so; without feeds it asks for `--dim`.
#[test]
fn profile_takes_an_onnx_models_sizes_from_its_feeds() {
    let dir = scratch("lstm-sizes");
    let model = s(&lstm_model(&dir));
    let xs: Vec<f32> = (0..5 * 4 * 2).map(|i| (i % 9) as f32 / 9.0 - 0.5).collect();
    let err = profile_fed(&dir, &model, HostTensor::new([5, 4, 2], xs).unwrap());
    assert!(err.contains("batch=4, seq=5"), "{err}");
    // The reason, without the advice to pin sizes that profile has just taken from the feeds.
    assert!(
        err.contains(
            "the run-time dimensions (seq) are the sequence length, which LSTM is unrolled over"
        ),
        "{err}"
    );
    assert!(!err.contains("--dim"), "{err}");
    let err = profile_unfed(&model);
    assert!(err.contains("--dim"), "{err}");
}
