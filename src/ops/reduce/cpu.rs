//! The reduction kernels on the CPU.
//!
//! Every output folds its elements in the WGSL kernel's order for its strategy (lane
//! accumulators, blocks of [`SUM_BLOCK`], the tree), so cpu:0 and the GPUs agree bit for bit;
//! the scalar reference at the end of this file (one element at a time through `binary_cpu`)
//! is what the tests compare the fast kernel against. The fast kernel changes how that order
//! is executed, not the order: outputs run in parallel on rayon's pool (a long reduction is
//! already split into chunk outputs by [`ReduceKernel::passes`], so one huge sum is parallel
//! too); the op and dtype are chosen once per kernel, so each loop is monomorphised for one
//! combining function; lane accumulators are SIMD lanes, with four rows folded side by side
//! so that independent chains hide the add's latency; and when the innermost axis is kept, a
//! tile of neighbouring outputs folds at once, reading contiguous memory.

use super::reference::{one_word, truthy};
use super::*;
use crate::ops::elementwise::RangeProgram;
use crate::ops::family::CpuIn;
use bytemuck::Pod;
use rayon::prelude::*;

mod fold;
use fold::{tree, vec4};

/// Below this many input elements a kernel runs on the calling thread: handing work to the
/// pool costs more than it saves.
const PAR_MIN_WORK: usize = 1 << 16;
/// Input elements one parallel task folds, at least.
const TASK_WORK: usize = 1 << 14;
/// The shortest row a fused prologue is evaluated for on its own while it is folded: below
/// it, evaluating the whole input in one pass first costs less than a call per row.
const ROW_MIN: usize = 1024;
/// Outputs a column tile folds side by side: whole rows of up to 16 KiB, read sequentially
/// (narrower tiles jump a page per reduced step and ran 2-3x slower on 4096² columns).
const TILE: usize = 4096;

