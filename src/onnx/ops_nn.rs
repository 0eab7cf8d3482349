//! Matrix products, convolution, pooling, softmax, reductions, arg-reductions
//! and `CumSum`.

use super::build::{bad, Cx, Node};
use super::ops_shape::norm_axis;
use super::tensor::HostValue;
use crate::ops::ScanOp;
use crate::{Axes, Conv2dOptions, DType, HostTensor, PadMode, Result, SliceArg, Tensor};

pub(super) fn matmul(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (a, b) = (cx.t(n, 0)?, cx.t(n, 1)?);
    cx.g.matmul(a, b)
}

/// `GlobalAveragePool` and `GlobalMaxPool`: a mean or max over every spatial axis.
pub(super) fn global_pool(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
    if r < 3 {
        return Err(bad(format!("{} takes [N, C, D1, ...], got rank {r}", n.op)));
    }
    let axes: Vec<isize> = (2..r as isize).collect();
    if n.op == "GlobalMaxPool" {
        cx.g.max(x, axes, true)
    } else {
        cx.g.mean(x, axes, true)
    }
}

pub(super) fn gemm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (mut a, mut b) = (cx.t(n, 0)?, cx.t(n, 1)?);
    if n.int("transA", 0) != 0 {
        a = cx.g.transpose(a, &[1, 0])?;
    }
    if n.int("transB", 0) != 0 {
        b = cx.g.transpose(b, &[1, 0])?;
    }
    let mut y = cx.g.matmul(a, b)?;
    let dt = cx.g.dtype(y)?;
    let (alpha, beta) = (n.float("alpha", 1.0), n.float("beta", 1.0));
    if alpha != 1.0 {
        let s = cx.scalar(alpha as f64, dt)?;
        y = cx.g.mul(y, s)?;
    }
    if let Some(mut c) = cx.opt_t(n, 2)? {
        if beta != 1.0 {
            let s = cx.scalar(beta as f64, dt)?;
            c = cx.g.mul(c, s)?;
        }
        y = cx.g.add(y, c)?;
    }
    Ok(y)
}

/// A 2-D window op's geometry from ONNX attributes, with explicit per-side pads.
pub(super) struct Geometry {
    pub(super) kernel: [usize; 2],
    pub(super) stride: [usize; 2],
    pub(super) dilation: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub(super) pads: [usize; 4],
}

/// Window attributes for a 1-D or 2-D spatial input of size `hw`; `auto_pad` resolved.
fn geometry(n: &Node, hw: &[usize], kernel: Vec<i64>, ceil: bool) -> Result<Geometry> {
    let k = kernel.len();
    if k != hw.len() || !(1..=2).contains(&k) {
        return Err(n.unsupported(format!("{k}-D windows (only 1-D and 2-D)")));
    }
    let WindowNd {
        kernel,
        stride,
        dilation,
        pads,
    } = window_nd(n, hw, kernel, ceil)?;
    let two = |v: &[usize], d: usize| if k == 1 { [d, v[0]] } else { [v[0], v[1]] };
    Ok(Geometry {
        kernel: two(&kernel, 1),
        stride: two(&stride, 1),
        dilation: two(&dilation, 1),
        pads: if k == 1 {
            [0, pads[0], 0, pads[1]]
        } else {
            [pads[0], pads[1], pads[2], pads[3]]
        },
    })
}

/// An N-D window op's geometry: per spatial axis, with pads `[begin…, end…]`.
pub(super) struct WindowNd {
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub dilation: Vec<usize>,
    pub pads: Vec<usize>,
}

impl WindowNd {
    /// Spatial axis `i`'s output length over a padded size `size`.
    pub(super) fn out_len(&self, i: usize, size: usize) -> Result<usize> {
        let span = (self.kernel[i] - 1) * self.dilation[i] + 1;
        if size < span {
            return Err(bad(format!(
                "a window spans {span} cells but the padded input has {size} on spatial axis {i}"
            )));
        }
        Ok((size - span) / self.stride[i] + 1)
    }
}

