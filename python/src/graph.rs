//! `NativeGraph` and `NativeTensor`: the library's [`Graph`] behind a mutex, its [`Tensor`]
//! handles, and one entry point per builder family.
//!
//! Builders are reached through [`PyGraph::op`], a table from the builder's name to the call
//! (the Python layer gives each a method and an operator). Scopes opened with Python's `with`
//! are a stack here, replayed around each build through the library's closure scopes, so the
//! library decides names and devices exactly as it does for Rust callers.

use crate::convert::{host_from_array, numpy_name, parse_dtype};
use crate::errors::{poisoned, IntoPy};
use numpy::PyUntypedArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;
use wgflow::ops::custom::{Invocations, OutputRule, RawWgsl};
use wgflow::ops::index::ScatterReduce;
use wgflow::ops::{BinaryOp, Expr, ScanOp, SmallFloat, UnaryOp};
use wgflow::train::{Adam, Optimizer, Sgd};
use wgflow::{Axes, Conv2dOptions, DType, Dim, Graph, Initializer, PadMode, SliceArg, Tensor};

#[derive(Clone)]
enum Scope {
    Name(String),
    Device(String),
}

/// Build with `f` inside `scopes`, outermost first.
fn scoped<T>(
    g: &mut Graph,
    scopes: &[Scope],
    f: &mut dyn FnMut(&mut Graph) -> wgflow::Result<T>,
) -> wgflow::Result<T> {
    match scopes.split_first() {
        None => f(g),
        Some((Scope::Name(n), rest)) => g.name_scope(n, |g| scoped(g, rest, f)),
        Some((Scope::Device(d), rest)) => g.device(d, |g| scoped(g, rest, f)),
    }
}

/// A handle to one node's output of one graph.
#[pyclass(name = "NativeTensor", module = "wgflow._wgflow", frozen)]
#[derive(Clone, Copy)]
pub struct PyTensor {
    pub t: Tensor,
}

#[pymethods]
impl PyTensor {
    /// The node's index in its graph (build order).
    #[getter]
    fn index(&self) -> usize {
        self.t.index()
    }
}

/// A dataflow graph under construction.
#[pyclass(name = "NativeGraph", module = "wgflow._wgflow", frozen)]
pub struct PyGraph {
    pub inner: Mutex<Graph>,
    scopes: Mutex<Vec<Scope>>,
}

impl PyGraph {
    pub fn wrap(g: Graph) -> Self {
        PyGraph {
            inner: Mutex::new(g),
            scopes: Mutex::new(Vec::new()),
        }
    }

    fn build<T>(
        &self,
        py: Python<'_>,
        mut f: impl FnMut(&mut Graph) -> wgflow::Result<T>,
    ) -> PyResult<T> {
        let scopes = self.scopes.lock().map_err(poisoned)?.clone();
        let r = {
            let mut g = self.inner.lock().map_err(poisoned)?;
            scoped(&mut g, &scopes, &mut f)
        };
        r.py_err(py)
    }

    fn one(
        &self,
        py: Python<'_>,
        f: impl FnMut(&mut Graph) -> wgflow::Result<Tensor>,
    ) -> PyResult<Vec<PyTensor>> {
        Ok(vec![PyTensor {
            t: self.build(py, f)?,
        }])
    }

    pub fn read<T>(&self, f: impl FnOnce(&Graph) -> T) -> PyResult<T> {
        let g = self.inner.lock().map_err(poisoned)?;
        Ok(f(&g))
    }
}

/// Attribute `key` of a builder call, if given (and not `None`).
fn get<'py, T>(attrs: Option<&Bound<'py, PyDict>>, key: &str) -> PyResult<Option<T>>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    let Some(a) = attrs else { return Ok(None) };
    match a.get_item(key)? {
        Some(v) if !v.is_none() => v
            .extract::<T>()
            .map(Some)
            .map_err(|e| PyTypeError::new_err(format!("argument '{key}': {e}"))),
        _ => Ok(None),
    }
}

/// Attribute `key`, required.
fn req<'py, T>(attrs: Option<&Bound<'py, PyDict>>, key: &str, op: &str) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    get(attrs, key)?.ok_or_else(|| PyTypeError::new_err(format!("{op}: missing argument '{key}'")))
}

/// `axis=None` (all axes), an int, or a list of ints.
/// The `dtype` attribute, float32 when absent.
fn dtype_attr(attrs: Option<&Bound<'_, PyDict>>) -> PyResult<DType> {
    parse_dtype(&get::<String>(attrs, "dtype")?.unwrap_or_else(|| "float32".into()))
}

fn axes(attrs: Option<&Bound<'_, PyDict>>, key: &str) -> PyResult<Axes> {
    if let Ok(Some(a)) = get::<isize>(attrs, key) {
        return Ok(Axes::List(vec![a]));
    }
    Ok(match get::<Vec<isize>>(attrs, key)? {
        Some(v) => Axes::List(v),
        None => Axes::All,
    })
}

