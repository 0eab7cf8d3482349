//! GraphDef: a graph as a versioned JSON file, saved with [`Graph::save`] and loaded with
//! [`Graph::load`].
//!
//! # Format (`"format": "wgflow.graph"`, `"version": 1`)
//!
//! ```json
//! {
//!   "format": "wgflow.graph",
//!   "version": 1,
//!   "nodes": [
//!     {"name": "a", "op": "constant", "shape": [3], "dtype": "f32", "data": [1.0, 2.0, 3.0]},
//!     {"name": "x", "op": "placeholder", "shape": [3], "dtype": "f32"},
//!     {"name": "add", "op": "add", "inputs": ["a", "x"], "shape": [3], "dtype": "f32", "device": "gpu:0"}
//!   ]
//! }
//! ```
//!
//! * `nodes` are listed in build order; a node's `inputs` name nodes listed **before** it (so a
//!   file cannot express a cycle), in the op's argument order. Names are unique and non-empty.
//! * Every node has `name`, `op`, `shape` (list of dimensions; `[]` is a scalar) and `dtype`
//!   (`f32`, `i32`, `u32`, `bool`). `inputs` may be omitted for leaves; `device` (a device spec
//!   such as `gpu:0`, `gpu` or `cpu:0`) is present only when the node was built in a device scope.
//! * `shape` and `dtype` are the node's output, and are **checked** on load: the graph is
//!   rebuilt through the same builder methods an API user calls, so every shape and dtype rule
//!   runs again, and a declared shape or dtype that disagrees with the rule is an error.
//! * Ops and their attributes:
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `constant` | 0 | `data` or `data_base64` (below) |
//! | `placeholder` | 0 | — (fed by its `name` at run time) |
//! | `neg` `abs` `exp` `log` `sqrt` `tanh` `sigmoid` `relu` | 1 | — |
//! | `add` `sub` `mul` `div` `maximum` `minimum` `pow` `equal` `less` `greater` | 2 | — |
//! | `where` | 3 (cond, a, b) | — |
//! | `cast` | 1 | — (the target is the node's `dtype`) |
//! | `sum` `mean` `max` `min` | 1 | `axes`: list of axes (non-negative); keepdims is implied by the node's rank |
//! | `matmul` | 2 | — |
//! | `reshape` | 1 | — (the target is the node's `shape`) |
//! | `transpose` | 1 | `perm`: output axis `i` is input axis `perm[i]` |
//!
//! Unknown fields are errors, so a typo does not silently change a graph.
//!
//! # Constants
//!
//! A constant of at most [`INLINE_MAX`] elements is stored inline as `data`, a flat row-major
//! JSON array: numbers for `f32`/`i32`/`u32` (floats written so that they read back
//! bit-exactly; non-finite floats as the strings `"nan"`, `"inf"`, `"-inf"`), `true`/`false`
//! for `bool`. A larger constant is stored as `data_base64`: standard base64 (RFC 4648, with
//! padding) of its elements as 4-byte little-endian words (`bool` as the words 0 or 1), in the
//! same file. Either form is accepted on load whatever the size; the element count must match
//! `shape` exactly.
//!
//! # Hostile input
//!
//! Loading never panics and never allocates more than a small multiple of the file size:
//! declared shapes are checked with overflow-checked arithmetic and capped at
//! [`MAX_ELEMENTS`] elements and [`MAX_RANK`] dimensions before anything is allocated for
//! them. Every error is an [`Error::GraphDef`] whose `at` names the place: `line L, column C`
//! for JSON syntax, else the node (`nodes[3] 'add'`) and field (`.inputs[1]`).

use super::Graph;
use crate::device::DeviceSpec;
use crate::ops::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::{DType, Error, HostTensor, Result, Shape};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::path::Path;

/// The `format` field of every graph file.
pub const FORMAT: &str = "wgflow.graph";
/// The version this build writes and reads.
pub const VERSION: u64 = 1;
/// Constants with more elements than this are written as `data_base64`.
pub const INLINE_MAX: usize = 1024;
/// The most elements a graph file may declare for one tensor (2^31).
pub const MAX_ELEMENTS: usize = 1 << 31;
/// The most dimensions a graph file may declare for one tensor.
pub const MAX_RANK: usize = 32;