/// Window attributes for a spatial input of size `hw` (any rank); `auto_pad` and
/// `ceil_mode` resolved into explicit pads.
pub(super) fn window_nd(n: &Node, hw: &[usize], kernel: Vec<i64>, ceil: bool) -> Result<WindowNd> {
    let k = kernel.len();
    if k != hw.len() || k == 0 {
        return Err(bad(format!(
            "kernel_shape {kernel:?} does not match {} spatial axes",
            hw.len()
        )));
    }
    let get = |name: &str, default: i64, len: usize| -> Result<Vec<usize>> {
        let v = n.ints(name).unwrap_or_else(|| vec![default; len]);
        if v.len() != len {
            return Err(bad(format!("{name} must have {len} values, got {v:?}")));
        }
        v.iter()
            .map(|&x| usize::try_from(x).map_err(|_| bad(format!("negative {name}"))))
            .collect()
    };
    let kernel: Vec<usize> = kernel
        .iter()
        .map(|&x| usize::try_from(x).map_err(|_| bad("negative kernel")))
        .collect::<Result<_>>()?;
    let stride = get("strides", 1, k)?;
    let dilation = get("dilations", 1, k)?;
    let mut pads = get("pads", 0, 2 * k)?;
    if stride.contains(&0) || dilation.contains(&0) || kernel.contains(&0) {
        return Err(bad("kernel_shape, strides and dilations must be positive"));
    }
    let auto = n.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
        for i in 0..k {
            let out = hw[i].div_ceil(stride[i]);
            let span = (kernel[i] - 1) * dilation[i] + 1;
            let total = ((out - 1) * stride[i] + span).saturating_sub(hw[i]);
            let small = total / 2;
            let (b, e) = if auto == "SAME_UPPER" {
                (small, total - small)
            } else {
                (total - small, small)
            };
            pads[i] = b;
            pads[i + k] = e;
        }
    } else if auto == "VALID" {
        pads.iter_mut().for_each(|p| *p = 0);
    } else if auto != "NOTSET" {
        return Err(n.unsupported(format!("auto_pad '{auto}'")));
    }
    if ceil {
        // ceil_mode: grow the end pads so the last partial window exists, unless it would
        // start in the end padding alone.
        for i in 0..k {
            let span = (kernel[i] - 1) * dilation[i] + 1;
            let padded = hw[i] + pads[i] + pads[i + k];
            if padded < span {
                continue;
            }
            let floor = (padded - span) / stride[i];
            let ceil = (padded - span).div_ceil(stride[i]);
            if ceil > floor && ceil * stride[i] < hw[i] + pads[i] {
                pads[i + k] += ceil * stride[i] + span - padded;
            }
        }
    }
    Ok(WindowNd {
        kernel,
        stride,
        dilation,
        pads,
    })
}

/// `x` as `[N, C, H, W]` (a 1-D input `[N, C, W]` gets `H = 1`).
fn as_4d(cx: &mut Cx, x: Tensor) -> Result<(Tensor, Vec<usize>)> {
    let s = cx.g.probe_shape(x)?.dims().to_vec();
    match s.len() {
        4 => Ok((x, s)),
        3 => Ok((
            cx.g.reshape(x, &[s[0] as isize, s[1] as isize, 1, s[2] as isize])?,
            s,
        )),
        r => Err(bad(crate::onnx::unsupported(format!(
            "unsupported: rank-{r} input (only 1-D and 2-D spatial)"
        )))),
    }
}

pub(super) fn back_to(cx: &mut Cx, y: Tensor, orig: &[usize]) -> Result<Tensor> {
    if orig.len() == 3 {
        let s = cx.g.probe_shape(y)?.dims().to_vec();
        return cx
            .g
            .reshape(y, &[s[0] as isize, s[1] as isize, s[3] as isize]);
    }
    Ok(y)
}

pub(super) fn pad_hw(cx: &mut Cx, x: Tensor, p: [usize; 4], value: f64) -> Result<Tensor> {
    if p == [0; 4] {
        return Ok(x);
    }
    cx.g.pad(
        x,
        &[(0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])],
        PadMode::Constant(value),
    )
}

/// The `group` attribute: 1 or more (onnxruntime refuses 0 and negative counts).
pub(super) fn groups(n: &Node) -> Result<usize> {
    let g = n.int("group", 1);
    usize::try_from(g)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or_else(|| bad(format!("group must be at least 1, got {g}")))
}

