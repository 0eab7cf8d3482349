//! Leaves: constants baked into the graph and placeholders fed at run time. They have no
//! kernel; lowering turns them into a plan's constant or feed values.

use super::family::{Arity, Declared, Family, LowerCx, Lowered};
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, HostTensor, Result, Shape};

pub mod file;

/// A node without inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    /// A value baked into the graph.
    Constant(HostTensor),
    /// A value fed at run time (by the node's name).
    Placeholder,
}

impl Family for Leaf {
    fn name(&self) -> &'static str {
        match self {
            Leaf::Constant(_) => "constant",
            Leaf::Placeholder => "placeholder",
        }
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(0)
    }

    fn is_leaf(&self) -> bool {
        true
    }

    /// A constant is its value; a placeholder is what it declares.
    fn infer(
        &self,
        _inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> std::result::Result<(Shape, DType), String> {
        match self {
            Leaf::Constant(t) => Ok((t.shape().clone(), t.dtype())),
            Leaf::Placeholder => match (declared.shape, declared.dtype) {
                (Some(s), Some(d)) => Ok((s.clone(), d)),
                _ => Err("a placeholder needs a declared shape and dtype".into()),
            },
        }
    }

    fn lower(&self, _cx: &mut LowerCx<'_>) -> Result<Lowered> {
        Ok(match self {
            Leaf::Constant(t) => Lowered::Constant(t.clone()),
            Leaf::Placeholder => Lowered::Feed,
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
