//! Fused scaled dot-product attention: `attention(q, k, v, causal, scale)` is
//! `softmax(scale · q kᵀ + mask) v` over the last two axes, computed row by row so that the
//! `[Tq, Tk]` score matrix is never stored, forward or backward (flash attention's
//! recomputation):
//!
//! * the forward pass walks each query's keys (a GPU in two passes: the running maximum and
//!   sum, then the weighted values; `cpu:0` with one row of scores at a time);
//! * the gradient recomputes each query's log-sum-exp (`attention_lse`), takes
//!   `δ_i = Σ dO_i · O_i`, and three kernels recompute the probabilities
//!   `P_ij = exp(s_ij - lse_i)`: `dQ_i = scale Σ_j P_ij (dO_i·v_j - δ_i) k_j` per query,
//!   `dK_j = scale Σ_i P_ij (dO_i·v_j - δ_i) q_i` and `dV_j = Σ_i P_ij dO_i` per key.
//!
//! Shapes: `q` is `[.., Tq, D]`, `k` and `v` are `[.., Tk, D]` with the same leading axes
//! (batch, heads); the output has `q`'s shape. With `causal`, query `i` sees the keys
//! `j <= i + Tk - Tq` (aligned at the end, so a query block at the end of a longer key
//! sequence, as in cached decoding, sees its prefix); `Tq <= Tk`. f32 only.
//!
//! Graph files:
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `attention` | 3 (q, k, v) | `causal`, `scale` |
//! | `attention_lse` | 2 (q, k) | `causal`, `scale` |
//! | `attention_grad_q`, `attention_grad_k` | 6 (q, k, v, dO, lse, δ) | `causal`, `scale` |
//! | `attention_grad_v` | 4 (q, k, dO, lse) | `causal`, `scale` |

mod cpu;
mod file;
mod grad;
mod wgsl;

use super::family::{
    disjoint_words, run_via_reference, Arity, CpuIn, Declared, EmptyInput, Reject,
};
use super::family::{Family, GradCx, KernelClass, KernelDef};
use super::family::{LowerCx, Lowered};
use super::Kernel;
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, Shape};

/// Which quantity an attention op computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttentionPass {
    /// `softmax(scale · q kᵀ) v`: inputs `(q, k, v)`, output `[.., Tq, D]`.
    Forward,
    /// Each query's log-sum-exp of its scores: inputs `(q, k)`, output `[.., Tq]`.
    Lse,
    /// `dQ`: inputs `(q, k, v, dO, lse, δ)`, output `[.., Tq, D]`.
    GradQ,
    /// `dK`: inputs `(q, k, v, dO, lse, δ)`, output `[.., Tk, D]`.
    GradK,
    /// `dV`: inputs `(q, k, dO, lse)`, output `[.., Tk, D]`.
    GradV,
}

impl AttentionPass {
    pub const ALL: [AttentionPass; 5] = [
        AttentionPass::Forward,
        AttentionPass::Lse,
        AttentionPass::GradQ,
        AttentionPass::GradK,
        AttentionPass::GradV,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AttentionPass::Forward => "attention",
            AttentionPass::Lse => "attention_lse",
            AttentionPass::GradQ => "attention_grad_q",
            AttentionPass::GradK => "attention_grad_k",
            AttentionPass::GradV => "attention_grad_v",
        }
    }

    fn arity(self) -> usize {
        match self {
            AttentionPass::Forward => 3,
            AttentionPass::Lse => 2,
            AttentionPass::GradQ | AttentionPass::GradK => 6,
            AttentionPass::GradV => 4,
        }
    }
}

/// The family's op: one pass of attention with its mask and scale (`scale_bits` holds the
/// f32 scale's bits, so the op is `Eq` and `Hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attention {
    pub pass: AttentionPass,
    pub causal: bool,
    pub scale_bits: u32,
}

impl Attention {
    pub fn scale(&self) -> f32 {
        f32::from_bits(self.scale_bits)
    }
}

/// One attention pass over `heads` independent `(q, k, v)` problems (the leading axes
/// flattened).
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionKernel {
    pub pass: AttentionPass,
    pub heads: usize,
    pub tq: usize,
    pub tk: usize,
    pub d: usize,
    pub causal: bool,
    pub scale: f32,
}

impl AttentionKernel {
    /// The keys query `i` sees: `0..visible(i)`.
    pub fn visible(&self, i: usize) -> usize {
        if self.causal {
            (i + 1 + self.tk - self.tq).min(self.tk)
        } else {
            self.tk
        }
    }

    /// The first query that sees key `j`.
    pub fn first_query(&self, j: usize) -> usize {
        if self.causal {
            (j + self.tq).saturating_sub(self.tk)
        } else {
            0
        }
    }

    /// Rows of the output (one per query or per key) and words per row.
    fn rows(&self) -> (usize, usize) {
        match self.pass {
            AttentionPass::Forward | AttentionPass::GradQ => (self.heads * self.tq, self.d),
            AttentionPass::Lse => (self.heads * self.tq, 1),
            AttentionPass::GradK | AttentionPass::GradV => (self.heads * self.tk, self.d),
        }
    }
}

