//! The graph: an append-only DAG of op nodes (a `Vec` in build order, each node listing its
//! inputs), cheap `Tensor` handles into it, and the name and device scopes that builders
//! consult.

/// Builders that forward to `Graph::unary` / `Graph::binary`, keeping the caller's location.
macro_rules! unary_builders {
    ($($(#[$doc:meta])* $fn:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $fn(&mut self, x: Tensor) -> Result<Tensor> {
            self.unary(UnaryOp::$op, x, Location::caller())
        }
    )*};
}

macro_rules! binary_builders {
    ($($(#[$doc:meta])* $fn:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $fn(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
            self.binary(BinaryOp::$op, a, b, Location::caller())
        }
    )*};
}

mod build;
pub mod def;
mod dims;
mod grad;

pub use build::{Axes, Conv2dOptions, PadMode, RESERVED_VARIABLE_NAME};
pub use def::{GraphDef, NodeDef};
pub use dims::{dims_text, Binding, Dim};
pub(crate) use dims::{SymDim, Symbols};

use crate::device::DeviceSpec;
use crate::id::IdVec;
use crate::ops::{Declared, Op};
use crate::{BuildKind, DType, Error, Result, Shape};
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// One node: an op, its single output's shape and dtype, and where the user asked it to run.
#[derive(Debug, Clone)]
pub struct Node {
    pub op: Op,
    /// Unique within the graph, with name scopes as `/`-separated prefixes.
    pub name: String,
    pub shape: Shape,
    pub dtype: DType,
    /// The innermost device scope active when the node was built.
    pub device: Option<DeviceSpec>,
    /// Where in the user's code the node was built.
    pub location: &'static Location<'static>,
    /// Where the node came from when no user code built it: a graph file's node.
    pub origin: Option<String>,
    /// The nodes whose outputs are its inputs, in slot order (all built before it).
    pub inputs: Vec<NodeId>,
    /// The dimensions as products of known and run-time sizes, when some are known only at
    /// run time (`shape` then holds probe sizes: see `graph/dims.rs`).
    pub(crate) sym: Option<Vec<SymDim>>,
    /// The value depends on run-time sizes (its shape does, or an input's does).
    pub(crate) dynamic: bool,
}

crate::id::typed_id!(
    /// A node's position in its graph (nodes are numbered in the order they were built, which
    /// is a topological order).
    NodeId
);

impl Node {
    /// Where the node was made, for messages: the user's `file:line:col`, or the graph file
    /// and node it was loaded from.
    pub fn built_at(&self) -> String {
        match &self.origin {
            Some(o) => o.clone(),
            None => self.location.to_string(),
        }
    }
}

/// A handle to a node's output. Cheap to copy; valid only with the graph that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tensor {
    graph: u64,
    node: NodeId,
}

impl Tensor {
    /// The node's index in its graph.
    pub fn index(&self) -> usize {
        self.node.index()
    }

    pub(crate) fn node(&self) -> NodeId {
        self.node
    }
}

/// A static dataflow graph of tensor ops.
///
/// Builders take `&mut self` and return `Result<Tensor>`; shape and dtype errors are reported
/// at the builder call with the caller's file and line. Scopes are closures:
///
/// ```
/// # fn main() -> wgflow::Result<()> {
/// let mut g = wgflow::Graph::new();
/// let a = g.constant([1.0f32, 2.0, 3.0])?;
/// let b = g.name_scope("layer", |g| g.device("cpu:0", |g| g.relu(a)))?;
/// assert_eq!(g.name(b)?, "layer/relu");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Graph {
    id: u64,
    /// The nodes, indexed by [`NodeId`]; append-only, so a node's inputs precede it.
    pub(crate) g: IdVec<NodeId, Node>,
    names: HashMap<String, NodeId>,
    /// Per base name, the suffix to try first for the next node (`neg_7` after `neg_6`), so
    /// naming a node is O(1), not a walk over every earlier `neg_k`.
    suffixes: HashMap<String, usize>,
    name_scopes: Vec<String>,
    device_scopes: Vec<DeviceSpec>,
    /// The dimensions known only at run time.
    pub(crate) syms: Symbols,
}

impl Default for Graph {
    fn default() -> Self {
        Self::new()
    }
}

