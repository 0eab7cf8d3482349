//! The attention family's importer errors: attributes and inputs it cannot run are a clear
//! [`wgflow::Error::Onnx`] naming the node, never a panic (the numerics are the conformance
//! suite's `test_attention_*`, `test_rotary_embedding_*`, `test_swiglu*` and
//! `test_linear_attention_*` cases).

use super::protos::{attr_int, attr_str, value};
use wgflow::onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
use wgflow::onnx::{import_bytes, ImportOptions, Message};
use wgflow::Error;

/// One `op` node at `opset` over float inputs `(name, dims)`, with outputs `outs`.
fn model(
    op: &str,
    opset: i64,
    inputs: &[(&str, &[i64])],
    node_inputs: &[&str],
    outs: &[&str],
    attrs: Vec<AttributeProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                op_type: Some(op.into()),
                name: Some(format!("{op}_node")),
                input: node_inputs.iter().map(|s| s.to_string()).collect(),
                output: outs.iter().map(|s| s.to_string()).collect(),
                attribute: attrs,
                ..Default::default()
            }],
            input: inputs.iter().map(|(n, d)| value(n, d)).collect(),
            output: outs.iter().map(|n| value(n, &[])).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn onnx_error(m: &ModelProto) -> String {
    match import_bytes(&m.encode_to_vec(), None, &ImportOptions::default()) {
        Ok(_) => panic!("the model imported"),
        Err(e @ Error::Onnx { .. }) => e.to_string(),
        Err(e) => panic!("not an Error::Onnx: {e}"),
    }
}

const QKV3: [(&str, &[i64]); 3] = [("q", &[1, 2, 8]), ("k", &[1, 3, 8]), ("v", &[1, 3, 8])];

#[test]
fn attention_3d_needs_head_counts() {
    let e = onnx_error(&model(
        "Attention",
        23,
        &QKV3,
        &["q", "k", "v"],
        &["y"],
        vec![],
    ));
    assert!(
        e.contains("Attention_node") && e.contains("q_num_heads"),
        "{e}"
    );
    let attrs = vec![attr_int("q_num_heads", 3), attr_int("kv_num_heads", 3)];
    let e = onnx_error(&model(
        "Attention",
        23,
        &QKV3,
        &["q", "k", "v"],
        &["y"],
        attrs,
    ));
    assert!(e.contains("not a multiple"), "{e}");
}

#[test]
fn attention_bad_attributes_and_inputs() {
    let qkv: [(&str, &[i64]); 4] = [
        ("q", &[1, 2, 2, 4]),
        ("k", &[1, 2, 3, 4]),
        ("v", &[1, 2, 3, 4]),
        ("pk", &[1, 2, 1, 4]),
    ];
    let attrs = vec![attr_int("qk_matmul_output_mode", 7)];
    let e = onnx_error(&model(
        "Attention",
        23,
        &qkv,
        &["q", "k", "v"],
        &["y"],
        attrs,
    ));
    assert!(e.contains("qk_matmul_output_mode 7"), "{e}");
    let e = onnx_error(&model(
        "Attention",
        23,
        &qkv,
        &["q", "k", "v", "", "pk"],
        &["y"],
        vec![],
    ));
    assert!(e.contains("past_key and past_value"), "{e}");
    let gqa: [(&str, &[i64]); 3] = [
        ("q", &[1, 3, 2, 4]),
        ("k", &[1, 2, 3, 4]),
        ("v", &[1, 2, 3, 4]),
    ];
    let e = onnx_error(&model(
        "Attention",
        23,
        &gqa,
        &["q", "k", "v"],
        &["y"],
        vec![],
    ));
    assert!(e.contains("3 query heads"), "{e}");
}

#[test]
fn linear_attention_rules() {
    let heads = || vec![attr_int("q_num_heads", 2), attr_int("kv_num_heads", 2)];
    let mut attrs = heads();
    attrs.push(attr_str("update_rule", "quadratic"));
    let e = onnx_error(&model(
        "LinearAttention",
        27,
        &QKV3,
        &["q", "k", "v"],
        &["y"],
        attrs,
    ));
    assert!(e.contains("update_rule 'quadratic'"), "{e}");
    // The default rule, gated_delta, needs decay and beta.
    let qkv: [(&str, &[i64]); 3] = [("q", &[1, 3, 8]), ("k", &[1, 3, 8]), ("v", &[1, 3, 8])];
    let e = onnx_error(&model(
        "LinearAttention",
        27,
        &qkv,
        &["q", "k", "v"],
        &["y"],
        heads(),
    ));
    assert!(e.contains("requires the decay input"), "{e}");
    let mut attrs = heads();
    attrs.push(attr_str("update_rule", "linear"));
    let m = model(
        "LinearAttention",
        27,
        &qkv,
        &["q", "k", "v"],
        &["y", "s"],
        attrs,
    );
    let imported =
        import_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).expect("linear");
    assert_eq!(imported.outputs[0].shape.dims(), &[1, 3, 8]);
    assert_eq!(imported.outputs[1].shape.dims(), &[1, 2, 4, 4]);
}

#[test]
fn swiglu_and_rotary_shapes() {
    let ab: [(&str, &[i64]); 2] = [("a", &[2, 4]), ("b", &[2, 3])];
    let e = onnx_error(&model("SwiGLU", 28, &ab, &["a", "b"], &["y"], vec![]));
    assert!(e.contains("same shape"), "{e}");
    let x: [(&str, &[i64]); 3] = [("x", &[1, 2, 3, 8]), ("c", &[1, 3, 3]), ("s", &[1, 3, 3])];
    let e = onnx_error(&model(
        "RotaryEmbedding",
        23,
        &x,
        &["x", "c", "s"],
        &["y"],
        vec![],
    ));
    assert!(e.contains("cos/sin cache"), "{e}");
}