/// The rule every pass shares: `q [.., Tq, D]`, `k [.., Tk, D]` with `q`'s leading axes, f32.
fn check_qk(q: &Shape, k: &Shape, causal: bool) -> Result<(), String> {
    if q.rank() < 2 || k.rank() != q.rank() {
        return Err(format!(
            "q {q} and k {k} must have the same rank, at least 2 ([.., T, D])"
        ));
    }
    let r = q.rank();
    if q.dims()[..r - 2] != k.dims()[..r - 2] || q.dims()[r - 1] != k.dims()[r - 1] {
        return Err(format!(
            "q {q} and k {k} must share their leading axes and their last (D)"
        ));
    }
    if causal && q.dims()[r - 2] > k.dims()[r - 2] {
        return Err(format!(
            "causal attention needs at most as many queries as keys (q {q}, k {k})"
        ));
    }
    Ok(())
}

impl Family for Attention {
    fn name(&self) -> &'static str {
        self.pass.name()
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(self.pass.arity())
    }

    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        if inputs.len() != self.pass.arity() {
            return Err(Reject::from(format!(
                "{} takes {} inputs",
                self.name(),
                self.pass.arity()
            )));
        }
        if let Some((_, d)) = inputs.iter().find(|(_, d)| *d != DType::F32) {
            return Err(Reject::dtype(format!(
                "{} of {d} is not supported (expects f32)",
                self.name()
            )));
        }
        let (q, k) = (&inputs[0].0, &inputs[1].0);
        check_qk(q, k, self.causal)?;
        let r = q.rank();
        let lse_shape = Shape(q.dims()[..r - 1].to_vec());
        let want = |i: usize, shape: &Shape, what: &str| -> Result<(), String> {
            if &inputs[i].0 == shape {
                Ok(())
            } else {
                Err(format!(
                    "{what} {} must have the shape {shape}",
                    inputs[i].0
                ))
            }
        };
        match self.pass {
            AttentionPass::Forward => {
                want(2, k, "v")?;
                Ok((q.clone(), DType::F32))
            }
            AttentionPass::Lse => Ok((lse_shape, DType::F32)),
            AttentionPass::GradQ | AttentionPass::GradK => {
                want(2, k, "v")?;
                want(3, q, "dO")?;
                want(4, &lse_shape, "lse")?;
                want(5, &lse_shape, "delta")?;
                let out = if self.pass == AttentionPass::GradQ {
                    q
                } else {
                    k
                };
                Ok((out.clone(), DType::F32))
            }
            AttentionPass::GradV => {
                want(2, q, "dO")?;
                want(3, &lse_shape, "lse")?;
                Ok((k.clone(), DType::F32))
            }
        }
    }

    fn rebinds(&self) -> bool {
        true
    }

    /// No keys or no queries: a softmax over nothing is not defined; a `D` of 0 gives
    /// zeros (a builder error catches the empty key axis first, see `graph/build`).
    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        EmptyInput::Fill(0)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let (q, k) = (cx.in_shape(0).dims(), cx.in_shape(1).dims());
        let r = q.len();
        Ok(cx.dispatch(Kernel::Attention(AttentionKernel {
            pass: self.pass,
            heads: q[..r - 2].iter().product(),
            tq: q[r - 2],
            tk: k[r - 2],
            d: q[r - 1],
            causal: self.causal,
            scale: self.scale(),
        })))
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        out.attrs(&file::AttentionAttrs::of(self))
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        let pass = AttentionPass::ALL
            .into_iter()
            .find(|p| p.name() == node.op)?;
        Some(node.attrs::<file::AttentionAttrs>().map(|a| a.op(pass)))
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        g.attention_pass(self.pass, x, self.causal, self.scale())
    }

    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        grad::grad(*self, g, cx)
    }
}

impl KernelDef for AttentionKernel {
    fn kind(&self) -> &'static str {
        "attention"
    }

    fn class(&self) -> KernelClass {
        KernelClass::MatMul
    }

    /// Two flops per multiply-add of the score and value products the pass computes.
    fn flops(&self, _out_elements: u64) -> Option<u64> {
        let pairs: usize = (0..self.tq).map(|i| self.visible(i)).sum();
        let products = match self.pass {
            AttentionPass::Lse => 1,
            AttentionPass::Forward | AttentionPass::GradV => 2,
            AttentionPass::GradQ => 3,
            AttentionPass::GradK => 4,
        };
        Some((2 * products * pairs * self.d * self.heads) as u64)
    }

    fn describe(&self) -> String {
        format!(
            "{}{} [{}, {}, {}] x [{}, {}, {}]",
            self.pass.name(),
            if self.causal { " (causal)" } else { "" },
            self.heads,
            self.tq,
            self.d,
            self.heads,
            self.tk,
            self.d
        )
    }

    fn wgsl(&self) -> String {
        wgsl::source(self)
    }

    fn uses_f16(&self) -> bool {
        false
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let (rows, width) = self.rows();
        let mut out = vec![0u32; rows * width];
        cpu::run(self, inputs, &mut out)?;
        Ok(out)
    }

    /// Straight into the output slot (the reference writes a new vector); an input in the
    /// output's own slot goes through the reference.
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        match disjoint_words(inputs) {
            Some(w) => cpu::run(self, &w, out),
            None => run_via_reference(self, inputs, out),
        }
    }

    fn invocations(&self) -> u64 {
        self.rows().0 as u64
    }

    fn loop_iterations(&self) -> Option<u64> {
        let (t, per) = match self.pass {
            AttentionPass::Forward => (self.tk, 3 * self.d + 2),
            AttentionPass::Lse => (self.tk, self.d + 1),
            AttentionPass::GradQ => (self.tk, 3 * self.d + 1),
            AttentionPass::GradK => (self.tq, 4 * self.d + 1),
            AttentionPass::GradV => (self.tq, 2 * self.d + 1),
        };
        Some((t * per + 2 * self.d) as u64)
    }
}
