//! Leaves: constants baked into the graph, placeholders fed at run time, and variables kept
//! by the session. They have no kernel; lowering turns them into a plan's constant, feed or
//! variable values.

use super::family::{Arity, Declared, Family, LowerCx, Lowered, Reject};
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, HostTensor, Result, Shape};

pub mod file;
mod init;

pub use init::{fans, Initializer};

/// A node without inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    /// A value baked into the graph.
    Constant(HostTensor),
    /// A value fed at run time (by the node's name).
    Placeholder,
    /// State that lives in the session across runs, on its device, with its first value
    /// (computed when a session first needs it). Read like any tensor; written by
    /// assignments (`ops/state/`).
    Variable(Initializer),
}

impl Family for Leaf {
    fn rebinds(&self) -> bool {
        matches!(self, Leaf::Placeholder)
    }

    fn name(&self) -> &'static str {
        match self {
            Leaf::Constant(_) => "constant",
            Leaf::Placeholder => "placeholder",
            Leaf::Variable(_) => "variable",
        }
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(0)
    }

    fn is_leaf(&self) -> bool {
        true
    }

    fn is_variable(&self) -> bool {
        matches!(self, Leaf::Variable(_))
    }

    /// A constant is its value; a placeholder is what it declares.
    fn infer(
        &self,
        _inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> std::result::Result<(Shape, DType), Reject> {
        match self {
            Leaf::Constant(t) => Ok((t.shape().clone(), t.dtype())),
            Leaf::Placeholder => match (declared.shape, declared.dtype) {
                (Some(s), Some(d)) => Ok((s.clone(), d)),
                _ => Err("a placeholder needs a declared shape and dtype".into()),
            },
            Leaf::Variable(Initializer::Value(t)) => Ok((t.shape().clone(), t.dtype())),
            Leaf::Variable(init) => match (declared.shape, declared.dtype) {
                (Some(s), Some(d)) => {
                    init.check(s, d)?;
                    Ok((s.clone(), d))
                }
                _ => Err("a variable needs a declared shape and dtype".into()),
            },
        }
    }

    fn lower(&self, _cx: &mut LowerCx<'_>) -> Result<Lowered> {
        Ok(match self {
            Leaf::Constant(t) => Lowered::Constant(t.clone()),
            Leaf::Placeholder => Lowered::Feed,
            Leaf::Variable(init) => Lowered::Variable(init.clone()),
        })
    }

    fn write_attrs(&self, out: &mut NodeOut) -> Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, _inputs: &[Tensor]) -> Result<Tensor> {
        file::rebuild(self, g, node)
    }
}
