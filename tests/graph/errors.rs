//! Build-time errors are values that name the op, the shapes or dtypes, and the caller's line.

use wgflow::{BuildKind, DType, Error, Graph, HostTensor, Shape};

fn line_of(marker: &str) -> u32 {
    let src = include_str!("errors.rs");
    src.lines()
        .position(|l| l.contains(marker) && !l.contains("line_of"))
        .expect("marker") as u32
        + 1
}

#[test]
fn broadcast_error_names_op_shapes_and_caller() {
    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0, 3.0]).unwrap();
    let b = g.constant([1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let err = g.add(a, b).unwrap_err(); // MARK-add
    let msg = err.to_string();
    assert!(matches!(err, Error::Build { .. }));
    assert!(msg.starts_with("add at tests/graph/errors.rs:"), "{msg}");
    assert!(
        msg.contains(&format!("errors.rs:{}:", line_of("MARK-add"))),
        "{msg}"
    );
    assert!(msg.contains("shapes [3] and [4] cannot broadcast"), "{msg}");
}

#[test]
fn dtype_errors_are_clear() {
    let mut g = Graph::new();
    let f = g.constant([1.0f32, 2.0]).unwrap();
    let i = g.constant([1i32, 2]).unwrap();
    let msg = g.mul(f, i).unwrap_err().to_string();
    assert!(
        msg.contains("mul at") && msg.contains("dtypes f32 and i32 differ"),
        "{msg}"
    );
    let msg = g.exp(i).unwrap_err().to_string();
    assert!(
        msg.contains("exp at") && msg.contains("dtype i32 is not supported (expects f32)"),
        "{msg}"
    );
    let b = g.less(f, f).unwrap();
    let msg = g.add(b, b).unwrap_err().to_string();
    assert!(msg.contains("dtype bool is not supported"), "{msg}");
    let msg = g.select(f, f, f).unwrap_err().to_string();
    assert!(
        msg.contains("where at") && msg.contains("condition must be bool"),
        "{msg}"
    );
    let msg = g.sum(b, wgflow::Axes::All, false).unwrap_err().to_string();
    assert!(msg.contains("sum at") && msg.contains("bool"), "{msg}");
}

#[test]
fn matmul_reshape_transpose_reduce_errors() {
    let mut g = Graph::new();
    let a = g.placeholder("a", [2, 3], DType::F32).unwrap();
    let b = g.placeholder("b", [4, 5], DType::F32).unwrap();
    let msg = g.matmul(a, b).unwrap_err().to_string();
    assert!(
        msg.contains("matmul at") && msg.contains("inner dimensions 3 and 4 differ"),
        "{msg}"
    );
    let v = g.placeholder("v", [4], DType::F32).unwrap();
    let msg = g.matmul(a, v).unwrap_err().to_string();
    assert!(
        msg.contains("[2, 3] and [4]: inner dimensions 3 and 4 differ"),
        "{msg}"
    );
    let msg = g.reshape(a, &[4, -1]).unwrap_err().to_string();
    assert!(
        msg.contains("reshape at") && msg.contains("cannot reshape [2, 3]"),
        "{msg}"
    );
    let msg = g.reshape(a, &[-1, -1]).unwrap_err().to_string();
    assert!(msg.contains("only one -1"), "{msg}");
    let msg = g.transpose(a, &[0, 0]).unwrap_err().to_string();
    assert!(
        msg.contains("transpose at") && msg.contains("not a permutation"),
        "{msg}"
    );
    let msg = g.sum(a, [2], false).unwrap_err().to_string();
    assert!(
        msg.contains("axis 2 is out of range for shape [2, 3]"),
        "{msg}"
    );
    let msg = g.softmax(a, 5).unwrap_err().to_string();
    assert!(
        msg.contains("softmax at") && msg.contains("axis 5"),
        "{msg}"
    );
}

#[test]
fn empty_tensors_and_bad_specs_are_rejected() {
    let mut g = Graph::new();
    // Empty tensors are fine (tests/empty_tensors.rs); shapes no kernel can index are not.
    assert!(g.placeholder("e", [2, 0], DType::F32).is_ok());
    assert!(g.constant(Vec::<f32>::new()).is_ok());
    let msg = g
        .placeholder("huge", [1usize << 20, 1 << 20], DType::F32)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("2^32 - 1"), "{msg}");
    let msg = g
        .device("tpu:0", |g| g.constant(1.0f32))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("device scope at tests/graph/errors.rs") && msg.contains("tpu:0"),
        "{msg}"
    );
    g.placeholder("dup", [1], DType::F32).unwrap();
    let msg = g
        .placeholder("dup", [1], DType::F32)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("'dup' already exists"), "{msg}");
}

