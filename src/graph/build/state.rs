//! Builders for state: assignments to variables and groups of targets (see `ops/state.rs` for
//! the semantics of a run that assigns; variables themselves are leaves, in `leaf.rs`).

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::{BinaryOp, Declared, Op, State};
use crate::{Error, Result};
use std::panic::Location;

impl Graph {
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
