//! The import walk: inputs, initializers, then each node through its translator (one small
//! function per op, grouped by family in `ops_*.rs`), with values known at import kept on
//! the host so shape arithmetic folds there.

use super::proto::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, ModelProto, NodeProto,
    ValueInfoProto,
};
use super::tensor::{checked_dims, decode, map_dtype, HostValue};
use super::{fail, ImportOptions, Model, ValueInfo};
use crate::graph::Dim;
use crate::{DType, Device, Error, Graph, HostTensor, Result, Session, SessionOptions, Tensor};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::rc::Rc;

mod checks;
mod fold;
mod narrow;
mod run_time;

use fold::{batch_norm_folds, fold_batch_norm, Fold};
use narrow::{narrow_of_name, narrow_output};
use run_time::{probe_like, unrolled_over_run_time, PROBE_LIKE};

/// The lowest `ai.onnx` opset accepted.
const MIN_OPSET: i64 = 7;
/// The most elements an integer initializer may have and stay a host value during import
/// (shapes, indices, axes are far smaller; weights are not folded on the host).
const HOST_INTS_MAX: usize = 1 << 16;

/// The newest `ai.onnx` opset (onnx 1.23's): a later one may change an op's meaning.
const MAX_OPSET: i64 = 28;

/// A value during import: known on the host, or a graph tensor.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    Host(Rc<HostValue>),
    T(Tensor),
}

impl From<Tensor> for Val {
    fn from(t: Tensor) -> Val {
        Val::T(t)
    }
}

impl From<HostValue> for Val {
    fn from(h: HostValue) -> Val {
        Val::Host(Rc::new(h))
    }
}

/// One node being translated: its identity (for errors), attributes and input names.
pub(crate) struct Node<'a> {
    pub op: &'a str,
    /// The op's domain as the node names it (`""` for ai.onnx).
    pub domain: &'a str,
    pub opset: i64,
    pub inputs: Vec<Option<&'a str>>,
    pub n_outputs: usize,
    attrs: HashMap<&'a str, &'a AttributeProto>,
    /// The model's directory: a tensor attribute's external data lives there too.
    dir: Option<Rc<Path>>,
    /// An attribute read as another type than it is declared ([`Node::expect`]).
    bad_attr: std::cell::RefCell<Option<String>>,
}

/// The translator's context: the graph being built and every value so far.
pub(crate) struct Cx<'a> {
    pub g: Graph,
    pub opts: &'a ImportOptions,
    vals: HashMap<String, Val>,
    /// Constants made from host values, by value name (so a weight is one node).
    made: HashMap<String, Tensor>,
    /// Graph tensors computed from constants alone: evaluable at import.
    consts: HashSet<Tensor>,
    /// Floating-point initializers that become variables ([`ImportOptions::trainable`]),
    /// unless an op needs one's value at import first.
    weights: HashSet<String>,
    /// The model's directory (external data) and `ai.onnx` opset, and the translators: what
    /// a subgraph (`Scan`'s body, `If`'s branches) is walked with.
    dir: Option<Rc<Path>>,
    opset: i64,
    translate: Translate,
    /// Host values computed from run-time dimensions (their probe sizes, see `graph/dims.rs`):
    /// fine as a shape argument, which the graph reads back as dimensions, but never data.
    sym: HashSet<String>,
    /// Whether the node being translated reads such a value or a tensor of run-time shape.
    cur_sym: bool,
    /// The ONNX element type of values held in a wider dtype: 8/16-bit integers (in i32),
    /// uint64 (in u32) and bfloat16 (in f32); see `narrow`.
    narrow: HashMap<String, i32>,
}

/// A translator's error before it is tied to its node.
pub(crate) fn bad(why: impl Into<crate::onnx::Refused>) -> Error {
    fail("", why)
}

