//! cpu:0's f32 GEMM for a constant B (a layer's weights), and the AVX2 micro-kernel it
//! shares with the direct convolution: B packed once per plan into panels of [`NR`]
//! columns ([`PackedF32`]), A packed per call into blocks of [`MR`] rows, and each 4x24
//! block of C summed in twelve registers ([`tile`]). The `gemm` crate packs both operands
//! on every call; at a transformer's small M (64 tokens) its packing of B cost as much as
//! the multiply-adds.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused))]
use rayon::prelude::*;

/// Rows of C (of A) per micro-kernel tile.
pub(crate) const MR: usize = 4;
/// Columns of C (of B) per micro-kernel tile.
pub(crate) const NR: usize = 24;
/// Depth summed per pass: a panel's 256 x 24 floats (24 KiB) stay in L1 while every block
/// of A's rows is multiplied by them.
const KC: usize = 256;
/// Row blocks of A one task multiplies (128 rows), so that its rows of A stay in L2.
const MC_BLOCKS: usize = 32;
/// Multiply-adds from which a product runs on rayon's pool.
const PAR_MACS: usize = 1 << 20;

/// NR consecutive floats (a tap's positions, a panel's row), aligned for 8-lane loads.
#[derive(Clone, Copy)]
#[repr(align(32))]
pub(crate) struct Line(pub(crate) [f32; NR]);

/// B (`[k, n]`) packed into panels of [`NR`] columns, each `k` lines (zeros past `n`).
pub(crate) struct PackedF32 {
    k: usize,
    n: usize,
    lines: Vec<Line>,
}

impl PackedF32 {
    /// B read at `b[kk·kb + j·nb]` for kk < k, j < n; `None` (not packed) on a CPU
    /// without AVX2 and FMA or where a read would fall outside `b`.
    pub(crate) fn pack(k: usize, n: usize, b: &[f32], [kb, nb]: [usize; 2]) -> Option<Self> {
        if crate::ops::simd::level() < crate::ops::simd::SimdLevel::Avx2
            || k == 0
            || n == 0
            || (k - 1) * kb + (n - 1) * nb >= b.len()
        {
            return None;
        }
        let blocks = n.div_ceil(NR);
        let mut lines = vec![Line([0.0; NR]); blocks * k];
        for (jb, panel) in lines.chunks_exact_mut(k).enumerate() {
            for (kk, line) in panel.iter_mut().enumerate() {
                for (c, v) in line.0.iter_mut().enumerate().take(n - jb * NR) {
                    *v = b[kk * kb + (jb * NR + c) * nb];
                }
            }
        }
        Some(PackedF32 { k, n, lines })
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        (self.lines.len() * std::mem::size_of::<Line>()) as u64
    }

    /// Whether this is B for a product over `k` with `n` columns.
    pub(crate) fn fits(&self, k: usize, n: usize) -> bool {
        self.k == k && self.n == n
    }
}

/// `C = A · B` (`c`: `[m, n]` row-major, written without being read) with A read in place
/// at `a[i·ra + kk·ka]` (only a last block of fewer than [`MR`] rows is copied, padded
/// with zero rows) and B packed; `false` (nothing written) where `a` is too short.
pub(crate) fn gemm_packed(
    m: usize,
    a: &[f32],
    [ra, ka]: [usize; 2],
    p: &PackedF32,
    c: &mut [f32],
) -> bool {
    let (k, n) = (p.k, p.n);
    if m == 0 || c.len() != m * n || (m - 1) * ra + (k - 1) * ka >= a.len() {
        return m == 0 && c.is_empty();
    }
    let mb = m.div_ceil(MR);
    let full = m / MR;
    let mut tail = vec![0.0f32; if full < mb { k * MR } else { 0 }];
    for (r, i) in (full * MR..m).enumerate() {
        for kk in 0..k {
            tail[kk * MR + r] = a[i * ra + kk * ka];
        }
    }
    let nbk = n.div_ceil(NR);
    let threads = rayon::current_num_threads().max(1);
    let par = m * k * n >= PAR_MACS && threads > 1;
    // Tasks of column blocks, and of row blocks too where there are few columns.
    let want = if par { 3 * threads } else { 1 };
    let tc = nbk.min(want);
    // At most MC_BLOCKS row blocks per task: their rows of A (per pass, 128 KiB) stay in
    // L2 while every panel of the task's columns is multiplied by them.
    let tr = want.div_ceil(tc).min(mb).max(mb.div_ceil(MC_BLOCKS));
    let (cs, rs) = (nbk.div_ceil(tc), mb.div_ceil(tr));
    let out = SendPtr(c.as_mut_ptr());
    let a = Rows {
        a,
        strides: [ra, ka],
        full,
        tail: &tail,
    };
    let task = |t: usize| {
        let (cj, ri) = (t / tr, t % tr);
        let cols = cj * cs..((cj + 1) * cs).min(nbk);
        let rows = ri * rs..((ri + 1) * rs).min(mb);
        // SAFETY: AVX2 and FMA (`pack` made `p`); the task writes C's blocks of these
        // rows and columns only, each inside `c` ([m, n]), no other task's.
        unsafe { blocks(&a, p, [m, n], cols, rows, out) };
    };
    if par {
        (0..tc * tr).into_par_iter().for_each(task);
    } else {
        (0..tc * tr).for_each(task);
    }
    true
}