impl Graph {
    pub fn new() -> Self {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            g: IdVec::new(),
            names: HashMap::new(),
            suffixes: HashMap::new(),
            name_scopes: Vec::new(),
            device_scopes: Vec::new(),
            syms: Symbols::default(),
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.g.len()
    }

    pub fn is_empty(&self) -> bool {
        self.g.len() == 0
    }

    /// Build nodes inside a name scope: their names get `name/` as a prefix.
    pub fn name_scope<T>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut Graph) -> Result<T>,
    ) -> Result<T> {
        self.name_scopes.push(name.trim_matches('/').to_string());
        let r = f(self);
        self.name_scopes.pop();
        r
    }

    /// Build nodes inside a device scope (`with tf.device(...)`). Scopes nest and the innermost
    /// wins. The spec is parsed here; whether the device exists is checked when a session
    /// places the graph, against the devices visible to it.
    #[track_caller]
    pub fn device<T>(&mut self, spec: &str, f: impl FnOnce(&mut Graph) -> Result<T>) -> Result<T> {
        let location = Location::caller();
        let spec = DeviceSpec::parse(spec)
            .map_err(|e| Error::build("device scope", location, e.to_string()).of_value())?;
        self.device_scopes.push(spec);
        let r = f(self);
        self.device_scopes.pop();
        r
    }

    /// `t`'s node, or [`Error::ForeignTensor`] naming `method` and the caller.
    #[track_caller]
    fn get(&self, t: Tensor, method: &'static str) -> Result<&Node> {
        if self.owns(t) {
            Ok(&self.g[t.node])
        } else {
            Err(Error::ForeignTensor {
                method,
                index: t.index(),
                location: Location::caller(),
            })
        }
    }

    /// The shape of `t`'s value.
    ///
    /// Every accessor taking a [`Tensor`] answers [`Error::ForeignTensor`] for a tensor this
    /// graph did not make, instead of reading another node or panicking.
    #[track_caller]
    ///
    /// A tensor with a dimension known only at run time has no shape yet: that is an error
    /// that lists its dimensions; [`Graph::dims`] answers for every tensor.
    pub fn shape(&self, t: Tensor) -> Result<&Shape> {
        let node = self.get(t, "Graph::shape")?;
        if node.sym.is_some() {
            return Err(Error::build(
                "Graph::shape",
                Location::caller(),
                format!(
                    "'{}' has dimensions known only at run time, {}; Graph::dims lists them",
                    node.name,
                    dims_text(&dims::node_dims(&self.syms, node))
                ),
            ));
        }
        Ok(&node.shape)
    }

    /// The dtype of `t`'s value.
    #[track_caller]
    pub fn dtype(&self, t: Tensor) -> Result<DType> {
        Ok(self.get(t, "Graph::dtype")?.dtype)
    }

    /// The unique node name of `t`.
    #[track_caller]
    pub fn name(&self, t: Tensor) -> Result<&str> {
        Ok(&self.get(t, "Graph::name")?.name)
    }

    /// The device `t`'s node asked for, if any.
    #[track_caller]
    pub fn requested_device(&self, t: Tensor) -> Result<Option<DeviceSpec>> {
        Ok(self.get(t, "Graph::requested_device")?.device)
    }

    /// Look a tensor up by its node name.
    pub fn tensor(&self, name: &str) -> Option<Tensor> {
        self.names.get(name).map(|&node| Tensor {
            graph: self.id,
            node,
        })
    }

    /// The node behind a tensor.
    #[track_caller]
    pub fn node(&self, t: Tensor) -> Result<&Node> {
        self.get(t, "Graph::node")
    }

    /// All tensors, in the order they were built.
    pub fn tensors(&self) -> impl Iterator<Item = Tensor> + '_ {
        (0..self.g.len()).map(NodeId::new).map(|node| Tensor {
            graph: self.id,
            node,
        })
    }

    /// All tensors with their nodes, in the order they were built (no lookup can fail).
    pub fn nodes(&self) -> impl Iterator<Item = (Tensor, &Node)> + '_ {
        self.tensors().map(|t| (t, &self.g[t.node]))
    }

    /// The inputs of a node, in slot order.
    #[track_caller]
    pub fn inputs(&self, t: Tensor) -> Result<Vec<Tensor>> {
        self.get(t, "Graph::inputs")?;
        Ok(self.input_tensors(t))
    }

    /// The inputs of one of this graph's tensors.
    fn input_tensors(&self, t: Tensor) -> Vec<Tensor> {
        self.input_nodes(t.node)
            .iter()
            .map(|&node| Tensor {
                graph: self.id,
                node,
            })
            .collect()
    }

    /// All tensors with their inputs, in the order they were built.
    pub fn edges(&self) -> impl Iterator<Item = (Tensor, Vec<Tensor>)> + '_ {
        self.tensors().map(|t| (t, self.input_tensors(t)))
    }

    pub(crate) fn input_nodes(&self, n: NodeId) -> &[NodeId] {
        &self.g[n].inputs
    }

    /// Whether `t` belongs to this graph (graph clones share an identity).
    pub fn owns(&self, t: Tensor) -> bool {
        t.graph == self.id && t.node.index() < self.g.len()
    }

    /// The node of a builder's argument `t`, or the builder's error for a tensor of another
    /// graph.
    pub(crate) fn arg(
        &self,
        t: Tensor,
        op: &str,
        location: &'static Location<'static>,
    ) -> Result<&Node> {
        if self.owns(t) {
            Ok(&self.g[t.node])
        } else {
            Err(Error::build(
                op,
                location,
                "a tensor of another graph was passed to this graph",
            ))
        }
    }

    /// The one way a node enters the graph. Builders translate the user's arguments into
    /// `op` (and what they declare about its output, see [`Declared`]); this checks, once for
    /// every op, that each input belongs to this graph and that their number fits the op's
    /// [`Arity`](crate::ops::Arity), runs the op's shape/dtype rule ([`Family::infer`](crate::ops::Family::infer)) and
    /// enforces the rules common to every node: its element count fits the `u32` indices the
    /// kernels use (inputs are earlier nodes, so they passed the same check). Errors name
    /// `site.op` and the caller's location.
    pub(crate) fn add_op(
        &mut self,
        op: Op,
        inputs: &[Tensor],
        declared: Declared<'_>,
        site: Site<'_>,
    ) -> Result<Tensor> {
        self.add_op_sym(op, inputs, declared, site, None)
    }

    /// [`Graph::add_op`] for a node that declares run-time dimensions (a placeholder).
    pub(crate) fn add_op_sym(
        &mut self,
        op: Op,
        inputs: &[Tensor],
        declared: Declared<'_>,
        site: Site<'_>,
        declared_sym: Option<Vec<SymDim>>,
    ) -> Result<Tensor> {
        let fail = |m: String| Error::build(site.op, site.loc, m);
        let arity = op.family().arity();
        if !arity.admits(inputs.len()) {
            return Err(Error::build_kind(
                site.op,
                site.loc,
                format!("takes {arity} input(s), {} given", inputs.len()),
                BuildKind::Arity {
                    expected: arity.to_string(),
                    got: inputs.len(),
                },
            ));
        }
        if matches!(op, Op::Elementwise(_)) && self.has_unknown_dims() {
            self.unify_unnamed_dims(inputs);
        }
        let mut nodes = Vec::with_capacity(inputs.len());
        let mut types = Vec::with_capacity(inputs.len());
        for &t in inputs {
            let n = self.arg(t, site.op, site.loc)?;
            types.push((n.shape.clone(), n.dtype));
            nodes.push(t.node);
        }
        let (shape, dtype) = op
            .family()
            .infer(&types, declared)
            .map_err(|r| rejected(site, &types, r, |m| self.syms.humanize(m)))?;
        // A builder that declares a shape derived from a tensor with run-time dimensions
        // (`broadcast_to(one, shape_of_x)`, a random tensor like x) declares probe sizes.
        let declared_sym = declared_sym.or_else(|| {
            let s = declared
                .shape
                .filter(|_| self.has_unknown_dims() && !op.is_leaf())?;
            let sym = self.syms.decode_shape(s);
            (!sym.iter().all(SymDim::is_known)).then_some(sym)
        });
        let dynamic = declared_sym.is_some() || nodes.iter().any(|&n| self.g[n].dynamic);
        if !dynamic {
            check_size(site.op, &shape, site.loc)?;
            return Ok(self.push(op, &nodes, shape, dtype, site.name, site.loc));
        }
        if !op.family().rebinds() {
            return Err(fail(
                "does not take tensors with dimensions known only at run time yet".into(),
            ));
        }
        // The same rule again under the second probe sizes: the output must be the same
        // product of known and run-time sizes (see graph/dims.rs).
        let syms = &self.syms;
        let mut types_b = Vec::with_capacity(nodes.len());
        for &n in &nodes {
            let node = &self.g[n];
            let s = match &node.sym {
                Some(sym) => syms.probe_b_shape(sym),
                None => Some(node.shape.clone()),
            };
            let s = s.ok_or_else(|| fail("an input's size overflows".into()))?;
            types_b.push((s, node.dtype));
        }
        let declared_b = match (&declared_sym, declared.shape) {
            (Some(sym), _) => syms.probe_b_shape(sym),
            (None, Some(s)) => syms.probe_b_shape(&syms.decode_shape(s)),
            (None, None) => None,
        };
        let sym = declared_sym.unwrap_or_else(|| syms.decode_shape(&shape));
        let (shape_b, _) = op
            .family()
            .infer_resized(
                &types_b,
                Declared {
                    shape: declared_b.as_ref(),
                    dtype: declared.dtype,
                },
            )
            .map_err(|_| fail(dims::not_a_product(syms, &sym)))?;
        if Some(&shape_b) != syms.probe_b_shape(&sym).as_ref() {
            return Err(fail(dims::not_a_product(syms, &sym)));
        }
        let known = sym.iter().all(SymDim::is_known);
        let t = self.push(op, &nodes, shape, dtype, site.name, site.loc);
        let node = &mut self.g[t.node];
        node.dynamic = true;
        node.sym = (!known).then_some(sym);
        Ok(t)
    }

    fn scoped_name(&self, base: &str) -> String {
        let mut parts: Vec<&str> = self
            .name_scopes
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect();
        parts.push(base);
        parts.join("/")
    }

    fn push(
        &mut self,
        op: Op,
        inputs: &[NodeId],
        shape: Shape,
        dtype: DType,
        base_name: &str,
        location: &'static Location<'static>,
    ) -> Tensor {
        let base = self.scoped_name(base_name);
        let mut name = base.clone();
        let mut k = self.suffixes.get(&base).copied().unwrap_or(1);
        while self.names.contains_key(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.suffixes.insert(base, k);
        let node = NodeId::new(self.g.len());
        self.g.push(Node {
            op,
            name: name.clone(),
            shape,
            dtype,
            device: self.device_scopes.last().copied(),
            location,
            origin: None,
            inputs: inputs.to_vec(),
            sym: None,
            dynamic: false,
        });
        self.names.insert(name, node);
        Tensor {
            graph: self.id,
            node,
        }
    }
}

