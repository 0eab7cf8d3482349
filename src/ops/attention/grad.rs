//! The gradient of fused attention, without the `[Tq, Tk]` probabilities: each query's
//! log-sum-exp is recomputed (`attention_lse`), `δ_i = Σ dO_i · O_i`, and three kernels
//! give `dQ`, `dK` and `dV` (see the module's formulas). The passes behind the gradient have
//! no gradient of their own (no second derivatives of attention).

use super::{Attention, AttentionPass};
use crate::graph::{Axes, Graph, Tensor};
use crate::ops::family::GradCx;
use crate::{Error, Result};

pub(super) fn grad(op: Attention, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
    if op.pass != AttentionPass::Forward {
        return Err(Error::NotDifferentiable {
            op: op.pass.name().to_string(),
            node: cx.name.to_string(),
            message: "the passes of attention's gradient have no gradient (no second \
                      derivatives of fused attention; use the composite)"
                .into(),
        });
    }
    let [q, k, v] = [cx.inputs[0], cx.inputs[1], cx.inputs[2]];
    let (causal, scale) = (op.causal, op.scale());
    let lse = g.attention_pass(AttentionPass::Lse, &[q, k], causal, scale)?;
    let prod = g.mul(cx.dy, cx.output)?;
    let delta = g.sum(prod, Axes::List(vec![-1]), false)?;
    let all = [q, k, v, cx.dy, lse, delta];
    let dq = if cx.wants(0) {
        Some(g.attention_pass(AttentionPass::GradQ, &all, causal, scale)?)
    } else {
        None
    };
    let dk = if cx.wants(1) {
        Some(g.attention_pass(AttentionPass::GradK, &all, causal, scale)?)
    } else {
        None
    };
    let dv = if cx.wants(2) {
        Some(g.attention_pass(AttentionPass::GradV, &[q, k, cx.dy, lse], causal, scale)?)
    } else {
        None
    };
    Ok(vec![dq, dk, dv])
}
