//! Sizes as values: `shape_of` (`tf.shape`) and `size_of` (a product of dimensions), for
//! graphs that compute with sizes known only at run time.
//!
//! A builder given a tensor whose shape is known makes a constant, so these ops exist only
//! in graphs with run-time dimensions, and only until a session binds the sizes: the binding
//! rebuilds each of them through the same builder, which then makes the constant
//! (`graph/dims.rs`). So they never reach a kernel; constant folding sees the sizes.

use super::family::{Arity, Declared, Family, GradCx, LowerCx, Lowered, Reject};
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, Error, Result, Shape};

pub mod file;

/// What a sizes op reads of its input's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sizes {
    /// The input's dimensions, an i32 vector of its rank.
    ShapeOf,
    /// The product of the input's dimensions along `axes` (all of them when empty), a scalar
    /// of the node's dtype.
    SizeOf(Vec<usize>),
}

impl Family for Sizes {
    fn name(&self) -> &'static str {
        match self {
            Sizes::ShapeOf => "shape_of",
            Sizes::SizeOf(_) => "size_of",
        }
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(1)
    }

    fn rebinds(&self) -> bool {
        true
    }

    /// `shape_of` gives i32 `[rank]`; `size_of` a scalar of the declared dtype (f32 unless
    /// declared), with axes inside the input's rank.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> std::result::Result<(Shape, DType), Reject> {
        let Some((input, _)) = inputs.first() else {
            return Err(Reject::from(format!("{} needs an input", self.name())));
        };
        match self {
            Sizes::ShapeOf => Ok((Shape::from([input.rank()]), DType::I32)),
            Sizes::SizeOf(axes) => {
                if let Some(&a) = axes.iter().find(|&&a| a >= input.rank()) {
                    return Err(Reject::from(format!(
                        "axis {a} is out of range for {input}"
                    )));
                }
                Ok((Shape::scalar(), declared.dtype.unwrap_or(DType::F32)))
            }
        }
    }

    fn lower(&self, _cx: &mut LowerCx<'_>) -> Result<Lowered> {
        Err(Error::Internal(format!(
            "{} reached the compiler: binding the run-time sizes makes it a constant",
            self.name()
        )))
    }

    fn write_attrs(&self, out: &mut NodeOut) -> Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> Result<Tensor> {
        match self {
            Sizes::ShapeOf => g.shape_of(x[0]),
            Sizes::SizeOf(axes) => g.size_of(x[0], axes, node.dtype),
        }
    }

    /// A size does not change with the values.
    fn grad(&self, _g: &mut Graph, _cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![None])
    }
}
