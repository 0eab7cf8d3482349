//! GraphDef: a graph as a versioned JSON file, saved with [`Graph::save`] and loaded with
//! [`Graph::load`].
//!
//! # Format (`"format": "wgflow.graph"`, `"version"`: 1 or 2)
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
//!   (`f32`, `f16`, `i32`, `u32`, `bool`). `inputs` may be omitted for leaves; `device` (a device spec
//!   such as `gpu:0`, `gpu` or `cpu:0`) is present only when the node was built in a device scope.
//! * `shape` and `dtype` are the node's output, and are **checked** on load: the graph is
//!   rebuilt through the same builder methods an API user calls, so every shape and dtype rule
//!   runs again, and a declared shape or dtype that disagrees with the rule is an error.
//! * Every other field is an attribute of the op. Each op family defines its attributes with
//!   serde in its `file` module, which documents them:
//!   [leaves](crate::ops::leaf::file) (`constant`, `placeholder`),
//!   [elementwise](crate::ops::elementwise::file) (unary, binary, `where`, `cast`),
//!   [reductions](crate::ops::reduce::file), [`matmul`](crate::ops::matmul::file),
//!   [movement](crate::ops::movement::file) (`reshape`, `transpose`, `slice`, `flip`,
//!   `broadcast_to`, `concat`, `take`, `pad`), [nn](crate::ops::nn::file) (`conv2d`, the pools),
//!   [random](crate::ops::random::file), [user kernels](crate::ops::custom::file)
//!   (`custom`, `raw_wgsl`), and state: [`variable`](crate::ops::leaf::file) (its
//!   initializer), [`assign` and `group`](crate::ops::state::file). A node's `op` is read by
//!   the first family that has an op of that name ([`Op::read`]).
//! * Attributes are not taken on trust: the node is rebuilt through the public builder an API
//!   user would call, with arguments derived from the attributes ([`Family::rebuild`](crate::ops::Family::rebuild)); every
//!   shape rule runs again, and the op the builder makes must equal the file's. So a file
//!   describes only nodes the API can build, and no strided read leaves its input.
//!   Composites (`softmax`, `layer_norm`, `one_hot`, `stack`, `split`, reflect `pad`, `tile`,
//!   ...) are saved as the primitive nodes they build.
//!
//! Unknown fields are errors, so a typo does not silently change a graph, and so is a key
//! that appears twice in one object (anywhere in the file: the top level, a node, an
//! attribute), so a file cannot say two things at once.
//!
//! # Versions
//!
//! * **1**: stateless graphs (every op but the three below).
//! * **2**: adds state: `variable` (with its initializer), `assign` and `group`.
//! * **3**: adds dimensions known only at run time ([`Graph::placeholder_dyn`]): a `shape`
//!   entry may be a name (`"batch"`: a placeholder's run-time dimension, and every dimension
//!   with that name) or a product of a size and names (`"784*batch"`). A name must belong to
//!   a placeholder listed earlier. The strided attributes (`offset`, `strides`) of such a
//!   graph's nodes are written for the stand-in sizes its builders computed with, and are
//!   checked against them on load like any other. A graph without run-time dimensions is
//!   still written as version 1 or 2.
//!
//! A graph is written with the lowest version that has all its ops ([`GraphDef::version`]):
//! version 2 only when it has a variable, an assignment or a group, version 1 otherwise.
//! So a stateless graph saved today still loads in builds that only know version 1, and every
//! version-1 file saves again byte for byte (`tests/graphdef/v1` checks this). Reading
//! accepts every version up to [`VERSION`]; a node newer than its file's version (a
//! `variable` in a version-1 file) is an error, as is a version this build does not know.
//! One step of `w -= 0.5` (what `g.assign_sub(w, d)` saves as):
//!
//! ```json
//! {
//!   "format": "wgflow.graph",
//!   "version": 2,
//!   "nodes": [
//!     {"name": "w", "op": "variable", "shape": [2], "dtype": "f32", "init": "zeros"},
//!     {"name": "d", "op": "constant", "shape": [], "dtype": "f32", "data": [0.5]},
//!     {"name": "sub", "op": "sub", "inputs": ["w", "d"], "shape": [2], "dtype": "f32"},
//!     {"name": "assign_sub", "op": "assign", "inputs": ["w", "sub"], "shape": [2], "dtype": "f32"}
//!   ]
//! }
//! ```
//!
//! A graph file holds how a variable starts, not its current value: a trained model is its
//! graph file plus a checkpoint of its variables (a `.safetensors` file: the `checkpoint`
//! module of the session layer, `Session::save`/`restore`, `wgflow run --weights FILE`).
//!
//! # Constants
//!
//! A constant of at most [`INLINE_MAX`] elements is written inline as `data`, a larger one
//! as `data_base64` (see [the leaves](crate::ops::leaf::file)). Both keep every bit: inline
//! `data` writes a NaN as `"nan"`, which reads as one NaN (f32 `0x7fc00000`, f16 `0x7e00`),
//! so a value (of a constant or a variable's `value` initializer) holding any other NaN is
//! written as `data_base64` whatever its size.
//!
//! # Hostile input
//!
//! Loading never panics and never allocates more than a small multiple of the file size:
//! declared shapes are checked with overflow-checked arithmetic and capped at
//! [`MAX_ELEMENTS`] elements and [`MAX_RANK`] dimensions before anything is allocated for
//! them; attributes are read through capped types ([`UInt`], [`Int`], [`List`], [`Pair`]).
//! Every error is an [`Error::GraphDef`] whose `at` names the place: `line L, column C`
//! for JSON syntax and repeated keys, else the node (`nodes[3] 'add'`) and field
//! (`.inputs[1]`). Messages quote a file's text (names, inputs, devices, ops, keys, values)
//! cut to [`QUOTE_MAX`] characters with the number of bytes left out (`'aaaa…' (10485680
//! more bytes)`), and no place or message is longer than 2,000 characters, so a hostile
//! file's error stays short.