fn pair(v: Option<Vec<usize>>, default: usize, what: &str) -> PyResult<[usize; 2]> {
    match v.as_deref() {
        None => Ok([default, default]),
        Some([a]) => Ok([*a, *a]),
        Some([a, b]) => Ok([*a, *b]),
        Some(other) => Err(PyValueError::new_err(format!(
            "{what} takes one or two sizes, not {}",
            other.len()
        ))),
    }
}

/// A run-time dimension (`None` or a name) or a size.
fn dim(d: &Bound<'_, PyAny>) -> PyResult<Dim> {
    if d.is_none() {
        return Ok(Dim::from(None::<usize>));
    }
    if let Ok(n) = d.extract::<usize>() {
        return Ok(Dim::from(n));
    }
    if let Ok(s) = d.extract::<String>() {
        return Ok(Dim::named(&s));
    }
    Err(PyTypeError::new_err(format!(
        "a dimension is a non-negative int, None or a name, not {}",
        d.repr()?
    )))
}

fn dims_to_py(py: Python<'_>, dims: &[Dim]) -> PyResult<Vec<Py<PyAny>>> {
    dims.iter()
        .map(|d| match d.known() {
            Some(n) => Ok(n.into_pyobject(py)?.into_any().unbind()),
            None => Ok(d.to_string().into_pyobject(py)?.into_any().unbind()),
        })
        .collect()
}

/// One node of a `vectorize` expression, in topological order (operands are earlier nodes).
fn expr_node(node: &Bound<'_, PyAny>, done: &[Expr]) -> PyResult<Expr> {
    let kind: String = node.get_item(0)?.extract()?;
    let at = |i: usize| -> PyResult<Expr> {
        let k: usize = node.get_item(i)?.extract()?;
        done.get(k).cloned().ok_or_else(|| {
            PyValueError::new_err(format!("expression node refers to later node {k}"))
        })
    };
    Ok(match kind.as_str() {
        "in" => Expr::input(node.get_item(1)?.extract()?),
        "lit" => {
            let d = parse_dtype(&node.get_item(1)?.extract::<String>()?)?;
            let v: f64 = node.get_item(2)?.extract()?;
            let bits = match d {
                DType::F32 => (v as f32).to_bits(),
                DType::I32 => (v as i32) as u32,
                DType::U32 => v as u32,
                DType::Bool => u32::from(v != 0.0),
                DType::F16 => wgflow::f16::from_f64(v).to_bits().into(),
            };
            Expr::lit(d, bits)
        }
        "un" => {
            let n: String = node.get_item(1)?.extract()?;
            let op = UnaryOp::from_name(&n)
                .ok_or_else(|| PyTypeError::new_err(format!("no elementwise function '{n}'")))?;
            Expr::unary(op, at(2)?)
        }
        "bin" => {
            let n: String = node.get_item(1)?.extract()?;
            let op = BinaryOp::from_name(&n)
                .ok_or_else(|| PyTypeError::new_err(format!("no elementwise operator '{n}'")))?;
            Expr::binary(op, at(2)?, at(3)?)
        }
        "sel" => Expr::select(at(1)?, at(2)?, at(3)?),
        "cast" => Expr::cast(
            parse_dtype(&node.get_item(1)?.extract::<String>()?)?,
            at(2)?,
        ),
        other => {
            return Err(PyTypeError::new_err(format!(
                "unknown expression node '{other}'"
            )))
        }
    })
}

/// A raw WGSL kernel from the Python layer's description: a dict with `name`, `source`,
/// `entry_point`, `output` (an input index, or a `(shape, dtype)` pair), `invocations`
/// (`None`: one per output element) and `gradients` (a list of `(input, dict)`).
fn raw_spec(spec: &Bound<'_, PyDict>, depth: usize) -> PyResult<RawWgsl> {
    let s = Some(spec);
    let name = req::<String>(s, "name", "RawKernel")?;
    let source = req::<String>(s, "source", "RawKernel")?;
    let entry = req::<String>(s, "entry_point", "RawKernel")?;
    let out = spec
        .get_item("output")?
        .ok_or_else(|| PyTypeError::new_err("RawKernel: missing argument 'output'"))?;
    let output = if let Ok(i) = out.extract::<usize>() {
        OutputRule::LikeInput(i)
    } else if let Ok((shape, dtype)) = out.extract::<(Vec<usize>, String)>() {
        OutputRule::Fixed(shape.into(), parse_dtype(&dtype)?)
    } else {
        return Err(PyTypeError::new_err(format!(
            "RawKernel '{name}': output is an input index or a (shape, dtype) pair, not {}",
            out.repr()?
        )));
    };
    let invocations = match get::<u64>(s, "invocations")? {
        None => Invocations::PerOutputElement,
        Some(n) => Invocations::Fixed(n),
    };
    let mut k = RawWgsl::new(&name, &source, &entry, output, invocations);
    if let Some(grads) = spec.get_item("gradients")? {
        if !grads.is_none() {
            if depth > 0 {
                return Err(PyTypeError::new_err(format!(
                    "RawKernel '{name}': a gradient kernel cannot have gradient kernels of its own"
                )));
            }
            for item in grads.try_iter()? {
                let (i, g): (usize, Bound<'_, PyDict>) = item?.extract()?;
                k = k.with_gradient(i, raw_spec(&g, depth + 1)?);
            }
        }
    }
    Ok(k)
}

/// The names of the unary primitives (the library's elementwise table), which the Python
/// layer makes methods and functions; the `round_to` formats are one method, `round_to`.
#[pyfunction]
pub fn unary_primitives() -> Vec<&'static str> {
    UnaryOp::ALL
        .into_iter()
        .filter(|u| !matches!(u, UnaryOp::RoundTo(_)))
        .map(UnaryOp::name)
        .collect()
}