/// A graph as plain data: what a graph file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphDef {
    pub nodes: Vec<NodeDef>,
}

/// One node of a [`GraphDef`].
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub name: String,
    /// The primitive; for `Reduce`, keepdims follows from `shape`'s rank.
    pub op: Op,
    /// Names of earlier nodes, in argument order.
    pub inputs: Vec<String>,
    pub shape: Shape,
    pub dtype: DType,
    pub device: Option<DeviceSpec>,
}

fn err(at: impl Into<String>, message: impl Into<String>) -> Error {
    Error::GraphDef {
        at: at.into(),
        message: message.into(),
    }
}

/// The file-format names of the unary ops. Kept apart from `UnaryOp::name` so that renaming an
/// op in messages cannot change the file format.
fn unary_name(u: UnaryOp) -> &'static str {
    match u {
        UnaryOp::Neg => "neg",
        UnaryOp::Abs => "abs",
        UnaryOp::Exp => "exp",
        UnaryOp::Log => "log",
        UnaryOp::Sqrt => "sqrt",
        UnaryOp::Tanh => "tanh",
        UnaryOp::Sigmoid => "sigmoid",
        UnaryOp::Relu => "relu",
    }
}

const UNARY: [UnaryOp; 8] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Relu,
];

fn binary_name(b: BinaryOp) -> &'static str {
    match b {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Maximum => "maximum",
        BinaryOp::Minimum => "minimum",
        BinaryOp::Pow => "pow",
        BinaryOp::Equal => "equal",
        BinaryOp::Less => "less",
        BinaryOp::Greater => "greater",
    }
}

const BINARY: [BinaryOp; 10] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Maximum,
    BinaryOp::Minimum,
    BinaryOp::Pow,
    BinaryOp::Equal,
    BinaryOp::Less,
    BinaryOp::Greater,
];

fn reduce_name(r: ReduceOp) -> &'static str {
    match r {
        ReduceOp::Sum => "sum",
        ReduceOp::Mean => "mean",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}

const REDUCE: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min];

/// The file-format name of an op. Exhaustive on purpose: a new `Op` variant must be given a
/// file representation here before the crate compiles.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Constant(_) => "constant",
        Op::Placeholder => "placeholder",
        Op::Unary(u) => unary_name(*u),
        Op::Binary(b) => binary_name(*b),
        Op::Select => "where",
        Op::Cast(_) => "cast",
        Op::Reduce { op, .. } => reduce_name(*op),
        Op::MatMul => "matmul",
        Op::Reshape => "reshape",
        Op::Permute(_) => "transpose",
    }
}

impl Graph {
    /// The graph as plain data, nodes in build order.
    pub fn to_def(&self) -> GraphDef {
        let nodes = self
            .g
            .node_indices()
            .map(|n| {
                let node = &self.g[n];
                NodeDef {
                    name: node.name.clone(),
                    op: node.op.clone(),
                    inputs: self
                        .input_nodes(n)
                        .into_iter()
                        .map(|i| self.g[i].name.clone())
                        .collect(),
                    shape: node.shape.clone(),
                    dtype: node.dtype,
                    device: node.device,
                }
            })
            .collect();
        GraphDef { nodes }
    }

