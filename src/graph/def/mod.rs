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
//! | `neg` `abs` `exp` `log` `sqrt` `tanh` `sigmoid` `relu` `floor` `ceil` `round` `sign` `reciprocal` `rsqrt` `log1p` `expm1` `sin` `cos` `erf` `softplus` `isnan` `isinf` `isfinite` `logical_not` | 1 | — |
//! | `add` `sub` `mul` `div` `maximum` `minimum` `pow` `equal` `less` `greater` `not_equal` `less_equal` `greater_equal` `logical_and` `logical_or` `logical_xor` `floor_divide` `remainder` | 2 | — |
//! | `where` | 3 (cond, a, b) | — |
//! | `cast` | 1 | — (the target is the node's `dtype`) |
//! | `sum` `mean` `max` `min` `prod` `all` `any` | 1 | `axes`: list of axes (non-negative); keepdims is implied by the node's rank |
//! | `argmax` `argmin` | 1 | `axes`: one axis, or every axis for the index into the flattened input |
//! | `matmul` | 2 | — |
//! | `reshape` | 1 | — (the target is the node's `shape`) |
//! | `transpose` | 1 | `perm`: output axis `i` is input axis `perm[i]` |
//! | `slice` `flip` `broadcast_to` | 1 | `offset` (0..2^31) and `strides` (one signed integer per axis, magnitude at most [`MAX_STRIDE`]): `out[c] = in[offset + Σ c_k·strides[k]]` over the contiguous input; must be what the builder gives (below) |
//! | `concat` | 2 to 6 | `axis` |
//! | `take` | 2 (x, i32 indices) | `axis` |
//! | `pad` | 1 | `before`: elements ahead of each axis (the count after follows from `shape`); `value_bits`: the pad value as the raw 32-bit word of the node's dtype |
//! | `conv2d` | 2 (x, w) | `kernel`, `stride`, `padding`, `dilation`: `[h, w]` each; `groups`. The bias of [`Graph::conv2d`] is a separate `add` |
//! | `max_pool2d` `avg_pool2d` | 1 | `kernel`, `stride`, `padding`, `dilation` (always `[1, 1]`) |
//! | `random_uniform` `random_normal` | 0 | `seed` (a u64); `params`: `[low, high]` or `[mean, std]` as f32 values |
//!
//! Composites (`softmax`, `layer_norm`, `one_hot`, `stack`, `split`, reflect `pad`, `tile`, ...)
//! are saved as the primitive nodes they build. Window entries other than `kernel` are at most
//! [`MAX_WINDOW`]. The attributes of `slice` to `random_normal` are not taken on trust: the
//! builder's arguments are derived from them (for `slice`, the start, stop and step of every
//! axis, after checking that the first and last index read lie inside the input), the public
//! builder runs every shape rule again, and the attributes it produces must equal the file's.
//! So a file describes only nodes the API can build, and no strided read leaves its input.
//! | `custom` | any | `kernel` (name), `expr`: the typed expression (below) |
//! | `raw_wgsl` | any | `kernel` (name), `source`, `entry_point`; optional `output_like_input` (input index; absent: the node's `shape`/`dtype` are fixed) and `invocations` (absent: one per output element) |
//!
//! A `custom` node's `expr` is a JSON tree of arrays: `["in", i]`, `["lit", dtype, word]`
//! (the literal's 32-bit pattern as an unsigned integer), `["unary", op, e]`,
//! `["binary", op, a, b]`, `["where", c, a, b]`, `["cast", dtype, e]`, with the op names of
//! the table above (a subexpression used twice is written twice). It is type-checked against
//! the inputs on load. A raw kernel's shader is
//! validated on load like one built with the API.
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
use crate::ops::{Custom, Elementwise, Leaf, MatMul, Movement, Nn, Reduce};
use crate::{DType, Error, Result, Shape};
use std::path::Path;

mod json;
mod rebuild;

pub use json::{def_from_json, def_to_json};

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
/// The largest magnitude of a `strides` entry of `slice`, `flip` and `broadcast_to` (2^53).
pub const MAX_STRIDE: i64 = 1 << 53;
/// The largest `stride`, `padding` or `dilation` entry of `conv2d` and the pools (2^20).
pub const MAX_WINDOW: usize = 1 << 20;

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

/// `nodes[i] 'name'`, with a hostile multi-megabyte name cut short.
fn node_at(i: usize, name: &str) -> String {
    if name.chars().count() > 64 {
        format!(
            "nodes[{i}] '{}…'",
            name.chars().take(64).collect::<String>()
        )
    } else {
        format!("nodes[{i}] '{name}'")
    }
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
    u.name()
}

const UNARY: [UnaryOp; UnaryOp::ALL.len()] = UnaryOp::ALL;

fn binary_name(b: BinaryOp) -> &'static str {
    b.name()
}

const BINARY: [BinaryOp; BinaryOp::ALL.len()] = BinaryOp::ALL;