pub(super) fn conv(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x0 = cx.t(n, 0)?;
    let w0 = cx.t(n, 1)?;
    let bias = cx.opt_t(n, 2)?;
    conv_with(cx, n, x0, w0, bias)
}

/// `Conv` (with `n`'s attributes) of `x0` by `w0`, plus `bias`.
/// A convolution's input and weights as 4-D (a 1-D one gets a unit height), the input's
/// original dims, and its window (`kernel_shape`, when given, must match the weights).
pub(super) fn conv_operands(
    cx: &mut Cx,
    n: &Node,
    x0: Tensor,
    w0: Tensor,
) -> Result<(Tensor, Tensor, Vec<usize>, Geometry)> {
    let (x, orig) = as_4d(cx, x0)?;
    let spatial: Vec<i64> =
        cx.g.probe_shape(w0)?
            .dims()
            .iter()
            .skip(2)
            .map(|&d| d as i64)
            .collect();
    let (w, _) = as_4d(cx, w0)?;
    if let Some(k) = n.ints("kernel_shape").filter(|k| *k != spatial) {
        return Err(bad(format!(
            "kernel_shape {k:?} contradicts the weights' spatial shape {spatial:?}"
        )));
    }
    let g = geometry(n, &orig[2..], spatial, false)?;
    Ok((x, w, orig, g))
}

pub(super) fn conv_with(
    cx: &mut Cx,
    n: &Node,
    x0: Tensor,
    w0: Tensor,
    bias: Option<Tensor>,
) -> Result<Tensor> {
    let (x, w, orig, g) = conv_operands(cx, n, x0, w0)?;
    let p = g.pads;
    let (x, padding) = if p[0] == p[2] && p[1] == p[3] {
        (x, [p[0], p[1]])
    } else {
        (pad_hw(cx, x, p, 0.0)?, [0, 0])
    };
    let opts = Conv2dOptions {
        stride: g.stride,
        padding,
        dilation: g.dilation,
        groups: groups(n)?,
    };
    // f16 convolutions accumulate in f32 and round once, as a GPU's f16 path would.
    let half = cx.g.dtype(x)? == DType::F16;
    let to32 = |cx: &mut Cx, t: Tensor| match cx.g.dtype(t)? {
        DType::F16 => cx.g.cast(t, DType::F32),
        _ => Ok(t),
    };
    let (x, w) = (to32(cx, x)?, to32(cx, w)?);
    let bias = bias.map(|b| to32(cx, b)).transpose()?;
    let mut y = cx.g.conv2d(x, w, bias, opts)?;
    if half {
        y = cx.g.cast(y, DType::F16)?;
    }
    back_to(cx, y, &orig)
}