    /// Rebuild a graph from its definition through the public builders, so every shape and
    /// dtype rule is checked again; declared shapes and dtypes must agree with the rules.
    pub fn from_def(def: &GraphDef) -> Result<Graph> {
        let mut g = Graph::new();
        for (i, nd) in def.nodes.iter().enumerate() {
            let at = format!("nodes[{i}] '{}'", nd.name);
            check_declared(&at, &nd.shape)?;
            if nd.name.is_empty() {
                return Err(err(
                    format!("nodes[{i}].name"),
                    "a node name cannot be empty",
                ));
            }
            if g.names.contains_key(&nd.name) {
                return Err(err(
                    format!("{at}.name"),
                    format!("duplicate node name '{}'", nd.name),
                ));
            }
            let mut inputs = Vec::with_capacity(nd.inputs.len());
            for (k, input) in nd.inputs.iter().enumerate() {
                match g.tensor(input) {
                    Some(t) => inputs.push(t),
                    None => {
                        let later = def.nodes[i..].iter().position(|n| &n.name == input);
                        let message = match later {
                            Some(0) => format!("input '{input}' is the node itself (a cycle)"),
                            Some(d) => format!(
                                "input '{input}' is nodes[{}], which comes later; inputs must be listed before the nodes that use them, so cycles are impossible",
                                i + d
                            ),
                            None => format!("input '{input}' names no node"),
                        };
                        return Err(err(format!("{at}.inputs[{k}]"), message));
                    }
                }
            }
            let t = build_node(&mut g, nd, &inputs).map_err(|e| {
                let message = match e {
                    Error::Build { op, message, .. } => format!("{op}: {message}"),
                    Error::GraphDef { message, .. } => message,
                    other => other.to_string(),
                };
                err(at.clone(), message)
            })?;
            let node = t.node();
            if g.g[node].shape != nd.shape {
                return Err(err(
                    format!("{at}.shape"),
                    format!(
                        "declared {} but the op's shape rule gives {}",
                        nd.shape, g.g[node].shape
                    ),
                ));
            }
            if g.g[node].dtype != nd.dtype {
                return Err(err(
                    format!("{at}.dtype"),
                    format!(
                        "declared {} but the op's dtype rule gives {}",
                        nd.dtype, g.g[node].dtype
                    ),
                ));
            }
            // The builder named the node after its op; give it the name from the file.
            let built = std::mem::replace(&mut g.g[node].name, nd.name.clone());
            g.names.remove(&built);
            g.names.insert(nd.name.clone(), node);
            g.g[node].device = nd.device;
        }
        Ok(g)
    }

    /// The graph as JSON text (see the [module docs](self) for the format).
    pub fn to_json(&self) -> String {
        def_to_json(&self.to_def())
    }

    /// Parse and rebuild a graph from JSON text.
    pub fn from_json(text: &str) -> Result<Graph> {
        Graph::from_def(&def_from_json(text)?)
    }

    /// Write the graph to a JSON file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json())
            .map_err(|e| err(path.display().to_string(), format!("cannot write: {e}")))
    }

    /// Read a graph from a JSON file written by [`Graph::save`] (or by hand).
    pub fn load(path: impl AsRef<Path>) -> Result<Graph> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(path.display().to_string(), format!("cannot read: {e}")))?;
        Graph::from_json(&text).map_err(|e| match e {
            Error::GraphDef { at, message } => err(format!("{}: {at}", path.display()), message),
            other => other,
        })
    }
}

fn check_declared(at: &str, shape: &Shape) -> Result<()> {
    if shape.rank() > MAX_RANK {
        return Err(err(
            format!("{at}.shape"),
            format!(
                "{} dimensions; at most {MAX_RANK} are allowed",
                shape.rank()
            ),
        ));
    }
    match shape.checked_numel() {
        Some(n) if n <= MAX_ELEMENTS => Ok(()),
        _ => Err(err(
            format!("{at}.shape"),
            format!("shape {shape} has more than 2^31 elements, the most a graph file may declare"),
        )),
    }
}

/// One node through the builder an API user would call, inside the node's device scope.
fn build_node(g: &mut Graph, nd: &NodeDef, x: &[super::Tensor]) -> Result<super::Tensor> {
    let want = match &nd.op {
        Op::Constant(_) | Op::Placeholder => 0,
        Op::Unary(_) | Op::Cast(_) | Op::Reduce { .. } | Op::Reshape | Op::Permute(_) => 1,
        Op::Binary(_) | Op::MatMul => 2,
        Op::Select => 3,
    };
    if x.len() != want {
        return Err(err(
            "",
            format!(
                "{} takes {want} input(s), {} given",
                op_name(&nd.op),
                x.len()
            ),
        ));
    }
    g.device_scopes.extend(nd.device);
    let r = build_op(g, nd, x);
    if nd.device.is_some() {
        g.device_scopes.pop();
    }
    r
}

