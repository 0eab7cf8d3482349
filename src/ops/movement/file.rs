//! Graph files: the attributes of the movement ops, and the builder arguments derived from
//! them.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `reshape` | 1 | — (the target is the node's `shape`) |
//! | `transpose` | 1 | `perm`: output axis `i` is input axis `perm[i]` |
//! | `slice` `flip` `broadcast_to` | 1 | `offset` (0..2^31) and `strides` (one signed integer per axis, magnitude at most [`MAX_STRIDE`]): `out[c] = in[offset + Σ c_k·strides[k]]` over the contiguous input |
//! | `concat` | 2 or more | `axis` |
//! | `take` | 2 (x, i32 indices) | `axis` |
//! | `pad` | 1 | `before`: elements ahead of each axis (the count after follows from `shape`); `value_bits`: the pad value as the raw 32-bit word of the node's dtype |
//!
//! The strided attributes are not taken on trust: the builder's arguments are derived from
//! them (for `slice`, the start, stop and step of every axis, after checking that the first
//! and last index read lie inside the input), and the builder must produce exactly them.

use super::{Movement, SliceArg, StridedKind};
use crate::graph::def::Int;
use crate::graph::def::{List, NodeDef, NodeIn, NodeOut, UInt, MAX_ELEMENTS, MAX_RANK, MAX_STRIDE};
use crate::graph::{Graph, PadMode, Tensor};
use crate::ops::Family;
use crate::{DType, Error, Result, Shape};
use serde::{Deserialize, Serialize};

type Axis = UInt<{ MAX_RANK as u64 }>;
type Dim = UInt<{ MAX_ELEMENTS as u64 }>;

