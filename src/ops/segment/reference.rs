//! The scalar oracle of the segment kernels. Every pass adds each output's rows in
//! ascending position from zero, as the WGSL kernels and `cpu:0`'s fast path do, so all give
//! the same bits.

use super::{SegmentKernel, SegmentPass};
use crate::ops::family::missing_inputs;
use crate::{DType, Error, Result};

/// `a + b` in `dtype` (integers wrap).
pub(super) fn add(dtype: DType, a: u32, b: u32) -> u32 {
    match dtype {
        DType::F32 => (f32::from_bits(a) + f32::from_bits(b)).to_bits(),
        _ => a.wrapping_add(b),
    }
}

/// The segment of an id word: `None` outside `0..segments`.
pub(super) fn segment_of(id: u32, segments: usize) -> Option<usize> {
    let id = id as i32;
    (id >= 0 && (id as usize) < segments).then_some(id as usize)
}

pub(super) fn run(k: &SegmentKernel, inputs: &[&[u32]]) -> Result<Vec<u32>> {
    let need = match k.pass {
        SegmentPass::Direct => 2,
        SegmentPass::Keys | SegmentPass::Sort { .. } => 1,
        SegmentPass::Sum { lo, .. } => 2 + usize::from(lo > 0),
    };
    if inputs.len() < need {
        return Err(missing_inputs(k, inputs.len()));
    }
    let (pre, m, post, n) = (k.pre, k.positions, k.post, k.segments);
    let short = |what: &str, got: usize, want: usize| {
        Error::Internal(format!(
            "{}: {what} has {got} words, expected {want}",
            crate::ops::KernelDef::describe(k)
        ))
    };
    let check = |what: &str, w: &[u32], want: usize| {
        if w.len() == want {
            Ok(())
        } else {
            Err(short(what, w.len(), want))
        }
    };
    let p = k.padded();
    match k.pass {
        SegmentPass::Direct => {
            let (data, ids) = (inputs[0], inputs[1]);
            check("data", data, pre * m * post)?;
            check("ids", ids, m)?;
            let mut out = vec![0u32; pre * n * post];
            for q in 0..pre {
                for (j, &id) in ids.iter().enumerate() {
                    if let Some(r) = segment_of(id, n) {
                        for c in 0..post {
                            let o = (q * n + r) * post + c;
                            out[o] = add(k.dtype, out[o], data[(q * m + j) * post + c]);
                        }
                    }
                }
            }
            Ok(out)
        }
        SegmentPass::Keys => {
            let ids = inputs[0];
            check("ids", ids, m)?;
            let mut out = vec![0u32; 2 * p];
            for t in 0..p {
                let id = ids.get(t).and_then(|&w| segment_of(w, n)).unwrap_or(n);
                out[2 * t] = id as u32;
                out[2 * t + 1] = t as u32;
            }
            Ok(out)
        }
        SegmentPass::Sort { block, stride } => {
            let keys = inputs[0];
            check("keys", keys, 2 * p)?;
            let key = |i: usize| (keys[2 * i], keys[2 * i + 1]);
            let mut out = vec![0u32; 2 * p];
            for i in 0..p {
                let l = i ^ stride;
                let (lo, hi) = (i.min(l), i.max(l));
                let ascending = lo & block == 0;
                let (a, b) = (key(lo), key(hi));
                let (small, large) = if a <= b { (a, b) } else { (b, a) };
                let v = if (i == lo) == ascending { small } else { large };
                out[2 * i] = v.0;
                out[2 * i + 1] = v.1;
            }
            Ok(out)
        }
        SegmentPass::Sum { lo, hi } => {
            let (mut out, keys, data) = if lo > 0 {
                check("previous", inputs[0], pre * n * post)?;
                (inputs[0].to_vec(), inputs[1], inputs[2])
            } else {
                (vec![0u32; pre * n * post], inputs[0], inputs[1])
            };
            check("keys", keys, 2 * p)?;
            check("data", data, pre * m * post)?;
            for s in lo..hi.min(p) {
                let (id, j) = (keys[2 * s] as usize, keys[2 * s + 1] as usize);
                if id >= n || j >= m {
                    continue;
                }
                for q in 0..pre {
                    for c in 0..post {
                        let o = (q * n + id) * post + c;
                        out[o] = add(k.dtype, out[o], data[(q * m + j) * post + c]);
                    }
                }
            }
            Ok(out)
        }
    }
}
