//! cpu:0's fast paths for the movement kernels: whole rows along the last output axis,
//! rows in parallel. Each kernel's `reference` (element by element) is the oracle they are
//! tested against.

use super::{ConcatKernel, GatherKernel, PadKernel, PermuteKernel, StridedKernel};
use crate::ops::family::{missing_inputs, run_via_reference, CpuIn, KernelDef};
use rayon::prelude::*;

/// Rows this short are copied on one thread: splitting them costs more than it saves.
const SERIAL_WORDS: usize = 1 << 15;

/// The single input's words; `None` when the output slot is the input, after running
/// `oracle` on it in place.
fn single<'a>(
    k: &dyn KernelDef,
    inputs: &[CpuIn<'a>],
    out: &mut [u32],
    oracle: impl Fn(&[u32]) -> Vec<u32>,
) -> crate::Result<Option<&'a [u32]>> {
    match inputs.first() {
        Some(CpuIn::Words(w)) => Ok(Some(*w)),
        Some(CpuIn::Output) => {
            let words = oracle(out);
            out.copy_from_slice(&words);
            Ok(None)
        }
        None => Err(missing_inputs(k, 0)),
    }
}

fn check(k: &dyn KernelDef, want: usize, out: &[u32]) -> crate::Result<()> {
    if out.len() == want {
        Ok(())
    } else {
        Err(crate::Error::Internal(format!(
            "{}: an output slot of {} words for {want}",
            k.describe(),
            out.len()
        )))
    }
}

/// Run `row(r, dst)` for every row of `row_len` words of `out`, in parallel when large.
fn rows(out: &mut [u32], row_len: usize, row: impl Fn(usize, &mut [u32]) + Sync) {
    if row_len == 0 {
        return;
    }
    if out.len() <= SERIAL_WORDS {
        out.chunks_mut(row_len)
            .enumerate()
            .for_each(|(r, d)| row(r, d));
    } else {
        out.par_chunks_mut(row_len)
            .enumerate()
            .for_each(|(r, d)| row(r, d));
    }
}

/// The source offset of output row `r` for an output of `dims` read with `strides` (signed,
/// from `offset`), ignoring the last axis.
fn row_base(mut r: usize, dims: &[usize], strides: &[i64], offset: i64) -> i64 {
    let mut off = offset;
    for k in (0..dims.len().saturating_sub(1)).rev() {
        off += (r % dims[k]) as i64 * strides[k];
        r /= dims[k];
    }
    off
}

/// `out[i] = input[offset + Σ c_k strides_k]`: contiguous rows are copied whole.
fn gather_rows(input: &[u32], out: &mut [u32], dims: &[usize], strides: &[i64], offset: i64) {
    // Neighbouring axes read contiguously one after the other are one axis (a channel
    // shuffle's [.., 56, 56] planes are rows of 3136 words, not 56 rows of 56), and size-1
    // axes none: fewer, longer rows to copy whole.
    let (mut d, mut st) = crate::shape::coalesce(dims, strides);
    if d.is_empty() && !dims.is_empty() {
        d.push(1);
        st.push(0);
    }
    let (dims, strides) = (&d[..], &st[..]);
    let Some(&n) = dims.last() else {
        out[0] = input[offset as usize];
        return;
    };
    let step = strides[dims.len() - 1];
    rows(out, n, |r, dst| {
        let base = row_base(r, dims, strides, offset);
        if step == 1 {
            let b = base as usize;
            dst.copy_from_slice(&input[b..b + n]);
        } else {
            for (j, d) in dst.iter_mut().enumerate() {
                *d = input[(base + j as i64 * step) as usize];
            }
        }
    });
}

