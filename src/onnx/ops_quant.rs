//! Quantized inference: `QuantizeLinear`, `DequantizeLinear`, `DynamicQuantizeLinear`,
//! `MatMulInteger`, `ConvInteger`, `QLinearMatMul` and `QLinearConv`, over 8- and 16-bit
//! integers held in i32 (`tensor::map_dtype`).
//!
//! Integer products are exact: `MatMulInteger` is an i32 matmul of the zero-point-shifted
//! operands; a convolution runs in f32 where that is exact (every output sums at most
//! 2^24 / 255^2 = 258 products: depthwise ones, 3x3 over few channels), and otherwise as an
//! i32 matmul of its gathered windows. Requantization (`QLinear*`) scales the i32
//! accumulator in f32 and rounds half to even, as onnxruntime does.

use super::build::{bad, Cx, Node, Val};
use super::ops_nn::{back_to, conv_operands, conv_with, groups, pad_hw};
use super::proto::tensor_proto::DataType;
use super::tensor::{narrow_range, small_float};
use crate::{DType, Result, SliceArg, Tensor};

pub(super) fn matmul_integer_op(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    matmul_integer(cx, n, 0, 1, 2, 3)
}

pub(super) fn conv_integer_op(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    conv_integer(cx, n, 0, 1, 2, 3, None)
}

/// The range of the 8/16-bit type of input `i` (a zero point), or of `default`.
fn range_of(cx: &Cx, n: &Node, i: usize, default: DataType) -> (i64, i64) {
    n.input(i)
        .and_then(|name| cx.narrow_elem(name))
        .and_then(narrow_range)
        .or_else(|| narrow_range(default as i32))
        .unwrap_or((0, 255))
}

fn f32_of(cx: &mut Cx, t: Tensor) -> Result<Tensor> {
    if cx.g.dtype(t)? == DType::F32 {
        Ok(t)
    } else {
        cx.g.cast(t, DType::F32)
    }
}

/// A per-tensor (scalar or one-element), per-axis (1-D along `axis`) or blocked (the input's
/// rank, `block` elements per value along `axis`) scale or zero point, shaped to broadcast
/// against `x` (of `rank` dims and `len` elements along `axis`).
fn along(
    cx: &mut Cx,
    p: Tensor,
    rank: usize,
    axis: Option<usize>,
    len: usize,
    block: usize,
) -> Result<Tensor> {
    let dims = cx.g.probe_shape(p)?.dims().to_vec();
    let numel: usize = dims.iter().product();
    if numel == 1 && block == 0 {
        return cx.g.reshape(p, &[]);
    }
    let axis = axis.ok_or_else(|| bad(format!("axis is out of range for rank {rank}")))?;
    if block > 0 {
        if dims.len() != rank {
            return Err(bad(format!(
                "a blocked scale must have the input's rank {rank}, got {dims:?}"
            )));
        }
        let nb = dims[axis];
        if nb * block < len || (nb - 1) * block >= len.max(1) {
            return Err(bad(format!(
                "{nb} blocks of {block} do not cover {len} elements"
            )));
        }
        // [.., nb, ..] -> [.., nb, block, ..] -> [.., nb*block, ..] -> the first `len`.
        let mut split = dims.clone();
        split.insert(axis + 1, 1);
        let s: Vec<isize> = split.iter().map(|&d| d as isize).collect();
        let p = cx.g.reshape(p, &s)?;
        let mut wide = split.clone();
        wide[axis + 1] = block;
        let p = cx.g.broadcast_to(p, &wide)?;
        let mut merged = dims.clone();
        merged[axis] = nb * block;
        let m: Vec<isize> = merged.iter().map(|&d| d as isize).collect();
        let p = cx.g.reshape(p, &m)?;
        let mut args = vec![SliceArg::full(); axis];
        args.push(SliceArg::new(Some(0), Some(len as isize), 1));
        return cx.g.slice(p, &args);
    }
    if dims.len() != 1 || dims[0] != len {
        return Err(bad(format!(
            "a per-axis scale or zero point must be 1-D of {len} (axis {axis}), got {dims:?}"
        )));
    }
    let mut shape = vec![1isize; rank];
    shape[axis] = len as isize;
    cx.g.reshape(p, &shape)
}

