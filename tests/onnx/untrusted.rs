//! Issue 44's defects, one test each: rank-0 axes, sizes from attributes and shape inputs,
//! int64 folding, conditions known at import, refusals where onnxruntime refuses, and the
//! linear-time import of a 200,000-node chain. Every hostile model is an `Error::Onnx`, never
//! a panic or an unbounded allocation.

use super::protos::{
    attr_float, attr_graph, attr_int, external, floats, ints, model_at, neg_chain, node,
    scan_of_2_pow_40_steps, typed_value, value,
};
use wgflow::onnx::proto::{tensor_proto::DataType, GraphProto, ModelProto, TensorProto};
use wgflow::onnx::{import_bytes, ImportOptions, Message, Model};
use wgflow::{Error, HostTensor, Session, SessionOptions};

fn try_import(m: &ModelProto) -> wgflow::Result<Model> {
    import_bytes(&m.encode_to_vec(), None, &ImportOptions::default())
}

/// The import's error text, asserting it is an `Error::Onnx` (a panic fails the test).
fn refused(m: &ModelProto) -> String {
    match try_import(m) {
        Ok(_) => panic!("a hostile model imported"),
        Err(e @ Error::Onnx { .. }) => e.to_string(),
        Err(e) => panic!("not an Error::Onnx: {e}"),
    }
}

/// Run an imported model with no feeds on cpu:0.
fn run(m: &Model) -> Vec<HostTensor> {
    let opts = SessionOptions {
        default_device: Some(wgflow::Device::Cpu),
        visible_devices: Some(Vec::new()),
        ..Default::default()
    };
    let mut s = Session::new(&m.graph, opts).expect("session");
    s.run(&[], &m.output_tensors()).expect("run")
}

#[test]
fn axis_0_of_a_scalar_is_an_error() {
    let scalar = || vec![value("x", &[])];
    let cases = [
        model_at(
            13,
            scalar(),
            vec![],
            vec![node(
                "Split",
                &["x"],
                &["y", "z"],
                vec![attr_int("axis", 0)],
            )],
            &["y"],
        ),
        model_at(
            13,
            scalar(),
            vec![ints("a", &[1], &[0])],
            vec![node("ReduceSum", &["x", "a"], &["y"], vec![])],
            &["y"],
        ),
        model_at(
            13,
            scalar(),
            vec![ints("a", &[1], &[0])],
            vec![node("Squeeze", &["x", "a"], &["y"], vec![])],
            &["y"],
        ),
        model_at(
            13,
            scalar(),
            vec![
                ints("s", &[1], &[0]),
                ints("e", &[1], &[1]),
                ints("a", &[1], &[0]),
            ],
            vec![node("Slice", &["x", "s", "e", "a"], &["y"], vec![])],
            &["y"],
        ),
        model_at(
            13,
            scalar(),
            vec![],
            vec![node("Softmax", &["x"], &["y"], vec![attr_int("axis", 0)])],
            &["y"],
        ),
        model_at(
            13,
            scalar(),
            vec![],
            vec![node(
                "Concat",
                &["x", "x"],
                &["y"],
                vec![attr_int("axis", 0)],
            )],
            &["y"],
        ),
    ];
    for m in &cases {
        let e = refused(m);
        assert!(e.contains("out of range for rank 0"), "{e}");
    }
}