pub(crate) fn build(
    model: &ModelProto,
    dir: Option<&Path>,
    opts: &ImportOptions,
    translate: Translate,
) -> Result<Model> {
    let mut opset = None;
    for o in &model.opset_import {
        match o.domain.as_deref().unwrap_or("") {
            "" | "ai.onnx" => opset = o.version,
            _ => {}
        }
    }
    let opset = opset.ok_or_else(|| fail("model", "no ai.onnx opset is imported"))?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(fail(
            "model",
            super::unsupported(format!(
                "opset {opset} is unsupported (opsets {MIN_OPSET} to {MAX_OPSET} are)"
            )),
        ));
    }
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| fail("model", "has no graph"))?;
    let mut cx = Cx {
        g: Graph::new(),
        opts,
        vals: HashMap::new(),
        made: HashMap::new(),
        consts: HashSet::new(),
        weights: HashSet::new(),
        dir: dir.map(Rc::from),
        opset,
        translate,
        sym: HashSet::new(),
        cur_sym: false,
        narrow: HashMap::new(),
    };
    for init in &graph.initializer {
        let name = init.name.clone().unwrap_or_default();
        let v = decode(init, dir, opts)?;
        if narrow::is_held_wide(init.data_type.unwrap_or(0)) {
            cx.narrow.insert(name.clone(), init.data_type.unwrap_or(0));
        }
        // Scalars are a model's constants (a clip bound, a divisor), not its weights.
        if opts.trainable && matches!(v, HostValue::Floats(_)) && !v.shape().is_empty() {
            cx.weights.insert(name.clone());
        }
        // Large integer initializers (a quantized model's weights) become constants now:
        // kept as i64 host values until the import ends, they took twice their size in the
        // graph again (ffn_base int8: 151 MB beside 76 MB). A translator that needs their
        // values reads them back from the graph (`Cx::host`).
        let val = match &v {
            HostValue::Ints { v: ints, .. } if ints.len() > HOST_INTS_MAX => {
                let t = cx.constant(&v, &name)?;
                cx.made.insert(name.clone(), t);
                Val::T(t)
            }
            _ => v.into(),
        };
        cx.vals.insert(name, val);
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(fail(
            "model",
            super::unsupported("sparse initializers are unsupported"),
        ));
    }
    let mut inputs = Vec::new();
    for vi in &graph.input {
        let name = vi.name.clone().unwrap_or_default();
        if cx.vals.contains_key(&name) {
            continue; // an initializer's default (IR < 4): the initializer is the value
        }
        if let Some(h) = opts.constant_inputs.get(&name) {
            cx.vals
                .insert(name, HostValue::from_host(h.clone())?.into());
            continue;
        }
        let (dims, dtype, onnx_type) = value_type(vi, opts)?;
        let t =
            cx.g.placeholder_dyn(&name, dims.clone(), dtype)
                .map_err(|e| fail(format!("input '{name}'"), e.to_string()))?;
        let mut v = t;
        if let Some(e) = narrow_of_name(&onnx_type) {
            cx.narrow.insert(name.clone(), e);
            // A fed bfloat16/float8 input is rounded to its type as it enters.
            v = narrow::round_input(&mut cx.g, e, t)?;
        }
        cx.vals.insert(name.clone(), Val::T(v));
        inputs.push(ValueInfo::new(name, t, dims, dtype, onnx_type));
    }
    checks::unique_names(graph).map_err(|e| checks::relabel(e, "graph"))?;
    checks::pinned_dims_exist(graph, &opts.dims.keys().collect::<Vec<_>>())
        .map_err(|e| checks::relabel(e, "ImportOptions::dims (--dim)"))?;
    let folds = batch_norm_folds(&cx, graph);
    for (i, node) in graph.node.iter().enumerate() {
        match folds.get(&i) {
            Some(Fold::Skip) => {}
            Some(Fold::Conv(bn)) => match fold_batch_norm(&mut cx, node, &graph.node[*bn]) {
                Some(folded) => translate_node(&mut cx, &folded, i)?,
                None => {
                    translate_node(&mut cx, node, i)?;
                    translate_node(&mut cx, &graph.node[*bn], *bn)?;
                }
            },
            None => translate_node(&mut cx, node, i)?,
        }
    }
    let mut outputs = Vec::new();
    for vi in &graph.output {
        let name = vi.name.clone().unwrap_or_default();
        let at = || format!("output '{name}'");
        if !cx.vals.contains_key(&name) {
            return Err(fail(
                at(),
                "is not produced by any node, input or initializer",
            ));
        }
        let t = cx.tensor(&name)?;
        let onnx_type = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(super::proto::type_proto::Value::TensorType(tt)) => {
                elem_name(tt.elem_type.unwrap_or(0))
            }
            _ => String::new(),
        };
        let dims = cx.g.dims(t)?;
        let dtype = cx.g.dtype(t)?;
        outputs.push(ValueInfo::new(name, t, dims, dtype, onnx_type));
    }
    // Every value computed in the graph, by its ONNX name (`--fetch` of an inner value).
    let mut values: Vec<(String, Tensor)> = cx
        .vals
        .iter()
        .filter_map(|(n, v)| match v {
            Val::T(t) => Some((n.clone(), *t)),
            Val::Host(_) => cx.made.get(n).map(|t| (n.clone(), *t)),
        })
        .collect();
    values.sort();
    Ok(Model {
        graph: cx.g,
        inputs,
        outputs,
        values: values.into_iter().collect(),
        opset,
    })
}

