//! The backward primitives on the CPU.
//!
//! * Input gradient: per group, `col[k, q] = Σ_o w[o, k] · dy[o, q]` (the weights read
//!   transposed in place by sgemm), then col2im adds each column back to the input cell it
//!   came from. Blocks of whole images run in parallel, each owning its slice of `dx`.
//! * Filter gradient: per group, `dw[o, k] += Σ_q dy[o, q] · col[k, q]` over im2col columns
//!   (sgemm reading `col` transposed in place, accumulating). The `(n, oy, ox)` positions
//!   are cut into a fixed number of parts by shape alone (never by thread count), summed
//!   in parallel and added in order, so the bits do not depend on the machine.
//! * Pools: one plane per task; each window's maximum is found in the forward's fold order
//!   and `dy` added to its first cell (max), or `dy / count` to every cell (avg), windows in
//!   row-major order: the same additions, in the same order, as the WGSL kernels.

use super::backward::{NnGradKernel, NnGradOp};
use super::cpu::{tap_range, COL_BUDGET, POOL_PARALLEL, TASK_WORDS};
use super::*;
use crate::ops::family::CpuIn;
use crate::ops::family::{input_words, own_copy};
use rayon::prelude::*;

/// Output pixels a block of images aims for (as the forward convolution).
const BLOCK_COLS: usize = 512;
/// Fewest `(n, oy, ox)` positions per part of a filter gradient.
const PART_MIN: usize = 256;
/// Most parts a filter gradient (or one chunk of it) is cut into.
const MAX_PARTS: usize = 8;

impl NnGradKernel {
    fn forward(&self) -> Conv2dKernel {
        Conv2dKernel {
            x: self.x.clone(),
            w: self.w.clone(),
            window: self.window,
            groups: self.groups.max(1),
            out: self.y.clone(),
            epilogue: None,
            c_chunk: None,
            pool: None,
        }
    }

