//! Typed elementwise functions: values on cpu:0 against hand-computed results, every GPU
//! against cpu:0, fusion (dispatch counts), and the promised errors.

use crate::common;

use wgflow::ops::custom::{select, ElementwiseFn, Signature};
use wgflow::{DType, Device, Error, Graph, HostTensor, Tensor};

fn fma1() -> ElementwiseFn {
    ElementwiseFn::new("fma1", |[a, b]| a * b + 1.0)
        .signature("f32(f32, f32)")
        .unwrap()
        .signature("i32(i32, i32)")
        .unwrap()
}

/// Every GPU equals cpu:0 exactly (these kernels are exact or use the same f32 ops).
fn agree(g: &Graph, outs: &[Tensor], tol: f32) -> Vec<HostTensor> {
    let want = common::session_on(g, Device::Cpu).run(&[], outs).unwrap();
    for gpu in common::gpus() {
        let got = common::session_on(g, gpu).run(&[], outs).unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            common::assert_close(&format!("{gpu} output {i}"), a, b, tol, tol);
        }
    }
    want
}

#[test]
fn f32_and_i32_signatures_give_hand_computed_values() {
    let k = fma1();
    let mut g = Graph::new();
    let a = g.constant([1.5f32, -2.0, 3.0]).unwrap();
    let b = g.constant([2.0f32, 4.0, -0.5]).unwrap();
    let ai = g.constant([1i32, -2, 300]).unwrap();
    let bi = g.constant([[7i32, 8, 9], [0, 1, -1]]).unwrap(); // broadcasts against ai
    let yf = g.apply(&k, &[a, b]).unwrap();
    let yi = g.apply(&k, &[ai, bi]).unwrap();
    assert_eq!(g.dtype(yf).unwrap(), DType::F32);
    assert_eq!(g.dtype(yi).unwrap(), DType::I32);
    assert_eq!(g.shape(yi).unwrap().dims(), &[2, 3]);
    assert_eq!(g.name(yf).unwrap(), "fma1");
    let out = agree(&g, &[yf, yi], 0.0);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![4.0, -7.0, -0.5]);
    assert_eq!(
        out[1].to_vec::<i32>().unwrap(),
        vec![8, -15, 2701, 1, -1, -299]
    );
}

#[test]
fn select_comparisons_and_math() {
    // A leaky ELU-ish function; the comparison, select, exp and weak literals all typed f32.
    let k = ElementwiseFn::new("leaky_exp", |[x]| {
        select(x.greater(0.0), x.exp() - 1.0, x * 0.25)
    })
    .signature("float32(float32)")
    .unwrap();
    // Result cast to the declared return dtype (Numba's rule): bool → f32.
    let cmp = ElementwiseFn::new("lt", |[a, b]| a.less(b))
        .signature("f32(f32, f32)")
        .unwrap()
        .signature("bool(i32, i32)")
        .unwrap();
    let mut g = Graph::new();
    let x = g.constant([-2.0f32, 0.0, 1.0, 2.0]).unwrap();
    let y = g.apply(&k, &[x]).unwrap();
    let z = g.constant([0.0f32, 0.0, 5.0, 1.0]).unwrap();
    let c = g.apply(&cmp, &[x, z]).unwrap();
    let i = g.constant([1i32, 5]).unwrap();
    let j = g.constant([2i32, 5]).unwrap();
    let ci = g.apply(&cmp, &[i, j]).unwrap();
    assert_eq!(g.dtype(ci).unwrap(), DType::Bool);
    let out = agree(&g, &[y, c, ci], 1e-6);
    let want: Vec<f32> = vec![-0.5, 0.0, 1f32.exp() - 1.0, 2f32.exp() - 1.0];
    common::assert_close(
        "leaky_exp",
        &out[0],
        &HostTensor::from(want.clone()),
        1e-6,
        0.0,
    );
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![1.0, 0.0, 1.0, 0.0]);
    assert_eq!(out[2].to_vec::<bool>().unwrap(), vec![true, false]);
}

#[test]
fn unsigned_signature_types_integer_literals() {
    let k = ElementwiseFn::new("shift", |[a]| (a + 3) * 2)
        .signature("u32(u32)")
        .unwrap();
    let mut g = Graph::new();
    let x = g.constant([0u32, 1, 4_000_000_000]).unwrap();
    let y = g.apply(&k, &[x]).unwrap();
    let out = agree(&g, &[y], 0.0);
    let w = |v: u32| v.wrapping_add(3).wrapping_mul(2);
    assert_eq!(
        out[0].to_vec::<u32>().unwrap(),
        vec![w(0), w(1), w(4_000_000_000)]
    );
}