/// `clip(round_half_even(v) + zp, lo, hi)` as i32, `v` f32.
fn saturate(cx: &mut Cx, v: Tensor, zp: Option<Tensor>, (lo, hi): (i64, i64)) -> Result<Tensor> {
    let mut y = cx.g.round(v)?;
    if let Some(z) = zp {
        let z = f32_of(cx, z)?;
        y = cx.g.add(y, z)?;
    }
    let y = cx.g.clip(y, lo as f64, hi as f64)?;
    cx.g.cast(y, DType::I32)
}

/// The input's rank, the `axis` attribute (`None` when out of range: only a per-axis scale
/// needs it), the input's length along it and `block_size`.
fn axis_block(cx: &Cx, n: &Node, x: Tensor) -> Result<(usize, Option<usize>, usize, usize)> {
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    let rank = dims.len();
    let axis = n.int("axis", 1);
    let axis = if axis < 0 { axis + rank as i64 } else { axis };
    let axis = usize::try_from(axis).ok().filter(|&a| a < rank);
    let len = axis.and_then(|a| dims.get(a)).copied().unwrap_or(1);
    let block = usize::try_from(n.int("block_size", 0)).map_err(|_| bad("negative block_size"))?;
    Ok((rank, axis, len, block))
}

pub(super) fn quantize(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let x = f32_of(cx, x)?;
    let (rank, axis, len, block) = axis_block(cx, n, x)?;
    let scale = cx.t(n, 1)?;
    let scale = f32_of(cx, scale)?;
    let scale = along(cx, scale, rank, axis, len, block)?;
    let zp = match cx.opt_t(n, 2)? {
        Some(z) => Some(along(cx, z, rank, axis, len, block)?),
        None => None,
    };
    let elem = match n.int("output_dtype", 0) as i32 {
        0 => n.input(2).and_then(|z| cx.narrow_elem(z)),
        e => Some(e),
    };
    let v = cx.g.div(x, scale)?;
    if elem.and_then(small_float).is_some() {
        // To float8/float4: `x / scale + zp`, rounded to the type by the import (`narrow`).
        return match zp {
            Some(z) => cx.g.add(v, z),
            None => Ok(v),
        };
    }
    let range = match elem {
        None => range_of(cx, n, 2, DataType::Uint8),
        Some(e) => narrow_range(e).ok_or_else(|| n.unsupported(format!("output_dtype {e}")))?,
    };
    saturate(cx, v, zp, range)
}

pub(super) fn dequantize(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let (rank, axis, len, block) = axis_block(cx, n, x)?;
    let scale0 = cx.t(n, 1)?;
    let out = cx.g.dtype(scale0)?;
    let scale = f32_of(cx, scale0)?;
    let scale = along(cx, scale, rank, axis, len, block)?;
    let mut v = f32_of(cx, x)?;
    if let Some(z) = cx.opt_t(n, 2)? {
        let z = along(cx, z, rank, axis, len, block)?;
        let z = f32_of(cx, z)?;
        v = cx.g.sub(v, z)?;
    }
    let y = cx.g.mul(v, scale)?;
    if out == DType::F32 {
        Ok(y)
    } else {
        cx.g.cast(y, out)
    }
}

/// uint8 `y`, its scale and zero point from `x`'s range widened to include 0, as
/// onnxruntime computes them (a range of 0 takes scale 1).
pub(super) fn dynamic_quantize(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.t(n, 0)?;
    let x = f32_of(cx, x)?;
    let zero = cx.scalar(0.0, DType::F32)?;
    let hi = cx.g.max(x, crate::Axes::All, false)?;
    let hi = cx.g.maximum(hi, zero)?;
    let lo = cx.g.min(x, crate::Axes::All, false)?;
    let lo = cx.g.minimum(lo, zero)?;
    let span = cx.g.sub(hi, lo)?;
    let q = cx.scalar(255.0, DType::F32)?;
    let scale = cx.g.div(span, q)?;
    let flat = cx.g.equal(scale, zero)?;
    let one = cx.scalar(1.0, DType::F32)?;
    let scale = cx.g.select(flat, one, scale)?;
    let neg = cx.g.sub(zero, lo)?;
    let zp = cx.g.div(neg, scale)?;
    let zp = saturate(cx, zp, None, (0, 255))?;
    let v = cx.g.div(x, scale)?;
    let y = saturate(cx, v, Some(zp), (0, 255))?;
    Ok(vec![Val::T(y), Val::T(scale), Val::T(zp)])
}