fn reduce_name(r: ReduceOp) -> &'static str {
    match r {
        ReduceOp::Sum => "sum",
        ReduceOp::Mean => "mean",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
        ReduceOp::Prod => "prod",
        ReduceOp::All => "all",
        ReduceOp::Any => "any",
        ReduceOp::ArgMax => "argmax",
        ReduceOp::ArgMin => "argmin",
    }
}

const REDUCE: [ReduceOp; 9] = [
    ReduceOp::Sum,
    ReduceOp::Mean,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Prod,
    ReduceOp::All,
    ReduceOp::Any,
    ReduceOp::ArgMax,
    ReduceOp::ArgMin,
];

/// The file-format name of an op. Exhaustive on purpose: a new `Op` variant must be given a
/// file representation here before the crate compiles.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Leaf(Leaf::Constant(_)) => "constant",
        Op::Leaf(Leaf::Placeholder) => "placeholder",
        Op::Elementwise(Elementwise::Unary(u)) => unary_name(*u),
        Op::Elementwise(Elementwise::Binary(b)) => binary_name(*b),
        Op::Elementwise(Elementwise::Select) => "where",
        Op::Elementwise(Elementwise::Cast(_)) => "cast",
        Op::Reduce(Reduce { op, .. }) => reduce_name(*op),
        Op::MatMul(MatMul) => "matmul",
        Op::Movement(Movement::Reshape) => "reshape",
        Op::Movement(Movement::Permute(_)) => "transpose",
        Op::Movement(Movement::Strided { kind, .. }) => kind.name(),
        Op::Random(spec) => spec.name(),
        Op::Movement(Movement::Concat(_)) => "concat",
        Op::Movement(Movement::Pad { .. }) => "pad",
        Op::Movement(Movement::Gather(_)) => "take",
        Op::Nn(Nn::Conv2d { .. }) => "conv2d",
        Op::Nn(Nn::Pool { kind, .. }) => kind.name(),
        Op::Custom(Custom::Elementwise(_)) => "custom",
        Op::Custom(Custom::Raw(_)) => "raw_wgsl",
    }
}

