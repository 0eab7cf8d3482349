//! Writing state: assignments to variables, and groups of targets.
//!
//! Semantics (TensorFlow 1's resource variables, made deterministic): within one run every
//! read of a variable sees its value at the start of the run; each assignment's new value is
//! computed during the run and copied into the variable when the run finishes. Two
//! assignments to one variable in one run are an error naming both. An assignment's output is
//! the new value, so fetching it returns what the variable will hold after the run.

use super::family::{Arity, Declared, Family, LowerCx, Lowered, Reject};
use crate::graph::def::{NodeDef, NodeIn};
use crate::graph::{Graph, Tensor};
use crate::{DType, HostTensor, Result, Shape};

pub mod file;

/// Ops with effects on the session's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// `assign(variable, value)`: `value` becomes the variable's value when the run finishes.
    Assign,
    /// `group(targets…)`: runs every input, produces an empty tensor (`tf.group`).
    Group,
}

impl Family for State {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        match self {
            State::Assign => "assign",
            State::Group => "group",
        }
    }

    fn arity(&self) -> Arity {
        match self {
            State::Assign => Arity::Exactly(2),
            State::Group => Arity::AtLeast(1),
        }
    }

    fn is_assignment(&self) -> bool {
        matches!(self, State::Assign)
    }

    /// An assignment's value has the variable's shape and dtype exactly (no broadcasting, no
    /// promotion); a group is an empty f32 tensor.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> std::result::Result<(Shape, DType), Reject> {
        match (self, inputs) {
            (State::Assign, [(vs, vd), (s, d)]) => {
                if vs != s || vd != d {
                    return Err(Reject::from(format!(
                        "the value is {d} {s}, but the variable is {vd} {vs}"
                    )));
                }
                Ok((vs.clone(), *vd))
            }
            (State::Group, _) => Ok((Shape::new(vec![0]), DType::F32)),
            _ => Err(Reject::from(format!(
                "takes {} input(s), {} given",
                self.arity(),
                inputs.len()
            ))),
        }
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> Result<Lowered> {
        Ok(match self {
            State::Assign => Lowered::Assign {
                variable: cx.args[0],
                value: cx.args[1],
            },
            State::Group => Lowered::Constant(HostTensor::zeros(Shape::new(vec![0]), DType::F32)),
        })
    }

    fn read(node: &NodeIn<'_>) -> Option<Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, inputs: &[Tensor]) -> Result<Tensor> {
        file::rebuild(*self, g, inputs)
    }
}
