//! Graph files: elementwise ops have no attributes.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | the unary ops ([`UnaryOp::name`]: `neg` `abs` `exp` … `logical_not`) | 1 | — |
//! | the binary ops ([`BinaryOp::name`]: `add` `sub` `mul` … `remainder`) | 2 | — |
//! | `where` | 3 (cond, a, b) | — |
//! | `cast` | 1 | — (the target is the node's `dtype`) |

use super::{BinaryOp, Elementwise, UnaryOp};
use crate::graph::def::{NoAttrs, NodeIn};
use crate::graph::{Graph, Tensor};
use crate::ops::Family;
use crate::Result;

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Elementwise>> {
    // Every op of the family, found by its name ([`Family::name`]).
    let op = UnaryOp::ALL
        .map(Elementwise::Unary)
        .into_iter()
        .chain(BinaryOp::ALL.map(Elementwise::Binary))
        .chain([Elementwise::Select, Elementwise::Cast(node.dtype)])
        .find(|e| e.name() == node.op)?;
    Some(node.attrs::<NoAttrs>().map(|_| op))
}

pub(super) fn rebuild(op: Elementwise, g: &mut Graph, x: &[Tensor]) -> Result<Tensor> {
    let here = std::panic::Location::caller();
    match op {
        Elementwise::Unary(u) => g.unary(u, x[0], here),
        Elementwise::Binary(b) => g.binary(b, x[0], x[1], here),
        Elementwise::Select => g.select(x[0], x[1], x[2]),
        Elementwise::Cast(d) => g.cast(x[0], d),
    }
}