fn elem_name(elem: i32) -> String {
    super::proto::tensor_proto::DataType::try_from(elem)
        .map_or_else(|_| elem.to_string(), |d| d.as_str_name().to_string())
}

/// An input's dimensions and dtype: `dim_param`s pinned by the options are sizes, the rest
/// run-time dimensions shared by name (an unnamed one is named `"<input>:<axis>"`).
fn value_type(vi: &ValueInfoProto, opts: &ImportOptions) -> Result<(Vec<Dim>, DType, String)> {
    use super::proto::tensor_shape_proto::dimension::Value as D;
    use super::proto::type_proto::Value;
    let name = vi.name.as_deref().unwrap_or("");
    let at = || format!("input '{name}'");
    let Some(Value::TensorType(tt)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(fail(
            at(),
            super::unsupported("is not a tensor (sequences, maps and optionals are unsupported)"),
        ));
    };
    let elem = tt.elem_type.unwrap_or(0);
    let dtype = map_dtype(elem, opts).map_err(|m| fail(at(), m))?;
    let shape = tt
        .shape
        .as_ref()
        .ok_or_else(|| fail(at(), "has no declared shape"))?;
    let mut known = Vec::new();
    let mut dims = Vec::new();
    for (axis, d) in shape.dim.iter().enumerate() {
        let sym = match &d.value {
            Some(D::DimValue(v)) => {
                known.push(*v);
                dims.push(None);
                continue;
            }
            Some(D::DimParam(p)) if !p.is_empty() => p.clone(),
            // An unnamed unknown dimension (as skl2onnx writes a batch) is named by position.
            _ => format!("{name}:{axis}"),
        };
        match opts.dims.get(&sym) {
            Some(&v) => {
                // Past i64 it is past every cap: never a wrapped negative size.
                known.push(i64::try_from(v).unwrap_or(i64::MAX));
                dims.push(None);
            }
            None => {
                known.push(1);
                dims.push(Some(sym));
            }
        }
    }
    let sizes = checked_dims(&known, opts).map_err(|m| fail(at(), m))?;
    let dims = sizes
        .into_iter()
        .zip(dims)
        .map(|(k, s)| s.map_or(Dim::Known(k), Dim::Named))
        .collect();
    Ok((dims, dtype, elem_name(elem)))
}