/// The family's attributes; each variant is named like its op.
#[derive(Serialize, Deserialize)]
#[serde(
    tag = "op",
    content = "attrs",
    rename_all = "snake_case",
    deny_unknown_fields
)]
enum MovementAttrs {
    Reshape {},
    Transpose {
        perm: List<Axis>,
    },
    Slice(Strided),
    Flip(Strided),
    BroadcastTo(Strided),
    Concat {
        axis: Axis,
    },
    Take {
        axis: Axis,
    },
    Pad {
        before: List<Dim>,
        value_bits: UInt<{ u32::MAX as u64 }>,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Strided {
    offset: Dim,
    strides: List<Int<MAX_STRIDE>>,
}

fn uints<const CAP: u64>(v: &[usize]) -> List<UInt<CAP>> {
    List(v.iter().map(|&a| UInt(a as u64)).collect())
}

fn usizes<const CAP: u64>(v: List<UInt<CAP>>) -> Vec<usize> {
    v.0.into_iter().map(UInt::get).collect()
}

pub(super) fn write_attrs(m: &Movement, out: &mut NodeOut) -> Result<()> {
    let attrs = match m {
        Movement::Reshape => MovementAttrs::Reshape {},
        Movement::Permute(perm) => MovementAttrs::Transpose { perm: uints(perm) },
        Movement::Strided {
            kind,
            offset,
            strides,
        } => {
            let s = Strided {
                offset: UInt(*offset as u64),
                strides: List(strides.iter().map(|&s| Int(s)).collect()),
            };
            match kind {
                StridedKind::Slice => MovementAttrs::Slice(s),
                StridedKind::Flip => MovementAttrs::Flip(s),
                StridedKind::BroadcastTo => MovementAttrs::BroadcastTo(s),
            }
        }
        Movement::Concat(axis) => MovementAttrs::Concat {
            axis: UInt(*axis as u64),
        },
        Movement::Gather(axis) => MovementAttrs::Take {
            axis: UInt(*axis as u64),
        },
        Movement::Pad { before, value } => MovementAttrs::Pad {
            before: uints(before),
            value_bits: UInt(u64::from(*value)),
        },
    };
    out.tagged(m.name(), &attrs)
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Movement>> {
    let strided = |kind, s: Strided| Movement::Strided {
        kind,
        offset: s.offset.0 as i64,
        strides: s.strides.0.into_iter().map(|s| s.0).collect(),
    };
    Some(node.tagged()?.map(|attrs| match attrs {
        MovementAttrs::Reshape {} => Movement::Reshape,
        MovementAttrs::Transpose { perm } => Movement::Permute(usizes(perm)),
        MovementAttrs::Slice(s) => strided(StridedKind::Slice, s),
        MovementAttrs::Flip(s) => strided(StridedKind::Flip, s),
        MovementAttrs::BroadcastTo(s) => strided(StridedKind::BroadcastTo, s),
        MovementAttrs::Concat { axis } => Movement::Concat(axis.get()),
        MovementAttrs::Take { axis } => Movement::Gather(axis.get()),
        MovementAttrs::Pad { before, value_bits } => Movement::Pad {
            before: usizes(before),
            value: value_bits.0 as u32,
        },
    }))
}

pub(super) fn rebuild(m: &Movement, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> Result<Tensor> {
    match m {
        Movement::Reshape => {
            let target: Vec<isize> = node.shape.dims().iter().map(|&d| d as isize).collect();
            g.reshape(x[0], &target)
        }
        Movement::Permute(perm) => {
            let perm: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
            g.transpose(x[0], &perm)
        }
        Movement::Strided {
            kind,
            offset,
            strides,
        } => match kind {
            StridedKind::BroadcastTo => g.broadcast_to(x[0], node.shape.dims()),
            StridedKind::Flip => {
                let axes: Vec<isize> = (0..strides.len())
                    .filter(|&k| strides[k] < 0)
                    .map(|k| k as isize)
                    .collect();
                g.flip(x[0], axes)
            }
            StridedKind::Slice => {
                let args = slice_args(g.probe_shape(x[0])?, &node.shape, *offset, strides)?;
                g.slice(x[0], &args)
            }
        },
        Movement::Concat(axis) => g.concat(x, *axis as isize),
        Movement::Gather(axis) => g.take(x[0], x[1], *axis as isize),
        Movement::Pad { before, value } => {
            let pads = pad_widths(g.probe_shape(x[0])?, &node.shape, before)?;
            let v = match g.dtype(x[0])? {
                DType::F32 => f64::from(f32::from_bits(*value)),
                DType::F16 => f64::from(f32::from_bits(crate::dtype::f16_to_f32_word(*value))),
                DType::I32 => f64::from(*value as i32),
                DType::U32 | DType::Bool => f64::from(*value),
            };
            g.pad(x[0], &pads, PadMode::Constant(v))
        }
    }
}

/// The node rebuilt for a binding of run-time sizes (see `Movement::rebind`): a slice's
/// arguments are read back from the probe shapes it was built with.
pub(super) fn rebind(
    m: &Movement,
    g: &mut Graph,
    node: &NodeDef,
    x: &[Tensor],
    (probe_in, probe_out): (&Shape, &Shape),
) -> Result<Tensor> {
    match m {
        Movement::Strided {
            kind: StridedKind::Slice,
            offset,
            strides,
        } => {
            let args = slice_args(probe_in, probe_out, *offset, strides)?;
            g.slice(x[0], &args)
        }
        _ => rebuild(m, g, node, x),
    }
}

/// An error about the node being rebuilt (the caller adds the node's place).
fn bad(message: String) -> Error {
    Error::GraphDef {
        at: String::new(),
        message,
    }
}

/// The slice arguments that give exactly `offset` and `strides` on a contiguous `input` with
/// output `out`, or why there are none. Every index the slice reads is checked to lie inside
/// the input (first and last along each axis; the slice rule then reads nothing else).
pub(super) fn slice_args(
    input: &Shape,
    out: &Shape,
    offset: i64,
    strides: &[i64],
) -> Result<Vec<SliceArg>> {
    let rank = input.rank();
    if strides.len() != rank || out.rank() != rank {
        return Err(bad(format!(
            "slice of {input} needs {rank} strides and an output of rank {rank}, got {} strides and shape {out}",
            strides.len()
        )));
    }
    let numel = input.numel() as i64;
    if offset >= numel {
        return Err(bad(format!(
            "slice offset {offset} is outside input {input} ({numel} elements)"
        )));
    }
    let contiguous = input.strides();
    let mut rem = offset;
    let mut args = Vec::with_capacity(rank);
    for k in 0..rank {
        let (st, n) = (contiguous[k] as i64, input.dims()[k] as i64);
        // Mixed-radix digits of the offset: `rem < n * st` holds on entry, so `start < n`.
        let start = rem / st;
        rem %= st;
        let s = strides[k];
        if s == 0 || s % st != 0 {
            return Err(bad(format!(
                "slice stride {s} of axis {k} is not a non-zero multiple of the axis's element stride {st} in {input}"
            )));
        }
        let step = s / st;
        let count = out.dims()[k] as i128;
        if count == 0 {
            // An empty slice reads nothing (a strided view stores offset 0 and stride 0).
            args.push(SliceArg::new(Some(0), Some(0), 1));
            continue;
        }
        let last = i128::from(start) + i128::from(step) * (count - 1);
        if !(0..i128::from(n)).contains(&last) {
            return Err(bad(format!(
                "slice reads index {last} of axis {k} (start {start}, step {step}, {count} elements), outside input {input}"
            )));
        }
        // `last` is in 0..n, so the stops below fit; a stop of -1 would wrap, hence `None`.
        let stop = if step > 0 {
            Some(last + 1)
        } else {
            Some(last - 1).filter(|&v| v >= 0)
        };
        let to_isize =
            |v: i128| isize::try_from(v).map_err(|_| bad(format!("slice index {v} does not fit")));
        args.push(SliceArg::new(
            Some(to_isize(start.into())?),
            stop.map(to_isize).transpose()?,
            to_isize(step.into())?,
        ));
    }
    Ok(args)
}

/// `(before, after)` per axis of a constant pad from `input` to `out`.
fn pad_widths(input: &Shape, out: &Shape, before: &[usize]) -> Result<Vec<(usize, usize)>> {
    let rank = input.rank();
    if before.len() != rank || out.rank() != rank {
        return Err(bad(format!(
            "pad of {input} needs {rank} 'before' widths and an output of rank {rank}, got {} and shape {out}",
            before.len()
        )));
    }
    (0..rank)
        .map(|k| {
            let (d, b, o) = (input.dims()[k], before[k], out.dims()[k]);
            d.checked_add(b)
                .and_then(|db| o.checked_sub(db))
                .map(|after| (b, after))
                .ok_or_else(|| {
                    bad(format!(
                        "pad of axis {k} (size {d}) by {b} before cannot give size {o}"
                    ))
                })
        })
        .collect()
}