#[test]
fn applied_kernel_fuses_with_its_neighbours() {
    let k = fma1();
    let mut g = Graph::new();
    let a = g.placeholder("a", [4], DType::F32).unwrap();
    let b = g.constant([1.0f32, -1.0, 2.0, -2.0]).unwrap();
    let s = g.sub(a, b).unwrap();
    let y = g.apply(&k, &[s, b]).unwrap();
    let r = g.relu(y).unwrap();
    let feed = HostTensor::from([0.0f32, 1.0, 2.0, 3.0]);
    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    for d in devices {
        let mut sess = common::session_on(&g, d);
        assert_eq!(sess.plan(&[r]).unwrap().dispatch_count(), 1, "on {d}");
        let out = sess.run(&[(a, feed.clone())], &[r]).unwrap();
        // (a - b) * b + 1, then relu
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            vec![0.0, 0.0, 1.0, 0.0],
            "on {d}"
        );
    }
    // Without fusion the same graph needs three kernels: the count above is fusion's doing.
    let mut unfused = wgflow::Session::new(
        &g,
        wgflow::SessionOptions {
            default_device: Some(Device::Cpu),
            fuse: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(unfused.plan(&[r]).unwrap().dispatch_count(), 3);
}

fn build_msg(e: Error) -> String {
    match &e {
        Error::Build { .. } => e.to_string(),
        other => panic!("expected a build error, got {other:?}"),
    }
}

#[test]
fn no_matching_signature_lists_signatures_and_dtypes() {
    let k = fma1();
    let mut g = Graph::new();
    let a = g.constant([1u32, 2]).unwrap();
    let m = build_msg(g.apply(&k, &[a, a]).unwrap_err());
    assert!(m.contains("kernel 'fma1'"), "{m}");
    assert!(m.contains("custom_kernels.rs"), "names the caller: {m}");
    assert!(m.contains("(u32, u32)"), "{m}");
    assert!(m.contains("f32(f32, f32), i32(i32, i32)"), "{m}");
    let f = g.constant([1.0f32]).unwrap();
    let i = g.constant([1i32]).unwrap();
    let m = build_msg(g.apply(&k, &[f, i]).unwrap_err());
    assert!(m.contains("(f32, i32)"), "{m}");
}

#[test]
fn wrong_arity_is_an_error() {
    let k = fma1();
    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0]).unwrap();
    let m = build_msg(g.apply(&k, &[a]).unwrap_err());
    assert!(m.contains("takes 2 input(s), got 1"), "{m}");
    let m = build_msg(g.apply(&k, &[a, a, a]).unwrap_err());
    assert!(m.contains("got 3"), "{m}");
}

#[test]
fn bad_signatures_are_errors() {
    let k = || ElementwiseFn::new("k", |[a, b]| a + b);
    for (sig, want) in [
        ("f32(f32 f32)", "unknown dtype 'f32 f32'"),
        ("f32 f32, f32", "no '('"),
        ("f32(f32, f32", "must end with ')'"),
        ("f64(f32, f32)", "unknown dtype 'f64'"),
        ("f32(f32)", "has 1 argument(s) but the function takes 2"),
        ("f32(f32, f32, f32)", "has 3 argument(s)"),
    ] {
        let m = build_msg(k().signature(sig).unwrap_err());
        assert!(m.contains(want), "{sig}: {m}");
    }
    let m = build_msg(
        k().signature("f32(f32, f32)")
            .unwrap()
            .signature("float32(float32,float32)")
            .unwrap_err(),
    );
    assert!(m.contains("given twice"), "{m}");
    assert_eq!(
        Signature::parse(" i32( i32 ,i32 ) ").unwrap().to_string(),
        "i32(i32, i32)"
    );
}