/// A as the tiles read it: full blocks of MR rows in place, the last partial one from
/// `tail` (`[k][MR]`).
struct Rows<'a> {
    a: &'a [f32],
    strides: [usize; 2],
    full: usize,
    tail: &'a [f32],
}

impl Rows<'_> {
    /// Row block `ib` from depth `k0`: its first weight and `[row, step]` strides.
    fn at(&self, ib: usize, k0: usize) -> (*const f32, [usize; 2]) {
        let [ra, ka] = self.strides;
        if ib < self.full {
            (self.a[ib * MR * ra + k0 * ka..].as_ptr(), [ra, ka])
        } else {
            (self.tail[k0 * MR..].as_ptr(), [1, MR])
        }
    }
}

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: tasks write disjoint blocks of C through it (`gemm_packed`).
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// C's blocks of column blocks `cols` and row blocks `rows`.
///
/// # Safety
/// AVX2 and FMA are available; `c` holds `[m, n]` floats, of which these blocks are the
/// caller's alone; A's rows (`a`) hold k weights each.
unsafe fn blocks(
    a: &Rows<'_>,
    p: &PackedF32,
    [m, n]: [usize; 2],
    cols: std::ops::Range<usize>,
    rows: std::ops::Range<usize>,
    c: SendPtr,
) {
    let k = p.k;
    // Edge blocks (fewer than MR rows or NR columns) sum into scratch across passes.
    let mut edge = vec![[[0.0f32; NR]; MR]; rows.len()];
    for jb in cols {
        let width = (n - jb * NR).min(NR);
        for k0 in (0..k).step_by(KC) {
            let k1 = (k0 + KC).min(k);
            let lines = &p.lines[jb * k + k0..jb * k + k1];
            for (e, ib) in rows.clone().enumerate() {
                let (w, strides) = a.at(ib, k0);
                let full = width == NR && (m - ib * MR) >= MR;
                let (at, stride) = if full {
                    (c.0.wrapping_add(ib * MR * n + jb * NR), n)
                } else {
                    (edge[e].as_mut_ptr().cast::<f32>(), NR)
                };
                // SAFETY: AVX2 and FMA (the caller's); `w` reads rows ib·MR.. of A (or the
                // tail) at depths k0..k1; a full block is C's rows ib·MR.. (MR of them) at
                // columns jb·NR.. (NR), inside `c`, the caller's; else the scratch.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    tile_at(lines, w, strides, at, stride, k0 > 0)
                };
                // Elsewhere `PackedF32::pack` packs nothing, so no product gets here.
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (lines, w, strides, at, stride);
            }
        }
        for (e, ib) in rows.clone().enumerate() {
            let h = (m - ib * MR).min(MR);
            if width == NR && h == MR {
                continue;
            }
            for (r, row) in edge[e].iter().enumerate().take(h) {
                // SAFETY: row ib·MR + r < m, columns jb·NR..jb·NR + width ≤ n of `c`.
                unsafe {
                    let d = c.0.add((ib * MR + r) * n + jb * NR);
                    std::ptr::copy_nonoverlapping(row.as_ptr(), d, width);
                }
            }
        }
    }
}

/// `acc[r·stride + i] (+)= Σ_t wb[t·MR + r] · panel[t][i]` for r < MR, i < NR (added to
/// what `acc` holds when `add`): [`tile_at`] over weights packed `[t][MR]`.
///
/// # Safety
/// AVX2 and FMA are available; `wb` holds MR weights per line of `panel`;
/// `acc.add(r * stride + i)` is readable and writable for r < MR, i < NR.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn tile(panel: &[Line], wb: &[f32], acc: *mut f32, stride: usize, add: bool) {
    let n = panel.len().min(wb.len() / MR);
    // SAFETY: the caller's contract; weight r of line t is wb[t·MR + r], inside `wb`.
    unsafe { tile_at(&panel[..n], wb.as_ptr(), [1, MR], acc, stride, add) }
}

