//! The gradient rule of matmul: with both operands seen as matrices (a 1-D left operand as
//! the row `[1, K]`, a 1-D right operand as the column `[K, 1]`, and `dy` with the dropped
//! 1s put back), `dA = dy @ Bᵀ` and `dB = Aᵀ @ dy`, each summed over the batch dims its
//! operand was broadcast along and viewed back as the operand's shape.
//!
//! The transposes are ordinary graph nodes (the rule stays the textbook one, and other
//! consumers may share them); fusion folds each into the matmul that reads it, which then
//! reads the stored operand transposed in place (`compile/fuse/transpose.rs`), so no
//! transpose kernel runs.

use super::{as_matrix, matmul_shape, MatMul};
use crate::graph::{Graph, Tensor};
use crate::ops::GradCx;
use crate::{Error, Result, Shape};

impl MatMul {
    /// The vector-Jacobian product of one matmul node (see
    /// [`Family::grad`](crate::ops::Family::grad)).
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = (cx.inputs[0], cx.inputs[1]);
        let (sa, sb) = (g.probe_shape(a)?.clone(), g.probe_shape(b)?.clone());
        let (ma, mb) = (as_matrix(&sa, true), as_matrix(&sb, false));
        let out =
            matmul_shape(&ma, &mb).map_err(|m| Error::Internal(format!("matmul grad: {m}")))?;
        let dy = view(g, cx.dy, &out)?;
        let mut grads = vec![None, None];
        if cx.wants(0) {
            let bm = view(g, b, &mb)?;
            let bt = swap_last(g, bm)?;
            let da = g.matmul(dy, bt)?;
            let da = g.sum_to(da, &ma)?;
            grads[0] = Some(view(g, da, &sa)?);
        }
        if cx.wants(1) {
            let am = view(g, a, &ma)?;
            let at = swap_last(g, am)?;
            let db = g.matmul(at, dy)?;
            let db = g.sum_to(db, &mb)?;
            grads[1] = Some(view(g, db, &sb)?);
        }
        Ok(grads)
    }
}

/// `t` viewed as `shape` (no node when it already has it).
fn view(g: &mut Graph, t: Tensor, shape: &Shape) -> Result<Tensor> {
    if g.probe_shape(t)? == shape {
        return Ok(t);
    }
    let dims: Vec<isize> = shape.0.iter().map(|&d| d as isize).collect();
    g.reshape(t, &dims)
}

/// The last two axes swapped (a matrix transpose of every batch).
fn swap_last(g: &mut Graph, t: Tensor) -> Result<Tensor> {
    let r = g.probe_shape(t)?.rank() as isize;
    let mut perm: Vec<isize> = (0..r).collect();
    perm.swap((r - 2) as usize, (r - 1) as usize);
    g.transpose(t, &perm)
}