#[test]
fn tensors_of_another_graph_are_rejected_at_the_door() {
    let mut g1 = Graph::new();
    let mut g2 = Graph::new();
    let a = g1.constant([1.0f32]).unwrap();
    let b = g2.constant([1.0f32]).unwrap();
    let msg = g2.add(a, b).unwrap_err().to_string();
    assert!(msg.contains("another graph"), "{msg}");
}

#[test]
fn extreme_slice_and_window_arguments_are_errors_not_panics() {
    use wgflow::graph::Conv2dOptions;
    use wgflow::ops::SliceArg;
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3], DType::F32).unwrap();
    // A huge step: one element, or a clear error, never an overflow panic.
    for step in [isize::MAX, isize::MIN, 1 << 40] {
        let arg = SliceArg {
            start: Some(0),
            stop: None,
            step,
        };
        match g.slice(x, &[arg]) {
            Ok(s) => assert_eq!(g.shape(s).unwrap().dims(), &[1, 3]),
            Err(e) => assert!(e.to_string().contains("overflows"), "{e}"),
        }
    }
    let img = g.placeholder("img", [1, 1, 8, 8], DType::F32).unwrap();
    let w = g.placeholder("w", [1, 1, 3, 3], DType::F32).unwrap();
    let opts = Conv2dOptions {
        stride: [1, 1],
        padding: [0, 0],
        dilation: [usize::MAX, 1],
        groups: 1,
    };
    let msg = g.conv2d(img, w, None, opts).unwrap_err().to_string();
    assert!(
        msg.contains("conv2d at") && msg.contains("at most"),
        "{msg}"
    );
    let msg = g
        .max_pool2d(img, [2, 2], [usize::MAX, 1], [0, 0])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("at most"), "{msg}");
}

/// A graph with a node at index 0 and one at index 1, so a foreign tensor's index also names
/// a node here: reading it without the ownership check would silently read the wrong node.
fn two_graphs() -> (Graph, Graph, wgflow::Tensor) {
    let mut g1 = Graph::new();
    g1.constant([1.0f32]).unwrap();
    g1.constant([2i32, 3]).unwrap();
    let mut g2 = Graph::new();
    g2.constant([5u32]).unwrap();
    let foreign = g2.constant([true, false]).unwrap();
    (g1, g2, foreign)
}

fn assert_foreign(e: Error, method: &str) {
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::ForeignTensor { method: m, index: 1, .. } if *m == method),
        "{method}: {e:?}"
    );
    assert!(
        msg.contains(method)
            && msg.contains("another graph")
            && msg.contains("tests/graph/errors.rs"),
        "{msg}"
    );
}

#[test]
fn every_accessor_rejects_a_tensor_of_another_graph() {
    let (g1, g2, t) = two_graphs();
    assert_foreign(g1.shape(t).unwrap_err(), "Graph::shape");
    assert_foreign(g1.dtype(t).unwrap_err(), "Graph::dtype");
    assert_foreign(g1.name(t).unwrap_err(), "Graph::name");
    assert_foreign(g1.node(t).unwrap_err(), "Graph::node");
    assert_foreign(g1.inputs(t).unwrap_err(), "Graph::inputs");
    assert_foreign(
        g1.requested_device(t).unwrap_err(),
        "Graph::requested_device",
    );
    // The graph that made it answers.
    assert_eq!(g2.dtype(t).unwrap(), DType::Bool);
    assert_eq!(g2.shape(t).unwrap().dims(), &[2]);
    assert!(g2.inputs(t).unwrap().is_empty());
    // A tensor built in a clone after cloning is not the original's.
    let mut c = g1.clone();
    let late = c.constant(1.0f32).unwrap();
    assert!(matches!(
        g1.shape(late),
        Err(Error::ForeignTensor { index: 2, .. })
    ));
    assert_eq!(c.shape(late).unwrap().rank(), 0);
}

#[test]
fn every_kind_of_builder_rejects_a_tensor_of_another_graph() {
    use wgflow::ops::SliceArg;
    let (mut g1, _g2, t) = two_graphs();
    let x = g1.constant([1.0f32, 2.0]).unwrap();
    let i = g1.constant([0i32]).unwrap();
    let before = g1.len();
    let results: Vec<(&str, wgflow::Result<wgflow::Tensor>)> = vec![
        ("relu", g1.relu(t)),
        ("add", g1.add(x, t)),
        ("where", g1.select(t, x, x)),
        ("cast", g1.cast(t, DType::F32)),
        ("sum", g1.sum(t, 0, false)),
        ("argmax", g1.argmax(t, None, false)),
        ("matmul", g1.matmul(t, x)),
        ("reshape", g1.reshape(t, &[2])),
        ("transpose", g1.transpose(t, &[0])),
        ("slice", g1.slice(t, &[SliceArg::full()])),
        ("concat", g1.concat(&[x, t], 0)),
        ("take", g1.take(x, t, 0)),
        ("take", g1.take(t, i, 0)),
        (
            "pad",
            g1.pad(t, &[(1, 1)], wgflow::graph::PadMode::Constant(0.0)),
        ),
        ("softmax", g1.softmax(t, 0)),
        ("max_pool2d", g1.max_pool2d(t, [1, 1], [1, 1], [0, 0])),
        ("layer_norm", g1.layer_norm(t, None, None, 0, 1e-5)),
    ];
    for (op, r) in results {
        let e = r.unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Build { .. }), "{op}: {e:?}");
        assert!(
            msg.starts_with(&format!("{op} at tests/graph/errors.rs"))
                && msg.contains("another graph"),
            "{op}: {msg}"
        );
    }
    assert_eq!(g1.len(), before, "a rejected builder adds no node");
}

