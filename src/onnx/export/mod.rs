//! Export a wgflow [`Graph`] as an ONNX model (the reverse of [`import`](super::import)).
//!
//! **What is written.** The nodes the `fetches` need, in build order (a topological order),
//! at the one `ai.onnx` opset [`OPSET`] (17, IR version 8). Placeholders become graph inputs
//! (named after the nodes, with their dtypes and static shapes), constants become
//! initializers, variables become initializers named as the variables with the values a
//! [`Session`] holds ([`export_with_session`]; [`export`] refuses a graph with variables),
//! and each fetch becomes a graph output named after its node. Names are made unique and
//! keep only `[A-Za-z0-9_./:-]` (anything else becomes `_`).
//!
//! **Ops.** Elementwise primitives, casts and `where`; matmul; reductions (sum, mean, max,
//! min, prod, all, any, argmax/argmin of one axis); reshape, transpose, slices/flips
//! (`Slice`, or a `Gather` of the flattened input for any other strided read), broadcasts
//! (`Expand`), concat, constant pad, take (`Gather`); conv2d, max/avg pooling; cumsum;
//! gather_elements. Composites (softmax, layer norm, linear, …) are written as the
//! primitives they are built from. Random, custom WGSL, cumprod, scatters, top-k, the
//! backward primitives of conv/pool and state ops are an error naming the node.
//!
//! **dtypes.** f32 → FLOAT, i32 → INT32, u32 → UINT32, bool → BOOL, f16 → FLOAT16; shapes,
//! axes and the indices ONNX wants as int64 are written as INT64 constants.

mod elementwise;
mod movement;
mod nn;
mod reduce;