/// Who asks for a node: the op name its errors report (a composite may report its own, e.g.
/// `linear` for its matmul), the node's base name, and the user's code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site<'a> {
    pub op: &'a str,
    pub name: &'a str,
    pub loc: &'static Location<'static>,
}

impl<'a> Site<'a> {
    /// Errors and the node's name both say `op`.
    pub fn new(op: &'a str, loc: &'static Location<'static>) -> Self {
        Site { op, name: op, loc }
    }

    /// The node's base name, when it is not the op's.
    pub fn named(self, name: &'a str) -> Self {
        Site { name, ..self }
    }
}

/// Every node's shape: any size a kernel can index, zero-size dimensions included (an empty
/// batch, `x[5:5]`), as NumPy allows. Creation ops also call it before they compute their
/// values.
pub(crate) fn check_size(
    op: &str,
    shape: &Shape,
    location: &'static Location<'static>,
) -> Result<()> {
    if shape
        .checked_numel()
        .is_none_or(|n| n > (u32::MAX as usize))
    {
        return Err(Error::build(
            op,
            location,
            format!("shape {shape} has more than 2^32 - 1 elements, the most a kernel can index"),
        )
        .of_value());
    }
    Ok(())
}

/// A family's refusal as a build error carrying the inputs' dtypes or shapes.
fn rejected(
    site: Site<'_>,
    types: &[(Shape, DType)],
    r: crate::ops::Reject,
    humanize: impl Fn(&str) -> String,
) -> Error {
    let message = humanize(r.message());
    let kind = match r {
        crate::ops::Reject::DType(_) => BuildKind::DType {
            inputs: types.iter().map(|t| t.1).collect(),
        },
        crate::ops::Reject::Shape(_) => BuildKind::Shape {
            inputs: types.iter().map(|t| t.0.clone()).collect(),
        },
    };
    Error::build_kind(site.op, site.loc, message, kind)
}
