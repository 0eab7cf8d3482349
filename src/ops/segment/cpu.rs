//! `cpu:0`'s segment sum: tasks own ranges of output rows and walk the positions in order,
//! adding the rows that land in their range (the order of the reference, so the same bits).

use super::reference::segment_of;
use super::SegmentKernel;
use crate::{DType, Error, Result};
use rayon::prelude::*;

/// Below this many added words one thread does it all.
const SERIAL: usize = 1 << 15;

pub(super) fn direct(k: &SegmentKernel, data: &[u32], ids: &[u32], out: &mut [u32]) -> Result<()> {
    let (pre, m, post, n) = (k.pre, k.positions, k.post, k.segments);
    if data.len() != pre * m * post || ids.len() != m || out.len() != pre * n * post {
        return Err(Error::Internal(format!(
            "{}: {} data words, {} ids, {} output words",
            crate::ops::KernelDef::describe(k),
            data.len(),
            ids.len(),
            out.len()
        )));
    }
    out.fill(0);
    if out.is_empty() || post == 0 {
        return Ok(());
    }
    let segs: Vec<Option<usize>> = ids.iter().map(|&w| segment_of(w, n)).collect();
    let rows = pre * n;
    let tasks = if pre * m * post < SERIAL {
        1
    } else {
        (rayon::current_num_threads() * 4).min(rows)
    };
    let per = rows.div_ceil(tasks.max(1));
    let dtype = k.dtype;
    out.par_chunks_mut(per * post)
        .enumerate()
        .for_each(|(t, chunk)| {
            let (first, last) = (t * per, t * per + chunk.len() / post);
            for q in first / n..last.div_ceil(n) {
                // This task's rows of block q, as segment numbers.
                let (r0, r1) = ((q * n).max(first) - q * n, (q * n + n).min(last) - q * n);
                for (j, seg) in segs.iter().enumerate() {
                    let Some(r) = *seg else { continue };
                    if r < r0 || r >= r1 {
                        continue;
                    }
                    let o = (q * n + r - first) * post;
                    let src = &data[(q * m + j) * post..][..post];
                    add_row(dtype, &mut chunk[o..o + post], src);
                }
            }
        });
    Ok(())
}

fn add_row(dtype: DType, acc: &mut [u32], src: &[u32]) {
    if dtype == DType::F32 {
        let acc: &mut [f32] = bytemuck::cast_slice_mut(acc);
        let src: &[f32] = bytemuck::cast_slice(src);
        for (a, b) in acc.iter_mut().zip(src) {
            *a += b;
        }
    } else {
        for (a, b) in acc.iter_mut().zip(src) {
            *a = a.wrapping_add(*b);
        }
    }
}
