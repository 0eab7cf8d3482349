//! Gradient rules of conv2d and pooling, and of their backward primitives.
//!
//! conv2d's and the pools' rules build the backward primitives of `backward.rs`
//! (`conv2d_backprop_input`, `conv2d_backprop_filter`, `max_pool2d_grad`,
//! `avg_pool2d_grad`): one kernel each. The backward primitives are bilinear (conv) or
//! linear (avg) in their inputs, so their own rules are the forward op and the other
//! backward primitive; `max_pool2d_grad`'s gradient for `dy` gathers at each window's first
//! maximum, and is zero for `x` (a piecewise-constant routing).
//!
//! The composite rules below (in [`reference`]) are built only from forward ops (reshape,
//! transpose, flip, pad, slice, concat, comparisons, `where`, cumsum and conv2d itself);
//! they are what the primitives are tested against, and what a pool's rule falls back to
//! when its gathered GPU kernel would loop past [`LOOP_BUDGET`] (a window far wider than
//! its stride):
//!
//! * conv2d, input: a transposed convolution. `dy` is dilated by the stride (zeros
//!   interleaved), padded by `(k - 1)·dilation - padding` before and up to the input's size
//!   after (rows the forward stride never reached get zeros), then correlated at the forward
//!   dilation with the weights flipped spatially and with in/out channels swapped per group.
//! * conv2d, weights: `dw[o, c, i, j] = Σ_{n, y, x} dy[n, o, y, x] · x_pad[n, c, y·s + i·d,
//!   x·s + j·d]`, a convolution of the (channel ↔ batch swapped) padded input with `dy` as
//!   the kernel, its stride the forward dilation and its dilation the forward stride. The
//!   batch and the group index share the contracted channel axis so that groups stay apart.
//!   When `dy`'s window would loop past [`LOOP_BUDGET`] it is cut into tiles whose partial
//!   weight gradients are added.
//! * avg pooling: `dy / count` (the count of in-bounds cells, as the forward divides) spread
//!   over each window by a transposed convolution with a kernel of ones.
//! * max pooling: the whole of `dy` goes to the **first** in-bounds cell of each window (in
//!   row-major window order, the order the forward folds in) that equals the output, or is
//!   NaN when the output is NaN; ties give nothing to the later cells (TensorFlow's and
//!   PyTorch's rule). The `kh·kw` window taps are stacked, the first match found with a
//!   cumulative sum, and the routed values scattered back by a transposed convolution with
//!   one-hot kernels.

use super::backward::{NnGradKernel, NnGradOp};
use super::{dims4, Nn, PoolKind, Window, LOOP_BUDGET};
use crate::graph::{Conv2dOptions, Graph, PadMode, Tensor};
use crate::ops::{GradCx, SliceArg};
use crate::{DType, HostTensor, Result};

