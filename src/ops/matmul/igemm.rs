//! cpu:0's integer GEMM for i32 matmuls whose operands fit in i16: the quantized models'
//! products (`MatMulInteger`, `QLinearMatMul`, the dynamic quantizer's zero-point-shifted
//! 8-bit operands).
//!
//! Pairs of K are multiplied and summed by one `vpmaddwd` (16 i16 products into 8 i32 per
//! instruction, against 8 for an f32 FMA), accumulated with wrapping i32 adds. Every step is
//! exact modulo 2^32 (`vpmaddwd`'s one overflowing case, both pairs −32768², wraps to the
//! same value), and integer sums do not depend on their order, so the result equals the
//! WGSL kernels' wrapping i32 loop word for word, whatever the blocking. Operands outside
//! i16 make [`igemm`] return `false` and the caller takes its exact general path.
//!
//! Layout: A is packed once as `[m, k/2]` words, each holding a K pair of i16; B is packed
//! per panel of [`NR`] columns and [`KC`] pairs (16 KiB, in L1 while every row block of A
//! streams past it), each thread packing the panels it computes.

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rows of C per micro-kernel call. 6 × 16 keeps 12 accumulators, two B vectors, the
/// broadcast and the product in the 16 ymm registers: measured on a 2-core AVX2 EPYC,
/// `[128,768]@[768,3072]` at 50 GMAC/s on one thread against 39–49 for 4 × 24, 5 × 16,
/// 4 × 16, 3 × 24 and 2 × 32 (4 × 24 spills one accumulator).
const MR: usize = 6;
/// Columns of C per panel: [`NV`] 8-lane vectors.
const NR: usize = 8 * NV;
const NV: usize = 2;
/// K pairs per panel (`KC · NR · 4` bytes of B).
const KC: usize = 256;

/// An i32 matrix read in place: element (r, c) is `data[off + r * rs + c * cs]` as i32.
#[derive(Clone, Copy)]
pub(crate) struct IMat<'a> {
    pub data: &'a [u32],
    pub off: usize,
    pub rs: usize,
    pub cs: usize,
}

impl IMat<'_> {
    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> i32 {
        self.data[self.off + r * self.rs + c * self.cs] as i32
    }
}

fn i16_of(v: i32) -> Option<i16> {
    i16::try_from(v).ok()
}

/// Two i16 as one word, `lo` in the low half (the order `vpmaddwd` pairs them in).
#[inline(always)]
fn pair(lo: i16, hi: i16) -> u32 {
    (lo as u16 as u32) | ((hi as u16 as u32) << 16)
}

