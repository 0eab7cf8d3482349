//! Builders for state: variables, assignments and groups of targets (see `ops/state.rs` for
//! the semantics of a run that assigns).

use crate::graph::{Graph, Site, Tensor};
use crate::ops::{BinaryOp, Declared, Initializer, Leaf, Op, State};
use crate::{DType, Error, HostTensor, Result, Shape};
use std::panic::Location;

type Loc = &'static Location<'static>;

/// The one name a variable cannot have: checkpoints (safetensors files) name each tensor by
/// its variable, and safetensors keeps this key for the file's metadata.
pub const RESERVED_VARIABLE_NAME: &str = "__metadata__";

impl Graph {
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

    /// `variable = value` when the run finishes (`tf.assign`). `value` must have the
    /// variable's shape and dtype. Every read of the variable in the same run sees the value
    /// it had when the run started; the result is the new value. Run it with
    /// [`Session::run_targets`](crate::Session::run_targets) or fetch it.
    #[track_caller]
    pub fn assign(&mut self, variable: Tensor, value: Tensor) -> Result<Tensor> {
        self.assign_at(variable, value, "assign", Location::caller())
    }

    /// `variable += delta` when the run finishes (see [`Graph::assign`]).
    #[track_caller]
    pub fn assign_add(&mut self, variable: Tensor, delta: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        self.check_variable(variable, "assign_add", loc)?;
        let sum = self.binary(BinaryOp::Add, variable, delta, loc)?;
        self.assign_at(variable, sum, "assign_add", loc)
    }

    /// `variable -= delta` when the run finishes (see [`Graph::assign`]).
    #[track_caller]
    pub fn assign_sub(&mut self, variable: Tensor, delta: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        self.check_variable(variable, "assign_sub", loc)?;
        let diff = self.binary(BinaryOp::Sub, variable, delta, loc)?;
        self.assign_at(variable, diff, "assign_sub", loc)
    }

    /// One target that runs all of `targets` (`tf.group`); its value is an empty tensor.
    #[track_caller]
    pub fn group(&mut self, targets: &[Tensor]) -> Result<Tensor> {
        let site = Site::new("group", Location::caller());
        self.add_op(Op::State(State::Group), targets, Declared::none(), site)
    }

    fn check_variable(&self, variable: Tensor, op: &str, loc: Loc) -> Result<()> {
        let node = self.arg(variable, op, loc)?;
        if !node.op.is_variable() {
            return Err(Error::build(
                op,
                loc,
                format!(
                    "'{}' is a {}, not a variable; only variables can be assigned",
                    node.name,
                    node.op.name()
                ),
            ));
        }
        Ok(())
    }

    fn assign_at(&mut self, variable: Tensor, value: Tensor, op: &str, loc: Loc) -> Result<Tensor> {
        self.check_variable(variable, op, loc)?;
        let site = Site::new(op, loc);
        self.add_op(
            Op::State(State::Assign),
            &[variable, value],
            Declared::none(),
            site,
        )
    }
}