/// The names of the binary primitives (the library's elementwise table).
#[pyfunction]
pub fn binary_primitives() -> Vec<&'static str> {
    BinaryOp::ALL.into_iter().map(BinaryOp::name).collect()
}

fn initializer(init: &str, seed: u64) -> PyResult<Initializer> {
    Ok(match init {
        "zeros" => Initializer::Zeros,
        "ones" => Initializer::Ones,
        "glorot_uniform" => Initializer::GlorotUniform { seed },
        "he_normal" => Initializer::HeNormal { seed },
        other => {
            return Err(PyValueError::new_err(format!(
                "initializer '{other}' is not one of zeros, ones, glorot_uniform, he_normal"
            )))
        }
    })
}

#[pymethods]
impl PyGraph {
    #[new]
    fn new() -> Self {
        PyGraph::wrap(Graph::new())
    }

    /// Enter a name scope (`with g.name_scope(...)`).
    fn push_name_scope(&self, name: &str) -> PyResult<()> {
        self.scopes
            .lock()
            .map_err(poisoned)?
            .push(Scope::Name(name.to_string()));
        Ok(())
    }

    /// Enter a device scope (`with g.device(...)`); the spec is checked here.
    fn push_device(&self, spec: &str) -> PyResult<()> {
        // A spec that does not parse is a bad value; a device that is missing is found
        // (and reported as a device error) when a session places the graph.
        wgflow::DeviceSpec::parse(spec).map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.scopes
            .lock()
            .map_err(poisoned)?
            .push(Scope::Device(spec.to_string()));
        Ok(())
    }

    /// Leave the innermost scope.
    fn pop_scope(&self) -> PyResult<()> {
        self.scopes.lock().map_err(poisoned)?.pop();
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        self.read(|g| g.len())
    }

    fn placeholder(
        &self,
        py: Python<'_>,
        name: &str,
        shape: Vec<Bound<'_, PyAny>>,
        dtype: &str,
    ) -> PyResult<PyTensor> {
        let d = parse_dtype(dtype)?;
        let dims = shape.iter().map(dim).collect::<PyResult<Vec<Dim>>>()?;
        let t = self.build(py, |g| g.placeholder_dyn(name, dims.clone(), d))?;
        Ok(PyTensor { t })
    }

    fn constant(&self, py: Python<'_>, value: &Bound<'_, PyUntypedArray>) -> PyResult<PyTensor> {
        let h = host_from_array(py, value)?;
        let t = self.build(py, |g| g.constant(h.clone()))?;
        Ok(PyTensor { t })
    }

    /// A variable with an initial value.
    fn variable(
        &self,
        py: Python<'_>,
        name: &str,
        value: &Bound<'_, PyUntypedArray>,
    ) -> PyResult<PyTensor> {
        let h = host_from_array(py, value)?;
        let t = self.build(py, |g| g.variable(name, h.clone()))?;
        Ok(PyTensor { t })
    }

    /// A variable of a shape, dtype and initializer (`zeros`, `ones`, `glorot_uniform`,
    /// `he_normal`).
    #[pyo3(signature = (name, shape, dtype, init, seed=0))]
    fn variable_init(
        &self,
        py: Python<'_>,
        name: &str,
        shape: Vec<usize>,
        dtype: &str,
        init: &str,
        seed: u64,
    ) -> PyResult<PyTensor> {
        let d = parse_dtype(dtype)?;
        let init = initializer(init, seed)?;
        let t = self.build(py, |g| {
            g.variable_with(name, shape.clone(), d, init.clone())
        })?;
        Ok(PyTensor { t })
    }

    /// `t`'s dimensions: ints, and names (strings) for dimensions known only at run time.
    fn shape(&self, py: Python<'_>, t: PyRef<'_, PyTensor>) -> PyResult<Vec<Py<PyAny>>> {
        let dims = self.read(|g| g.dims(t.t))?.py_err(py)?;
        dims_to_py(py, &dims)
    }

