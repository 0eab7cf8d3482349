//! Builders of the attention family: fused scaled dot-product attention and its passes.

use crate::graph::{Graph, Site, Tensor};
use crate::ops::attention::{Attention, AttentionPass};
use crate::ops::{Declared, Op};
use crate::{Error, Result};
use std::panic::Location;

impl Graph {
    /// Fused scaled dot-product attention, `softmax(scale · q kᵀ + mask) v` over the last
    /// two axes: `q` is `[.., Tq, D]`, `k` and `v` `[.., Tk, D]` with the same leading axes
    /// (batch, heads), the output has `q`'s shape. `causal` lets query `i` see the keys up
    /// to `i + Tk - Tq` (the usual triangle when `Tq == Tk`); `scale` defaults to
    /// `1/sqrt(D)`. One primitive with its own forward and backward kernels on every device,
    /// which never store the `[Tq, Tk]` scores or probabilities (the composite
    /// `softmax(q kᵀ) v`, which stores them, is what tests hold it to). f32.
    #[track_caller]
    pub fn attention(
        &mut self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        causal: bool,
        scale: Option<f32>,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let shape = self.arg(q, "attention", loc)?.shape.clone();
        let d = shape.dims().last().copied().unwrap_or(0);
        let scale = scale.unwrap_or(1.0 / (d.max(1) as f32).sqrt());
        if !scale.is_finite() {
            return Err(
                Error::build("attention", loc, format!("scale {scale} is not finite")).of_value(),
            );
        }
        let ks = &self.arg(k, "attention", loc)?.shape;
        if ks.rank() >= 2 && ks.dims()[ks.rank() - 2] == 0 {
            return Err(
                Error::build("attention", loc, format!("k {ks} has no keys")).of_shapes(&[ks]),
            );
        }
        self.attention_at(AttentionPass::Forward, &[q, k, v], causal, scale, loc)
    }

    /// One pass of attention's forward or backward computation by name (graph files and
    /// the gradient rule use it; see `ops::attention` for the passes' inputs).
    #[track_caller]
    pub fn attention_pass(
        &mut self,
        pass: AttentionPass,
        inputs: &[Tensor],
        causal: bool,
        scale: f32,
    ) -> Result<Tensor> {
        self.attention_at(pass, inputs, causal, scale, Location::caller())
    }

    fn attention_at(
        &mut self,
        pass: AttentionPass,
        inputs: &[Tensor],
        causal: bool,
        scale: f32,
        loc: &'static Location<'static>,
    ) -> Result<Tensor> {
        let op = Attention {
            pass,
            causal,
            scale_bits: scale.to_bits(),
        };
        self.add_op(
            Op::Attention(op),
            inputs,
            Declared::none(),
            Site::new(pass.name(), loc),
        )
    }
}
