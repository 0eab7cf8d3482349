//! The matmul kernel on the CPU: f32 (and f16, widened to f32) products through the `gemm`
//! crate's blocked, vectorized GEMM ([`sgemm`]); i32 products through the i16 pair kernel
//! ([`super::igemm`]), f64 GEMM or the scalar reference loop, whichever is exact. Batches broadcast through zero strides, split-K chunks and operands stored
//! transposed are read in place, as the WGSL kernels read them.
//!
//! sgemm sums over K in its own order (blocked, with FMA where the CPU has it), so f32
//! results differ from the WGSL kernels' in the last bits; NaN and infinities propagate as
//! IEEE arithmetic does.

use super::igemm::{igemm, IMat};
use super::*;
use rayon::prelude::*;

/// Multiply-adds from which [`sgemm`] spreads one product over rayon's pool. Measured with
/// `benches/cpu_matmul.rs` (2 shared cores, AVX2+FMA, six runs): below it `gemm` on one
/// thread beat two threads on every shape (conv1's `[16,9]@[9,4096]` 24–48 GFLOP/s against
/// 13–25, `[256,512]@[512,10]` 37–57 against 30–42, conv2's products 5–25% ahead); from W4's
/// layers up (≥ 67M multiply-adds) the two tie on a busy machine and the threads are what a
/// quiet or wider one gains from. No bench shape lies between 4.7M and 67M.
pub(crate) const GEMM_PAR_MACS: usize = 1 << 24;

