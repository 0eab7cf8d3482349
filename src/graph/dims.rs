//! Dimensions known only at run time (`tf.placeholder(tf.float32, [None, 784])`).
//!
//! A graph with unknown dimensions is built with every builder that a static graph uses: each
//! unknown dimension (a *symbol*, shared by name) stands in for a **probe size**, a large
//! prime, so the builders' shape rules, checks and attribute arithmetic run unchanged. A
//! node's output dimensions are then read back as products of a known factor and symbols
//! (a flattened batch is `784*batch`) by dividing out the probes, and `Graph::add_op` checks
//! that reading by inferring the node again under a second, independent set of probes: a size
//! that is not such a product (a convolution over an unknown spatial size, a concatenation
//! along an unknown axis) is a build error at the user's line, never a wrong size later.
//!
//! `Session::run` binds the symbols from the feeds and replays the graph through the public
//! builders with those sizes ([`Graph::bind`]): every node whose value depends on a binding is
//! rebuilt from its op (as a graph file's node is), so the static pipeline after it (fusion,
//! kernels, memory plan, constant folding) only ever sees concrete shapes. Ops whose
//! attributes would change with the sizes in a way the replay cannot recover ([`Family::rebinds`]
//! answers false: a slice's offsets, a raw kernel's WGSL) refuse tensors with unknown
//! dimensions at build time, and builders that would turn a size into a value read it through
//! [`Graph::size_of`], which the replay turns into a constant.
//!
//! [`Family::rebinds`]: crate::ops::Family::rebinds

use super::{Graph, Node, NodeId, Tensor};
use crate::id::IdVec;
use crate::{Error, Result, Shape};
use std::collections::HashMap;
use std::fmt;

/// One dimension of a placeholder's declared shape, or of a tensor ([`Graph::dims`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// Known when the graph is built.
    Known(usize),
    /// Known only at run time; every dimension with this name has the same size.
    Named(String),
    /// Known only at run time and related to no other dimension (placeholders only; the
    /// graph names it `placeholder.axis`, which is what [`Graph::dims`] reports).
    Unknown,
    /// A known factor times run-time sizes (a flattened batch: `784*batch`); reported by
    /// [`Graph::dims`], not accepted by placeholders.
    Product(usize, Vec<String>),
}

impl Dim {
    /// A run-time dimension shared by name.
    pub fn named(name: &str) -> Dim {
        Dim::Named(name.to_string())
    }

    /// The size, if known when the graph is built.
    pub fn known(&self) -> Option<usize> {
        match self {
            Dim::Known(n) => Some(*n),
            _ => None,
        }
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Known(n)
    }
}

impl From<Option<usize>> for Dim {
    fn from(n: Option<usize>) -> Dim {
        n.map_or(Dim::Unknown, Dim::Known)
    }
}

impl From<&str> for Dim {
    fn from(name: &str) -> Dim {
        Dim::named(name)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Named(s) => write!(f, "{s}"),
            Dim::Unknown => write!(f, "None"),
            Dim::Product(k, names) => {
                let mut parts: Vec<String> = names.clone();
                if *k != 1 {
                    parts.insert(0, k.to_string());
                }
                write!(f, "{}", parts.join("*"))
            }
        }
    }
}

/// `[batch, 784]`.
pub fn dims_text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(Dim::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A dimension as `factor × Π symbol^power` (symbols by index, ascending).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SymDim {
    pub factor: usize,
    pub pows: Vec<(usize, u32)>,
}

impl SymDim {
    pub fn is_known(&self) -> bool {
        self.pows.is_empty()
    }
}

/// The symbols of a graph and their two probe sizes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Symbols {
    pub names: Vec<String>,
    probe_a: Vec<usize>,
    probe_b: Vec<usize>,
}

/// The first primes at or above these are the probes (far above any dimension a builder
/// compares them with, and small enough that a product of three stays exact in `usize`).
const PROBE_A_BASE: usize = 131_071;
const PROBE_B_BASE: usize = 196_613;

fn next_prime(mut n: usize) -> usize {
    let is_prime = |n: usize| {
        n > 1
            && (2..)
                .take_while(|d| d * d <= n)
                .all(|d| !n.is_multiple_of(d))
    };
    while !is_prime(n) {
        n += 1;
    }
    n
}

