//! Builders of the row family: fused softmax cross-entropy with integer labels, and the row
//! passes by name (layer normalisation's fused form is chosen by `Graph::layer_norm`).

use crate::graph::{Graph, Site, Tensor};
use crate::ops::rows::{RowPass, Rows};
use crate::ops::{Declared, Op};
use crate::{DType, Result};
use std::panic::Location;

impl Graph {
    /// Softmax cross-entropy with integer labels, per row of the last axis:
    /// `loss[..] = logsumexp(logits[.., :]) - logits[.., labels[..]]` for `logits [.., C]`
    /// (f32) and `labels [..]` (i32), TensorFlow's `sparse_softmax_cross_entropy_with_logits`.
    /// One primitive with its own forward and backward kernels on every device: the
    /// gradient `(softmax - onehot) · dloss` is computed from the logits, so no
    /// log-probabilities or one-hot matrix are stored. A label outside `0..C` gives NaN for
    /// its row (and its gradient). Take the mean of the result for the usual loss.
    #[track_caller]
    pub fn sparse_softmax_cross_entropy(
        &mut self,
        logits: Tensor,
        labels: Tensor,
    ) -> Result<Tensor> {
        self.rows_at(
            RowPass::SoftmaxXent,
            &[logits, labels],
            0.0,
            Location::caller(),
        )
    }

    /// One fused row pass by name (graph files and the gradient rules use it; see
    /// `ops::rows` for the passes' inputs). `eps` is layer normalisation's, ignored by the
    /// cross-entropy passes.
    #[track_caller]
    pub fn row_pass(&mut self, pass: RowPass, inputs: &[Tensor], eps: f32) -> Result<Tensor> {
        self.rows_at(pass, inputs, eps, Location::caller())
    }

    /// `(gamma, beta)` when `layer_norm(x, gamma, beta)` over `axis` can run as the fused
    /// primitive: f32, the last axis, and both parameters f32 of shape `[D]`.
    pub(super) fn fused_layer_norm_params(
        &self,
        x: Tensor,
        gamma: Option<Tensor>,
        beta: Option<Tensor>,
        axis: isize,
    ) -> Option<(Tensor, Tensor)> {
        let (node, gamma, beta) = (self.node(x).ok()?, gamma?, beta?);
        let (shape, r) = (&node.shape, node.shape.rank());
        if node.dtype != DType::F32 || r == 0 || shape.axis(axis) != Some(r - 1) {
            return None;
        }
        let row = [shape.dims()[r - 1]];
        [gamma, beta]
            .iter()
            .all(|&p| {
                self.node(p)
                    .is_ok_and(|n| n.dtype == DType::F32 && n.shape.dims() == row)
            })
            .then_some((gamma, beta))
    }

    pub(super) fn rows_at(
        &mut self,
        pass: RowPass,
        inputs: &[Tensor],
        eps: f32,
        loc: &'static Location<'static>,
    ) -> Result<Tensor> {
        let eps_bits = if pass.is_norm() { eps.to_bits() } else { 0 };
        self.add_op(
            Op::Rows(Rows { pass, eps_bits }),
            inputs,
            Declared::none(),
            Site::new(pass.name(), loc),
        )
    }
}