/// `C = A · B + beta · C` in f32, `[m, k] · [k, n]`, each matrix through its (row, column)
/// strides in elements (matrixmultiply's convention; `beta == 0.0` writes C without reading
/// it, so C may hold anything, NaN included). Runs the `gemm` crate, single-threaded below
/// [`GEMM_PAR_MACS`] multiply-adds and on rayon's pool above (see there for the measurement).
///
/// # Safety
/// For i < m, j < n, kk < k: `a.offset(i * rsa + kk * csa)` and `b.offset(kk * rsb + j * csb)`
/// are valid to read and `c.offset(i * rsc + j * csc)` valid to read and write; C's elements
/// are distinct and alias neither A nor B.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
) {
    let par = if m.saturating_mul(k).saturating_mul(n) >= GEMM_PAR_MACS {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the caller's contract is gemm_with's.
    unsafe { gemm_with(par, m, k, n, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
}

/// [`sgemm`] on the calling thread only, for callers that run several products in
/// parallel themselves.
///
/// # Safety
/// As [`sgemm`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_serial(
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
) {
    // SAFETY: the caller's contract is gemm_with's.
    unsafe {
        gemm_with(
            gemm::Parallelism::None,
            m,
            k,
            n,
            a,
            rsa,
            csa,
            b,
            rsb,
            csb,
            beta,
            c,
            rsc,
            csc,
        )
    }
}

/// [`sgemm`]'s product with the given threading.
///
/// # Safety
/// As [`sgemm`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_with(
    par: gemm::Parallelism,
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
) {
    // SAFETY: the caller's contract (sgemm's) is gemm's: it reads A and B and writes C only at
    // those offsets. gemm computes `dst = alpha·dst + beta·lhs·rhs`, so our `beta` is its
    // `alpha` (used only when `read_dst`) and its `beta` is 1; no conjugation for reals.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            csc,
            rsc,
            beta != 0.0,
            a,
            csa,
            rsa,
            b,
            csb,
            rsb,
            beta,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

/// Columns of C the direct kernel keeps in registers per row: two AVX vectors of f32.
const W: usize = 16;
/// Rows of A the direct kernel handles together, sharing each loaded chunk of B.
const R: usize = 4;
/// Multiply-adds above which the direct kernel spreads row blocks over rayon's pool.
const PAR_MACS: usize = 1 << 17;

impl MatMulKernel {
    /// `inputs`: A, B, then the epilogue's extra inputs.
    pub fn run_fast(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let out = if self.dtype == DType::F16 {
            // f16 accumulates in f32 (as the WGSL kernels do) and rounds once at the end.
            let wide = MatMulKernel {
                dtype: DType::F32,
                epilogue: None,
                ..self.clone()
            };
            let widen = |x: &[u32]| x.iter().map(|&w| f16_to_f32_word(w)).collect::<Vec<_>>();
            wide.product_cpu(&widen(inputs[0]), &widen(inputs[1]))
                .into_iter()
                .map(f32_to_f16_word)
                .collect()
        } else {
            self.product_cpu(inputs[0], inputs[1])
        };
        match &self.epilogue {
            None => out,
            Some(e) => e.apply_cpu(&out, &inputs[2..], &self.out, self.dtype),
        }
    }

    /// The CPU device's path: f32 products written straight into `out`, then the epilogue
    /// in place over them; other dtypes (and an input aliasing the output, which the memory
    /// plan does not make for matmuls) through [`MatMulKernel::run_fast`] and a copy.
    pub fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        if let Some(w) = crate::ops::family::disjoint_words(inputs)
            .filter(|w| w.len() >= 2 && matches!(self.dtype, DType::F32 | DType::I32))
        {
            let done = out.len() == self.out_shape().numel()
                && match self.dtype {
                    DType::F32 => self.product_f32_into(w[0], w[1], out),
                    _ => self.product_i32_into(w[0], w[1], out),
                };
            if done {
                if let Some(e) = &self.epilogue {
                    let mut ins = vec![CpuIn::Output];
                    ins.extend(w[2..].iter().map(|x| CpuIn::Words(x)));
                    e.kernel(&self.out, self.dtype).run_cpu_into(&ins, out)?;
                }
                return Ok(());
            }
        }
        let own = crate::ops::family::own_copy(inputs, out);
        let slices = crate::ops::family::input_words(inputs, &own);
        let result = self.run_fast(&slices);
        if result.len() != out.len() {
            return Err(crate::Error::Internal(format!(
                "{} produced {} words for an output of {}",
                self.describe(),
                result.len(),
                out.len()
            )));
        }
        out.copy_from_slice(&result);
        Ok(())
    }

    /// The product (without epilogue) as words of `self.dtype`.
    pub(super) fn product_cpu(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        let mut out = vec![0u32; self.out_shape().numel()];
        let done = match self.dtype {
            DType::F32 => self.product_f32_into(a, b, &mut out),
            DType::I32 => self.product_i32_into(a, b, &mut out),
            _ => false,
        };
        if done {
            return out;
        }
        self.product_reference(a, b)
    }

    /// Per written batch (the chunk axis first under split-K): the offsets of its A and B
    /// matrices and the length of K it sums over.
    fn batch_offsets(&self) -> Vec<(usize, usize, usize)> {
        let (_, k, _) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let batches: usize = bd.iter().product();
        let chunk = self.k_chunk.unwrap_or(k);
        (0..batches)
            .map(|bi| {
                let (mut a0, mut b0, mut rem) = (0, 0, bi);
                for j in (0..bd.len()).rev() {
                    a0 += (rem % bd[j]) * sa[j];
                    b0 += (rem % bd[j]) * sb[j];
                    rem /= bd[j];
                }
                // Under split-K the chunk axis is the outermost batch dim.
                let len = match self.k_chunk {
                    Some(_) => chunk.min(k - (bi / (batches / self.chunks())) * chunk),
                    None => k,
                };
                (a0, b0, len)
            })
            .collect()
    }

    /// The GEMMs to run: M and per GEMM the offsets of A and B and the length of K. Batches
    /// that share one B over a row-major A stacked batch after batch (a `[batch, seq, d]`
    /// activation times a weight) are one GEMM of `batch · m` rows, which the kernels block
    /// and spread over threads far better than many short ones.
    fn gemm_batches(&self) -> (usize, Vec<(usize, usize, usize)>) {
        let (m, k, _) = self.mkn();
        let batches = self.batch_offsets();
        let ((ra, ka), _) = self.matrix_strides();
        let stacked = batches.len() > 1
            && ka == 1
            && ra == k
            && batches.iter().enumerate().all(|(i, &(a0, b0, len))| {
                a0 == batches[0].0 + i * m * k && b0 == batches[0].1 && len == batches[0].2
            });
        if stacked {
            (m * batches.len(), vec![batches[0]])
        } else {
            (m, batches)
        }
    }

    /// f32 products into `out` (the written output's words); `false`, with nothing
    /// guaranteed about `out`, when an operand is shorter than the shapes say (the reference
    /// loop then reports it as it always did).
    fn product_f32_into(&self, a: &[u32], b: &[u32], out: &mut [u32]) -> bool {
        let (_, _, n) = self.mkn();
        let (m, batches) = self.gemm_batches();
        if out.len() != batches.len() * m * n {
            return false;
        }
        if m == 0 || n == 0 {
            return true;
        }
        let ((ra, ka), (kb, nb)) = self.matrix_strides();
        // Every element a kernel may read must lie inside the operands.
        let fits = batches.iter().all(|&(a0, b0, len)| {
            len == 0
                || (a0 + (m - 1) * ra + (len - 1) * ka < a.len()
                    && b0 + (len - 1) * kb + (n - 1) * nb < b.len())
        });
        if !fits {
            return false;
        }
        let (a, b): (&[f32], &[f32]) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
        let c: &mut [f32] = bytemuck::cast_slice_mut(out);
        for (&(a0, b0, len), c) in batches.iter().zip(c.chunks_exact_mut(m * n)) {
            if len == 0 {
                // An empty sum.
                c.fill(0.0);
            } else if (2..=if nb == 1 { FEW_ROWS } else { FEW_ROWS_T }).contains(&m)
                && len >= FEW_ROWS_MIN_K
                && crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2
                && few_rows(
                    m,
                    len,
                    n,
                    Operand {
                        data: &a[a0..],
                        rows: ra,
                        cols: ka,
                    },
                    Operand {
                        data: &b[b0..],
                        rows: kb,
                        cols: nb,
                    },
                    c,
                )
            {
                // Written in place from B as stored.
            } else {
                // SAFETY: A is read at `a0 + i * ra + kk * ka` for i < m, kk < len, B at
                // `b0 + kk * kb + j * nb` for kk < len, j < n (both checked above to lie
                // inside the slices), and C written at `i * n + j` inside this batch's
                // `m * n` chunk; C does not alias A or B (`out` is borrowed mutably).
                unsafe {
                    sgemm(
                        m,
                        len,
                        n,
                        a[a0..].as_ptr(),
                        ra as isize,
                        ka as isize,
                        b[b0..].as_ptr(),
                        kb as isize,
                        nb as isize,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    );
                }
            }
        }
        true
    }

    /// An i32 product, wrapped as the WGSL kernel wraps: through [`igemm`] when A and B fit
    /// in i16 (the quantized models' products), else through f64 GEMM, exact when every
    /// partial sum stays below 2^53: `max|A| · max|B| · K` is checked per batch, and `false`
    /// (the caller runs the exact scalar loop) when it does not hold.
    fn product_i32_into(&self, a: &[u32], b: &[u32], out: &mut [u32]) -> bool {
        let (_, _, n) = self.mkn();
        let (m, batches) = self.gemm_batches();
        if out.len() != batches.len() * m * n {
            return false;
        }
        let ((ra, ka), (kb, nb)) = self.matrix_strides();
        let fits = batches.iter().all(|&(a0, b0, len)| {
            len == 0
                || m == 0
                || n == 0
                || (a0 + (m - 1) * ra + (len - 1) * ka < a.len()
                    && b0 + (len - 1) * kb + (n - 1) * nb < b.len())
        });
        if !fits {
            return false;
        }
        let mut fa: Vec<f64> = Vec::new();
        let mut fb: Vec<f64> = Vec::new();
        let mut fc: Vec<f64> = Vec::new();
        for (&(a0, b0, len), c) in batches.iter().zip(out.chunks_exact_mut(m * n.max(1))) {
            if m == 0 || n == 0 {
                continue;
            }
            let ia = IMat {
                data: a,
                off: a0,
                rs: ra,
                cs: ka,
            };
            let ib = IMat {
                data: b,
                off: b0,
                rs: kb,
                cs: nb,
            };
            if igemm(m, len, n, ia, ib, c, GEMM_PAR_MACS) {
                continue;
            }
            fa.clear();
            fb.clear();
            let (mut amax, mut bmax) = (0u64, 0u64);
            for i in 0..m {
                for kk in 0..len {
                    let v = a[a0 + i * ra + kk * ka] as i32;
                    amax = amax.max(v.unsigned_abs() as u64);
                    fa.push(v as f64);
                }
            }
            for kk in 0..len {
                for j in 0..n {
                    let v = b[b0 + kk * kb + j * nb] as i32;
                    bmax = bmax.max(v.unsigned_abs() as u64);
                    fb.push(v as f64);
                }
            }
            let bound = (amax as u128) * (bmax as u128) * (len as u128);
            if bound >= 1u128 << 53 {
                return false;
            }
            fc.clear();
            fc.resize(m * n, 0.0);
            let par = if m.saturating_mul(len).saturating_mul(n) >= GEMM_PAR_MACS {
                gemm::Parallelism::Rayon(0)
            } else {
                gemm::Parallelism::None
            };
            if len > 0 {
                // SAFETY: `fa` is m×len, `fb` len×n and `fc` m×n, all row-major and
                // contiguous, with the strides given; `fc` aliases neither.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        len,
                        fc.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        fa.as_ptr(),
                        1,
                        len as isize,
                        fb.as_ptr(),
                        1,
                        n as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        par,
                    );
                }
            }
            for (w, v) in c.iter_mut().zip(&fc) {
                *w = (*v as i64) as i32 as u32;
            }
        }
        true
    }

    /// The scalar loop, one product at a time in the WGSL kernels' order (integer dtypes).
    pub(super) fn product_reference(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        let (m, _, n) = self.mkn();
        let ((ra, ka), (kb, nb)) = self.matrix_strides();
        let batches = self.batch_offsets();
        let mut out = Vec::with_capacity(batches.len() * m * n);
        for (a0, b0, len) in batches {
            for i in 0..m {
                for jn in 0..n {
                    let mut acc = 0u32;
                    for kk in 0..len {
                        let p = binary_cpu(
                            BinaryOp::Mul,
                            self.dtype,
                            a[a0 + i * ra + kk * ka],
                            b[b0 + kk * kb + jn * nb],
                        );
                        acc = binary_cpu(BinaryOp::Add, self.dtype, acc, p);
                    }
                    out.push(acc);
                }
            }
        }
        out
    }
}

