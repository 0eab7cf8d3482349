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
    /// `(rows, cols)` of the output block each invocation computes with vec4 loads; `None`
    /// is one output per invocation. Chosen per adapter by [`MatMulKernel::blocked_for`].
    pub block: Option<(usize, usize)>,
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

    /// Choose register blocking for an adapter. Blocks need `N` and `K` divisible by 4 (vec4
    /// loads along K of A and along N of B); other shapes keep one output per invocation.
    /// Software adapters get up to 16×16 outputs per invocation (measured on lavapipe: ~30×
    /// faster than one output per invocation); GPUs get 4×4, which keeps register pressure
    /// low enough for full occupancy.
    pub fn blocked_for(&self, adapter: &super::AdapterKind) -> MatMulKernel {
        let (m, k, n) = self.mkn();
        let mut out = self.clone();
        out.block = None;
        if !n.is_multiple_of(4) || !k.is_multiple_of(4) || !self.dtype.is_numeric() {
            return out;
        }
        let max = if adapter.software { 16 } else { 4 };
        let tn = [16, 8, 4].into_iter().find(|&t| t <= max && n % t == 0);
        let tm = [16, 8, 4, 2, 1]
            .into_iter()
            .find(|&t| t <= max && m % t == 0);
        if let (Some(tm), Some(tn)) = (tm, tn) {
            out.block = Some((tm, tn));
        }
        out
    }

    pub fn workgroup_size(&self) -> u32 {
        if self.block.is_some() {
            64
        } else {
            codegen::WORKGROUP
        }
    }

    pub fn invocations(&self) -> u64 {
        match self.block {
            Some((tm, tn)) => (self.out.numel() / (tm * tn)) as u64,
            None => self.out.numel() as u64,
        }
    }

    /// WGSL: one output per invocation (template `shaders/matmul.wgsl`), or a register-blocked
    /// kernel when [`MatMulKernel::block`] is set. Both accumulate over K in the CPU kernel's
    /// order, one product at a time.
    pub fn wgsl(&self) -> String {
        if let Some((tm, tn)) = self.block {
            return self.wgsl_blocked(tm, tn);
        }
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

impl MatMulKernel {
    /// Each invocation computes a `tm × tn` output block: for every 4 steps of K it loads one
    /// vec4 of A per row and one vec4 of B per 4 columns, and accumulates into `tm * tn / 4`
    /// vec4 registers written as straight-line code (arrays would live in memory on lavapipe).
    fn wgsl_blocked(&self, tm: usize, tn: usize) -> String {
        let (m, k, n) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let t = self.dtype.wgsl();
        let cols = tn / 4;
        let mut w = Writer::new();
        w.line("// wgflow register-blocked matmul: each invocation computes a block of outputs.");
        codegen::storage_binding_vec(&mut w, 0, "in0", self.dtype, true);
        codegen::storage_binding_vec(&mut w, 1, "in1", self.dtype, true);
        codegen::storage_binding_vec(&mut w, 2, "out", self.dtype, true);
        w.line("");
        w.line("@compute @workgroup_size(64)");
        w.line("fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
        w.indent(1);
        let (mb, nb) = (m / tm, n / tn);
        w.line("let o = gid.x + gid.y * nwg.x * 64u;");
        w.line(&format!("if (o >= {}u) {{", self.invocations()));
        w.line("    return;");
        w.line("}");
        w.line(&format!("let n0 = (o % {nb}u) * {tn}u;"));
        w.line(&format!("let m0 = ((o / {nb}u) % {mb}u) * {tm}u;"));
        w.line(&format!("let batch = o / {}u;", mb * nb));
        codegen::strided_index(&mut w, "a_base", "batch", &bd, &sa);
        codegen::strided_index(&mut w, "b_base", "batch", &bd, &sb);
        w.line(&format!("let o_base = batch * {}u;", m * n));
        let zero = codegen::literal(self.dtype, 0);
        for r in 0..tm {
            for c in 0..cols {
                w.line(&format!("var acc_{r}_{c} = vec4<{t}>({zero});"));
            }
        }
        w.line(&format!("for (var k = 0u; k < {k}u; k = k + 4u) {{"));
        w.indent(2);
        for r in 0..tm {
            w.line(&format!(
                "let a{r} = in0[(a_base + (m0 + {r}u) * {k}u + k) / 4u];"
            ));
        }
        for (kk, lane) in ["x", "y", "z", "w"].iter().enumerate() {
            for c in 0..cols {
                w.line(&format!(
                    "let b{kk}_{c} = in1[(b_base + (k + {kk}u) * {n}u + n0) / 4u + {c}u];"
                ));
            }
            for r in 0..tm {
                for c in 0..cols {
                    w.line(&format!(
                        "acc_{r}_{c} = acc_{r}_{c} + a{r}.{lane} * b{kk}_{c};"
                    ));
                }
            }
        }
        w.indent(1);
        w.line("}");
        for r in 0..tm {
            for c in 0..cols {
                w.line(&format!(
                    "out[(o_base + (m0 + {r}u) * {n}u + n0) / 4u + {c}u] = acc_{r}_{c};"
                ));
            }
        }
        w.indent(0);
        w.line("}");
        w.finish()
    }
}