pub(super) fn permute_into(
    k: &PermuteKernel,
    inputs: &[CpuIn<'_>],
    out: &mut [u32],
) -> crate::Result<()> {
    check(k, k.out_shape.numel(), out)?;
    let Some(input) = single(k, inputs, out, |w| k.reference(w))? else {
        return Ok(());
    };
    check(k, k.in_shape.numel(), input)?;
    let strides: Vec<i64> = k.src_strides().iter().map(|&s| s as i64).collect();
    gather_rows(input, out, k.out_shape.dims(), &strides, 0);
    Ok(())
}

pub(super) fn strided_into(
    k: &StridedKernel,
    inputs: &[CpuIn<'_>],
    out: &mut [u32],
) -> crate::Result<()> {
    check(k, k.out_shape.numel(), out)?;
    let Some(input) = single(k, inputs, out, |w| k.reference(w))? else {
        return Ok(());
    };
    // Every offset the kernel reads must be inside the input (the shape rule guarantees it;
    // a corrupt kernel is an error, not an out-of-bounds panic on a worker thread).
    let dims = k.out_shape.dims();
    if dims.iter().all(|&d| d > 0) {
        let (mut lo, mut hi) = (k.offset, k.offset);
        for (d, s) in dims.iter().zip(&k.strides) {
            let reach = (*d as i64 - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        if lo < 0 || hi >= input.len() as i64 {
            return Err(crate::Error::Internal(format!(
                "{} reads [{lo}, {hi}] of {} words",
                k.describe(),
                input.len()
            )));
        }
    }
    gather_rows(input, out, dims, &k.strides, k.offset);
    Ok(())
}

/// The concatenation (pooled, when it took a pool) by the reference, for an input that is
/// the output's own slot: read from a copy of it.
fn concat_by_reference(k: &ConcatKernel, inputs: &[CpuIn<'_>], out: &mut [u32]) {
    let own = out.to_vec();
    let slices: Vec<&[u32]> = inputs
        .iter()
        .map(|x| match x {
            CpuIn::Words(w) => *w,
            CpuIn::Output => &own[..],
        })
        .collect();
    out.copy_from_slice(&k.reference(&slices));
}

/// A concatenation along channels of `[N, C, H, W]` f32 inputs, max-pooled (`pool`, after
/// fusion's absorb): each output plane pooled straight from the input plane it would have
/// copied.
pub(super) fn pooled_concat_into(
    k: &ConcatKernel,
    pool: &crate::ops::PoolKernel,
    inputs: &[CpuIn<'_>],
    out: &mut [u32],
) -> crate::Result<()> {
    check(k, pool.out.numel(), out)?;
    let mut words = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let CpuIn::Words(w) = input else {
            concat_by_reference(k, inputs, out);
            return Ok(());
        };
        check(k, k.in_shapes.get(i).map_or(0, |s| s.numel()), w)?;
        words.push(bytemuck::cast_slice::<u32, f32>(
            &w[..k.in_shapes[i].numel()],
        ));
    }
    if words.len() != k.in_shapes.len() {
        return Err(missing_inputs(k, words.len()));
    }
    let d = k.out_shape.dims();
    let (c, plane) = (d[1], d[2] * d[3]);
    // Each input's first channel in the output.
    let mut first = Vec::with_capacity(words.len());
    let mut at = 0;
    for s in &k.in_shapes {
        first.push(at);
        at += s.dims()[1];
    }
    let plane_of = |i: usize| {
        let (img, ch) = (i / c, i % c);
        let j = first.partition_point(|&f| f <= ch) - 1;
        let cj = k.in_shapes[j].dims()[1];
        &words[j][(img * cj + ch - first[j]) * plane..][..plane]
    };
    pool.run_planes_into(&plane_of, out);
    Ok(())
}

pub(super) fn concat_into(
    k: &ConcatKernel,
    inputs: &[CpuIn<'_>],
    out: &mut [u32],
) -> crate::Result<()> {
    check(k, k.out_shape.numel(), out)?;
    let mut words = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        match input {
            CpuIn::Words(w) => words.push(*w),
            CpuIn::Output => {
                concat_by_reference(k, inputs, out);
                return Ok(());
            }
        }
        check(
            k,
            k.in_shapes.get(i).map_or(0, |s| s.numel()),
            input_words(input),
        )?;
    }
    if words.len() != k.in_shapes.len() {
        return Err(missing_inputs(k, words.len()));
    }
    let inner = k.inner();
    let total = k.out_shape.dims()[k.axis] * inner;
    // Each outer block of the output is the inputs' blocks one after another.
    let blocks: Vec<usize> = k
        .in_shapes
        .iter()
        .map(|s| s.dims()[k.axis] * inner)
        .collect();
    let outers = out.len() / total.max(1);
    if out.len() > SERIAL_WORDS && outers < 4 * rayon::current_num_threads() {
        // Few output rows (a batch-1 concat along channels is one): the copies themselves
        // are split, in pieces of SERIAL_WORDS, so that every thread copies.
        let mut pieces: Vec<(&[u32], &mut [u32])> = Vec::new();
        let mut rest = &mut out[..];
        for outer in 0..outers {
            for (w, &b) in words.iter().zip(&blocks) {
                let (dst, tail) = std::mem::take(&mut rest).split_at_mut(b);
                rest = tail;
                let src = &w[outer * b..(outer + 1) * b];
                pieces.extend(src.chunks(SERIAL_WORDS).zip(dst.chunks_mut(SERIAL_WORDS)));
            }
        }
        pieces
            .into_par_iter()
            .for_each(|(src, dst)| dst.copy_from_slice(src));
        return Ok(());
    }
    rows(out, total, |outer, dst| {
        let mut at = 0;
        for (w, &b) in words.iter().zip(&blocks) {
            dst[at..at + b].copy_from_slice(&w[outer * b..(outer + 1) * b]);
            at += b;
        }
    });
    Ok(())
}

fn input_words<'a>(input: &CpuIn<'a>) -> &'a [u32] {
    match input {
        CpuIn::Words(w) => w,
        CpuIn::Output => &[],
    }
}

/// Each output row along the last axis is the pad value around one input row copied whole,
/// or all pad value.
pub(super) fn pad_into(k: &PadKernel, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
    check(k, k.out_shape.numel(), out)?;
    let Some(input) = single(k, inputs, out, |w| k.reference(w))? else {
        return Ok(());
    };
    check(k, k.in_shape.numel(), input)?;
    let (od, id) = (k.out_shape.dims(), k.in_shape.dims());
    let Some(last) = od.len().checked_sub(1) else {
        out.copy_from_slice(input);
        return Ok(());
    };
    let (in_row, before) = (id[last], k.before[last]);
    let in_strides = k.in_shape.strides();
    rows(out, od[last], |r, dst| {
        let mut rest = r;
        let mut src = Some(0usize);
        for a in (0..last).rev() {
            let c = rest % od[a];
            rest /= od[a];
            src = src.and_then(|s| match c.checked_sub(k.before[a]) {
                Some(c) if c < id[a] => Some(s + c * in_strides[a]),
                _ => None,
            });
        }
        match src {
            Some(s) if in_row > 0 => {
                dst[..before].fill(k.value);
                dst[before..before + in_row].copy_from_slice(&input[s..s + in_row]);
                dst[before + in_row..].fill(k.value);
            }
            _ => dst.fill(k.value),
        }
    });
    Ok(())
}

/// `take`: each output row (the axis' trailing block) is one input row copied whole.
pub(super) fn take_into(
    k: &GatherKernel,
    inputs: &[CpuIn<'_>],
    out: &mut [u32],
) -> crate::Result<()> {
    check(k, k.out_shape.numel(), out)?;
    let (Some(CpuIn::Words(x)), Some(CpuIn::Words(idx))) = (inputs.first(), inputs.get(1)) else {
        // The output written over an input (or too few inputs): the oracle on copies.
        return run_via_reference(k, inputs, out);
    };
    let (n, inner) = k.split();
    check(k, k.x_shape.numel(), x)?;
    check(k, k.indices, idx)?;
    if inner == 0 {
        return Ok(());
    }
    rows(out, inner, |r, dst| {
        let (j, outer) = (r % k.indices, r / k.indices);
        let src = (outer * n + GatherKernel::row(idx[j], n)) * inner;
        dst.copy_from_slice(&x[src..src + inner]);
    });
    Ok(())
}