pub(super) fn pool(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    if n.n_outputs > 1 {
        return Err(n.unsupported("MaxPool's Indices output"));
    }
    let x0 = cx.t(n, 0)?;
    let kernel = n
        .ints("kernel_shape")
        .ok_or_else(|| bad("kernel_shape is required"))?;
    let rank = cx.g.probe_shape(x0)?.rank();
    let dilated = n
        .ints("dilations")
        .is_some_and(|d| d.iter().any(|&d| d != 1));
    if rank > 4 || dilated {
        return pool_nd(cx, n, x0, kernel);
    }
    let (x, orig) = as_4d(cx, x0)?;
    let g = geometry(n, &orig[2..], kernel, n.int("ceil_mode", 0) != 0)?;
    let p = g.pads;
    let y = if n.op == "LpPool" {
        // (Σ |x|^p)^(1/p) over each window: the full-window average of zero-padded |x|^p
        // times the window size.
        let order = n.int("p", 2) as f64;
        let dt = cx.g.dtype(x)?;
        let (pw, inv, size) = (
            cx.scalar(order, dt)?,
            cx.scalar(1.0 / order, dt)?,
            cx.scalar((g.kernel[0] * g.kernel[1]) as f64, dt)?,
        );
        let a = cx.g.abs(x)?;
        let ap = cx.g.pow(a, pw)?;
        let xp = pad_hw(cx, ap, p, 0.0)?;
        let avg = cx.g.avg_pool2d(xp, g.kernel, g.stride, [0, 0])?;
        let sum = cx.g.mul(avg, size)?;
        cx.g.pow(sum, inv)?
    } else if n.op == "MaxPool" && cx.g.dtype(x)? == DType::I32 {
        // 8/16-bit integers (held in i32) are exact in f32.
        let xf = cx.g.cast(x, DType::F32)?;
        let xp = pad_hw(cx, xf, p, f64::NEG_INFINITY)?;
        let y = cx.g.max_pool2d(xp, g.kernel, g.stride, [0, 0])?;
        cx.g.cast(y, DType::I32)?
    } else if n.op == "MaxPool" {
        let xp = pad_hw(cx, x, p, f64::NEG_INFINITY)?;
        cx.g.max_pool2d(xp, g.kernel, g.stride, [0, 0])?
    } else {
        // The window sum over the count of cells that count: both as full-window averages of
        // zero-padded tensors, so any padding and ceil_mode share one rule.
        let declared = geometry(
            n,
            &orig[2..],
            n.ints("kernel_shape").unwrap_or_default(),
            false,
        )?
        .pads;
        let include = n.int("count_include_pad", 0) != 0;
        let xp = pad_hw(cx, x, p, 0.0)?;
        let sum = cx.g.avg_pool2d(xp, g.kernel, g.stride, [0, 0])?;
        let [h, w] = [
            cx.g.probe_shape(x)?.dims()[2],
            cx.g.probe_shape(x)?.dims()[3],
        ];
        let ones = HostTensor::new(vec![1, 1, h, w], vec![1f32; h * w])?;
        let ones = cx.constant(&HostValue::Floats(ones), "pool window count")?;
        let mask = if include {
            let inner = pad_hw(cx, ones, declared, 1.0)?;
            let extra = [
                p[0] - declared[0],
                p[1] - declared[1],
                p[2] - declared[2],
                p[3] - declared[3],
            ];
            pad_hw(cx, inner, extra, 0.0)?
        } else {
            pad_hw(cx, ones, p, 0.0)?
        };
        let count = cx.g.avg_pool2d(mask, g.kernel, g.stride, [0, 0])?;
        cx.g.div(sum, count)?
    };
    back_to(cx, y, &orig)
}

/// Pooling over any number of spatial axes, with dilations: the windows are separable, so
/// each axis is reduced in turn as the max or sum of `kernel` strided slices of the padded
/// input (one slice per window offset along that axis).
fn pool_nd(cx: &mut Cx, n: &Node, x: Tensor, kernel: Vec<i64>) -> Result<Tensor> {
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    if dims.len() < 3 {
        return Err(bad(format!(
            "input of rank {} (want N, C, spatial…)",
            dims.len()
        )));
    }
    let hw = &dims[2..];
    let k = hw.len();
    let w = window_nd(n, hw, kernel.clone(), n.int("ceil_mode", 0) != 0)?;
    let pads = |p: &[usize]| -> Vec<(usize, usize)> {
        let mut v = vec![(0, 0); 2];
        v.extend((0..k).map(|i| (p[i], p[i + k])));
        v
    };
    let dt = cx.g.dtype(x)?;
    let max = n.op == "MaxPool";
    let pad_value = if max { f64::NEG_INFINITY } else { 0.0 };
    let src = if n.op == "LpPool" {
        let order = cx.scalar(n.int("p", 2) as f64, dt)?;
        let a = cx.g.abs(x)?;
        cx.g.pow(a, order)?
    } else {
        x
    };
    let xp =
        cx.g.pad(src, &pads(&w.pads), PadMode::Constant(pad_value))?;
    let y = window_reduce(cx, xp, &w, max)?;
    match n.op {
        "MaxPool" => Ok(y),
        "LpPool" => {
            let inv = cx.scalar(1.0 / n.int("p", 2) as f64, dt)?;
            cx.g.pow(y, inv)
        }
        _ => {
            // The count of cells that count, pooled the same way from a mask of ones:
            // input cells, plus the declared pads when count_include_pad (never the extra
            // end padding ceil_mode adds).
            let mut shape = vec![1, 1];
            shape.extend_from_slice(hw);
            let ones = cx.g.ones(shape, dt)?;
            let mask = if n.int("count_include_pad", 0) != 0 {
                let declared = window_nd(n, hw, kernel, false)?.pads;
                let inner = cx.g.pad(ones, &pads(&declared), PadMode::Constant(1.0))?;
                let extra: Vec<usize> = (0..2 * k).map(|i| w.pads[i] - declared[i]).collect();
                cx.g.pad(inner, &pads(&extra), PadMode::Constant(0.0))?
            } else {
                cx.g.pad(ones, &pads(&w.pads), PadMode::Constant(0.0))?
            };
            let count = window_reduce(cx, mask, &w, false)?;
            cx.g.div(y, count)
        }
    }
}

