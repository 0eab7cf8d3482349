//! cpu:0's direct convolution for layers with few taps per output (`Cin·kh·kw`, a
//! network's first layer: 27 for a 3x3 over RGB, 147 for ResNet's 7x7).
//!
//! im2col would write `Cin·kh·kw` floats per output pixel and the GEMM would pack them
//! again, for only as many multiply-adds per float as there are output channels. Here
//! each input plane is split once into phase planes ([`Phases`]), where every tap of 16
//! consecutive (flattened) outputs is one contiguous read; a tile's taps are copied into an
//! aligned panel, and an AVX2 micro-kernel multiplies 6 output channels by it: per tap,
//! two loads, six broadcast weights and twelve fused multiply-adds, with the 6x16 sums in
//! registers.

use super::cpu::SendPtr;
use super::planes::Phases;
use super::{dims4, Conv2dKernel};
use crate::ops::elementwise::RangeProgram;
use rayon::prelude::*;

/// Taps per output above which im2col + GEMM is used instead: measured on the 2-core
/// development machine with the GEMM's AVX2 kernels, the direct kernel matched or beat it up to 256 taps (ResNet's 7x7
/// over RGB: 147 vs 147 GFLOP/s; 1x1 over 16–256 channels: 10% faster) and lost beyond
/// (3x3 over 512 channels at 7x7: 53 vs 121), where it packs each tile's taps per task.
pub(super) const MAX_TAPS: usize = 256;
/// On a CPU with AVX-512 (where the GEMM uses it too), the most input channels for which
/// the direct kernel is used: measured on the development machine (Xeon, AVX-512), it beat
/// the GEMM on ResNet's 7x7 over RGB (1.25 vs 1.82 ms) and tied on a 3x3 over RGB, but lost
/// from 16 channels on (3x3 over 16 to 64 at 55x55: 0.33 vs 0.28 ms; 1x1: half the speed).
const WIDE_MAX_CIN: usize = 4;
/// Without AVX-512: with at most this many output channels (DenseNet's 3x3 growth layers make 32) the GEMM
/// packs 1,152 taps per column for little reuse, and the direct kernel was 10–28% faster
/// on 14x14 to 56x56 outputs, slower at 7x7 and at 13x13 (1x1 over 384 channels to 48).
const SMALL_M: usize = 32;
const SMALL_M_TAPS: usize = 1152;
const SMALL_M_POSITIONS: usize = 196;
/// Output channels and flattened positions of one micro-kernel tile.
const MR: usize = 6;
const NR: usize = 16;
/// Taps summed per pass over the channel blocks: their 16-position slices (16 KiB) stay
/// in L1 while every block of weights is multiplied by them.
const KC: usize = 256;
/// Most floats of phase planes a thread keeps for its next call (16 MiB).
const KEEP_FLOATS: usize = 1 << 22;
/// Floats of phase planes from which an image's planes are split in parallel.
const SPLIT_PARALLEL: usize = 1 << 18;
/// Floats of partial sums one task holds (a band of rows for its channel blocks).
const ACC_FLOATS: usize = 1 << 16;