/// `v - zp` in i32, `zp` per tensor or along `axis` of `v`'s rank (`axis` counted from the
/// end when negative).
fn shifted(cx: &mut Cx, v: Tensor, zp: Option<Tensor>, axis: isize) -> Result<Tensor> {
    let Some(z) = zp else { return Ok(v) };
    let dims = cx.g.probe_shape(v)?.dims().to_vec();
    let zd = cx.g.probe_shape(z)?.dims().to_vec();
    let z = if zd.iter().product::<usize>() == 1 {
        cx.g.reshape(z, &[])?
    } else {
        let rank = dims.len();
        let a = if axis < 0 { rank as isize + axis } else { axis };
        let a = usize::try_from(a).map_err(|_| bad("a zero point does not fit its operand"))?;
        let len = dims.get(a).copied().unwrap_or(0);
        if zd.iter().product::<usize>() != len {
            return Err(bad(format!(
                "zero point {zd:?} does not fit operand {dims:?}"
            )));
        }
        let mut shape = vec![1isize; rank];
        shape[a] = len as isize;
        cx.g.reshape(z, &shape)?
    };
    cx.g.sub(v, z)
}

/// `(A - a_zp) @ (B - b_zp)` in i32 (exact); `a_zp` per row of A or per tensor, `b_zp` per
/// column of B or per tensor.
fn matmul_integer(
    cx: &mut Cx,
    n: &Node,
    a: usize,
    b: usize,
    az: usize,
    bz: usize,
) -> Result<Tensor> {
    let (a, b) = (cx.t(n, a)?, cx.t(n, b)?);
    let (az, bz) = (opt_input(cx, n, az)?, opt_input(cx, n, bz)?);
    let a = shifted(cx, a, az, -2)?;
    let b = shifted(cx, b, bz, -1)?;
    cx.g.matmul(a, b)
}

fn opt_input(cx: &mut Cx, n: &Node, i: usize) -> Result<Option<Tensor>> {
    if n.input(i).is_some() {
        cx.opt_t(n, i)
    } else {
        Ok(None)
    }
}

/// Optional input `i`, a one-element tensor (a per-tensor zero point), as a scalar.
fn scalar_input(cx: &mut Cx, n: &Node, i: usize) -> Result<Option<Tensor>> {
    match opt_input(cx, n, i)? {
        Some(z) => Ok(Some(cx.g.reshape(z, &[])?)),
        None => Ok(None),
    }
}

/// Products a convolution may sum exactly in f32: 2^24 / 255^2.
const EXACT_TERMS: usize = 258;

/// `conv(x - x_zp, w - w_zp)` (+ `bias`, i32) in i32, exact. A convolution summing at most
/// [`EXACT_TERMS`] products per output (a depthwise one, a 3x3 over few channels) runs as
/// one f32 convolution, rounded to i32; a longer one as an integer matrix product
/// ([`conv_gemm`]).
#[allow(clippy::too_many_arguments)]
fn conv_integer(
    cx: &mut Cx,
    n: &Node,
    xi: usize,
    wi: usize,
    xz: usize,
    wz: usize,
    bias: Option<Tensor>,
) -> Result<Tensor> {
    let (x, w) = (cx.t(n, xi)?, cx.t(n, wi)?);
    let (xz, wz) = (opt_input(cx, n, xz)?, opt_input(cx, n, wz)?);
    let x = shifted(cx, x, xz, 1)?;
    let w = shifted(cx, w, wz, 0)?;
    let ws = cx.g.probe_shape(w)?.dims().to_vec();
    let taps: usize = ws.iter().skip(2).product::<usize>().max(1);
    let per_group = ws.get(1).copied().unwrap_or(1);
    let acc = if per_group * taps <= EXACT_TERMS {
        let (x, w) = (f32_of(cx, x)?, f32_of(cx, w)?);
        let y = conv_with(cx, n, x, w, None)?;
        cx.g.cast(y, DType::I32)?
    } else {
        conv_gemm(cx, n, x, w)?
    };
    match bias {
        Some(b) => {
            let len = cx.g.probe_shape(b)?.numel();
            let rank = cx.g.probe_shape(acc)?.rank();
            let mut shape = vec![1isize; rank];
            if rank > 1 {
                shape[1] = len as isize;
            }
            let b = cx.g.reshape(b, &shape)?;
            cx.g.add(acc, b)
        }
        None => Ok(acc),
    }
}

