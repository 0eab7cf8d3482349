//! `MaxPool` with its `Indices` output (any number of spatial axes, dilations, ceil_mode).
//! `ops_nn.rs` holds the other pooling forms and the window geometry this reuses.

use super::build::{bad, Cx, Node, Val};
use super::ops_nn::window_nd;
use crate::{DType, HostTensor, PadMode, Result, SliceArg};

/// `MaxPool`: with its indices output, here; without, as every other pool.
pub(super) fn max_pool(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    if n.n_outputs > 1 {
        max_pool_with_indices(cx, n)
    } else {
        Ok(vec![super::ops_nn::pool(cx, n)?.into()])
    }
}

/// The window maxima and where they are: the flat index into the input (row-major over
/// `N·C·spatial…`, or with the spatial axes column-major for `storage_order = 1`), the first
/// maximum in row-major window order as the reference picks it. The windows are reduced axis
/// by axis from the last spatial axis, keeping a candidate only when strictly greater, which
/// keeps that order.
fn max_pool_with_indices(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let x = cx.t(n, 0)?;
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    if dims.len() < 3 {
        return Err(bad(format!(
            "input of rank {} (want N, C, spatial…)",
            dims.len()
        )));
    }
    let kernel = n
        .ints("kernel_shape")
        .ok_or_else(|| bad("kernel_shape is required"))?;
    let hw = dims[2..].to_vec();
    let k = hw.len();
    let w = window_nd(n, &hw, kernel, n.int("ceil_mode", 0) != 0)?;
    let column_major = n.int("storage_order", 0) != 0;
    let numel: usize = dims.iter().product();
    if numel > i32::MAX as usize {
        return Err(bad("input too large for i32 indices"));
    }
    let plane: usize = hw.iter().product();
    // Each cell's index, as the reference numbers it.
    let mut idx = super::limits::room(numel, "pooling indices")?;
    for flat in 0..numel {
        let (c, mut rest) = (flat / plane, flat % plane);
        let mut at = vec![0; k];
        for i in (0..k).rev() {
            at[i] = rest % hw[i];
            rest /= hw[i];
        }
        let mut within = 0;
        if column_major {
            for i in (0..k).rev() {
                within = within * hw[i] + at[i];
            }
        } else {
            within = flat % plane;
        }
        idx.push((c * plane + within) as i32);
    }
    let ids = cx.g.constant(HostTensor::new(dims.clone(), idx)?)?;
    let mut pads = vec![(0, 0); 2];
    pads.extend((0..k).map(|i| (w.pads[i], w.pads[i + k])));
    let mut v = cx.g.pad(x, &pads, PadMode::Constant(f64::NEG_INFINITY))?;
    let mut at = cx.g.pad(ids, &pads, PadMode::Constant(0.0))?;
    for i in (0..k).rev() {
        let size = cx.g.probe_shape(v)?.dims()[2 + i];
        let out = w.out_len(i, size)?;
        let mut best: Option<(crate::Tensor, crate::Tensor)> = None;
        for j in 0..w.kernel[i] {
            let start = j * w.dilation[i];
            let stop = start + (out - 1) * w.stride[i] + 1;
            let mut args = vec![SliceArg::full(); 2 + i];
            args.push(SliceArg::new(
                Some(start as isize),
                Some(stop as isize),
                w.stride[i] as isize,
            ));
            let (sv, si) = (cx.g.slice(v, &args)?, cx.g.slice(at, &args)?);
            best = Some(match best {
                None => (sv, si),
                Some((bv, bi)) => {
                    let gt = cx.g.greater(sv, bv)?;
                    (cx.g.select(gt, sv, bv)?, cx.g.select(gt, si, bi)?)
                }
            });
        }
        let (bv, bi) = best.ok_or_else(|| bad("empty window"))?;
        v = bv;
        at = bi;
    }
    debug_assert_eq!(cx.g.dtype(at).ok(), Some(DType::I32));
    Ok(vec![v.into(), at.into()])
}
