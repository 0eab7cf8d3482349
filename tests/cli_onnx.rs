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
    // Without `--dim` the feed sizes N; without the feed the error names the input.
    let out = dir.join("out-fed");
    let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["run", path.to_str().unwrap(), "--device", "cpu:0", "--feed"])
        .arg(format!("x={}", feed.display()))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let got = wgflow::npy::read(out.join("y.npy")).unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["run", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("x (FLOAT [N, 3])") && stderr.contains("not fed"),
        "{stderr}"
    );
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
    // Unbound, N is a run-time dimension: the model validates, but a plan needs a size.
    let unbound = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        unbound.status.success(),
        "{}",
        String::from_utf8_lossy(&unbound.stderr)
    );
    let plan = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["plan", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!plan.status.success());
    assert!(String::from_utf8_lossy(&plan.stderr).contains("--dim N=SIZE"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn patterns() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-patterns")
}

/// `wgflow run` on exported transformers as a user types it: int64 `.npy` ids and mask from
/// NumPy, no `--dim` (the feeds size `batch` and `sequence`), and three outputs written under
/// the model's names, the ArgMax as int64, all as onnxruntime computed them.
#[test]
fn run_exported_encoders_by_name_with_int64_ids() {
    let dir = std::env::temp_dir().join(format!("wgflow-cli-patterns-{}", std::process::id()));
    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    for model in ["encoder", "bert_positions"] {
        for (k, size) in ["1x7", "8x128"].iter().enumerate() {
            let dev = devices[k % devices.len()];
            let stem = patterns().join(format!("{model}.{size}"));
            let out = dir.join(format!("{model}-{size}"));
            let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
                .arg("run")
                .arg(patterns().join(format!("{model}.onnx")))
                .arg("--feed")
                .arg(format!("input_ids={}.input_ids.npy", stem.display()))
                .arg("--feed")
                .arg(format!(
                    "attention_mask={}.attention_mask.npy",
                    stem.display()
                ))
                .args(["--device", &dev.to_string(), "--out"])
                .arg(&out)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&run.stdout);
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            assert!(stdout.contains("predictions int64"), "{stdout}");
            let mut files: Vec<String> = std::fs::read_dir(&out)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            assert_eq!(
                files,
                ["logits.npy", "pooler_logits.npy", "predictions.npy"]
            );
            for name in ["logits", "predictions", "pooler_logits"] {
                let path = out.join(format!("{name}.npy"));
                let want_bytes = std::fs::read(format!("{}.{name}.npy", stem.display())).unwrap();
                let got_bytes = std::fs::read(&path).unwrap();
                let (got, want) = (
                    wgflow::npy::from_bytes(&got_bytes).unwrap(),
                    wgflow::npy::from_bytes(&want_bytes).unwrap(),
                );
                if name == "predictions" {
                    // int64 on disk, as onnxruntime's, and the same ids.
                    assert!(String::from_utf8_lossy(&got_bytes[..64]).contains("'<i8'"));
                    assert_eq!(got.to_vec::<i32>().unwrap(), want.to_vec::<i32>().unwrap());
                } else {
                    common::assert_close(name, &got, &want, 1e-4, 1e-5);
                }
            }
        }
        // An inner value by its ONNX name, and a name the model does not have.
        let stem = patterns().join(format!("{model}.1x7"));
        let out = dir.join(format!("{model}-fetch"));
        let feeds = [
            format!("input_ids={}.input_ids.npy", stem.display()),
            format!("attention_mask={}.attention_mask.npy", stem.display()),
        ];
        let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
            .arg("run")
            .arg(patterns().join(format!("{model}.onnx")))
            .args([
                "--feed", &feeds[0], "--feed", &feeds[1], "--fetch", "probs", "--device", "cpu:0",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let probs = wgflow::npy::read(out.join("probs.npy")).unwrap();
        assert_eq!(probs.dims(), [1, 2, 7, 7]);
        let rows: Vec<f32> = probs.to_vec::<f32>().unwrap();
        for row in rows.chunks(7) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
        let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
            .arg("run")
            .arg(patterns().join(format!("{model}.onnx")))
            .args([
                "--feed",
                &feeds[0],
                "--feed",
                &feeds[1],
                "--fetch",
                "softmaxout_9",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert!(!run.status.success());
        assert!(String::from_utf8_lossy(&run.stderr).contains("softmaxout_9"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An int64 id past int32's range names the feed and the index.
#[test]
fn an_int64_feed_that_does_not_fit_names_its_index() {
    let dir = std::env::temp_dir().join(format!("wgflow-cli-wide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stem = patterns().join("encoder.1x7");
    let mut bytes = std::fs::read(format!("{}.input_ids.npy", stem.display())).unwrap();
    let at = bytes.len() - 8 * 4;
    bytes[at..at + 8].copy_from_slice(&(3i64 << 32).to_le_bytes());
    let ids = dir.join("ids.npy");
    std::fs::write(&ids, bytes).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .arg("run")
        .arg(patterns().join("encoder.onnx"))
        .arg("--feed")
        .arg(format!("input_ids={}", ids.display()))
        .arg("--feed")
        .arg(format!(
            "attention_mask={}.attention_mask.npy",
            stem.display()
        ))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("input_ids") && stderr.contains("12884901888 at index 3"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sample of the ONNX conformance cases (every 7th that `tests/onnx/passing.txt` lists
/// for cpu:0; all of them with `WGFLOW_ONNX_CLI_ALL=1`) through `wgflow run` as a user runs them: inputs written as `.npy` files fed
/// by name, outputs read back from `<ONNX name>.npy`, against the suite's expected values.
#[test]
fn conformance_cases_through_the_cli() {
    use wgflow::onnx::{load_tensor, ImportOptions};
    let Some(cases) = std::env::var_os("WGFLOW_ONNX_NODE_TESTS").map(std::path::PathBuf::from)
    else {
        if std::env::var("WGFLOW_REQUIRE_ONNX_TESTS").is_ok_and(|v| v == "1") {
            panic!("WGFLOW_REQUIRE_ONNX_TESTS=1 but WGFLOW_ONNX_NODE_TESTS is not set");
        }
        eprintln!("skipped: WGFLOW_ONNX_NODE_TESTS is not set");
        return;
    };
    let listed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/onnx/passing.txt"),
    )
    .unwrap();
    let names: Vec<&str> = listed
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, b)| b.split(',').any(|b| b.trim() == "cpu"))
        .map(|(n, _)| n)
        .collect();
    let pbs = |dir: &std::path::Path, prefix: &str| {
        let mut v: Vec<std::path::PathBuf> = (0..)
            .map(|i| dir.join(format!("{prefix}{i}.pb")))
            .take_while(|p| p.is_file())
            .collect();
        v.sort();
        v
    };
    let tmp = std::env::temp_dir().join(format!("wgflow-cli-conf-{}", std::process::id()));
    let (mut ran, mut failed) = (0, Vec::new());
    let step = if std::env::var("WGFLOW_ONNX_CLI_ALL").is_ok_and(|v| v == "1") {
        1
    } else {
        7
    };
    for name in names.iter().step_by(step) {
        let case = cases.join(name);
        let data = case.join("test_data_set_0");
        let model = case.join("model.onnx");
        let proto =
            wgflow::onnx::proto::ModelProto::decode(&*std::fs::read(&model).unwrap()).unwrap();
        let graph = proto.graph.unwrap_or_default();
        let inits: Vec<&str> = graph
            .initializer
            .iter()
            .filter_map(|t| t.name.as_deref())
            .collect();
        let inputs: Vec<&str> = graph
            .input
            .iter()
            .filter_map(|v| v.name.as_deref())
            .filter(|n| !inits.contains(n))
            .collect();
        let out = tmp.join(name);
        std::fs::create_dir_all(&out).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wgflow"));
        cmd.arg("run")
            .arg(&model)
            .args(["--device", "cpu:0", "--force", "--out"])
            .arg(&out);
        for (k, pb) in pbs(&data, "input_").iter().enumerate() {
            let (file_name, value) =
                load_tensor(&std::fs::read(pb).unwrap(), &ImportOptions::default()).unwrap();
            let input = if file_name.is_empty() {
                inputs[k].to_string()
            } else {
                file_name
            };
            let npy = out.join(format!("in_{k}.npy"));
            wgflow::npy::write(&npy, &value).unwrap();
            cmd.arg("--feed").arg(format!("{input}={}", npy.display()));
        }
        let run = cmd.output().unwrap();
        ran += 1;
        if !run.status.success() {
            failed.push(format!("{name}: {}", String::from_utf8_lossy(&run.stderr)));
            continue;
        }
        for (k, pb) in pbs(&data, "output_").iter().enumerate() {
            let (_, want) =
                load_tensor(&std::fs::read(pb).unwrap(), &ImportOptions::default()).unwrap();
            let output = graph.output[k].name.clone().unwrap_or_default();
            let file: String = output
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let got = match wgflow::npy::read(out.join(format!("{file}.npy"))) {
                Ok(g) => g,
                Err(e) => {
                    failed.push(format!("{name}: output '{output}': {e}"));
                    continue;
                }
            };
            let same = got.dims() == want.dims()
                && if want.dtype().is_float() {
                    let (g, w) = (got.to_f32().unwrap(), want.to_f32().unwrap());
                    g.iter().zip(&w).all(|(a, b)| {
                        (b.is_nan() && a.is_nan())
                            || a == b
                            || (a - b).abs() <= 1e-5 + 1e-3 * b.abs()
                    })
                } else {
                    got.words() == want.words()
                };
            if !same {
                failed.push(format!("{name}: output '{output}' differs"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(ran > 100, "only {ran} cases ran");
    println!(
        "{} of {ran} conformance cases pass through wgflow run",
        ran - failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {ran} failed through the CLI:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// An input or output of element type `elem` and static `dims`.
fn typed(name: &str, elem: DataType, dims: &[i64]) -> ValueInfoProto {
    let mut v = value(
        name,
        &dims.iter().map(|&d| Dim::DimValue(d)).collect::<Vec<_>>(),
    );
    if let Some(type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(elem as i32);
    }
    v
}

/// uint64 feeds and outputs as `<u8` files (values past 32 bits in a feed are an error
/// naming the feed), and bfloat16 computed in f32 and rounded after the op, written as
/// float32: checked against values computed here by hand.
#[test]
fn uint64_and_bfloat16_through_wgflow_run() {
    let node = |op: &str, i: &[&str], o: &str| NodeProto {
        op_type: Some(op.into()),
        input: i.iter().map(|s| s.to_string()).collect(),
        output: vec![o.into()],
        ..Default::default()
    };
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        graph: Some(GraphProto {
            node: vec![
                node("Add", &["a", "b"], "sum"),
                node("BitwiseAnd", &["a", "b"], "and"),
                node("Mul", &["x", "x"], "square"),
            ],
            input: vec![
                typed("a", DataType::Uint64, &[3]),
                typed("b", DataType::Uint64, &[3]),
                typed("x", DataType::Bfloat16, &[2]),
            ],
            output: vec![
                typed("sum", DataType::Uint64, &[3]),
                typed("and", DataType::Uint64, &[3]),
                typed("square", DataType::Bfloat16, &[2]),
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = std::env::temp_dir().join(format!("wgflow-cli-u64-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("m.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let u64s = |v: Vec<u32>| wgflow::npy::to_bytes_int(&HostTensor::new([3], v).unwrap(), "<u8");
    std::fs::write(dir.join("a.npy"), u64s(vec![12, 4_000_000_001, 1]).unwrap()).unwrap();
    std::fs::write(dir.join("b.npy"), u64s(vec![10, 5, 2]).unwrap()).unwrap();
    // 4_000_000_001 = 0xEE6B_2801: & 5 keeps bit 0.
    // 1 + 2^-7 squared is 1 + 2^-6 + 2^-14: bfloat16 keeps 1 + 2^-6.
    let x = HostTensor::new([2], vec![1.007_812_5f32, -3.0]).unwrap();
    wgflow::npy::write(dir.join("x.npy"), &x).unwrap();
    let run = |a: &str| {
        Command::new(env!("CARGO_BIN_EXE_wgflow"))
            .arg("run")
            .arg(&model)
            .args(["--device", "cpu:0", "--force", "--out"])
            .arg(&dir)
            .arg("--feed")
            .arg(format!("a={}", dir.join(a).display()))
            .arg("--feed")
            .arg(format!("b={}", dir.join("b.npy").display()))
            .arg("--feed")
            .arg(format!("x={}", dir.join("x.npy").display()))
            .output()
            .unwrap()
    };
    let ok = run("a.npy");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let sum = std::fs::read(dir.join("sum.npy")).unwrap();
    assert!(String::from_utf8_lossy(&sum[..64]).contains("'<u8'"));
    let read = |f: &str| wgflow::npy::read(dir.join(f)).unwrap();
    assert_eq!(
        read("sum.npy").to_vec::<u32>().unwrap(),
        [22, 4_000_000_006, 3]
    );
    assert_eq!(read("and.npy").to_vec::<u32>().unwrap(), [8, 1, 0]);
    assert_eq!(read("square.npy").to_f32().unwrap(), [1.015_625, 9.0]);
    // A feed past 32 bits names the feed and the index.
    let mut wide = u64s(vec![1, 2, 3]).unwrap();
    let at = wide.len() - 8;
    wide[at..].copy_from_slice(&(5u64 << 32).to_le_bytes());
    std::fs::write(dir.join("wide.npy"), wide).unwrap();
    let bad = run("wide.npy");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("21474836480 at index 2"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `wgflow validate --list-onnx-ops` prints the importer's registry: one line per op type,
/// hand-checked rows, and a count that is the library's.
#[test]
fn validate_lists_the_onnx_ops() {
    let out = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["validate", "--list-onnx-ops"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |op: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(op))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(row("Conv"), ["Conv", "ai.onnx", "1+", "2-3", "1", "nn"]);
    assert_eq!(
        row("QGemm"),
        ["QGemm", "com.microsoft", "1+", "6-9", "1", "quant"]
    );
    assert_eq!(row("Upsample")[2], "7-9");
    assert_eq!(row("Concat")[3], "1+");
    assert!(row("NoSuchOp").is_empty());
    let n = wgflow::onnx::supported_ops().len();
    assert!(text.contains(&format!("{n} op types")), "{text}");
    // A graph file and the list together are a usage error.
    let both = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["validate", "x.json", "--list-onnx-ops"])
        .output()
        .unwrap();
    assert!(!both.status.success());
}