/// `C = A · B` (`[m, k] · [k, n]`, C row-major `[m, n]`, fully written) in wrapping i32, when
/// every element of A and B fits in i16; `false` otherwise (C then holds anything). The
/// caller has checked that every index the shapes imply lies inside A's and B's data.
/// Spreads panels of columns (or, for a narrow C, blocks of rows) over rayon's pool above
/// `par_macs` multiply-adds.
pub(crate) fn igemm(
    m: usize,
    k: usize,
    n: usize,
    a: IMat<'_>,
    b: IMat<'_>,
    c: &mut [u32],
    par_macs: usize,
) -> bool {
    let c = &mut c[..m * n];
    if m == 0 || n == 0 {
        return true;
    }
    let kp = k.div_ceil(2);
    let mut ap = vec![0u32; m * kp];
    for (i, row) in ap.chunks_exact_mut(kp.max(1)).enumerate().take(m) {
        for (p, w) in row.iter_mut().enumerate() {
            let lo = i16_of(a.at(i, 2 * p));
            let hi = if 2 * p + 1 < k {
                i16_of(a.at(i, 2 * p + 1))
            } else {
                Some(0)
            };
            match (lo, hi) {
                (Some(lo), Some(hi)) => *w = pair(lo, hi),
                _ => return false,
            }
        }
    }
    if kp == 0 {
        c.fill(0);
        return true;
    }
    let panels = n.div_ceil(NR);
    let par = m * k * n >= par_macs && rayon::current_num_threads() > 1;
    // Writes a panel's columns into C (rows of `c` from its first); `false` when the panel
    // met a value of B outside i16.
    let put = |c: &mut [u32], jp: usize, acc: Option<Vec<u32>>| {
        let Some(acc) = acc else {
            return false;
        };
        let (j0, w) = (jp * NR, NR.min(n - jp * NR));
        for (row, a) in c.chunks_exact_mut(n).zip(acc.chunks_exact(NR)) {
            row[j0..j0 + w].copy_from_slice(&a[..w]);
        }
        true
    };
    if par && panels >= 2 * rayon::current_num_threads() {
        // Tasks own panels of columns; C's columns are strided, so each writes its
        // columns through a shared pointer.
        let cp = SharedC(c.as_mut_ptr());
        let wide = AtomicBool::new(false);
        (0..panels).into_par_iter().for_each(|jp| {
            let cp = &cp;
            let Some(acc) = panel(jp, 0, m, kp, k, n, &ap, b) else {
                wide.store(true, Ordering::Relaxed);
                return;
            };
            let (j0, w) = (jp * NR, NR.min(n - jp * NR));
            for (r, a) in acc.chunks_exact(NR).enumerate() {
                // SAFETY: row r's columns j0..j0+w lie inside the m×n C and belong to panel
                // jp alone; C outlives the parallel loop, and no reference to it is live.
                unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), cp.0.add(r * n + j0), w) };
            }
        });
        return !wide.load(Ordering::Relaxed);
    }
    if par {
        // Few columns: tasks own blocks of rows, each running every panel.
        let rows = m
            .div_ceil(rayon::current_num_threads() * 2)
            .next_multiple_of(MR);
        return c.par_chunks_mut(rows * n).enumerate().all(|(t, c)| {
            (0..panels).all(|jp| {
                let acc = panel(jp, t * rows, c.len() / n, kp, k, n, &ap, b);
                put(c, jp, acc)
            })
        });
    }
    (0..panels).all(|jp| put(c, jp, panel(jp, 0, m, kp, k, n, &ap, b)))
}

struct SharedC(*mut u32);
// SAFETY: tasks write disjoint elements through it (see `igemm`).
unsafe impl Sync for SharedC {}

/// Columns `jp*NR..` of rows `i0..i0+mm` of C over all of K, as `[mm, NR]`; `None` when a
/// value of B does not fit in i16.
#[allow(clippy::too_many_arguments)]
fn panel(
    jp: usize,
    i0: usize,
    mm: usize,
    kp: usize,
    k: usize,
    n: usize,
    ap: &[u32],
    b: IMat<'_>,
) -> Option<Vec<u32>> {
    let j0 = jp * NR;
    let w = NR.min(n - j0);
    let mut bp = vec![0u32; KC.min(kp) * NR];
    let mut acc = vec![0u32; mm * NR];
    for p0 in (0..kp).step_by(KC) {
        let pc = KC.min(kp - p0);
        // Pack B's pairs p0..p0+pc of these columns; columns past n stay 0.
        for (q, row) in bp.chunks_exact_mut(NR).take(pc).enumerate() {
            let kk = 2 * (p0 + q);
            if b.cs == 1 && w == NR && kk + 1 < k {
                // Row-major B, a full panel: two rows of 16 contiguous values, in a loop
                // the compiler vectorizes.
                let lo = &b.data[b.off + kk * b.rs + j0..][..NR];
                let hi = &b.data[b.off + (kk + 1) * b.rs + j0..][..NR];
                let mut fits = true;
                for ((x, &l), &h) in row.iter_mut().zip(lo).zip(hi) {
                    let (l, h) = (l as i32, h as i32);
                    fits &= (l as i16 as i32 == l) & (h as i16 as i32 == h);
                    *x = (l as u32 & 0xffff) | ((h as u32) << 16);
                }
                if !fits {
                    return None;
                }
                continue;
            }
            for (j, x) in row.iter_mut().enumerate().take(w) {
                let lo = i16_of(b.at(kk, j0 + j))?;
                let hi = if kk + 1 < k {
                    i16_of(b.at(kk + 1, j0 + j))?
                } else {
                    0
                };
                *x = pair(lo, hi);
            }
        }
        let bp = &bp[..pc * NR];
        let first = p0 == 0;
        let full = mm / MR * MR;
        for r0 in (0..full).step_by(MR) {
            let a = &ap[(i0 + r0) * kp + p0..];
            block::<MR>(a, kp, pc, bp, &mut acc[r0 * NR..(r0 + MR) * NR], first);
        }
        for r0 in full..mm {
            let a = &ap[(i0 + r0) * kp + p0..];
            block::<1>(a, kp, pc, bp, &mut acc[r0 * NR..(r0 + 1) * NR], first);
        }
    }
    Some(acc)
}

