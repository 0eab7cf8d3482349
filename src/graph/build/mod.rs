//! The public builder methods, one file per op family (`leaf.rs`, `elementwise.rs`, …, named
//! after the families of `ops/mod.rs`'s `registry!`), so an op's API sits beside its family.
//! Primitives translate the user's arguments into an op and add it through `Graph::add_op`,
//! which runs the op's shape/dtype rule (in its `ops/` family file). A builder lives with the
//! family of the op it exists to make, also when it composes that family's ops (`stack`,
//! `gelu`) or adds a detail around its op (`assign_add`, conv2d's bias); `composite.rs` holds
//! the formulas over several families (softmax, layer norm, var, …), built from primitives so
//! later passes see through them. `tests/graph/architecture.rs` checks the file names and that
//! no family file makes another family's op.

mod attention;
mod composite;
mod custom;
mod elementwise;
mod index;
mod leaf;
mod matmul;
mod movement;
mod nn;
mod random;
mod reduce;
mod rows;
mod scan;
mod segment;
mod sizes;
mod state;

pub use leaf::RESERVED_VARIABLE_NAME;
pub use movement::PadMode;
pub use nn::Conv2dOptions;

use crate::graph::{Graph, Tensor};
use crate::{DType, Error, Result};
use std::panic::Location;

type Loc = &'static Location<'static>;

/// Which axes a reduction folds: all of them, or a list (negative axes count from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Axes {
    All,
    List(Vec<isize>),
}

impl From<isize> for Axes {
    fn from(a: isize) -> Self {
        Axes::List(vec![a])
    }
}

impl From<&[isize]> for Axes {
    fn from(a: &[isize]) -> Self {
        Axes::List(a.to_vec())
    }
}

impl From<Vec<isize>> for Axes {
    fn from(a: Vec<isize>) -> Self {
        Axes::List(a)
    }
}

impl<const N: usize> From<[isize; N]> for Axes {
    fn from(a: [isize; N]) -> Self {
        Axes::List(a.to_vec())
    }
}

impl Graph {
    /// `x`'s dtype, which must be a float.
    fn float_only(&self, op: &str, x: Tensor, loc: Loc) -> Result<DType> {
        let d = self.arg(x, op, loc)?.dtype;
        if d.is_float() {
            Ok(d)
        } else {
            Err(Error::build_dtype(
                op,
                loc,
                format!("dtype {d} is not supported (expects f32 or f16)"),
                &[d],
            ))
        }
    }
}
