//! Graph files (version 2): assignments and groups have no attributes; what they do is in
//! their inputs.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `assign` | 2: the variable, the new value (the variable's shape and dtype) | — |
//! | `group` | 1 or more: the targets to run | — |
//!
//! `assign_add` and `assign_sub` are saved as the primitives they build: an `add` (`sub`) of
//! the variable and the delta, then an `assign` of the result.

use super::State;
use crate::graph::def::{NoAttrs, NodeIn};
use crate::graph::{Graph, Tensor};
use crate::ops::Family;
use crate::{Error, Result};

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<State>> {
    let op = [State::Assign, State::Group]
        .into_iter()
        .find(|s| s.name() == node.op)?;
    Some(node.attrs::<NoAttrs>().map(|_| op))
}

pub(super) fn rebuild(state: State, g: &mut Graph, inputs: &[Tensor]) -> Result<Tensor> {
    match (state, inputs) {
        (State::Assign, &[variable, value]) => g.assign(variable, value),
        (State::Group, targets) => g.group(targets),
        (State::Assign, _) => Err(Error::Internal(format!(
            "assign rebuilt with {} inputs",
            inputs.len()
        ))),
    }
}