use super::fail;
use super::proto::{
    tensor_proto::DataType, tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use super::Message;
use crate::graph::NodeId;
use crate::id::IdVec;
use crate::ops::{Leaf, Op};
use crate::{DType, Graph, HostTensor, Result, Session, Tensor};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The `ai.onnx` opset every exported model declares.
pub const OPSET: i64 = 17;
/// The ONNX IR version written (the one that goes with opset 17).
pub const IR_VERSION: i64 = 8;

/// Export the nodes `fetches` need as an ONNX model at `path` (replaced atomically).
/// A graph with variables needs [`export_with_session`].
pub fn export(graph: &Graph, fetches: &[Tensor], path: &Path) -> Result<()> {
    let bytes = export_bytes(graph, fetches)?;
    write(path, &bytes)
}

/// [`export`]'s model as bytes (a serialized `ModelProto`).
pub fn export_bytes(graph: &Graph, fetches: &[Tensor]) -> Result<Vec<u8>> {
    Ok(model(graph, fetches, None)?.encode_to_vec())
}

/// Export with each variable frozen to the value `session` holds (read with
/// [`Session::read_variable`]); the variables become initializers named as the variables.
pub fn export_with_session(
    session: &mut Session,
    graph: &Graph,
    fetches: &[Tensor],
    path: &Path,
) -> Result<()> {
    let bytes = export_bytes_with_session(session, graph, fetches)?;
    write(path, &bytes)
}

/// [`export_with_session`]'s model as bytes.
pub fn export_bytes_with_session(
    session: &mut Session,
    graph: &Graph,
    fetches: &[Tensor],
) -> Result<Vec<u8>> {
    Ok(model(graph, fetches, Some(session))?.encode_to_vec())
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::files::write_atomic(path, bytes)
        .map_err(|e| fail(format!("file {}", path.display()), e.to_string()))
}

/// The exported model.
pub fn model(
    graph: &Graph,
    fetches: &[Tensor],
    mut session: Option<&mut Session>,
) -> Result<ModelProto> {
    if fetches.is_empty() {
        return Err(fail("export", "nothing to export: no fetches"));
    }
    if graph.has_unknown_dims() {
        return Err(fail(
            "export",
            format!(
                "the graph has dimensions known only at run time ({}); export Graph::with_dims's static graph",
                graph.dim_names().join(", ")
            ),
        ));
    }
    let mut needed = IdVec::filled(false, graph.len());
    for &t in fetches {
        graph.node(t)?;
        needed[t.node()] = true;
    }
    for i in graph.g.ids().rev() {
        if needed[i] {
            for &inp in &graph.g[i].inputs {
                needed[inp] = true;
            }
        }
    }
    let mut ex = Ex::default();
    let tensors: Vec<Tensor> = graph.tensors().collect();
    for (i, node) in graph.g.iter_enumerated() {
        if !needed[i] {
            continue;
        }
        let at = || format!("node '{}' ({})", node.name, node.op.name());
        let inputs: Vec<String> = node.inputs.iter().map(|n| ex.values[n].clone()).collect();
        let out = match &node.op {
            Op::Leaf(Leaf::Constant(v)) => {
                let name = ex.fresh(&node.name);
                ex.initializer(&name, v)?;
                name
            }
            Op::Leaf(Leaf::Placeholder) => {
                let name = ex.fresh(&node.name);
                ex.inputs
                    .push(value_info(&name, node.dtype, node.shape.dims()));
                name
            }
            Op::Leaf(Leaf::Variable(_)) => {
                let Some(s) = session.as_deref_mut() else {
                    return Err(fail(
                        at(),
                        "a variable needs a session to freeze its value: use export_with_session",
                    ));
                };
                let v = s.read_variable(tensors[i.index()])?;
                let name = ex.fresh(&node.name);
                ex.initializer(&name, &v)?;
                name
            }
            op => {
                let cx = Cx {
                    graph,
                    node,
                    inputs: &inputs,
                };
                let r = match op {
                    Op::Elementwise(e) => elementwise::export(&mut ex, &cx, *e),
                    Op::MatMul(_) | Op::Nn(_) | Op::Rows(_) => nn::export(&mut ex, &cx),
                    Op::Movement(m) => movement::export(&mut ex, &cx, m),
                    Op::Reduce(_) | Op::Scan(_) | Op::Index(_) => reduce::export(&mut ex, &cx),
                    // Every family says how it exports or why it cannot: no catch-all arm.
                    Op::Leaf(_) => Err(unsupported(op.name(), "a leaf is exported above")),
                    Op::Random(_) => Err(unsupported(
                        op.name(),
                        "ONNX's RandomNormal/RandomUniform draw other values than wgflow's seeded streams",
                    )),
                    Op::Custom(_) => Err(unsupported(
                        op.name(),
                        "a user's kernel (a Rust closure or raw WGSL) has no ONNX op",
                    )),
                    Op::State(_) => Err(unsupported(
                        op.name(),
                        "an assignment changes a session's variables; an ONNX graph is pure",
                    )),
                    Op::Sizes(_) => Err(unsupported(
                        op.name(),
                        "sizes of run-time dimensions exist only before a session binds them; export the bound graph",
                    )),
                    Op::Segment(_) => Err(unsupported(
                        op.name(),
                        "segment sums are not exported yet (ScatterElements with reduction = add could express them)",
                    )),
                    Op::Attention(_) => Err(unsupported(
                        op.name(),
                        "fused attention needs opset 23's Attention; the exporter writes opset 17",
                    )),
                };
                r.map_err(|e| match e {
                    crate::Error::Onnx {
                        at: a,
                        message,
                        kind,
                    } if a.is_empty() => fail(at(), crate::onnx::Refused { message, kind }),
                    e => e,
                })?
            }
        };
        ex.values.insert(i, out);
    }
    let mut outputs = Vec::new();
    for &t in fetches {
        let node = graph.node(t)?;
        let name = ex.fresh(&node.name);
        let v = ex.values[&t.node()].clone();
        ex.nodes.push(NodeProto {
            input: vec![v],
            output: vec![name.clone()],
            name: Some(format!("{name}/output")),
            op_type: Some("Identity".into()),
            ..Default::default()
        });
        outputs.push(value_info(&name, node.dtype, node.shape.dims()));
    }
    Ok(ModelProto {
        ir_version: Some(IR_VERSION),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(OPSET),
        }],
        producer_name: Some("wgflow".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        graph: Some(GraphProto {
            node: ex.nodes,
            name: Some("wgflow".into()),
            initializer: ex.inits,
            input: ex.inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// An op with no ONNX mapping.
fn unsupported(op: &str, why: &str) -> crate::Error {
    fail(
        "",
        crate::onnx::unsupported(format!("op '{op}' has no ONNX export: {why}")),
    )
}

/// What a family's exporter sees of the node.
pub(super) struct Cx<'a> {
    pub graph: &'a Graph,
    pub node: &'a crate::graph::Node,
    /// The ONNX value names of the node's inputs.
    pub inputs: &'a [String],
}

impl Cx<'_> {
    /// Input `k`'s node.
    pub fn input(&self, k: usize) -> &crate::graph::Node {
        &self.graph.g[self.node.inputs[k]]
    }

    pub fn x(&self, k: usize) -> String {
        self.inputs[k].clone()
    }
}

/// The model being written.
#[derive(Default)]
pub(super) struct Ex {
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    /// Graph node → its ONNX value name.
    values: HashMap<NodeId, String>,
    used: HashSet<String>,
}

impl Ex {
    /// A unique, valid value name from `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut clean: String = base
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_./:-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if clean.is_empty() {
            clean = "v".into();
        }
        let mut name = clean.clone();
        let mut k = 1;
        while self.used.contains(&name) {
            name = format!("{clean}_{k}");
            k += 1;
        }
        self.used.insert(name.clone());
        name
    }

    /// Append a node `op_type(inputs)` with `attrs`; returns its output's name.
    pub fn op(&mut self, op_type: &str, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        let out = self.fresh(&format!("{}_{}", inputs.first().map_or("", |s| s), op_type));
        self.nodes.push(NodeProto {
            input: inputs,
            output: vec![out.clone()],
            name: Some(out.clone()),
            op_type: Some(op_type.into()),
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    /// An initializer holding `v`, named `name`.
    pub fn initializer(&mut self, name: &str, v: &HostTensor) -> Result<()> {
        let mut t = encode(v);
        t.name = Some(name.into());
        self.inits.push(t);
        Ok(())
    }

    /// A new INT64 initializer.
    pub fn i64s(&mut self, base: &str, vals: &[i64], dims: &[usize]) -> String {
        let name = self.fresh(base);
        self.inits.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: Some(DataType::Int64 as i32),
            raw_data: Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect()),
            name: Some(name.clone()),
            ..Default::default()
        });
        name
    }

    /// A new 1-D INT64 initializer.
    pub fn i64_vec(&mut self, base: &str, vals: &[i64]) -> String {
        self.i64s(base, vals, &[vals.len()])
    }

    /// A new scalar initializer of `dtype` (a float, cast to the dtype).
    pub fn scalar(&mut self, value: f64, dtype: DType) -> Result<String> {
        let v = match dtype {
            DType::F32 => HostTensor::scalar(value as f32),
            DType::F16 => HostTensor::scalar(half::f16::from_f64(value)),
            DType::I32 => HostTensor::scalar(value as i32),
            DType::U32 => HostTensor::scalar(value as u32),
            DType::Bool => HostTensor::scalar(value != 0.0),
        };
        let name = self.fresh("scalar");
        self.initializer(&name, &v)?;
        Ok(name)
    }
}

/// The ONNX element type of a dtype.
pub(super) fn onnx_dtype(d: DType) -> DataType {
    match d {
        DType::F32 => DataType::Float,
        DType::I32 => DataType::Int32,
        DType::U32 => DataType::Uint32,
        DType::Bool => DataType::Bool,
        DType::F16 => DataType::Float16,
    }
}

/// A `TensorProto` (raw little-endian data) of `v`.
fn encode(v: &HostTensor) -> TensorProto {
    let w = v.words();
    let raw: Vec<u8> = match v.dtype() {
        DType::F32 | DType::I32 | DType::U32 => w.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => w.iter().flat_map(|&x| (x as u16).to_le_bytes()).collect(),
        DType::Bool => w.iter().map(|&x| (x != 0) as u8).collect(),
    };
    TensorProto {
        dims: v.dims().iter().map(|&d| d as i64).collect(),
        data_type: Some(onnx_dtype(v.dtype()) as i32),
        raw_data: Some(raw),
        ..Default::default()
    }
}

fn value_info(name: &str, dtype: DType, dims: &[usize]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(tensor_shape_proto::dimension::Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(onnx_dtype(dtype) as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An integer attribute.
pub(super) fn attr_i(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(super::proto::attribute_proto::AttributeType::Int as i32),
        i: Some(i),
        ..Default::default()
    }
}

/// A float attribute.
pub(super) fn attr_f(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(super::proto::attribute_proto::AttributeType::Float as i32),
        f: Some(f),
        ..Default::default()
    }
}

/// A string attribute.
pub(super) fn attr_s(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(super::proto::attribute_proto::AttributeType::String as i32),
        s: Some(s.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// An integer-list attribute.
pub(super) fn attr_ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(super::proto::attribute_proto::AttributeType::Ints as i32),
        ints: ints.to_vec(),
        ..Default::default()
    }
}

/// A usize slice as i64s.
pub(super) fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}