/// `conv(x, w)` of i32 `x` and `w` as an integer matrix product of the padded input's
/// windows (a strided slice per tap, stacked): channels last, `[N·OH·OW, KH·KW·C]` times the
/// weights as `[KH·KW·C, O]`; in groups, `[N, G, C/G·KH·KW, OH·OW]` per group. Its sums are
/// exact in wrapping i32 whatever their length, and on cpu:0 they run the integer GEMM
/// (u8 × s8 on VNNI or AMX, i16 pairs on AVX2) instead of f32 (docs/performance.md,
/// "Integer convolutions").
fn conv_gemm(cx: &mut Cx, n: &Node, x: Tensor, w: Tensor) -> Result<Tensor> {
    let wd = cx.g.probe_shape(w)?.dims().to_vec();
    let (x4, w4, orig, geo) = conv_operands(cx, n, x, w)?;
    let x4 = pad_hw(cx, x4, geo.pads, 0.0)?;
    let xd = cx.g.probe_shape(x4)?.dims().to_vec();
    let (c, h, wide) = (xd[1], xd[2], xd[3]);
    let ([kh, kw], [sh, sw], [dh, dw]) = (geo.kernel, geo.stride, geo.dilation);
    let (span_h, span_w) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
    if span_h > h || span_w > wide {
        return Err(bad(format!(
            "a {kh}x{kw} kernel dilated by {dh}x{dw} does not fit the padded input {h}x{wide}"
        )));
    }
    let (oh, ow) = ((h - span_h) / sh + 1, (wide - span_w) / sw + 1);
    let groups = groups(n)?;
    let (o, cg) = (wd[0], wd[1]);
    if cg * groups != c || o % groups != 0 {
        return Err(bad(format!(
            "weights {wd:?} in {groups} group(s) do not fit an input of {c} channels"
        )));
    }
    let taps = kh * kw;
    // One strided slice per tap over the spatial axes `hw` and `hw + 1` of `x`, stacked
    // along `at`; `x` itself for a 1x1 stride-1 window.
    let gather = |cx: &mut Cx, x: Tensor, hw: usize, at: isize| -> Result<Tensor> {
        if taps == 1 && sh == 1 && sw == 1 {
            return Ok(x);
        }
        let axis = |start: usize, len: usize, step: usize| {
            let end = start + (len - 1) * step + 1;
            SliceArg::new(Some(start as isize), Some(end as isize), step as isize)
        };
        let mut parts = Vec::with_capacity(taps);
        for ki in 0..kh {
            for kj in 0..kw {
                let mut args = vec![SliceArg::full(); hw];
                args.extend([axis(ki * dh, oh, sh), axis(kj * dw, ow, sw)]);
                parts.push(cx.g.slice(x, &args)?);
            }
        }
        cx.g.stack(&parts, at)
    };
    let k = (cg * taps) as isize;
    let y = if groups == 1 {
        // Channels last, so that the product's rows are the output pixels (many) and its
        // right operand the constant weights, packed once per plan. The columns are
        // [N, OH, OW, KH·KW, C]: each tap's channels stay one contiguous run.
        let xt = cx.g.transpose(x4, &[0, 2, 3, 1])?;
        let cols = gather(cx, xt, 1, 3)?;
        let cols = cx.g.reshape(cols, &[-1, k])?;
        // The weights in the same (tap, channel) order, as the product's right operand:
        // [KH, KW, C, O] -> [KH·KW·C, O] (one transpose, which the plan folds and packs).
        let wm = cx.g.transpose(w4, &[2, 3, 1, 0])?;
        let wm = cx.g.reshape(wm, &[k, o as isize])?;
        let y = cx.g.matmul(cols, wm)?;
        let y =
            cx.g.reshape(y, &[-1, oh as isize, ow as isize, o as isize])?;
        cx.g.transpose(y, &[0, 3, 1, 2])?
    } else {
        // [N, C, KH·KW, OH, OW] as [N, G, C/G·KH·KW, OH·OW], times [G, O/G, C/G·KH·KW].
        let cols = gather(cx, x4, 2, 2)?;
        let g = groups as isize;
        let cols = cx.g.reshape(cols, &[-1, g, k, (oh * ow) as isize])?;
        let wm = cx.g.reshape(w4, &[g, (o / groups) as isize, k])?;
        let y = cx.g.matmul(wm, cols)?;
        cx.g.reshape(y, &[-1, o as isize, oh as isize, ow as isize])?
    };
    back_to(cx, y, &orig)
}

