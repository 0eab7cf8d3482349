//! The gradients of the row ops: layer normalisation's `dx` by `layer_norm_grad`, `dγ` and
//! `dβ` as sums over the leading axes of `dy x̂` and `dy`; cross-entropy's `dlogits` by
//! `softmax_cross_entropy_grad` (labels are integers: no gradient). The backward passes
//! have no gradient of their own (no second derivatives; the composites have them).

use super::{RowPass, Rows};
use crate::graph::{Axes, Graph, Tensor};
use crate::ops::family::GradCx;
use crate::{Error, Result};

pub(super) fn grad(op: Rows, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
    let eps = op.eps();
    match op.pass {
        RowPass::LayerNorm => {
            let [x, gamma] = [cx.inputs[0], cx.inputs[1]];
            let dx = if cx.wants(0) {
                Some(g.row_pass(RowPass::LayerNormGrad, &[x, gamma, cx.dy], eps)?)
            } else {
                None
            };
            let lead: Vec<isize> = (0..g.node(x)?.shape.rank() as isize - 1).collect();
            // Over the leading axes (none for a single row).
            let over = |g: &mut Graph, t: Tensor| -> Result<Tensor> {
                if lead.is_empty() {
                    Ok(t)
                } else {
                    g.sum(t, Axes::List(lead.clone()), false)
                }
            };
            let dgamma = if cx.wants(1) {
                let xhat = g.row_pass(RowPass::LayerNormXhat, &[x], eps)?;
                let p = g.mul(cx.dy, xhat)?;
                Some(over(g, p)?)
            } else {
                None
            };
            let dbeta = if cx.wants(2) {
                Some(over(g, cx.dy)?)
            } else {
                None
            };
            Ok(vec![dx, dgamma, dbeta])
        }
        RowPass::SoftmaxXent => {
            let dl = if cx.wants(0) {
                let ins = [cx.inputs[0], cx.inputs[1], cx.dy];
                Some(g.row_pass(RowPass::SoftmaxXentGrad, &ins, 0.0)?)
            } else {
                None
            };
            Ok(vec![dl, None])
        }
        pass => Err(Error::NotDifferentiable {
            op: pass.name().to_string(),
            node: cx.name.to_string(),
            message: "the backward passes of the fused row ops have no gradient (no second \
                      derivatives; build the composite for them)"
                .into(),
        }),
    }
}