#[test]
fn every_op_output_must_fit_u32_indexing() {
    let mut g = Graph::new();
    let a = g.placeholder("a", [1usize << 17, 1], DType::F32).unwrap();
    let b = g.placeholder("b", [1, 1usize << 16], DType::F32).unwrap();
    let msg = g.add(a, b).unwrap_err().to_string(); // MARK-big
    assert!(
        msg.starts_with(&format!(
            "add at tests/graph/errors.rs:{}",
            line_of("MARK-big")
        )) && msg.contains("[131072, 65536]")
            && msg.contains("2^32 - 1"),
        "{msg}"
    );
    let msg = g.tile(a, &[1, 1 << 16]).unwrap_err().to_string();
    assert!(msg.contains("2^32 - 1"), "{msg}");
}

/// A builder's refusal says its kind with the facts it saw, so callers (the Python binding's
/// TypeError/ValueError) match the variant, not the text.
#[test]
fn build_errors_carry_their_kind_and_facts() {
    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0, 3.0]).unwrap();
    let b = g.constant([1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let i = g.constant([1i32, 2, 3]).unwrap();
    let e = g.add(a, b).unwrap_err();
    assert_eq!(
        e.build_kind_of(),
        Some(&BuildKind::Shape {
            inputs: vec![Shape::from(vec![3]), Shape::from(vec![4])]
        })
    );
    let e = g.add(a, i).unwrap_err();
    assert_eq!(
        e.build_kind_of(),
        Some(&BuildKind::DType {
            inputs: vec![DType::F32, DType::I32]
        })
    );
    // An unsupported dtype of one input, an index of the wrong dtype, a shape rule.
    let e = g.sin(i).unwrap_err();
    assert!(
        matches!(e.build_kind_of(), Some(BuildKind::DType { inputs }) if inputs == &[DType::I32])
    );
    let e = g.take(a, a, 0).unwrap_err();
    assert!(
        matches!(e.build_kind_of(), Some(BuildKind::DType { .. })),
        "{e}"
    );
    let m = g
        .constant(HostTensor::new([2, 2], vec![1.0f32; 4]).unwrap())
        .unwrap();
    let e = g.matmul(a, m).unwrap_err();
    assert!(
        matches!(e.build_kind_of(), Some(BuildKind::Shape { inputs }) if inputs.len() == 2),
        "{e}"
    );
    let e = g.concat(&[a, i], 0).unwrap_err();
    assert!(
        matches!(e.build_kind_of(), Some(BuildKind::DType { .. })),
        "{e}"
    );
    let e = g.matmul(a, i).unwrap_err();
    assert!(
        matches!(e.build_kind_of(), Some(BuildKind::DType { .. })),
        "{e}"
    );
    // A name taken is neither.
    g.placeholder("x", [2], DType::F32).unwrap();
    let e = g.placeholder("x", [2], DType::F32).unwrap_err();
    assert_eq!(e.build_kind_of(), Some(&BuildKind::Other));
}

/// The builders' own checks (before a family's rule) carry their kind and facts too: a
/// shape that does not fit names the shapes it saw, an argument out of range is a value,
/// an empty list of tensors is an argument count.
#[test]
fn builder_checks_carry_their_kind() {
    let mut g = Graph::new();
    let x = g
        .constant(HostTensor::new([2, 3], vec![1.0f32; 6]).unwrap())
        .unwrap();
    let v = g.constant([1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let shapes = |e: &wgflow::Error| match e.build_kind_of() {
        Some(BuildKind::Shape { inputs }) => inputs.clone(),
        other => panic!("expected a shape refusal, got {other:?}: {e}"),
    };
    let two_by_three = Shape::new(vec![2, 3]);
    let cases: Vec<(wgflow::Error, Vec<Shape>)> = vec![
        (
            g.reshape(x, &[4, 2]).unwrap_err(),
            vec![two_by_three.clone()],
        ),
        (
            g.transpose(x, &[0, 0]).unwrap_err(),
            vec![two_by_three.clone()],
        ),
        (
            g.squeeze(x, Some(&[0])).unwrap_err(),
            vec![two_by_three.clone()],
        ),
        (
            g.broadcast_to(x, &[4, 3]).unwrap_err(),
            vec![two_by_three.clone()],
        ),
        (g.split(x, 2, 1).unwrap_err(), vec![two_by_three.clone()]),
        (g.softmax(x, 5).unwrap_err(), vec![two_by_three.clone()]),
        (g.cumsum(x, -3).unwrap_err(), vec![two_by_three.clone()]),
        (
            g.sum(x, [2isize], false).unwrap_err(),
            vec![two_by_three.clone()],
        ),
        (
            g.stack(&[x, v], 0).unwrap_err(),
            vec![two_by_three.clone(), Shape::new(vec![4])],
        ),
    ];
    for (e, want) in cases {
        assert_eq!(shapes(&e), want, "{e}");
    }
    for e in [
        g.dropout(x, 1.5, 0).unwrap_err(),
        g.random_uniform([2], 3.0, 1.0, 0).unwrap_err(),
        g.random_normal([2], 0.0, -1.0, 0).unwrap_err(),
        g.full([2], DType::I32, 1e20).unwrap_err(),
        g.tile(x, &[usize::MAX, 2]).unwrap_err(),
    ] {
        assert_eq!(e.build_kind_of(), Some(&BuildKind::Value), "{e}");
    }
    let e = g.concat(&[], 0).unwrap_err();
    assert_eq!(
        e.build_kind_of(),
        Some(&BuildKind::Arity {
            expected: "1 or more".into(),
            got: 0
        }),
        "{e}"
    );
    let i = g.constant([1i32, 0]).unwrap();
    let e = g.one_hot(v, 3).unwrap_err();
    assert!(
        matches!(e.build_kind_of(), Some(BuildKind::DType { .. })),
        "{e}"
    );
    let e = g.one_hot(i, 0).unwrap_err();
    assert_eq!(e.build_kind_of(), Some(&BuildKind::Value), "{e}");
}

/// A feed's refusal says its kind in the variant (`FeedKind`), which the bindings map to
/// exception types; the text names the placeholder.
#[test]
fn feed_errors_carry_their_kind() {
    use wgflow::{Dim, FeedKind};
    let mut g = Graph::new();
    let x = g.placeholder("x", [2], DType::F32).unwrap();
    let b = g
        .placeholder_dyn("b", [Dim::named("n")], DType::F32)
        .unwrap();
    let c = g
        .placeholder_dyn("c", [Dim::named("n")], DType::F32)
        .unwrap();
    let k = g.constant([1.0f32, 2.0]).unwrap();
    let v = g.variable("v", [2.0f32, 3.0]).unwrap();
    let y = g.add(x, k).unwrap();
    let bc = g.add(b, c).unwrap();
    let mut s = crate::common::session_on(&g, wgflow::Device::Cpu);
    let two = HostTensor::from([1.0f32, 2.0]);
    let kind = |r: wgflow::Result<Vec<HostTensor>>| match r {
        Err(Error::Feed { kind, name, .. }) => (kind, name),
        Err(e) => panic!("not a feed error: {e}"),
        Ok(_) => panic!("ran"),
    };
    let ints = HostTensor::from([1i32, 2]);
    assert_eq!(
        kind(s.run(&[(x, ints)], &[y])),
        (FeedKind::DType, "x".into())
    );
    let three = HostTensor::from([1.0f32, 2.0, 3.0]);
    assert_eq!(
        kind(s.run(&[(x, three.clone())], &[y])),
        (FeedKind::Shape, "x".into())
    );
    assert_eq!(kind(s.run(&[], &[y])), (FeedKind::Missing, "x".into()));
    assert_eq!(kind(s.run(&[(k, two.clone())], &[y])).0, FeedKind::Name);
    let twice = [(x, two.clone()), (x, two.clone())];
    assert_eq!(kind(s.run(&twice, &[y])).0, FeedKind::Value);
    assert_eq!(
        kind(s.run_named(&[("nowhere", two.clone())], &["add"])).0,
        FeedKind::Name
    );
    // Two feeds that disagree on a run-time dimension; one that leaves it unsized.
    assert_eq!(
        kind(s.run(&[(b, two.clone()), (c, three)], &[bc])).0,
        FeedKind::Shape
    );
    assert_eq!(kind(s.run(&[], &[bc])).0, FeedKind::Missing);
    let e = s
        .write_variable(v, &HostTensor::from([1i32, 2]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Feed {
                kind: FeedKind::DType,
                ..
            }
        ),
        "{e}"
    );
    let e = s
        .write_variable(v, &HostTensor::from([1.0f32]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Feed {
                kind: FeedKind::Shape,
                ..
            }
        ),
        "{e}"
    );
}