impl Nn {
    /// The vector-Jacobian product of one node of the family (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let want = |i: usize| cx.wants(i);
        match *self {
            Nn::Conv2d { window, groups } => {
                let (x, w) = (cx.inputs[0], cx.inputs[1]);
                let xs = dims4(g.probe_shape(x)?);
                let ws = dims4(g.probe_shape(w)?);
                // An empty side (no batch, no channels) contributes nothing: zeros, without
                // building ops over empty tensors.
                if xs.contains(&0) || ws.contains(&0) || g.probe_shape(cx.dy)?.numel() == 0 {
                    let dx = want(0)
                        .then(|| g.zeros(xs.to_vec(), DType::F32))
                        .transpose()?;
                    let dw = want(1)
                        .then(|| g.zeros(ws.to_vec(), DType::F32))
                        .transpose()?;
                    return Ok(vec![dx, dw]);
                }
                let opts = window.conv_options(groups);
                let dx = want(0)
                    .then(|| g.conv2d_backprop_input(cx.dy, w, [xs[2], xs[3]], opts))
                    .transpose()?;
                let dw = want(1)
                    .then(|| g.conv2d_backprop_filter(x, cx.dy, [ws[2], ws[3]], opts))
                    .transpose()?;
                Ok(vec![dx, dw])
            }
            Nn::Pool { kind, window } => {
                if !want(0) {
                    return Ok(vec![None]);
                }
                let x = cx.inputs[0];
                let xs = dims4(g.probe_shape(x)?);
                let hw = [xs[2], xs[3]];
                let (k, s, p) = (window.kernel, window.stride, window.padding);
                let ys = g.probe_shape(cx.dy)?.clone();
                let gathered = NnGradKernel {
                    op: match kind {
                        PoolKind::Max => NnGradOp::MaxPool,
                        PoolKind::Avg => NnGradOp::AvgPool,
                    },
                    x: crate::Shape(xs.to_vec()),
                    w: crate::Shape(vec![xs[1], 1, k[0], k[1]]),
                    y: ys,
                    window,
                    groups: xs[1].max(1),
                    chunk: None,
                };
                let fits = gathered.loop_iterations() <= LOOP_BUDGET;
                let dx = match (kind, fits) {
                    (PoolKind::Max, true) => g.max_pool2d_grad(x, cx.dy, k, s, p)?,
                    (PoolKind::Avg, true) => g.avg_pool2d_grad(cx.dy, hw, k, s, p)?,
                    (PoolKind::Max, false) => max_pool_grad(g, x, cx.output, cx.dy, &window)?,
                    (PoolKind::Avg, false) => avg_pool_grad(g, cx.dy, hw, &window)?,
                };
                Ok(vec![Some(dx)])
            }
            Nn::Conv2dBackpropInput { window, groups, .. } => {
                // dx = Σ dy·w over matching taps: d(dy) is conv2d(ḡ, w), d(w) the filter
                // gradient of ḡ against dy.
                let (dy, w) = (cx.inputs[0], cx.inputs[1]);
                let opts = window.conv_options(groups);
                let ddy = want(0)
                    .then(|| g.conv2d(cx.dy, w, None, opts))
                    .transpose()?;
                let dw = want(1)
                    .then(|| g.conv2d_backprop_filter(cx.dy, dy, window.kernel, opts))
                    .transpose()?;
                Ok(vec![ddy, dw])
            }
            Nn::Conv2dBackpropFilter { window, groups } => {
                let (x, dy) = (cx.inputs[0], cx.inputs[1]);
                let xs = dims4(g.probe_shape(x)?);
                let opts = window.conv_options(groups);
                let dx = want(0)
                    .then(|| g.conv2d_backprop_input(dy, cx.dy, [xs[2], xs[3]], opts))
                    .transpose()?;
                let ddy = want(1)
                    .then(|| g.conv2d(x, cx.dy, None, opts))
                    .transpose()?;
                Ok(vec![dx, ddy])
            }
            Nn::PoolGrad {
                kind: PoolKind::Avg,
                window,
                ..
            } => {
                let (k, s, p) = (window.kernel, window.stride, window.padding);
                Ok(vec![want(0)
                    .then(|| g.avg_pool2d(cx.dy, k, s, p))
                    .transpose()?])
            }
            Nn::PoolGrad {
                kind: PoolKind::Max,
                window,
                ..
            } => {
                let x = cx.inputs[0];
                let dx = want(0)
                    .then(|| {
                        let xs = g.probe_shape(x)?.dims().to_vec();
                        g.zeros(xs, DType::F32)
                    })
                    .transpose()?;
                let ddy = want(1)
                    .then(|| max_pool_gather(g, x, cx.dy, &window))
                    .transpose()?;
                Ok(vec![dx, ddy])
            }
        }
    }
}

/// The composite rules, kept as the reference the backward primitives are tested against
/// (and built by the pools' rules when the gathered kernel would loop too long).
#[doc(hidden)]
pub mod reference {
    use super::*;