fn build_op(g: &mut Graph, nd: &NodeDef, x: &[super::Tensor]) -> Result<super::Tensor> {
    match &nd.op {
        Op::Constant(value) => {
            if value.shape() != &nd.shape || value.dtype() != nd.dtype {
                return Err(err(
                    "",
                    format!(
                        "constant data is {} {} but the node declares {} {}",
                        value.dtype(),
                        value.shape(),
                        nd.dtype,
                        nd.shape
                    ),
                ));
            }
            g.constant(value.clone())
        }
        Op::Placeholder => g.placeholder(&nd.name, nd.shape.clone(), nd.dtype),
        Op::Unary(u) => match u {
            UnaryOp::Neg => g.neg(x[0]),
            UnaryOp::Abs => g.abs(x[0]),
            UnaryOp::Exp => g.exp(x[0]),
            UnaryOp::Log => g.log(x[0]),
            UnaryOp::Sqrt => g.sqrt(x[0]),
            UnaryOp::Tanh => g.tanh(x[0]),
            UnaryOp::Sigmoid => g.sigmoid(x[0]),
            UnaryOp::Relu => g.relu(x[0]),
        },
        Op::Binary(b) => match b {
            BinaryOp::Add => g.add(x[0], x[1]),
            BinaryOp::Sub => g.sub(x[0], x[1]),
            BinaryOp::Mul => g.mul(x[0], x[1]),
            BinaryOp::Div => g.div(x[0], x[1]),
            BinaryOp::Maximum => g.maximum(x[0], x[1]),
            BinaryOp::Minimum => g.minimum(x[0], x[1]),
            BinaryOp::Pow => g.pow(x[0], x[1]),
            BinaryOp::Equal => g.equal(x[0], x[1]),
            BinaryOp::Less => g.less(x[0], x[1]),
            BinaryOp::Greater => g.greater(x[0], x[1]),
        },
        Op::Select => g.select(x[0], x[1], x[2]),
        Op::Cast(d) => g.cast(x[0], *d),
        Op::Reduce { op, axes } => {
            let keepdims = nd.shape.rank() == g.shape(x[0]).rank();
            let axes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            match op {
                ReduceOp::Sum => g.sum(x[0], axes, keepdims),
                ReduceOp::Mean => g.mean(x[0], axes, keepdims),
                ReduceOp::Max => g.max(x[0], axes, keepdims),
                ReduceOp::Min => g.min(x[0], axes, keepdims),
            }
        }
        Op::MatMul => g.matmul(x[0], x[1]),
        Op::Reshape => {
            let target: Vec<isize> = nd.shape.dims().iter().map(|&d| d as isize).collect();
            g.reshape(x[0], &target)
        }
        Op::Permute(perm) => {
            let perm: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
            g.transpose(x[0], &perm)
        }
    }
}

// ---------------------------------------------------------------- writing

/// JSON text of a definition: one node per line, constants inline or as base64.
pub fn def_to_json(def: &GraphDef) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{{\n  \"format\": \"{FORMAT}\",\n  \"version\": {VERSION},\n  \"nodes\": ["
    );
    for (i, nd) in def.nodes.iter().enumerate() {
        s.push_str("    {");
        let _ = write!(
            s,
            "\"name\": {}, \"op\": {}",
            json_str(&nd.name),
            json_str(op_name(&nd.op))
        );
        if !nd.inputs.is_empty() {
            let list: Vec<String> = nd.inputs.iter().map(|n| json_str(n)).collect();
            let _ = write!(s, ", \"inputs\": [{}]", list.join(", "));
        }
        let _ = write!(
            s,
            ", \"shape\": {}, \"dtype\": \"{}\"",
            usize_list(nd.shape.dims()),
            nd.dtype
        );
        if let Some(d) = nd.device {
            let _ = write!(s, ", \"device\": \"{d}\"");
        }
        match &nd.op {
            Op::Reduce { axes, .. } => {
                let _ = write!(s, ", \"axes\": {}", usize_list(axes));
            }
            Op::Permute(perm) => {
                let _ = write!(s, ", \"perm\": {}", usize_list(perm));
            }
            Op::Constant(value) => write_data(&mut s, value),
            Op::Placeholder
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Select
            | Op::Cast(_)
            | Op::MatMul
            | Op::Reshape => {}
        }
        s.push('}');
        if i + 1 < def.nodes.len() {
            s.push(',');
        }
        s.push('\n');
    }
    s.push_str("  ]\n}\n");
    s
}

