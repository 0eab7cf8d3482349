//! The row folds of cpu:0's reductions, each compiled for the widest vector form the CPU
//! runs: the fold job's closures are compiled without target features, and the folds ran 4
//! lanes wide there (12% of a quantizer's min over a `[128, 3072]` prologue). The same
//! operations in the same order, so the same bits.

use super::{Start, SUM_BLOCK, TREE_WG};
use bytemuck::Pod;

/// [`vec4_fold`] in the widest vector form the CPU runs (as [`tree`]).
pub(super) fn vec4<T: Pod, F: Fn(T, T) -> T + Copy, const R: usize>(
    rows: [&[T]; R],
    start: Start,
    id: T,
    c: F,
) -> [T; R] {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::simd::{level, SimdLevel};
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide<T: Pod, F: Fn(T, T) -> T + Copy, const R: usize>(
            rows: [&[T]; R],
            start: Start,
            id: T,
            c: F,
        ) -> [T; R] {
            vec4_fold(rows, start, id, c)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T: Pod, F: Fn(T, T) -> T + Copy, const R: usize>(
            rows: [&[T]; R],
            start: Start,
            id: T,
            c: F,
        ) -> [T; R] {
            vec4_fold(rows, start, id, c)
        }
        if level() >= SimdLevel::Avx512 {
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
            return unsafe { wide(rows, start, id, c) };
        }
        if level() >= SimdLevel::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { avx2(rows, start, id, c) };
        }
    }
    vec4_fold(rows, start, id, c)
}

/// The RowsVec4 fold of `R` equally long rows side by side: four lane accumulators per row
/// (`(l0 ∘ l1) ∘ (l2 ∘ l3)` at the end); sums add blocks of `4 * SUM_BLOCK` elements into
/// the lanes, the others start from the first four elements.
#[inline(always)]
fn vec4_fold<T: Pod, F: Fn(T, T) -> T + Copy, const R: usize>(
    rows: [&[T]; R],
    start: Start,
    id: T,
    c: F,
) -> [T; R] {
    let q: [&[[T; 4]]; R] = rows.map(quads);
    let len = q.iter().map(|r| r.len()).min().unwrap_or(0);
    // Folds quads `lo..hi` of every row into `acc`; slicing first lets the loop run without
    // bounds checks, so the lanes become SIMD registers.
    let fold = |acc: &mut [[T; 4]; R], lo: usize, hi: usize| {
        let blocks: [&[[T; 4]]; R] = std::array::from_fn(|k| &q[k][lo..hi]);
        // Indexing all `R` rows with one counter is the point (it keeps the rows in step).
        #[allow(clippy::needless_range_loop)]
        for i in 0..hi - lo {
            for k in 0..R {
                let v = blocks[k][i];
                for l in 0..4 {
                    acc[k][l] = c(acc[k][l], v[l]);
                }
            }
        }
    };
    let lanes = if start == Start::SumBlocks {
        let mut lanes = [[id; 4]; R];
        let mut lo = 0;
        while lo < len {
            let hi = (lo + SUM_BLOCK).min(len);
            let mut s = [[id; 4]; R];
            fold(&mut s, lo, hi);
            for (lanes, s) in lanes.iter_mut().zip(s) {
                for (l, v) in lanes.iter_mut().zip(s) {
                    *l = c(*l, v);
                }
            }
            lo = hi;
        }
        lanes
    } else {
        let mut lanes: [[T; 4]; R] =
            std::array::from_fn(|j| q[j].first().copied().unwrap_or([id; 4]));
        fold(&mut lanes, 1.min(len), len);
        lanes
    };
    lanes.map(|l| c(c(l[0], l[1]), c(l[2], l[3])))
}

/// `row`'s whole quads.
fn quads<T: Pod>(row: &[T]) -> &[[T; 4]] {
    bytemuck::cast_slice(&row[..row.len() / 4 * 4])
}

/// [`tree_fold`] in the widest vector form the CPU runs: the job's closures are compiled
/// without target features, and the fold of 256 partials then ran 4 lanes wide (12% of a
/// quantizer's min over a `[128, 3072]` prologue). Same operations, same order, same bits.
pub(super) fn tree<T: Pod, F: Fn(T, T) -> T + Copy>(row: &[T], c: F) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::simd::{level, SimdLevel};
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide<T: Pod, F: Fn(T, T) -> T + Copy>(row: &[T], c: F) -> T {
            tree_fold(row, c)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T: Pod, F: Fn(T, T) -> T + Copy>(row: &[T], c: F) -> T {
            tree_fold(row, c)
        }
        if level() >= SimdLevel::Avx512 {
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
            return unsafe { wide(row, c) };
        }
        if level() >= SimdLevel::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { avx2(row, c) };
        }
    }
    tree_fold(row, c)
}

/// The Tree fold of one row: thread `t` of [`TREE_WG`] folds elements `t`, `t + TREE_WG`, …,
/// then a tree halves the partials. `row` holds at least `TREE_WG` elements.
#[inline(always)]
fn tree_fold<T: Pod, F: Fn(T, T) -> T + Copy>(row: &[T], c: F) -> T {
    let mut part = [T::zeroed(); TREE_WG];
    part.copy_from_slice(&row[..TREE_WG]);
    for blk in row[TREE_WG..].chunks(TREE_WG) {
        for (p, &v) in part.iter_mut().zip(blk) {
            *p = c(*p, v);
        }
    }
    let mut s = TREE_WG / 2;
    while s > 0 {
        for t in 0..s {
            part[t] = c(part[t], part[t + s]);
        }
        s /= 2;
    }
    part[0]
}