/// The translators of every op (in `ops_*.rs`, chained by `onnx/mod.rs`): handed in so that
/// this module, which the translators use, does not depend on them.
pub(crate) type Translate = fn(&mut Cx, &Node) -> Result<Vec<Val>>;

fn translate_node(cx: &mut Cx, proto: &NodeProto, index: usize) -> Result<()> {
    let (opset, translate) = (cx.opset, cx.translate);
    let op = proto.op_type.as_deref().unwrap_or("");
    let name = proto
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("#{index}"));
    let at = || format!("node '{name}' ({op}, opset {opset})");
    let domain = proto.domain.as_deref().unwrap_or("");
    let inputs: Vec<Option<&str>> = proto
        .input
        .iter()
        .map(|s| Some(s.as_str()).filter(|s| !s.is_empty()))
        .collect();
    for i in inputs.iter().flatten() {
        if !cx.vals.contains_key(*i) {
            return Err(fail(
                at(),
                format!("uses '{i}', which no earlier node, input or initializer defines"),
            ));
        }
    }
    let node = Node {
        op,
        domain,
        opset,
        inputs,
        n_outputs: proto.output.len(),
        attrs: proto
            .attribute
            .iter()
            .map(|a| (a.name.as_deref().unwrap_or(""), a))
            .collect(),
        dir: cx.dir.clone(),
        bad_attr: Default::default(),
    };
    // CastLike reads only its second input's dtype.
    let value_inputs = if op == "CastLike" {
        &node.inputs[..1]
    } else {
        &node.inputs[..]
    };
    let all_const = value_inputs.iter().flatten().all(|i| cx.is_const(i));
    // A subgraph may read outer values that are not the node's inputs: its outputs are
    // constant only if every leaf they depend on is.
    let has_body = node
        .attrs
        .values()
        .any(|a| a.g.is_some() || !a.graphs.is_empty());
    // A node reading a run-time shape (a dynamic tensor, or a host value computed from one).
    let reads_sym = node.inputs.iter().flatten().any(|i| cx.sym.contains(*i))
        || node.inputs.iter().flatten().any(|i| match cx.vals.get(*i) {
            Some(Val::T(t)) => cx.g.node(*t).is_ok_and(|n| n.dynamic),
            _ => false,
        });
    let sym_args = node.inputs.iter().flatten().any(|i| cx.sym.contains(*i));
    if reads_sym {
        if let Some(what) = unrolled_over_run_time(cx, &node)? {
            return Err(fail(
                at(),
                cx.sym_message_about(&format!("the run-time dimensions {what}")),
            ));
        }
    }
    let outer = std::mem::replace(&mut cx.cur_sym, sym_args);
    let result = translate(cx, &node);
    let result = match node.attr_error() {
        Some(e) if result.is_ok() => Err(e),
        _ => result,
    };
    cx.cur_sym = outer;
    let outs = result.map_err(|e| checks::placed(e, &at()))?;
    // A tensor built from a run-time size that does not change with it took the size as a
    // number (a slice of a fixed-size tensor up to `seq`): refused, never baked in.
    for out in &outs {
        if let Val::T(t) = out {
            if sym_args && !cx.g.node(*t).is_ok_and(|n| n.dynamic) {
                return Err(fail(at(), cx.sym_message("is used as a fixed size")));
            }
        }
    }
    for (i, out) in proto.output.iter().enumerate() {
        if out.is_empty() {
            continue;
        }
        let Some(v) = outs.get(i) else {
            return Err(fail(
                at(),
                super::unsupported(format!("output {i} ('{out}') is unsupported")),
            ));
        };
        let v = &narrow_output(cx, &node, proto, i, v.clone())
            .map_err(|e| fail(at(), e.to_string()))?;
        if let (Val::T(t), true) = (v, all_const) {
            if !has_body || cx.fed_leaf(*t)?.is_none() {
                cx.consts.insert(*t);
            }
        }
        cx.made.remove(out);
        match v {
            Val::Host(h) if reads_sym && probe_like(h) => cx.sym.insert(out.clone()),
            _ => cx.sym.remove(out),
        };
        cx.vals.insert(out.clone(), v.clone());
    }
    Ok(())
}