impl ReduceKernel {
    /// `inputs`: the reduced tensor (or the prologue's inputs), then the epilogue's extras.
    /// An error when the inputs do not match the kernel's shapes.
    pub fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let ins: Vec<CpuIn<'_>> = inputs.iter().map(|w| CpuIn::Words(w)).collect();
        let mut out = vec![0; self.out_shape.numel()];
        self.run_cpu_into(&ins, &mut out)?;
        Ok(out)
    }

    /// The fast kernel, writing into `out` (see [`KernelDef::run_cpu_into`]).
    pub fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        let internal = |m: String| crate::Error::Internal(format!("{}: {m}", self.describe()));
        // An input the output is written over (only an epilogue extra can be) is read from a
        // copy, since the fold overwrites the slot before the epilogue reads it.
        let own = crate::ops::family::own_copy(inputs, out);
        let words = crate::ops::family::input_words(inputs, &own);
        let n = self.sources();
        if words.len() < n || out.len() != self.out_shape.numel() {
            return Err(internal(format!(
                "{} inputs and {} output words",
                words.len(),
                out.len()
            )));
        }
        let partials = words.get(n).copied();
        if let Some(program) = self.prologue_program(&words[..n])? {
            // Each row the fold reads is evaluated into a buffer while it is folded: the
            // prologue's whole output is never stored (a quantizer's min and max each
            // re-read their chain, and materializing it cost an allocation and a pass).
            self.reduce_into(&[], Some(&program), partials, out)?;
        } else {
            let src = self.source_cpu(&words[..n]);
            if src.len() < self.in_shape.numel() {
                return Err(internal(format!("{} input words", src.len())));
            }
            self.reduce_f16_or(&src, partials, out)?;
        }
        if let Some(e) = &self.epilogue {
            let res = e.apply_cpu(out, &words[n..], &self.out_shape, self.dtype);
            if res.len() != out.len() {
                return Err(internal(format!("the epilogue gave {} words", res.len())));
            }
            out.copy_from_slice(&res);
        }
        Ok(())
    }

    /// The prologue compiled to evaluate rows on their own, when the fold reads whole
    /// contiguous rows ([`ReduceKernel::fast_path`]) of a 32-bit dtype, each at least
    /// [`ROW_MIN`] long.
    fn prologue_program<'a>(
        &self,
        sources: &[&'a [u32]],
    ) -> crate::Result<Option<RangeProgram<'a>>> {
        let Some(p) = &self.prologue else {
            return Ok(None);
        };
        if self.dtype == DType::F16 || self.fast_path().is_none() || self.chunking().0 < ROW_MIN {
            return Ok(None);
        }
        let k = ElementwiseKernel {
            expr: p.expr.clone(),
            inputs: p.inputs.clone(),
            out_shape: self.in_shape.clone(),
            out_dtype: self.dtype,
            views: Vec::new(),
        };
        let ins: Vec<CpuIn<'a>> = sources.iter().map(|w| CpuIn::Words(w)).collect();
        RangeProgram::new(&k, &ins)
    }

    /// The fold of `src` into `out`, through f32 for f16.
    fn reduce_f16_or(
        &self,
        src: &[u32],
        partials: Option<&[u32]>,
        out: &mut [u32],
    ) -> crate::Result<()> {
        if self.dtype == DType::F16 {
            // f16 accumulates in f32 (as the WGSL kernel does) and rounds once at the end.
            let wide = ReduceKernel {
                dtype: DType::F32,
                epilogue: None,
                prologue: None,
                ..self.clone()
            };
            let input: Vec<u32> = src.par_iter().map(|&w| f16_to_f32_word(w)).collect();
            wide.reduce_into(&input, None, partials, out)?;
            if self.op.out_dtype(DType::F16) == DType::F16 {
                out.iter_mut().for_each(|w| *w = f32_to_f16_word(*w));
            }
            Ok(())
        } else {
            self.reduce_into(src, None, partials, out)
        }
    }

    /// The reduction of `input` (f32, i32, u32 or bool words) into `out`, before the
    /// epilogue; with `rows`, the input's rows are evaluated by it instead (only for a
    /// [`ReduceKernel::fast_path`] fold, `input` then empty).
    fn reduce_into(
        &self,
        input: &[u32],
        rows: Option<&RangeProgram<'_>>,
        partials: Option<&[u32]>,
        out: &mut [u32],
    ) -> crate::Result<()> {
        let par = self.in_shape.numel() >= PAR_MIN_WORK;
        match self.op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let better = if self.op == ReduceOp::ArgMax {
                    BinaryOp::Greater
                } else {
                    BinaryOp::Less
                };
                match (self.dtype, better) {
                    (DType::F32, BinaryOp::Greater) => {
                        self.arg_into(input, partials, out, par, |v: f32, b: f32| {
                            !b.is_nan() && (v.is_nan() || v > b)
                        })
                    }
                    (DType::F32, _) => self.arg_into(input, partials, out, par, |v: f32, b| {
                        !b.is_nan() && (v.is_nan() || v < b)
                    }),
                    (DType::I32, BinaryOp::Greater) => {
                        self.arg_into(input, partials, out, par, |v: i32, b| v > b)
                    }
                    (DType::I32, _) => self.arg_into(input, partials, out, par, |v: i32, b| v < b),
                    (_, BinaryOp::Greater) => {
                        self.arg_into(input, partials, out, par, |v: u32, b| v > b)
                    }
                    _ => self.arg_into(input, partials, out, par, |v: u32, b| v < b),
                }
            }
            ReduceOp::All | ReduceOp::Any => {
                let d = self.dtype;
                let all = self.op == ReduceOp::All;
                let (kd, ks, rd, rs) = self.split();
                let (chunk, nch) = self.chunking();
                let r = self.reduced_count();
                for_chunks(out, self.grain(chunk), par, |first, part| {
                    for (k, o) in part.iter_mut().enumerate() {
                        let oc = first + k;
                        let (lo, hi) = chunk_range(oc % nch, chunk, nch, r);
                        let base = offset(oc / nch, &kd, &ks);
                        let mut vals = Walk::new(&rd, &rs, lo).take(hi - lo);
                        *o = if all {
                            vals.all(|off| truthy(d, input[base + off]))
                        } else {
                            vals.any(|off| truthy(d, input[base + off]))
                        } as u32;
                    }
                });
                Ok(())
            }
            ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min => {
                let job = FoldJob {
                    k: self,
                    input,
                    rows,
                    out: &mut *out,
                    par,
                };
                match (self.dtype, self.combine_op()) {
                    (DType::F32, BinaryOp::Add) => job.run(|a: f32, b: f32| a + b),
                    (DType::F32, BinaryOp::Mul) => job.run(|a: f32, b: f32| a * b),
                    // binary_cpu's rules: NaN wins, and the second operand on ties.
                    // Written as selects (no branches) so the lanes vectorize.
                    (DType::F32, BinaryOp::Maximum) => job.run(|a: f32, b: f32| {
                        let m = if a > b { a } else { b };
                        if a.is_nan() | b.is_nan() {
                            f32::NAN
                        } else {
                            m
                        }
                    }),
                    (DType::F32, _) => job.run(|a: f32, b: f32| {
                        let m = if a < b { a } else { b };
                        if a.is_nan() | b.is_nan() {
                            f32::NAN
                        } else {
                            m
                        }
                    }),
                    (DType::I32, BinaryOp::Add) => job.run(|a: i32, b: i32| a.wrapping_add(b)),
                    (DType::I32, BinaryOp::Mul) => job.run(|a: i32, b: i32| a.wrapping_mul(b)),
                    (DType::I32, BinaryOp::Maximum) => job.run(|a: i32, b: i32| a.max(b)),
                    (DType::I32, _) => job.run(|a: i32, b: i32| a.min(b)),
                    (_, BinaryOp::Add) => job.run(|a: u32, b: u32| a.wrapping_add(b)),
                    (_, BinaryOp::Mul) => job.run(|a: u32, b: u32| a.wrapping_mul(b)),
                    (_, BinaryOp::Maximum) => job.run(|a: u32, b: u32| a.max(b)),
                    _ => job.run(|a: u32, b: u32| a.min(b)),
                }?;
                if self.op == ReduceOp::Mean {
                    let count = self.mean_count();
                    match self.dtype {
                        DType::F32 => {
                            let out: &mut [f32] = bytemuck::cast_slice_mut(out);
                            out.iter_mut().for_each(|v| *v /= count as f32);
                        }
                        _ => out.iter_mut().for_each(|w| *w = self.finish_cpu(*w)),
                    }
                }
                Ok(())
            }
        }
    }

    /// Outputs per parallel task when each folds `per_output` elements.
    fn grain(&self, per_output: usize) -> usize {
        (TASK_WORK / per_output.max(1)).max(1)
    }

    /// argmax/argmin: per output, the first extreme's index (`better(v, best)` says whether
    /// `v` replaces `best`), or the winner among the partial pass's chunk winners.
    fn arg_into<T: Pod + Send + Sync>(
        &self,
        input: &[u32],
        partials: Option<&[u32]>,
        out: &mut [u32],
        par: bool,
        better: impl Fn(T, T) -> bool + Copy + Send + Sync,
    ) -> crate::Result<()> {
        let x: &[T] = bytemuck::cast_slice(input);
        let (kd, ks, rd, rs) = self.split();
        let first_best = |vals: &mut dyn Iterator<Item = T>| {
            let Some(mut best) = vals.next() else {
                return 0;
            };
            let mut at = 0;
            for (i, v) in vals.enumerate() {
                if better(v, best) {
                    best = v;
                    at = i as u32 + 1;
                }
            }
            at
        };
        if let Pass::ArgOfPartials { chunks } = self.pass {
            let parts = partials.unwrap_or(&[]);
            let at = |i: u32| x.get(offset(i as usize, &rd, &rs));
            for_chunks(out, self.grain(chunks), par, |first, part| {
                for (k, o) in part.iter_mut().enumerate() {
                    let oo = first + k;
                    let base = offset(oo, &kd, &ks);
                    let idx = |c: usize| parts.get(oo * chunks + c).copied().unwrap_or(0);
                    let mut vals = (0..chunks).map(|c| {
                        at(idx(c))
                            .and_then(|_| x.get(base + offset(idx(c) as usize, &rd, &rs)))
                            .copied()
                            .unwrap_or_else(T::zeroed)
                    });
                    *o = idx(first_best(&mut vals) as usize);
                }
            });
            return Ok(());
        }
        let (chunk, nch) = self.chunking();
        let r = self.reduced_count();
        for_chunks(out, self.grain(chunk), par, |first, part| {
            for (k, o) in part.iter_mut().enumerate() {
                let oc = first + k;
                let (lo, hi) = chunk_range(oc % nch, chunk, nch, r);
                let base = offset(oc / nch, &kd, &ks);
                let mut vals = Walk::new(&rd, &rs, lo)
                    .take(hi - lo)
                    .map(|off| x[base + off]);
                *o = first_best(&mut vals) + lo as u32;
            }
        });
        Ok(())
    }
}

