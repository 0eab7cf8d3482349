//! Convolution and pooling on the CPU.
//!
//! A convolution is a matrix product per group: `out[o, p] = Σ_k w[o, k] · col[k, p]`, with
//! `k` running over (channel, ki, kj) and `p` over output pixels, where `col` (im2col) holds
//! the input element each (k, p) pair reads, or zero in the padding. Blocks of whole images
//! run in parallel on rayon's pool (each owning its slice of the output); inside a block the
//! columns are built a bounded piece at a time, so memory stays near [`COL_BUDGET`] floats
//! per task whatever the image size, and each piece goes through the `gemm` crate
//! ([`sgemm`](crate::ops::matmul::cpu::sgemm), which threads a large product itself). It sums over `k` in its own blocked order, so
//! results differ from the WGSL kernel's in the last bits (tests compare both to float64).
//! Pooling folds each window in the WGSL kernel's order, one output plane per task;
//! depthwise convolutions and most pools run on phase planes ([`super::planes`]).

use super::maxpool::{max_plane, RowScratch};
use super::planes::{Phases, Scratch};
use super::*;
use crate::ops::elementwise::RangeProgram;
use crate::ops::family::{input_words, own_copy, CpuIn};
use rayon::prelude::*;

/// Floats of im2col columns (and of product tiles) one task holds at a time.
pub(super) const COL_BUDGET: usize = 1 << 20;
/// Input words a pooling task reads at least (whole planes): smaller tasks cost more in
/// rayon's bookkeeping than their work (measured on W7's 8x8 planes).
pub(super) const TASK_WORDS: usize = 1 << 14;
/// Input words from which pooling (and its gradient) runs on rayon's pool: a 2x2 pool
/// takes ~1 ns per input word on one thread, less than waking a sleeping worker costs
/// below this (measured on W7's 64x16x8x8 and 64x32x4x4).
pub(super) const POOL_PARALLEL: usize = 1 << 18;
/// Output pixels a block of images aims for, so small images still make sgemm worthwhile.
const BLOCK_COLS: usize = 512;
/// im2col floats of one column tile (256 KiB: a quarter of this machine's L2 per core).
const TILE_FLOATS: usize = 1 << 16;
/// The fewest output columns a tile holds (below, sgemm's packing dominates).
const TILE_MIN: usize = 64;
/// Output channels of a row tile are a multiple of this (sgemm's micro-kernel height).
const ROW_TILE_MIN: usize = 16;
/// Multiply-adds from which one image's product is split by output channels.
const ROW_TILES_MACS: usize = 1 << 20;
/// Most floats of im2col columns `row_tiles` keeps for its thread's next call (8 MiB).
const KEEP_COL: usize = 1 << 21;

thread_local! {
    static ROW_COL: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Planes below which a convolution with few taps per output and many output channels is
/// split by output channels before columns (see `gemm_into`).
const ROWS_FIRST_PLANE: usize = 1024;
/// Multiply-adds from which a depthwise convolution runs on rayon's pool (below, waking a
/// worker costs more than the second core saves).
const DEPTHWISE_PARALLEL: usize = 1 << 16;

/// `out`'s base pointer, shared by tasks that write disjoint parts of it.
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut f32);
// SAFETY: only `column_tiles` and `direct` make one, for tasks that write disjoint columns
// or (channel, row) ranges of `out`.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    pub(super) fn get(self) -> *mut f32 {
        self.0
    }
}

