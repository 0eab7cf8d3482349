//! Small ONNX protobuf builders shared by the hand-written models of these tests.
#![allow(dead_code)]

use wgflow::onnx::proto::{
    attribute_proto::AttributeType,
    tensor_proto::DataType,
    tensor_shape_proto::{dimension::Value as Dim, Dimension},
    type_proto, AttributeProto, GraphProto, NodeProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
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