    /// conv2d's input gradient as a transposed convolution of forward ops.
    pub fn conv2d_backprop_input(
        g: &mut Graph,
        dy: Tensor,
        w: Tensor,
        input_hw: [usize; 2],
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let ws = dims4(g.probe_shape(w)?);
        let window = Window::conv([ws[2], ws[3]], &opts);
        conv_input_grad(g, dy, w, &window, opts.groups, input_hw)
    }

    /// conv2d's weight gradient as a convolution of the batch-swapped input with `dy`.
    pub fn conv2d_backprop_filter(
        g: &mut Graph,
        x: Tensor,
        dy: Tensor,
        kernel: [usize; 2],
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let window = Window::conv(kernel, &opts);
        conv_weight_grad(g, dy, x, &window, opts.groups, kernel)
    }

    /// max pooling's gradient through stacked window taps, a cumsum and one-hot kernels.
    pub fn max_pool2d_grad(
        g: &mut Graph,
        x: Tensor,
        dy: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        let y = g.max_pool2d(x, kernel, stride, padding)?;
        let window = Window::pool(kernel, stride, padding);
        max_pool_grad(g, x, y, dy, &window)
    }

    /// avg pooling's gradient through a transposed convolution with a kernel of ones.
    pub fn avg_pool2d_grad(
        g: &mut Graph,
        dy: Tensor,
        input_hw: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        avg_pool_grad(g, dy, input_hw, &Window::pool(kernel, stride, padding))
    }
}

