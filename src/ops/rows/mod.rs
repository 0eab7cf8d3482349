//! Fused row kernels over the last axis, which every transformer step runs: layer
//! normalisation and softmax cross-entropy with integer labels, forward and backward. Each
//! reads a row of `D` values (or `C` classes) once into registers or cache and writes its
//! result, where the composites store every intermediate (`x - mean`, its square, the
//! shifted logits, their exponentials, the log-probabilities) for the backward pass.
//!
//! * `layer_norm(x, γ, β)`: `y = (x - μ) / sqrt(σ² + ε) · γ + β` per row of `x [.., D]`,
//!   `γ`, `β` of shape `[D]` (biased variance, two passes over the row as the composite).
//! * Its gradient recomputes each row's `μ` and `r = 1/sqrt(σ² + ε)`:
//!   `layer_norm_grad(x, γ, dy)` is `dx = r (g - mean(g) - x̂ mean(g x̂))` with `g = dy γ`
//!   and `x̂ = (x - μ) r`; `layer_norm_xhat(x)` is `x̂`, from which `dγ = Σ dy x̂` and
//!   `dβ = Σ dy` are reductions over the leading axes.
//! * `softmax_cross_entropy(logits [.., C], labels [..] i32)` is `logsumexp(row) -
//!   row[label]` per row, shifted by the row's maximum (by 0 where it is infinite, as
//!   `log_softmax`). A label outside `0..C` gives NaN for its row (TensorFlow's GPU rule; a
//!   run cannot fail on a value).
//! * `softmax_cross_entropy_grad(logits, labels, dloss)` is `(softmax(row) - onehot(label))
//!   · dloss` per row, NaN for a row whose label is outside `0..C`.
//!
//! cpu:0 runs rows in parallel, each in vectorizable 16-lane loops. A GPU runs one workgroup
//! per row ([`ROW_WG`] invocations striding over it, tree reductions in workgroup memory), so
//! a 50k-class row loops a few hundred times per invocation, far under llvmpipe's limit.
//! f32 only (the builders keep the composites for f16 and other axes).
//!
//! Graph files:
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `layer_norm` | 3 (x, γ, β) | `eps` |
//! | `layer_norm_xhat` | 1 (x) | `eps` |
//! | `layer_norm_grad` | 3 (x, γ, dy) | `eps` |
//! | `softmax_cross_entropy` | 2 (logits, labels) | |
//! | `softmax_cross_entropy_grad` | 3 (logits, labels, dloss) | |

mod cpu;
mod file;
mod grad;
mod wgsl;

use super::family::{
    disjoint_words, run_via_reference, Arity, CpuIn, Declared, EmptyInput, Reject,
};
use super::family::{Family, GradCx};
use super::family::{KernelClass, KernelDef};
use super::family::{LowerCx, Lowered};
use super::Kernel;
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, Shape};

/// Invocations of a GPU workgroup, which together own one row.
pub const ROW_WG: u32 = 64;

/// Which row computation an op runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowPass {
    /// Layer normalisation: inputs `(x, γ, β)`, output `x`'s shape.
    LayerNorm,
    /// The normalised rows `x̂ = (x - μ) r`: input `(x)`, output `x`'s shape.
    LayerNormXhat,
    /// Layer normalisation's `dx`: inputs `(x, γ, dy)`, output `x`'s shape.
    LayerNormGrad,
    /// Per-row cross-entropy: inputs `(logits, labels)`, output `labels`' shape.
    SoftmaxXent,
    /// Its gradient: inputs `(logits, labels, dloss)`, output `logits`' shape.
    SoftmaxXentGrad,
}

impl RowPass {
    pub const ALL: [RowPass; 5] = [
        RowPass::LayerNorm,
        RowPass::LayerNormXhat,
        RowPass::LayerNormGrad,
        RowPass::SoftmaxXent,
        RowPass::SoftmaxXentGrad,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RowPass::LayerNorm => "layer_norm",
            RowPass::LayerNormXhat => "layer_norm_xhat",
            RowPass::LayerNormGrad => "layer_norm_grad",
            RowPass::SoftmaxXent => "softmax_cross_entropy",
            RowPass::SoftmaxXentGrad => "softmax_cross_entropy_grad",
        }
    }

    pub fn arity(self) -> usize {
        match self {
            RowPass::LayerNormXhat => 1,
            RowPass::SoftmaxXent => 2,
            _ => 3,
        }
    }

    /// A layer-normalisation pass (it has an `eps`).
    pub fn is_norm(self) -> bool {
        matches!(
            self,
            RowPass::LayerNorm | RowPass::LayerNormXhat | RowPass::LayerNormGrad
        )
    }
}

/// The family's op: one row pass (`eps_bits` holds layer normalisation's f32 epsilon, 0 for
/// the cross-entropy passes, so the op is `Eq` and `Hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rows {
    pub pass: RowPass,
    pub eps_bits: u32,
}

impl Rows {
    pub fn eps(&self) -> f32 {
        f32::from_bits(self.eps_bits)
    }
}

/// One row pass over `rows` rows of `d` values.
#[derive(Debug, Clone, PartialEq)]
pub struct RowKernel {
    pub pass: RowPass,
    pub rows: usize,
    pub d: usize,
    pub eps: f32,
}