#[test]
fn sizes_from_the_model_are_capped_before_allocation() {
    let x = || vec![value("x", &[1, 1, 2, 2])];
    let start = std::time::Instant::now();
    // Resize to 2^62 rows, and by a scale of 1e9.
    let e = refused(&model_at(
        13,
        x(),
        vec![ints("sz", &[4], &[1, 1, 1 << 62, 2])],
        vec![node("Resize", &["x", "", "", "sz"], &["y"], vec![])],
        &["y"],
    ));
    assert!(
        e.contains("Resize size") && e.contains("max_elements"),
        "{e}"
    );
    let e = refused(&model_at(
        13,
        x(),
        vec![floats("sc", &[4], &[1.0, 1.0, 1e9, 1e9])],
        vec![node("Resize", &["x", "", "sc"], &["y"], vec![])],
        &["y"],
    ));
    assert!(
        e.contains("Resize output") && e.contains("max_elements"),
        "{e}"
    );
    // Split into 2^62 parts.
    let e = refused(&model_at(
        18,
        x(),
        vec![],
        vec![node(
            "Split",
            &["x"],
            &["y"],
            vec![attr_int("num_outputs", 1 << 62)],
        )],
        &["y"],
    ));
    assert!(
        e.contains("num_outputs is 4611686018427387904 but the node has 1 outputs"),
        "{e}"
    );
    // OneHot of depth 2^31 - 1 over 4 indices: 8.6e9 elements.
    let e = refused(&model_at(
        13,
        vec![value("x", &[4])],
        vec![
            ints("d", &[], &[(1 << 31) - 1]),
            floats("v", &[2], &[0.0, 1.0]),
        ],
        vec![node("OneHot", &["x", "d", "v"], &["y"], vec![])],
        &["y"],
    ));
    assert!(
        e.contains("OneHot output") && e.contains("max_elements"),
        "{e}"
    );
    // Range over 2^40 values.
    let e = refused(&model_at(
        13,
        vec![],
        vec![
            ints("a", &[], &[0]),
            ints("b", &[], &[1 << 40]),
            ints("c", &[], &[1]),
        ],
        vec![node("Range", &["a", "b", "c"], &["y"], vec![])],
        &["y"],
    ));
    assert!(
        e.contains("Range's length") && e.contains("1099511627776"),
        "{e}"
    );
    assert!(start.elapsed().as_secs() < 10, "took {:?}", start.elapsed());
}

/// `ConstantOfShape [32768, 32768]` (2^30 elements, the cap) is not folded on the host: it
/// is a broadcast in the graph, and importing it allocates nothing of its size.
#[test]
fn a_large_constant_of_shape_stays_in_the_graph() {
    let m = model_at(
        13,
        vec![],
        vec![ints("s", &[2], &[32768, 32768])],
        vec![node("ConstantOfShape", &["s"], &["y"], vec![])],
        &["y"],
    );
    let imported = try_import(&m).expect("import");
    assert_eq!(imported.outputs[0].shape.dims(), &[32768, 32768]);
    // A small one folds on the host and runs.
    let m = model_at(
        13,
        vec![],
        vec![ints("s", &[2], &[2, 3])],
        vec![node("ConstantOfShape", &["s"], &["y"], vec![])],
        &["y"],
    );
    let y = run(&try_import(&m).expect("import"));
    assert_eq!(y[0].to_f32().expect("f32"), vec![0.0; 6]);
}

/// Integer arithmetic on values known at import folds in int64: `2^31 - 1 + 1` is 2^31,
/// which does not fit the i32 a tensor holds, so it is an error, never `-2^31`.
#[test]
fn int64_folding_is_exact_and_checked() {
    let m = model_at(
        13,
        vec![],
        vec![ints("a", &[1], &[(1 << 31) - 1]), ints("b", &[1], &[1])],
        vec![node("Add", &["a", "b"], &["y"], vec![])],
        &["y"],
    );
    let e = refused(&m);
    assert!(
        e.contains("2147483648") && e.contains("does not fit"),
        "{e}"
    );
    // Back in range after the wide intermediate: (2^31 - 1 + 1) - 5 = 2147483643.
    let m = model_at(
        13,
        vec![],
        vec![
            ints("a", &[1], &[(1 << 31) - 1]),
            ints("b", &[1], &[1]),
            ints("c", &[1], &[5]),
        ],
        vec![
            node("Add", &["a", "b"], &["t"], vec![]),
            node("Sub", &["t", "c"], &["y"], vec![]),
        ],
        &["y"],
    );
    let y = run(&try_import(&m).expect("import"));
    assert_eq!(y[0].to_vec::<i32>().expect("i32"), vec![2147483643]);
    // Overflowing int64 itself is an error too.
    let m = model_at(
        13,
        vec![],
        vec![ints("a", &[1], &[i64::MAX]), ints("b", &[1], &[2])],
        vec![node("Mul", &["a", "b"], &["y"], vec![])],
        &["y"],
    );
    assert!(refused(&m).contains("overflows int64"));
    // Broadcasting and comparisons fold too: [[1], [2]] < [2, 3] -> [[T, T], [F, T]].
    let m = model_at(
        13,
        vec![],
        vec![ints("a", &[2, 1], &[1, 2]), ints("b", &[2], &[2, 3])],
        vec![node("Less", &["a", "b"], &["y"], vec![])],
        &["y"],
    );
    let y = run(&try_import(&m).expect("import"));
    assert_eq!(
        y[0].to_vec::<bool>().expect("bool"),
        vec![true, true, false, true]
    );
}

