//! Hostile and broken ONNX files: each is a clear [`wgflow::Error::Onnx`] naming the problem,
//! never a panic and never an unbounded allocation.

use super::protos::{float_init, value};
use crate::common::Rng;
use wgflow::onnx::proto::{
    tensor_proto::{DataLocation, DataType},
    tensor_shape_proto::dimension::Value as Dim,
    type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto,
};
use wgflow::onnx::{import, import_bytes, ImportOptions, Message};
use wgflow::Error;

fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_node")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: inits,
            input: vec![value("x", &[2, 3])],
            output: vec![value("y", &[2, 3])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Import `m` and return the error's text, asserting it is an `Error::Onnx`.
fn onnx_error(m: &ModelProto) -> String {
    match import_bytes(&m.encode_to_vec(), None, &ImportOptions::default()) {
        Ok(_) => panic!("a hostile model imported"),
        Err(e @ Error::Onnx { .. }) => e.to_string(),
        Err(e) => panic!("not an Error::Onnx: {e}"),
    }
}

#[test]
fn a_valid_model_imports() {
    let m = model(vec![node("Relu", &["x"], &["y"])], vec![]);
    let imported =
        import_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).expect("import");
    assert_eq!(imported.inputs.len(), 1);
    assert_eq!(imported.outputs[0].shape.dims(), &[2, 3]);
}

#[test]
fn truncated_protobuf() {
    let m = model(
        vec![node("Relu", &["x"], &["y"])],
        vec![float_init("w", &[2, 3], vec![1.0; 6])],
    );
    let bytes = m.encode_to_vec();
    for cut in [1, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let e =
            import_bytes(&bytes[..cut], None, &ImportOptions::default()).expect_err("truncated");
        assert!(matches!(e, Error::Onnx { .. }), "{e}");
    }
    let e = import_bytes(b"\xff\xff\xff\xff garbage", None, &ImportOptions::default())
        .expect_err("garbage");
    assert!(e.to_string().contains("not a valid ONNX protobuf"), "{e}");
}

#[test]
fn undefined_value_and_cycle() {
    let e = onnx_error(&model(vec![node("Relu", &["nope"], &["y"])], vec![]));
    assert!(e.contains("Relu_node") && e.contains("'nope'"), "{e}");
    // A cycle: each node uses the other's output, so the first uses a value not yet defined.
    let e = onnx_error(&model(
        vec![node("Relu", &["b"], &["a"]), node("Neg", &["a"], &["b"])],
        vec![],
    ));
    assert!(e.contains("'b'") && e.contains("no earlier node"), "{e}");
}

#[test]
fn initializer_with_wrong_data_size() {
    let e = onnx_error(&model(
        vec![node("Add", &["x", "w"], &["y"])],
        vec![float_init("w", &[2, 3], vec![1.0; 5])],
    ));
    assert!(e.contains("tensor 'w'") && e.contains("6 elements"), "{e}");
    let mut raw = float_init("w", &[2, 3], vec![]);
    raw.raw_data = Some(vec![0; 23]);
    let e = onnx_error(&model(vec![node("Add", &["x", "w"], &["y"])], vec![raw]));
    assert!(e.contains("tensor 'w'"), "{e}");
}

