//! Builders of the leaf family: constants, placeholders, variables, creation ops and the
//! graph's run counter.
//!
//! # Creation ops are constants
//! `zeros`, `ones`, `full`, `arange`, `linspace` and `eye` are computed on the host at build
//! time and stored in the graph as constants (uploaded once per plan; one-element ones become
//! literals inside fused kernels).

use super::Loc;
use crate::graph::{check_size, Dim, Graph, Site, SymDim, Tensor};
use crate::ops::random::RUN_COUNTER;
use crate::ops::{Declared, Initializer, Leaf, Op};
use crate::{DType, Error, HostTensor, Result, Shape};
use std::panic::Location;

/// The one name a variable cannot have: checkpoints (safetensors files) name each tensor by
/// its variable, and safetensors keeps this key for the file's metadata.
pub const RESERVED_VARIABLE_NAME: &str = "__metadata__";

/// The word of `v` in `dtype`; integers must be integral and in range.
fn scalar_word(dtype: DType, v: f64) -> std::result::Result<u32, String> {
    let int = |lo: f64, hi: f64| {
        if v.fract() != 0.0 || !(lo..=hi).contains(&v) {
            Err(format!("{v} is not representable as {dtype}"))
        } else {
            Ok(())
        }
    };
    match dtype {
        DType::F32 => Ok((v as f32).to_bits()),
        DType::F16 => Ok(crate::dtype::f32_to_f16_word((v as f32).to_bits())),
        DType::I32 => int(i32::MIN as f64, i32::MAX as f64).map(|_| v as i32 as u32),
        DType::U32 => int(0.0, u32::MAX as f64).map(|_| v as u32),
        DType::Bool => Ok((v != 0.0) as u32),
    }
}

impl Graph {
    /// A constant tensor from anything that converts to a [`HostTensor`]: scalars, `Vec`s,
    /// arrays, nested arrays.
    #[track_caller]
    pub fn constant(&mut self, value: impl Into<HostTensor>) -> Result<Tensor> {
        let op = Op::Leaf(Leaf::Constant(value.into()));
        self.add_op(
            op,
            &[],
            Declared::none(),
            Site::new("constant", Location::caller()),
        )
    }

    /// A value supplied at run time under `name` (prefixed by the active name scopes).
    #[track_caller]
    pub fn placeholder(
        &mut self,
        name: &str,
        shape: impl Into<Shape>,
        dtype: DType,
    ) -> Result<Tensor> {
        let location = Location::caller();
        let shape = shape.into();
        let full = self.scoped_name(name);
        if self.names.contains_key(&full) {
            return Err(Error::build(
                "placeholder",
                location,
                format!("a node named '{full}' already exists"),
            ));
        }
        let declared = Declared {
            shape: Some(&shape),
            dtype: Some(dtype),
        };
        let site = Site::new("placeholder", location).named(name);
        self.add_op(Op::Leaf(Leaf::Placeholder), &[], declared, site)
    }

