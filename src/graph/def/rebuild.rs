//! Rebuilding the ops whose file attributes are not the builder's arguments (strided views,
//! concat, pad, take, conv2d, pools, random): the arguments are derived from the attributes,
//! the public builder runs every shape rule again, and [`check_same_op`] then demands that the
//! builder produced exactly the file's attributes. So a file can only describe a node the API
//! could have built, and in particular a strided read can never leave its input.

use super::{err, op_name, NodeDef};
use crate::graph::{Graph, PadMode, Tensor};
use crate::ops::{Distribution, Op, PoolKind, SliceArg, StridedKind};
use crate::ops::{Movement, Nn};
use crate::{Conv2dOptions, DType, Result, Shape};

pub(super) fn build_op(g: &mut Graph, nd: &NodeDef, x: &[Tensor]) -> Result<Tensor> {
    match &nd.op {
        Op::Movement(Movement::Strided {
            kind,
            offset,
            strides,
        }) => match kind {
            StridedKind::BroadcastTo => g.broadcast_to(x[0], nd.shape.dims()),
            StridedKind::Flip => {
                let axes: Vec<isize> = (0..strides.len())
                    .filter(|&k| strides[k] < 0)
                    .map(|k| k as isize)
                    .collect();
                g.flip(x[0], axes)
            }
            StridedKind::Slice => {
                let args = slice_args(g.shape(x[0])?, &nd.shape, *offset, strides)?;
                g.slice(x[0], &args)
            }
        },
        Op::Movement(Movement::Concat(axis)) => g.concat(x, *axis as isize),
        Op::Movement(Movement::Gather(axis)) => g.take(x[0], x[1], *axis as isize),
        Op::Movement(Movement::Pad { before, value }) => {
            let pads = pad_widths(g.shape(x[0])?, &nd.shape, before)?;
            let v = match g.dtype(x[0])? {
                DType::F32 => f64::from(f32::from_bits(*value)),
                DType::F16 => f64::from(f32::from_bits(crate::dtype::f16_to_f32_word(*value))),
                DType::I32 => f64::from(*value as i32),
                DType::U32 | DType::Bool => f64::from(*value),
            };
            g.pad(x[0], &pads, PadMode::Constant(v))
        }
        Op::Nn(Nn::Conv2d { window, groups }) => {
            let opts = Conv2dOptions {
                stride: window.stride,
                padding: window.padding,
                dilation: window.dilation,
                groups: *groups,
            };
            g.conv2d(x[0], x[1], None, opts)
        }
        Op::Nn(Nn::Pool { kind, window }) => match kind {
            PoolKind::Max => g.max_pool2d(x[0], window.kernel, window.stride, window.padding),
            PoolKind::Avg => g.avg_pool2d(x[0], window.kernel, window.stride, window.padding),
        },
        Op::Random(spec) => match spec.dist {
            Distribution::Uniform { low, high } => {
                g.random_uniform(nd.shape.clone(), low, high, spec.seed)
            }
            Distribution::Normal { mean, std } => {
                g.random_normal(nd.shape.clone(), mean, std, spec.seed)
            }
        },
        other => Err(err(
            "",
            format!("op '{}' has no derived rebuild", op_name(other)),
        )),
    }
}

/// The attributes the builder produced must be the file's: otherwise the file describes a
/// node no builder call makes (a flip with a stray stride, a pool with a dilation, ...).
pub(super) fn check_same_op(file: &Op, built: &Op) -> Result<()> {
    let derived = matches!(
        file,
        Op::Movement(Movement::Strided { .. })
            | Op::Movement(Movement::Concat(_))
            | Op::Movement(Movement::Pad { .. })
            | Op::Movement(Movement::Gather(_))
            | Op::Nn(Nn::Conv2d { .. })
            | Op::Nn(Nn::Pool { .. })
            | Op::Random(_)
    );
    if !derived || file == built {
        return Ok(());
    }
    Err(err(
        "",
        format!(
            "the file's {} attributes ({}) are not what the op's rules give ({} {})",
            op_name(file),
            attrs(file),
            op_name(built),
            attrs(built)
        ),
    ))
}

fn attrs(op: &Op) -> String {
    match op {
        Op::Movement(Movement::Strided {
            offset, strides, ..
        }) => format!("offset {offset}, strides {strides:?}"),
        Op::Movement(Movement::Concat(axis)) | Op::Movement(Movement::Gather(axis)) => {
            format!("axis {axis}")
        }
        Op::Movement(Movement::Pad { before, value }) => {
            format!("before {before:?}, value_bits {value}")
        }
        Op::Nn(Nn::Conv2d { window, groups }) => format!("{window:?}, groups {groups}"),
        Op::Nn(Nn::Pool { window, .. }) => format!("{window:?}"),
        Op::Random(spec) => format!("{:?}, seed {}", spec.dist, spec.seed),
        _ => "no attributes".into(),
    }
}

/// The slice arguments that give exactly `offset` and `strides` on a contiguous `input` with
/// output `out`, or why there are none. Every index the slice reads is checked to lie inside
/// the input (first and last along each axis; the slice rule then reads nothing else).
fn slice_args(input: &Shape, out: &Shape, offset: i64, strides: &[i64]) -> Result<Vec<SliceArg>> {
    let rank = input.rank();
    if strides.len() != rank || out.rank() != rank {
        return Err(err(
            "",
            format!(
                "slice of {input} needs {rank} strides and an output of rank {rank}, got {} strides and shape {out}",
                strides.len()
            ),
        ));
    }
    let numel = input.numel() as i64;
    if offset >= numel {
        return Err(err(
            "",
            format!("slice offset {offset} is outside input {input} ({numel} elements)"),
        ));
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
            return Err(err(
                "",
                format!(
                    "slice stride {s} of axis {k} is not a non-zero multiple of the axis's element stride {st} in {input}"
                ),
            ));
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
            return Err(err(
                "",
                format!(
                    "slice reads index {last} of axis {k} (start {start}, step {step}, {count} elements), outside input {input}"
                ),
            ));
        }
        // `last` is in 0..n, so the stops below fit; a stop of -1 would wrap, hence `None`.
        let stop = if step > 0 {
            Some(last + 1)
        } else {
            Some(last - 1).filter(|&v| v >= 0)
        };
        let to_isize = |v: i128| {
            isize::try_from(v).map_err(|_| err("", format!("slice index {v} does not fit")))
        };
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
        return Err(err(
            "",
            format!(
                "pad of {input} needs {rank} 'before' widths and an output of rank {rank}, got {} and shape {out}",
                before.len()
            ),
        ));
    }
    (0..rank)
        .map(|k| {
            let (d, b, o) = (input.dims()[k], before[k], out.dims()[k]);
            d.checked_add(b)
                .and_then(|db| o.checked_sub(db))
                .map(|after| (b, after))
                .ok_or_else(|| {
                    err(
                        "",
                        format!("pad of axis {k} (size {d}) by {b} before cannot give size {o}"),
                    )
                })
        })
        .collect()
}
