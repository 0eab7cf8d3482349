//! cpu:0's direct convolution for layers with few taps per output (`Cin·kh·kw`, a
//! network's first layer: 27 for a 3x3 over RGB, 147 for ResNet's 7x7).
//!
//! im2col would write `Cin·kh·kw` floats per output pixel and the GEMM would pack them
//! again, for only as many multiply-adds per float as there are output channels. Here
//! each input plane is split once into phase planes ([`Phases`]), where every tap of every
//! output is a contiguous read, and an AVX2 micro-kernel multiplies 6 output channels by 16
//! flattened output positions straight from them: per tap, two loads, six broadcast
//! weights and twelve fused multiply-adds, with the 6x16 sums in registers.

use super::planes::Phases;
use super::{dims4, Conv2dKernel};
use rayon::prelude::*;

/// Taps per output above which im2col + GEMM is used instead (its packing pays off).
pub(super) const MAX_TAPS: usize = 256;
/// Output channels and flattened positions of one micro-kernel tile.
const MR: usize = 6;
const NR: usize = 16;
/// Flattened output positions one task aims for (whole output rows).
const BAND: usize = 1024;

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
            let rows_per_band = (BAND / pw).max(1);
            let bands = oh.div_ceil(rows_per_band);
            // A tile reads up to NR - 1 positions past the flattened output's end.
            let mut planes = vec![0.0f32; cin * chan + NR];
            for (img, dst) in out.chunks_exact_mut(m * oh * ow).take(n_all).enumerate() {
                let xs = &x[img * cin * h * wd..][..cin * h * wd];
                planes[..cin * chan]
                    .par_chunks_mut(chan)
                    .zip(xs.par_chunks(h * wd))
                    .for_each(|(buf, plane)| ph.split(plane, 0.0, buf));
                let base = OutPtr(dst.as_mut_ptr());
                let (planes, wp, offsets) = (&planes, &wp, &offsets);
                (0..blocks * bands)
                    .into_par_iter()
                    .for_each_init(Vec::new, |acc, task| {
                        let (b, band) = (task / bands, task % bands);
                        let oy0 = band * rows_per_band;
                        let oy1 = (oy0 + rows_per_band).min(oh);
                        let j0 = oy0 * pw;
                        let len = (oy1 - oy0 - 1) * pw + ow;
                        let stride = len.next_multiple_of(NR);
                        acc.resize(MR * stride, 0.0);
                        let wb = &wp[b * taps * MR..][..taps * MR];
                        for t0 in (0..len).step_by(NR) {
                            // SAFETY: AVX2 and FMA were detected above. Every read is
                            // `planes[j0 + t0 + off + i]` for i < NR, with `j0 + t0 < flat` and
                            // each offset within one channel's phases, where the flattened
                            // output plus a tap stays inside the phases (see `Phases::new`), so
                            // the index is below `cin * chan + NR = planes.len()`. Writes are
                            // `acc[r * stride + t0 + i]`, r < MR, t0 + i < stride.
                            unsafe {
                                tile(
                                    offsets,
                                    planes.as_ptr().add(j0 + t0),
                                    wb,
                                    acc.as_mut_ptr().add(t0),
                                    stride,
                                );
                            }
                        }
                        for r in 0..MR.min(m - b * MR) {
                            let o = b * MR + r;
                            for oy in oy0..oy1 {
                                let src = &acc[r * stride + (oy - oy0) * pw..][..ow];
                                // SAFETY: row `oy` of channel `o` of this image's output
                                // ([m, oh, ow], o < m, oy < oh): tasks are disjoint (channel
                                // block, band) pairs, so no two write one element, and `out`
                                // outlives the parallel loop.
                                unsafe {
                                    std::ptr::copy_nonoverlapping(
                                        src.as_ptr(),
                                        base.get().add((o * oh + oy) * ow),
                                        ow,
                                    );
                                }
                            }
                        }
                    });
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

/// `acc[r·stride + i] = Σ_t wb[t·MR + r] · src[offsets[t] + i]` for r < MR, i < NR.
///
/// # Safety
/// AVX2 and FMA are available; `src.add(off + i)` is readable for every offset and i < NR;
/// `acc.add(r * stride + i)` is writable for r < MR, i < NR; `wb.len() ≥ offsets.len()·MR`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile(offsets: &[usize], src: *const f32, wb: &[f32], acc: *mut f32, stride: usize) {
    use std::arch::x86_64::*;
    let mut c = [[_mm256_setzero_ps(); 2]; MR];
    for (&off, w) in offsets.iter().zip(wb.chunks_exact(MR)) {
        // SAFETY: the caller's contract covers these reads.
        let (b0, b1) = unsafe {
            (
                _mm256_loadu_ps(src.add(off)),
                _mm256_loadu_ps(src.add(off + 8)),
            )
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