    /// A placeholder with dimensions known only at run time (`tf.placeholder(tf.float32,
    /// [None, 784])`): each dimension is known ([`Dim::Known`], or `Some(n)`), unknown
    /// ([`Dim::Unknown`], or `None`), or named ([`Dim::Named`], or a `&str`): dimensions with
    /// one name have one size, in every placeholder. An unknown dimension of a placeholder
    /// that nothing uses yet takes the run-time dimension it first meets in an elementwise
    /// op, as TensorFlow lets two `[None, 10]` placeholders meet (`y_ * tf.log(y)`). A
    /// session binds the sizes from the feeds of each run and compiles one plan per distinct
    /// set of sizes (see [`crate::Session`]).
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{DType, Dim, Graph, HostTensor, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let x = g.placeholder_dyn("x", [None, Some(3)], DType::F32)?;
    /// let y = g.sum(x, [1], false)?;
    /// assert_eq!(g.dims(y)?, [Dim::named("x.0")]);
    /// let mut s = Session::new(&g, SessionOptions::default())?;
    /// let two = HostTensor::new([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// assert_eq!(s.run(&[(x, two)], &[y])?[0].to_vec::<f32>()?, [6.0, 15.0]);
    /// let one = HostTensor::new([1, 3], vec![1.0f32, 1.0, 1.0])?;
    /// assert_eq!(s.run(&[(x, one)], &[y])?[0].to_vec::<f32>()?, [3.0]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn placeholder_dyn<D: Into<Dim>>(
        &mut self,
        name: &str,
        dims: impl IntoIterator<Item = D>,
        dtype: DType,
    ) -> Result<Tensor> {
        let location = Location::caller();
        let full = self.scoped_name(name);
        if self.names.contains_key(&full) {
            return Err(Error::build(
                "placeholder",
                location,
                format!("a node named '{full}' already exists"),
            ));
        }
        let mut sym = Vec::new();
        for (axis, d) in dims.into_iter().map(Into::into).enumerate() {
            let symbol = match d {
                Dim::Known(n) => {
                    sym.push(SymDim {
                        factor: n,
                        pows: Vec::new(),
                    });
                    continue;
                }
                Dim::Named(n) if n.is_empty() || n.parse::<usize>().is_ok() => {
                    return Err(Error::build(
                        "placeholder",
                        location,
                        format!("dimension {axis}: '{n}' is not a dimension name"),
                    ).of_value())
                }
                Dim::Named(n) => n,
                Dim::Unknown => format!("{full}.{axis}"),
                Dim::Product(..) => {
                    return Err(Error::build(
                        "placeholder",
                        location,
                        format!("dimension {axis}: a placeholder's dimension is a size, a name or unknown, not {d}"),
                    ).of_value())
                }
            };
            let k = self.syms.intern(&symbol);
            sym.push(SymDim {
                factor: 1,
                pows: vec![(k, 1)],
            });
        }
        if sym.iter().all(SymDim::is_known) {
            let shape = Shape(sym.iter().map(|d| d.factor).collect());
            return self.placeholder(name, shape, dtype);
        }
        let shape = self
            .syms
            .probe_a_shape(&sym)
            .ok_or_else(|| Error::Internal("probe sizes overflow".into()))?;
        let declared = Declared {
            shape: Some(&shape),
            dtype: Some(dtype),
        };
        let site = Site::new("placeholder", location).named(name);
        self.add_op_sym(Op::Leaf(Leaf::Placeholder), &[], declared, site, Some(sym))
    }

    /// A variable named `name` (prefixed by the active name scopes) whose first value is
    /// `initial` (`tf.Variable(initial, name=...)`). The session keeps its value on its
    /// device across runs and shares it between plans; see [`Graph::assign`].
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{Graph, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let step = g.variable("step", 0i32)?;
    /// let one = g.constant(1i32)?;
    /// let next = g.assign_add(step, one)?;
    /// let mut s = Session::new(&g, SessionOptions::default())?;
    /// s.run_targets(&[], &[next])?;
    /// s.run_targets(&[], &[next])?;
    /// assert_eq!(s.read_variable(step)?.item::<i32>()?, 2);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn variable(&mut self, name: &str, initial: impl Into<HostTensor>) -> Result<Tensor> {
        let t: HostTensor = initial.into();
        let (shape, dtype) = (t.shape().clone(), t.dtype());
        self.new_variable(
            name,
            shape,
            dtype,
            Initializer::Value(t),
            Location::caller(),
        )
    }

    /// A `dtype` variable of `shape` whose first value comes from `init` (zeros, ones, a
    /// seeded uniform or normal draw, Glorot or He scaling); computed when a session first
    /// needs the variable, identically on every device.
    #[track_caller]
    pub fn variable_with(
        &mut self,
        name: &str,
        shape: impl Into<Shape>,
        dtype: DType,
        init: Initializer,
    ) -> Result<Tensor> {
        self.new_variable(name, shape.into(), dtype, init, Location::caller())
    }

    fn new_variable(
        &mut self,
        name: &str,
        shape: Shape,
        dtype: DType,
        init: Initializer,
        loc: Loc,
    ) -> Result<Tensor> {
        let full = self.scoped_name(name);
        let refused = if name.is_empty() {
            Some("a variable needs a name".to_string())
        } else if self.names.contains_key(&full) {
            Some(format!("a node named '{full}' already exists"))
        } else if full == RESERVED_VARIABLE_NAME {
            Some(format!(
                "'{full}' is reserved: checkpoints name tensors by variable, and safetensors keeps that key for its metadata"
            ))
        } else {
            None
        };
        if let Some(message) = refused {
            return Err(Error::build("variable", loc, message));
        }
        let declared = Declared {
            shape: Some(&shape),
            dtype: Some(dtype),
        };
        let site = Site::new("variable", loc).named(name);
        self.add_op(Op::Leaf(Leaf::Variable(init)), &[], declared, site)
    }