/// The max (or sum) over every window of the already padded `x`, axis by axis.
fn window_reduce(cx: &mut Cx, x: Tensor, w: &WindowNd, max: bool) -> Result<Tensor> {
    let mut acc = x;
    for i in 0..w.kernel.len() {
        let size = cx.g.probe_shape(acc)?.dims()[2 + i];
        let out = w.out_len(i, size)?;
        let mut r: Option<Tensor> = None;
        for j in 0..w.kernel[i] {
            let start = j * w.dilation[i];
            let stop = start + (out - 1) * w.stride[i] + 1;
            let mut args = vec![SliceArg::full(); 2 + i];
            args.push(SliceArg::new(
                Some(start as isize),
                Some(stop as isize),
                w.stride[i] as isize,
            ));
            let s = cx.g.slice(acc, &args)?;
            r = Some(match r {
                None => s,
                Some(a) if max => cx.g.maximum(a, s)?,
                Some(a) => cx.g.add(a, s)?,
            });
        }
        acc = r.ok_or_else(|| bad("empty window"))?;
    }
    Ok(acc)
}

pub(super) fn softmax(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let s = cx.g.probe_shape(x)?.dims().to_vec();
    let log = n.op == "LogSoftmax";
    if s.contains(&0) {
        // Nothing to normalise: the result is as empty as the input (onnxruntime's answer).
        norm_axis(n.int("axis", -1), s.len())?;
        return Ok(x);
    }
    if n.opset >= 13 {
        let a = norm_axis(n.int("axis", -1), s.len())? as isize;
        return if log {
            cx.g.log_softmax(x, a)
        } else {
            cx.g.softmax(x, a)
        };
    }
    // Before opset 13: over the flattened trailing dimensions from `axis` (default 1).
    let a = norm_axis(n.int("axis", 1), s.len())?;
    let (rows, cols): (usize, usize) = (s[..a].iter().product(), s[a..].iter().product());
    let x2 = cx.g.reshape(x, &[rows as isize, cols as isize])?;
    let y = if log {
        cx.g.log_softmax(x2, 1)?
    } else {
        cx.g.softmax(x2, 1)?
    };
    let back: Vec<isize> = s.iter().map(|&d| d as isize).collect();
    cx.g.reshape(y, &back)
}