#[test]
fn external_data_outside_the_model_directory() {
    let dir = std::env::temp_dir().join(format!("wgflow-onnx-hostile-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("m")).expect("dir");
    std::fs::write(dir.join("secret.bin"), [0u8; 24]).expect("write");
    for location in ["../secret.bin", "/etc/passwd", "m/../../secret.bin"] {
        let mut w = float_init("w", &[2, 3], vec![]);
        w.data_location = Some(DataLocation::External as i32);
        w.external_data = vec![StringStringEntryProto {
            key: Some("location".into()),
            value: Some(location.into()),
        }];
        let m = model(vec![node("Add", &["x", "w"], &["y"])], vec![w]);
        let path = dir.join("m/model.onnx");
        std::fs::write(&path, m.encode_to_vec()).expect("write model");
        let e = import(&path, &ImportOptions::default()).expect_err("escaping path");
        assert!(
            e.to_string().contains("leaves the model's directory"),
            "{e}"
        );
    }
    // Inside the directory it loads, with its length checked.
    std::fs::write(dir.join("m/w.bin"), [0u8; 24]).expect("write");
    let mut w = float_init("w", &[2, 3], vec![]);
    w.data_location = Some(DataLocation::External as i32);
    w.external_data = vec![StringStringEntryProto {
        key: Some("location".into()),
        value: Some("w.bin".into()),
    }];
    let path = dir.join("m/model.onnx");
    std::fs::write(
        &path,
        model(vec![node("Add", &["x", "w"], &["y"])], vec![w]).encode_to_vec(),
    )
    .expect("write model");
    import(&path, &ImportOptions::default()).expect("external data inside the directory");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn huge_declared_shapes() {
    let e = onnx_error(&model(
        vec![node("Add", &["x", "w"], &["y"])],
        vec![float_init("w", &[1 << 40, 1 << 40], vec![])],
    ));
    assert!(e.contains("max_elements"), "{e}");
    let mut m = model(vec![node("Relu", &["x"], &["y"])], vec![]);
    if let Some(g) = m.graph.as_mut() {
        g.input = vec![value("x", &[i64::MAX, 2])];
    }
    assert!(onnx_error(&m).contains("max_elements"));
    let mut m = model(vec![node("Relu", &["x"], &["y"])], vec![]);
    if let Some(g) = m.graph.as_mut() {
        g.input = vec![value("x", &[-3, 2])];
    }
    assert!(onnx_error(&m).contains("negative dimension"));
}

#[test]
fn unknown_ops_and_domains() {
    let e = onnx_error(&model(
        vec![node("FrobnicateTensor", &["x"], &["y"])],
        vec![],
    ));
    assert!(
        e.contains("FrobnicateTensor") && e.contains("opset 17") && e.contains("unsupported"),
        "{e}"
    );
    let mut n = node("Relu", &["x"], &["y"]);
    n.domain = Some("com.example".into());
    let e = onnx_error(&model(vec![n], vec![]));
    assert!(e.contains("com.example"), "{e}");
}

#[test]
fn symbolic_dimensions_are_run_time_or_pinned() {
    let mut m = model(vec![node("Relu", &["x"], &["y"])], vec![]);
    if let Some(g) = m.graph.as_mut() {
        let mut x = value("x", &[2, 3]);
        if let Some(type_proto::Value::TensorType(t)) =
            x.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            if let Some(s) = t.shape.as_mut() {
                s.dim[0].value = Some(Dim::DimParam("N".into()));
            }
        }
        g.input = vec![x];
    }
    let free = import_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).expect("free");
    assert_eq!(
        free.inputs[0].dims,
        [wgflow::Dim::named("N"), wgflow::Dim::Known(3)]
    );
    assert!(free.graph.has_unknown_dims());
    let mut opts = ImportOptions::default();
    opts.dims.insert("N".into(), 5);
    let imported = import_bytes(&m.encode_to_vec(), None, &opts).expect("bound");
    assert_eq!(imported.inputs[0].shape.dims(), &[5, 3]);
}

#[test]
fn int64_out_of_range_names_the_tensor() {
    let big = TensorProto {
        name: Some("big".into()),
        dims: vec![1],
        data_type: Some(DataType::Int64 as i32),
        int64_data: vec![1 << 40],
        ..Default::default()
    };
    let mut m = model(vec![node("Neg", &["big"], &["y"])], vec![big]);
    if let Some(g) = m.graph.as_mut() {
        g.output = vec![value("y", &[1])];
    }
    let e = onnx_error(&m);
    assert!(e.contains("'big'") && e.contains("1099511627776"), "{e}");
}

/// Protobuf-aware damage: truncation, bit flips, hostile varints (huge lengths, dims,
/// negative numbers), dropped and duplicated spans.
fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len().max(1);
        match rng.below(5) {
            0 => b.truncate(rng.below(len)),
            1 => {
                let i = rng.below(len);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.below(8);
                }
            }
            2 => {
                // A varint as large as it may be: a length, a dim, an enum.
                const VARINTS: [&[u8]; 5] = [
                    &[0xff, 0xff, 0xff, 0xff, 0x0f],
                    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                    &[0x80, 0x80, 0x80, 0x80, 0x08],
                    &[0x00],
                    &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                ];
                let i = rng.below(len).min(b.len());
                let v = VARINTS[rng.below(VARINTS.len())];
                let end = (i + 1).min(b.len());
                b.splice(i..end, v.iter().copied());
            }
            3 => {
                let (i, j) = (rng.below(len), rng.below(len));
                let (i, j) = (i.min(j).min(b.len()), i.max(j).min(b.len()));
                b.drain(i..j.min(i + 64));
            }
            _ => {
                let i = rng.below(len).min(b.len());
                let span: Vec<u8> = b[i..(i + rng.below(80)).min(b.len())].to_vec();
                let at = rng.below(b.len() + 1);
                b.splice(at..at, span);
            }
        }
    }
    b
}

/// Mutated real models (three light models and a small one built here): each import is a
/// model or an `Error::Onnx`, never a panic, and stays within the element bound.
#[test]
fn arbitrary_mutations_never_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-light");
    let mut seeds: Vec<Vec<u8>> = ["bvlc_alexnet", "squeezenet", "inception_v1"]
        .iter()
        .map(|n| std::fs::read(dir.join(format!("light_{n}.onnx"))).expect("light model"))
        .collect();
    let relu = model(vec![node("Relu", &["x"], &["y"])], vec![]);
    seeds.push(relu.encode_to_vec());
    let opts = ImportOptions {
        max_elements: 1 << 22,
        max_file_bytes: 1 << 24,
        ..Default::default()
    };
    let mut rng = Rng(0x5EED_0000_0000_0001);
    let start = std::time::Instant::now();
    let (mut ok, mut rejected) = (0, 0);
    for i in 0..300 {
        let bytes = mutate(&mut rng, &seeds[i % seeds.len()]);
        let r =
            std::panic::catch_unwind(|| import_bytes(&bytes, None, &opts).map(|m| m.graph.len()));
        match r {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(Error::Onnx { .. })) => rejected += 1,
            Ok(Err(e)) => panic!("iteration {i}: not an Error::Onnx: {e}"),
            Err(_) => panic!("iteration {i}: the importer panicked"),
        }
    }
    assert!(
        rejected > 50,
        "most mutations are rejected ({ok} accepted, {rejected} rejected)"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(120),
        "300 imports took {:?}",
        start.elapsed()
    );
}