    /// Every variable of the graph, in the order they were built.
    pub fn variables(&self) -> Vec<Tensor> {
        self.nodes()
            .filter(|(_, n)| n.op.is_variable())
            .map(|(t, _)| t)
            .collect()
    }

    /// A constant of `shape` filled with 0.
    #[track_caller]
    pub fn zeros(&mut self, shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        self.filled("zeros", shape.into(), dtype, 0.0, Location::caller())
    }

    /// A constant of `shape` filled with 1.
    #[track_caller]
    pub fn ones(&mut self, shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        self.filled("ones", shape.into(), dtype, 1.0, Location::caller())
    }

    /// Zeros with `x`'s shape and dtype, also when some of its dimensions are known only at
    /// run time (a broadcast scalar: nothing of that size is stored).
    #[track_caller]
    pub fn zeros_like(&mut self, x: Tensor) -> Result<Tensor> {
        self.filled_like(x, 0.0, "zeros_like", Location::caller())
    }

    /// Ones with `x`'s shape and dtype (see [`Graph::zeros_like`]).
    #[track_caller]
    pub fn ones_like(&mut self, x: Tensor) -> Result<Tensor> {
        self.filled_like(x, 1.0, "ones_like", Location::caller())
    }

    pub(crate) fn filled_like(&mut self, x: Tensor, v: f64, op: &str, loc: Loc) -> Result<Tensor> {
        let node = self.arg(x, op, loc)?;
        let (shape, dtype) = (node.shape.clone(), node.dtype);
        let w = scalar_word(dtype, v).map_err(|e| Error::build(op, loc, e).of_value())?;
        let c = self.host_constant(op, Shape::scalar(), dtype, vec![w], loc)?;
        if shape.rank() == 0 {
            return Ok(c);
        }
        self.broadcast_to(c, shape.dims())
    }

    /// A constant of `shape` filled with `value` (which must be representable in `dtype`).
    #[track_caller]
    pub fn full(&mut self, shape: impl Into<Shape>, dtype: DType, value: f64) -> Result<Tensor> {
        self.filled("full", shape.into(), dtype, value, Location::caller())
    }

