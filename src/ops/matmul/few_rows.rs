//! cpu:0's products of a few rows over a long K that read B where it lies ([`few_rows`]),
//! instead of packing all of B per call as the `gemm` crate does.

use super::cpu::{Operand, PAR_MACS, R, W};
use rayon::prelude::*;

/// Rows of C up to which an f32 product goes through [`few_rows`] rather than the `gemm`
/// crate, which packs all of B on every call: a recurrent step's `h·Rᵀ` (`[8, 256] ·
/// [256, 1024]`) spent most of its time packing the 1 MiB of R (`benches/cpu_matmul.rs`).
pub const FEW_ROWS: usize = 16;

/// [`FEW_ROWS`] for a B stored transposed (`x · Wᵀ`, a linear layer as PyTorch stores it),
/// where the dot products stay ahead further: `[24, 768] · [768, 3072]ᵀ` at 69 against
/// `gemm`'s 53 GFLOP/s on one thread, `[32, 768] · [768, 768]ᵀ` at 49 against 42; a row-major
/// B's strips fall behind past 16 rows (24 rows: 23 against 33).
pub const FEW_ROWS_T: usize = 32;

/// The shortest K [`few_rows`] takes: below it B is small, packing it costs little, and
/// `gemm`'s kernels were ahead (conv1's `[16, 9] · [9, 4096]`: 27 against 22 GFLOP/s on one
/// thread). A single row (a vector times a matrix) stays with `gemm` too: 23 against 17;
/// and so does a CPU without AVX2, where only the portable loops would run.
pub const FEW_ROWS_MIN_K: usize = 64;

/// Columns of C a task of [`few_rows`] takes at least, so each task's B reads stay long.
const FEW_TASK_COLS: usize = 64;

/// `C = A · B` (`[m, k] · [k, n]`, C row-major and fully written) for a few rows of A
/// (`m ≤` [`FEW_ROWS`], or [`FEW_ROWS_T`] for a transposed B), reading B in place: no
/// packing, so a weight is read once per call
/// rather than copied and then read. Two layouts of B:
/// - rows contiguous (`b.cols == 1`): strips of `W` columns, each strip's `k × W` block
///   reused from cache by every block of `R` rows, the accumulators in registers;
/// - columns contiguous (`b.rows == 1`, B stored transposed, as `x · Wᵀ` is): dot products
///   of A's rows (packed contiguous when they are not) with four of B's columns at a time,
///   in 8-wide vectors.
///
/// Returns `false` (nothing written) for other layouts. Column ranges run on rayon's pool
/// above `PAR_MACS`. The caller checks that every index the shapes imply lies inside A
/// and B.
pub fn few_rows(
    m: usize,
    k: usize,
    n: usize,
    a: Operand<'_>,
    b: Operand<'_>,
    c: &mut [f32],
) -> bool {
    if c.len() < m * n || !(b.cols == 1 || b.rows == 1) {
        return false;
    }
    if m == 0 || n == 0 {
        return true;
    }
    // Dot products want A's rows contiguous; a few rows are cheap to pack.
    let packed: Vec<f32>;
    let a = if b.cols != 1 && a.cols != 1 {
        packed = (0..m * k)
            .map(|x| a.data[(x / k.max(1)) * a.rows + (x % k.max(1)) * a.cols])
            .collect();
        Operand {
            data: &packed,
            rows: k,
            cols: 1,
        }
    } else {
        a
    };
    let threads = rayon::current_num_threads();
    let width = if m * k * n >= PAR_MACS && threads > 1 {
        n.div_ceil(threads * 4)
            .next_multiple_of(W)
            .max(FEW_TASK_COLS)
    } else {
        n
    };
    let task = |j0: usize| -> Vec<f32> {
        let j1 = (j0 + width).min(n);
        let mut out = vec![0f32; m * (j1 - j0)];
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
                // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                unsafe { few_rows_fma(m, k, (j0, j1), a, b, &mut out) };
                return out;
            }
        }
        few_rows_cols::<false>(m, k, (j0, j1), a, b, &mut out);
        out
    };
    if width >= n {
        let out = task(0);
        c[..m * n].copy_from_slice(&out);
        return true;
    }
    let parts: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(width))
        .into_par_iter()
        .map(|t| (t * width, task(t * width)))
        .collect();
    for (j0, part) in parts {
        let w = part.len() / m;
        for (i, row) in part.chunks_exact(w).enumerate() {
            c[i * n + j0..][..w].copy_from_slice(row);
        }
    }
    true
}

/// [`few_rows_cols`] compiled for AVX2 with fused multiply-adds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn few_rows_fma(
    m: usize,
    k: usize,
    cols: (usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
) {
    few_rows_cols::<true>(m, k, cols, a, b, out)
}