/// A `Loop` whose body's condition is `Less(i, 3)` runs three times.
#[test]
fn a_loop_condition_known_at_import_unrolls() {
    let body = GraphProto {
        name: Some("body".into()),
        node: vec![
            node("Less", &["i", "three"], &["cond_out"], vec![]),
            node("Add", &["v", "one"], &["v_out"], vec![]),
        ],
        initializer: vec![ints("three", &[], &[3]), floats("one", &[], &[1.0])],
        input: vec![
            typed_value("i", &[], DataType::Int64),
            typed_value("cond", &[], DataType::Bool),
            value("v", &[]),
        ],
        output: vec![
            typed_value("cond_out", &[], DataType::Bool),
            value("v_out", &[]),
        ],
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
        vec![ints("trips", &[], &[100]), go, floats("v0", &[], &[10.0])],
        vec![node(
            "Loop",
            &["trips", "go", "v0"],
            &["y"],
            vec![attr_graph("body", body)],
        )],
        &["y"],
    );
    let y = run(&try_import(&m).expect("import"));
    // Iterations 0..=3 run (the condition is checked after each body): 10 + 4.
    assert_eq!(y[0].to_f32().expect("f32"), vec![14.0]);
}

/// A `Scan` over an input declared `[0, 2^40]` (no elements, so within the element cap)
/// along its second axis stops at the unroll cap, in seconds.
#[test]
fn a_scan_of_2_pow_40_steps_is_refused() {
    let m = scan_of_2_pow_40_steps();
    let start = std::time::Instant::now();
    let e = refused(&m);
    assert!(e.contains("Scan") && e.contains("graph nodes"), "{e}");
    assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
}

/// Issue 44 item 3: a chain of 200,000 `Neg` nodes imports in linear time (quadratic
/// naming took about half an hour).
#[test]
fn a_200000_node_chain_imports_in_seconds() {
    let n = 200_000;
    let m = neg_chain(n);
    let start = std::time::Instant::now();
    let imported = try_import(&m).expect("import");
    let took = start.elapsed();
    eprintln!("200,000-node chain imported in {took:?}");
    assert!(imported.graph.len() > n);
    // 5 s is issue 44's target on a quiet machine; shared CI runners get slack.
    assert!(took.as_secs() < 30, "took {took:?}");
}

/// Refusals where onnxruntime refuses (issue 44 item 10).
#[test]
fn what_onnxruntime_refuses_is_refused() {
    let x = || vec![value("x", &[2, 3])];
    // Tile, OneHot and GlobalAveragePool of scalars.
    let e = refused(&model_at(
        13,
        vec![value("x", &[])],
        vec![ints("r", &[0], &[])],
        vec![node("Tile", &["x", "r"], &["y"], vec![])],
        &["y"],
    ));
    assert!(e.contains("scalar cannot be tiled"), "{e}");
    let e = refused(&model_at(
        13,
        vec![value("x", &[])],
        vec![ints("d", &[], &[3]), floats("v", &[2], &[0.0, 1.0])],
        vec![node("OneHot", &["x", "d", "v"], &["y"], vec![])],
        &["y"],
    ));
    assert!(e.contains("OneHot of a scalar"), "{e}");
    let e = refused(&model_at(
        13,
        vec![value("x", &[])],
        vec![],
        vec![node("GlobalAveragePool", &["x"], &["y"], vec![])],
        &["y"],
    ));
    assert!(e.contains("rank 0"), "{e}");
    // Split at opset 18 without sizes or num_outputs.
    let e = refused(&model_at(
        18,
        x(),
        vec![],
        vec![node(
            "Split",
            &["x"],
            &["y", "z"],
            vec![attr_int("axis", 1)],
        )],
        &["y"],
    ));
    assert!(e.contains("needs the split input or num_outputs"), "{e}");
    // Range to NaN.
    let e = refused(&model_at(
        13,
        vec![],
        vec![
            floats("a", &[], &[0.0]),
            floats("b", &[], &[f32::NAN]),
            floats("c", &[], &[1.0]),
        ],
        vec![node("Range", &["a", "b", "c"], &["y"], vec![])],
        &["y"],
    ));
    assert!(e.contains("must be finite"), "{e}");
    let _ = attr_float;
}

