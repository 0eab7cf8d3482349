//! cpu:0's row passes (also the kernels' reference): rows in parallel, each row's sums in
//! 16 interleaved partial sums (vectorizable, and a fixed order, so the same bits on every
//! run), compiled for AVX-512 or AVX2+FMA where the CPU has them.

use super::{RowKernel, RowPass};
use crate::ops::elementwise::vmath;
use crate::ops::family::missing_inputs;
use crate::{Error, Result};
use rayon::prelude::*;

/// Elements below which a pass runs on one thread.
const PARALLEL_MIN: usize = 1 << 15;

/// Lanes of [`sum3`]'s partial sums (as `vmath::lane_sum`'s).
const L: usize = 16;

/// `Σ f(a[i], b[i], c[i])` in [`L`] interleaved partial sums (slices of one length).
#[inline(always)]
fn sum3(a: &[f32], b: &[f32], c: &[f32], f: impl Fn(f32, f32, f32) -> f32) -> f32 {
    let (ca, ta) = a.as_chunks::<L>();
    let (cb, tb) = b.as_chunks::<L>();
    let (cc, tc) = c.as_chunks::<L>();
    let mut acc = [0.0f32; L];
    for ((x, y), z) in ca.iter().zip(cb).zip(cc) {
        for l in 0..L {
            acc[l] += f(x[l], y[l], z[l]);
        }
    }
    let tail: f32 = ta
        .iter()
        .zip(tb)
        .zip(tc)
        .map(|((&x, &y), &z)| f(x, y, z))
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// A row's mean and `1/sqrt(σ² + ε)` (two passes, as the composite).
#[inline(always)]
fn moments(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = vmath::lane_sum(x) / n;
    let var = vmath::lane_sum_map(x, |v| (v - mean) * (v - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// The row's shift (its maximum, or 0 where that is infinite) and `Σ exp(x - shift)`.
#[inline(always)]
fn exp_sum(x: &[f32]) -> (f32, f32) {
    let m = vmath::lane_max(x);
    let shift = if m.is_finite() { m } else { 0.0 };
    (shift, vmath::lane_sum_map(x, |v| vmath::exp(v - shift)))
}

/// The label of a row as an index into its `c` classes, if it is one.
#[inline(always)]
fn class(label: u32, c: usize) -> Option<usize> {
    let l = label as i32;
    (l >= 0 && (l as usize) < c).then_some(l as usize)
}

pub(super) fn run(k: &RowKernel, inputs: &[&[u32]], out: &mut [u32]) -> Result<()> {
    let sizes = k.input_sizes();
    if inputs.len() < sizes.len() {
        return Err(missing_inputs(k, inputs.len()));
    }
    let width = k.out_width();
    if sizes.iter().zip(inputs).any(|(&s, w)| w.len() != s) || out.len() != k.rows * width {
        return Err(Error::Internal(format!(
            "{}: inputs of {:?} words and {} output words",
            crate::ops::KernelDef::describe(k),
            inputs.iter().map(|w| w.len()).collect::<Vec<_>>(),
            out.len()
        )));
    }
    if out.is_empty() || k.d == 0 {
        out.fill(0);
        return Ok(());
    }
    let out: &mut [f32] = bytemuck::cast_slice_mut(out);
    // Whole rows per task, at least PARALLEL_MIN elements each.
    let per = PARALLEL_MIN.div_ceil(k.d).max(1);
    if k.rows * k.d < PARALLEL_MIN || k.rows == 1 {
        rows(k, inputs, 0, out);
    } else {
        out.par_chunks_mut(per * width)
            .enumerate()
            .for_each(|(c, o)| rows(k, inputs, c * per, o));
    }
    Ok(())
}

/// Rows `r0..` (as many as `o` holds) with the widest vector instructions the CPU has.
fn rows(k: &RowKernel, inputs: &[&[u32]], r0: usize, o: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512 {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { rows_avx512(k, inputs, r0, o) };
        }
        if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
            // SAFETY: as above.
            return unsafe { rows_avx2(k, inputs, r0, o) };
        }
    }
    rows_body(k, inputs, r0, o)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_avx512(k: &RowKernel, inputs: &[&[u32]], r0: usize, o: &mut [f32]) {
    rows_body(k, inputs, r0, o)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(k: &RowKernel, inputs: &[&[u32]], r0: usize, o: &mut [f32]) {
    rows_body(k, inputs, r0, o)
}

#[inline(always)]
fn rows_body(k: &RowKernel, inputs: &[&[u32]], r0: usize, o: &mut [f32]) {
    let d = k.d;
    let f = |i: usize| -> &[f32] { bytemuck::cast_slice(inputs[i]) };
    let row = |i: usize, r: usize| &f(i)[r * d..(r + 1) * d];
    match k.pass {
        RowPass::LayerNorm => {
            let (gamma, beta) = (f(1), f(2));
            for (j, y) in o.chunks_exact_mut(d).enumerate() {
                let x = row(0, r0 + j);
                let (mean, r) = moments(x, k.eps);
                for (((y, &x), &g), &b) in y.iter_mut().zip(x).zip(gamma).zip(beta) {
                    *y = (x - mean) * r * g + b;
                }
            }
        }
        RowPass::LayerNormXhat => {
            for (j, y) in o.chunks_exact_mut(d).enumerate() {
                let x = row(0, r0 + j);
                let (mean, r) = moments(x, k.eps);
                for (y, &x) in y.iter_mut().zip(x) {
                    *y = (x - mean) * r;
                }
            }
        }
        RowPass::LayerNormGrad => {
            let gamma = f(1);
            let n = d as f32;
            for (j, dx) in o.chunks_exact_mut(d).enumerate() {
                let (x, dy) = (row(0, r0 + j), row(2, r0 + j));
                let (mean, r) = moments(x, k.eps);
                // mean(g) and mean(g x̂) with g = dy γ.
                let a = sum3(dy, gamma, x, |dy, g, _| dy * g) / n;
                let b = sum3(dy, gamma, x, |dy, g, x| dy * g * (x - mean)) * r / n;
                for (((dx, &dy), &g), &x) in dx.iter_mut().zip(dy).zip(gamma).zip(x) {
                    *dx = r * (dy * g - a - (x - mean) * r * b);
                }
            }
        }
        RowPass::SoftmaxXent => {
            let labels = inputs[1];
            for (j, loss) in o.iter_mut().enumerate() {
                let x = row(0, r0 + j);
                let (shift, s) = exp_sum(x);
                *loss = match class(labels[r0 + j], d) {
                    Some(l) => s.ln() - (x[l] - shift),
                    None => f32::NAN,
                };
            }
        }
        RowPass::SoftmaxXentGrad => {
            let (labels, dloss) = (inputs[1], f(2));
            for (j, dx) in o.chunks_exact_mut(d).enumerate() {
                let x = row(0, r0 + j);
                let Some(l) = class(labels[r0 + j], d) else {
                    dx.fill(f32::NAN);
                    continue;
                };
                let (shift, s) = exp_sum(x);
                let g = dloss[r0 + j];
                let scale = g / s;
                for (dx, &x) in dx.iter_mut().zip(x) {
                    *dx = vmath::exp(x - shift) * scale;
                }
                dx[l] -= g;
            }
        }
    }
}