/// Columns `cols.0..cols.1` of C into `out` (`m` rows of that width).
#[inline(always)]
fn few_rows_cols<const FMA: bool>(
    m: usize,
    k: usize,
    (j0, j1): (usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
) {
    let w = j1 - j0;
    if b.cols == 1 {
        for s in (j0..j1).step_by(W) {
            let full = m / R * R;
            for r0 in (0..full).step_by(R) {
                strip_rows::<R, FMA>(r0, k, (s, j1), a, b, &mut out[r0 * w..], w, j0);
            }
            for r0 in full..m {
                strip_rows::<1, FMA>(r0, k, (s, j1), a, b, &mut out[r0 * w..], w, j0);
            }
        }
    } else {
        let quads = j0 + (w / 4) * 4;
        for q in (j0..quads).step_by(4) {
            #[cfg(target_arch = "x86_64")]
            if FMA && x86::dots(m, k, q, a, b, out, w, j0) {
                continue;
            }
            rows_dots::<4, FMA>(m, k, q, a, b, out, w, j0);
        }
        for q in quads..j1 {
            rows_dots::<1, FMA>(m, k, q, a, b, out, w, j0);
        }
    }
}

/// [`strip`] in intrinsics where the strip is full and the CPU has FMA, else portably.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn strip_rows<const RB: usize, const FMA: bool>(
    i0: usize,
    k: usize,
    cols: (usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    w: usize,
    j0: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if FMA && x86::strip::<RB>(i0, k, cols, a, b, out, w, j0) {
        return;
    }
    strip::<RB, FMA>(i0, k, cols, a, b, out, w, j0);
}

/// Rows `i0..i0 + RB` of C over the columns `s..min(s + W, end)`, B's rows contiguous;
/// `out` starts at row `i0` of a block `w` wide whose first column is C's `j0`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn strip<const RB: usize, const FMA: bool>(
    i0: usize,
    k: usize,
    (s, end): (usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    w: usize,
    j0: usize,
) {
    let cols = W.min(end - s);
    let mut acc = [[0f32; W]; RB];
    let mut tail = [0f32; W];
    for kk in 0..k {
        let row = &b.data[kk * b.rows + s..];
        let bv: &[f32; W] = match row.get(..W).filter(|_| cols == W) {
            Some(full) => full.try_into().unwrap_or(&tail),
            None => {
                tail[..cols].copy_from_slice(&row[..cols]);
                &tail
            }
        };
        for (r, acc) in acc.iter_mut().enumerate() {
            let av = a.data[(i0 + r) * a.rows + kk * a.cols];
            for (x, &y) in acc.iter_mut().zip(bv) {
                *x = if FMA { av.mul_add(y, *x) } else { av * y + *x };
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        out[r * w + (s - j0)..][..cols].copy_from_slice(&acc[..cols]);
    }
}

/// Columns `q..q + QB` of C for every row, B's columns contiguous and A's rows contiguous:
/// each entry a dot product over K in 8-wide partial sums, the columns' K elements reused
/// from cache by every row; `out` is the block `w` wide whose first column is C's `j0`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn rows_dots<const QB: usize, const FMA: bool>(
    m: usize,
    k: usize,
    q: usize,
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    w: usize,
    j0: usize,
) {
    const V: usize = 8;
    let body = k / V * V;
    let col = |j: usize| &b.data[(q + j) * b.cols..][..k];
    let bcols: [&[f32]; QB] = std::array::from_fn(col);
    for i in 0..m {
        let arow = &a.data[i * a.rows..][..k];
        let mut acc = [[0f32; V]; QB];
        for kk in (0..body).step_by(V) {
            let av: &[f32; V] = arow[kk..kk + V].try_into().unwrap_or(&[0.0; V]);
            for (acc, bc) in acc.iter_mut().zip(&bcols) {
                let bv: &[f32; V] = bc[kk..kk + V].try_into().unwrap_or(&[0.0; V]);
                for l in 0..V {
                    acc[l] = if FMA {
                        av[l].mul_add(bv[l], acc[l])
                    } else {
                        av[l] * bv[l] + acc[l]
                    };
                }
            }
        }
        for (j, (acc, bc)) in acc.iter().zip(&bcols).enumerate() {
            let mut sum = acc.iter().sum::<f32>();
            for kk in body..k {
                sum = if FMA {
                    arow[kk].mul_add(bc[kk], sum)
                } else {
                    arow[kk] * bc[kk] + sum
                };
            }
            out[i * w + (q - j0) + j] = sum;
        }
    }
}

/// [`few_rows`]' inner loops in AVX2 and FMA intrinsics: the portable forms above are not
/// vectorized into registers by the compiler (3 GFLOP/s for a strip). Each checks the
/// slices it reads and writes against the shapes first and returns `false` (nothing
/// written) where they do not hold, so the portable form then runs and reports nothing
/// worse than it would.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Operand, W};
    use std::arch::x86_64::*;

    /// [`super::strip`] for a full strip of [`W`] columns (`false` for the last, narrower one).
    /// Must run where AVX2 and FMA are present (the caller's `FMA` says so).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn strip<const RB: usize>(
        i0: usize,
        k: usize,
        (s, end): (usize, usize),
        a: Operand<'_>,
        b: Operand<'_>,
        out: &mut [f32],
        w: usize,
        j0: usize,
    ) -> bool {
        let fits = k > 0
            && s + W <= end
            && b.cols == 1
            && (k - 1) * b.rows + s + W <= b.data.len()
            && (i0 + RB - 1) * a.rows + (k - 1) * a.cols < a.data.len()
            && (RB - 1) * w + (s - j0) + W <= out.len();
        if !fits {
            return false;
        }
        // SAFETY: AVX2 and FMA are present (the caller's contract); every read and write
        // lies inside the slices (checked just above: B at `kk * b.rows + s .. + W` for
        // kk < k, A at `(i0 + r) * a.rows + kk * a.cols` for r < RB, kk < k, `out` at
        // `r * w + s - j0 .. + W`).
        unsafe { strip_avx2::<RB>(i0, k, s, a, b, out, w, j0) };
        true
    }

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn strip_avx2<const RB: usize>(
        i0: usize,
        k: usize,
        s: usize,
        a: Operand<'_>,
        b: Operand<'_>,
        out: &mut [f32],
        w: usize,
        j0: usize,
    ) {
        let (ap, bp, op) = (a.data.as_ptr(), b.data.as_ptr(), out.as_mut_ptr());
        let mut acc = [[_mm256_setzero_ps(); 2]; RB];
        for kk in 0..k {
            // SAFETY: in bounds per `strip`'s check.
            unsafe {
                let row = bp.add(kk * b.rows + s);
                let (b0, b1) = (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ap.add((i0 + r) * a.rows + kk * a.cols));
                    acc[0] = _mm256_fmadd_ps(av, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(av, b1, acc[1]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: in bounds per `strip`'s check.
            unsafe {
                let o = op.add(r * w + s - j0);
                _mm256_storeu_ps(o, acc[0]);
                _mm256_storeu_ps(o.add(8), acc[1]);
            }
        }
    }

    /// [`super::rows_dots`] for four columns, rows two at a time. Must run where AVX2 and
    /// FMA are present (the caller's `FMA` says so).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dots(
        m: usize,
        k: usize,
        q: usize,
        a: Operand<'_>,
        b: Operand<'_>,
        out: &mut [f32],
        w: usize,
        j0: usize,
    ) -> bool {
        let fits = m > 0
            && k > 0
            && b.rows == 1
            && a.cols == 1
            && (q + 3) * b.cols + k <= b.data.len()
            && (m - 1) * a.rows + k <= a.data.len()
            && q >= j0
            && (m - 1) * w + (q - j0) + 4 <= out.len();
        if !fits {
            return false;
        }
        // SAFETY: AVX2 and FMA are present (the caller's contract); B's columns
        // `(q + j) * b.cols .. + k` for j < 4, A's rows `i * a.rows .. + k` for i < m and
        // `out` at `i * w + q - j0 .. + 4` lie inside the slices (checked just above).
        unsafe { dots_avx2(m, k, q, a, b, out, w, j0) };
        true
    }

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn dots_avx2(
        m: usize,
        k: usize,
        q: usize,
        a: Operand<'_>,
        b: Operand<'_>,
        out: &mut [f32],
        w: usize,
        j0: usize,
    ) {
        let body = k / 8 * 8;
        let (ap, bp, op) = (a.data.as_ptr(), b.data.as_ptr(), out.as_mut_ptr());
        // SAFETY (every block below): in bounds per `dots`' check.
        let bc: [*const f32; 4] = std::array::from_fn(|j| unsafe { bp.add((q + j) * b.cols) });
        let mut i = 0;
        while i < m {
            let rows = if i + 1 < m { 2 } else { 1 };
            let ar: [*const f32; 2] =
                std::array::from_fn(|r| unsafe { ap.add((i + r.min(rows - 1)) * a.rows) });
            let mut acc = [[_mm256_setzero_ps(); 4]; 2];
            let mut kk = 0;
            while kk < body {
                unsafe {
                    let av = [
                        _mm256_loadu_ps(ar[0].add(kk)),
                        _mm256_loadu_ps(ar[1].add(kk)),
                    ];
                    for (j, &c) in bc.iter().enumerate() {
                        let bv = _mm256_loadu_ps(c.add(kk));
                        acc[0][j] = _mm256_fmadd_ps(av[0], bv, acc[0][j]);
                        acc[1][j] = _mm256_fmadd_ps(av[1], bv, acc[1][j]);
                    }
                }
                kk += 8;
            }
            for (r, acc) in acc.iter().enumerate().take(rows) {
                for (j, &v) in acc.iter().enumerate() {
                    unsafe {
                        let mut sum = hsum(v);
                        for t in body..k {
                            sum = (*ar[r].add(t)).mul_add(*bc[j].add(t), sum);
                        }
                        *op.add((i + r) * w + q - j0 + j) = sum;
                    }
                }
            }
            i += rows;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }
}
