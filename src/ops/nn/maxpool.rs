//! cpu:0's max pool by rows: each input row's horizontal window maxima once, then each
//! output row the maximum of its window's rows, both passes contiguous and vectorized.
//!
//! A max pool on phase planes ([`super::planes`]) copies every plane into `s·s` bordered
//! planes and folds all `kh·kw` taps over the flattened output; by rows, the input is read
//! once and each output folds `kh` rows of `ow` maxima (SqueezeNet's first 3x3/2 pool over
//! 64 x 111 x 111: 0.33 ms on phase planes, see `Phases::pool`).
//!
//! The result is the reference's bit for bit: `max_rule` keeps the later operand on ties
//! (only +0 and -0 tie with different bits) and makes any NaN the canonical NaN, so a fold
//! returns the row-major-last maximum; folding each row first and then the rows in order
//! returns that same cell. Cells outside the plane are -inf, which `max_rule` passes over
//! bit-exactly as the reference skips them (every window holds an in-bounds cell).

use super::Window;

/// A task's scratch: one bordered input row and the horizontal maxima of every input row.
#[derive(Default)]
pub(super) struct RowScratch {
    row: Vec<f32>,
    hmax: Vec<f32>,
}

/// The max pool of one `[h, w]` plane `xs` into `dst` (`[oh, ow]`) over `win` (no
/// dilation; every window holds at least one cell of the plane), with AVX-512 where the
/// CPU has it and `wide` (tests clear it to run the portable path).
pub(super) fn max_plane(
    xs: &[f32],
    [h, wd]: [usize; 2],
    [oh, ow]: [usize; 2],
    win: &Window,
    sc: &mut RowScratch,
    dst: &mut [f32],
    wide: bool,
) {
    max_band(xs, [[h, wd], [oh, ow], [0, 0]], win, sc, dst, wide);
}

/// Output rows from `first[1]` (as many as `dst` holds) of the max pool of a `[h, w]` plane
/// of which `xs` holds the rows from `first[0]` on, every row those windows read:
/// `geometry` is `[[h, w], [oh, ow], first]`. A pooled convolution passes each band of
/// its rows as it computes them.
pub(super) fn max_band(
    xs: &[f32],
    geometry: [[usize; 2]; 3],
    win: &Window,
    sc: &mut RowScratch,
    dst: &mut [f32],
    wide: bool,
) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = wide;
    #[cfg(target_arch = "x86_64")]
    if wide && crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512 {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        unsafe { max_band_avx512(xs, geometry, win, sc, dst) };
        return;
    }
    max_band_body(xs, geometry, win, sc, dst, false);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn max_band_avx512(
    xs: &[f32],
    geometry: [[usize; 2]; 3],
    win: &Window,
    sc: &mut RowScratch,
    dst: &mut [f32],
) {
    max_band_body(xs, geometry, win, sc, dst, true);
}