use super::{dims_text, Dim, Graph};
use crate::device::DeviceSpec;
use crate::ops::Op;
use crate::{DType, Error, Result, Shape};
use std::path::Path;

mod attrs;
mod json;
mod rebuild;

pub use attrs::{quote, short, Int, List, NoAttrs, NodeIn, NodeOut, Pair, UInt, F32, QUOTE_MAX};
pub use json::{def_from_json, def_to_json};

/// The `format` field of every graph file.
pub const FORMAT: &str = "wgflow.graph";
/// The newest version this build writes and reads (it reads every version from 1 on).
pub const VERSION: u64 = 3;
/// The version of graphs with dimensions known only at run time (a `shape` entry that is a
/// name, such as `"batch"`, or a product, such as `"784*batch"`).
pub const RUN_TIME_DIMS_VERSION: u64 = 3;
/// The version of graphs without state (variables, assignments, groups): such a graph is
/// written as version 1, so builds that predate version 2 still read it and the version-1
/// files already written stay byte for byte what a save gives.
pub const STATELESS_VERSION: u64 = 1;
/// Constants with more elements than this are written as `data_base64`.
pub const INLINE_MAX: usize = 1024;
/// The most elements a graph file may declare for one tensor (2^31).
pub const MAX_ELEMENTS: usize = 1 << 31;
/// The largest graph file [`Graph::load`] reads (16 GiB: room for base64 constants of
/// [`MAX_ELEMENTS`] words), checked before anything is read; FIFOs and devices are refused.
pub const MAX_FILE_BYTES: u64 = 1 << 34;
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

impl GraphDef {
    /// The version a file of this definition is written as: [`STATELESS_VERSION`] (1) unless
    /// a node needs version 2 ([`needs_version`]).
    pub fn version(&self) -> u64 {
        let v = self
            .nodes
            .iter()
            .map(|n| needs_version(&n.op))
            .max()
            .unwrap_or(STATELESS_VERSION);
        if self.nodes.iter().any(|n| n.dims.is_some()) {
            v.max(RUN_TIME_DIMS_VERSION)
        } else {
            v
        }
    }
}

/// The first file version that has `op`: 2 for variables, assignments and groups, else 1.
pub fn needs_version(op: &Op) -> u64 {
    if op.is_variable() || matches!(op, Op::State(_)) {
        2
    } else {
        STATELESS_VERSION
    }
}

/// One node of a [`GraphDef`].
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub name: String,
    /// The primitive; for `Reduce`, keepdims follows from `shape`'s rank.
    pub op: Op,
    /// Names of earlier nodes, in argument order.
    pub inputs: Vec<String>,
    /// The output shape; with run-time dimensions (`dims`), a stand-in for the builders.
    pub shape: Shape,
    /// The output's dimensions when some are known only at run time (version 3).
    pub dims: Option<Vec<Dim>>,
    pub dtype: DType,
    pub device: Option<DeviceSpec>,
}

/// `nodes[i] 'name'`, with a hostile multi-megabyte name cut short.
fn node_at(i: usize, name: &str) -> String {
    match attrs::cut(name, 64) {
        (name, 0) => format!("nodes[{i}] '{name}'"),
        (head, _) => format!("nodes[{i}] '{head}…'"),
    }
}

/// The most bytes of an error's place or message ([`err`]'s backstop).
const MESSAGE_MAX: usize = 2000;

/// A graph-file error. Messages quote a file's text through [`quote`] and [`short`]; as a
/// backstop for text quoted elsewhere (a builder's or another crate's message repeating a
/// name), the place and the message are cut to [`MESSAGE_MAX`] bytes here, which every
/// graph-file error passes through.
fn err(at: impl Into<String>, message: impl Into<String>) -> Error {
    fn bound(mut s: String) -> String {
        if let (head, more @ 1..) = attrs::cut(&s, MESSAGE_MAX) {
            s = format!("{head}… ({more} more bytes)");
        }
        s
    }
    Error::GraphDef {
        at: bound(at.into()),
        message: bound(message.into()),
    }
}