impl Conv2dKernel {
    /// `inputs`: x, w, then the epilogue's extra inputs; an error when they do not match the
    /// kernel's shapes.
    pub fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let ins: Vec<CpuIn<'_>> = inputs.iter().map(|w| CpuIn::Words(w)).collect();
        let mut out = vec![0; self.out_shape().numel()];
        self.run_cpu_into(&ins, &mut out)?;
        Ok(out)
    }

    /// The im2col + sgemm kernel writing into `out` (see [`KernelDef::run_cpu_into`]).
    pub fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        // An input the output is written over (only an epilogue extra of the output's
        // shape can be) is read from a copy: the kernel overwrites the slot first.
        let own = own_copy(inputs, out);
        let ins = input_words(inputs, &own);
        let [x, w] = [ins.first(), ins.get(1)].map(|s| s.copied().unwrap_or_default());
        if x.len() < self.x.numel()
            || w.len() < self.w.numel()
            || out.len() != self.out_shape().numel()
        {
            return Err(crate::Error::Internal(format!(
                "{}: inputs of {} and {} words, output of {}",
                self.describe(),
                x.len(),
                w.len(),
                out.len()
            )));
        }
        let mut args = vec![CpuIn::Output];
        args.extend(ins[2..].iter().map(|w| CpuIn::Words(w)));
        let kernel = self
            .epilogue
            .as_ref()
            .map(|e| e.kernel(&self.out, DType::F32));
        // The epilogue over each piece of the output as a task finishes it (in cache), where
        // the path writing it can; otherwise in place over the whole product after it.
        let ranged = match &kernel {
            Some(k) => RangeProgram::new(k, &args)?,
            None => None,
        };
        if let Some(pool) = &self.pool {
            // The direct kernel pools each band of rows as it computes them; otherwise the
            // convolution whole, then the pool.
            if kernel.is_none() == ranged.is_none()
                && self.direct(
                    bytemuck::cast_slice(x),
                    bytemuck::cast_slice(w),
                    bytemuck::cast_slice_mut(out),
                    ranged.as_ref(),
                )
            {
                return Ok(());
            }
            let conv = Conv2dKernel {
                pool: None,
                ..self.clone()
            };
            let numel = conv.out_shape().numel();
            let mut full: Vec<u32> = crate::host::fresh_vec(numel).ok_or_else(|| {
                crate::Error::Internal(format!(
                    "{}: no memory for its convolution",
                    self.describe()
                ))
            })?;
            full.resize(numel, 0);
            let ins: Vec<CpuIn<'_>> = ins.iter().map(|w| CpuIn::Words(w)).collect();
            conv.run_cpu_into(&ins, &mut full)?;
            return pool.run_cpu_into(&[CpuIn::Words(&full)], out);
        }
        let applied = self.gemm_into(
            bytemuck::cast_slice(x),
            bytemuck::cast_slice(w),
            bytemuck::cast_slice_mut(out),
            ranged.as_ref(),
        );
        if let (Some(k), false) = (&kernel, applied) {
            k.run_cpu_into(&args, out)?;
        }
        Ok(())
    }

    /// The convolution (before the epilogue) into `out`: per channel chunk, per block of
    /// images, per group, per piece of columns: im2col, then sgemm, then scatter.
    /// Returns whether `epi` (the epilogue, when it has one) was applied too.
    fn gemm_into(
        &self,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        epi: Option<&RangeProgram<'_>>,
    ) -> bool {
        let [n_all, _, _, _] = dims4(&self.x);
        let [o_all, cg, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        let image = o_all * p;
        if out.is_empty() || image == 0 {
            return true;
        }
        let chunk = self.c_chunk.unwrap_or(cg).max(1);
        let threads = rayon::current_num_threads().max(1);
        if self.direct(x, w, out, epi) {
            return true;
        }
        if self.c_chunk.is_none() && cg == 1 && o_all == self.groups && self.groups > 1 {
            self.depthwise(x, w, out, epi);
            return true;
        }
        if n_all == 1 && self.c_chunk.is_none() {
            let macs = o_all.saturating_mul(cg * kh * kw).saturating_mul(p);
            let row_tiles = threads > 1 && o_all >= 2 * ROW_TILE_MIN && macs >= ROW_TILES_MACS;
            // Few taps over a small plane: column tiles would split every output row
            // between threads, and the epilogue's pass over each piece bounces the line the
            // two share (SqueezeNet's 1x1 from 32 to 128 channels at 27x27 took 0.076 ms
            // in column tiles, 0.031 in row tiles).
            let small = p < ROWS_FIRST_PLANE && cg * kh * kw <= 64 && o_all >= 64;
            if self.groups == 1 && small && row_tiles {
                self.row_tiles(x, w, out, epi);
                return true;
            }
            if self.groups > 1 || p >= 2 * TILE_MIN * threads {
                self.column_tiles(x, w, out, epi);
                return true;
            }
            if row_tiles {
                self.row_tiles(x, w, out, epi);
                return true;
            }
        }
        let nb = (BLOCK_COLS / p.max(1))
            .min(n_all.div_ceil(2 * threads))
            .max(1);
        // Small products run in parallel over blocks of images; a large one (past sgemm's
        // threshold for threading, counted over the piece of columns `block` multiplies at
        // a time) threads inside sgemm.
        let og = o_all / self.groups.max(1);
        let k_all = chunk.min(cg) * kh * kw;
        let cols = (nb * p).min(COL_BUDGET / k_all.max(og).max(1));
        let par = n_all > nb && og * k_all * cols < crate::ops::matmul::cpu::GEMM_PAR_MACS;
        for (ci, region) in out.chunks_mut(n_all * image).enumerate() {
            let c_lo = ci * chunk;
            let c_hi = (c_lo + chunk).min(cg);
            let block = |(b, dst): (usize, &mut [f32])| {
                self.block(x, w, (c_lo, c_hi), b * nb, dst);
            };
            if par {
                region
                    .par_chunks_mut(nb * image)
                    .enumerate()
                    .for_each(block);
            } else {
                region.chunks_mut(nb * image).enumerate().for_each(block);
            }
        }
        epi.is_none()
    }

    /// One image, many output pixels (a batch-1 network's early layers) or several groups:
    /// tiles of output columns of each group in parallel, each im2col'd into a cache-sized
    /// buffer (or read in place for a 1x1 stride-1 convolution) and multiplied on one
    /// thread straight into its group's rows and columns of `out`. Threading inside sgemm
    /// splits these products poorly (64 output channels by thousands of pixels), and the
    /// single-threaded im2col and copy-out of the blocked path would serialize around it.
    fn column_tiles(&self, x: &[f32], w: &[f32], out: &mut [f32], epi: Option<&RangeProgram<'_>>) {
        let [_, _, h, wd] = dims4(&self.x);
        let [o_all, cg, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        let k = cg * kh * kw;
        let groups = self.groups.max(1);
        let og = o_all / groups;
        let threads = rayon::current_num_threads().max(1);
        let in_place = kh == 1 && kw == 1 && oh == h && ow == wd;
        let target = (TILE_FLOATS / k.max(1))
            .max(TILE_MIN)
            .min(p.div_ceil(threads.div_ceil(groups)));
        // Equal tiles, as many (over all groups) as a multiple of the threads, so that no
        // thread is left with a short last tile while the other works (14x14 in tiles of
        // 64 was 64, 64, 64 and 4).
        let tiles = (groups * p.div_ceil(target)).next_multiple_of(threads) / groups;
        let tile = p.div_ceil(tiles.max(1));
        let tiles = p.div_ceil(tile);
        let dst = SendPtr(out.as_mut_ptr());
        (0..groups * tiles)
            .into_par_iter()
            .for_each_init(Vec::new, |col: &mut Vec<f32>, task| {
                let (g, t) = (task / tiles, task % tiles);
                let q0 = t * tile;
                let cols = tile.min(p - q0);
                let (b, rsb) = if in_place {
                    (x[g * cg * p + q0..].as_ptr(), p as isize)
                } else {
                    col.resize(k * cols, 0.0);
                    self.im2col(x, g * cg..(g + 1) * cg, (0, q0), col);
                    (col.as_ptr(), cols as isize)
                };
                let c = dst.get();
                // SAFETY: A is group g's rows of `w` ([og, k] from row g*og of [o_all, k],
                // checked to hold O*cg*kh*kw floats). B is the group's input channel
                // planes from column q0 (row stride p = h*wd, channels g*cg..(g+1)*cg,
                // columns q0..q0+cols < p: inside `x`) or this task's `col` ([k, cols]).
                // C is columns q0..q0+cols of the group's rows of `out` ([o_all, p]):
                // tasks are disjoint (group, column range) pairs, so no two write one
                // element, and `out` outlives the parallel loop.
                unsafe {
                    crate::ops::matmul::cpu::sgemm_serial(
                        og,
                        k,
                        cols,
                        w[g * og * k..].as_ptr(),
                        k as isize,
                        1,
                        b,
                        rsb,
                        1,
                        0.0,
                        c.add(g * og * p + q0),
                        p as isize,
                        1,
                    );
                }
                if let Some(e) = epi {
                    for o in g * og..(g + 1) * og {
                        // SAFETY: columns q0..q0+cols of row o of `out`, this task's own
                        // (see above).
                        let row = unsafe {
                            std::slice::from_raw_parts_mut(c.add(o * p + q0).cast::<u32>(), cols)
                        };
                        e.apply(o * p + q0, row);
                    }
                }
            });
    }

    /// Depthwise (one input and one output channel per group, any batch): each plane is
    /// copied into a zero-bordered scratch plane, so every tap of every output is an
    /// in-bounds read and each output row is a few vectorizable passes straight into
    /// `out` (an im2col and sgemm of one output row would spend its time packing).
    fn depthwise(&self, x: &[f32], w: &[f32], out: &mut [f32], epi: Option<&RangeProgram<'_>>) {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [_, _, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        if p == 0 {
            return;
        }
        let phases = Phases::new([h, wd], [oh, ow], &self.window);
        let geo = Depthwise {
            hw: [h, wd],
            out: [oh, ow],
            kernel: [kh, kw],
            window: self.window,
        };
        let per_task = (TASK_WORDS / (p * kh * kw).max(1)).max(1);
        let run = |(t, dst): (usize, &mut [f32])| {
            let mut scratch = Scratch::default();
            for (i, d) in dst.chunks_mut(p).enumerate() {
                let nc = t * per_task + i;
                let c = nc % c_all;
                let xs = &x[nc * h * wd..(nc + 1) * h * wd];
                let wc = &w[c * kh * kw..(c + 1) * kh * kw];
                match &phases {
                    Some(ph) => ph.depthwise(xs, wc, &mut scratch, d),
                    None => geo.plane(xs, wc, d),
                }
                if let Some(e) = epi {
                    e.apply(nc * p, bytemuck::cast_slice_mut(d));
                }
            }
        };
        if out.len() * kh * kw >= DEPTHWISE_PARALLEL {
            out.par_chunks_mut(per_task * p).enumerate().for_each(run);
        } else {
            out.chunks_mut(per_task * p).enumerate().for_each(run);
        }
    }

    /// One image, one group, few output pixels and many output channels (a batch-1
    /// network's late layers): the image's im2col once (rows in parallel), then blocks of
    /// output channels in parallel, each one product on one thread into its rows of `out`.
    fn row_tiles(&self, x: &[f32], w: &[f32], out: &mut [f32], epi: Option<&RangeProgram<'_>>) {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [o_all, cg, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        let k = cg * kh * kw;
        let threads = rayon::current_num_threads().max(1);
        let in_place = kh == 1 && kw == 1 && oh == h && ow == wd;
        let mut col = Vec::new();
        if !in_place {
            // Kept for the next call on this thread: a fresh buffer this size is mapped,
            // zeroed and faulted in page by page on every call. `gather` writes every
            // element, so only growth is initialised.
            col = ROW_COL.with_borrow_mut(std::mem::take);
            col.resize(k * p, 0.0);
            col.par_chunks_mut(p).enumerate().for_each(|(row, dst)| {
                let (c, r) = (row / (kh * kw), row % (kh * kw));
                self.gather(x, (c_all, h, wd), c, (r / kw, r % kw), (0, 0), dst);
            });
        }
        let b = if in_place { x } else { &col };
        let rows = o_all.div_ceil(threads).next_multiple_of(ROW_TILE_MIN);
        out.par_chunks_mut(rows * p)
            .enumerate()
            .for_each(|(t, dst)| {
                let o0 = t * rows;
                let m = dst.len() / p;
                // SAFETY: A is rows o0..o0+m of `w` ([o_all, k]); B is `b` ([k, p], the
                // image's planes or its im2col); C is `dst`, this task's own rows of `out`
                // ([m, p]). All in bounds and C aliases neither.
                unsafe {
                    crate::ops::matmul::cpu::sgemm_serial(
                        m,
                        k,
                        p,
                        w[o0 * k..].as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        p as isize,
                        1,
                        0.0,
                        dst.as_mut_ptr(),
                        p as isize,
                        1,
                    );
                }
                if let Some(e) = epi {
                    e.apply(o0 * p, bytemuck::cast_slice_mut(dst));
                }
            });
        if col.len() <= KEEP_COL {
            ROW_COL.with_borrow_mut(|c| *c = col);
        }
    }

    /// Images `n0..n0 + dst.len() / image` over input channels `c_lo..c_hi` of each group.
    fn block(
        &self,
        x: &[f32],
        w: &[f32],
        (c_lo, c_hi): (usize, usize),
        n0: usize,
        dst: &mut [f32],
    ) {
        let [o_all, _, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        let og = o_all / self.groups;
        let images = dst.len() / (o_all * p);
        let k = (c_hi - c_lo) * kh * kw;
        if k == 0 {
            dst.fill(0.0);
            return;
        }
        let cols_total = images * p;
        let piece = (COL_BUDGET / k.max(og)).clamp(1, cols_total);
        if images == 1 && self.groups > 1 {
            // One image of a grouped (or depthwise) convolution: the groups' outputs are
            // disjoint runs of channels, computed in parallel.
            dst.par_chunks_mut(og * p).enumerate().for_each(|(g, d)| {
                let mut col = vec![0f32; k * piece];
                let mut tmp = vec![0f32; og * piece];
                self.group(
                    x,
                    w,
                    (c_lo, c_hi),
                    (n0, 1),
                    g,
                    d,
                    g * og * p,
                    (&mut col, &mut tmp),
                );
            });
            return;
        }
        let mut col = vec![0f32; k * piece];
        let mut tmp = vec![0f32; og * piece];
        for g in 0..self.groups {
            self.group(
                x,
                w,
                (c_lo, c_hi),
                (n0, images),
                g,
                dst,
                0,
                (&mut col, &mut tmp),
            );
        }
    }

    /// Group `g`'s outputs for `images` images from `n0` over input channels `c_lo..c_hi`,
    /// written to `dst` (which starts at output word `dst_at` of the block); `col` and `tmp`
    /// are scratch.
    #[allow(clippy::too_many_arguments)]
    fn group(
        &self,
        x: &[f32],
        w: &[f32],
        (c_lo, c_hi): (usize, usize),
        (n0, images): (usize, usize),
        g: usize,
        dst: &mut [f32],
        dst_at: usize,
        (col, tmp): (&mut [f32], &mut [f32]),
    ) {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [o_all, cg, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        let og = o_all / self.groups;
        let k = (c_hi - c_lo) * kh * kw;
        let cols_total = images * p;
        if og == 1 && c_hi - c_lo == 1 && images == 1 {
            // Depthwise: one output plane is Σ over taps of weight × shifted input plane
            // (an sgemm of one row would spend its time packing).
            let plane_c = g * cg + c_lo;
            let start = g * p - dst_at;
            let out = &mut dst[start..start + p];
            out.fill(0.0);
            let mut shifted = vec![0f32; p];
            for ki in 0..kh {
                for kj in 0..kw {
                    let wt = w[((g * cg + c_lo) * kh + ki) * kw + kj];
                    self.gather(x, (c_all, h, wd), plane_c, (ki, kj), (n0, 0), &mut shifted);
                    for (o, &v) in out.iter_mut().zip(shifted.iter()) {
                        *o += wt * v;
                    }
                }
            }
            return;
        }
        let piece = (col.len() / k.max(1)).min(tmp.len() / og.max(1)).max(1);
        let mut q0 = 0;
        while q0 < cols_total {
            let q1 = (q0 + piece).min(cols_total);
            let cols = q1 - q0;
            self.im2col(
                x,
                g * cg + c_lo..g * cg + c_hi,
                (n0, q0),
                &mut col[..k * cols],
            );
            let a0 = (g * og * cg + c_lo) * kh * kw;
            // SAFETY: A is read at `a0 + i * cg*kh*kw + j` for i < og, j < k: the weights
            // of outputs g*og..(g+1)*og and channels c_lo..c_hi, inside `w` (checked to
            // hold O*cg*kh*kw floats). B is `col` ([k, cols], row stride cols) and C is
            // `tmp` ([og, cols]); both are fresh vectors of at least that size, distinct
            // from each other and from A.
            unsafe {
                crate::ops::matmul::cpu::sgemm(
                    og,
                    k,
                    cols,
                    w[a0..].as_ptr(),
                    (cg * kh * kw) as isize,
                    1,
                    col.as_ptr(),
                    cols as isize,
                    1,
                    0.0,
                    tmp.as_mut_ptr(),
                    cols as isize,
                    1,
                );
            }
            for o in 0..og {
                let src = &tmp[o * cols..(o + 1) * cols];
                let mut q = q0;
                while q < q1 {
                    let (img, px) = (q / p, q % p);
                    let run = (p - px).min(q1 - q);
                    let at = (img * o_all + g * og + o) * p + px - dst_at;
                    dst[at..at + run].copy_from_slice(&src[q - q0..q - q0 + run]);
                    q += run;
                }
            }
            q0 = q1;
        }
    }

    /// The im2col of input channels `planes` for columns `q0..` of the block starting at
    /// image `n0`: row `(c, ki, kj)` of `col` (`col.len() / rows` columns each) holds what
    /// window offset `(ki, kj)` of channel `planes.start + c` reads, or zero.
    fn im2col(
        &self,
        x: &[f32],
        planes: std::ops::Range<usize>,
        (n0, q0): (usize, usize),
        col: &mut [f32],
    ) {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [_, _, kh, kw] = dims4(&self.w);
        let rows = planes.len() * kh * kw;
        let cols = col.len() / rows.max(1);
        if cols == 0 {
            return;
        }
        for (r, dst) in col.chunks_exact_mut(cols).enumerate() {
            let (c, t) = (r / (kh * kw), r % (kh * kw));
            let plane = planes.start + c;
            self.gather(x, (c_all, h, wd), plane, (t / kw, t % kw), (n0, q0), dst);
        }
    }

    /// One im2col row: for columns `q0..q0 + dst.len()` of the block starting at image `n0`,
    /// the element of channel `plane_c` that window offset `(ki, kj)` reads, or zero.
    pub(super) fn gather(
        &self,
        x: &[f32],
        (c_all, h, wd): (usize, usize, usize),
        plane_c: usize,
        (ki, kj): (usize, usize),
        (n0, q0): (usize, usize),
        dst: &mut [f32],
    ) {
        let [_, _, oh, ow] = dims4(&self.out);
        let p = oh * ow;
        let (s, d, pad) = (
            self.window.stride[1],
            self.window.dilation[1],
            self.window.padding[1],
        );
        let mut q = q0;
        let mut at = 0;
        while at < dst.len() {
            let (img, px) = (q / p, q % p);
            let (oy, ox0) = (px / ow, px % ow);
            // The rest of this output row, within the piece.
            let run = (ow - ox0).min(dst.len() - at);
            let out_row = &mut dst[at..at + run];
            match self.window.at(0, oy, ki, h) {
                None => out_row.fill(0.0),
                Some(iy) => {
                    let base = (((n0 + img) * c_all + plane_c) * h + iy) * wd;
                    let src = &x[base..base + wd];
                    let r = tap_range(ox0, run, (s, kj * d, pad), wd);
                    out_row[..r.start].fill(0.0);
                    out_row[r.end..].fill(0.0);
                    let first = ((ox0 + r.start) * s + kj * d).saturating_sub(pad);
                    if r.is_empty() {
                        // Every tap of the run is padding.
                    } else if s == 1 {
                        out_row[r.clone()].copy_from_slice(&src[first..first + r.len()]);
                    } else {
                        for (v, &x) in out_row[r].iter_mut().zip(src[first..].iter().step_by(s)) {
                            *v = x;
                        }
                    }
                }
            }
            at += run;
            q += run;
        }
    }
}

/// One depthwise plane's geometry where [`Phases`] does not apply (unequal strides or
/// dilation; see [`Conv2dKernel::depthwise`]).
struct Depthwise {
    hw: [usize; 2],
    out: [usize; 2],
    kernel: [usize; 2],
    window: Window,
}

impl Depthwise {
    /// Output plane `dst` from input plane `xs` and its `kh*kw` weights `wc`: one pass per
    /// tap and output row over a zero-bordered copy of the plane.
    fn plane(&self, xs: &[f32], wc: &[f32], dst: &mut [f32]) {
        let ([h, wd], [_, ow], [kh, kw]) = (self.hw, self.out, self.kernel);
        let Window {
            stride: [sy, sx],
            dilation: [dy, dx],
            padding: [py, px],
            ..
        } = self.window;
        let pw = wd + 2 * px;
        let rows =
            (h + 2 * py).max((dst.len() / ow.max(1)).saturating_sub(1) * sy + (kh - 1) * dy + 1);
        let mut padded = vec![0.0; rows * pw + (ow.max(1) - 1) * sx + (kw - 1) * dx + 1];
        for y in 0..h {
            padded[(y + py) * pw + px..][..wd].copy_from_slice(&xs[y * wd..][..wd]);
        }
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            row.fill(0.0);
            for ki in 0..kh {
                for kj in 0..kw {
                    let wt = wc[ki * kw + kj];
                    let src = &padded[(oy * sy + ki * dy) * pw + kj * dx..];
                    for (o, &v) in row.iter_mut().zip(src.iter().step_by(sx)) {
                        *o += wt * v;
                    }
                }
            }
        }
    }
}

/// The outputs `ox0 + i` (`i` in the returned range, within `0..run`) whose window tap
/// `ix = ox·s + off - pad` (`(s, off, pad)`) lies inside `0..wd`: a run of im2col columns
/// is zero outside it and a strided (contiguous at stride 1) read of the row inside it.
pub(super) fn tap_range(
    ox0: usize,
    run: usize,
    (s, off, pad): (usize, usize, usize),
    wd: usize,
) -> std::ops::Range<usize> {
    // The smallest output whose tap reaches `bound`.
    let first = |bound: usize| bound.saturating_sub(off).div_ceil(s.max(1));
    let lo = first(pad).clamp(ox0, ox0 + run);
    let hi = first(wd + pad).clamp(lo, ox0 + run);
    lo - ox0..hi - ox0
}

impl PoolKernel {
    /// A max pool by rows on the portable path (what a CPU without AVX-512 runs), when the
    /// fast kernel takes rows for this window: `None` otherwise. For tests.
    #[doc(hidden)]
    pub fn run_max_portable(&self, x: &[u32]) -> Option<Vec<u32>> {
        let [n, c, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.out);
        Phases::new([h, wd], [oh, ow], &self.window)
            .filter(|ph| ph.windows_fit() && oh * ow >= 8 && self.kind == PoolKind::Max)?;
        let x: &[f32] = bytemuck::try_cast_slice(x.get(..self.x.numel())?).ok()?;
        let mut out = vec![0f32; n * c * oh * ow];
        let mut sc = RowScratch::default();
        for (i, d) in out.chunks_mut(oh * ow).enumerate() {
            let xs = &x[i * h * wd..(i + 1) * h * wd];
            max_plane(xs, [h, wd], [oh, ow], &self.window, &mut sc, d, false);
        }
        Some(out.into_iter().map(f32::to_bits).collect())
    }

    /// Pooling into `out`, one output plane per task, each window folded in the WGSL
    /// kernel's order (so results match the reference bit for bit).
    pub fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        let own = own_copy(inputs, out);
        let ins = input_words(inputs, &own);
        let x = ins.first().copied().unwrap_or_default();
        let [_, _, h, wd] = dims4(&self.x);
        if x.len() < self.x.numel() || out.len() != self.out.numel() {
            return Err(crate::Error::Internal(format!(
                "{}: an input of {} words, output of {}",
                self.describe(),
                x.len(),
                out.len()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let x: &[f32] = bytemuck::cast_slice(x);
        self.run_planes_into(&|nc| &x[nc * h * wd..(nc + 1) * h * wd], out);
        Ok(())
    }

    /// The pool of input planes `plane_of(i)` (each `[h, w]`, `i` over the output's planes)
    /// into `out`: a pooled concatenation reads its inputs' planes where they lie.
    pub(crate) fn run_planes_into<'a>(
        &self,
        plane_of: &(dyn Fn(usize) -> &'a [f32] + Sync),
        out: &mut [u32],
    ) {
        let [_, _, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.out);
        // Pools have no dilation: each window's in-bounds cells are a rectangle, found once
        // per output row and column rather than per tap.
        let win = &self.window;
        let span = |o: usize, k: usize, n: usize| {
            let lo = (o * win.stride[k]).saturating_sub(win.padding[k]);
            let hi = (o * win.stride[k] + win.kernel[k]).saturating_sub(win.padding[k]);
            lo..hi.min(n)
        };
        let rows: Vec<_> = (0..oh).map(|o| span(o, 0, h)).collect();
        let cols: Vec<_> = (0..ow).map(|o| span(o, 1, wd)).collect();
        let kind = self.kind;
        // Max pools (padded or not) and unpadded average pools whose windows fit: phase
        // planes (vectorized, the same bits); others (and global pools, faster on their
        // own) fold each window in turn.
        let phases = Phases::new([h, wd], [oh, ow], win).filter(|ph| {
            ph.windows_fit() && (kind == PoolKind::Max || win.padding == [0, 0]) && oh * ow >= 8
        });
        let plane = |(nc, dst): (usize, &mut [u32]), sc: &mut (Scratch, RowScratch)| {
            let xs = plane_of(nc);
            if phases.is_some() && kind == PoolKind::Max {
                let dst = bytemuck::cast_slice_mut(dst);
                return max_plane(xs, [h, wd], [oh, ow], win, &mut sc.1, dst, true);
            }
            if let Some(ph) = &phases {
                return ph.avg_pool(xs, &mut sc.0, bytemuck::cast_slice_mut(dst));
            }
            for (oy, ry) in rows.iter().enumerate() {
                for (ox, rx) in cols.iter().enumerate() {
                    // Plain index loops: an iterator chain here cost ~130 instructions
                    // per 2x2 window (measured with callgrind).
                    let mut acc = xs[ry.start * wd + rx.start];
                    let mut skip = true;
                    for y in ry.clone() {
                        for &v in &xs[y * wd + rx.start..y * wd + rx.end] {
                            if skip {
                                skip = false;
                                continue;
                            }
                            acc = match kind {
                                // binary_cpu's maximum: NaN wins, the second operand on
                                // ties; the comparison a select, not a branch.
                                PoolKind::Max => {
                                    let m = if acc > v { acc } else { v };
                                    if acc.is_nan() | v.is_nan() {
                                        f32::NAN
                                    } else {
                                        m
                                    }
                                }
                                PoolKind::Avg => acc + v,
                            };
                        }
                    }
                    let v = match kind {
                        PoolKind::Max => acc,
                        PoolKind::Avg => acc / (ry.len() * rx.len()) as f32,
                    };
                    dst[oy * ow + ox] = v.to_bits();
                }
            }
        };
        let plane_len = (oh * ow).max(1);
        // Tasks of whole planes, each reading at least TASK_WORDS input words: a task per
        // small plane would cost more in rayon's bookkeeping than its work.
        let per_task = plane_len * (TASK_WORDS / (h * wd).max(1)).max(1);
        if self.x.numel() >= 2 * TASK_WORDS {
            out.par_chunks_mut(per_task)
                .enumerate()
                .for_each(|(t, dst)| {
                    let first = t * (per_task / plane_len);
                    let mut sc = Default::default();
                    for (i, p) in dst.chunks_mut(plane_len).enumerate() {
                        plane((first + i, p), &mut sc);
                    }
                });
        } else {
            let mut sc = Default::default();
            for (i, p) in out.chunks_mut(plane_len).enumerate() {
                plane((i, p), &mut sc);
            }
        }
    }
}