/// `acc[r·stride + i] (+)= Σ_t w[r·rs + t·ts] · panel[t][i]` for r < MR, i < NR (added to
/// what `acc` holds when `add`), the weights' row and step strides `[rs, ts]` in floats:
/// per line three loads, four broadcast weights and twelve fused multiply-adds, the 4x24
/// sums in twelve registers. In assembly: with all sixteen registers taken, LLVM spilled a
/// sum and shuffled registers every line (half the speed).
///
/// # Safety
/// AVX2 and FMA are available; `w.add(r * rs + t * ts)` is readable for r < MR,
/// t < panel.len(); `acc.add(r * stride + i)` is readable and writable for r < MR, i < NR.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn tile_at(
    panel: &[Line],
    w: *const f32,
    [rs, ts]: [usize; 2],
    acc: *mut f32,
    stride: usize,
    add: bool,
) {
    use std::arch::x86_64::*;
    const _: () = assert!(MR == 4 && NR == 24);
    let mut c = [[_mm256_setzero_ps(); 3]; MR];
    if add {
        for (r, cr) in c.iter_mut().enumerate() {
            for (v, cv) in cr.iter_mut().enumerate() {
                // SAFETY: the caller's contract covers these reads (the writes below).
                *cv = unsafe { _mm256_loadu_ps(acc.add(r * stride + 8 * v)) };
            }
        }
    }
    let n = panel.len();
    if n > 0 {
        let [[c00, c01, c02], [c10, c11, c12], [c20, c21, c22], [c30, c31, c32]] = &mut c;
        let (s1, s3, step) = (rs * 4, rs * 12, ts * 4);
        // SAFETY: reads n lines of NR floats (aligned to 32 bytes) from `panel` and
        // w[r·rs + t·ts] for r < MR, t < n (the caller's); registers only otherwise.
        unsafe {
            std::arch::asm!(
                "2:",
                "vmovaps {b0}, ymmword ptr [{p}]",
                "vmovaps {b1}, ymmword ptr [{p} + 32]",
                "vmovaps {b2}, ymmword ptr [{p} + 64]",
                "vbroadcastss {a}, dword ptr [{w}]",
                "vfmadd231ps {c00}, {a}, {b0}",
                "vfmadd231ps {c01}, {a}, {b1}",
                "vfmadd231ps {c02}, {a}, {b2}",
                "vbroadcastss {a}, dword ptr [{w} + {s1}]",
                "vfmadd231ps {c10}, {a}, {b0}",
                "vfmadd231ps {c11}, {a}, {b1}",
                "vfmadd231ps {c12}, {a}, {b2}",
                "vbroadcastss {a}, dword ptr [{w} + {s1} * 2]",
                "vfmadd231ps {c20}, {a}, {b0}",
                "vfmadd231ps {c21}, {a}, {b1}",
                "vfmadd231ps {c22}, {a}, {b2}",
                "vbroadcastss {a}, dword ptr [{w} + {s3}]",
                "vfmadd231ps {c30}, {a}, {b0}",
                "vfmadd231ps {c31}, {a}, {b1}",
                "vfmadd231ps {c32}, {a}, {b2}",
                "add {p}, 96",
                "add {w}, {step}",
                "dec {n}",
                "jnz 2b",
                p = inout(reg) panel.as_ptr() => _,
                w = inout(reg) w => _,
                n = inout(reg) n => _,
                s1 = in(reg) s1,
                s3 = in(reg) s3,
                step = in(reg) step,
                b0 = out(ymm_reg) _,
                b1 = out(ymm_reg) _,
                b2 = out(ymm_reg) _,
                a = out(ymm_reg) _,
                c00 = inout(ymm_reg) *c00,
                c01 = inout(ymm_reg) *c01,
                c02 = inout(ymm_reg) *c02,
                c10 = inout(ymm_reg) *c10,
                c11 = inout(ymm_reg) *c11,
                c12 = inout(ymm_reg) *c12,
                c20 = inout(ymm_reg) *c20,
                c21 = inout(ymm_reg) *c21,
                c22 = inout(ymm_reg) *c22,
                c30 = inout(ymm_reg) *c30,
                c31 = inout(ymm_reg) *c31,
                c32 = inout(ymm_reg) *c32,
                options(nostack, readonly),
            );
        }
    }
    for (r, cr) in c.iter().enumerate() {
        for (v, cv) in cr.iter().enumerate() {
            // SAFETY: the caller's contract covers these writes.
            unsafe { _mm256_storeu_ps(acc.add(r * stride + 8 * v), *cv) };
        }
    }
}
