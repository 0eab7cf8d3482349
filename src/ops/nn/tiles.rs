//! The direct convolution's micro-kernels (see `direct.rs`): the AVX-512 tile of 8 output
//! channels by 48 positions and where its sums go, and the AVX2 tile of 6 by 16 over a
//! gathered panel.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused))]
use super::direct::{WMR, WNR};
#[cfg(target_arch = "x86_64")]
pub(super) use crate::ops::matmul::panel::tile;
pub(super) use crate::ops::matmul::panel::{Line, NR};

/// Where an AVX-512 tile's final sums go in the output itself: for each of its three
/// 16-lane vectors, runs of lanes `(at, keep)`, one per output row the vector touches,
/// lanes of `keep` to `out + r·plane + at + lane` (the dropped columns between rows in no
/// run). Saves a copy of the whole output out of the partial sums.
#[cfg(target_arch = "x86_64")]
pub(super) struct Scatter {
    pub(super) out: *mut f32,
    pub(super) plane: usize,
    pub(super) runs: [Vec<(isize, u16)>; WNR / 16],
}

#[cfg(target_arch = "x86_64")]
impl Scatter {
    /// The runs of a tile from flattened position `j` (rows of `pw`, `ow` kept), its
    /// first `valid` lanes computed.
    pub(super) fn set(&mut self, j: usize, valid: usize, [pw, ow]: [usize; 2]) {
        for (v, runs) in self.runs.iter_mut().enumerate() {
            runs.clear();
            let lanes = valid.saturating_sub(16 * v).min(16);
            let j = j + 16 * v;
            let (mut oy, mut ox, mut l) = (j / pw, j % pw, 0);
            while l < lanes {
                let in_row = (pw - ox).min(lanes - l);
                let kept = ow.saturating_sub(ox).min(in_row);
                if kept > 0 {
                    let keep = (((1u32 << kept) - 1) << l) as u16;
                    runs.push(((oy * ow + ox) as isize - l as isize, keep));
                }
                l += in_row;
                oy += 1;
                ox = 0;
            }
        }
    }
}

/// `acc[r·stride + c] (+)= Σ_t rows[r][t] · src[off[t] + c]` for r < WMR and c < 16·V ≤ WNR
/// (a partial tile computes only the `V` vectors that hold its `valid` positions; added
/// to what `acc` holds when `add`), touching only c < `valid` when `MASKED`: per tap three
/// loads of 16 positions, eight broadcast weights and 24 fused multiply-adds, with the 8x48
/// sums in registers.
///
/// # Safety
/// AVX-512F is available; `rows[r].add(t)` is readable for t < off.len();
/// `src.add(off[t] + c)` is readable for c < WNR (c < `valid` when `MASKED`);
/// `acc.add(r * stride + c)` is readable and writable for r < `nrows` ≤ WMR and c < WNR
/// (c < `valid` when `MASKED`). Rows from `nrows` on are summed and dropped. With
/// `scatter`, the sums go to its lanes' output positions instead of `acc` (which is then
/// only read, when `add`): row r's lane runs `(at, keep)` are written at
/// `out + r·plane + at + lane` for the lanes of `keep`, which must be writable. With `fin`
/// (`bias`, `relu`), row r's sums get `bias[r]` added (then ReLU: NaN kept, -0 to +0, as
/// the reference's) before they are stored.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tile_wide<const MASKED: bool, const V: usize>(
    rows: &[*const f32; WMR],
    src: *const f32,
    off: &[usize],
    acc: *mut f32,
    stride: usize,
    add: bool,
    valid: usize,
    nrows: usize,
    scatter: Option<&Scatter>,
    fin: Option<(&[f32; WMR], bool)>,
) {
    use std::arch::x86_64::*;
    let mask: [u16; V] = std::array::from_fn(|v| {
        let n = valid.saturating_sub(16 * v).min(16);
        ((1u32 << n) - 1) as u16
    });
    let mut c = [[_mm512_setzero_ps(); V]; WMR];
    if add {
        for (r, cr) in c.iter_mut().enumerate().take(nrows) {
            for (v, cv) in cr.iter_mut().enumerate() {
                // SAFETY: the caller's contract covers these reads (the writes below).
                *cv = unsafe {
                    if MASKED {
                        _mm512_maskz_loadu_ps(mask[v], acc.add(r * stride + 16 * v))
                    } else {
                        _mm512_loadu_ps(acc.add(r * stride + 16 * v))
                    }
                };
            }
        }
    }
    for (t, &o) in off.iter().enumerate() {
        // SAFETY: the caller's contract covers these reads.
        unsafe {
            let p = src.add(o);
            let b: [__m512; V] = std::array::from_fn(|v| {
                if MASKED {
                    _mm512_maskz_loadu_ps(mask[v], p.add(16 * v))
                } else {
                    _mm512_loadu_ps(p.add(16 * v))
                }
            });
            for (cr, row) in c.iter_mut().zip(rows) {
                let s = _mm512_set1_ps(*row.add(t));
                for (cv, bv) in cr.iter_mut().zip(&b) {
                    *cv = _mm512_fmadd_ps(s, *bv, *cv);
                }
            }
        }
    }
    if let Some((bias, relu)) = fin {
        let zero = _mm512_setzero_ps();
        for (cr, &b) in c.iter_mut().zip(bias) {
            let b = _mm512_set1_ps(b);
            for cv in cr.iter_mut() {
                *cv = _mm512_add_ps(*cv, b);
                if relu {
                    // Kept where x > 0 or x is NaN (unordered), else +0.
                    *cv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLE_UQ>(*cv, zero), *cv);
                }
            }
        }
    }
    if let Some(sc) = scatter {
        for (r, cr) in c.iter().enumerate().take(nrows) {
            for (v, cv) in cr.iter().enumerate() {
                for &(at, keep) in &sc.runs[v] {
                    // SAFETY: the caller's contract (`Scatter`) covers these writes.
                    unsafe {
                        let p = sc.out.wrapping_add(r * sc.plane).wrapping_offset(at);
                        _mm512_mask_storeu_ps(p, keep, *cv);
                    }
                }
            }
        }
        return;
    }
    for (r, cr) in c.iter().enumerate().take(nrows) {
        for (v, cv) in cr.iter().enumerate() {
            // SAFETY: the caller's contract covers these writes.
            unsafe {
                if MASKED {
                    _mm512_mask_storeu_ps(acc.add(r * stride + 16 * v), mask[v], *cv);
                } else {
                    _mm512_storeu_ps(acc.add(r * stride + 16 * v), *cv);
                }
            }
        }
    }
}