/// Runs `f(first index, chunk)` over `out` in chunks of `size`, on the pool when `par`.
fn for_chunks<T: Send>(
    out: &mut [T],
    size: usize,
    par: bool,
    f: impl Fn(usize, &mut [T]) + Send + Sync,
) {
    let size = size.max(1);
    if par {
        out.par_chunks_mut(size)
            .enumerate()
            .for_each(|(i, c)| f(i * size, c));
    } else {
        out.chunks_mut(size)
            .enumerate()
            .for_each(|(i, c)| f(i * size, c));
    }
}

/// The offsets of reduced elements `lo, lo + 1, …` (row-major over `dims` laid out with
/// `strides`), stepped like an odometer rather than divided out one by one.
struct Walk<'a> {
    dims: &'a [usize],
    strides: &'a [usize],
    coord: Vec<usize>,
    off: usize,
}

impl<'a> Walk<'a> {
    fn new(dims: &'a [usize], strides: &'a [usize], lo: usize) -> Self {
        let mut coord = vec![0; dims.len()];
        let (mut rem, mut off) = (lo, 0);
        for k in (0..dims.len()).rev() {
            // A zero-size axis has no elements to walk (the caller takes none).
            coord[k] = rem % dims[k].max(1);
            rem /= dims[k].max(1);
            off += coord[k] * strides[k];
        }
        Walk {
            dims,
            strides,
            off,
            coord,
        }
    }
}

