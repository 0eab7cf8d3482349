//! Small ONNX protobuf builders shared by the hand-written models of these tests.
#![allow(dead_code)]

use wgflow::onnx::proto::{
    attribute_proto::AttributeType,
    tensor_proto::DataType,
    tensor_shape_proto::{dimension::Value as Dim, Dimension},
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// A float32 input or output of static `dims`.
pub fn value(name: &str, dims: &[i64]) -> ValueInfoProto {
    typed_value(name, dims, DataType::Float)
}

/// An input or output of element type `elem` and static `dims`.
pub fn typed_value(name: &str, dims: &[i64], elem: DataType) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(Dim::DimValue(d)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A float32 initializer.
pub fn float_init(name: &str, dims: &[i64], data: Vec<f32>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        float_data: data,
        ..Default::default()
    }
}

fn attr(name: &str, kind: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

pub fn attr_int(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        i: Some(i),
        ..attr(name, AttributeType::Int)
    }
}

pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        ..attr(name, AttributeType::Ints)
    }
}

pub fn attr_str(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        s: Some(s.as_bytes().to_vec()),
        ..attr(name, AttributeType::String)
    }
}

pub fn attr_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        g: Some(g),
        ..attr(name, AttributeType::Graph)
    }
}

/// An `op` node (named after its first output) with attributes.
pub fn node(
    op: &str,
    inputs: &[&str],
    outputs: &[&str],
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: outputs.first().map(|o| format!("{op}_{o}")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute,
        ..Default::default()
    }
}

/// A float attribute.
pub fn attr_float(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        f: Some(f),
        ..attr(name, AttributeType::Float)
    }
}

// Hostile models and builders shared by the library's and the CLI's tests of issue 44.

/// A model at `opset` of `nodes` over inputs `ins`, initializers `inits`, outputs `outs`
/// (float32, of unknown shape).
pub fn model_at(
    opset: i64,
    ins: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
    nodes: Vec<NodeProto>,
    outs: &[&str],
) -> ModelProto {
    let outs = outs.iter().map(|o| value(o, &[])).collect();
    typed_model_at(opset, ins, inits, nodes, outs)
}

/// [`model_at`] with its outputs' types and shapes given.
pub fn typed_model_at(
    opset: i64,
    ins: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
    nodes: Vec<NodeProto>,
    outs: Vec<ValueInfoProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: inits,
            input: ins,
            output: outs,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An int64 initializer.
pub fn ints(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Int64 as i32),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

/// A float initializer.
pub fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        float_data: v.to_vec(),
        ..Default::default()
    }
}

/// A float tensor of `dims` whose data is `location` (at `offset`) in the model's folder.
pub fn external(name: &str, dims: &[i64], location: &str, offset: Option<u64>) -> TensorProto {
    use wgflow::onnx::proto::{tensor_proto::DataLocation, StringStringEntryProto};
    let kv = |k: &str, v: String| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v),
    };
    let mut external_data = vec![kv("location", location.into())];
    if let Some(o) = offset {
        external_data.push(kv("offset", o.to_string()));
    }
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        data_location: Some(DataLocation::External as i32),
        external_data,
        ..Default::default()
    }
}

/// A `Scan` over an input declared `[0, 2^40]` (no elements, so within the element cap)
/// along its second axis: 2^40 steps to unroll.
pub fn scan_of_2_pow_40_steps() -> ModelProto {
    let body = GraphProto {
        name: Some("body".into()),
        node: vec![node("Identity", &["s"], &["s_out"], vec![])],
        input: vec![value("s", &[0])],
        output: vec![value("s_out", &[0])],
        ..Default::default()
    };
    model_at(
        13,
        vec![value("x", &[0, 1 << 40])],
        vec![],
        vec![node(
            "Scan",
            &["x"],
            &["y"],
            vec![
                attr_graph("body", body),
                attr_int("num_scan_inputs", 1),
                attr_ints("scan_input_axes", &[1]),
            ],
        )],
        &["y"],
    )
}

/// `x` negated `n` times, one `Neg` node each, into `y`.
pub fn neg_chain(n: usize) -> ModelProto {
    let nodes: Vec<NodeProto> = (0..n)
        .map(|i| {
            let x = if i == 0 {
                "x".to_string()
            } else {
                format!("t{}", i - 1)
            };
            let y = if i == n - 1 {
                "y".to_string()
            } else {
                format!("t{i}")
            };
            NodeProto {
                op_type: Some("Neg".into()),
                input: vec![x],
                output: vec![y],
                ..Default::default()
            }
        })
        .collect();
    model_at(13, vec![value("x", &[2])], vec![], nodes, &["y"])
}