thread_local! {
    /// The direct kernel's phase planes, reused by the next call on this thread.
    static PLANES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// A task's partial sums and gathered panel, kept so that a call does not map and
    /// fault in fresh pages for them.
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<Line>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

impl Conv2dKernel {
    /// The convolution (before the epilogue) into `out` by the direct kernel; `false`
    /// (nothing written) when it does not apply: grouped, channel-chunked, dilated or
    /// unequally strided, more than [`MAX_TAPS`] taps (unless few channels over many
    /// positions), more than [`WIDE_MAX_CIN`] input channels on a CPU with AVX-512, or a
    /// CPU without AVX2 and FMA.
    pub(super) fn direct(
        &self,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        epi: Option<&RangeProgram<'_>>,
    ) -> bool {
        self.direct_pays() && self.direct_any(x, w, out, epi)
    }

    /// Whether the direct kernel beats im2col + GEMM on this layer (see [`MAX_TAPS`] and
    /// [`WIDE_MAX_CIN`]).
    fn direct_pays(&self) -> bool {
        let [_, cin, _, _] = dims4(&self.x);
        let [m, _, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let taps = cin * kh * kw;
        #[cfg(target_arch = "x86_64")]
        let wide = std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let wide = false;
        // With 512-bit registers the GEMM (in place for 1x1) is faster unless the layer
        // has so few input channels that im2col writes many floats per multiply-add.
        if wide {
            taps <= MAX_TAPS && cin <= WIDE_MAX_CIN
        } else {
            taps <= MAX_TAPS
                || (m <= SMALL_M && taps <= SMALL_M_TAPS && oh * ow >= SMALL_M_POSITIONS)
        }
    }

    /// The direct convolution of `x` by `w` (no epilogue) whenever it applies, whatever
    /// the GEMM would do: `None` when it does not (see [`Conv2dKernel::direct`]). For tests
    /// of the kernel on every geometry.
    #[doc(hidden)]
    pub fn run_direct(&self, x: &[f32], w: &[f32]) -> Option<Vec<f32>> {
        let mut out = vec![0.0; self.out.numel()];
        (x.len() >= self.x.numel() && w.len() >= self.w.numel())
            .then_some(())
            .filter(|_| self.direct_any(x, w, &mut out, None))
            .map(|_| out)
    }

    fn direct_any(
        &self,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        epi: Option<&RangeProgram<'_>>,
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let [n_all, cin, h, wd] = dims4(&self.x);
            let [m, _, kh, kw] = dims4(&self.w);
            let [_, _, oh, ow] = dims4(&self.out);
            let taps = cin * kh * kw;
            let wide = std::arch::is_x86_feature_detected!("avx512f");
            if self.groups != 1
                || self.c_chunk.is_some()
                || taps == 0
                || !(std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma"))
            {
                return false;
            }
            let Some(ph) = Phases::new([h, wd], [oh, ow], &self.window) else {
                return false;
            };
            let chan = ph.len();
            let offsets: Vec<usize> = (0..taps)
                .map(|t| (t / (kh * kw)) * chan + ph.tap(t % (kh * kw)))
                .collect();
            // Weights as [block][tap][MR], zero rows past `m`.
            let blocks = m.div_ceil(MR);
            let mut wp = vec![0.0f32; blocks * taps * MR];
            for (o, row) in w.chunks_exact(taps).take(m).enumerate() {
                let (b, r) = (o / MR, o % MR);
                for (t, &v) in row.iter().enumerate() {
                    wp[(b * taps + t) * MR + r] = v;
                }
            }
            let pw = ph.pw();
            // Tiles whose panels are gathered together (at most 128 KiB of lines).
            let sup = (2048 / taps).clamp(1, 16);
            // Tasks of (a run of channel blocks, a band of output rows), at least three per
            // thread, each summing into at most ACC_FLOATS of its own. Rows are split
            // before channel blocks: a tile's gathered panel serves every block of its run,
            // and with few output channels (a 1x1 squeeze to 16) a run of one block would
            // pay the gather for 6 channels' work.
            let threads = rayon::current_num_threads().max(1);
            let mut group = blocks;
            let (rows_per_band, bands) = loop {
                let runs = blocks.div_ceil(group);
                let fit = (ACC_FLOATS / (group * MR) / pw).max(1);
                let rows = fit.min(oh.div_ceil((3 * threads).div_ceil(runs))).max(1);
                let bands = oh.div_ceil(rows);
                if group == 1 || bands * runs >= 3 * threads {
                    break (rows, bands);
                }
                group = group.div_ceil(2);
            };
            let groups = blocks.div_ceil(group);
            // A tile reads up to NR - 1 positions past the flattened output's end.
            // Kept across calls on this thread: a fresh buffer of this size is mapped and
            // faulted in page by page on every call.
            // Stride 1 without padding: the phase plane is the input plane itself.
            let in_place = chan == h * wd && ph.pw() == wd;
            let mut planes = if in_place {
                Vec::new()
            } else {
                PLANES.with_borrow_mut(std::mem::take)
            };
            // `split` writes every float of its planes; only growth needs initialising.
            if !in_place && planes.len() < cin * chan + NR {
                planes.resize(cin * chan + NR, 0.0);
            }
            for (img, dst) in out.chunks_exact_mut(m * oh * ow).take(n_all).enumerate() {
                let xs = &x[img * cin * h * wd..][..cin * h * wd];
                let split = |(buf, plane): (&mut [f32], &[f32])| ph.split(plane, 0.0, buf);
                if !in_place && cin * chan >= SPLIT_PARALLEL {
                    planes[..cin * chan]
                        .par_chunks_mut(chan)
                        .zip(xs.par_chunks(h * wd))
                        .for_each(split);
                } else if !in_place {
                    planes[..cin * chan]
                        .chunks_mut(chan)
                        .zip(xs.chunks(h * wd))
                        .for_each(split);
                }
                let base = SendPtr(dst.as_mut_ptr());
                let src_planes: &[f32] = if in_place { xs } else { &planes };
                let (wp, offsets) = (&wp, &offsets);
                (0..groups * bands).into_par_iter().for_each(|task| {
                    SCRATCH.with_borrow_mut(|(acc, panel)| {
                        let (g, band) = (task / bands, task % bands);
                        let blk = g * group..((g + 1) * group).min(blocks);
                        let oy0 = band * rows_per_band;
                        let oy1 = (oy0 + rows_per_band).min(oh);
                        let j0 = oy0 * pw;
                        let len = (oy1 - oy0 - 1) * pw + ow;
                        let stride = len.next_multiple_of(NR);
                        // Every element is written before it is read (k0 = 0 stores).
                        if acc.len() < blk.len() * MR * stride {
                            acc.resize(blk.len() * MR * stride, 0.0);
                        }
                        for s0 in (0..len).step_by(NR * sup) {
                            let nt = (len - s0).div_ceil(NR).min(sup);
                            // These tiles' taps, tap-major so that each plane is read
                            // along a row (a few sequential streams, not one line of
                            // each of `taps` planes per tile), stored tile-major so that
                            // each tile's panel is contiguous and aligned.
                            panel.clear();
                            panel.resize(nt * taps, Line([0.0; NR]));
                            for (t, &off) in offsets.iter().enumerate() {
                                let src = j0 + s0 + off;
                                for j in 0..nt {
                                    panel[j * taps + t] = line(src_planes, src + j * NR);
                                }
                            }
                            // Two tiles at a time in 512-bit registers where the CPU has
                            // them (the 16-position halves are adjacent in `acc`).
                            let pair = if wide { 2 } else { 1 };
                            let mut j = 0;
                            while j < nt {
                                let two = pair == 2 && j + 1 < nt;
                                let t0 = s0 + j * NR;
                                let lines = &panel[j * taps..][..taps];
                                let next = &panel[(j + two as usize) * taps..][..taps];
                                for k0 in (0..taps).step_by(KC) {
                                    let k1 = (k0 + KC).min(taps);
                                    for (i, b) in blk.clone().enumerate() {
                                        let wb = &wp[(b * taps + k0) * MR..(b * taps + k1) * MR];
                                        let at =
                                            acc.as_mut_ptr().wrapping_add(i * MR * stride + t0);
                                        // SAFETY: AVX2 and FMA (and AVX-512F for `tile2`)
                                        // were detected above; `wb` holds MR weights per
                                        // line of `lines[k0..k1]`. Writes are
                                        // `acc[(i·MR + r)·stride + t0 + c]`, r < MR,
                                        // c < NR (2·NR for two tiles, both inside the band:
                                        // t0 + c < stride), i < blk.len().
                                        unsafe {
                                            if two {
                                                tile2(
                                                    &lines[k0..k1],
                                                    &next[k0..k1],
                                                    wb,
                                                    at,
                                                    stride,
                                                    k0 > 0,
                                                );
                                            } else {
                                                tile(&lines[k0..k1], wb, at, stride, k0 > 0);
                                            }
                                        }
                                    }
                                }
                                j += 1 + two as usize;
                            }
                        }
                        for (i, b) in blk.clone().enumerate() {
                            for r in 0..MR.min(m - b * MR) {
                                let o = b * MR + r;
                                for oy in oy0..oy1 {
                                    let src = &acc[(i * MR + r) * stride + (oy - oy0) * pw..][..ow];
                                    // SAFETY: row `oy` of channel `o` of this image's
                                    // output ([m, oh, ow], o < m, oy < oh): tasks are
                                    // disjoint (channel blocks, band) pairs, so no two
                                    // write one element, and `out` outlives the loop.
                                    unsafe {
                                        std::ptr::copy_nonoverlapping(
                                            src.as_ptr(),
                                            base.get().add((o * oh + oy) * ow),
                                            ow,
                                        );
                                    }
                                }
                                if let Some(e) = epi {
                                    let at = (o * oh + oy0) * ow;
                                    // SAFETY: rows oy0..oy1 of channel o, just written
                                    // by this task alone (see above).
                                    let rows = unsafe {
                                        std::slice::from_raw_parts_mut(
                                            base.get().add(at).cast::<u32>(),
                                            (oy1 - oy0) * ow,
                                        )
                                    };
                                    e.apply(img * m * oh * ow + at, rows);
                                }
                            }
                        }
                    })
                });
            }
            if !in_place && planes.len() <= KEEP_FLOATS {
                PLANES.with_borrow_mut(|p| *p = planes);
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (x, w, out, epi);
            false
        }
    }
}

/// [`tile`] over two tiles (`a`'s positions, then `b`'s 16 after them in `acc`), in
/// 512-bit registers: per tap two loads, six broadcasts and twelve fused multiply-adds of
/// 16 lanes.
///
/// # Safety
/// AVX-512F is available; `acc.add(r * stride + i)` is readable and writable for r < MR,
/// i < 2·NR.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile2(a: &[Line], b: &[Line], wb: &[f32], acc: *mut f32, stride: usize, add: bool) {
    use std::arch::x86_64::*;
    let mut c = [[_mm512_setzero_ps(); 2]; MR];
    if add {
        for (r, cr) in c.iter_mut().enumerate() {
            // SAFETY: the caller's contract covers these reads (the writes below).
            unsafe {
                cr[0] = _mm512_loadu_ps(acc.add(r * stride));
                cr[1] = _mm512_loadu_ps(acc.add(r * stride + NR));
            }
        }
    }
    for ((la, lb), w) in a.iter().zip(b).zip(wb.chunks_exact(MR)) {
        // SAFETY: a Line is 16 floats aligned to 64 bytes.
        let (b0, b1) = unsafe { (_mm512_load_ps(la.0.as_ptr()), _mm512_load_ps(lb.0.as_ptr())) };
        for (cr, &wr) in c.iter_mut().zip(w) {
            let s = _mm512_set1_ps(wr);
            cr[0] = _mm512_fmadd_ps(s, b0, cr[0]);
            cr[1] = _mm512_fmadd_ps(s, b1, cr[1]);
        }
    }
    for (r, cr) in c.iter().enumerate() {
        // SAFETY: the caller's contract covers these writes.
        unsafe {
            _mm512_storeu_ps(acc.add(r * stride), cr[0]);
            _mm512_storeu_ps(acc.add(r * stride + NR), cr[1]);
        }
    }
}

/// One tap's 16 positions, aligned to a cache line.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Line([f32; NR]);

/// `src[at..at + NR]`, zeros past the end of `src`: the positions past the flattened
/// output's end (never stored) of the last plane read in place.
#[inline(always)]
fn line(src: &[f32], at: usize) -> Line {
    if at + NR <= src.len() {
        // SAFETY: `src[at..at + NR]` is in bounds (checked above).
        Line(unsafe { std::ptr::read_unaligned(src.as_ptr().add(at).cast::<[f32; NR]>()) })
    } else {
        let mut l = Line([0.0; NR]);
        let tail = src.get(at..).unwrap_or(&[]);
        l.0[..tail.len()].copy_from_slice(tail);
        l
    }
}

/// `acc[r·stride + i] (+)= Σ_t wb[t·MR + r] · panel[t][i]` for r < MR, i < NR (added to
/// what `acc` holds when `add`).
///
/// # Safety
/// AVX2 and FMA are available; `acc.add(r * stride + i)` is readable and writable for
/// r < MR, i < NR.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile(panel: &[Line], wb: &[f32], acc: *mut f32, stride: usize, add: bool) {
    use std::arch::x86_64::*;
    let mut c = [[_mm256_setzero_ps(); 2]; MR];
    if add {
        for (r, cr) in c.iter_mut().enumerate() {
            // SAFETY: the caller's contract covers these reads (the writes below).
            unsafe {
                cr[0] = _mm256_loadu_ps(acc.add(r * stride));
                cr[1] = _mm256_loadu_ps(acc.add(r * stride + 8));
            }
        }
    }
    for (line, w) in panel.iter().zip(wb.chunks_exact(MR)) {
        // SAFETY: a Line is 16 floats aligned to 64 bytes.
        let (b0, b1) = unsafe {
            let p = line.0.as_ptr();
            (_mm256_load_ps(p), _mm256_load_ps(p.add(8)))
        };
        for (cr, &wr) in c.iter_mut().zip(w) {
            let a = _mm256_set1_ps(wr);
            cr[0] = _mm256_fmadd_ps(a, b0, cr[0]);
            cr[1] = _mm256_fmadd_ps(a, b1, cr[1]);
        }
    }
    for (r, cr) in c.iter().enumerate() {
        // SAFETY: the caller's contract covers these writes.
        unsafe {
            _mm256_storeu_ps(acc.add(r * stride), cr[0]);
            _mm256_storeu_ps(acc.add(r * stride + 8), cr[1]);
        }
    }
}