impl Iterator for Walk<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let now = self.off;
        for k in (0..self.dims.len()).rev() {
            self.coord[k] += 1;
            self.off += self.strides[k];
            if self.coord[k] < self.dims[k] {
                return Some(now);
            }
            self.off -= self.coord[k] * self.strides[k];
            self.coord[k] = 0;
        }
        Some(now)
    }
}

/// One value fold (sum, mean's sum, prod, max, min) of a kernel over its input, writing each
/// output's accumulator (before mean's division) into `out`.
struct FoldJob<'a> {
    k: &'a ReduceKernel,
    input: &'a [u32],
    /// Evaluates the input's rows (a fused prologue) where `input` is not stored.
    rows: Option<&'a RangeProgram<'a>>,
    out: &'a mut [u32],
    par: bool,
}

/// How a fold starts: sums from the identity in blocks, prod from one, max/min from the
/// first element.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    SumBlocks,
    One,
    First,
}

impl FoldJob<'_> {
    fn run<T, F>(self, c: F) -> crate::Result<()>
    where
        T: Pod + Send + Sync,
        F: Fn(T, T) -> T + Copy + Send + Sync,
    {
        let k = self.k;
        let x: &[T] = bytemuck::cast_slice(self.input);
        let out: &mut [T] = bytemuck::cast_slice_mut(self.out);
        let id: T = bytemuck::cast(sum_identity(k.dtype));
        let start = match k.op {
            ReduceOp::Sum | ReduceOp::Mean => Start::SumBlocks,
            ReduceOp::Prod => Start::One,
            _ => Start::First,
        };
        // What sums and products start from (max and min start from their first element).
        let seed: T = match start {
            Start::One => bytemuck::cast(one_word(k.dtype)),
            _ => id,
        };
        let (chunk, nch) = k.chunking();
        let r = k.reduced_count();
        let grain = k.grain(chunk);
        if let Some((strategy, _)) = k.fast_path() {
            let short =
                || crate::Error::Internal(format!("{}: chunk shorter than a tree", k.describe()));
            if strategy == ReduceStrategy::Tree && chunk < TREE_WG {
                return Err(short());
            }
            if strategy == ReduceStrategy::RowsVec4 && (chunk < 4 || !chunk.is_multiple_of(4)) {
                return Err(short());
            }
            if let Some(program) = self.rows {
                // One row at a time into this thread's buffer, folded as below (a row's
                // fold does not depend on the rows beside it).
                thread_local! {
                    static ROW: std::cell::RefCell<Vec<u32>> = const {
                        std::cell::RefCell::new(Vec::new())
                    };
                }
                for_chunks(out, grain, self.par, |first, part| {
                    ROW.with_borrow_mut(|buf| {
                        for (i, o) in part.iter_mut().enumerate() {
                            let oc = first + i;
                            let (lo, hi) = chunk_range(oc % nch, chunk, nch, r);
                            buf.resize(hi - lo, 0);
                            program.apply(oc / nch * r + lo, buf);
                            let row: &[T] = bytemuck::cast_slice(buf);
                            *o = match strategy {
                                ReduceStrategy::Tree => tree(row, c),
                                _ => vec4([row], start, id, c)[0],
                            };
                        }
                    })
                });
                return Ok(());
            }
            let row = |oc: usize| {
                let (lo, hi) = chunk_range(oc % nch, chunk, nch, r);
                let o = oc / nch;
                &x[o * r + lo..o * r + hi]
            };
            for_chunks(out, grain, self.par, |first, part| match strategy {
                ReduceStrategy::Tree => {
                    for (i, o) in part.iter_mut().enumerate() {
                        *o = tree(row(first + i), c);
                    }
                }
                _ => {
                    let mut i = 0;
                    while i + 4 <= part.len() {
                        let rows: [&[T]; 4] = std::array::from_fn(|j| row(first + i + j));
                        if rows.iter().all(|w| w.len() == rows[0].len()) {
                            let v = vec4(rows, start, id, c);
                            part[i..i + 4].copy_from_slice(&v);
                            i += 4;
                        } else {
                            part[i] = vec4([rows[0]], start, id, c)[0];
                            i += 1;
                        }
                    }
                    for (j, o) in part[i..].iter_mut().enumerate() {
                        *o = vec4([row(first + i + j)], start, id, c)[0];
                    }
                }
            });
            return Ok(());
        }
        let (kd, ks, rd, rs) = k.split();
        let rank = k.in_shape.rank();
        let amax = k.axes.last().copied().unwrap_or(rank);
        let inner: usize = k.in_shape.dims()[(amax + 1).min(rank)..].iter().product();
        if amax + 1 < rank && inner > 1 {
            // The innermost axes are kept: outputs `j` of one outer position read
            // `base + off + j`, so a tile of them folds with contiguous loads.
            let outer_axes = kd.len() - (rank - amax - 1);
            let (od, os) = (&kd[..outer_axes], &ks[..outer_axes]);
            // Outputs `j0..j0 + dst.len()` of outer position `outer`, over chunk `c_at`.
            let columns = |outer: usize, c_at: usize, j0: usize, dst: &mut [T]| {
                let (lo, hi) = chunk_range(c_at, chunk, nch, r);
                let base = offset(outer, od, os) + j0;
                for (t, tile) in dst.chunks_mut(TILE).enumerate() {
                    let walk = Walk::new(&rd, &rs, lo).take(hi - lo);
                    column_tile(x, base + t * TILE, walk, tile, start, seed, c);
                }
            };
            let par = self.par;
            if nch == 1 {
                let tiles = TILE * grain.div_ceil(TILE);
                for_chunks(out, inner, par, |first, row| {
                    for_chunks(row, tiles, par, |j0, dst| {
                        columns(first / inner, 0, j0, dst)
                    });
                });
            } else {
                // Chunk outputs interleave (`[kept…, chunks]`): fold each (outer, chunk) row
                // of outputs apart, then scatter.
                let unit = |u: usize| {
                    let mut v = vec![id; inner];
                    columns(u / nch, u % nch, 0, &mut v);
                    v
                };
                let units = out.len() / inner;
                let rows: Vec<Vec<T>> = if par {
                    (0..units).into_par_iter().map(unit).collect()
                } else {
                    (0..units).map(unit).collect()
                };
                for (u, v) in rows.iter().enumerate() {
                    let (outer, c_at) = (u / nch, u % nch);
                    for (j, &val) in v.iter().enumerate() {
                        out[(outer * inner + j) * nch + c_at] = val;
                    }
                }
            }
            return Ok(());
        }
        // Reduced elements contiguous (trailing axes): rows are slices, folded ROWS at a
        // time in lockstep. Each row keeps its own order (the same bits as one at a time);
        // the independent chains hide the add latency a lone row's fold waits on.
        let contiguous =
            rs.last().is_none_or(|&s| s == 1) && (1..rd.len()).all(|k| rs[k - 1] == rs[k] * rd[k]);
        if contiguous {
            const ROWS: usize = 8;
            let row = |oc: usize| {
                let (lo, hi) = chunk_range(oc % nch, chunk, nch, r);
                let base = offset(oc / nch, &kd, &ks);
                &x[base + lo..base + hi]
            };
            for_chunks(
                out,
                grain.next_multiple_of(ROWS),
                self.par,
                |first, part| {
                    let mut i = 0;
                    while i < part.len() {
                        let n = ROWS.min(part.len() - i);
                        let rows: [&[T]; ROWS] =
                            std::array::from_fn(|j| row(first + i + j.min(n - 1)));
                        if rows.iter().all(|w| w.len() == rows[0].len()) {
                            let v = lockstep(rows, start, id, seed, c);
                            part[i..i + n].copy_from_slice(&v[..n]);
                        } else {
                            for j in 0..n {
                                part[i + j] = lockstep([rows[j]], start, id, seed, c)[0];
                            }
                        }
                        i += n;
                    }
                },
            );
            return Ok(());
        }
        // One output at a time (the reduced axes are not all trailing, or rows are short).
        for_chunks(out, grain, self.par, |first, part| {
            for (i, o) in part.iter_mut().enumerate() {
                let oc = first + i;
                let (lo, hi) = chunk_range(oc % nch, chunk, nch, r);
                let base = offset(oc / nch, &kd, &ks);
                let mut vals = Walk::new(&rd, &rs, lo)
                    .take(hi - lo)
                    .map(|off| x[base + off]);
                *o = match start {
                    Start::SumBlocks => {
                        let mut acc = id;
                        let mut left = hi - lo;
                        while left > 0 {
                            let n = left.min(SUM_BLOCK);
                            let s = vals.by_ref().take(n).fold(id, c);
                            acc = c(acc, s);
                            left -= n;
                        }
                        acc
                    }
                    Start::One => vals.fold(seed, c),
                    Start::First => match vals.next() {
                        Some(v) => vals.fold(v, c),
                        None => T::zeroed(),
                    },
                };
            }
        });
        Ok(())
    }
}