pub(super) fn reduce(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let op = n.op;
    // Axes moved from an attribute to input 1: ReduceSum at 13, the others at 18.
    let since = if op == "ReduceSum" { 13 } else { 18 };
    let axes = if n.opset < since {
        n.ints("axes")
    } else {
        cx.opt_ints(n, 1)?
    };
    let keep = n.int("keepdims", 1) != 0;
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
    let axes: Vec<isize> = match axes.filter(|a| !a.is_empty()) {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(a, r).map(|a| a as isize))
            .collect::<Result<_>>()?,
        None if n.int("noop_with_empty_axes", 0) != 0 => return Ok(x),
        None => (0..r as isize).collect(),
    };
    if cx.g.dtype(x)? == DType::Bool {
        let axes = Axes::List(axes);
        return match op {
            "ReduceMax" => cx.g.any(x, axes, keep),
            "ReduceMin" => cx.g.all(x, axes, keep),
            _ => Err(bad(crate::onnx::wrong_dtype("bool input is unsupported"))),
        };
    }
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    let empty = axes.iter().any(|&a| dims[a as usize] == 0);
    if empty && matches!(op, "ReduceMax" | "ReduceMin" | "ReduceLogSumExp") {
        // The identity of an empty set (ONNX's rule; wgflow's max/min refuse it).
        let dt = cx.g.dtype(x)?;
        let value = match (op, dt.is_float()) {
            ("ReduceMin", true) => f64::INFINITY,
            ("ReduceMin", false) => i32::MAX as f64,
            (_, true) => f64::NEG_INFINITY,
            (_, false) => i32::MIN as f64,
        };
        let out: Vec<usize> = (0..r)
            .filter_map(|k| match axes.contains(&(k as isize)) {
                true if keep => Some(1),
                true => None,
                false => Some(dims[k]),
            })
            .collect();
        return cx.g.full(out, dt, value);
    }
    let axes = Axes::List(axes);
    let g = &mut cx.g;
    match op {
        "ReduceSum" => g.sum(x, axes, keep),
        "ReduceMean" => g.mean(x, axes, keep),
        "ReduceMax" => g.max(x, axes, keep),
        "ReduceMin" => g.min(x, axes, keep),
        "ReduceProd" => g.prod(x, axes, keep),
        "ReduceL1" => {
            let a = g.abs(x)?;
            g.sum(a, axes, keep)
        }
        "ReduceL2" => {
            let sq = g.mul(x, x)?;
            let s = g.sum(sq, axes, keep)?;
            g.sqrt(s)
        }
        "ReduceSumSquare" => {
            let sq = g.mul(x, x)?;
            g.sum(sq, axes, keep)
        }
        "ReduceLogSum" => {
            let s = g.sum(x, axes, keep)?;
            g.log(s)
        }
        "ReduceLogSumExp" => g.logsumexp(x, axes, keep),
        _ => Err(bad(crate::onnx::unsupported("unsupported op"))),
    }
}

pub(super) fn arg(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let s = cx.g.probe_shape(x)?.dims().to_vec();
    let axis = norm_axis(n.int("axis", 0), s.len())?;
    let keep = n.int("keepdims", 1) != 0;
    let max = n.op == "ArgMax";
    if n.int("select_last_index", 0) == 0 {
        return if max {
            cx.g.argmax(x, Some(axis as isize), keep)
        } else {
            cx.g.argmin(x, Some(axis as isize), keep)
        };
    }
    // The last index: the first one in the flipped axis, counted from the end.
    let mut args = vec![SliceArg::full(); axis];
    args.push(SliceArg::new(None, None, -1));
    let f = cx.g.slice(x, &args)?;
    let i = if max {
        cx.g.argmax(f, Some(axis as isize), keep)?
    } else {
        cx.g.argmin(f, Some(axis as isize), keep)?
    };
    let last = cx.scalar((s[axis] as f64) - 1.0, DType::I32)?;
    cx.g.sub(last, i)
}

pub(super) fn cumsum(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let axis = cx.ints(n, 1)?;
    let axis = *axis.first().ok_or_else(|| bad("axis must be a scalar"))?;
    let x = cx.t(n, 0)?;
    let r = cx.g.probe_shape(x)?.rank();
    let axis = norm_axis(axis, r)? as isize;
    let op = if n.op == "CumProd" {
        ScanOp::Prod
    } else {
        ScanOp::Sum
    };
    cx.g.cumulative(
        op,
        x,
        axis,
        n.int("exclusive", 0) != 0,
        n.int("reverse", 0) != 0,
    )
}

