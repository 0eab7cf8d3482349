//! The scalar oracle of the index kernels, which `cpu:0` also runs: a gather reads each
//! output's source; a scatter pass walks its updates once in row-major order, which for each
//! output element is the order the WGSL kernel walks them, so both give the same bits.

use super::{IndexKernel, IndexKernelOp, ScatterReduce};
use crate::ops::family::missing_inputs;
use crate::{DType, Error, Result};

/// `a` combined with the update `b`.
pub(super) fn combine(reduce: ScatterReduce, dtype: DType, a: u32, b: u32) -> u32 {
    let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
    let float = dtype == DType::F32;
    match reduce {
        ScatterReduce::None => b,
        ScatterReduce::Add if float => (fa + fb).to_bits(),
        ScatterReduce::Add => a.wrapping_add(b),
        ScatterReduce::Mul if float => (fa * fb).to_bits(),
        ScatterReduce::Mul => a.wrapping_mul(b),
        ScatterReduce::Max | ScatterReduce::Min if float && (fa.is_nan() || fb.is_nan()) => {
            (fa + fb).to_bits()
        }
        ScatterReduce::Max | ScatterReduce::Min => {
            let b_wins = match dtype {
                DType::F32 => (fb > fa) == (reduce == ScatterReduce::Max) && fb != fa,
                DType::I32 => ((b as i32) > (a as i32)) == (reduce == ScatterReduce::Max) && a != b,
                _ => (b > a) == (reduce == ScatterReduce::Max) && a != b,
            };
            if b_wins {
                b
            } else {
                a
            }
        }
    }
}

/// Whether element `(w, s)` ranks before `(v, e)` in a top-k row: better by value (NaN above
/// every number), or equal (NaN equal to NaN, -0 to 0) at a lower position.
pub(super) fn ranks_before(
    dtype: DType,
    largest: bool,
    w: u32,
    s: usize,
    v: u32,
    e: usize,
) -> bool {
    use std::cmp::Ordering;
    let order = match dtype {
        DType::F32 => {
            let (a, b) = (f32::from_bits(w), f32::from_bits(v));
            match (a.is_nan(), b.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
            }
        }
        DType::I32 => (w as i32).cmp(&(v as i32)),
        _ => w.cmp(&v),
    };
    let better = if largest {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    order == better || (order == Ordering::Equal && s < e)
}

fn top_k(k: &IndexKernel, largest: bool, x: &[u32]) -> Vec<u32> {
    let dims = k.data.dims();
    let n = dims[k.axis];
    let kk = k.index.dims()[k.axis];
    let inner: usize = dims[k.axis + 1..].iter().product();
    let outer = x.len() / (n * inner).max(1);
    let mut out = vec![0u32; outer * kk * inner];
    let mut row: Vec<usize> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            let at = |s: usize| x[(o * n + s) * inner + i];
            row.clear();
            row.extend(0..n);
            // A total order (ties by position), so this equals the GPU's ranks.
            row.sort_by(|&a, &b| {
                if ranks_before(k.dtype, largest, at(a), a, at(b), b) {
                    std::cmp::Ordering::Less
                } else if a == b {
                    std::cmp::Ordering::Equal
                } else {
                    std::cmp::Ordering::Greater
                }
            });
            for (r, &s) in row.iter().take(kk).enumerate() {
                out[(o * kk + r) * inner + i] = s as u32;
            }
        }
    }
    out
}

pub(super) fn run(k: &IndexKernel, inputs: &[&[u32]]) -> Result<Vec<u32>> {
    let want = match k.op {
        IndexKernelOp::TopK { .. } => 1,
        IndexKernelOp::Gather => 2,
        IndexKernelOp::Scatter { .. } => 3,
    };
    if inputs.len() < want {
        return Err(missing_inputs(k, inputs.len()));
    }
    if let IndexKernelOp::TopK { largest } = k.op {
        if inputs[0].len() != k.data.numel() {
            return Err(Error::Internal(format!(
                "top_k ran on {} words for {}",
                inputs[0].len(),
                k.data
            )));
        }
        return Ok(top_k(k, largest, inputs[0]));
    }
    let (data, index) = (k.data.dims(), k.index.dims());
    let (x, idx) = (inputs[0], inputs[1]);
    if x.len() != k.data.numel() || idx.len() != k.index.numel() {
        return Err(Error::Internal(format!(
            "{} ran on {} and {} words",
            crate::ops::KernelDef::describe(k),
            x.len(),
            idx.len()
        )));
    }
    let ds = k.data.strides();
    let n = data[k.axis];
    // Where the element at row-major position `i` of the indices' shape lands in `data`.
    let target = |i: usize| -> usize {
        let mut rem = i;
        let mut at = 0;
        for d in (0..index.len()).rev() {
            let c = rem % index[d];
            rem /= index[d];
            let c = if d == k.axis {
                IndexKernel::position(idx[i], n)
            } else {
                c
            };
            at += c * ds[d];
        }
        at
    };
    match k.op {
        IndexKernelOp::Gather => Ok((0..idx.len()).map(|i| x[target(i)]).collect()),
        IndexKernelOp::TopK { .. } => Err(Error::Internal("top_k handled above".into())),
        IndexKernelOp::Scatter { reduce, lo, hi } => {
            let upd = inputs[2];
            if upd.len() != idx.len() {
                return Err(Error::Internal(format!(
                    "scatter_elements ran on {} updates for {} indices",
                    upd.len(),
                    idx.len()
                )));
            }
            let inner: usize = index[k.axis + 1..].iter().product();
            let mut out = x.to_vec();
            for (i, &u) in upd.iter().enumerate() {
                let pos = (i / inner) % index[k.axis];
                if (lo..hi).contains(&pos) {
                    let t = target(i);
                    out[t] = combine(reduce, k.dtype, out[t], u);
                }
            }
            Ok(out)
        }
    }
}