/// One f32 matrix as stored: element `(i, j)` at `data[i * rows + j * cols]`.
#[derive(Clone, Copy)]
pub struct Operand<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
}

/// `C = A · B` (`[m, k] · [k, n]`, C row-major and fully written) for a narrow B, kept as
/// `benches/cpu_matmul.rs`'s comparison: cpu:0 took it for a handful of columns over a long K
/// (n ≤ 16, k ≥ 1024), where matrixmultiply's sgemm fell to 5 GFLOP/s, until [`sgemm`]
/// (the `gemm` crate) measured 38–39 GFLOP/s on that shape (`[16,4096]@[4096,9]`) against
/// direct's 8–9, and ahead of it on every other bench shape.
///
/// B is packed once into rows padded to a multiple of [`W`], then each block of
/// [`R`] rows of C accumulates `W` columns at a time in registers over all of K, reading A
/// where it lies (row-major or transposed). Blocks of rows run on rayon's pool above
/// [`PAR_MACS`]. The caller checks that every index the shapes imply lies inside A and B.
pub fn direct(m: usize, k: usize, n: usize, a: Operand<'_>, b: Operand<'_>, c: &mut [f32]) {
    let np = n.next_multiple_of(W);
    let mut bp = vec![0f32; k * np];
    for (kk, row) in bp.chunks_exact_mut(np).enumerate() {
        for (j, x) in row[..n].iter_mut().enumerate() {
            *x = b.data[kk * b.rows + j * b.cols];
        }
    }
    let block = |i0: usize, c: &mut [f32]| {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
                // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                unsafe { rows_fma(i0, k, n, a, &bp, c) };
                return;
            }
        }
        rows::<false>(i0, k, n, a, &bp, c);
    };
    let rows_per_task = if m * k * n >= PAR_MACS && rayon::current_num_threads() > 1 {
        // A few blocks per thread, so a thread that finishes early steals another.
        m.div_ceil(rayon::current_num_threads() * 4)
            .next_multiple_of(R)
            .max(R)
    } else {
        m.max(1)
    };
    c[..m * n]
        .par_chunks_mut(rows_per_task * n)
        .enumerate()
        .for_each(|(t, c)| block(t * rows_per_task, c));
}