impl Graph {
    /// The graph as plain data, nodes in build order. A raw WGSL kernel whose output rule
    /// is a closure cannot be saved: that is an error naming the node.
    pub fn to_def(&self) -> Result<GraphDef> {
        let nodes = self
            .g
            .node_indices()
            .map(|n| {
                let node = &self.g[n];
                if let Op::Custom(Custom::Raw(r)) = &node.op {
                    if matches!(r.output, crate::ops::custom::OutputRule::Fn(_)) {
                        return Err(err(
                            node_at(n.index(), &node.name),
                            format!("raw kernel '{}' has a closure as its output rule, which cannot be saved; use OutputRule::Fixed or LikeInput", r.name),
                        ));
                    }
                }
                Ok(NodeDef {
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
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(GraphDef { nodes })
    }

    /// Rebuild a graph from its definition through the public builders, so every shape and
    /// dtype rule is checked again; declared shapes and dtypes must agree with the rules.
    pub fn from_def(def: &GraphDef) -> Result<Graph> {
        let mut g = Graph::new();
        for (i, nd) in def.nodes.iter().enumerate() {
            let at = node_at(i, &nd.name);
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
            g.g[node].origin = Some(format!("graph file {at}"));
        }
        Ok(g)
    }

    /// The graph as JSON text (see the [module docs](self) for the format); fails as
    /// [`Graph::to_def`] does.
    pub fn to_json(&self) -> Result<String> {
        Ok(def_to_json(&self.to_def()?))
    }

    /// Parse and rebuild a graph from JSON text.
    pub fn from_json(text: &str) -> Result<Graph> {
        Graph::from_def(&def_from_json(text)?)
    }

    /// Write the graph to a JSON file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json()?)
            .map_err(|e| err(path.display().to_string(), format!("cannot write: {e}")))
    }

    /// Read a graph from a JSON file written by [`Graph::save`] (or by hand).
    pub fn load(path: impl AsRef<Path>) -> Result<Graph> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(path.display().to_string(), format!("cannot read: {e}")))?;
        let mut g = Graph::from_json(&text).map_err(|e| match e {
            Error::GraphDef { at, message } => err(format!("{}: {at}", path.display()), message),
            other => other,
        })?;
        for node in g.g.node_weights_mut() {
            if let Some(o) = &mut node.origin {
                *o = format!("{} {}", path.display(), o.trim_start_matches("graph file "));
            }
        }
        Ok(g)
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
        Op::Leaf(Leaf::Constant(_)) | Op::Leaf(Leaf::Placeholder) | Op::Random(_) => 0,
        Op::Elementwise(Elementwise::Unary(_))
        | Op::Elementwise(Elementwise::Cast(_))
        | Op::Reduce(Reduce { .. })
        | Op::Movement(Movement::Reshape)
        | Op::Movement(Movement::Permute(_))
        | Op::Movement(Movement::Strided { .. })
        | Op::Movement(Movement::Pad { .. })
        | Op::Nn(Nn::Pool { .. }) => 1,
        Op::Elementwise(Elementwise::Binary(_))
        | Op::MatMul(MatMul)
        | Op::Movement(Movement::Gather(_))
        | Op::Nn(Nn::Conv2d { .. }) => 2,
        Op::Elementwise(Elementwise::Select) => 3,
        Op::Movement(Movement::Concat(_)) => x.len().max(2),
        Op::Custom(Custom::Elementwise(_)) | Op::Custom(Custom::Raw(_)) => x.len(),
    };
    if x.len() != want {
        return Err(err(
            "",
            format!(
                "{} takes {} input(s), {} given",
                op_name(&nd.op),
                if matches!(nd.op, Op::Movement(Movement::Concat(_))) {
                    "2 or more".to_string()
                } else {
                    want.to_string()
                },
                x.len()
            ),
        ));
    }
    g.device_scopes.extend(nd.device);
    let before = g.len();
    let r = build_op(g, nd, x);
    if nd.device.is_some() {
        g.device_scopes.pop();
    }
    let t = r?;
    // A file holds primitive nodes: one node in, one node out. A builder that made more (a
    // wide concat becomes a tree) or a different op (a view) means the file cannot be exact.
    if g.len() != before + 1 {
        return Err(err(
            "",
            format!(
                "{} rebuilds as {} nodes; a graph file holds one primitive op per node",
                op_name(&nd.op),
                g.len() - before
            ),
        ));
    }
    rebuild::check_same_op(&nd.op, &g.g[t.node()].op)?;
    Ok(t)
}

fn build_op(g: &mut Graph, nd: &NodeDef, x: &[super::Tensor]) -> Result<super::Tensor> {
    match &nd.op {
        Op::Leaf(Leaf::Constant(value)) => {
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
        Op::Leaf(Leaf::Placeholder) => g.placeholder(&nd.name, nd.shape.clone(), nd.dtype),
        Op::Elementwise(Elementwise::Unary(u)) => g.unary(*u, x[0], std::panic::Location::caller()),
        Op::Elementwise(Elementwise::Binary(b)) => {
            g.binary(*b, x[0], x[1], std::panic::Location::caller())
        }
        Op::Elementwise(Elementwise::Select) => g.select(x[0], x[1], x[2]),
        Op::Elementwise(Elementwise::Cast(d)) => g.cast(x[0], *d),
        Op::Reduce(Reduce { op, axes }) => {
            let keepdims = nd.shape.rank() == g.shape(x[0])?.rank();
            let axes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            match op {
                ReduceOp::Sum => g.sum(x[0], axes, keepdims),
                ReduceOp::Mean => g.mean(x[0], axes, keepdims),
                ReduceOp::Max => g.max(x[0], axes, keepdims),
                ReduceOp::Min => g.min(x[0], axes, keepdims),
                ReduceOp::Prod => g.prod(x[0], axes, keepdims),
                ReduceOp::All => g.all(x[0], axes, keepdims),
                ReduceOp::Any => g.any(x[0], axes, keepdims),
                ReduceOp::ArgMax | ReduceOp::ArgMin => {
                    // One axis, or all of them (a flattened index).
                    let axis = match axes.as_slice() {
                        [a] => Some(*a),
                        _ => None,
                    };
                    if *op == ReduceOp::ArgMax {
                        g.argmax(x[0], axis, keepdims)
                    } else {
                        g.argmin(x[0], axis, keepdims)
                    }
                }
            }
        }
        Op::MatMul(MatMul) => g.matmul(x[0], x[1]),
        Op::Movement(Movement::Reshape) => {
            let target: Vec<isize> = nd.shape.dims().iter().map(|&d| d as isize).collect();
            g.reshape(x[0], &target)
        }
        Op::Movement(Movement::Permute(perm)) => {
            let perm: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
            g.transpose(x[0], &perm)
        }
        Op::Custom(Custom::Elementwise(c)) => g.apply_expr(&c.name, c.expr.clone(), x),
        Op::Custom(Custom::Raw(r)) => {
            let mut r = (**r).clone();
            if let crate::ops::custom::OutputRule::Fixed(..) = r.output {
                r.output = crate::ops::custom::OutputRule::Fixed(nd.shape.clone(), nd.dtype);
            }
            g.raw_kernel(&r, x)
        }
        Op::Movement(Movement::Strided { .. })
        | Op::Movement(Movement::Concat(_))
        | Op::Movement(Movement::Pad { .. })
        | Op::Movement(Movement::Gather(_))
        | Op::Nn(Nn::Conv2d { .. })
        | Op::Nn(Nn::Pool { .. })
        | Op::Random(_) => rebuild::build_op(g, nd, x),
    }
}