impl Graph {
    /// The graph as plain data, nodes in build order. An op that cannot be saved
    /// ([`Family::unsavable`](crate::ops::Family::unsavable): a raw WGSL kernel whose output
    /// rule is a closure) is an error naming the node.
    pub fn to_def(&self) -> Result<GraphDef> {
        let nodes = self
            .g
            .iter()
            .enumerate()
            .map(|(n, node)| {
                if let Some(why) = node.op.family().unsavable() {
                    return Err(err(node_at(n, &node.name), why));
                }
                Ok(NodeDef {
                    name: node.name.clone(),
                    op: node.op.clone(),
                    inputs: node
                        .inputs
                        .iter()
                        .map(|&i| self.g[i].name.clone())
                        .collect(),
                    shape: node.shape.clone(),
                    dims: node
                        .sym
                        .as_ref()
                        .map(|_| super::dims::node_dims(&self.syms, node)),
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
            if nd.dims.is_none() {
                check_declared(&at, &nd.shape)?;
            }
            if nd.name.is_empty() {
                return Err(err(
                    format!("nodes[{i}].name"),
                    "a node name cannot be empty",
                ));
            }
            if g.names.contains_key(&nd.name) {
                return Err(err(
                    format!("{at}.name"),
                    format!("duplicate node name {}", quote(&nd.name)),
                ));
            }
            let mut inputs = Vec::with_capacity(nd.inputs.len());
            for (k, input) in nd.inputs.iter().enumerate() {
                match g.tensor(input) {
                    Some(t) => inputs.push(t),
                    None => {
                        let later = def.nodes[i..].iter().position(|n| &n.name == input);
                        let input = quote(input);
                        let message = match later {
                            Some(0) => format!("input {input} is the node itself (a cycle)"),
                            Some(d) => format!(
                                "input {input} is nodes[{}], which comes later; inputs must be listed before the nodes that use them, so cycles are impossible",
                                i + d
                            ),
                            None => format!("input {input} names no node"),
                        };
                        return Err(err(format!("{at}.inputs[{k}]"), message));
                    }
                }
            }
            let probe;
            let built = match (&nd.dims, &nd.op) {
                (Some(dims), Op::Leaf(crate::ops::Leaf::Placeholder)) => {
                    g.device_scopes.extend(nd.device);
                    let t = g.placeholder_dyn(&nd.name, dims.iter().cloned(), nd.dtype);
                    g.device_scopes.clear();
                    t
                }
                (Some(dims), _) => {
                    probe = g
                        .probe_def(nd, dims)
                        .map_err(|m| err(format!("{at}.shape"), m))?;
                    rebuild::build_node(&mut g, &probe, &inputs)
                }
                (None, _) => rebuild::build_node(&mut g, nd, &inputs),
            };
            let t = built.map_err(|e| {
                let message = match e {
                    Error::Build { op, message, .. } => format!("{op}: {message}"),
                    Error::GraphDef { message, .. } => message,
                    other => other.to_string(),
                };
                err(at.clone(), message)
            })?;
            let node = t.node();
            if let Some(dims) = &nd.dims {
                let built = super::dims::node_dims(&g.syms, &g.g[node]);
                if &built != dims {
                    return Err(err(
                        format!("{at}.shape"),
                        format!(
                            "declared {} but the op's shape rule gives {}",
                            dims_text(dims),
                            dims_text(&built)
                        ),
                    ));
                }
            } else if g.g[node].shape != nd.shape {
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
        def_to_json(&self.to_def()?)
    }

    /// Parse and rebuild a graph from JSON text.
    pub fn from_json(text: &str) -> Result<Graph> {
        Graph::from_def(&def_from_json(text)?)
    }

    /// Write the graph to a JSON file, replacing `path` atomically (see
    /// [`crate::files::write_atomic`]: never through a link, never a half-written file).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        crate::files::write_atomic(path, self.to_json()?.as_bytes())
            .map_err(|e| err(path.display().to_string(), format!("cannot write: {e}")))
    }

    /// Read a graph from a JSON file written by [`Graph::save`] (or by hand).
    pub fn load(path: impl AsRef<Path>) -> Result<Graph> {
        let path = path.as_ref();
        let cannot = |e: &dyn std::fmt::Display| {
            err(path.display().to_string(), format!("cannot read: {e}"))
        };
        let bytes = crate::files::read_regular(path, MAX_FILE_BYTES, "graph file")
            .map_err(|e| cannot(&e))?;
        let text = String::from_utf8(bytes).map_err(|e| cannot(&e.utf8_error()))?;
        let mut g = Graph::from_json(&text).map_err(|e| match e {
            Error::GraphDef { at, message } => err(format!("{}: {at}", path.display()), message),
            other => other,
        })?;
        for node in g.g.iter_mut() {
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
