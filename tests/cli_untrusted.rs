//! Issue 44 through the CLI: each defect's hostile model (built here with the prost types)
//! is validated or run by `wgflow` under `ulimit -v 8000000`, and must end in a clear error
//! (exit 1) or the right answer: never a panic (101), an abort (134) or a hang.

#[path = "onnx/protos.rs"]
mod protos;

use protos::{
    attr_float, attr_graph, attr_int, attr_ints, external, floats, ints, neg_chain, node,
    scan_of_2_pow_40_steps, typed_value, value,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use wgflow::onnx::proto::{
    tensor_proto::DataType, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto,
};
use wgflow::onnx::Message;
use wgflow::HostTensor;

/// A model whose one output is `y`.
fn model_at(
    opset: i64,
    ins: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
    nodes: Vec<NodeProto>,
) -> ModelProto {
    protos::model_at(opset, ins, inits, nodes, &["y"])
}

/// A fresh folder for one test.
fn folder(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgflow-cli-untrusted-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

fn save(dir: &Path, name: &str, m: &ModelProto) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, m.encode_to_vec()).expect("write model");
    p
}

/// `wgflow ARGS` under an 8 GB address-space limit, on cpu:0 only.
fn wgflow(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 8000000 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env("WGFLOW_VISIBLE_DEVICES", "")
        .output()
        .expect("run wgflow");
    (out, start.elapsed())
}

