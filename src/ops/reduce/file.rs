//! Graph files: a reduction's axes (keepdims follows from the node's rank).
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `sum` `mean` `max` `min` `prod` `all` `any` | 1 | `axes`: list of axes (non-negative) |
//! | `argmax` `argmin` | 1 | `axes`: one axis, or every axis for the index into the flattened input |

use super::{Reduce, ReduceOp};
use crate::graph::def::{List, NodeDef, NodeIn, NodeOut, UInt, MAX_RANK};
use crate::graph::{Graph, Tensor};
use crate::Result;
use serde::{Deserialize, Serialize};

/// An axis of at most rank [`MAX_RANK`].
type Axis = UInt<{ MAX_RANK as u64 }>;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReduceAttrs {
    axes: List<Axis>,
}

pub(super) fn write_attrs(r: &Reduce, out: &mut NodeOut) -> Result<()> {
    let axes = r.axes.iter().map(|&a| UInt(a as u64)).collect();
    out.attrs(&ReduceAttrs { axes: List(axes) })
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Reduce>> {
    let op = ReduceOp::ALL.into_iter().find(|r| r.name() == node.op)?;
    Some(node.attrs::<ReduceAttrs>().map(|a| Reduce {
        op,
        axes: a.axes.0.into_iter().map(UInt::get).collect(),
    }))
}

pub(super) fn rebuild(r: &Reduce, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> Result<Tensor> {
    let keepdims = node.shape.rank() == g.probe_shape(x[0])?.rank();
    let axes: Vec<isize> = r.axes.iter().map(|&a| a as isize).collect();
    match r.op {
        ReduceOp::Sum => g.sum(x[0], axes, keepdims),
        ReduceOp::Mean => g.mean(x[0], axes, keepdims),
        ReduceOp::Max => g.max(x[0], axes, keepdims),
        ReduceOp::Min => g.min(x[0], axes, keepdims),
        ReduceOp::Prod => g.prod(x[0], axes, keepdims),
        ReduceOp::All => g.all(x[0], axes, keepdims),
        ReduceOp::Any => g.any(x[0], axes, keepdims),
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            // One axis, or all of them (a flattened index).
            let axis = match axes.as_slice() {
                [a] => Some(*a),
                _ => None,
            };
            if r.op == ReduceOp::ArgMax {
                g.argmax(x[0], axis, keepdims)
            } else {
                g.argmin(x[0], axis, keepdims)
            }
        }
    }
}