    /// The kernel writing into `out` (see [`KernelDef::run_cpu_into`]).
    pub fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        let own = own_copy(inputs, out);
        let ins = input_words(inputs, &own);
        let need: Vec<usize> = match self.op {
            NnGradOp::ConvInput => vec![self.y.numel(), self.w.numel()],
            NnGradOp::ConvFilter | NnGradOp::MaxPool => vec![self.x.numel(), self.y.numel()],
            NnGradOp::AvgPool => vec![self.y.numel()],
        };
        if ins.len() != need.len()
            || ins.iter().zip(&need).any(|(i, &n)| i.len() < n)
            || out.len() != self.out_shape().numel()
        {
            return Err(crate::Error::Internal(format!(
                "{}: inputs of {:?} words, output of {}",
                self.describe(),
                ins.iter().map(|i| i.len()).collect::<Vec<_>>(),
                out.len()
            )));
        }
        let f = |i: usize| -> &[f32] { bytemuck::cast_slice(ins[i]) };
        let dst: &mut [f32] = bytemuck::cast_slice_mut(out);
        if dst.is_empty() {
            return Ok(());
        }
        match self.op {
            NnGradOp::ConvInput => self.conv_input(f(0), f(1), dst),
            NnGradOp::ConvFilter => self.conv_filter(f(0), f(1), dst),
            NnGradOp::MaxPool => self.pool(Some(f(0)), f(1), dst),
            NnGradOp::AvgPool => self.pool(None, f(0), dst),
        }
        Ok(())
    }

    fn conv_input(&self, dy: &[f32], w: &[f32], out: &mut [f32]) {
        let [n_all, c_all, h, wd] = dims4(&self.x);
        let [o_all, _, _, _] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.y);
        let p = (oh * ow).max(1);
        let image = c_all * h * wd;
        if image == 0 {
            return;
        }
        let og = o_all / self.groups.max(1);
        let chunk = self.chunk.unwrap_or(og).max(1);
        let threads = rayon::current_num_threads().max(1);
        let nb = (BLOCK_COLS / p).clamp(1, n_all.div_ceil(2 * threads).max(1));
        for (ci, region) in out.chunks_mut(n_all * image).enumerate() {
            let o_range = (ci * chunk, ((ci + 1) * chunk).min(og));
            region
                .par_chunks_mut(nb * image)
                .enumerate()
                .for_each(|(b, dst)| self.input_block(dy, w, o_range, b * nb, dst));
        }
    }

    /// `dx` of images `n0..n0 + dst.len() / image` from output channels `o_lo..o_hi` of
    /// each group.
    fn input_block(
        &self,
        dy: &[f32],
        w: &[f32],
        (o_lo, o_hi): (usize, usize),
        n0: usize,
        dst: &mut [f32],
    ) {
        dst.fill(0.0);
        let [_, c_all, h, wd] = dims4(&self.x);
        let [o_all, cg, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.y);
        let p = oh * ow;
        let og = o_all / self.groups.max(1);
        let k = cg * kh * kw;
        let ogr = o_hi.saturating_sub(o_lo);
        let images = dst.len() / (c_all * h * wd);
        let cols_total = images * p;
        if ogr == 0 || k == 0 || cols_total == 0 {
            return;
        }
        let piece = (COL_BUDGET / k.max(ogr)).clamp(1, cols_total);
        let mut dyp = vec![0f32; ogr * piece];
        let mut col = vec![0f32; k * piece];
        for g in 0..self.groups.max(1) {
            let mut q0 = 0;
            while q0 < cols_total {
                let q1 = (q0 + piece).min(cols_total);
                let cols = q1 - q0;
                for o in 0..ogr {
                    let row = &mut dyp[o * cols..(o + 1) * cols];
                    let mut q = q0;
                    while q < q1 {
                        let (img, px) = (q / p, q % p);
                        let run = (p - px).min(q1 - q);
                        let at = ((n0 + img) * o_all + g * og + o_lo + o) * p + px;
                        row[q - q0..q - q0 + run].copy_from_slice(&dy[at..at + run]);
                        q += run;
                    }
                }
                let a0 = (g * og + o_lo) * k;
                // SAFETY: A is `w` read transposed: element (kk, o) at `a0 + kk + o * k` for
                // kk < k, o < ogr, i.e. the weights of outputs g*og+o_lo.. g*og+o_hi, inside
                // `w` (checked to hold O*k floats). B is `dyp` ([ogr, cols], row stride
                // cols) and C is `col` ([k, cols]): fresh vectors of at least that size,
                // distinct from each other and from A.
                unsafe {
                    crate::ops::matmul::cpu::sgemm(
                        k,
                        ogr,
                        cols,
                        w[a0..].as_ptr(),
                        1,
                        k as isize,
                        dyp.as_ptr(),
                        cols as isize,
                        1,
                        0.0,
                        col.as_mut_ptr(),
                        cols as isize,
                        1,
                    );
                }
                // col2im: each row (c, ki, kj) adds back to the cells its window tap read.
                for c in 0..cg {
                    for ki in 0..kh {
                        for kj in 0..kw {
                            let r = ((c * kh + ki) * kw + kj) * cols;
                            self.scatter(&col[r..r + cols], (g * cg + c, c_all), (ki, kj), q0, dst);
                        }
                    }
                }
                q0 = q1;
            }
        }
    }

    /// col2im of one row: column `q` (from `q0`, relative to the block's first image) adds
    /// to the element of channel `plane_c` that window offset `(ki, kj)` of output `q` read.
    fn scatter(
        &self,
        src: &[f32],
        (plane_c, c_all): (usize, usize),
        (ki, kj): (usize, usize),
        q0: usize,
        dst: &mut [f32],
    ) {
        let [_, _, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.y);
        let p = oh * ow;
        let (s, d, pad) = (
            self.window.stride[1],
            self.window.dilation[1],
            self.window.padding[1],
        );
        let mut at = 0;
        while at < src.len() {
            let q = q0 + at;
            let (img, px) = (q / p, q % p);
            let (oy, ox0) = (px / ow, px % ow);
            let run = (ow - ox0).min(src.len() - at);
            if let Some(iy) = self.window.at(0, oy, ki, h) {
                let base = ((img * c_all + plane_c) * h + iy) * wd;
                let row = &mut dst[base..base + wd];
                let r = tap_range(ox0, run, (s, kj * d, pad), wd);
                let first = ((ox0 + r.start) * s + kj * d).saturating_sub(pad);
                let vals = &src[at + r.start..at + r.end];
                if vals.is_empty() {
                    // Every tap of the run is padding.
                } else if s == 1 {
                    for (o, v) in row[first..first + vals.len()].iter_mut().zip(vals) {
                        *o += v;
                    }
                } else {
                    for (o, v) in row[first..].iter_mut().step_by(s).zip(vals) {
                        *o += v;
                    }
                }
            }
            at += run;
        }
    }

    fn conv_filter(&self, x: &[f32], dy: &[f32], out: &mut [f32]) {
        let total = self.loop_len();
        let wn = self.w.numel();
        if wn == 0 {
            return;
        }
        let chunk = self.chunk.unwrap_or(total).max(1);
        out.par_chunks_mut(wn).enumerate().for_each(|(ci, dst)| {
            let (lo, hi) = (ci * chunk, ((ci + 1) * chunk).min(total));
            // Parts of at least PART_MIN positions (cut by shape alone) run on rayon's pool,
            // each product on its own thread.
            let parts = (hi.saturating_sub(lo))
                .div_ceil(PART_MIN)
                .clamp(1, MAX_PARTS);
            let len = (hi.saturating_sub(lo)).div_ceil(parts).max(1);
            if parts == 1 {
                dst.fill(0.0);
                self.filter_part(x, dy, (lo, hi), dst);
                return;
            }
            let sums: Vec<Vec<f32>> = (0..parts)
                .into_par_iter()
                .map(|i| {
                    let mut part = vec![0f32; wn];
                    let a = (lo + i * len).min(hi);
                    self.filter_part(x, dy, (a, (a + len).min(hi)), &mut part);
                    part
                })
                .collect();
            dst.copy_from_slice(&sums[0]);
            for s in &sums[1..] {
                for (d, v) in dst.iter_mut().zip(s) {
                    *d += v;
                }
            }
        });
    }

    /// Adds to `dst` (`dw`) the sum over positions `q` in `lo..hi` (`q = (n·OH + oy)·OW + ox`).
    fn filter_part(&self, x: &[f32], dy: &[f32], (lo, hi): (usize, usize), dst: &mut [f32]) {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [o_all, cg, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.y);
        let p = oh * ow;
        let og = o_all / self.groups.max(1);
        let k = cg * kh * kw;
        if hi <= lo || k == 0 || og == 0 {
            return;
        }
        let fwd = self.forward();
        let piece = (COL_BUDGET / k.max(og)).clamp(1, hi - lo);
        let mut col = vec![0f32; k * piece];
        let mut dyp = vec![0f32; og * piece];
        let mut q0 = lo;
        while q0 < hi {
            let q1 = (q0 + piece).min(hi);
            let cols = q1 - q0;
            for g in 0..self.groups.max(1) {
                for c in 0..cg {
                    for ki in 0..kh {
                        for kj in 0..kw {
                            let r = ((c * kh + ki) * kw + kj) * cols;
                            fwd.gather(
                                x,
                                (c_all, h, wd),
                                g * cg + c,
                                (ki, kj),
                                (0, q0),
                                &mut col[r..r + cols],
                            );
                        }
                    }
                }
                for o in 0..og {
                    let row = &mut dyp[o * cols..(o + 1) * cols];
                    let mut q = q0;
                    while q < q1 {
                        let (img, px) = (q / p, q % p);
                        let run = (p - px).min(q1 - q);
                        let at = (img * o_all + g * og + o) * p + px;
                        row[q - q0..q - q0 + run].copy_from_slice(&dy[at..at + run]);
                        q += run;
                    }
                }
                let c0 = g * og * k;
                // SAFETY: A is `dyp` ([og, cols], row stride cols), B is `col` read
                // transposed (element (q, kk) at `q + kk * cols`, q < cols, kk < k), both
                // fresh vectors of at least that size; C is rows g*og..(g+1)*og of `dst`
                // ([O, k], row stride k, checked to hold O*k floats), distinct from A and B.
                unsafe {
                    crate::ops::matmul::cpu::sgemm(
                        og,
                        cols,
                        k,
                        dyp.as_ptr(),
                        cols as isize,
                        1,
                        col.as_ptr(),
                        1,
                        cols as isize,
                        1.0,
                        dst[c0..].as_mut_ptr(),
                        k as isize,
                        1,
                    );
                }
            }
            q0 = q1;
        }
    }

    /// max (`x` given) or avg pooling's gradient, one plane per task.
    fn pool(&self, x: Option<&[f32]>, dy: &[f32], out: &mut [f32]) {
        let [_, _, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.y);
        let win = &self.window;
        // Pools have no dilation: a window's in-bounds cells are a rectangle.
        let span = |o: usize, k: usize| {
            let lo = (o * win.stride[k]).saturating_sub(win.padding[k]);
            let hi = (o * win.stride[k] + win.kernel[k]).saturating_sub(win.padding[k]);
            lo..hi.min([h, wd][k])
        };
        let (rows, cols): (Vec<_>, Vec<_>) = (
            (0..oh).map(|o| span(o, 0)).collect(),
            (0..ow).map(|o| span(o, 1)).collect(),
        );
        let full = win.padding == [0, 0];
        let plane = |(nc, dst): (usize, &mut [f32])| {
            dst.fill(0.0);
            let g = &dy[nc * oh * ow..(nc + 1) * oh * ow];
            let xs = x.map(|x| &x[nc * h * wd..(nc + 1) * h * wd]);
            // Unpadded 2x2 and 3x3 max windows with their size known to the compiler.
            if let (true, Some(xs)) = (full, xs) {
                let geo = (wd, [oh, ow], win.stride);
                match win.kernel {
                    [2, 2] => return max_grad_full::<2, 2>(xs, g, geo, dst),
                    [3, 3] => return max_grad_full::<3, 3>(xs, g, geo, dst),
                    _ => {}
                }
            }
            for (oy, ry) in rows.iter().enumerate() {
                for (ox, rx) in cols.iter().enumerate() {
                    let gv = g[oy * ow + ox];
                    match xs {
                        Some(xs) => {
                            // The forward's fold: the first cell, then a strictly greater
                            // one, or the first NaN (which then stays).
                            let mut at = ry.start * wd + rx.start;
                            let mut best = xs[at];
                            for y in ry.clone() {
                                for (xx, &v) in
                                    xs[y * wd + rx.start..y * wd + rx.end].iter().enumerate()
                                {
                                    // Selects, not branches: random data would
                                    // mispredict half of the comparisons.
                                    let take = !best.is_nan() & (v.is_nan() | (v > best));
                                    best = if take { v } else { best };
                                    at = if take { y * wd + rx.start + xx } else { at };
                                }
                            }
                            dst[at] += gv;
                        }
                        None => {
                            let share = gv / (ry.len() * rx.len()) as f32;
                            for y in ry.clone() {
                                for d in &mut dst[y * wd + rx.start..y * wd + rx.end] {
                                    *d += share;
                                }
                            }
                        }
                    }
                }
            }
        };
        let plane_len = (h * wd).max(1);
        let per_task = plane_len * (TASK_WORDS / plane_len).max(1);
        if self.x.numel() >= POOL_PARALLEL {
            out.par_chunks_mut(per_task)
                .enumerate()
                .for_each(|(t, dst)| {
                    let first = t * (per_task / plane_len);
                    for (i, p) in dst.chunks_mut(plane_len).enumerate() {
                        plane((first + i, p));
                    }
                });
        } else {
            out.chunks_mut(plane_len).enumerate().for_each(plane);
        }
    }
}

/// One plane of max pooling's gradient whose `KH`x`KW` windows all lie inside it: each
/// window's `dy` added at its first maximum, found as the general path finds it.
fn max_grad_full<const KH: usize, const KW: usize>(
    xs: &[f32],
    g: &[f32],
    (wd, [oh, ow], [sh, sw]): (usize, [usize; 2], [usize; 2]),
    dst: &mut [f32],
) {
    for oy in 0..oh {
        for ox in 0..ow {
            let c0 = oy * sh * wd + ox * sw;
            let win = &xs[c0..c0 + (KH - 1) * wd + KW];
            let (mut best, mut at) = (win[0], 0);
            for ki in 0..KH {
                for kj in 0..KW {
                    let (v, i) = (win[ki * wd + kj], ki * wd + kj);
                    // Selects, not branches: random data mispredicts half the comparisons.
                    let take = !best.is_nan() & (v.is_nan() | (v > best));
                    best = if take { v } else { best };
                    at = if take { i } else { at };
                }
            }
            dst[c0 + at] += g[oy * ow + ox];
        }
    }
}