/// [`rows`] compiled for AVX2 with fused multiply-adds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_fma(i0: usize, k: usize, n: usize, a: Operand<'_>, bp: &[f32], c: &mut [f32]) {
    rows::<true>(i0, k, n, a, bp, c)
}

/// Rows `i0..` of C (as many as `c` holds) from A and the packed B `bp` (`[k, np]`): blocks
/// of [`R`] rows, then the last rows one at a time, each with a constant row count so the
/// accumulators stay in registers.
#[inline(always)]
fn rows<const FMA: bool>(i0: usize, k: usize, n: usize, a: Operand<'_>, bp: &[f32], c: &mut [f32]) {
    let m = c.len() / n;
    let full = m / R * R;
    for r0 in (0..full).step_by(R) {
        rows_block::<R, FMA>(i0 + r0, k, n, a, bp, &mut c[r0 * n..(r0 + R) * n]);
    }
    for r0 in full..m {
        rows_block::<1, FMA>(i0 + r0, k, n, a, bp, &mut c[r0 * n..(r0 + 1) * n]);
    }
}

/// `RB` rows of C starting at row `i0` of A, [`W`] columns at a time over all of K.
#[inline(always)]
fn rows_block<const RB: usize, const FMA: bool>(
    i0: usize,
    k: usize,
    n: usize,
    a: Operand<'_>,
    bp: &[f32],
    c: &mut [f32],
) {
    let np = bp.len() / k.max(1);
    for j0 in (0..np).step_by(W) {
        let mut acc = [[0f32; W]; RB];
        for kk in 0..k {
            let bv: &[f32; W] = bp[kk * np + j0..][..W].try_into().unwrap_or(&[0.0; W]);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = a.data[(i0 + r) * a.rows + kk * a.cols];
                for (x, &y) in acc.iter_mut().zip(bv) {
                    *x = if FMA { av.mul_add(y, *x) } else { av * y + *x };
                }
            }
        }
        let w = W.min(n - j0);
        for (r, acc) in acc.iter().enumerate() {
            c[r * n + j0..][..w].copy_from_slice(&acc[..w]);
        }
    }
}