/// Softmax over an empty axis is an empty result, as in onnxruntime.
#[test]
fn softmax_over_an_empty_axis_is_empty() {
    let m = model_at(
        13,
        vec![value("x", &[2, 0])],
        vec![],
        vec![node("Softmax", &["x"], &["y"], vec![attr_int("axis", -1)])],
        &["y"],
    );
    let imported = try_import(&m).expect("import");
    assert_eq!(imported.outputs[0].shape.dims(), &[2, 0]);
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Issue 44 item 5: links inside the model's folder that lead outside it (to a file, through
/// a linked folder, to procfs) are refused; a link that stays inside loads.
#[cfg(unix)]
#[test]
fn external_data_links_never_lead_outside() {
    use std::os::unix::fs::symlink;
    let root = std::env::temp_dir().join(format!("wgflow-untrusted-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (m, outside) = (root.join("m"), root.join("outside"));
    std::fs::create_dir_all(m.join("ext")).expect("dir");
    std::fs::create_dir_all(&outside).expect("dir");
    std::fs::write(outside.join("secret.bin"), f32_bytes(&[7.0; 6])).expect("write");
    std::fs::write(m.join("w.bin"), f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).expect("write");
    symlink("../../outside/secret.bin", m.join("ext/w.bin")).expect("link");
    symlink("../outside", m.join("lnk")).expect("link");
    symlink("/proc/self/environ", m.join("env.bin")).expect("link");
    symlink("w.bin", m.join("alias.bin")).expect("link");
    let path = m.join("model.onnx");
    let load = |location: &str| {
        let mdl = model_at(
            13,
            vec![],
            vec![external("w", &[2, 3], location, None)],
            vec![node("Neg", &["w"], &["y"], vec![])],
            &["y"],
        );
        std::fs::write(&path, mdl.encode_to_vec()).expect("write model");
        wgflow::onnx::import(&path, &ImportOptions::default())
    };
    for location in ["ext/w.bin", "lnk/secret.bin", "env.bin"] {
        let e = load(location).expect_err("a link out of the folder");
        assert!(e.to_string().contains("outside"), "{location}: {e}");
    }
    let y = run(&load("alias.bin").expect("a link inside the folder"));
    assert_eq!(
        y[0].to_f32().expect("f32"),
        vec![-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    );
    // A Constant node's tensor reads the folder too (it was decoded without it).
    let mut c = node("Constant", &[], &["y"], vec![]);
    c.attribute.push(wgflow::onnx::proto::AttributeProto {
        name: Some("value".into()),
        r#type: Some(wgflow::onnx::proto::attribute_proto::AttributeType::Tensor as i32),
        t: Some(external("w", &[2, 3], "w.bin", None)),
        ..Default::default()
    });
    std::fs::write(
        &path,
        model_at(13, vec![], vec![], vec![c], &["y"]).encode_to_vec(),
    )
    .expect("write model");
    let imported = wgflow::onnx::import(&path, &ImportOptions::default()).expect("Constant");
    assert_eq!(
        run(&imported)[0].to_f32().expect("f32"),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Issue 44 item 6: only a tensor's byte range is read, and the file limit applies to it:
/// 24 bytes at 4 GiB + 8 in a (sparse) 5 GiB file load under the default 4 GiB limit.
#[test]
fn external_data_reads_only_its_range() {
    let dir = std::env::temp_dir().join(format!("wgflow-untrusted-range-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let data = dir.join("weights.data");
    let at = (4u64 << 30) + 8;
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(&data).expect("create");
        f.set_len(5 << 30).expect("sparse file");
        f.seek(SeekFrom::Start(at)).expect("seek");
        f.write_all(&f32_bytes(&[1.5, -2.0, 3.0, 0.25, 8.0, -1.0]))
            .expect("write");
    }
    let mdl = model_at(
        13,
        vec![],
        vec![external("w", &[2, 3], "weights.data", Some(at))],
        vec![node("Neg", &["w"], &["y"], vec![])],
        &["y"],
    );
    let path = dir.join("model.onnx");
    std::fs::write(&path, mdl.encode_to_vec()).expect("write model");
    let start = std::time::Instant::now();
    let imported = wgflow::onnx::import(&path, &ImportOptions::default()).expect("import");
    assert!(start.elapsed().as_secs() < 5, "took {:?}", start.elapsed());
    assert_eq!(
        run(&imported)[0].to_f32().expect("f32"),
        vec![-1.5, 2.0, -3.0, -0.25, -8.0, 1.0]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Packed and float8 tensors decode by hand-computed values (int4: two to a byte, low nibble
/// first, sign-extended; float8 e4m3fn: 0x7f NaN, 0x7e 448, 0x01 2^-9, 0x80 -0), and a
/// byte count that does not match the shape is an error.
#[test]
fn packed_and_float8_tensors_decode_and_bad_sizes_are_errors() {
    use wgflow::onnx::load_tensor;
    let tensor = |elem: DataType, dims: &[i64], raw: &[u8]| {
        TensorProto {
            name: Some("t".into()),
            dims: dims.to_vec(),
            data_type: Some(elem as i32),
            raw_data: Some(raw.to_vec()),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let opts = ImportOptions::default();
    let (_, t) = load_tensor(&tensor(DataType::Int4, &[3], &[0x8f, 0x07]), &opts).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![-1, -8, 7]);
    let (_, t) = load_tensor(&tensor(DataType::Uint2, &[5], &[0b1110_0100, 0b11]), &opts).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, 3]);
    let f8 = tensor(DataType::Float8e4m3fn, &[4], &[0x7f, 0x7e, 0x01, 0x80]);
    let v = load_tensor(&f8, &opts).unwrap().1.to_f32().unwrap();
    assert!(v[0].is_nan());
    assert_eq!(&v[1..3], &[448.0, 2f32.powi(-9)]);
    assert_eq!(v[3].to_bits(), (-0.0f32).to_bits());
    let e = load_tensor(&tensor(DataType::Int4, &[3], &[0x8f]), &opts).unwrap_err();
    assert!(e.to_string().contains("4-bit"), "{e}");
    let e = load_tensor(&tensor(DataType::Float8e5m2, &[2], &[1, 2, 3]), &opts).unwrap_err();
    assert!(e.to_string().contains("3 bytes"), "{e}");
}

/// The registry's row is checked before a translator runs: the input and output counts, an
/// op ONNX removed, a domain or op it does not have.
#[test]
fn nodes_are_checked_against_their_registry_row() {
    let x = || vec![value("x", &[1, 1, 4, 4])];
    let one = |op: &str, inputs: &[&str], outputs: &[&str], opset: i64| {
        refused(&model_at(
            opset,
            x(),
            vec![],
            vec![node(op, inputs, outputs, vec![])],
            &[outputs[0]],
        ))
    };
    let e = one("Conv", &["x"], &["y"], 13);
    assert!(
        e.contains("Conv takes 2 to 3 inputs, the node has 1"),
        "{e}"
    );
    let e = one("Relu", &["x", "x"], &["y"], 13);
    assert!(e.contains("Relu takes 1 inputs, the node has 2"), "{e}");
    let e = one("Relu", &["x"], &["y", "z"], 13);
    assert!(e.contains("Relu has 1 outputs, the node has 2"), "{e}");
    let e = one("Upsample", &["x"], &["y"], 13);
    assert!(
        e.contains("Upsample was removed from ONNX after opset 9"),
        "{e}"
    );
    let e = one("NoSuchOp", &["x"], &["y"], 13);
    assert!(e.contains("(NoSuchOp, opset 13): unsupported op"), "{e}");
    // A contrib op in the default domain, and an ai.onnx op in another domain.
    let e = one("QLinearAdd", &["x"; 7], &["y"], 13);
    assert!(e.contains("unsupported op"), "{e}");
    let mut m = model_at(
        13,
        x(),
        vec![],
        vec![node("Relu", &["x"], &["y"], vec![])],
        &["y"],
    );
    m.graph.as_mut().unwrap().node[0].domain = Some("com.example".into());
    let e = refused(&m);
    assert!(e.contains("domain 'com.example' is unsupported"), "{e}");
}