impl RowKernel {
    /// Words per row of the output.
    fn out_width(&self) -> usize {
        if self.pass == RowPass::SoftmaxXent {
            1
        } else {
            self.d
        }
    }

    /// Words of each input, in binding order.
    fn input_sizes(&self) -> Vec<usize> {
        let (n, r) = (self.rows * self.d, self.rows);
        match self.pass {
            RowPass::LayerNorm => vec![n, self.d, self.d],
            RowPass::LayerNormXhat => vec![n],
            RowPass::LayerNormGrad => vec![n, self.d, n],
            RowPass::SoftmaxXent => vec![n, r],
            RowPass::SoftmaxXentGrad => vec![n, r, r],
        }
    }

    /// Passes over the row each invocation makes (for the loop bound and the traffic).
    fn sweeps(&self) -> u64 {
        match self.pass {
            RowPass::LayerNormXhat | RowPass::LayerNorm => 3,
            RowPass::LayerNormGrad => 4,
            RowPass::SoftmaxXent => 2,
            RowPass::SoftmaxXentGrad => 3,
        }
    }
}

impl Family for Rows {
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
        let name = self.name();
        if inputs.len() != self.pass.arity() {
            return Err(Reject::from(format!(
                "{name} takes {} inputs",
                self.pass.arity()
            )));
        }
        let (x, xd) = &inputs[0];
        if *xd != DType::F32 || x.rank() == 0 {
            return Err(Reject::from(format!(
                "{name} needs an f32 input of rank 1 or more ([.., D]), got {xd} {x}"
            )));
        }
        let r = x.rank();
        let d = x.dims()[r - 1];
        let row = Shape(vec![d]);
        let lead = Shape(x.dims()[..r - 1].to_vec());
        let want = |i: usize, shape: &Shape, dtype: DType, what: &str| -> Result<(), String> {
            let (s, t) = &inputs[i];
            if s == shape && *t == dtype {
                Ok(())
            } else {
                Err(format!(
                    "{name}: {what} must be {dtype} {shape} for an input of {x}, got {t} {s}"
                ))
            }
        };
        if !self.pass.is_norm() {
            if d == 0 {
                return Err(Reject::from(format!("{name}: logits {x} have no classes")));
            }
            want(1, &lead, DType::I32, "labels")?;
        }
        match self.pass {
            RowPass::LayerNorm => {
                want(1, &row, DType::F32, "gamma")?;
                want(2, &row, DType::F32, "beta")?;
            }
            RowPass::LayerNormGrad => {
                want(1, &row, DType::F32, "gamma")?;
                want(2, x, DType::F32, "dy")?;
            }
            RowPass::SoftmaxXent => return Ok((lead, DType::F32)),
            RowPass::SoftmaxXentGrad => want(2, &lead, DType::F32, "dloss")?,
            RowPass::LayerNormXhat => {}
        }
        if self.pass.is_norm() && !self.eps().is_finite() {
            return Err(Reject::from(format!(
                "{name}: eps {} is not finite",
                self.eps()
            )));
        }
        Ok((x.clone(), DType::F32))
    }

    fn rebinds(&self) -> bool {
        true
    }

    /// No rows: the output is empty too. No classes is a build error (see `infer`).
    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        EmptyInput::Fill(0)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let x = cx.in_shape(0).dims();
        let d = x.last().copied().unwrap_or(1);
        Ok(cx.dispatch(Kernel::Rows(RowKernel {
            pass: self.pass,
            rows: x[..x.len().saturating_sub(1)].iter().product(),
            d,
            eps: self.eps(),
        })))
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        out.attrs(&file::RowAttrs::of(self))
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        let pass = RowPass::ALL.into_iter().find(|p| p.name() == node.op)?;
        Some(
            node.attrs::<file::RowAttrs>()
                .and_then(|a| a.op(pass).map_err(|m| node.error("eps", m))),
        )
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        g.row_pass(self.pass, x, self.eps())
    }

    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        grad::grad(*self, g, cx)
    }
}

impl KernelDef for RowKernel {
    fn kind(&self) -> &'static str {
        self.pass.name()
    }

    fn class(&self) -> KernelClass {
        KernelClass::Reduce
    }

    /// About five flops per element and sweep (the exponentials counted as one).
    fn flops(&self, _out_elements: u64) -> Option<u64> {
        Some(self.sweeps() * 2 * (self.rows * self.d) as u64)
    }

    fn describe(&self) -> String {
        format!("{} [{}, {}]", self.pass.name(), self.rows, self.d)
    }

    fn wgsl(&self) -> String {
        wgsl::source(self)
    }

    fn uses_f16(&self) -> bool {
        false
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let mut out = vec![0u32; self.rows * self.out_width()];
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
        self.rows as u64 * u64::from(ROW_WG)
    }

    fn workgroup_size(&self) -> u32 {
        ROW_WG
    }

    fn loop_iterations(&self) -> Option<u64> {
        let per = (self.d as u64).div_ceil(u64::from(ROW_WG));
        Some(self.sweeps() * per + 4 * u64::from(ROW_WG.trailing_zeros()))
    }
}