/// `panel[j·taps + t][l] = src[oy·pw + ox + off[t]]` where output position
/// `q = from[0] + j·NR + l = oy·ow + ox`, for j < `nt`, t < taps (`off.len()`), l < NR:
/// each tap's inputs for NR consecutive outputs, with zeros for positions from `from[1]` on
/// and past the end of `src`. An 8-lane run within one output row is one vector move (a
/// `[f32; 16]` read by value went through the stack and took a fifth of a 3x3's time).
///
/// # Safety
/// AVX2 is available; `panel` holds `nt · off.len()` lines.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather(
    panel: &mut [Line],
    src: &[f32],
    from: [usize; 2],
    [ow, pw]: [usize; 2],
    off: &[usize],
    nt: usize,
) {
    use std::arch::x86_64::*;
    const V: usize = NR / 8;
    let taps = off.len();
    let at = |q: usize| (q / ow) * pw + q % ow;
    // Each vector's first input (before the tap's offset) when its lanes are one row's,
    // else NONE.
    const NONE: usize = usize::MAX;
    let runs: Vec<usize> = (0..nt * V)
        .map(|k| {
            let q = from[0] + 8 * k;
            if q % ow + 8 <= ow && q + 8 <= from[1] {
                at(q)
            } else {
                NONE
            }
        })
        .collect();
    // Whether every run of every tap is inside `src` (else each is checked).
    let last = runs
        .iter()
        .filter(|&&a| a != NONE)
        .max()
        .copied()
        .unwrap_or(0);
    let inside = last + off.iter().max().copied().unwrap_or(0) + 8 <= src.len();
    for (t, &o) in off.iter().enumerate() {
        for (j, vecs) in runs.chunks_exact(V).enumerate() {
            let dst = &mut panel[j * taps + t].0;
            for (v, &a) in vecs.iter().enumerate() {
                if a != NONE && (inside || a + o + 8 <= src.len()) {
                    // SAFETY: `src[a + o..][..8]` is in bounds (checked above); a Line is
                    // NR floats aligned to 32 bytes and 8·v is a multiple of 8.
                    unsafe {
                        let x = _mm256_loadu_ps(src.as_ptr().add(a + o));
                        _mm256_store_ps(dst.as_mut_ptr().add(8 * v), x);
                    }
                } else {
                    let q = from[0] + j * NR + 8 * v;
                    for (l, d) in dst[8 * v..8 * v + 8].iter_mut().enumerate() {
                        *d = if q + l < from[1] {
                            src.get(at(q + l) + o).copied().unwrap_or(0.0)
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    }
}
