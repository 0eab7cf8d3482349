//! Reverse mode as a graph transformation (`tf.gradients`): walk the nodes between the
//! differentiated outputs and the inputs asked about, newest first, ask each node's family
//! for its vector-Jacobian product ([`Family::grad`](crate::ops::Family::grad)), and sum
//! what arrives at each node. The result is ordinary graph nodes, so fusion, scheduling and
//! memory planning treat the backward pass like the forward one.

use super::{Graph, Tensor};
use crate::graph::NodeId;
use crate::id::IdVec;
use crate::ops::GradCx;
use crate::{Error, Result, Shape};
use std::collections::HashMap;
use std::panic::Location;

impl Graph {
    /// The gradient of `sum(y)` with respect to each of `xs` (TensorFlow's `tf.gradients`).
    ///
    /// The backward nodes are appended to this graph under the name scope `gradients/` and
    /// on the device of the forward node they differentiate. An entry is `None` where `y`
    /// does not depend on that `x`, or depends on it only through ops that stop gradients
    /// (comparisons, `argmax`, integer arithmetic, casts to integers, indices) — the same
    /// convention as `tf.gradients`; use [`Graph::zeros`] of the `x`'s shape where a zero is
    /// wanted instead. `y` must be a float tensor; an `x` of an integer or boolean dtype gets
    /// `None`.
    ///
    /// An op without a gradient rule on the way (a raw WGSL kernel without gradient kernels) is an
    /// [`Error::NotDifferentiable`] naming it.
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// let mut g = wgflow::Graph::new();
    /// let x = g.constant([1.0f32, 2.0, 3.0])?;
    /// let y = g.mul(x, x)?;
    /// let dx = g.gradients(y, &[x])?; // 2x
    /// assert!(dx[0].is_some());
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn gradients(&mut self, y: Tensor, xs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        self.gradients_at(&[y], xs, None, Location::caller())
    }

    /// [`Graph::gradients`] of `sum(ys[0]) + sum(ys[1]) + …`, each `ys[k]` weighted
    /// elementwise by `grad_ys[k]` when given (the incoming gradient, same shape and dtype as
    /// `ys[k]`), as `tf.gradients(ys, xs, grad_ys)`.
    #[track_caller]
    pub fn gradients_with(
        &mut self,
        ys: &[Tensor],
        xs: &[Tensor],
        grad_ys: Option<&[Tensor]>,
    ) -> Result<Vec<Option<Tensor>>> {
        self.gradients_at(ys, xs, grad_ys, Location::caller())
    }

    /// Sum `x` over the axes along which `shape` was broadcast to `x`'s shape, giving a
    /// tensor of `shape`: the reverse of broadcasting (PyTorch's `sum_to_size`). Gradient
    /// rules of broadcasting ops use it.
    #[track_caller]
    pub fn sum_to(&mut self, x: Tensor, shape: &Shape) -> Result<Tensor> {
        let loc = Location::caller();
        let from = self.arg(x, "sum_to", loc)?.shape.clone();
        if &from == shape {
            return Ok(x);
        }
        if Shape::broadcast(shape, &from).as_ref() != Some(&from) {
            return Err(Error::build(
                "sum_to",
                loc,
                format!("shape {shape} does not broadcast to {from}"),
            )
            .of_shapes(&[&from]));
        }
        let lead = from.rank() - shape.rank();
        let axes: Vec<isize> = (0..from.rank())
            .filter(|&a| a < lead || (shape.0[a - lead] == 1 && from.0[a] != 1))
            .map(|a| a as isize)
            .collect();
        let summed = if axes.is_empty() {
            x
        } else {
            self.reduce(crate::ops::ReduceOp::Sum, x, axes.into(), true, loc)?
        };
        self.view(summed, shape.clone(), "sum_to", loc)
    }

    fn gradients_at(
        &mut self,
        ys: &[Tensor],
        xs: &[Tensor],
        grad_ys: Option<&[Tensor]>,
        loc: &'static Location<'static>,
    ) -> Result<Vec<Option<Tensor>>> {
        let fail = |m: String| Error::build("gradients", loc, m);
        if let Some(gy) = grad_ys {
            if gy.len() != ys.len() {
                return Err(fail(format!(
                    "{} incoming gradient(s) for {} output(s)",
                    gy.len(),
                    ys.len()
                ))
                .of_value());
            }
        }
        for (k, &y) in ys.iter().enumerate() {
            let node = self.arg(y, "gradients", loc)?;
            if !node.dtype.is_float() {
                return Err(Error::build_dtype(
                    "gradients",
                    loc,
                    format!(
                        "can only differentiate float tensors; '{}' is {}",
                        node.name, node.dtype
                    ),
                    &[node.dtype],
                ));
            }
            if let Some(gy) = grad_ys {
                let g = self.arg(gy[k], "gradients", loc)?;
                if g.shape != node.shape || g.dtype != node.dtype {
                    let e = fail(format!(
                        "the incoming gradient '{}' is {} {}, but '{}' is {} {}",
                        g.name, g.dtype, g.shape, node.name, node.dtype, node.shape
                    ));
                    return Err(if g.dtype != node.dtype {
                        e.of_dtypes(&[g.dtype, node.dtype])
                    } else {
                        e.of_shapes(&[&g.shape, &node.shape])
                    });
                }
            }
        }
        for &x in xs {
            self.arg(x, "gradients", loc)?;
        }
        let on_path = self.path(ys, xs);
        let mut arriving: HashMap<NodeId, Vec<Tensor>> = HashMap::new();
        for (k, &y) in ys.iter().enumerate() {
            let seed = match grad_ys {
                Some(gy) => gy[k],
                None => {
                    self.name_scope("gradients", |g| g.filled_like(y, 1.0, "ones_like", loc))?
                }
            };
            arriving.entry(y.node).or_default().push(seed);
        }
        let mut result: HashMap<NodeId, Option<Tensor>> = HashMap::new();
        let wanted_x: Vec<NodeId> = xs.iter().map(|x| x.node).collect();
        // Reverse id order: every consumer's gradient arrives before its inputs are visited.
        for (n, _) in on_path.iter_enumerated().rev().filter(|(_, &p)| p) {
            let Some(parts) = arriving.remove(&n) else {
                continue;
            };
            let dy = self.add_all(n, parts, loc)?;
            if wanted_x.contains(&n) {
                result.insert(n, Some(dy));
            }
            let inputs = self.inputs_of(n);
            let wanted: Vec<bool> = inputs
                .iter()
                .map(|t| on_path[t.node] && self.g[t.node].dtype.is_float())
                .collect();
            if !wanted.iter().any(|&w| w) {
                continue;
            }
            let grads = self.node_grad(n, &inputs, &wanted, dy)?;
            for ((t, d), want) in inputs.iter().zip(grads).zip(&wanted) {
                if let (Some(d), true) = (d, want) {
                    arriving.entry(t.node).or_default().push(d);
                }
            }
        }
        Ok(xs
            .iter()
            .map(|x| result.get(&x.node).copied().flatten())
            .collect())
    }