/// `N` rows of one length folded side by side, each in the order one output at a time
/// folds it: sums in [`SUM_BLOCK`] blocks from the identity, products from `seed`, max and
/// min from the first element (an empty row gives zero).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `t` indexes all N rows in one step: that is the point
fn lockstep<T: Pod, F: Fn(T, T) -> T + Copy, const N: usize>(
    rows: [&[T]; N],
    start: Start,
    id: T,
    seed: T,
    c: F,
) -> [T; N] {
    let len = rows[0].len();
    match start {
        Start::SumBlocks => {
            let mut acc = [id; N];
            let mut at = 0;
            while at < len {
                let n = (len - at).min(SUM_BLOCK);
                let mut s = [id; N];
                for t in at..at + n {
                    for j in 0..N {
                        s[j] = c(s[j], rows[j][t]);
                    }
                }
                for j in 0..N {
                    acc[j] = c(acc[j], s[j]);
                }
                at += n;
            }
            acc
        }
        Start::One | Start::First => {
            if len == 0 {
                return [if start == Start::One {
                    seed
                } else {
                    T::zeroed()
                }; N];
            }
            let (mut acc, from) = match start {
                Start::One => ([seed; N], 0),
                _ => (std::array::from_fn(|j| rows[j][0]), 1),
            };
            for t in from..len {
                for j in 0..N {
                    acc[j] = c(acc[j], rows[j][t]);
                }
            }
            acc
        }
    }
}