fn json_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn usize_list(v: &[usize]) -> String {
    let items: Vec<String> = v.iter().map(usize::to_string).collect();
    format!("[{}]", items.join(", "))
}

fn write_data(s: &mut String, value: &HostTensor) {
    let words = value.words();
    if words.len() > INLINE_MAX {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let _ = write!(s, ", \"data_base64\": \"{}\"", base64_encode(&bytes));
        return;
    }
    let items: Vec<String> = words
        .iter()
        .map(|&w| match value.dtype() {
            DType::F32 => f32_json(f32::from_bits(w)),
            DType::I32 => (w as i32).to_string(),
            DType::U32 => w.to_string(),
            DType::Bool => (w != 0).to_string(),
        })
        .collect();
    let _ = write!(s, ", \"data\": [{}]", items.join(", "));
}

/// A float as JSON that reads back (as f64, then rounded to f32) to the same bits.
fn f32_json(x: f32) -> String {
    if x.is_nan() {
        return "\"nan\"".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "\"inf\"" } else { "\"-inf\"" }.into();
    }
    let short = format!("{x:?}");
    if short
        .parse::<f64>()
        .is_ok_and(|v| (v as f32).to_bits() == x.to_bits())
    {
        short
    } else {
        format!("{:?}", x as f64)
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decode standard base64 with padding; `Err` says what is wrong.
pub(crate) fn base64_decode(text: &str) -> std::result::Result<Vec<u8>, String> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(4) {
        return Err(format!("base64 length {} is not a multiple of 4", t.len()));
    }
    let mut out = Vec::with_capacity(t.len() / 4 * 3);
    let nchunks = t.len() / 4;
    for (ci, chunk) in t.chunks(4).enumerate() {
        let mut n = 0u32;
        let mut pad = 0;
        for (k, &c) in chunk.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                b'=' if ci + 1 == nchunks && k >= 2 => {
                    pad += 1;
                    0
                }
                _ => return Err(format!("invalid base64 character at offset {}", ci * 4 + k)),
            };
            if pad > 0 && c != b'=' {
                return Err(format!(
                    "base64 padding at offset {} is not at the end",
                    ci * 4 + k
                ));
            }
            n = (n << 6) | u32::from(v);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Ok(out)
}

// ---------------------------------------------------------------- reading

/// Parse JSON text into a definition, checking everything a file can get wrong locally
/// (fields, types, sizes, constant data); cross-node checks happen in [`Graph::from_def`].
pub fn def_from_json(text: &str) -> Result<GraphDef> {
    let root: Value = serde_json::from_str(text).map_err(|e| {
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(p) => full[..p].to_string(),
            None => full,
        };
        err(
            format!("line {}, column {}", e.line(), e.column()),
            format!("invalid JSON: {message}"),
        )
    })?;
    let obj = root
        .as_object()
        .ok_or_else(|| err("top level", "expected a JSON object"))?;
    check_fields(obj, "top level", &["format", "version", "nodes"])?;
    match obj.get("format") {
        Some(Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(err(
                "format",
                format!("expected \"{FORMAT}\", found {}", short(other)),
            ))
        }
        None => {
            return Err(err(
                "format",
                format!("missing; a graph file starts with \"format\": \"{FORMAT}\""),
            ))
        }
    }
    match obj.get("version") {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => {
            return Err(err(
                "version",
                format!(
                    "unsupported version {}; this build of wgflow reads version {VERSION}",
                    short(v)
                ),
            ))
        }
        None => return Err(err("version", "missing")),
    }
    let nodes = obj
        .get("nodes")
        .ok_or_else(|| err("nodes", "missing"))?
        .as_array()
        .ok_or_else(|| err("nodes", "expected an array of nodes"))?;
    let nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, v)| parse_node(i, v))
        .collect::<Result<Vec<_>>>()?;
    Ok(GraphDef { nodes })
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        s.chars().take(40).collect::<String>() + "…"
    } else {
        s
    }
}