/// `alpha · a_scale · b_scale · ((A - a_zp)(B - b_zp) + C)`, C an i32 bias at scale
/// `a_scale · b_scale`; requantized to `y_zp`'s type when `y_scale` is given, else f32.
pub(super) fn qgemm(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (mut a, mut b) = (cx.t(n, 0)?, cx.t(n, 3)?);
    let (az, bz) = (opt_input(cx, n, 2)?, opt_input(cx, n, 5)?);
    a = shifted(cx, a, az, -2)?;
    if n.int("transA", 0) != 0 {
        a = cx.g.transpose(a, &[1, 0])?;
    }
    // A per-channel zero point runs along B's output columns, which transB puts first.
    let trans_b = n.int("transB", 0) != 0;
    b = shifted(cx, b, bz, if trans_b { 0 } else { -1 })?;
    if trans_b {
        b = cx.g.transpose(b, &[1, 0])?;
    }
    let mut acc = cx.g.matmul(a, b)?;
    if let Some(c) = opt_input(cx, n, 6)? {
        acc = cx.g.add(acc, c)?;
    }
    let alpha = n.float("alpha", 1.0) as f64;
    let (sa, sb) = (cx.t(n, 1)?, cx.t(n, 4)?);
    match opt_input(cx, n, 7)? {
        Some(sy) => {
            let acc = if alpha != 1.0 {
                let f = cx.g.cast(acc, DType::F32)?;
                let k = cx.scalar(alpha, DType::F32)?;
                let v = cx.g.mul(f, k)?;
                return requantize_f32(cx, n, v, (sa, sb, sy), -1, 8);
            } else {
                acc
            };
            requantize(cx, n, acc, (sa, sb, sy), -1, 8)
        }
        None => {
            let f = cx.g.cast(acc, DType::F32)?;
            let (sa, sb) = (f32_of(cx, sa)?, f32_of(cx, sb)?);
            let sa = cx.g.reshape(sa, &[])?;
            let m = cx.g.mul(f, sa)?;
            let sb = if cx.g.probe_shape(sb)?.numel() == 1 {
                cx.g.reshape(sb, &[])?
            } else {
                sb
            };
            let m = cx.g.mul(m, sb)?;
            if alpha != 1.0 {
                let k = cx.scalar(alpha, DType::F32)?;
                cx.g.mul(m, k)
            } else {
                Ok(m)
            }
        }
    }
}

/// The mean over the spatial axes, requantized: the sum in i32 (exact), then
/// `(sum - N·x_zp) · x_scale / (N · y_scale)`, rounded, plus `y_zp`, as onnxruntime does.
pub(super) fn qlinear_global_average_pool(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    if dims.len() < 3 {
        return Err(bad(format!("X must have rank 3 or more, got {dims:?}")));
    }
    let axes: Vec<isize> = if n.int("channels_last", 0) != 0 {
        (1..dims.len() as isize - 1).collect()
    } else {
        (2..dims.len() as isize).collect()
    };
    let count: usize = axes.iter().map(|&a| dims[a as usize]).product();
    let sum = cx.g.sum(x, axes, true)?;
    let mut v = cx.g.cast(sum, DType::F32)?;
    if let Some(z) = opt_input(cx, n, 2)? {
        let z = f32_of(cx, z)?;
        let z = cx.g.reshape(z, &[])?;
        let nz = cx.scalar(count as f64, DType::F32)?;
        let nz = cx.g.mul(z, nz)?;
        v = cx.g.sub(v, nz)?;
    }
    let (sx, sy) = (cx.t(n, 1)?, cx.t(n, 3)?);
    let (sx, sy) = (f32_of(cx, sx)?, f32_of(cx, sy)?);
    let (sx, sy) = (cx.g.reshape(sx, &[])?, cx.g.reshape(sy, &[])?);
    let nf = cx.scalar(count as f64, DType::F32)?;
    let den = cx.g.mul(sy, nf)?;
    let m = cx.g.div(sx, den)?;
    let v = cx.g.mul(v, m)?;
    let zp = scalar_input(cx, n, 4)?;
    let range = range_of(cx, n, 4, DataType::Uint8);
    saturate(cx, v, zp, range)
}