/// Rows of C up to which an f32 product goes through [`few_rows`] rather than the `gemm`
/// crate, which packs all of B on every call: a recurrent step's `h·Rᵀ` (`[8, 256] ·
/// [256, 1024]`) spent most of its time packing the 1 MiB of R (`benches/cpu_matmul.rs`).
pub(crate) const FEW_ROWS: usize = 16;

/// [`FEW_ROWS`] for a B stored transposed (`x · Wᵀ`, a linear layer as PyTorch stores it),
/// where the dot products stay ahead further: `[24, 768] · [768, 3072]ᵀ` at 69 against
/// `gemm`'s 53 GFLOP/s on one thread, `[32, 768] · [768, 768]ᵀ` at 49 against 42; a row-major
/// B's strips fall behind past 16 rows (24 rows: 23 against 33).
pub(crate) const FEW_ROWS_T: usize = 32;

/// The shortest K [`few_rows`] takes: below it B is small, packing it costs little, and
/// `gemm`'s kernels were ahead (conv1's `[16, 9] · [9, 4096]`: 27 against 22 GFLOP/s on one
/// thread). A single row (a vector times a matrix) stays with `gemm` too: 23 against 17;
/// and so does a CPU without AVX2, where only the portable loops would run.
pub(crate) const FEW_ROWS_MIN_K: usize = 64;

/// Columns of C a task of [`few_rows`] takes at least, so each task's B reads stay long.
const FEW_TASK_COLS: usize = 64;

/// `C = A · B` (`[m, k] · [k, n]`, C row-major and fully written) for a few rows of A
/// (`m ≤` [`FEW_ROWS`], or [`FEW_ROWS_T`] for a transposed B), reading B in place: no
/// packing, so a weight is read once per call
/// rather than copied and then read. Two layouts of B:
/// - rows contiguous (`b.cols == 1`): strips of [`W`] columns, each strip's `k × W` block
///   reused from cache by every block of [`R`] rows, the accumulators in registers;
/// - columns contiguous (`b.rows == 1`, B stored transposed, as `x · Wᵀ` is): dot products
///   of A's rows (packed contiguous when they are not) with four of B's columns at a time,
///   in 8-wide vectors.
///
/// Returns `false` (nothing written) for other layouts. Column ranges run on rayon's pool
/// above [`PAR_MACS`]. The caller checks that every index the shapes imply lies inside A
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
                #[cfg(target_arch = "x86_64")]
                if FMA && x86::strip::<R>(r0, k, (s, j1), a, b, &mut out[r0 * w..], w, j0) {
                    continue;
                }
                strip::<R, FMA>(r0, k, (s, j1), a, b, &mut out[r0 * w..], w, j0);
            }
            for r0 in full..m {
                #[cfg(target_arch = "x86_64")]
                if FMA && x86::strip::<1>(r0, k, (s, j1), a, b, &mut out[r0 * w..], w, j0) {
                    continue;
                }
                strip::<1, FMA>(r0, k, (s, j1), a, b, &mut out[r0 * w..], w, j0);
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