    /// Which nodes lie on a path from some `x` to some `y` (by node index).
    fn path(&self, ys: &[Tensor], xs: &[Tensor]) -> IdVec<NodeId, bool> {
        let n = self.g.len();
        let mut from_x = IdVec::filled(false, n);
        for x in xs {
            from_x[x.node] = true;
        }
        // Nodes are appended after their inputs, so id order is a topological order.
        for i in self.g.ids() {
            if !from_x[i] {
                from_x[i] = self.inputs_of(i).iter().any(|t| from_x[t.node]);
            }
        }
        let mut to_y = IdVec::filled(false, n);
        for y in ys {
            to_y[y.node] = true;
        }
        for i in self.g.ids().rev() {
            if to_y[i] {
                for t in self.inputs_of(i) {
                    to_y[t.node] = true;
                }
            }
        }
        from_x.iter().zip(&to_y).map(|(a, b)| *a && *b).collect()
    }

    fn inputs_of(&self, n: NodeId) -> Vec<Tensor> {
        self.input_nodes(n)
            .iter()
            .map(|&node| Tensor {
                graph: self.id,
                node,
            })
            .collect()
    }

    /// The gradients node `n`'s family gives its inputs, built in `n`'s device scope and a
    /// `gradients/<name>_grad` name scope, checked against the inputs' shapes and dtypes.
    fn node_grad(
        &mut self,
        n: NodeId,
        inputs: &[Tensor],
        wanted: &[bool],
        dy: Tensor,
    ) -> Result<Vec<Option<Tensor>>> {
        let node = self.g[n].clone();
        let output = Tensor {
            graph: self.id,
            node: n,
        };
        let scope = format!("gradients/{}_grad", node.name);
        let grads = self.on_device_of(n, |g| {
            g.name_scope(&scope, |g| {
                let cx = GradCx {
                    name: &node.name,
                    inputs,
                    output,
                    dy,
                    wanted,
                };
                node.op.family().grad(g, &cx)
            })
        })?;
        if grads.len() != inputs.len() {
            return Err(Error::Internal(format!(
                "the gradient rule of {} ('{}') gave {} gradient(s) for {} input(s)",
                node.op.name(),
                node.name,
                grads.len(),
                inputs.len()
            )));
        }
        for (k, (d, t)) in grads.iter().zip(inputs).enumerate() {
            let Some(d) = d else { continue };
            let (want, got) = (&self.g[t.node], &self.g[d.node]);
            if want.shape != got.shape || want.dtype != got.dtype {
                return Err(Error::Internal(format!(
                    "the gradient rule of {} ('{}') gave input {k} a {} {} gradient for a {} {} input",
                    node.op.name(),
                    node.name,
                    got.dtype,
                    got.shape,
                    want.dtype,
                    want.shape
                )));
            }
        }
        Ok(grads)
    }

    /// The sum of the gradients arriving at node `n`, built on `n`'s device.
    fn add_all(
        &mut self,
        n: NodeId,
        parts: Vec<Tensor>,
        loc: &'static Location<'static>,
    ) -> Result<Tensor> {
        let mut it = parts.into_iter();
        let Some(mut acc) = it.next() else {
            return Err(Error::Internal("no gradient arrived".into()));
        };
        self.on_device_of(n, |g| {
            g.name_scope("gradients", |g| {
                for p in it {
                    acc = g.binary(crate::ops::BinaryOp::Add, acc, p, loc)?;
                }
                Ok(acc)
            })
        })
    }

    /// Build with `f` in node `n`'s device scope, if it has one (gradients are colocated
    /// with the forward node, as in TensorFlow).
    fn on_device_of<T>(&mut self, n: NodeId, f: impl FnOnce(&mut Graph) -> Result<T>) -> Result<T> {
        let device = self.g[n].device;
        if let Some(d) = device {
            self.device_scopes.push(d);
        }
        let r = f(self);
        if device.is_some() {
            self.device_scopes.pop();
        }
        r
    }
}