/// `QLinearAdd`: `(a_s/c_s)(A - a_zp) + (b_s/c_s)(B - b_zp)`; `QLinearMul`:
/// `(a_s·b_s/c_s)(A - a_zp)(B - b_zp)`; rounded, plus `c_zp`, saturated.
pub(super) fn qlinear_binary(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let side = |cx: &mut Cx, v: usize, s: usize, z: usize| -> Result<(Tensor, Tensor)> {
        let t = cx.t(n, v)?;
        let mut t = cx.g.cast(t, DType::F32)?;
        if let Some(zp) = opt_input(cx, n, z)? {
            let zp = f32_of(cx, zp)?;
            let zp = cx.g.reshape(zp, &[])?;
            t = cx.g.sub(t, zp)?;
        }
        let sc = cx.t(n, s)?;
        let sc = f32_of(cx, sc)?;
        Ok((t, cx.g.reshape(sc, &[])?))
    };
    let (a, sa) = side(cx, 0, 1, 2)?;
    let (b, sb) = side(cx, 3, 4, 5)?;
    let sc = cx.t(n, 6)?;
    let sc = f32_of(cx, sc)?;
    let sc = cx.g.reshape(sc, &[])?;
    let v = if n.op == "QLinearAdd" {
        let ka = cx.g.div(sa, sc)?;
        let kb = cx.g.div(sb, sc)?;
        let a = cx.g.mul(a, ka)?;
        let b = cx.g.mul(b, kb)?;
        cx.g.add(a, b)?
    } else {
        let k = cx.g.mul(sa, sb)?;
        let k = cx.g.div(k, sc)?;
        let ab = cx.g.mul(a, b)?;
        cx.g.mul(ab, k)?
    };
    let zp = scalar_input(cx, n, 7)?;
    let range = range_of(cx, n, 7, DataType::Uint8);
    saturate(cx, v, zp, range)
}

/// `acc · (a_scale · b_scale / y_scale)`, rounded, plus `y_zp`, saturated to its type.
fn requantize(
    cx: &mut Cx,
    n: &Node,
    acc: Tensor,
    scales: (Tensor, Tensor, Tensor),
    b_axis: isize,
    zp_input: usize,
) -> Result<Tensor> {
    let accf = cx.g.cast(acc, DType::F32)?;
    requantize_f32(cx, n, accf, scales, b_axis, zp_input)
}

/// [`requantize`] of an accumulator already in f32.
fn requantize_f32(
    cx: &mut Cx,
    n: &Node,
    accf: Tensor,
    scales: (Tensor, Tensor, Tensor),
    b_axis: isize,
    zp_input: usize,
) -> Result<Tensor> {
    let acc = accf;
    let (sa, sb, sy) = (
        f32_of(cx, scales.0)?,
        f32_of(cx, scales.1)?,
        f32_of(cx, scales.2)?,
    );
    let rank = cx.g.probe_shape(acc)?.rank();
    let dims = cx.g.probe_shape(acc)?.dims().to_vec();
    let sb = if cx.g.probe_shape(sb)?.numel() == 1 {
        cx.g.reshape(sb, &[])?
    } else {
        let a = if b_axis < 0 {
            rank as isize + b_axis
        } else {
            b_axis
        } as usize;
        let len = dims.get(a).copied().unwrap_or(0);
        along(cx, sb, rank, Some(a), len, 0)?
    };
    let sa = cx.g.reshape(sa, &[])?;
    let sy = cx.g.reshape(sy, &[])?;
    let m = cx.g.mul(sa, sb)?;
    let m = cx.g.div(m, sy)?;
    let v = cx.g.mul(acc, m)?;
    let zp = scalar_input(cx, n, zp_input)?;
    let range = range_of(cx, n, zp_input, DataType::Uint8);
    saturate(cx, v, zp, range)
}

pub(super) fn qlinear_matmul(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let acc = matmul_integer(cx, n, 0, 3, 2, 5)?;
    let scales = (cx.t(n, 1)?, cx.t(n, 4)?, cx.t(n, 6)?);
    requantize(cx, n, acc, scales, -1, 7)
}

pub(super) fn qlinear_conv(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let bias = cx.opt_t(n, 8)?;
    let acc = conv_integer(cx, n, 0, 3, 2, 5, bias)?;
    let scales = (cx.t(n, 1)?, cx.t(n, 4)?, cx.t(n, 6)?);
    requantize(cx, n, acc, scales, 1, 7)
}