/// `wgflow ARGS` fails with exit 1 (an error, not a panic or an abort) within 30 s, and its
/// message holds each of `want`.
fn refused(args: &[&str], want: &[&str]) {
    let (out, took) = wgflow(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    for w in want {
        assert!(stderr.contains(w), "{args:?}: expected '{w}' in: {stderr}");
    }
    assert!(took < Duration::from_secs(30), "{args:?} took {took:?}");
}

/// `wgflow ARGS` succeeds within 30 s; returns its stdout.
fn accepted(args: &[&str]) -> String {
    let (out, took) = wgflow(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(30), "{args:?} took {took:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn item1_axis_0_of_a_scalar() {
    let d = folder("item1");
    let x = || vec![value("x", &[])];
    let a0 = || ints("a", &[1], &[0]);
    let cases = [
        model_at(
            13,
            x(),
            vec![],
            vec![node(
                "Split",
                &["x"],
                &["y", "z"],
                vec![attr_int("axis", 0)],
            )],
        ),
        model_at(
            13,
            x(),
            vec![a0()],
            vec![node("ReduceSum", &["x", "a"], &["y"], vec![])],
        ),
        model_at(
            13,
            x(),
            vec![a0()],
            vec![node("Squeeze", &["x", "a"], &["y"], vec![])],
        ),
        model_at(
            13,
            x(),
            vec![ints("s", &[1], &[0]), ints("e", &[1], &[1]), a0()],
            vec![node("Slice", &["x", "s", "e", "a"], &["y"], vec![])],
        ),
    ];
    for (i, m) in cases.iter().enumerate() {
        let p = save(&d, &format!("m{i}.onnx"), m);
        refused(&["validate", s(&p)], &["out of range for rank 0"]);
    }
}

#[test]
fn item2_sizes_are_capped_before_allocation() {
    let d = folder("item2");
    let x = || vec![value("x", &[1, 1, 2, 2])];
    let cases: Vec<(ModelProto, &str)> = vec![
        (
            model_at(
                13,
                x(),
                vec![ints("sz", &[4], &[1, 1, 1 << 62, 2])],
                vec![node("Resize", &["x", "", "", "sz"], &["y"], vec![])],
            ),
            "Resize size",
        ),
        (
            model_at(
                13,
                x(),
                vec![floats("sc", &[4], &[1.0, 1.0, 1e9, 1e9])],
                vec![node("Resize", &["x", "", "sc"], &["y"], vec![])],
            ),
            "Resize output",
        ),
        (
            model_at(
                18,
                x(),
                vec![],
                vec![node(
                    "Split",
                    &["x"],
                    &["y"],
                    vec![attr_int("num_outputs", 1 << 62)],
                )],
            ),
            "num_outputs",
        ),
        (
            model_at(
                13,
                vec![value("x", &[4])],
                vec![
                    ints("dp", &[], &[(1 << 31) - 1]),
                    floats("v", &[2], &[0.0, 1.0]),
                ],
                vec![node("OneHot", &["x", "dp", "v"], &["y"], vec![])],
            ),
            "OneHot output",
        ),
        (
            model_at(
                13,
                vec![],
                vec![
                    ints("a", &[], &[0]),
                    ints("b", &[], &[1 << 40]),
                    ints("c", &[], &[1]),
                ],
                vec![node("Range", &["a", "b", "c"], &["y"], vec![])],
            ),
            "Range's length",
        ),
    ];
    for (i, (m, want)) in cases.iter().enumerate() {
        let p = save(&d, &format!("m{i}.onnx"), m);
        refused(&["validate", s(&p)], &[want]);
    }
    // ConstantOfShape [32768, 32768] validates (a broadcast in the graph, nothing folded).
    let m = model_at(
        13,
        vec![],
        vec![ints("sh", &[2], &[32768, 32768])],
        vec![node("ConstantOfShape", &["sh"], &["y"], vec![])],
    );
    accepted(&["validate", s(&save(&d, "cos.onnx", &m))]);
    // ReduceSum over [0, 2^31]: the 8 GiB result of an empty input is refused, not aborted.
    let m = model_at(
        13,
        vec![value("x", &[0, 1 << 31])],
        vec![ints("a", &[1], &[0])],
        vec![node(
            "ReduceSum",
            &["x", "a"],
            &["y"],
            vec![attr_int("keepdims", 0)],
        )],
    );
    let p = save(&d, "rs.onnx", &m);
    let (out, _) = wgflow(&["plan", s(&p), "--device", "cpu:0"]);
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "{code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A graph file's `sum` over `[batch, 0]` fed a 128-byte `.npy` of shape (2e9, 0): the
/// 8 GB result is an allocation error, not an abort.
#[test]
fn item2_an_empty_feed_with_a_huge_batch() {
    let d = folder("item2npy");
    let mut g = wgflow::Graph::new();
    let x = g
        .placeholder_dyn(
            "x",
            vec![wgflow::Dim::named("batch"), wgflow::Dim::Known(0)],
            wgflow::DType::F32,
        )
        .expect("placeholder");
    g.sum(x, wgflow::Axes::List(vec![1]), false).expect("sum");
    let graph = d.join("g.json");
    g.save(&graph).expect("save graph");
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2000000000, 0), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    let feed = d.join("x.npy");
    std::fs::write(&feed, &npy).expect("npy");
    assert!(npy.len() <= 128);
    let (out, _) = wgflow(&[
        "run",
        s(&graph),
        "--device",
        "cpu:0",
        "--feed",
        &format!("x={}", s(&feed)),
        "--out",
        s(&d.join("out")),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("allocate") || stderr.contains("elements"),
        "{stderr}"
    );
}

#[test]
fn item3_a_200000_node_chain_validates_quickly() {
    let d = folder("item3");
    let p = save(&d, "chain.onnx", &neg_chain(200_000));
    let start = Instant::now();
    accepted(&["validate", s(&p)]);
    eprintln!(
        "wgflow validate of a 200,000-node chain: {:?}",
        start.elapsed()
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn item4_a_scan_over_2_pow_40_steps() {
    let d = folder("item4");
    let m = scan_of_2_pow_40_steps();
    refused(
        &["validate", s(&save(&d, "scan.onnx", &m))],
        &["Scan", "graph nodes"],
    );
}

#[cfg(unix)]
#[test]
fn item5_links_out_of_the_folder_are_refused() {
    use std::os::unix::fs::symlink;
    let d = folder("item5");
    let (m, outside) = (d.join("m"), d.join("outside"));
    std::fs::create_dir_all(&m).expect("dir");
    std::fs::create_dir_all(&outside).expect("dir");
    std::fs::write(outside.join("secret.bin"), [7u8; 24]).expect("write");
    symlink("../outside/secret.bin", m.join("w.bin")).expect("link");
    symlink("../outside", m.join("lnk")).expect("link");
    symlink("/proc/self/environ", m.join("env.bin")).expect("link");
    for loc in ["w.bin", "lnk/secret.bin", "env.bin"] {
        let mdl = model_at(
            13,
            vec![],
            vec![external("w", &[2, 3], loc, Some(0))],
            vec![node("Neg", &["w"], &["y"], vec![])],
        );
        refused(
            &["validate", s(&save(&m, "model.onnx", &mdl))],
            &["outside"],
        );
    }
}

#[test]
fn item6_a_small_tensor_in_a_5_gib_file() {
    let d = folder("item6");
    let at = (4u64 << 30) + 16;
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(d.join("w.data")).expect("create");
        f.set_len(5 << 30).expect("sparse");
        f.seek(SeekFrom::Start(at)).expect("seek");
        let bytes: Vec<u8> = [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        f.write_all(&bytes).expect("write");
    }
    let mdl = model_at(
        13,
        vec![],
        vec![external("w", &[3], "w.data", Some(at))],
        vec![node("Neg", &["w"], &["y"], vec![])],
    );
    let p = save(&d, "model.onnx", &mdl);
    let out = d.join("out");
    accepted(&["run", s(&p), "--device", "cpu:0", "--out", s(&out)]);
    let y = wgflow::npy::read(out.join("y.npy")).expect("y.npy");
    assert_eq!(y.to_vec::<f32>().expect("f32"), vec![-1.0, -2.0, -3.0]);
    // Named bare from its own folder (its parent is ""), the data is found there too.
    let bare = Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(["validate", "model.onnx"])
        .current_dir(&d)
        .env("WGFLOW_VISIBLE_DEVICES", "")
        .output()
        .expect("run wgflow");
    assert!(
        bare.status.success(),
        "{}",
        String::from_utf8_lossy(&bare.stderr)
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn item7_int64_folding_never_wraps() {
    let d = folder("item7");
    let m = model_at(
        13,
        vec![],
        vec![ints("a", &[1], &[(1 << 31) - 1]), ints("b", &[1], &[1])],
        vec![node("Add", &["a", "b"], &["y"], vec![])],
    );
    refused(
        &["run", s(&save(&d, "add.onnx", &m)), "--device", "cpu:0"],
        &["2147483648", "does not fit"],
    );
}

#[test]
fn item8_a_loop_condition_known_at_import() {
    let d = folder("item8");
    let body = GraphProto {
        name: Some("body".into()),
        node: vec![
            node("Less", &["i", "three"], &["c"], vec![]),
            node("Add", &["v", "one"], &["v_out"], vec![]),
        ],
        initializer: vec![ints("three", &[], &[3]), floats("one", &[], &[1.0])],
        input: vec![
            typed_value("i", &[], DataType::Int64),
            typed_value("cond", &[], DataType::Bool),
            value("v", &[]),
        ],
        output: vec![typed_value("c", &[], DataType::Bool), value("v_out", &[])],
        ..Default::default()
    };
    let go = TensorProto {
        name: Some("go".into()),
        data_type: Some(DataType::Bool as i32),
        int32_data: vec![1],
        ..Default::default()
    };
    let m = model_at(
        13,
        vec![],
        vec![ints("n", &[], &[10]), go, floats("v0", &[], &[0.0])],
        vec![node(
            "Loop",
            &["n", "go", "v0"],
            &["y"],
            vec![attr_graph("body", body)],
        )],
    );
    let out = d.join("out");
    accepted(&[
        "run",
        s(&save(&d, "loop.onnx", &m)),
        "--device",
        "cpu:0",
        "--out",
        s(&out),
    ]);
    let y = wgflow::npy::read(out.join("y.npy")).expect("y.npy");
    assert_eq!(y.to_vec::<f32>().expect("f32"), vec![4.0]);
}

#[test]
fn item9_messages() {
    let d = folder("item9");
    let mut x = value("x", &[2]);
    if let Some(wgflow::onnx::proto::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        if let Some(sh) = t.shape.as_mut() {
            sh.dim[0].value = Some(
                wgflow::onnx::proto::tensor_shape_proto::dimension::Value::DimParam("N".into()),
            );
        }
    }
    let p = save(
        &d,
        "relu.onnx",
        &model_at(
            13,
            vec![x],
            vec![],
            vec![node("Relu", &["x"], &["y"], vec![])],
        ),
    );
    refused(
        &["validate", s(&p), "--dim", "N=18446744073709551615"],
        &["max_elements"],
    );
    refused(
        &["validate", s(&p), "--dim", "N=2", "--dim", "N=3"],
        &["given twice"],
    );
    refused(
        &["validate", s(&p), "--dim", "typo=3"],
        &["typo", "name no input's dimension", "N"],
    );
    accepted(&["validate", s(&p), "--dim", "N=2"]);
    // A Constant whose tensor is external data loads from the model's folder.
    std::fs::write(d.join("c.bin"), [0u8, 0, 0x80, 0x3f]).expect("write");
    let mut c = node("Constant", &[], &["y"], vec![]);
    c.attribute.push(wgflow::onnx::proto::AttributeProto {
        name: Some("value".into()),
        r#type: Some(wgflow::onnx::proto::attribute_proto::AttributeType::Tensor as i32),
        t: Some(external("c", &[1], "c.bin", Some(0))),
        ..Default::default()
    });
    let out = d.join("out");
    accepted(&[
        "run",
        s(&save(
            &d,
            "const.onnx",
            &model_at(13, vec![], vec![], vec![c]),
        )),
        "--device",
        "cpu:0",
        "--out",
        s(&out),
    ]);
    let y = wgflow::npy::read(out.join("y.npy")).expect("y.npy");
    assert_eq!(y.to_vec::<f32>().expect("f32"), vec![1.0]);
    let _ = HostTensor::scalar(0f32);
}

#[test]
fn item10_what_onnxruntime_refuses() {
    let d = folder("item10");
    let x = || vec![value("x", &[1, 2, 4, 4])];
    let w = || floats("w", &[2, 2, 3, 3], &[0.5; 36]);
    let conv = |attrs| node("Conv", &["x", "w"], &["y"], attrs);
    let mut dup_init = model_at(13, x(), vec![w(), w()], vec![conv(vec![])]);
    let dup_out = model_at(
        13,
        x(),
        vec![w()],
        vec![conv(vec![]), node("Relu", &["x"], &["y"], vec![])],
    );
    let mut opset99 = model_at(13, x(), vec![], vec![node("Relu", &["x"], &["y"], vec![])]);
    opset99.opset_import[0].version = Some(99);
    let mut huge = opset99.clone();
    huge.opset_import[0].version = Some(1 << 62);
    let cases: Vec<(ModelProto, &str)> = vec![
        (
            std::mem::take(&mut dup_init),
            "initializer 'w' is defined twice",
        ),
        (dup_out, "'y' is defined twice"),
        (
            model_at(13, x(), vec![w()], vec![conv(vec![attr_int("group", 0)])]),
            "group must be at least 1",
        ),
        (
            model_at(13, x(), vec![w()], vec![conv(vec![attr_int("group", -1)])]),
            "group must be at least 1",
        ),
        (
            model_at(
                13,
                x(),
                vec![w()],
                vec![conv(vec![attr_ints("kernel_shape", &[5, 5])])],
            ),
            "contradicts the weights",
        ),
        (
            model_at(
                13,
                x(),
                vec![],
                vec![node(
                    "Softmax",
                    &["x"],
                    &["y"],
                    vec![attr_float("axis", 1.0)],
                )],
            ),
            "attribute 'axis' is FLOAT",
        ),
        (opset99, "opset 99 is unsupported"),
        (huge, "is unsupported"),
    ];
    for (i, (m, want)) in cases.iter().enumerate() {
        refused(
            &["validate", s(&save(&d, &format!("m{i}.onnx"), m))],
            &[want],
        );
    }
}