#[inline(always)]
fn max_band_body(
    xs: &[f32],
    [[h, wd], [oh, ow], [in0, out0]]: [[usize; 2]; 3],
    win: &Window,
    sc: &mut RowScratch,
    dst: &mut [f32],
    wide: bool,
) {
    let ([kh, kw], [sy, sx], [py, px]) = (win.kernel, win.stride, win.padding);
    // The bordered row: -inf left of the plane (padding) and right of it (padding, or
    // a ceil-mode window's cells past the end), the row itself from `px`.
    let len = ((ow - 1) * sx + kw).max(px + wd);
    #[cfg(target_arch = "x86_64")]
    let s2 = wide && sx == 2 && (kw == 2 || kw == 3);
    #[cfg(not(target_arch = "x86_64"))]
    let s2 = {
        let _ = wide;
        false
    };
    // `hrow_s2` reads the plane's rows in place: only the other paths use the row.
    sc.row.clear();
    if !s2 {
        sc.row.resize(len, f32::NEG_INFINITY);
    }
    let rows = (xs.len() / wd.max(1)).min(h.saturating_sub(in0));
    sc.hmax.resize(rows * ow, 0.0);
    let (row, hmax) = (&mut sc.row, &mut sc.hmax);
    for (src, hm) in xs
        .chunks_exact(wd)
        .zip(hmax.chunks_exact_mut(ow))
        .take(rows)
    {
        if s2 {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX-512F was detected above.
            unsafe {
                hrow_s2(src, px, hm, kw == 3)
            };
            continue;
        }
        row[px..px + wd].copy_from_slice(src);
        match (kw, sx) {
            (3, 2) => hrow::<3, 2>(row, hm),
            (2, 2) => hrow::<2, 2>(row, hm),
            (3, 1) => hrow::<3, 1>(row, hm),
            _ => {
                for (o, m) in hm.iter_mut().enumerate() {
                    let cells = &row[o * sx..o * sx + kw];
                    *m = cells[1..].iter().fold(cells[0], |a, &v| max_rule(a, v));
                }
            }
        }
    }
    for (i, d) in dst.chunks_exact_mut(ow).enumerate() {
        let oy = out0 + i;
        if oy >= oh {
            break;
        }
        // This band's rows of the window, counted from `in0`.
        let r0 = (oy * sy).saturating_sub(py).max(in0) - in0;
        let r1 = (oy * sy + kh).saturating_sub(py).min(h).min(in0 + rows) - in0;
        let at = |r: usize| &hmax[r * ow..][..ow];
        // Windows of two and three rows fold in registers (a copy into `d` and loads of
        // it straight after stall on store forwarding).
        #[cfg(target_arch = "x86_64")]
        if wide && (r1 - r0 == 2 || r1 - r0 == 3) {
            let third = (r1 - r0 == 3).then(|| at(r0 + 2));
            // SAFETY: `wide` is only set on the AVX-512 path (`max_band_avx512`).
            unsafe { vfold(at(r0), at(r0 + 1), third, d) };
            continue;
        }
        if r1 - r0 == 3 {
            for (((a, &u), &v), &w) in d.iter_mut().zip(at(r0)).zip(at(r0 + 1)).zip(at(r0 + 2)) {
                *a = max_rule(max_rule(u, v), w);
            }
            continue;
        }
        if r1 - r0 == 2 {
            for ((a, &u), &v) in d.iter_mut().zip(at(r0)).zip(at(r0 + 1)) {
                *a = max_rule(u, v);
            }
            continue;
        }
        d.copy_from_slice(at(r0));
        for r in r0 + 1..r1 {
            for (a, &v) in d.iter_mut().zip(&hmax[r * ow..][..ow]) {
                *a = max_rule(*a, v);
            }
        }
    }
}

/// `d[i] = max_rule(max_rule(u[i], v[i]), w[i])` (or of `u` and `v` alone), 16 lanes a
/// step with a masked tail: the compiler's own loop ran 4 lanes wide with a scalar tail.
///
/// # Safety
/// AVX-512F is available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn vfold(u: &[f32], v: &[f32], w: Option<&[f32]>, d: &mut [f32]) {
    use std::arch::x86_64::*;
    let n = d
        .len()
        .min(u.len())
        .min(v.len())
        .min(w.map_or(usize::MAX, <[f32]>::len));
    let nan = _mm512_set1_ps(f32::NAN);
    let step = |a: __m512, b: __m512| {
        let m = _mm512_max_ps(a, b);
        _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b), nan)
    };
    let mut i = 0;
    while i < n {
        let keep = if i + 16 <= n {
            u16::MAX
        } else {
            ((1u32 << (n - i)) - 1) as u16
        };
        // SAFETY: lanes of `keep` are below n, within every slice.
        unsafe {
            let load = |s: &[f32]| _mm512_maskz_loadu_ps(keep, s.as_ptr().add(i));
            let mut m = step(load(u), load(v));
            if let Some(w) = w {
                m = step(m, load(w));
            }
            _mm512_mask_storeu_ps(d.as_mut_ptr().add(i), keep, m);
        }
        i += 16;
    }
}

/// `hm[o] = fold(max_rule, row[o·S .. o·S + K])`, the window and stride known to the
/// compiler (its strided loads become shuffles).
#[inline(always)]
fn hrow<const K: usize, const S: usize>(row: &[f32], hm: &mut [f32]) {
    let n = hm.len();
    let row = &row[..(n - 1) * S + K];
    for (o, m) in hm.iter_mut().enumerate() {
        let c: [f32; K] = std::array::from_fn(|k| row[o * S + k]);
        let mut a = c[0];
        for &v in &c[1..] {
            a = max_rule(a, v);
        }
        *m = a;
    }
}

