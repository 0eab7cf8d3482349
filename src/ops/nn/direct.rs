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

use super::planes::Phases;
use super::{dims4, Conv2dKernel};
use rayon::prelude::*;

/// Taps per output above which im2col + GEMM is used instead: measured on the 2-core
/// development machine, the direct kernel matched or beat it up to 256 taps (ResNet's 7x7
/// over RGB: 147 vs 147 GFLOP/s; 1x1 over 16–256 channels: 10% faster) and lost beyond
/// (3x3 over 512 channels at 7x7: 53 vs 121), where it packs each tile's taps per task.
pub(super) const MAX_TAPS: usize = 256;
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
}

/// `out`'s base pointer, shared by tasks that write disjoint rows of it.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: only `direct` makes one, for tasks that write disjoint (channel, row) ranges.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl OutPtr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

impl Conv2dKernel {
    /// The convolution (before the epilogue) into `out` by the direct kernel; `false`
    /// (nothing written) when it does not apply: grouped, channel-chunked, dilated or
    /// unequally strided, more than [`MAX_TAPS`] taps, or a CPU without AVX2 and FMA.
    pub(super) fn direct(&self, x: &[f32], w: &[f32], out: &mut [f32]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let [n_all, cin, h, wd] = dims4(&self.x);
            let [m, _, kh, kw] = dims4(&self.w);
            let [_, _, oh, ow] = dims4(&self.out);
            let taps = cin * kh * kw;
            if self.groups != 1
                || self.c_chunk.is_some()
                || taps == 0
                || taps > MAX_TAPS
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
            // Tasks of (a run of channel blocks, a band of output rows), at least three per
            // thread, each summing into at most ACC_FLOATS of its own.
            let threads = rayon::current_num_threads().max(1);
            let mut group = blocks;
            let (rows_per_band, bands) = loop {
                let rows = (ACC_FLOATS / (group * MR) / pw).max(1);
                let bands = oh.div_ceil(rows);
                if group == 1 || bands * blocks.div_ceil(group) >= 3 * threads {
                    break (rows, bands);
                }
                group = group.div_ceil(2);
            };
            let groups = blocks.div_ceil(group);
            // A tile reads up to NR - 1 positions past the flattened output's end.
            // Kept across calls on this thread: a fresh buffer of this size is mapped and
            // faulted in page by page on every call.
            let mut planes = PLANES.with_borrow_mut(std::mem::take);
            planes.clear();
            planes.resize(cin * chan + NR, 0.0);
            for (img, dst) in out.chunks_exact_mut(m * oh * ow).take(n_all).enumerate() {
                let xs = &x[img * cin * h * wd..][..cin * h * wd];
                let split = |(buf, plane): (&mut [f32], &[f32])| ph.split(plane, 0.0, buf);
                if cin * chan >= SPLIT_PARALLEL {
                    planes[..cin * chan]
                        .par_chunks_mut(chan)
                        .zip(xs.par_chunks(h * wd))
                        .for_each(split);
                } else {
                    planes[..cin * chan]
                        .chunks_mut(chan)
                        .zip(xs.chunks(h * wd))
                        .for_each(split);
                }
                let base = OutPtr(dst.as_mut_ptr());
                let (planes, wp, offsets) = (&planes, &wp, &offsets);
                (0..groups * bands).into_par_iter().for_each_init(
                    Default::default,
                    |(acc, panel): &mut (Vec<f32>, Vec<Line>), task| {
                        let (g, band) = (task / bands, task % bands);
                        let blk = g * group..((g + 1) * group).min(blocks);
                        let oy0 = band * rows_per_band;
                        let oy1 = (oy0 + rows_per_band).min(oh);
                        let j0 = oy0 * pw;
                        let len = (oy1 - oy0 - 1) * pw + ow;
                        let stride = len.next_multiple_of(NR);
                        acc.resize(blk.len() * MR * stride, 0.0);
                        for t0 in (0..len).step_by(NR) {
                            // This tile's taps as one contiguous, aligned panel, read once
                            // per channel block.
                            let at = j0 + t0;
                            panel.clear();
                            // SAFETY: `planes[at + off..][..NR]` is in bounds: `at < flat`
                            // and the flattened output plus a tap stays inside one channel's
                            // phases (see `Phases::new`), so the last index is below
                            // `cin * chan + NR = planes.len()`.
                            panel.extend(offsets.iter().map(|&off| unsafe {
                                Line(std::ptr::read_unaligned(
                                    planes.as_ptr().add(at + off).cast::<[f32; NR]>(),
                                ))
                            }));
                            for k0 in (0..taps).step_by(KC) {
                                let k1 = (k0 + KC).min(taps);
                                for (i, b) in blk.clone().enumerate() {
                                    let wb = &wp[(b * taps + k0) * MR..(b * taps + k1) * MR];
                                    // SAFETY: AVX2 and FMA were detected above; `wb` holds
                                    // MR weights per line of `panel[k0..k1]`. Writes are
                                    // `acc[(i·MR + r)·stride + t0 + c]`, r < MR, c < NR,
                                    // t0 + c < stride, i < blk.len().
                                    unsafe {
                                        tile(
                                            &panel[k0..k1],
                                            wb,
                                            acc.as_mut_ptr().add(i * MR * stride + t0),
                                            stride,
                                            k0 > 0,
                                        );
                                    }
                                }
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
                            }
                        }
                    },
                );
            }
            if planes.len() <= KEEP_FLOATS {
                PLANES.with_borrow_mut(|p| *p = planes);
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (x, w, out);
            false
        }
    }
}

/// One tap's 16 positions, aligned to a cache line.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Line([f32; NR]);

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