    /// `[start, start + step, …]` up to but excluding `stop` (NumPy `arange`: length
    /// `ceil((stop - start) / step)`, element `i` is `start + i·step` computed in f64 and then
    /// converted). f32, i32 or u32; integer dtypes need integral arguments.
    #[track_caller]
    pub fn arange(&mut self, start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        let loc = Location::caller();
        let err = |m: String| Error::build("arange", loc, m).of_value();
        if !dtype.is_numeric() {
            return Err(Error::build_dtype(
                "arange",
                loc,
                format!("dtype {dtype} is not supported (expects f32, i32 or u32)"),
                &[dtype],
            ));
        }
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            return Err(err(format!(
                "start {start}, stop {stop} and step {step} must be finite with a nonzero step"
            )));
        }
        let n = ((stop - start) / step).ceil();
        // A range that runs the wrong way is empty, as in NumPy.
        let n = n.max(0.0);
        if n > u32::MAX as f64 {
            return Err(err(format!(
                "arange({start}, {stop}, {step}) has {n} elements, more than 2^32 - 1"
            )));
        }
        let words = (0..n as usize)
            .map(|i| scalar_word(dtype, start + i as f64 * step))
            .collect::<std::result::Result<Vec<u32>, String>>()
            .map_err(err)?;
        self.host_constant("arange", Shape::from([n as usize]), dtype, words, loc)
    }

    /// `num` evenly spaced f32 values from `start` to `stop` (inclusive when `endpoint`),
    /// computed in f64 like NumPy's `linspace` and rounded once to f32.
    #[track_caller]
    pub fn linspace(
        &mut self,
        start: f64,
        stop: f64,
        num: usize,
        endpoint: bool,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let div = if endpoint { num.saturating_sub(1) } else { num } as f64;
        let step = (stop - start) / div;
        let words = (0..num)
            .map(|i| {
                let v = if endpoint && num > 1 && i == num - 1 {
                    stop
                } else if div > 0.0 {
                    start + i as f64 * step
                } else {
                    start
                };
                (v as f32).to_bits()
            })
            .collect();
        self.host_constant("linspace", Shape::from([num]), DType::F32, words, loc)
    }

    /// An `n × m` matrix with ones on diagonal `k` (0 main, > 0 above, < 0 below) and zeros
    /// elsewhere, like NumPy's `eye(n, m, k)`.
    #[track_caller]
    pub fn eye(&mut self, n: usize, m: usize, k: isize, dtype: DType) -> Result<Tensor> {
        let loc = Location::caller();
        let one = scalar_word(dtype, 1.0).map_err(|e| Error::build("eye", loc, e).of_value())?;
        check_size("eye", &Shape::from([n, m]), loc)?;
        let words = (0..n * m)
            .map(|i| {
                let (r, c) = ((i / m) as isize, (i % m) as isize);
                if c - r == k {
                    one
                } else {
                    0
                }
            })
            .collect();
        self.host_constant("eye", Shape::from([n, m]), dtype, words, loc)
    }

    /// The graph's run counter (see [`crate::ops::random::RUN_COUNTER`]), made on first use
    /// outside every name and device scope, so that one node serves the whole graph and is
    /// placed with its first consumer.
    pub(super) fn run_counter(&mut self, op: &str, loc: Loc) -> Result<Tensor> {
        if let Some(t) = self.tensor(RUN_COUNTER) {
            let n = &self.g[t.node];
            if n.op != Op::Leaf(Leaf::Placeholder)
                || n.dtype != DType::U32
                || n.shape != Shape::from([2])
            {
                return Err(Error::build(
                    op,
                    loc,
                    format!(
                        "the name '{RUN_COUNTER}' is reserved for the session's run counter, \
                         a u32 [2] placeholder; this graph has a {} {} {} of that name",
                        n.dtype,
                        n.shape,
                        n.op.name()
                    ),
                ));
            }
            return Ok(t);
        }
        let names = std::mem::take(&mut self.name_scopes);
        let devices = std::mem::take(&mut self.device_scopes);
        let shape = Shape::from([2]);
        let declared = Declared {
            shape: Some(&shape),
            dtype: Some(DType::U32),
        };
        let site = Site::new("placeholder", loc).named(RUN_COUNTER);
        let r = self.add_op(Op::Leaf(Leaf::Placeholder), &[], declared, site);
        self.name_scopes = names;
        self.device_scopes = devices;
        r
    }

    fn filled(&mut self, op: &str, shape: Shape, dtype: DType, v: f64, loc: Loc) -> Result<Tensor> {
        let w = scalar_word(dtype, v).map_err(|e| Error::build(op, loc, e).of_value())?;
        if self.has_unknown_dims() && self.syms.decode_shape(&shape).iter().any(|d| !d.is_known()) {
            // Probe sizes of a tensor with run-time dimensions (see graph/dims.rs): a
            // broadcast scalar, rebuilt at each binding.
            let one = self.host_constant(op, Shape::scalar(), dtype, vec![w], loc)?;
            return self.broadcast_to(one, shape.dims());
        }
        // Before the values are made: a shape no kernel can index could not be allocated.
        check_size(op, &shape, loc)?;
        let n = shape.numel();
        let mut words = crate::host::fresh_vec(n).ok_or_else(|| {
            Error::build(op, loc, format!("cannot allocate {n} elements for {shape}")).of_value()
        })?;
        words.resize(n, w);
        self.host_constant(op, shape, dtype, words, loc)
    }

    fn host_constant(
        &mut self,
        op: &str,
        shape: Shape,
        dtype: DType,
        words: Vec<u32>,
        loc: Loc,
    ) -> Result<Tensor> {
        let t = HostTensor::from_words(shape, dtype, words)
            .map_err(|e| Error::build(op, loc, e.to_string()).of_value())?;
        self.add_op(
            Op::Leaf(Leaf::Constant(t)),
            &[],
            Declared::none(),
            Site::new(op, loc),
        )
    }

    /// A scalar constant (fusion turns it into a literal).
    pub(super) fn lit(&mut self, dtype: DType, v: f64, loc: Loc) -> Result<Tensor> {
        let w = scalar_word(dtype, v).map_err(|e| Error::build("literal", loc, e).of_value())?;
        self.host_constant("literal", Shape::from([]), dtype, vec![w], loc)
    }

    pub(crate) fn push_constant(&mut self, t: HostTensor, loc: Loc) -> Result<Tensor> {
        let op = Op::Leaf(Leaf::Constant(t));
        self.add_op(op, &[], Declared::none(), Site::new("constant", loc))
    }
}