impl Symbols {
    /// The index of the symbol `name`, added if new.
    pub fn intern(&mut self, name: &str) -> usize {
        if let Some(k) = self.names.iter().position(|n| n == name) {
            return k;
        }
        let a = next_prime(self.probe_a.last().map_or(PROBE_A_BASE, |p| p + 1));
        let b = next_prime(self.probe_b.last().map_or(PROBE_B_BASE, |p| p + 1));
        self.names.push(name.to_string());
        self.probe_a.push(a);
        self.probe_b.push(b);
        self.names.len() - 1
    }

    /// Forget symbol `k`, which no node may use; later symbols move down one index and keep
    /// their probes (node shapes hold probe sizes, which stay valid).
    fn remove(&mut self, k: usize) {
        if k < self.names.len() {
            self.names.remove(k);
            self.probe_a.remove(k);
            self.probe_b.remove(k);
        }
    }

    /// Read a probe-A size back as a product of a factor and symbols.
    pub fn decode(&self, mut d: usize) -> SymDim {
        let mut pows = Vec::new();
        for (k, &p) in self.probe_a.iter().enumerate() {
            let mut e = 0;
            while d != 0 && d.is_multiple_of(p) {
                d /= p;
                e += 1;
            }
            if e > 0 {
                pows.push((k, e));
            }
        }
        SymDim { factor: d, pows }
    }

    /// `message` with every number that is a probe size (or a product with one) written as
    /// the dimension it stands for, so a builder's message about a shape reads `[batch, 4]`.
    pub fn humanize(&self, message: &str) -> String {
        if self.names.is_empty() {
            return message.to_string();
        }
        let mut out = String::with_capacity(message.len());
        let mut digits = String::new();
        let flush = |digits: &mut String, out: &mut String| {
            if let Ok(n) = digits.parse::<usize>() {
                let d = self.decode(n);
                if d.is_known() {
                    out.push_str(digits);
                } else {
                    out.push_str(&self.dim(&d).to_string());
                }
            } else {
                out.push_str(digits);
            }
            digits.clear();
        };
        for c in message.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else {
                flush(&mut digits, &mut out);
                out.push(c);
            }
        }
        flush(&mut digits, &mut out);
        out
    }

    pub fn decode_shape(&self, s: &Shape) -> Vec<SymDim> {
        s.dims().iter().map(|&d| self.decode(d)).collect()
    }

    /// The size of `d` with symbol `k` set to `value(k)`; `None` if unbound or overflowing.
    fn eval_with(d: &SymDim, value: impl Fn(usize) -> Option<usize>) -> Option<usize> {
        d.pows.iter().try_fold(d.factor, |acc, &(k, e)| {
            let v = value(k)?;
            (0..e).try_fold(acc, |a, _| a.checked_mul(v))
        })
    }

    pub fn eval_shape(
        &self,
        dims: &[SymDim],
        value: impl Fn(usize) -> Option<usize> + Copy,
    ) -> Option<Shape> {
        dims.iter()
            .map(|d| Self::eval_with(d, value))
            .collect::<Option<Vec<_>>>()
            .map(Shape)
    }

    pub fn probe_a_shape(&self, dims: &[SymDim]) -> Option<Shape> {
        self.eval_shape(dims, |k| self.probe_a.get(k).copied())
    }

    pub fn probe_b_shape(&self, dims: &[SymDim]) -> Option<Shape> {
        self.eval_shape(dims, |k| self.probe_b.get(k).copied())
    }

    pub fn dim(&self, d: &SymDim) -> Dim {
        match d.pows.as_slice() {
            [] => Dim::Known(d.factor),
            [(k, 1)] if d.factor == 1 => Dim::Named(self.names[*k].clone()),
            pows => Dim::Product(
                d.factor,
                pows.iter()
                    .flat_map(|&(k, e)| std::iter::repeat_n(self.names[k].clone(), e as usize))
                    .collect(),
            ),
        }
    }
}