/// A `Loop` whose trip count is INT64_MAX: without a condition it is refused at once; with
/// a condition that stays true, unrolling stops at its cap. Both are errors, in seconds.
#[test]
fn a_loop_of_int64_max_trips_is_refused() {
    use super::protos::typed_value;
    use wgflow::onnx::proto::AttributeProto;
    let body = GraphProto {
        name: Some("body".into()),
        node: vec![
            node("Identity", &["cond"], &["cond_out"]),
            node("Neg", &["v"], &["v_out"]),
        ],
        input: vec![
            typed_value("i", &[], DataType::Int64),
            typed_value("cond", &[], DataType::Bool),
            value("v", &[2, 3]),
        ],
        output: vec![
            typed_value("cond_out", &[], DataType::Bool),
            value("v_out", &[2, 3]),
        ],
        ..Default::default()
    };
    let trips = TensorProto {
        name: Some("trips".into()),
        data_type: Some(DataType::Int64 as i32),
        int64_data: vec![i64::MAX],
        ..Default::default()
    };
    let go = TensorProto {
        name: Some("go".into()),
        data_type: Some(DataType::Bool as i32),
        int32_data: vec![1],
        ..Default::default()
    };
    for cond in ["", "go"] {
        let mut l = node("Loop", &["trips", cond, "x"], &["y"]);
        l.attribute.push(AttributeProto {
            name: Some("body".into()),
            r#type: Some(wgflow::onnx::proto::attribute_proto::AttributeType::Graph as i32),
            g: Some(body.clone()),
            ..Default::default()
        });
        let m = model(vec![l], vec![trips.clone(), go.clone()]);
        let start = std::time::Instant::now();
        let e = onnx_error(&m);
        assert!(e.contains("Loop") && e.contains("iterations"), "{e}");
        assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
    }
}

/// The kind of an import's refusal is its variant's `kind`, not its text: the model is
/// wrong ([`OnnxKind::Invalid`]), holds or feeds a dtype wgflow or the op does not take
/// ([`OnnxKind::DType`]), or uses something wgflow does not run ([`OnnxKind::Unsupported`]).
#[test]
fn refusals_carry_their_kind() {
    use wgflow::OnnxKind;
    let kind = |bytes: &[u8]| match import_bytes(bytes, None, &ImportOptions::default()) {
        Err(Error::Onnx { kind, .. }) => kind,
        Err(e) => panic!("not an Error::Onnx: {e}"),
        Ok(_) => panic!("imported"),
    };
    let relu = model(vec![node("Relu", &["x"], &["y"])], vec![]).encode_to_vec();
    assert_eq!(kind(&relu[..relu.len() / 2]), OnnxKind::Invalid);
    let missing = model(vec![node("Add", &["x", "nowhere"], &["y"])], vec![]);
    assert_eq!(kind(&missing.encode_to_vec()), OnnxKind::Invalid);
    let unknown = model(vec![node("NoSuchOp", &["x"], &["y"])], vec![]);
    assert_eq!(kind(&unknown.encode_to_vec()), OnnxKind::Unsupported);
    let mut old = model(vec![node("Relu", &["x"], &["y"])], vec![]);
    old.opset_import[0].version = Some(1);
    assert_eq!(kind(&old.encode_to_vec()), OnnxKind::Unsupported);
    let f64_init = TensorProto {
        name: Some("w".into()),
        dims: vec![2, 3],
        data_type: Some(DataType::Double as i32),
        double_data: vec![1.0; 6],
        ..Default::default()
    };
    let double = model(vec![node("Add", &["x", "w"], &["y"])], vec![f64_init]);
    assert_eq!(kind(&double.encode_to_vec()), OnnxKind::DType);
    // An int32 initializer into a float-only op: the builder's dtype refusal, placed at the node.
    let ints = TensorProto {
        name: Some("i".into()),
        dims: vec![2, 3],
        data_type: Some(DataType::Int32 as i32),
        int32_data: vec![1; 6],
        ..Default::default()
    };
    let mixed = model(vec![node("Add", &["x", "i"], &["y"])], vec![ints]);
    let e = import_bytes(&mixed.encode_to_vec(), None, &ImportOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Onnx {
                kind: OnnxKind::DType,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("Add_node"), "{e}");
}