/// `ConvTranspose` is the input gradient of a convolution whose weights are these:
/// [`Graph::conv2d_backprop_input`] onto the unpadded output, cropped by the pads.
///
/// [`Graph::conv2d_backprop_input`]: crate::Graph::conv2d_backprop_input
pub(super) fn conv_transpose(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x0 = cx.t(n, 0)?;
    let w0 = cx.t(n, 1)?;
    let orig = cx.g.probe_shape(x0)?.dims().to_vec();
    let ws = cx.g.probe_shape(w0)?.dims().to_vec();
    if orig.len() < 3 || ws.len() != orig.len() {
        return Err(bad(format!(
            "X of shape {orig:?} and W of shape {ws:?} do not match"
        )));
    }
    let k = orig.len() - 2;
    let get = |name: &str, default: i64, len: usize| -> Result<Vec<i64>> {
        let v = n.ints(name).unwrap_or_else(|| vec![default; len]);
        if v.len() != len {
            return Err(bad(format!("{name} must have {len} values, got {v:?}")));
        }
        Ok(v)
    };
    let stride = get("strides", 1, k)?;
    let dilation = get("dilations", 1, k)?;
    let out_pad = get("output_padding", 0, k)?;
    let mut pads = get("pads", 0, 2 * k)?;
    let kernel: Vec<i64> = n.ints("kernel_shape").unwrap_or_else(|| {
        ws[2..]
            .iter()
            .rev()
            .take(k)
            .rev()
            .map(|&d| d as i64)
            .collect()
    });
    let input: Vec<i64> = orig[2..].iter().map(|&d| d as i64).collect();
    let span: Vec<i64> = (0..k).map(|i| (kernel[i] - 1) * dilation[i] + 1).collect();
    let full: Vec<i64> = (0..k)
        .map(|i| stride[i] * (input[i] - 1) + out_pad[i] + span[i])
        .collect();
    let auto = n.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let target = n.ints("output_shape").or_else(|| {
        (auto == "SAME_UPPER" || auto == "SAME_LOWER")
            .then(|| (0..k).map(|i| input[i] * stride[i]).collect())
    });
    let mut full = full;
    if let Some(t) = target {
        let t: Vec<i64> = t.iter().rev().take(k).rev().copied().collect();
        for i in 0..k {
            // A target past the unpadded output grows it at the end (implicit output padding).
            full[i] = full[i].max(t[i]);
            let total = full[i] - t[i];
            let (b, e) = if auto == "SAME_UPPER" {
                (total / 2, total - total / 2)
            } else {
                (total - total / 2, total / 2)
            };
            pads[i] = b;
            pads[i + k] = e;
        }
    } else if auto == "VALID" {
        pads.iter_mut().for_each(|p| *p = 0);
    }
    if k == 3 {
        let dims = Window3 {
            stride,
            dilation,
            pads,
            full,
        };
        return conv_transpose_3d(cx, n, x0, w0, dims);
    }
    let (x, _) = as_4d(cx, x0)?;
    let (w, _) = as_4d(cx, w0)?;
    let two = |v: &[i64], d: i64| -> Result<[usize; 2]> {
        let (a, b) = if k == 1 { (d, v[0]) } else { (v[0], v[1]) };
        Ok([
            usize::try_from(a).map_err(|_| bad("negative size"))?,
            usize::try_from(b).map_err(|_| bad("negative size"))?,
        ])
    };
    let opts = Conv2dOptions {
        stride: two(&stride, 1)?,
        padding: [0, 0],
        dilation: two(&dilation, 1)?,
        groups: groups(n)?,
    };
    let full_hw = two(&full, 1)?;
    let mut y = cx.g.conv2d_backprop_input(x, w, full_hw, opts)?;
    let (pb, pe) = (two(&pads[..k], 0)?, two(&pads[k..], 0)?);
    if pb != [0, 0] || pe != [0, 0] {
        let crop = |i: usize| {
            SliceArg::new(
                Some(pb[i] as isize),
                Some((full_hw[i] - pe[i].min(full_hw[i])) as isize),
                1,
            )
        };
        y =
            cx.g.slice(y, &[SliceArg::full(), SliceArg::full(), crop(0), crop(1)])?;
    }
    if let Some(b) = cx.opt_t(n, 2)? {
        let c = cx.g.probe_shape(b)?.numel() as isize;
        let b4 = cx.g.reshape(b, &[1, c, 1, 1])?;
        y = cx.g.add(y, b4)?;
    }
    back_to(cx, y, &orig)
}

/// A 3-D transposed convolution's resolved geometry (depth, height, width).
struct Window3 {
    stride: Vec<i64>,
    dilation: Vec<i64>,
    /// `[begin…, end…]`, cropped from the full output.
    pads: Vec<i64>,
    /// The uncropped output size.
    full: Vec<i64>,
}