impl Node<'_> {
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attrs.get(name).copied()
    }

    fn kind(a: &AttributeProto) -> AttributeType {
        AttributeType::try_from(a.r#type.unwrap_or(0)).unwrap_or(AttributeType::Undefined)
    }

    /// Integer attribute `name`, if present.
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        self.expect(name, AttributeType::Int);
        self.attr(name).and_then(|a| a.i)
    }

    /// Integer attribute `name`, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.expect(name, AttributeType::Int);
        self.attr(name).and_then(|a| a.i).unwrap_or(default)
    }

    /// Float attribute `name`, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.expect(name, AttributeType::Float);
        self.attr(name).and_then(|a| a.f).unwrap_or(default)
    }

    /// Integer-list attribute `name`, if present.
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.expect(name, AttributeType::Ints);
        self.attr(name)
            .filter(|a| Self::kind(a) == AttributeType::Ints || !a.ints.is_empty())
            .map(|a| a.ints.clone())
    }

    /// Float-list attribute `name`, if present.
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.expect(name, AttributeType::Floats);
        self.attr(name)
            .filter(|a| Self::kind(a) == AttributeType::Floats || !a.floats.is_empty())
            .map(|a| a.floats.clone())
    }

    /// String attribute `name`, if present.
    pub fn string(&self, name: &str) -> Option<String> {
        self.expect(name, AttributeType::String);
        self.attr(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }

    /// String-list attribute `name`, if present.
    pub fn strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name)
            .filter(|a| Self::kind(a) == AttributeType::Strings || !a.strings.is_empty())
            .map(|a| {
                a.strings
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            })
    }

    /// Tensor attribute `name`, if present.
    pub fn tensor(&self, name: &str, opts: &ImportOptions) -> Result<Option<HostValue>> {
        match self.attr(name).and_then(|a| a.t.as_ref()) {
            Some(t) => decode(t, self.dir.as_deref(), opts).map(Some),
            None => Ok(None),
        }
    }

    /// Graph attribute `name` (a `Scan` body, an `If` branch), or an error if it is absent.
    pub fn graph(&self, name: &str) -> Result<&GraphProto> {
        self.attr(name)
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| bad(format!("graph attribute '{name}' is required")))
    }

    /// Whether attribute `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }

    /// Input `i`'s name if it is given.
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs.get(i).copied().flatten()
    }

    /// Input `i`'s name, or an error if the node lacks it.
    pub fn req(&self, i: usize) -> Result<&str> {
        self.input(i)
            .ok_or_else(|| bad(format!("input {i} is required")))
    }

    /// An error for an attribute value wgflow cannot run.
    pub fn unsupported(&self, what: impl std::fmt::Display) -> Error {
        bad(crate::onnx::unsupported(format!("unsupported: {what}")))
    }
}

