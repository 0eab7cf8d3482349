//! The matmul kernel on the CPU: f32 (and f16, widened to f32) products through the `gemm`
//! crate's blocked, vectorized GEMM ([`sgemm`]); i32 products through the i16 pair kernel
//! and u8 × s8 kernels ([`super::igemm`], a constant B packed once per plan), f64 GEMM or
//! the scalar reference loop, whichever is exact. Batches broadcast through zero strides,
//! split-K chunks and operands stored transposed are read in place, as the WGSL kernels read
//! them.
//!
//! sgemm sums over K in its own order (blocked, with FMA where the CPU has it), so f32
//! results differ from the WGSL kernels' in the last bits; NaN and infinities propagate as
//! IEEE arithmetic does.

use super::few_rows::{few_rows, FEW_ROWS, FEW_ROWS_MIN_K, FEW_ROWS_T};
use super::igemm::{igemm, igemm_packed, pack_b, IMat, PackedB};
use super::panel::{gemm_packed, PackedF32};
use super::*;
use rayon::prelude::*;

/// Multiply-adds from which [`sgemm`] spreads one product over rayon's pool. Measured with
/// `benches/cpu_matmul.rs` (2 shared cores, AVX2+FMA, six runs): below it `gemm` on one
/// thread beat two threads on every shape (conv1's `[16,9]@[9,4096]` 24–48 GFLOP/s against
/// 13–25, `[256,512]@[512,10]` 37–57 against 30–42, conv2's products 5–25% ahead); from W4's
/// layers up (≥ 67M multiply-adds) the two tie on a busy machine and the threads are what a
/// quiet or wider one gains from. No bench shape lies between 4.7M and 67M.
pub(crate) const GEMM_PAR_MACS: usize = 1 << 24;

/// The rows (per GEMM) for which a constant B is packed once per plan and the product runs
/// [`gemm_packed`]. Below, the 4-row tiles waste most of their lanes. Above, the `gemm`
/// crate (packing per call) is faster on two threads, though not on one: BERT-small's
/// products at 512 rows ran at 125-130 GFLOP/s against its 140-155 (`wgflow profile` of the
/// zoo's `bert` at batch 8, 2-core AVX2 EPYC; both 88 with `RAYON_NUM_THREADS=1`), while at
/// 64 rows (batch 1) the packed B took the model from 6.8 to 5.8 ms and GPT-2's from 11.2
/// to 9.5.
const PACKED_ROWS: std::ops::RangeInclusive<usize> = 4..=256;

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
    // gemm picks its SIMD128 micro-kernels only when told to (its default is scalar, for
    // modules built without SIMD128); the web crate builds with it (web/.cargo/config.toml).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    gemm::set_wasm_simd128(true);
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
pub(super) const W: usize = 16;
/// Rows of A the direct kernel handles together, sharing each loaded chunk of B.
pub(super) const R: usize = 4;
/// Multiply-adds above which the direct kernel spreads row blocks over rayon's pool.
pub(super) const PAR_MACS: usize = 1 << 17;

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
        self.run_cpu_packed(inputs, out, None)
    }

    /// The constant B that every GEMM of the product reads over all of K, when it is one:
    /// its words from its first element, its (K, N) strides, and the GEMMs' rows.
    fn constant_b<'a>(
        &self,
        constants: &[Option<&'a [u32]>],
        dtype: DType,
    ) -> Option<(&'a [u32], [usize; 2], usize)> {
        let b = (*constants.get(1)?)?;
        if self.dtype != dtype || self.k_chunk.is_some() {
            return None;
        }
        let (_, k, n) = self.mkn();
        let (m, batches) = self.gemm_batches();
        let &(_, b0, len) = batches.first()?;
        let (_, (kb, nb)) = self.matrix_strides();
        let shared = batches.iter().all(|&(_, b1, l)| b1 == b0 && l == len) && len == k;
        let inside = k > 0 && n > 0 && b0 + (k - 1) * kb + (n - 1) * nb < b.len();
        (shared && inside).then(|| (&b[b0..], [kb, nb], m))
    }

    /// B packed once per plan for the integer kernel, when B is a plan constant that fits
    /// its lanes and every GEMM of the product reads the same B over all of K.
    pub(super) fn pack_constant_b(&self, constants: &[Option<&[u32]>]) -> Option<PackedB> {
        let (b, [kb, nb], _) = self.constant_b(constants, DType::I32)?;
        let (_, k, n) = self.mkn();
        pack_b(
            k,
            n,
            IMat {
                data: b,
                off: 0,
                rs: kb,
                cs: nb,
            },
        )
    }

    /// A constant f32 B packed once per plan for [`gemm_packed`], when every GEMM of the
    /// product reads the same B over all of K and has [`PACKED_ROWS`] rows.
    pub(super) fn pack_constant_f32(&self, constants: &[Option<&[u32]>]) -> Option<PackedF32> {
        let (b, strides, m) = self.constant_b(constants, DType::F32)?;
        let (_, k, n) = self.mkn();
        PACKED_ROWS
            .contains(&m)
            .then(|| PackedF32::pack(k, n, bytemuck::cast_slice(b), strides))
            .flatten()
    }

    /// [`MatMulKernel::run_cpu_into`], with B's packing from [`Self::pack_constant_b`] or
    /// [`Self::pack_constant_f32`].
    pub(super) fn run_cpu_packed(
        &self,
        inputs: &[CpuIn<'_>],
        out: &mut [u32],
        prepared: Option<&crate::ops::CpuPrepared>,
    ) -> crate::Result<()> {
        let packed = prepared.and_then(|p| p.get::<PackedB>());
        let packed_f32 = prepared.and_then(|p| p.get::<PackedF32>());
        if let Some(w) = crate::ops::family::disjoint_words(inputs)
            .filter(|w| w.len() >= 2 && matches!(self.dtype, DType::F32 | DType::I32))
        {
            let done = out.len() == self.out_shape().numel()
                && match self.dtype {
                    DType::F32 => self.product_f32_into(w[0], w[1], out, packed_f32),
                    _ => self.product_i32_into(w[0], w[1], out, packed),
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
            DType::F32 => self.product_f32_into(a, b, &mut out, None),
            DType::I32 => self.product_i32_into(a, b, &mut out, None),
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
    fn product_f32_into(
        &self,
        a: &[u32],
        b: &[u32],
        out: &mut [u32],
        packed: Option<&PackedF32>,
    ) -> bool {
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
        if let Some(p) = packed.filter(|p| batches.iter().all(|&(_, _, len)| p.fits(len, n))) {
            // B packed once per plan: each batch's A against it (checked above to lie
            // inside `a`).
            return batches
                .iter()
                .zip(c.chunks_exact_mut(m * n))
                .all(|(&(a0, _, _), c)| gemm_packed(m, &a[a0..], [ra, ka], p, c));
        }
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

    /// An i32 product, wrapped as the WGSL kernel wraps: through [`igemm`] when A and B are
    /// narrow (the quantized models' products; B from `packed` when it was packed once per
    /// plan and A fits its kernel), else through f64 GEMM, exact when every
    /// partial sum stays below 2^53: `max|A| · max|B| · K` is checked per batch, and `false`
    /// (the caller runs the exact scalar loop) when it does not hold.
    fn product_i32_into(
        &self,
        a: &[u32],
        b: &[u32],
        out: &mut [u32],
        packed: Option<&PackedB>,
    ) -> bool {
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
            if let Some(p) = packed.filter(|p| p.fits(len, n)) {
                if igemm_packed(m, ia, p, c, GEMM_PAR_MACS) {
                    continue;
                }
            }
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
