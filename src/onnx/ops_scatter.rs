//! Writes placed by computed positions: `TensorScatter` (a key/value cache update at each
//! batch entry's write index, linear or circular) as one gather and a select, and `Col2Im`
//! (sliding blocks summed back into an image) as one scatter-add.

use super::build::{bad, Cx, Node};
use super::ops_shape::norm_axis;
use crate::{DType, HostTensor, Result, Tensor};

/// `past` with `update[b, .., j, ..]` written at position `write_indices[b] + j` along
/// `axis` (modulo the cache length when circular). Each cache position reads
/// `update[.., p - w[b], ..]` where that is inside the update, and keeps its value elsewhere.
pub(super) fn tensor_scatter(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (ps, us) = (cx.shape(n, 0)?, cx.shape(n, 1)?);
    let r = ps.len();
    let axis = norm_axis(n.int("axis", -2), r)?;
    if axis == 0
        || us.len() != r
        || (0..r).any(|a| a != axis && ps[a] != us[a])
        || us[axis] > ps[axis]
    {
        return Err(bad(format!(
            "update {us:?} does not fit cache {ps:?} along axis {axis} (axis 0 is the batch)"
        )));
    }
    let circular = match n.string("mode").as_deref().unwrap_or("linear") {
        "linear" => false,
        "circular" => true,
        m => return Err(n.unsupported(format!("mode '{m}'"))),
    };
    let past = cx.t(n, 0)?;
    let update = cx.t(n, 1)?;
    for t in [past, update] {
        if let Some(d) = cx.g.dims(t)?.get(axis).filter(|d| d.known().is_none()) {
            return Err(bad(format!(
                "the sequence axis is the run-time dimension {d}; pin it (--dim {d}=SIZE)"
            )));
        }
    }
    let (len, upd) = (ps[axis], us[axis]);
    let mut pshape = vec![1usize; r];
    pshape[axis] = len;
    let pos: Vec<i32> = (0..len as i32).collect();
    let pos = cx.g.constant(HostTensor::new(pshape, pos)?)?;
    let d = match n.input(2) {
        Some(_) => {
            let mut w = cx.t(n, 2)?;
            if cx.g.dtype(w)? != DType::I32 {
                w = cx.g.cast(w, DType::I32)?;
            }
            let mut wshape = vec![1isize; r];
            wshape[0] = -1;
            let w = cx.g.reshape(w, &wshape)?;
            cx.g.sub(pos, w)?
        }
        None => pos,
    };
    let d = if circular {
        let l = cx.scalar(len as f64, DType::I32)?;
        cx.g.remainder(d, l)?
    } else {
        d
    };
    let (zero, hi) = (
        cx.scalar(0.0, DType::I32)?,
        cx.scalar(upd as f64 - 1.0, DType::I32)?,
    );
    let g = &mut cx.g;
    let ge = g.greater_equal(d, zero)?;
    let le = g.less_equal(d, hi)?;
    let inside = g.logical_and(ge, le)?;
    let idx = g.maximum(d, zero)?;
    let idx = g.minimum(idx, hi)?;
    // The index over the cache's whole shape (its run-time batch included).
    let z = g.zeros_like(past)?;
    let z = g.cast(z, DType::I32)?;
    let idx = g.add(idx, z)?;
    let taken = g.gather_elements(update, idx, axis as isize)?;
    g.select(inside, taken, past)
}

/// `[N, C·∏k, L]` blocks summed into `[N, C, *image_shape]`: each column's value added at
/// its image position (`block · stride - pad_begin + k · dilation`), those in the padding
/// sent to one extra slot that is dropped.
pub(super) fn col2im(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let xs = cx.shape(n, 0)?;
    let image: Vec<usize> = to_sizes(&cx.ints(n, 1)?)?;
    let block: Vec<usize> = to_sizes(&cx.ints(n, 2)?)?;
    let k = image.len();
    let ones = vec![1i64; k];
    let dil = n.ints("dilations").unwrap_or_else(|| ones.clone());
    let strides = n.ints("strides").unwrap_or(ones);
    let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
    if k == 0 || block.len() != k || dil.len() != k || strides.len() != k || pads.len() != 2 * k {
        return Err(bad(format!(
            "image_shape {image:?}, block_shape {block:?}, dilations, strides and pads disagree"
        )));
    }
    if dil.iter().chain(&strides).any(|&v| v < 1) || pads.iter().any(|&p| p < 0) {
        return Err(bad(
            "dilations and strides must be positive and pads non-negative",
        ));
    }
    let [nb, ck, l] = xs[..] else {
        return Err(bad(format!(
            "the input must be [N, C·∏block, L], got {xs:?}"
        )));
    };
    let kk: usize = block.iter().product();
    // Sliding blocks per axis.
    let mut nblk = Vec::with_capacity(k);
    for a in 0..k {
        let span = dil[a] * (block[a] as i64 - 1) + 1;
        let c = (image[a] as i64 + pads[a] + pads[a + k] - span) / strides[a] + 1;
        nblk.push(
            usize::try_from(c)
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(|| bad(format!("axis {a}: no sliding block fits the padded image")))?,
        );
    }
    let lb: usize = nblk.iter().product();
    if kk == 0 || ck % kk != 0 || l != lb {
        return Err(bad(format!(
            "the input {xs:?} does not hold C·{kk} rows of {lb} blocks"
        )));
    }
    let c = ck / kk;
    let area: usize = image.iter().product();
    if nb.saturating_mul(c).saturating_mul(area + 1) > cx.opts.max_elements {
        return Err(bad("the image is over the element cap"));
    }
    // The image position of every (kernel offset, block) pair; `area` is the dropped slot.
    let mut idx = Vec::with_capacity(kk * lb);
    for kpos in 0..kk {
        let koff = unflatten(kpos, &block);
        for b in 0..lb {
            let boff = unflatten(b, &nblk);
            let mut flat = 0usize;
            let mut inside = true;
            for a in 0..k {
                let p = boff[a] as i64 * strides[a] - pads[a] + koff[a] as i64 * dil[a];
                inside &= (0..image[a] as i64).contains(&p);
                flat = flat * image[a] + p.clamp(0, image[a] as i64 - 1) as usize;
            }
            idx.push(if inside { flat } else { area } as i32);
        }
    }
    let x = cx.t(n, 0)?;
    let dtype = cx.g.dtype(x)?;
    let idx = cx.g.constant(HostTensor::new(vec![1, 1, kk * lb], idx)?)?;
    let g = &mut cx.g;
    let x = g.reshape(x, &[nb as isize, c as isize, (kk * lb) as isize])?;
    let idx = g.broadcast_to(idx, &[nb, c, kk * lb])?;
    let zeros = g.zeros([nb, c, area + 1], dtype)?;
    let summed = g.scatter_add(zeros, idx, x, 2)?;
    let img = g.slice(
        summed,
        &[
            crate::SliceArg::full(),
            crate::SliceArg::full(),
            crate::SliceArg::new(Some(0), Some(area as isize), 1),
        ],
    )?;
    let mut shape = vec![nb as isize, c as isize];
    shape.extend(image.iter().map(|&d| d as isize));
    g.reshape(img, &shape)
}

fn to_sizes(v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d > 0)
                .ok_or_else(|| bad(format!("size {d} is not positive")))
        })
        .collect()
}

/// Row-major coordinates of flat index `i` in `dims`.
fn unflatten(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        c[a] = i % dims[a];
        i /= dims[a];
    }
    c
}