/// A tile of neighbouring outputs (`dst.len()` of them, at most [`TILE`]) whose reduced
/// elements lie at `x[base + off + j]` for output `j` and each offset `off` of `offs`, each
/// output folded in its own reduced order: the same order as one output at a time.
fn column_tile<T: Pod, F: Fn(T, T) -> T + Copy>(
    x: &[T],
    base: usize,
    mut offs: impl Iterator<Item = usize>,
    dst: &mut [T],
    start: Start,
    seed: T,
    c: F,
) {
    let w = dst.len();
    let fold = |dst: &mut [T], off: usize| {
        for (a, &v) in dst.iter_mut().zip(&x[base + off..base + off + w]) {
            *a = c(*a, v);
        }
    };
    match start {
        Start::SumBlocks => {
            dst.fill(seed);
            let mut blk = [seed; TILE];
            let blk = &mut blk[..w];
            let mut n = 0;
            for off in offs {
                fold(blk, off);
                n += 1;
                if n == SUM_BLOCK {
                    for (a, b) in dst.iter_mut().zip(blk.iter_mut()) {
                        *a = c(*a, *b);
                        *b = seed;
                    }
                    n = 0;
                }
            }
            if n > 0 {
                for (a, &b) in dst.iter_mut().zip(blk.iter()) {
                    *a = c(*a, b);
                }
            }
        }
        Start::One => {
            dst.fill(seed);
            offs.for_each(|off| fold(dst, off));
        }
        Start::First => match offs.next() {
            None => dst.fill(T::zeroed()),
            Some(off) => {
                dst.copy_from_slice(&x[base + off..base + off + w]);
                offs.for_each(|off| fold(dst, off));
            }
        },
    }
}
