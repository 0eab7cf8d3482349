//! Graph files: the sizes ops.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `shape_of` | 1 | — (i32 `[rank]`) |
//! | `size_of` | 1 | `axes`: the dimensions multiplied (all when empty); the dtype is the node's |

use super::Sizes;
use crate::graph::def::{List, NoAttrs, NodeIn, NodeOut, UInt, MAX_RANK};
use crate::Result;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SizeOfAttrs {
    axes: List<UInt<{ MAX_RANK as u64 }>>,
}

pub(super) fn write_attrs(s: &Sizes, out: &mut NodeOut) -> Result<()> {
    match s {
        Sizes::ShapeOf => Ok(()),
        Sizes::SizeOf(axes) => out.attrs(&SizeOfAttrs {
            axes: List(axes.iter().map(|&a| UInt(a as u64)).collect()),
        }),
    }
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Sizes>> {
    match node.op {
        "shape_of" => Some(node.attrs::<NoAttrs>().map(|_| Sizes::ShapeOf)),
        "size_of" => Some(
            node.attrs::<SizeOfAttrs>()
                .map(|a| Sizes::SizeOf(a.axes.0.into_iter().map(UInt::get).collect())),
        ),
        _ => None,
    }
}