/// `RB` rows of the accumulator (`[RB, NR]`) plus `A[.., pairs] · B-panel`, or set to it on
/// the `first` K block. `a` holds row r's pairs from `a[r * kp]`.
#[inline(always)]
fn block<const RB: usize>(
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
            // SAFETY: the CPU has AVX2 (checked just above); the slices are bounds-checked
            // by `block_avx2`'s asserts.
            unsafe { block_avx2::<RB>(a, kp, pc, bp, acc, first) };
            return;
        }
    }
    block_portable::<RB>(a, kp, pc, bp, acc, first)
}

fn block_portable<const RB: usize>(
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    let mut sum = [[0i32; NR]; RB];
    for (p, brow) in bp.chunks_exact(NR).take(pc).enumerate() {
        for (r, s) in sum.iter_mut().enumerate() {
            let av = a[r * kp + p];
            let (alo, ahi) = (av as u16 as i16 as i32, (av >> 16) as u16 as i16 as i32);
            for (x, &bv) in s.iter_mut().zip(brow) {
                let (blo, bhi) = (bv as u16 as i16 as i32, (bv >> 16) as u16 as i16 as i32);
                *x = x.wrapping_add((alo * blo).wrapping_add(ahi * bhi));
            }
        }
    }
    for (r, s) in sum.iter().enumerate() {
        for (o, &v) in acc[r * NR..][..NR].iter_mut().zip(s) {
            *o = if first {
                v as u32
            } else {
                (*o as i32).wrapping_add(v) as u32
            };
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_avx2<const RB: usize>(
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    use std::arch::x86_64::*;
    assert!(bp.len() >= pc * NR && acc.len() >= RB * NR);
    assert!(pc == 0 || a.len() > (RB - 1) * kp + pc - 1);
    let mut s = [[_mm256_setzero_si256(); NV]; RB];
    let (ap, bpp) = (a.as_ptr(), bp.as_ptr());
    for p in 0..pc {
        // SAFETY: p < pc, so the loads read bp[p*NR..(p+1)*NR] (asserted above) and the
        // broadcast reads a[r*kp + p] ≤ a[(RB-1)*kp + pc - 1] (asserted above).
        let mut bv = [_mm256_setzero_si256(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = _mm256_loadu_si256(bpp.add(p * NR + 8 * v) as *const __m256i);
        }
        for (r, s) in s.iter_mut().enumerate() {
            let av = _mm256_set1_epi32(*ap.add(r * kp + p) as i32);
            for (x, &b) in s.iter_mut().zip(&bv) {
                *x = _mm256_add_epi32(*x, _mm256_madd_epi16(av, b));
            }
        }
    }
    let o = acc.as_mut_ptr();
    for (r, s) in s.iter().enumerate() {
        for (v, &x) in s.iter().enumerate() {
            // SAFETY: row r of acc is acc[r*NR..(r+1)*NR], inside it (asserted above).
            let o = o.add(r * NR + 8 * v) as *mut __m256i;
            let x = if first {
                x
            } else {
                _mm256_add_epi32(_mm256_loadu_si256(o), x)
            };
            _mm256_storeu_si256(o, x);
        }
    }
}