impl Cx<'_> {
    /// The error for a value computed from run-time dimensions that `what` (it would become
    /// data, or a fixed size): a graph with run-time dimensions cannot express it, so they
    /// must be pinned.
    pub fn sym_error(&self, what: &str) -> Error {
        bad(self.sym_message(what))
    }

    fn sym_message(&self, what: &str) -> String {
        self.sym_message_about(&format!(
            "a value computed from the run-time dimensions {what}"
        ))
    }

    /// `what` (a whole clause), then the advice to pin the run-time dimensions.
    fn sym_message_about(&self, what: &str) -> String {
        let names: Vec<String> = self
            .g
            .dim_names()
            .iter()
            .map(|n| format!("--dim {n}=SIZE"))
            .collect();
        format!(
            "{what}; import with those dimensions pinned (ImportOptions::dims, {})",
            names.join(" ")
        )
    }

    /// The ONNX element type of `name` when it is held in a wider dtype (8/16-bit integers,
    /// uint64, bfloat16).
    pub fn narrow_elem(&self, name: &str) -> Option<i32> {
        self.narrow.get(name).copied()
    }

    /// Whether `name` is a host value computed from run-time dimensions.
    pub fn is_sym(&self, name: &str) -> bool {
        self.sym.contains(name)
    }

    fn is_const(&self, name: &str) -> bool {
        if self.weights.contains(name) {
            return false;
        }
        match self.vals.get(name) {
            Some(Val::Host(_)) => true,
            Some(Val::T(t)) => self.consts.contains(t),
            None => false,
        }
    }

    fn val(&self, name: &str) -> Result<&Val> {
        self.vals
            .get(name)
            .ok_or_else(|| bad(format!("'{name}' is not defined")))
    }

    /// Value `name` as a graph tensor (a host value becomes one constant node).
    pub fn tensor(&mut self, name: &str) -> Result<Tensor> {
        if let Some(t) = self.made.get(name) {
            return Ok(*t);
        }
        let t = match self.val(name)?.clone() {
            Val::T(t) => return Ok(t),
            Val::Host(_) if self.sym.contains(name) => {
                return Err(self.sym_error(&format!("('{name}') would become a tensor's data")))
            }
            Val::Host(h) if self.weights.contains(name) => {
                let host = h.to_host(&format!("initializer '{name}'"))?;
                self.g.variable(name, host)?
            }
            Val::Host(h) => self.constant(&h, name)?,
        };
        self.made.insert(name.to_string(), t);
        Ok(t)
    }

    /// Input `i` of `node` as a graph tensor.
    pub fn t(&mut self, node: &Node, i: usize) -> Result<Tensor> {
        let name = node.req(i)?;
        self.tensor(name)
    }

    /// Input `i` of `node` as it is: a host value or a graph tensor.
    pub fn val_of(&self, node: &Node, i: usize) -> Result<Val> {
        self.val(node.req(i)?).cloned()
    }

    /// Optional input `i` of `node` as a graph tensor.
    pub fn opt_t(&mut self, node: &Node, i: usize) -> Result<Option<Tensor>> {
        node.input(i).map(|n| self.tensor(n)).transpose()
    }

    /// A constant node holding `h` (`what` names it in a range error).
    pub fn constant(&mut self, h: &HostValue, what: &str) -> Result<Tensor> {
        if self.cur_sym && probe_like(h) {
            return Err(self.sym_error(&format!("('{what}') would become a tensor's data")));
        }
        let host = h.to_host(&format!("value '{what}'"))?;
        let t = self.g.constant(host)?;
        self.consts.insert(t);
        Ok(t)
    }

    /// A scalar constant of `dtype`.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> Result<Tensor> {
        if self.cur_sym && v.abs() >= PROBE_LIKE {
            return Err(self.sym_error("would become a scalar constant"));
        }
        let h = match dtype {
            DType::F32 => HostTensor::scalar(v as f32),
            DType::F16 => HostTensor::scalar(crate::f16::from_f64(v)),
            DType::I32 => HostTensor::scalar(v as i32),
            DType::U32 => HostTensor::scalar(v as u32),
            DType::Bool => HostTensor::scalar(v != 0.0),
        };
        let t = self.g.constant(h)?;
        self.consts.insert(t);
        Ok(t)
    }

    /// Input `i`'s static shape.
    pub fn shape(&self, node: &Node, i: usize) -> Result<Vec<usize>> {
        Ok(match self.val(node.req(i)?)? {
            Val::Host(h) => h.shape().to_vec(),
            Val::T(t) => self.g.probe_shape(*t)?.dims().to_vec(),
        })
    }

    /// Input `i`'s dtype.
    pub fn dtype(&self, node: &Node, i: usize) -> Result<DType> {
        Ok(match self.val(node.req(i)?)? {
            Val::Host(h) => h.dtype(),
            Val::T(t) => self.g.dtype(*t)?,
        })
    }

    /// Input `i`'s value, which must be known at import (evaluated on cpu:0 if it was
    /// computed in the graph from constants).
    pub fn host(&mut self, node: &Node, i: usize) -> Result<Rc<HostValue>> {
        let name = node.req(i)?;
        if self.weights.contains(name) {
            if self.made.contains_key(name) {
                return Err(bad(format!(
                    "input {i} ('{name}') is a trainable initializer (a variable) and must also be known at import; import it without `trainable`"
                )));
            }
            // Needed at import (a scale, a bound): it stays a constant.
            self.weights.remove(name);
        }
        match self.val(name)?.clone() {
            Val::Host(h) => Ok(h),
            Val::T(t) if self.consts.contains(&t) => {
                let h = Rc::new(HostValue::from_host(self.eval(t)?)?);
                self.vals.insert(name.to_string(), Val::Host(h.clone()));
                self.made.insert(name.to_string(), t);
                Ok(h)
            }
            Val::T(t) => match self.fed_leaf(t)?.filter(|&l| self.is_placeholder(l)) {
                // Name the graph input to make constant (ImportOptions::constant_inputs).
                Some(p) if p != t => Err(bad(format!(
                    "input {i} must be known at import, but '{name}' is computed from the fed input ('{}'); make that input a constant (ImportOptions::constant_inputs)",
                    self.g.name(p)?
                ))),
                _ => Err(bad(format!(
                    "input {i} ('{name}') must be known at import (a constant, or computed from constants and shapes); a value fed at run time is unsupported here"
                ))),
            },
        }
    }

    /// Input `i`'s integer values, known at import.
    pub fn ints(&mut self, node: &Node, i: usize) -> Result<Vec<i64>> {
        match &*self.host(node, i)? {
            HostValue::Ints { v, .. } => Ok(v.clone()),
            HostValue::Floats(_) => Err(bad(format!("input {i} must hold integers"))),
        }
    }

    /// Optional input `i`'s integer values, known at import.
    pub fn opt_ints(&mut self, node: &Node, i: usize) -> Result<Option<Vec<i64>>> {
        match node.input(i) {
            Some(_) => self.ints(node, i).map(Some),
            None => Ok(None),
        }
    }

    /// Whether input `i` is present and known at import.
    pub fn known(&self, node: &Node, i: usize) -> bool {
        node.input(i).is_some_and(|n| self.is_const(n))
    }

    /// A value as a graph tensor (a host value becomes a constant node).
    pub fn val_tensor(&mut self, v: &Val, what: &str) -> Result<Tensor> {
        match v {
            Val::T(t) => Ok(*t),
            Val::Host(h) => self.constant(h, what),
        }
    }

    /// Walk subgraph `body` in a nested scope: its inputs bound to `inputs`, every outer
    /// value visible, its own names forgotten afterwards. Returns its outputs in order.
    pub fn subgraph(&mut self, body: &GraphProto, inputs: Vec<Val>) -> Result<Vec<Val>> {
        if body.input.len() != inputs.len() {
            return Err(bad(format!(
                "the subgraph '{}' takes {} inputs, {} are bound",
                body.name.as_deref().unwrap_or(""),
                body.input.len(),
                inputs.len()
            )));
        }
        let (vals, made) = (self.vals.clone(), self.made.clone());
        let result = self.walk_subgraph(body, inputs);
        self.vals = vals;
        // Constants made for outer values stay (a weight every iteration reads is one node);
        // those made for the subgraph's own names go.
        let own = body.initializer.iter().filter_map(|t| t.name.as_ref());
        let own = own.chain(body.input.iter().filter_map(|v| v.name.as_ref()));
        for name in own.chain(body.node.iter().flat_map(|n| &n.output)) {
            match made.get(name) {
                Some(t) => self.made.insert(name.clone(), *t),
                None => self.made.remove(name),
            };
        }
        result
    }

    fn walk_subgraph(&mut self, body: &GraphProto, inputs: Vec<Val>) -> Result<Vec<Val>> {
        if !body.sparse_initializer.is_empty() {
            return Err(bad("sparse initializers in a subgraph are unsupported"));
        }
        checks::unique_names(body)?;
        for init in &body.initializer {
            let v = decode(init, self.dir.as_deref(), self.opts)?;
            let name = init.name.clone().unwrap_or_default();
            self.made.remove(&name);
            self.vals.insert(name, v.into());
        }
        for (vi, v) in body.input.iter().zip(inputs) {
            let name = vi.name.clone().unwrap_or_default();
            self.made.remove(&name);
            self.vals.insert(name, v);
        }
        for (i, node) in body.node.iter().enumerate() {
            translate_node(self, node, i)?;
        }
        body.output
            .iter()
            .map(|vi| self.val(vi.name.as_deref().unwrap_or("")).cloned())
            .collect()
    }

    /// A leaf (no inputs) that `t` depends on and that is not a constant: a fed input (or a
    /// random draw), if there is one.
    fn fed_leaf(&self, t: Tensor) -> Result<Option<Tensor>> {
        let mut seen = HashSet::new();
        let mut stack = vec![t];
        while let Some(x) = stack.pop() {
            if self.consts.contains(&x) || !seen.insert(x) {
                continue;
            }
            let ins = self.g.inputs(x)?;
            if ins.is_empty() {
                return Ok(Some(x));
            }
            stack.extend(ins);
        }
        Ok(None)
    }

    fn is_placeholder(&self, t: Tensor) -> bool {
        self.g
            .node(t)
            .is_ok_and(|n| matches!(n.op, crate::ops::Op::Leaf(crate::ops::Leaf::Placeholder)))
    }

    /// The f32 values (with their dims) of constants `names`, those computed in the graph
    /// evaluated in one run on cpu:0; `None` if any is not a constant f32 tensor.
    pub fn constant_f32s(&mut self, names: &[&str]) -> Option<Vec<(Vec<usize>, Vec<f32>)>> {
        let f32s = |h: &HostTensor| {
            (h.dtype() == DType::F32).then_some(())?;
            Some((h.dims().to_vec(), h.to_f32().ok()?))
        };
        let mut out = Vec::with_capacity(names.len());
        let mut fetch = Vec::new();
        for name in names {
            if !self.is_const(name) {
                return None;
            }
            match self.vals.get(*name)? {
                Val::Host(h) => match &**h {
                    HostValue::Floats(t) => out.push(Some(f32s(t)?)),
                    HostValue::Ints { .. } => return None,
                },
                Val::T(t) => {
                    fetch.push((out.len(), *t));
                    out.push(None);
                }
            }
        }
        if !fetch.is_empty() {
            let ts: Vec<Tensor> = fetch.iter().map(|f| f.1).collect();
            for ((i, _), v) in fetch.iter().zip(self.eval_all(&ts).ok()?) {
                out[*i] = Some(f32s(&v)?);
            }
        }
        out.into_iter().collect()
    }

    fn eval(&mut self, t: Tensor) -> Result<HostTensor> {
        self.eval_all(&[t])?
            .pop()
            .ok_or_else(|| Error::Internal("a run returned no value".into()))
    }

    /// The values of constant tensors `ts`, in one run of a `cpu:0` session.
    fn eval_all(&mut self, ts: &[Tensor]) -> Result<Vec<HostTensor>> {
        let opts = SessionOptions {
            default_device: Some(Device::Cpu),
            visible_devices: Some(Vec::new()),
            ..Default::default()
        };
        Session::new(&self.g, opts)?.run(&[], ts)
    }
}
