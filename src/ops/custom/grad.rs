//! Gradients of users' kernels.
//!
//! A typed elementwise function is differentiated symbolically ([`Expr::vjp`], the same
//! rules as the built-in ops) and each input's gradient becomes **one** new function node,
//! `<name>_grad<i>`, over the inputs it reads (the forward inputs, the forward output, `dy`).
//! One node rather than one builder call per operation keeps the backward graph the size of
//! the forward one however long the function, names it after the user's kernel, and still
//! lowers to an ordinary elementwise kernel, so it fuses with its neighbours and runs on
//! every device.
//!
//! A raw WGSL kernel is opaque: it is differentiable only through the gradient kernels its
//! author attached with [`RawWgsl::with_gradient`].

use super::{CustomElementwise, RawWgsl};
use crate::graph::{Graph, Tensor};
use crate::ops::elementwise::grad::fit;
use crate::ops::{Expr, GradCx, Node};
use crate::{DType, Error, Result};

impl CustomElementwise {
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let ins = cx
            .inputs
            .iter()
            .map(|&t| g.dtype(t))
            .collect::<Result<Vec<DType>>>()?;
        let mut args = cx.inputs.to_vec();
        args.extend([cx.output, cx.dy]);
        let grads = self.expr.vjp(&ins, cx.wanted);
        let mut out = Vec::with_capacity(grads.len());
        for (i, (e, &x)) in grads.into_iter().zip(cx.inputs).enumerate() {
            let Some(e) = e else {
                out.push(None);
                continue;
            };
            let (e, used) = only_used(&e, &args);
            let d = g.apply_expr(&format!("{}_grad{i}", self.name), e, &used)?;
            let shape = g.probe_shape(x)?.clone();
            out.push(Some(fit(g, d, &shape)?));
        }
        Ok(out)
    }
}

/// `e` over only the `args` it reads, renumbered, so the kernel binds nothing it ignores.
fn only_used(e: &Expr, args: &[Tensor]) -> (Expr, Vec<Tensor>) {
    let mut slot: Vec<Option<usize>> = vec![None; args.len()];
    let mut used = Vec::new();
    for node in e.nodes() {
        if let Node::Input(i) = *node {
            if slot[i].is_none() {
                slot[i] = Some(used.len());
                used.push(args[i]);
            }
        }
    }
    let e = e.substitute(&mut |i| Expr::input(slot[i].unwrap_or(i)));
    (e, used)
}

impl RawWgsl {
    pub(super) fn vjp(&self, g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        let mut args = cx.inputs.to_vec();
        args.push(cx.dy);
        let mut out = Vec::with_capacity(cx.inputs.len());
        for (i, &x) in cx.inputs.iter().enumerate() {
            if !cx.wants(i) {
                out.push(None);
                continue;
            }
            let fail = |message: String| Error::NotDifferentiable {
                op: "raw_wgsl".into(),
                node: cx.name.to_string(),
                message,
            };
            let Some((_, kernel)) = self.gradients.iter().find(|(k, _)| *k == i) else {
                return Err(fail(format!(
                    "raw WGSL kernel '{}' has no gradient kernel for input {i}; attach one with RawWgsl::with_gradient",
                    self.name
                )));
            };
            let d = g.raw_kernel(kernel, &args)?;
            let (want, got) = (
                (g.probe_shape(x)?, g.dtype(x)?),
                (g.probe_shape(d)?, g.dtype(d)?),
            );
            if want != got {
                return Err(fail(format!(
                    "the gradient kernel '{}' of input {i} gives {} {}, but the input is {} {}",
                    kernel.name, got.1, got.0, want.1, want.0
                )));
            }
            out.push(Some(d));
        }
        Ok(out)
    }
}