fn check_fields(obj: &Map<String, Value>, at: &str, allowed: &[&str]) -> Result<()> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                format!("{at}.{k}"),
                format!("unknown field (expected one of: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn parse_node(i: usize, v: &Value) -> Result<NodeDef> {
    let obj = v
        .as_object()
        .ok_or_else(|| err(format!("nodes[{i}]"), "expected an object"))?;
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(err(format!("nodes[{i}].name"), "is empty")),
        Some(other) => {
            return Err(err(
                format!("nodes[{i}].name"),
                format!("expected a string, found {}", short(other)),
            ))
        }
        None => return Err(err(format!("nodes[{i}].name"), "missing")),
    };
    let at = format!("nodes[{i}] '{name}'");
    let field = |f: &str| format!("{at}.{f}");
    let opname = match obj.get("op") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(err(
                field("op"),
                format!("expected a string, found {}", short(other)),
            ))
        }
        None => return Err(err(field("op"), "missing")),
    };
    let shape = Shape(usize_array(obj.get("shape"), &field("shape"), true)?);
    check_declared(&at, &shape)?;
    let dtype = match obj.get("dtype") {
        Some(Value::String(s)) => DType::parse(s).ok_or_else(|| {
            err(
                field("dtype"),
                format!("unknown dtype '{s}' (expected f32, i32, u32 or bool)"),
            )
        })?,
        Some(other) => {
            return Err(err(
                field("dtype"),
                format!("expected a string, found {}", short(other)),
            ))
        }
        None => return Err(err(field("dtype"), "missing")),
    };
    let device = match obj.get("device") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            Some(DeviceSpec::parse(s).map_err(|e| err(field("device"), e.to_string()))?)
        }
        Some(other) => {
            return Err(err(
                field("device"),
                format!(
                    "expected a device spec string such as \"gpu:0\", found {}",
                    short(other)
                ),
            ))
        }
    };
    let inputs = match obj.get("inputs") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(k, x)| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    err(
                        format!("{at}.inputs[{k}]"),
                        format!("expected a node name, found {}", short(x)),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?,
        Some(other) => {
            return Err(err(
                field("inputs"),
                format!("expected an array of node names, found {}", short(other)),
            ))
        }
    };
    const COMMON: [&str; 6] = ["name", "op", "inputs", "shape", "dtype", "device"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        COMMON.iter().chain(extra).copied().collect()
    };
    let (op, allowed, arity) = if let Some(&u) = UNARY.iter().find(|u| unary_name(**u) == opname) {
        (Op::Unary(u), with(&[]), 1)
    } else if let Some(&b) = BINARY.iter().find(|b| binary_name(**b) == opname) {
        (Op::Binary(b), with(&[]), 2)
    } else if let Some(&r) = REDUCE.iter().find(|r| reduce_name(**r) == opname) {
        let axes = usize_array(obj.get("axes"), &field("axes"), false)?;
        (Op::Reduce { op: r, axes }, with(&["axes"]), 1)
    } else {
        match opname {
            "constant" => {
                let value = parse_data(obj, &at, &shape, dtype)?;
                (Op::Constant(value), with(&["data", "data_base64"]), 0)
            }
            "placeholder" => (Op::Placeholder, with(&[]), 0),
            "where" => (Op::Select, with(&[]), 3),
            "cast" => (Op::Cast(dtype), with(&[]), 1),
            "matmul" => (Op::MatMul, with(&[]), 2),
            "reshape" => (Op::Reshape, with(&[]), 1),
            "transpose" => {
                let perm = usize_array(obj.get("perm"), &field("perm"), false)?;
                (Op::Permute(perm), with(&["perm"]), 1)
            }
            other => {
                return Err(err(
                    field("op"),
                    format!(
                        "unknown op '{}'",
                        other.chars().take(40).collect::<String>()
                    ),
                ))
            }
        }
    };
    check_fields(obj, &at, &allowed)?;
    if inputs.len() != arity {
        return Err(err(
            field("inputs"),
            format!("'{opname}' takes {arity} input(s), {} given", inputs.len()),
        ));
    }
    Ok(NodeDef {
        name,
        op,
        inputs,
        shape,
        dtype,
        device,
    })
}

