//! Batched matrix multiplication with NumPy batch broadcasting (`[..., M, K] @ [..., K, N]`).

use crate::backend::gpu::codegen::{self, Writer};
use crate::ops::elementwise::binary_cpu;
use crate::ops::BinaryOp;
use crate::{DType, Shape};

/// Shape rule. Both operands need rank ≥ 2; batch dims broadcast.
pub fn matmul_shape(a: &Shape, b: &Shape) -> Result<Shape, String> {
    if a.rank() < 2 || b.rank() < 2 {
        return Err(format!(
            "shapes {a} and {b}: both operands need at least 2 dimensions (reshape a vector to [1, n] or [n, 1])"
        ));
    }
    let (m, k) = (a.dims()[a.rank() - 2], a.dims()[a.rank() - 1]);
    let (k2, n) = (b.dims()[b.rank() - 2], b.dims()[b.rank() - 1]);
    if k != k2 {
        return Err(format!(
            "shapes {a} and {b}: inner dimensions {k} and {k2} differ"
        ));
    }
    let ba = Shape(a.dims()[..a.rank() - 2].to_vec());
    let bb = Shape(b.dims()[..b.rank() - 2].to_vec());
    let mut batch = Shape::broadcast(&ba, &bb).ok_or_else(|| {
        format!("shapes {a} and {b}: batch dimensions {ba} and {bb} cannot broadcast")
    })?;
    batch.0.extend([m, n]);
    Ok(batch)
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatMulKernel {
    pub a: Shape,
    pub b: Shape,
    pub out: Shape,
    pub dtype: DType,
}

impl MatMulKernel {
    fn mkn(&self) -> (usize, usize, usize) {
        let r = self.a.rank();
        (
            self.a.dims()[r - 2],
            self.a.dims()[r - 1],
            self.b.dims()[self.b.rank() - 1],
        )
    }

    fn batch(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let (m, k, n) = self.mkn();
        let out_batch = Shape(self.out.dims()[..self.out.rank() - 2].to_vec());
        let ab = Shape(self.a.dims()[..self.a.rank() - 2].to_vec());
        let bb = Shape(self.b.dims()[..self.b.rank() - 2].to_vec());
        let sa = ab
            .broadcast_strides(&out_batch)
            .iter()
            .map(|s| s * m * k)
            .collect();
        let sb = bb
            .broadcast_strides(&out_batch)
            .iter()
            .map(|s| s * k * n)
            .collect();
        (out_batch.0, sa, sb)
    }

    pub fn run_cpu(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        let (m, k, n) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let batches: usize = bd.iter().product();
        let mut out = Vec::with_capacity(self.out.numel());
        for bi in 0..batches {
            let (mut a0, mut b0, mut rem) = (0, 0, bi);
            for j in (0..bd.len()).rev() {
                a0 += (rem % bd[j]) * sa[j];
                b0 += (rem % bd[j]) * sb[j];
                rem /= bd[j];
            }
            for i in 0..m {
                for jn in 0..n {
                    let mut acc = 0u32;
                    for kk in 0..k {
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

    /// WGSL (template `shaders/matmul.wgsl`): one invocation per output element, accumulating
    /// in the same order as the CPU kernel.
    pub fn wgsl(&self) -> String {
        let (m, k, n) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let mut bindings = Writer::new();
        codegen::storage_binding(&mut bindings, 0, "in0", self.dtype);
        codegen::storage_binding(&mut bindings, 1, "in1", self.dtype);
        codegen::storage_binding(&mut bindings, 2, "out", self.dtype);
        let mut batch = Writer::new();
        batch.indent(1);
        codegen::strided_index(&mut batch, "a_base", "batch", &bd, &sa);
        codegen::strided_index(&mut batch, "b_base", "batch", &bd, &sb);
        codegen::fill_template(
            include_str!("../../shaders/matmul.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", codegen::WORKGROUP.to_string()),
                ("TOTAL", format!("{}u", self.out.numel())),
                ("M", m.to_string()),
                ("N", n.to_string()),
                ("K", k.to_string()),
                ("BATCH", batch.finish()),
                ("ZERO", codegen::literal(self.dtype, 0)),
            ],
        )
    }
}