    fn dtype(&self, py: Python<'_>, t: PyRef<'_, PyTensor>) -> PyResult<&'static str> {
        Ok(numpy_name(self.read(|g| g.dtype(t.t))?.py_err(py)?))
    }

    fn name(&self, py: Python<'_>, t: PyRef<'_, PyTensor>) -> PyResult<String> {
        self.read(|g| g.name(t.t).map(str::to_string))?.py_err(py)
    }

    fn device(&self, py: Python<'_>, t: PyRef<'_, PyTensor>) -> PyResult<Option<String>> {
        let d = self.read(|g| g.requested_device(t.t))?.py_err(py)?;
        Ok(d.map(|d| d.to_string()))
    }

    fn op_name(&self, py: Python<'_>, t: PyRef<'_, PyTensor>) -> PyResult<String> {
        self.read(|g| g.node(t.t).map(|n| n.op.name().to_string()))?
            .py_err(py)
    }

    /// The tensor a node name names.
    fn tensor(&self, name: &str) -> PyResult<Option<PyTensor>> {
        Ok(self.read(|g| g.tensor(name))?.map(|t| PyTensor { t }))
    }

    fn variables(&self) -> PyResult<Vec<PyTensor>> {
        Ok(self
            .read(|g| g.variables())?
            .into_iter()
            .map(|t| PyTensor { t })
            .collect())
    }

    /// Gradients of `sum(y)` with respect to `xs` (`None` where `y` does not depend on one).
    /// Gradients of `sum(ys[0] * grad_ys[0]) + …` (each `grad_ys[k]` 1 when not given), as
    /// `tf.gradients(ys, xs, grad_ys)`.
    #[pyo3(signature = (ys, xs, grad_ys=None))]
    fn gradients(
        &self,
        py: Python<'_>,
        ys: Vec<PyRef<'_, PyTensor>>,
        xs: Vec<PyRef<'_, PyTensor>>,
        grad_ys: Option<Vec<PyRef<'_, PyTensor>>>,
    ) -> PyResult<Vec<Option<PyTensor>>> {
        let ys: Vec<Tensor> = ys.iter().map(|t| t.t).collect();
        let xs: Vec<Tensor> = xs.iter().map(|t| t.t).collect();
        let grad_ys: Option<Vec<Tensor>> = grad_ys.map(|g| g.iter().map(|t| t.t).collect());
        let gs = self.build(py, |g| g.gradients_with(&ys, &xs, grad_ys.as_deref()))?;
        Ok(gs.into_iter().map(|o| o.map(|t| PyTensor { t })).collect())
    }

    /// The train op of `optimizer` (`sgd`, `momentum`, `nesterov`, `adam`, `adamw`)
    /// minimizing `loss` over `vars`.
    #[pyo3(signature = (optimizer, lr, loss, vars, momentum=0.9, weight_decay=0.01))]
    #[allow(clippy::too_many_arguments)]
    fn minimize(
        &self,
        py: Python<'_>,
        optimizer: &str,
        lr: f32,
        loss: PyRef<'_, PyTensor>,
        vars: Vec<PyRef<'_, PyTensor>>,
        momentum: f32,
        weight_decay: f32,
    ) -> PyResult<PyTensor> {
        let vars: Vec<Tensor> = vars.iter().map(|t| t.t).collect();
        let opt: Box<dyn Optimizer> = match optimizer {
            "sgd" => Box::new(Sgd::new(lr)),
            "momentum" => Box::new(Sgd::momentum(lr, momentum)),
            "nesterov" => Box::new(Sgd::nesterov(lr, momentum)),
            "adam" => Box::new(Adam::new(lr)),
            "adamw" => Box::new(Adam::adamw(lr, weight_decay)),
            other => return Err(PyValueError::new_err(format!("no optimizer '{other}'"))),
        };
        let t = self.build(py, |g| opt.minimize(g, loss.t, &vars))?;
        Ok(PyTensor { t })
    }

    /// A user elementwise function (`vectorize`): `nodes` is its expression in topological
    /// order, the last node the result.
    fn apply_expr(
        &self,
        py: Python<'_>,
        name: &str,
        nodes: Vec<Bound<'_, PyAny>>,
        inputs: Vec<PyRef<'_, PyTensor>>,
    ) -> PyResult<PyTensor> {
        let mut done: Vec<Expr> = Vec::with_capacity(nodes.len());
        for n in &nodes {
            let e = expr_node(n, &done)?;
            done.push(e);
        }
        let expr = done
            .pop()
            .ok_or_else(|| PyValueError::new_err("empty expression"))?;
        let xs: Vec<Tensor> = inputs.iter().map(|t| t.t).collect();
        let t = self.build(py, |g| g.apply_expr(name, expr.clone(), &xs))?;
        Ok(PyTensor { t })
    }

    fn save(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        self.read(|g| g.save(path))?.py_err(py)
    }

    #[staticmethod]
    fn load(py: Python<'_>, path: &str) -> PyResult<PyGraph> {
        Graph::load(path).py_err(py).map(PyGraph::wrap)
    }

    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        self.read(|g| g.to_json())?.py_err(py)
    }

    /// A raw WGSL kernel over `inputs` (`spec` as [`raw_spec`] reads it), validated by naga
    /// here; the node runs on a GPU only.
    fn raw_kernel(
        &self,
        py: Python<'_>,
        spec: Bound<'_, PyDict>,
        inputs: Vec<PyRef<'_, PyTensor>>,
    ) -> PyResult<PyTensor> {
        let k = raw_spec(&spec, 0)?;
        let xs: Vec<Tensor> = inputs.iter().map(|t| t.t).collect();
        Ok(PyTensor {
            t: self.build(py, |g| g.raw_kernel(&k, &xs))?,
        })
    }

    /// Build op `name` of the library's builder over `inputs` with keyword `attrs`; returns
    /// its outputs (one, except for `split`).
    #[pyo3(signature = (name, inputs, attrs=None))]
    fn op(
        &self,
        py: Python<'_>,
        name: &str,
        inputs: Vec<PyRef<'_, PyTensor>>,
        attrs: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Vec<PyTensor>> {
        let xs: Vec<Tensor> = inputs.iter().map(|t| t.t).collect();
        let a = attrs.as_ref();
        let arity = |n: usize| -> PyResult<()> {
            if xs.len() == n {
                Ok(())
            } else {
                Err(PyTypeError::new_err(format!(
                    "{name} takes {n} tensor input(s), {} given",
                    xs.len()
                )))
            }
        };
        macro_rules! table {
            (unary: $($u:ident)*; binary: $($b:ident)*;) => {
                match name {
                    $(stringify!($u) => {
                        arity(1)?;
                        return self.one(py, |g| g.$u(xs[0]));
                    })*
                    $(stringify!($b) => {
                        arity(2)?;
                        return self.one(py, |g| g.$b(xs[0], xs[1]));
                    })*
                    _ => {}
                }
            };
        }
        // Every primitive by its row of the library's elementwise table.
        if let Some(u) = UnaryOp::from_name(name) {
            arity(1)?;
            return self.one(py, |g| g.unary_op(u, xs[0]));
        }
        if let Some(b) = BinaryOp::from_name(name) {
            arity(2)?;
            return self.one(py, |g| g.binary_op(b, xs[0], xs[1]));
        }
        table! {
            unary: square silu zeros_like ones_like;
            binary: matmul assign assign_add assign_sub sparse_softmax_cross_entropy gather_nd;
        }
        macro_rules! reduce {
            ($($r:ident)*) => {
                match name {
                    $(stringify!($r) => {
                        arity(1)?;
                        let ax = axes(a, "axis")?;
                        let keep = get::<bool>(a, "keepdims")?.unwrap_or(false);
                        return self.one(py, |g| g.$r(xs[0], ax.clone(), keep));
                    })*
                    _ => {}
                }
            };
        }
        reduce! { sum mean max min prod all any logsumexp }
        match name {
            "select" => {
                arity(3)?;
                self.one(py, |g| g.select(xs[0], xs[1], xs[2]))
            }
            "cast" => {
                arity(1)?;
                let d = parse_dtype(&req::<String>(a, "dtype", name)?)?;
                self.one(py, |g| g.cast(xs[0], d))
            }
            "gelu" => {
                arity(1)?;
                let approx = get::<bool>(a, "approximate")?.unwrap_or(false);
                self.one(py, |g| g.gelu(xs[0], approx))
            }
            "leaky_relu" | "elu" => {
                arity(1)?;
                let alpha =
                    get::<f32>(a, "alpha")?.unwrap_or(if name == "elu" { 1.0 } else { 0.01 });
                if name == "elu" {
                    self.one(py, |g| g.elu(xs[0], alpha))
                } else {
                    self.one(py, |g| g.leaky_relu(xs[0], alpha))
                }
            }
            "clip" => {
                arity(1)?;
                let lo = req::<f64>(a, "min", name)?;
                let hi = req::<f64>(a, "max", name)?;
                self.one(py, |g| g.clip(xs[0], lo, hi))
            }
            "var" | "std" => {
                arity(1)?;
                let ax = axes(a, "axis")?;
                let ddof = get::<usize>(a, "ddof")?.unwrap_or(0);
                let keep = get::<bool>(a, "keepdims")?.unwrap_or(false);
                if name == "var" {
                    self.one(py, |g| g.var(xs[0], ax.clone(), ddof, keep))
                } else {
                    self.one(py, |g| g.std(xs[0], ax.clone(), ddof, keep))
                }
            }
            "argmax" | "argmin" => {
                arity(1)?;
                let axis = get::<isize>(a, "axis")?;
                let keep = get::<bool>(a, "keepdims")?.unwrap_or(false);
                if name == "argmax" {
                    self.one(py, |g| g.argmax(xs[0], axis, keep))
                } else {
                    self.one(py, |g| g.argmin(xs[0], axis, keep))
                }
            }
            "softmax" | "log_softmax" | "cumsum" | "cumprod" | "expand_dims" => {
                arity(1)?;
                let axis = get::<isize>(a, "axis")?.unwrap_or(-1);
                match name {
                    "softmax" => self.one(py, |g| g.softmax(xs[0], axis)),
                    "log_softmax" => self.one(py, |g| g.log_softmax(xs[0], axis)),
                    "cumsum" | "cumprod" => {
                        let op = if name == "cumsum" {
                            ScanOp::Sum
                        } else {
                            ScanOp::Prod
                        };
                        let exclusive = get::<bool>(a, "exclusive")?.unwrap_or(false);
                        let reverse = get::<bool>(a, "reverse")?.unwrap_or(false);
                        self.one(py, |g| g.cumulative(op, xs[0], axis, exclusive, reverse))
                    }
                    _ => self.one(py, |g| g.expand_dims(xs[0], axis)),
                }
            }
            "layer_norm" => {
                let (gamma, beta) = match xs.len() {
                    1 => (None, None),
                    3 => (Some(xs[1]), Some(xs[2])),
                    n => {
                        return Err(PyTypeError::new_err(format!(
                            "layer_norm takes x, or x, gamma and beta; {n} inputs given"
                        )))
                    }
                };
                let axis = get::<isize>(a, "axis")?.unwrap_or(-1);
                let eps = get::<f32>(a, "eps")?.unwrap_or(1e-5);
                self.one(py, |g| g.layer_norm(xs[0], gamma, beta, axis, eps))
            }
            "batch_norm" => {
                arity(5)?;
                let eps = get::<f32>(a, "eps")?.unwrap_or(1e-5);
                self.one(py, |g| g.batch_norm(xs[0], xs[1], xs[2], xs[3], xs[4], eps))
            }
            "linear" => {
                if !(2..=3).contains(&xs.len()) {
                    return Err(PyTypeError::new_err("linear takes x, w and an optional b"));
                }
                let b = xs.get(2).copied();
                self.one(py, |g| g.linear(xs[0], xs[1], b))
            }
            "one_hot" => {
                arity(1)?;
                let depth = req::<usize>(a, "depth", name)?;
                self.one(py, |g| g.one_hot(xs[0], depth))
            }
            "dropout" => {
                arity(1)?;
                let rate = req::<f32>(a, "rate", name)?;
                let seed = get::<u64>(a, "seed")?.unwrap_or(0);
                self.one(py, |g| g.dropout(xs[0], rate, seed))
            }
            "reshape" => {
                arity(1)?;
                let shape = req::<Vec<isize>>(a, "shape", name)?;
                self.one(py, |g| g.reshape(xs[0], &shape))
            }
            "transpose" => {
                arity(1)?;
                let perm = match get::<Vec<isize>>(a, "perm")? {
                    Some(p) => p,
                    None => {
                        let rank = self.read(|g| g.dims(xs[0]).map(|d| d.len()))?.py_err(py)?;
                        (0..rank as isize).rev().collect()
                    }
                };
                self.one(py, |g| g.transpose(xs[0], &perm))
            }
            "squeeze" => {
                arity(1)?;
                let ax = match get::<isize>(a, "axis") {
                    Ok(Some(x)) => Some(vec![x]),
                    _ => get::<Vec<isize>>(a, "axis")?,
                };
                self.one(py, |g| g.squeeze(xs[0], ax.as_deref()))
            }
            "broadcast_to" => {
                arity(1)?;
                let shape = req::<Vec<usize>>(a, "shape", name)?;
                self.one(py, |g| g.broadcast_to(xs[0], &shape))
            }
            "slice" => {
                arity(1)?;
                let args = req::<Vec<(Option<isize>, Option<isize>, isize)>>(a, "args", name)?;
                let args: Vec<SliceArg> = args
                    .into_iter()
                    .map(|(start, stop, step)| SliceArg { start, stop, step })
                    .collect();
                self.one(py, |g| g.slice(xs[0], &args))
            }
            "flip" => {
                arity(1)?;
                let ax = axes(a, "axis")?;
                self.one(py, |g| g.flip(xs[0], ax.clone()))
            }
            "concat" | "stack" => {
                let axis = get::<isize>(a, "axis")?.unwrap_or(0);
                if name == "concat" {
                    self.one(py, |g| g.concat(&xs, axis))
                } else {
                    self.one(py, |g| g.stack(&xs, axis))
                }
            }
            "split" => {
                arity(1)?;
                let sections = req::<usize>(a, "sections", name)?;
                let axis = get::<isize>(a, "axis")?.unwrap_or(0);
                let ts = self.build(py, |g| g.split(xs[0], sections, axis))?;
                Ok(ts.into_iter().map(|t| PyTensor { t }).collect())
            }
            "pad" => {
                arity(1)?;
                let pads = req::<Vec<(usize, usize)>>(a, "pads", name)?;
                let mode = match get::<String>(a, "mode")?.as_deref() {
                    None | Some("constant") => {
                        PadMode::Constant(get::<f64>(a, "value")?.unwrap_or(0.0))
                    }
                    Some("reflect") => PadMode::Reflect,
                    Some(m) => {
                        return Err(PyValueError::new_err(format!(
                            "pad mode '{m}' is not constant or reflect"
                        )))
                    }
                };
                self.one(py, |g| g.pad(xs[0], &pads, mode))
            }
            "tile" => {
                arity(1)?;
                let reps = req::<Vec<usize>>(a, "reps", name)?;
                self.one(py, |g| g.tile(xs[0], &reps))
            }
            "take" | "gather_elements" => {
                arity(2)?;
                let axis = get::<isize>(a, "axis")?.unwrap_or(0);
                if name == "take" {
                    self.one(py, |g| g.take(xs[0], xs[1], axis))
                } else {
                    self.one(py, |g| g.gather_elements(xs[0], xs[1], axis))
                }
            }
            "conv2d" => {
                if !(2..=3).contains(&xs.len()) {
                    return Err(PyTypeError::new_err(
                        "conv2d takes x, w and an optional bias",
                    ));
                }
                let opts = Conv2dOptions {
                    stride: pair(get(a, "stride")?, 1, "stride")?,
                    padding: pair(get(a, "padding")?, 0, "padding")?,
                    dilation: pair(get(a, "dilation")?, 1, "dilation")?,
                    groups: get::<usize>(a, "groups")?.unwrap_or(1),
                };
                let b = xs.get(2).copied();
                self.one(py, |g| g.conv2d(xs[0], xs[1], b, opts))
            }
            "conv2d_backprop_input" | "conv2d_backprop_filter" => {
                arity(2)?;
                let opts = Conv2dOptions {
                    stride: pair(get(a, "stride")?, 1, "stride")?,
                    padding: pair(get(a, "padding")?, 0, "padding")?,
                    dilation: pair(get(a, "dilation")?, 1, "dilation")?,
                    groups: get::<usize>(a, "groups")?.unwrap_or(1),
                };
                if name == "conv2d_backprop_input" {
                    let hw = pair(Some(req(a, "input_hw", name)?), 0, "input_hw")?;
                    self.one(py, |g| g.conv2d_backprop_input(xs[0], xs[1], hw, opts))
                } else {
                    let k = pair(Some(req(a, "kernel", name)?), 0, "kernel")?;
                    self.one(py, |g| g.conv2d_backprop_filter(xs[0], xs[1], k, opts))
                }
            }
            "max_pool2d_grad" | "avg_pool2d_grad" => {
                let k = pair(Some(req(a, "kernel", name)?), 1, "kernel")?;
                let s = pair(get(a, "stride")?, 0, "stride")?;
                let s = if s == [0, 0] { k } else { s };
                let p = pair(get(a, "padding")?, 0, "padding")?;
                if name == "max_pool2d_grad" {
                    arity(2)?;
                    self.one(py, |g| g.max_pool2d_grad(xs[0], xs[1], k, s, p))
                } else {
                    arity(1)?;
                    let hw = pair(Some(req(a, "input_hw", name)?), 0, "input_hw")?;
                    self.one(py, |g| g.avg_pool2d_grad(xs[0], hw, k, s, p))
                }
            }
            "max_pool2d" | "avg_pool2d" => {
                arity(1)?;
                let k = pair(Some(req(a, "kernel", name)?), 1, "kernel")?;
                let s = pair(get(a, "stride")?, 0, "stride")?;
                let s = if s == [0, 0] { k } else { s };
                let p = pair(get(a, "padding")?, 0, "padding")?;
                if name == "max_pool2d" {
                    self.one(py, |g| g.max_pool2d(xs[0], k, s, p))
                } else {
                    self.one(py, |g| g.avg_pool2d(xs[0], k, s, p))
                }
            }
            "zeros"
            | "ones"
            | "full"
            | "random_uniform"
            | "random_normal"
            | "stateful_random_uniform"
            | "stateful_random_normal" => {
                arity(0)?;
                let shape = req::<Vec<usize>>(a, "shape", name)?;
                let d = dtype_attr(a)?;
                let seed = get::<u64>(a, "seed")?.unwrap_or(0);
                match name {
                    "zeros" => self.one(py, |g| g.zeros(shape.clone(), d)),
                    "ones" => self.one(py, |g| g.ones(shape.clone(), d)),
                    "full" => {
                        let v = req::<f64>(a, "value", name)?;
                        self.one(py, |g| g.full(shape.clone(), d, v))
                    }
                    "random_uniform" | "stateful_random_uniform" => {
                        let lo = get::<f32>(a, "low")?.unwrap_or(0.0);
                        let hi = get::<f32>(a, "high")?.unwrap_or(1.0);
                        if name == "random_uniform" {
                            self.one(py, |g| g.random_uniform(shape.clone(), lo, hi, seed))
                        } else {
                            self.one(py, |g| {
                                g.stateful_random_uniform(shape.clone(), lo, hi, seed)
                            })
                        }
                    }
                    _ => {
                        let m = get::<f32>(a, "mean")?.unwrap_or(0.0);
                        let s = get::<f32>(a, "std")?.unwrap_or(1.0);
                        if name == "random_normal" {
                            self.one(py, |g| g.random_normal(shape.clone(), m, s, seed))
                        } else {
                            self.one(py, |g| g.stateful_random_normal(shape.clone(), m, s, seed))
                        }
                    }
                }
            }
            "arange" => {
                arity(0)?;
                let start = req::<f64>(a, "start", name)?;
                let stop = req::<f64>(a, "stop", name)?;
                let step = get::<f64>(a, "step")?.unwrap_or(1.0);
                let d = dtype_attr(a)?;
                self.one(py, |g| g.arange(start, stop, step, d))
            }
            "round_to" => {
                arity(1)?;
                let f = req::<String>(a, "format", name)?;
                let to = match f.as_str() {
                    "float8_e4m3fn" => SmallFloat::F8E4M3Fn,
                    "float8_e4m3fnuz" => SmallFloat::F8E4M3FnUz,
                    "float8_e5m2" => SmallFloat::F8E5M2,
                    "float8_e5m2fnuz" => SmallFloat::F8E5M2FnUz,
                    "float4_e2m1fn" => SmallFloat::F4E2M1,
                    other => {
                        return Err(PyValueError::new_err(format!(
                            "round_to: format '{other}' is not one of float8_e4m3fn, \
                             float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float4_e2m1fn"
                        )))
                    }
                };
                self.one(py, |g| g.round_to(xs[0], to))
            }
            "top_k" => {
                arity(1)?;
                let k = req::<usize>(a, "k", name)?;
                let axis = get::<isize>(a, "axis")?.unwrap_or(-1);
                let largest = get::<bool>(a, "largest")?.unwrap_or(true);
                let (v, i) = self.build(py, |g| g.top_k(xs[0], k, axis, largest))?;
                Ok(vec![PyTensor { t: v }, PyTensor { t: i }])
            }
            "scatter_nd" | "scatter_elements" => {
                arity(3)?;
                let reduce = match get::<String>(a, "reduction")?.as_deref() {
                    None | Some("none") => ScatterReduce::None,
                    Some("add") => ScatterReduce::Add,
                    Some("mul") => ScatterReduce::Mul,
                    Some("max") => ScatterReduce::Max,
                    Some("min") => ScatterReduce::Min,
                    Some(r) => {
                        return Err(PyValueError::new_err(format!(
                            "{name}: reduction '{r}' is not none, add, mul, max or min"
                        )))
                    }
                };
                if name == "scatter_nd" {
                    self.one(py, |g| g.scatter_nd(xs[0], xs[1], xs[2], reduce))
                } else {
                    let axis = get::<isize>(a, "axis")?.unwrap_or(0);
                    self.one(py, |g| {
                        g.scatter_elements(xs[0], xs[1], xs[2], axis, reduce)
                    })
                }
            }
            "scatter_add" => {
                arity(3)?;
                let axis = get::<isize>(a, "axis")?.unwrap_or(0);
                self.one(py, |g| g.scatter_add(xs[0], xs[1], xs[2], axis))
            }
            "segment_sum" => {
                arity(2)?;
                let n = req::<usize>(a, "num_segments", name)?;
                let axis = get::<isize>(a, "axis")?.unwrap_or(0);
                self.one(py, |g| g.segment_sum(xs[0], xs[1], n, axis))
            }
            "attention" => {
                arity(3)?;
                let causal = get::<bool>(a, "causal")?.unwrap_or(false);
                let scale = get::<f32>(a, "scale")?;
                self.one(py, |g| g.attention(xs[0], xs[1], xs[2], causal, scale))
            }
            "eye" => {
                arity(0)?;
                let n = req::<usize>(a, "n", name)?;
                let m = get::<usize>(a, "m")?.unwrap_or(n);
                let k = get::<isize>(a, "k")?.unwrap_or(0);
                let d = dtype_attr(a)?;
                self.one(py, |g| g.eye(n, m, k, d))
            }
            "linspace" => {
                arity(0)?;
                let start = req::<f64>(a, "start", name)?;
                let stop = req::<f64>(a, "stop", name)?;
                let num = req::<usize>(a, "num", name)?;
                let endpoint = get::<bool>(a, "endpoint")?.unwrap_or(true);
                self.one(py, |g| g.linspace(start, stop, num, endpoint))
            }
            "group" => self.one(py, |g| g.group(&xs)),
            other => Err(PyTypeError::new_err(format!("wgflow has no op '{other}'"))),
        }
    }
}