/// A JSON array of non-negative integers; dims (`is_shape`) are capped at [`MAX_ELEMENTS`],
/// axes at [`MAX_RANK`].
fn usize_array(v: Option<&Value>, at: &str, is_shape: bool) -> Result<Vec<usize>> {
    let a = match v {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(err(
                at,
                format!("expected an array of integers, found {}", short(other)),
            ))
        }
        None => return Err(err(at, "missing")),
    };
    if a.len() > MAX_RANK {
        return Err(err(
            at,
            format!("{} entries; at most {MAX_RANK} are allowed", a.len()),
        ));
    }
    let cap = if is_shape { MAX_ELEMENTS } else { MAX_RANK };
    a.iter()
        .enumerate()
        .map(|(k, x)| match x.as_u64() {
            Some(n) if n <= cap as u64 => Ok(n as usize),
            _ => Err(err(
                format!("{at}[{k}]"),
                format!("expected an integer in 0..={cap}, found {}", short(x)),
            )),
        })
        .collect()
}

fn parse_data(
    obj: &Map<String, Value>,
    at: &str,
    shape: &Shape,
    dtype: DType,
) -> Result<HostTensor> {
    // `check_declared` has bounded this, so allocating `n` words is safe.
    let n = shape.numel();
    let words = match (obj.get("data"), obj.get("data_base64")) {
        (Some(_), Some(_)) => {
            return Err(err(
                format!("{at}.data"),
                "give either data or data_base64, not both",
            ))
        }
        (None, None) => {
            return Err(err(
                format!("{at}.data"),
                "missing; a constant needs data or data_base64",
            ))
        }
        (Some(Value::Array(a)), None) => {
            if a.len() != n {
                return Err(err(
                    format!("{at}.data"),
                    format!("{} values but shape {shape} holds {n}", a.len()),
                ));
            }
            a.iter()
                .enumerate()
                .map(|(k, x)| {
                    json_word(x, dtype).ok_or_else(|| {
                        err(
                            format!("{at}.data[{k}]"),
                            format!("{} is not a valid {dtype} value", short(x)),
                        )
                    })
                })
                .collect::<Result<Vec<u32>>>()?
        }
        (Some(other), None) => {
            return Err(err(
                format!("{at}.data"),
                format!("expected an array of values, found {}", short(other)),
            ))
        }
        (None, Some(Value::String(b64))) => {
            let want = (n * 4).div_ceil(3) * 4;
            if b64.len() != want {
                return Err(err(
                    format!("{at}.data_base64"),
                    format!(
                        "{} characters but shape {shape} needs {want} ({n} elements of 4 bytes)",
                        b64.len()
                    ),
                ));
            }
            let bytes = base64_decode(b64).map_err(|m| err(format!("{at}.data_base64"), m))?;
            if bytes.len() != n * 4 {
                return Err(err(
                    format!("{at}.data_base64"),
                    format!("{} bytes but shape {shape} needs {}", bytes.len(), n * 4),
                ));
            }
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            if dtype == DType::Bool {
                if let Some(k) = words.iter().position(|&w| w > 1) {
                    return Err(err(
                        format!("{at}.data_base64"),
                        format!("element {k} is {} but a bool word must be 0 or 1", words[k]),
                    ));
                }
            }
            words
        }
        (None, Some(other)) => {
            return Err(err(
                format!("{at}.data_base64"),
                format!("expected a base64 string, found {}", short(other)),
            ))
        }
    };
    HostTensor::from_words(shape.clone(), dtype, words).map_err(|e| err(at, e.to_string()))
}

fn json_word(x: &Value, dtype: DType) -> Option<u32> {
    match dtype {
        DType::F32 => match x {
            // A finite number beyond f32's range is rejected rather than read as infinity.
            Value::Number(n) => n
                .as_f64()
                .filter(|v| (*v as f32).is_finite())
                .map(|v| (v as f32).to_bits()),
            Value::String(s) => match s.as_str() {
                "nan" => Some(f32::NAN.to_bits()),
                "inf" => Some(f32::INFINITY.to_bits()),
                "-inf" => Some(f32::NEG_INFINITY.to_bits()),
                _ => None,
            },
            _ => None,
        },
        DType::I32 => x
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(|v| v as u32),
        DType::U32 => x.as_u64().and_then(|v| u32::try_from(v).ok()),
        DType::Bool => x.as_bool().map(u32::from),
    }
}