/// [`hrow`] at stride 2 for windows of 2 or 3 (`three`) straight from the plane's row
/// `src` (bordered by `px` cells of -inf on the left, and on the right as far as read),
/// 16 outputs per step: the even, odd and next-even cells of 32 (two loads each, picked by
/// `vpermt2ps`), folded in that order by `max_rule`'s vector form (`maxps(a, v)` is
/// `a > v ? a : v`; unordered lanes become NaN). Border cells are masked-off lanes of the
/// loads (filled with -inf, their memory not read): nothing is copied, so no load waits on
/// a store it overlaps.
///
/// # Safety
/// AVX-512F is available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn hrow_s2(src: &[f32], px: usize, hm: &mut [f32], three: bool) {
    use std::arch::x86_64::*;
    let (n, wd) = (hm.len(), src.len() as isize);
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let (nan, ninf) = (_mm512_set1_ps(f32::NAN), _mm512_set1_ps(f32::NEG_INFINITY));
    let step = |a: __m512, v: __m512| {
        let m = _mm512_max_ps(a, v);
        _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, v), nan)
    };
    // The 16 cells from bordered position `at` (src index at - px), -inf outside `src`.
    let load = |at: isize| {
        let first = at - px as isize;
        if first >= 0 && first + 16 <= wd {
            // SAFETY: src[first .. first + 16] is inside `src`.
            return unsafe { _mm512_loadu_ps(src.as_ptr().offset(first)) };
        }
        let lo = (-first).clamp(0, 16);
        let hi = (wd - first).clamp(0, 16);
        let keep = if hi > lo {
            (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16
        } else {
            0
        };
        // SAFETY: only lanes j with 0 <= first + j < src.len() are read.
        unsafe { _mm512_mask_loadu_ps(ninf, keep, src.as_ptr().wrapping_offset(first)) }
    };
    let mut o = 0;
    while o < n {
        let at = 2 * o as isize;
        let first = at - px as isize;
        if first >= 0 && first + 34 <= wd && o + 16 <= n {
            // Inside the row: plain loads, no border lanes, all 16 outputs stored.
            // SAFETY: src[first .. first + 34] is inside `src`; hm[o .. o + 16] inside `hm`.
            unsafe {
                let p = src.as_ptr().offset(first);
                let (a, b) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
                let mut m = step(
                    _mm512_permutex2var_ps(a, even, b),
                    _mm512_permutex2var_ps(a, odd, b),
                );
                if three {
                    let (c, d) = (_mm512_loadu_ps(p.add(2)), _mm512_loadu_ps(p.add(18)));
                    m = step(m, _mm512_permutex2var_ps(c, even, d));
                }
                _mm512_storeu_ps(hm.as_mut_ptr().add(o), m);
            }
            o += 16;
            continue;
        }
        let mut m = step(
            _mm512_permutex2var_ps(load(at), even, load(at + 16)),
            _mm512_permutex2var_ps(load(at), odd, load(at + 16)),
        );
        if three {
            m = step(m, _mm512_permutex2var_ps(load(at + 2), even, load(at + 18)));
        }
        // The last step's lanes past `n` are not stored.
        let keep = if o + 16 <= n {
            u16::MAX
        } else {
            ((1u32 << (n - o)) - 1) as u16
        };
        // SAFETY: stores hm[o + j] for the lanes j of `keep`, all below n.
        unsafe { _mm512_mask_storeu_ps(hm.as_mut_ptr().add(o), keep, m) };
        o += 16;
    }
}

/// `max(a, v)` as `binary_cpu` computes it (NaN wins, the second operand on ties), with
/// the comparison a select, not a branch (random data mispredicts half of them).
#[inline(always)]
pub(super) fn max_rule(a: f32, v: f32) -> f32 {
    let m = if a > v { a } else { v };
    if a.is_nan() | v.is_nan() {
        f32::NAN
    } else {
        m
    }
}