/// A node's dimensions (`None` for a static node), in the form users see.
pub(crate) fn node_dims(syms: &Symbols, node: &Node) -> Vec<Dim> {
    match &node.sym {
        Some(s) => s.iter().map(|d| syms.dim(d)).collect(),
        None => node.shape.dims().iter().map(|&d| Dim::Known(d)).collect(),
    }
}

/// Sizes for a graph's symbols: index `k` holds symbol `k`'s size once bound.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Binding(pub(crate) Vec<Option<usize>>);

impl Binding {
    /// `name=size` pairs of the bound symbols, for messages and logs.
    pub fn describe(&self, g: &Graph) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| format!("{}={v}", g.syms.names[k])))
            .collect();
        parts.join(", ")
    }
}

impl Graph {
    /// TensorFlow lets `[None, 1]` placeholders meet in an elementwise op and checks at run
    /// time that their sizes agree (`y_ * tf.log(y)` in its first tutorial). Here each
    /// `None` is a symbol of its own, which cannot broadcast against another; so before an
    /// elementwise op broadcasts `inputs`, an unnamed run-time dimension of a placeholder
    /// that nothing uses yet takes the symbol it meets on that axis (a named or used one,
    /// else the earliest), and its own symbol is dropped. The two must then be fed one
    /// size, which the feeds check (`binding_of`). Named dimensions are declarations and
    /// never change; nor does a placeholder already used (the nodes built from it were
    /// inferred with its symbol): where two of those meet, the op's error stands.
    pub(crate) fn unify_unnamed_dims(&mut self, inputs: &[Tensor]) {
        let single = |d: &SymDim| match d.pows.as_slice() {
            &[(k, 1)] if d.factor == 1 => Some(k),
            _ => None,
        };
        let syms: Vec<Option<&Vec<SymDim>>> = inputs
            .iter()
            .map(|&t| self.owns(t).then(|| self.g[t.node].sym.as_ref()).flatten())
            .collect();
        if syms.iter().flatten().count() < 2 {
            return;
        }
        let rank = syms.iter().flatten().map(|s| s.len()).max().unwrap_or(0);
        let mut merges = Vec::new();
        for back in 1..=rank {
            let at = |s: &Vec<SymDim>| s.len().checked_sub(back).and_then(|i| single(&s[i]));
            let here: Vec<(usize, usize)> = syms
                .iter()
                .enumerate()
                .filter_map(|(j, s)| Some((j, at(s.as_ref()?)?)))
                .collect();
            // Only where symbols differ (the op would fail to broadcast) is anything looked
            // up: the scans below walk the graph.
            if here.iter().all(|&(_, k)| k == here[0].1) {
                continue;
            }
            // The symbol the others join: a used or named one if there is one (it cannot
            // change), else the earliest.
            let fresh: Vec<(usize, usize, bool)> = here
                .iter()
                .map(|&(j, k)| {
                    let node = inputs[j].node;
                    let axis = self.g[node].shape.rank() - back;
                    (j, k, self.unnamed_and_unused(node, axis, k))
                })
                .collect();
            let fixed = fresh.iter().filter(|f| !f.2).map(|f| f.1).min();
            let Some(target) = fixed.or_else(|| fresh.iter().map(|f| f.1).min()) else {
                continue;
            };
            for &(j, k, free) in &fresh {
                if k != target && free {
                    let node = inputs[j].node;
                    merges.push((node, self.g[node].shape.rank() - back, target));
                }
            }
        }
        let mut gone: Vec<usize> = Vec::new();
        for (node, axis, k) in merges {
            let probe = self.syms.probe_a[k];
            let n = &mut self.g[node];
            if let Some(sym) = n.sym.as_mut() {
                if let Some(&[(old, _)]) = sym.get(axis).map(|d| d.pows.as_slice()) {
                    gone.push(old);
                }
                sym[axis] = SymDim {
                    factor: 1,
                    pows: vec![(k, 1)],
                };
                n.shape.0[axis] = probe;
            }
        }
        // The merged-away symbols are used by no node now: drop them, so that a binding
        // never asks for them (`with_dims`) and `dim_names` lists only real dimensions.
        gone.sort_unstable();
        gone.dedup();
        for &k in gone.iter().rev() {
            self.syms.remove(k);
            for n in self.g.iter_mut() {
                for d in n.sym.iter_mut().flatten() {
                    for (j, _) in &mut d.pows {
                        if *j > k {
                            *j -= 1;
                        }
                    }
                }
            }
        }
    }

