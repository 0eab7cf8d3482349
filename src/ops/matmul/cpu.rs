//! The matmul kernel on the CPU: the same blocking of K (and split-K chunks) as the WGSL.

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
}