fn isz(v: &[usize]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

/// Pad (positive) or crop (negative) the two spatial axes of an NCHW tensor by
/// `(before, after)` per axis.
fn pad_or_crop(g: &mut Graph, t: Tensor, sides: [(isize, isize); 2]) -> Result<Tensor> {
    let grow = |v: isize| v.max(0) as usize;
    let mut t = t;
    if sides.iter().any(|&(a, b)| a > 0 || b > 0) {
        let pads = [
            (0, 0),
            (0, 0),
            (grow(sides[0].0), grow(sides[0].1)),
            (grow(sides[1].0), grow(sides[1].1)),
        ];
        t = g.pad(t, &pads, PadMode::Constant(0.0))?;
    }
    if sides.iter().any(|&(a, b)| a < 0 || b < 0) {
        let d = dims4(g.probe_shape(t)?);
        let cut = |k: usize| {
            let (a, b) = sides[k];
            SliceArg::range(grow(-a) as isize, d[2 + k] as isize - grow(-b) as isize)
        };
        t = g.slice(t, &[SliceArg::full(), SliceArg::full(), cut(0), cut(1)])?;
    }
    Ok(t)
}

/// The transposed convolution of `dy` (`[N, Ci, OH, OW]`, the output of a forward window
/// op with geometry `window` over `[.., H, W] = hw`) with `wt` (`[Co, Ci / groups, KH, KW]`,
/// already flipped and channel-swapped): `[N, Co, H, W]`.
fn conv_transpose(
    g: &mut Graph,
    dy: Tensor,
    wt: Tensor,
    window: &Window,
    groups: usize,
    hw: [usize; 2],
) -> Result<Tensor> {
    let [n, ci, oh, ow] = dims4(g.probe_shape(dy)?);
    let s = window.stride;
    // Zeros interleaved: [.., OH, 1, OW, 1] padded to [.., OH, s, OW, s] gives rows y·s.
    let dilated = if s == [1, 1] {
        dy
    } else {
        let t = g.reshape(dy, &isz(&[n, ci, oh, 1, ow, 1]))?;
        let pads = [(0, 0), (0, 0), (0, 0), (0, s[0] - 1), (0, 0), (0, s[1] - 1)];
        let t = g.pad(t, &pads, PadMode::Constant(0.0))?;
        g.reshape(t, &isz(&[n, ci, oh * s[0], ow * s[1]]))?
    };
    let len = [oh * s[0], ow * s[1]];
    // Padded so that a stride-1 correlation at the forward dilation gives exactly `hw`:
    // before + len + after = H + (K - 1)·d.
    let sides: [(isize, isize); 2] = std::array::from_fn(|k| {
        let reach = ((window.kernel[k] - 1) * window.dilation[k]) as isize;
        let before = reach - window.padding[k] as isize;
        (
            before,
            (hw[k] + window.padding[k]) as isize - len[k] as isize,
        )
    });
    let padded = pad_or_crop(g, dilated, sides)?;
    g.conv2d(
        padded,
        wt,
        None,
        Conv2dOptions {
            stride: [1, 1],
            padding: [0, 0],
            dilation: window.dilation,
            groups,
        },
    )
}

/// conv2d's gradient with respect to its input `[N, C, H, W]` (`hw = [H, W]`).
fn conv_input_grad(
    g: &mut Graph,
    dy: Tensor,
    w: Tensor,
    window: &Window,
    groups: usize,
    hw: [usize; 2],
) -> Result<Tensor> {
    let [o, cg, kh, kw] = dims4(g.probe_shape(w)?);
    let og = o / groups;
    // [O, Cg, KH, KW] → [C, Og, KH, KW]: each group's in and out channels swap places.
    let t = g.reshape(w, &isz(&[groups, og, cg, kh, kw]))?;
    let t = g.transpose(t, &[0, 2, 1, 3, 4])?;
    let t = g.reshape(t, &isz(&[groups * cg, og, kh, kw]))?;
    let wt = g.flip(t, [2, 3])?;
    conv_transpose(g, dy, wt, window, groups, hw)
}

/// conv2d's gradient with respect to its weights `[O, C / groups, KH, KW]` (`k = [KH, KW]`).
fn conv_weight_grad(
    g: &mut Graph,
    dy: Tensor,
    x: Tensor,
    window: &Window,
    groups: usize,
    k: [usize; 2],
) -> Result<Tensor> {
    let [n, c, h, wd] = dims4(g.probe_shape(x)?);
    let [_, o, oh, ow] = dims4(g.probe_shape(dy)?);
    let (cg, og) = (c / groups, o / groups);
    // x → [Cg, G·N, H, W] and dy → [O, N, OH, OW]: the batch is the contracted channel, and
    // group `o / Og` of the output reads channels `[g·N, (g + 1)·N)`, its own group's.
    let t = g.reshape(x, &isz(&[n, groups, cg, h, wd]))?;
    let t = g.transpose(t, &[2, 1, 0, 3, 4])?;
    let xt = g.reshape(t, &isz(&[cg, groups * n, h, wd]))?;
    let t = g.reshape(dy, &isz(&[n, groups, og, oh, ow]))?;
    let t = g.transpose(t, &[1, 2, 0, 3, 4])?;
    let dyt = g.reshape(t, &isz(&[o, n, oh, ow]))?;
    let (s, d, p) = (window.stride, window.dilation, window.padding);
    // Padded rows one output reads: `tap` of them from `y·s`; all outputs read
    // [0, (OH - 1)·s + tap).
    let tap = [(k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1];
    let need = [(oh - 1) * s[0] + tap[0], (ow - 1) * s[1] + tap[1]];
    let sides = [
        (p[0] as isize, need[0] as isize - (h + p[0]) as isize),
        (p[1] as isize, need[1] as isize - (wd + p[1]) as isize),
    ];
    let xp = pad_or_crop(g, xt, sides)?;
    // Each invocation loops over `dy`'s window: a tile's loop stays within budget.
    let budget = LOOP_BUDGET as usize;
    let tw = ow.min(budget / 4);
    let th = oh.min((budget - 1) / (1 + tw));
    let opts = Conv2dOptions {
        stride: d,
        padding: [0, 0],
        dilation: s,
        groups,
    };
    let mut total: Option<Tensor> = None;
    for y0 in (0..oh).step_by(th) {
        for x0 in (0..ow).step_by(tw) {
            let (y1, x1) = ((y0 + th).min(oh), (x0 + tw).min(ow));
            let (xin, kern) = if y1 - y0 == oh && x1 - x0 == ow {
                (xp, dyt)
            } else {
                let all = SliceArg::full();
                let out = |a: usize, b: usize| SliceArg::range(a as isize, b as isize);
                let read = |a: usize, b: usize, k: usize| {
                    SliceArg::range((a * s[k]) as isize, ((b - 1) * s[k] + tap[k]) as isize)
                };
                let kern = g.slice(dyt, &[all, all, out(y0, y1), out(x0, x1)])?;
                let xin = g.slice(xp, &[all, all, read(y0, y1, 0), read(x0, x1, 1)])?;
                (xin, kern)
            };
            let part = g.conv2d(xin, kern, None, opts)?;
            total = Some(match total {
                None => part,
                Some(t) => g.add(t, part)?,
            });
        }
    }
    let Some(sum) = total else {
        return Err(crate::Error::Internal(
            "conv2d weight gradient over no tiles".into(),
        ));
    };
    // [Cg, O, KH, KW] → [O, Cg, KH, KW].
    g.transpose(sum, &[1, 0, 2, 3])
}

/// Which taps of each output's window fall inside the input along spatial axis `k`:
/// `[output][tap]`.
fn in_bounds(window: &Window, k: usize, outs: usize, n: usize) -> Vec<Vec<bool>> {
    (0..outs)
        .map(|o| {
            (0..window.kernel[k])
                .map(|t| window.at(k, o, t, n).is_some())
                .collect()
        })
        .collect()
}

/// avg pooling's gradient: each window's `dy / count` added to every in-bounds cell.
fn avg_pool_grad(g: &mut Graph, dy: Tensor, hw: [usize; 2], window: &Window) -> Result<Tensor> {
    let [n, c, oh, ow] = dims4(g.probe_shape(dy)?);
    let [h, wd] = hw;
    let rows = in_bounds(window, 0, oh, h);
    let cols = in_bounds(window, 1, ow, wd);
    let count = |v: &Vec<bool>| v.iter().filter(|&&b| b).count() as f32;
    let counts: Vec<f32> = rows
        .iter()
        .flat_map(|r| cols.iter().map(move |q| count(r) * count(q)))
        .collect();
    let counts = g.constant(HostTensor::new(vec![oh, ow], counts)?)?;
    let share = g.div(dy, counts)?;
    let share = g.reshape(share, &isz(&[n * c, 1, oh, ow]))?;
    let [kh, kw] = window.kernel;
    let ones = g.ones(vec![1, 1, kh, kw], DType::F32)?;
    let dx = conv_transpose(g, share, ones, window, 1, [h, wd])?;
    g.reshape(dx, &isz(&[n, c, h, wd]))
}

/// Tap (i, j) of every window of `t` (`[N, C, H, W]`): `t_pad[.., y·s + i, x·s + j]`,
/// stacked as `[N, C, KH·KW, OH, OW]`.
fn window_taps(g: &mut Graph, t: Tensor, window: &Window, out: [usize; 2]) -> Result<Tensor> {
    let ([kh, kw], s, p) = (window.kernel, window.stride, window.padding);
    let [oh, ow] = out;
    let tp = pad_or_crop(
        g,
        t,
        [
            (p[0] as isize, p[0] as isize),
            (p[1] as isize, p[1] as isize),
        ],
    )?;
    let mut taps = Vec::with_capacity(kh * kw);
    for i in 0..kh {
        for j in 0..kw {
            let at = |t: usize, o: usize, k: usize| {
                SliceArg::new(
                    Some(t as isize),
                    Some((t + (o - 1) * s[k] + 1) as isize),
                    s[k] as isize,
                )
            };
            let all = SliceArg::full();
            taps.push(g.slice(tp, &[all, all, at(i, oh, 0), at(j, ow, 1)])?);
        }
    }
    g.stack(&taps, 2)
}

/// Where each window's maximum `y` is first found: a bool `[N, C, KH·KW, OH, OW]` with one
/// true tap per window (the first in-bounds cell, in row-major window order, that equals
/// the output, or is NaN when the output is).
fn first_max(g: &mut Graph, x: Tensor, y: Tensor, window: &Window) -> Result<Tensor> {
    let [_, _, h, wd] = dims4(g.probe_shape(x)?);
    let [_, _, oh, ow] = dims4(g.probe_shape(y)?);
    let [kh, kw] = window.kernel;
    let stacked = window_taps(g, x, window, [oh, ow])?;
    let ye = g.expand_dims(y, 2)?;
    let equal = g.equal(stacked, ye)?;
    let nan = g.isnan(stacked)?;
    let hit = g.logical_or(equal, nan)?;
    // Padding never wins: taps outside the input are masked out.
    let rows = in_bounds(window, 0, oh, h);
    let cols = in_bounds(window, 1, ow, wd);
    let mut valid = Vec::with_capacity(kh * kw * oh * ow);
    for i in 0..kh {
        for j in 0..kw {
            for r in &rows {
                valid.extend(cols.iter().map(|q| r[i] && q[j]));
            }
        }
    }
    let valid = g.constant(HostTensor::new(vec![kh * kw, oh, ow], valid)?)?;
    let hit = g.logical_and(hit, valid)?;
    let (one, zero) = (g.constant(1.0f32)?, g.constant(0.0f32)?);
    let hits = g.select(hit, one, zero)?;
    // The first hit is the one where the running count of hits reaches 1.
    let running = g.cumsum(hits, 2)?;
    let reached = g.equal(running, one)?;
    g.logical_and(hit, reached)
}

/// max pooling's gradient: `dy` routed to the first in-bounds cell of each window that
/// equals the output (or is NaN, when the output is).
fn max_pool_grad(
    g: &mut Graph,
    x: Tensor,
    y: Tensor,
    dy: Tensor,
    window: &Window,
) -> Result<Tensor> {
    let [n, c, h, wd] = dims4(g.probe_shape(x)?);
    let [_, _, oh, ow] = dims4(g.probe_shape(dy)?);
    let [kh, kw] = window.kernel;
    let first = first_max(g, x, y, window)?;
    let zero = g.constant(0.0f32)?;
    let dye = g.expand_dims(dy, 2)?;
    let routed = g.select(first, dye, zero)?;
    let routed = g.reshape(routed, &isz(&[n * c, kh * kw, oh, ow]))?;
    // Tap (i, j) scatters through the one-hot kernel at (KH-1-i, KW-1-j) (flipped).
    let mut onehot = vec![0f32; kh * kw * kh * kw];
    for i in 0..kh {
        for j in 0..kw {
            let tap = i * kw + j;
            onehot[(tap * kh + (kh - 1 - i)) * kw + (kw - 1 - j)] = 1.0;
        }
    }
    let onehot = g.constant(HostTensor::new(vec![1, kh * kw, kh, kw], onehot)?)?;
    let dx = conv_transpose(g, routed, onehot, window, 1, [h, wd])?;
    g.reshape(dx, &isz(&[n, c, h, wd]))
}

/// `max_pool2d_grad`'s gradient for `dy`: `gx` (shaped like `x`) read at each window's
/// first maximum, `[N, C, OH, OW]`.
fn max_pool_gather(g: &mut Graph, x: Tensor, gx: Tensor, window: &Window) -> Result<Tensor> {
    let (k, s, p) = (window.kernel, window.stride, window.padding);
    let y = g.max_pool2d(x, k, s, p)?;
    let [_, _, oh, ow] = dims4(g.probe_shape(y)?);
    let first = first_max(g, x, y, window)?;
    let taps = window_taps(g, gx, window, [oh, ow])?;
    let zero = g.constant(0.0f32)?;
    let picked = g.select(first, taps, zero)?;
    g.sum(picked, crate::Axes::List(vec![2]), false)
}