/// 3-D `ConvTranspose` as a sum over the kernel's depth taps of 2-D transposed convolutions
/// (every input depth slice at once, as a batch), each placed at depth `i·stride + kd·dilation`
/// of the full output, then cropped by the pads.
fn conv_transpose_3d(cx: &mut Cx, n: &Node, x: Tensor, w: Tensor, g: Window3) -> Result<Tensor> {
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let ws = cx.g.probe_shape(w)?.dims().to_vec();
    let (batch, c, d, h, wd) = (xs[0], xs[1], xs[2], xs[3], xs[4]);
    let us = |v: i64| usize::try_from(v).map_err(|_| bad("negative size"));
    let (sd, dd) = (us(g.stride[0])?, us(g.dilation[0])?);
    let full: Vec<usize> = g.full.iter().map(|&v| us(v)).collect::<Result<_>>()?;
    let pads: Vec<usize> = g.pads.iter().map(|&v| us(v)).collect::<Result<_>>()?;
    if sd == 0 || dd == 0 {
        return Err(bad("strides and dilations must be positive"));
    }
    let opts = Conv2dOptions {
        stride: [us(g.stride[1])?, us(g.stride[2])?],
        padding: [0, 0],
        dilation: [us(g.dilation[1])?, us(g.dilation[2])?],
        groups: groups(n)?,
    };
    let xt = cx.g.transpose(x, &[0, 2, 1, 3, 4])?;
    let x2 = cx.g.reshape(
        xt,
        &[(batch * d) as isize, c as isize, h as isize, wd as isize],
    )?;
    let placed_len = (d - 1) * sd + 1;
    let mut acc: Option<Tensor> = None;
    for kd in 0..ws[2] {
        let wk = cx.g.slice(
            w,
            &[
                SliceArg::full(),
                SliceArg::full(),
                SliceArg::new(Some(kd as isize), Some(kd as isize + 1), 1),
            ],
        )?;
        let wk = cx.g.reshape(
            wk,
            &[
                ws[0] as isize,
                ws[1] as isize,
                ws[3] as isize,
                ws[4] as isize,
            ],
        )?;
        let z =
            cx.g.conv2d_backprop_input(x2, wk, [full[1], full[2]], opts)?;
        let zs = cx.g.probe_shape(z)?.dims().to_vec();
        let (o, fh, fw) = (zs[1] as isize, zs[2] as isize, zs[3] as isize);
        // Depth slices spread `stride` apart: [N, D, 1, …] padded to [N, D, s, …].
        let z =
            cx.g.reshape(z, &[batch as isize, d as isize, 1, o, fh, fw])?;
        let z = cx.g.pad(
            z,
            &[(0, 0), (0, 0), (0, sd - 1), (0, 0), (0, 0), (0, 0)],
            PadMode::Constant(0.0),
        )?;
        let z =
            cx.g.reshape(z, &[batch as isize, (d * sd) as isize, o, fh, fw])?;
        let z = cx.g.slice(
            z,
            &[
                SliceArg::full(),
                SliceArg::new(Some(0), Some(placed_len as isize), 1),
            ],
        )?;
        let before = kd * dd;
        let after = full[0]
            .checked_sub(placed_len + before)
            .ok_or_else(|| bad("output depth too small"))?;
        let z = cx.g.pad(
            z,
            &[(0, 0), (before, after), (0, 0), (0, 0), (0, 0)],
            PadMode::Constant(0.0),
        )?;
        acc = Some(match acc {
            None => z,
            Some(a) => cx.g.add(a, z)?,
        });
    }
    let y = acc.ok_or_else(|| bad("empty kernel"))?;
    let y = cx.g.transpose(y, &[0, 2, 1, 3, 4])?;
    let crop = |i: usize| -> Result<SliceArg> {
        let end = full[i].checked_sub(pads[i + 3]).filter(|&e| e > pads[i]);
        let end = end.ok_or_else(|| bad("pads remove the whole output"))?;
        Ok(SliceArg::new(Some(pads[i] as isize), Some(end as isize), 1))
    };
    let mut y = if pads.iter().any(|&p| p != 0) {
        let args = [
            SliceArg::full(),
            SliceArg::full(),
            crop(0)?,
            crop(1)?,
            crop(2)?,
        ];
        cx.g.slice(y, &args)?
    } else {
        y
    };
    if let Some(b) = cx.opt_t(n, 2)? {
        let c = cx.g.probe_shape(b)?.numel() as isize;
        let b5 = cx.g.reshape(b, &[1, c, 1, 1, 1])?;
        y = cx.g.add(y, b5)?;
    }
    Ok(y)
}