#[test]
fn literals_that_lose_value_and_mixed_dtypes_are_errors() {
    let half = ElementwiseFn::new("half", |[a]| a * 0.5)
        .signature("i32(i32)")
        .unwrap();
    let mixed = ElementwiseFn::new("mixed", |[a, b]| a + b)
        .signature("f32(f32, i32)")
        .unwrap();
    let cast = ElementwiseFn::new("cast", |[a, b]| a + b.cast(DType::F32))
        .signature("f32(f32, i32)")
        .unwrap();
    let mut g = Graph::new();
    let i = g.constant([3i32, 4]).unwrap();
    let f = g.constant([0.5f32, 1.0]).unwrap();
    let m = build_msg(g.apply(&half, &[i]).unwrap_err());
    assert!(m.contains("literal 0.5 cannot be i32"), "{m}");
    let m = build_msg(g.apply(&mixed, &[f, i]).unwrap_err());
    assert!(m.contains("add of f32 and i32"), "{m}");
    let y = g.apply(&cast, &[f, i]).unwrap();
    let out = agree(&g, &[y], 0.0);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.5, 5.0]);
}

#[test]
fn saved_custom_kernels_load_with_identical_results() {
    let k = fma1();
    let mut g = Graph::new();
    let a = g.placeholder("a", [3], DType::F32).unwrap();
    let b = g.constant([2.0f32, 0.1, -3.0]).unwrap();
    let y = g.apply(&k, &[a, b]).unwrap();
    let z = g.sigmoid(y).unwrap();
    let text = g.to_json().unwrap();
    assert!(text.contains("\"op\": \"custom\""), "{text}");
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    let feed = HostTensor::from([1.0f32, 2.0, 3.0]);
    let za = h.tensor(g.name(z).unwrap()).unwrap();
    let ha = h.tensor("a").unwrap();
    let want = common::session_on(&g, Device::Cpu)
        .run(&[(a, feed.clone())], &[z])
        .unwrap();
    let got = common::session_on(&h, Device::Cpu)
        .run(&[(ha, feed)], &[za])
        .unwrap();
    assert_eq!(got[0].words(), want[0].words());
    // A tampered expression is rejected with its place in the file.
    let bad = text.replace("[\"in\", 1]", "[\"in\", 7]");
    let e = Graph::from_json(&bad).unwrap_err().to_string();
    assert!(e.contains("'fma1'") && e.contains("input 7"), "{e}");
    let bad = text.replace("\"binary\", \"mul\"", "\"binary\", \"frobnicate\"");
    let e = Graph::from_json(&bad).unwrap_err().to_string();
    assert!(
        e.contains(".expr") && e.contains("unknown binary op"),
        "{e}"
    );
}

#[test]
fn hostile_user_kernel_nodes_in_files_are_errors_naming_the_place() {
    let file = |node: &str| {
        format!(
            r#"{{"format": "wgflow.graph", "version": 1, "nodes": [
  {{"name": "x", "op": "placeholder", "shape": [2], "dtype": "f32"}},
  {node}
]}}"#
        )
    };
    let deep = format!(
        "{}[\"in\", 0]{}",
        "[\"unary\", \"neg\", ".repeat(300),
        "]".repeat(300)
    );
    let cases = [
        (
            r#"{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "k", "expr": ["lit", "f32", 4294967296]}"#.to_string(),
            "nodes[1] 'k'.expr",
        ),
        (
            r#"{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "k", "expr": ["binary", "add", ["in", 0]]}"#.to_string(),
            "nodes[1] 'k'.expr",
        ),
        (
            r#"{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "i32", "kernel": "k", "expr": ["in", 0]}"#.to_string(),
            "nodes[1] 'k'.dtype",
        ),
        (
            r#"{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "bool", "kernel": "k", "expr": ["lit", "bool", 5]}"#.to_string(),
            "word is 0 or 1",
        ),
        (
            r#"{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "k"}"#.to_string(),
            "nodes[1] 'k'.expr: missing",
        ),
        (
            r#"{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "k", "expr": ["in", 0], "source": ""}"#.to_string(),
            "source",
        ),
        (
            r#"{"name": "r", "op": "raw_wgsl", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "r", "entry_point": "main", "source": "fn main() {"}"#.to_string(),
            "nodes[1] 'r'",
        ),
        (
            r#"{"name": "r", "op": "raw_wgsl", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "r", "entry_point": "main", "invocations": -1, "source": ""}"#.to_string(),
            "nodes[1] 'r'.invocations",
        ),
        (
            format!(r#"{{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "k", "expr": {deep}}}"#),
            "graph file at",
        ),
    ];
    for (node, want) in cases {
        let e = Graph::from_json(&file(&node)).unwrap_err();
        let m = e.to_string();
        assert!(
            matches!(e, Error::GraphDef { .. }) && m.contains(want),
            "want '{want}' in: {m}"
        );
    }
}