    /// Whether symbol `k` is the unnamed dimension `axis` of placeholder `node`, which no
    /// node uses yet, and no other placeholder shares.
    fn unnamed_and_unused(&self, node: NodeId, axis: usize, k: usize) -> bool {
        let n = &self.g[node];
        let uses = |s: &Vec<SymDim>, skip: Option<usize>| {
            s.iter()
                .enumerate()
                .any(|(a, d)| Some(a) != skip && d.pows.iter().any(|&(j, _)| j == k))
        };
        n.op == crate::ops::Op::Leaf(crate::ops::Leaf::Placeholder)
            && self.syms.names.get(k) == Some(&format!("{}.{axis}", n.name))
            && !self.g.iter().any(|m| m.inputs.contains(&node))
            && self.g.iter_enumerated().all(|(i, m)| {
                let skip = (i == node).then_some(axis);
                m.sym.as_ref().is_none_or(|s| !uses(s, skip))
            })
    }

    /// Whether any node of the graph has a dimension known only at run time.
    pub fn has_unknown_dims(&self) -> bool {
        !self.syms.names.is_empty()
    }

    /// The names of the graph's run-time dimensions, in the order they were declared.
    pub fn dim_names(&self) -> &[String] {
        &self.syms.names
    }

    /// `t`'s dimensions: each known, named (known at run time), or a product of those.
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{DType, Dim, Graph};
    /// let mut g = Graph::new();
    /// let x = g.placeholder_dyn("x", [Dim::named("batch"), 28.into(), 28.into()], DType::F32)?;
    /// let flat = g.reshape(x, &[-1, 784])?;
    /// assert_eq!(g.dims(flat)?, [Dim::named("batch"), Dim::Known(784)]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn dims(&self, t: Tensor) -> Result<Vec<Dim>> {
        Ok(node_dims(&self.syms, self.get(t, "Graph::dims")?))
    }

    /// The graph with its run-time dimensions given sizes by name (`[("batch", 64)]`): a
    /// static graph whose tensors are this graph's (same nodes, names and handles), rebuilt
    /// with those sizes as a session does for a run. For tools that need static shapes
    /// (ONNX export, a printed plan). Every dimension needs a size.
    pub fn with_dims(&self, dims: &[(&str, usize)]) -> Result<Graph> {
        let Binding(b) = self.binding_named(dims)?;
        if let Some(k) = b.iter().position(Option::is_none) {
            return Err(Error::Feed {
                kind: crate::FeedKind::Missing,
                name: self.syms.names[k].clone(),
                message: "this run-time dimension needs a size".into(),
            });
        }
        Ok(self.bind(&Binding(b))?.0)
    }

    /// A graph file's node with run-time `dims` as the builders see it: its shape in probe
    /// sizes. Every name must be a dimension of an earlier placeholder.
    pub(crate) fn probe_def(
        &self,
        nd: &super::NodeDef,
        dims: &[Dim],
    ) -> std::result::Result<super::NodeDef, String> {
        let sym = dims
            .iter()
            .map(|d| self.sym_dim(d))
            .collect::<std::result::Result<Vec<_>, String>>()?;
        let shape = self
            .syms
            .probe_a_shape(&sym)
            .ok_or_else(|| format!("{} is too large", dims_text(dims)))?;
        Ok(super::NodeDef {
            shape,
            ..nd.clone()
        })
    }

    pub(crate) fn sym_dim(&self, d: &Dim) -> std::result::Result<SymDim, String> {
        let find = |name: &str| {
            self.syms
                .names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| {
                    format!(
                        "dimension {} is not a dimension of an earlier placeholder",
                        super::def::quote(name)
                    )
                })
        };
        match d {
            Dim::Known(n) => Ok(SymDim {
                factor: *n,
                pows: Vec::new(),
            }),
            Dim::Named(name) => Ok(SymDim {
                factor: 1,
                pows: vec![(find(name)?, 1)],
            }),
            Dim::Product(k, names) => {
                let mut pows: Vec<(usize, u32)> = Vec::new();
                for name in names {
                    let s = find(name)?;
                    match pows.iter_mut().find(|(t, _)| *t == s) {
                        Some((_, e)) => *e += 1,
                        None => pows.push((s, 1)),
                    }
                }
                pows.sort_unstable();
                Ok(SymDim { factor: *k, pows })
            }
            Dim::Unknown => Err("an unknown dimension needs a name here".into()),
        }
    }

    /// An error for a builder that turns its inputs' sizes into values (index tables) and so
    /// cannot take run-time dimensions yet.
    pub(crate) fn static_only(
        &self,
        op: &str,
        xs: &[Tensor],
        loc: &'static std::panic::Location<'static>,
    ) -> Result<()> {
        for &x in xs {
            if self.owns(x) && self.g[x.node].sym.is_some() {
                return Err(Error::build(
                    op,
                    loc,
                    format!(
                        "does not take tensors with dimensions known only at run time yet ('{}' is {})",
                        self.g[x.node].name,
                        dims_text(&node_dims(&self.syms, &self.g[x.node]))
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The binding that `dims` names (`[("batch", 64)]`); every name must be one of the
    /// graph's, and dimensions not named stay unbound.
    pub(crate) fn binding_named(&self, dims: &[(&str, usize)]) -> Result<Binding> {
        let names = &self.syms.names;
        let mut b = vec![None; names.len()];
        for &(name, size) in dims {
            let k = names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| Error::Feed {
                    kind: crate::FeedKind::Name,
                    name: name.to_string(),
                    message: format!(
                        "the graph has no run-time dimension of this name (it has: {})",
                        names.join(", ")
                    ),
                })?;
            b[k] = Some(size);
        }
        Ok(Binding(b))
    }

    /// Whether `t`'s value depends on sizes known only at run time (its shape, or an input's).
    pub(crate) fn is_dynamic(&self, t: Tensor) -> bool {
        self.owns(t) && self.g[t.node].dynamic
    }

    /// The shape a builder computes with: the real shape of a static node, the probe shape of
    /// a node with unknown dimensions (see the module docs). Only code that turns no
    /// dimension into a value, or reads them through [`Graph::size_of`], may use it.
    pub(crate) fn probe_shape(&self, t: Tensor) -> Result<&Shape> {
        Ok(&self.get(t, "Graph::shape")?.shape)
    }

    /// Sizes for the symbols from fed placeholders: `feeds` pairs a placeholder node with the
    /// shape fed to it. Two feeds that disagree on a shared dimension, a feed of the wrong
    /// rank or with a wrong known size, are errors naming the placeholder(s) and dimension.
    pub(crate) fn binding_of(&self, feeds: &[(NodeId, &Shape)]) -> Result<Binding> {
        let mut values: Vec<Option<(usize, &str)>> = vec![None; self.syms.names.len()];
        for &(n, shape) in feeds {
            let node = &self.g[n];
            let Some(sym) = &node.sym else { continue };
            let feed_err = |message: String| Error::Feed {
                kind: crate::FeedKind::Shape,
                name: node.name.clone(),
                message,
            };
            let declared = dims_text(&node_dims(&self.syms, node));
            if shape.rank() != sym.len() {
                return Err(feed_err(format!(
                    "expected rank {} ({declared}), got {}",
                    sym.len(),
                    shape
                )));
            }
            for (axis, (d, &size)) in sym.iter().zip(shape.dims()).enumerate() {
                match d.pows.as_slice() {
                    [] if d.factor != size => {
                        return Err(feed_err(format!(
                            "expected {declared}, got {shape}: axis {axis} must be {}",
                            d.factor
                        )))
                    }
                    [] => {}
                    &[(k, 1)] if d.factor == 1 => match values[k] {
                        Some((v, other)) if v != size => {
                            return Err(feed_err(format!(
                                "dimension '{}' is {size} here (axis {axis} of {shape}) but {v} in the feed of '{other}'",
                                self.syms.names[k]
                            )))
                        }
                        Some(_) => {}
                        None => values[k] = Some((size, node.name.as_str())),
                    },
                    _ => {
                        return Err(Error::Internal(format!(
                            "placeholder '{}' has a product dimension",
                            node.name
                        )))
                    }
                }
            }
        }
        Ok(Binding(
            values.into_iter().map(|v| v.map(|v| v.0)).collect(),
        ))
    }

    /// The graph with `binding`'s sizes: every node whose value depends on a bound size is
    /// rebuilt through the public builders (so every shape rule, limit and attribute is
    /// derived again from concrete shapes); the rest is copied. Node ids and names are kept,
    /// so the graph's tensors stay valid handles. A node that needs a symbol the binding
    /// lacks is copied as it is and reported in the second result (it must not be run).
    pub(crate) fn bind(&self, binding: &Binding) -> Result<(Graph, IdVec<NodeId, bool>)> {
        let mut g = Graph {
            id: self.id,
            g: IdVec::with_capacity(self.g.len()),
            names: HashMap::with_capacity(self.names.len()),
            suffixes: HashMap::new(),
            name_scopes: Vec::new(),
            device_scopes: Vec::new(),
            syms: Symbols::default(),
        };
        let mut unbound = IdVec::filled(false, self.g.len());
        for (i, node) in self.g.iter_enumerated() {
            let stale = node.inputs.iter().any(|&n| unbound[n]);
            let shape = match &node.sym {
                _ if !node.dynamic || stale => None,
                Some(sym) => self
                    .syms
                    .eval_shape(sym, |k| binding.0.get(k).copied().flatten()),
                None => Some(node.shape.clone()),
            };
            // Static, or needing a size the binding lacks: copied as it is.
            let Some(shape) = shape else {
                unbound[i] = stale || node.dynamic;
                let mut copy = node.clone();
                copy.dynamic = false;
                copy.sym = None;
                g.names.insert(copy.name.clone(), i);
                g.g.push(copy);
                continue;
            };
            let nd = super::NodeDef {
                name: node.name.clone(),
                op: node.op.clone(),
                inputs: Vec::new(),
                shape,
                dims: None,
                dtype: node.dtype,
                device: node.device,
            };
            let inputs: Vec<Tensor> = node
                .inputs
                .iter()
                .map(|&n| Tensor {
                    graph: self.id,
                    node: n,
                })
                .collect();
            let at_run = |message: String| Error::Build {
                op: node.op.name().to_string(),
                location: node.location,
                message: format!(
                    "with {}: {message} (node '{}')",
                    binding.describe(self),
                    node.name
                ),
                kind: crate::BuildKind::Other,
            };
            g.device_scopes.extend(node.device);
            let before = g.len();
            let probe_in: Vec<Shape> = node
                .inputs
                .iter()
                .map(|&n| self.g[n].shape.clone())
                .collect();
            let r = node
                .op
                .family()
                .rebind(&mut g, &nd, &inputs, &probe_in, &node.shape);
            g.device_scopes.clear();
            let t = r.map_err(|e| match e {
                Error::Build { message, .. } | Error::GraphDef { message, .. } => at_run(message),
                other => other,
            })?;
            if g.len() != before + 1 || t.node != i {
                return Err(Error::Internal(format!(
                    "binding rebuilt '{}' as {} nodes",
                    node.name,
                    g.len() - before
                )));
            }
            let built = &mut g.g[i];
            if built.shape != nd.shape || built.dtype != node.dtype {
                return Err(at_run(format!(
                    "the output is {} {}, expected {} {}",
                    built.dtype, built.shape, node.dtype, nd.shape
                )));
            }
            let old = std::mem::replace(&mut built.name, node.name.clone());
            built.location = node.location;
            built.origin = node.origin.clone();
            g.names.remove(&old);
            g.names.insert(node.name.clone(), i);
        }
        Ok((g, unbound))
    }
}

/// Why a node whose size is not a product of known and run-time sizes cannot be built.
pub(crate) fn not_a_product(syms: &Symbols, sym: &[SymDim]) -> String {
    let dims: Vec<Dim> = sym.iter().map(|d| syms.dim(d)).collect();
    format!(
        "its output shape depends on dimensions known only at run time in a way a graph cannot carry (only known sizes and products of run-time sizes can be: a convolution or concatenation along an unknown axis cannot); read as {} (give those dimensions a size, or reshape first)",
        dims_text(&dims)
    )
}
