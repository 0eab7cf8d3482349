//! The matmul kernel on the CPU: f32 (and f16, widened to f32) products through
//! `matrixmultiply`'s blocked, vectorized, multi-threaded sgemm; integer products through the
//! scalar reference loop. Batches broadcast through zero strides and split-K chunks are
//! read in place, as the WGSL kernels read them.
//!
//! sgemm sums over K in its own order (blocked, with FMA where the CPU has it), so f32
//! results differ from the WGSL kernels' in the last bits; NaN and infinities propagate as
//! IEEE arithmetic does.

use super::*;

impl MatMulKernel {
    /// `inputs`: A, B, then the epilogue's extra inputs.
    pub fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
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
            Some(e) => e.run_cpu(&out, &inputs[2..], &self.out, self.dtype),
        }
    }

    /// The product (without epilogue) as words of `self.dtype`.
    pub(super) fn product_cpu(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        if self.dtype == DType::F32 {
            if let Some(out) = self.product_sgemm(a, b) {
                return out;
            }
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

    /// f32 products through sgemm; `None` when an operand is shorter than the shapes say
    /// (the reference loop then reports it as it always did).
    fn product_sgemm(&self, a: &[u32], b: &[u32]) -> Option<Vec<u32>> {
        let (m, k, n) = self.mkn();
        let batches = self.batch_offsets();
        let mut out = vec![0u32; batches.len() * m * n];
        if m == 0 || n == 0 {
            return Some(out);
        }
        // Every element sgemm may read must lie inside the operands.
        let fits = batches.iter().all(|&(a0, b0, len)| {
            len == 0 || (a0 + (m - 1) * k + len <= a.len() && b0 + (len - 1) * n + n <= b.len())
        });
        if !fits {
            return None;
        }
        let (a, b): (&[f32], &[f32]) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
        let c: &mut [f32] = bytemuck::cast_slice_mut(&mut out);
        for (&(a0, b0, len), c) in batches.iter().zip(c.chunks_exact_mut(m * n)) {
            if len == 0 {
                // An empty sum: the zeros `out` starts with.
                continue;
            }
            // SAFETY: A is read at `a0 + i * k + kk` for i < m, kk < len, B at
            // `b0 + kk * n + j` for kk < len, j < n (both checked above to lie inside the
            // slices), and C written at `i * n + j` inside this batch's `m * n` chunk; C does
            // not alias A or B (a fresh vector).
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    len,
                    n,
                    1.0,
                    a[a0..].as_ptr(),
                    k as isize,
                    1,
                    b[b0..].as_ptr(),
                    n as isize,
                    1,
                    0.0,
                    c.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
        }
        Some(out)
    }

    /// The scalar loop, one product at a time in the WGSL kernels' order (integer dtypes).
    pub(super) fn product_reference(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        let (m, k, n) = self.mkn();
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
                            a[a0 + i * k + kk],
                            b[b0 + kk * n + jn],
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
