//! Optimizers: SGD (with momentum and Nesterov momentum) and Adam (with L2 or decoupled
//! weight decay, i.e. AdamW), following PyTorch's update formulas exactly.
//!
//! Each produces one train target for a list of variables: a group of assignments whose
//! values are elementwise expressions of the variable, its gradient, its slots and the
//! learning rate, so the compiler fuses each assigned value into one kernel.
//!
//! Remember a run's semantics (see [`Graph::assign`]): every read of a variable sees its
//! start-of-run value and assignments land when the run finishes. So the new moments are
//! computed as tensors and used for the weight's update in the same run, never read back
//! from their slot variables, and Adam's step in a run is the stored count plus one.

use crate::graph::{Graph, Tensor};
use crate::ops::Initializer;
use crate::{DType, Error, Result, Shape};
use std::panic::Location;

type Loc = &'static Location<'static>;

/// A learning rate: a constant, or a scalar f32 tensor (a fed placeholder or a variable) so
/// that schedules can change it between runs without rebuilding the graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LearningRate {
    Constant(f32),
    Tensor(Tensor),
}

impl From<f32> for LearningRate {
    fn from(v: f32) -> Self {
        LearningRate::Constant(v)
    }
}

impl From<Tensor> for LearningRate {
    fn from(t: Tensor) -> Self {
        LearningRate::Tensor(t)
    }
}

impl LearningRate {
    /// The rate as a scalar f32 tensor of `g`; a constant must be finite and >= 0.
    fn tensor(self, g: &mut Graph, op: &str, loc: Loc) -> Result<Tensor> {
        match self {
            LearningRate::Constant(v) if v.is_finite() && v >= 0.0 => g.constant(v),
            LearningRate::Constant(v) => Err(Error::build(
                op,
                loc,
                format!("the learning rate must be finite and >= 0, got {v}"),
            )
            .of_value()),
            LearningRate::Tensor(t) => {
                let n = g.arg(t, op, loc)?;
                if n.dtype != DType::F32 || n.shape.rank() != 0 {
                    let e = Error::build(
                        op,
                        loc,
                        format!(
                            "the learning rate must be a scalar f32 tensor; '{}' is {} {}",
                            n.name, n.dtype, n.shape
                        ),
                    );
                    return Err(if n.dtype != DType::F32 {
                        e.of_dtypes(&[n.dtype])
                    } else {
                        e.of_shapes(&[&n.shape])
                    });
                }
                Ok(t)
            }
        }
    }
}

/// Something that updates variables from their gradients.
pub trait Optimizer {
    /// One train target that updates each variable of `grads_and_vars` (pairs `(gradient,
    /// variable)`, as `tf.train.Optimizer.apply_gradients`) and the optimizer's slots.
    /// Variables must be f32 variables, each listed once, each gradient of its variable's
    /// shape and dtype.
    fn apply_gradients(&self, g: &mut Graph, grads_and_vars: &[(Tensor, Tensor)])
        -> Result<Tensor>;

    /// [`Optimizer::apply_gradients`] with the gradients of `sum(loss)` with respect to
    /// `vars` ([`Graph::gradients`]). A variable the loss does not depend on (through
    /// differentiable ops) is an error naming it.
    #[track_caller]
    fn minimize(&self, g: &mut Graph, loss: Tensor, vars: &[Tensor]) -> Result<Tensor> {
        let loc = Location::caller();
        check_vars(g, vars, "minimize", loc)?;
        let grads = g.gradients(loss, vars)?;
        let mut pairs = Vec::with_capacity(vars.len());
        for (&v, d) in vars.iter().zip(grads) {
            let Some(d) = d else {
                let (var, l) = (g.name(v)?, g.name(loss)?);
                return Err(Error::build(
                    "minimize",
                    loc,
                    format!("variable '{var}' gets no gradient from '{l}' (the loss does not depend on it through differentiable ops)"),
                ));
            };
            pairs.push((d, v));
        }
        self.apply_gradients(g, &pairs)
    }
}

/// Stochastic gradient descent as `torch.optim.SGD` (no dampening, no weight decay):
/// with momentum `μ > 0`, `b = μ·b + g` (the slot `"{var}/{name}/momentum"`, zeros at
/// first), then `w -= lr·b`, or `w -= lr·(g + μ·b)` with `nesterov`; with `μ = 0`,
/// `w -= lr·g`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sgd {
    pub lr: LearningRate,
    pub momentum: f32,
    pub nesterov: bool,
    /// The slots' name part (`"SGD"`); give optimizers of one graph different names.
    pub name: String,
}

impl Sgd {
    /// Plain SGD.
    pub fn new(lr: impl Into<LearningRate>) -> Self {
        Sgd {
            lr: lr.into(),
            momentum: 0.0,
            nesterov: false,
            name: "SGD".into(),
        }
    }

    /// SGD with heavy-ball momentum `momentum`.
    pub fn momentum(lr: impl Into<LearningRate>, momentum: f32) -> Self {
        Sgd {
            momentum,
            ..Sgd::new(lr)
        }
    }

    /// SGD with Nesterov momentum `momentum` (> 0).
    pub fn nesterov(lr: impl Into<LearningRate>, momentum: f32) -> Self {
        Sgd {
            momentum,
            nesterov: true,
            ..Sgd::new(lr)
        }
    }
}

impl Optimizer for Sgd {
    #[track_caller]
    fn apply_gradients(
        &self,
        g: &mut Graph,
        grads_and_vars: &[(Tensor, Tensor)],
    ) -> Result<Tensor> {
        let (op, loc) = ("SGD", Location::caller());
        let mu = self.momentum;
        if !(mu.is_finite() && mu >= 0.0) {
            return Err(Error::build(
                op,
                loc,
                format!("momentum must be finite and >= 0, got {mu}"),
            )
            .of_value());
        }
        if self.nesterov && mu == 0.0 {
            return Err(Error::build(op, loc, "Nesterov momentum needs a momentum > 0").of_value());
        }
        check_pairs(g, grads_and_vars, op, loc)?;
        let lr = self.lr.tensor(g, op, loc)?;
        let mut updates = Vec::new();
        for &(grad, w) in grads_and_vars {
            on_device_of(g, w, |g| {
                let step = if mu == 0.0 {
                    grad
                } else {
                    let b = slot(g, w, &self.name, "momentum")?;
                    let mu = g.constant(mu)?;
                    let mb = g.mul(mu, b)?;
                    let b_new = g.add(mb, grad)?;
                    updates.push(g.assign(b, b_new)?);
                    if self.nesterov {
                        let mb = g.mul(mu, b_new)?;
                        g.add(grad, mb)?
                    } else {
                        b_new
                    }
                };
                let delta = g.mul(lr, step)?;
                let w_new = g.sub(w, delta)?;
                updates.push(g.assign(w, w_new)?);
                Ok(())
            })?;
        }
        g.group(&updates)
    }
}

/// Adam as `torch.optim.Adam`, or AdamW (`torch.optim.AdamW`) with `decoupled_weight_decay`.
///
/// With `t` the 1-based step of this update (the slot `"{name}/t"` holds the steps done):
/// `m = β1·m + (1−β1)·g`, `v = β2·v + (1−β2)·g²` (slots `"{var}/{name}/m"` and
/// `"{var}/{name}/v"`, zeros at first), `m̂ = m / (1−β1^t)`, `v̂ = v / (1−β2^t)`,
/// `w -= lr·m̂ / (√v̂ + ε)`. Weight decay `λ`: coupled (Adam's L2 penalty) adds `λ·w` to
/// the gradient first; decoupled (Loshchilov & Hutter's AdamW) shrinks the weight instead,
/// `w = w·(1 − lr·λ)`, then takes the Adam step.
#[derive(Debug, Clone, PartialEq)]
pub struct Adam {
    pub lr: LearningRate,
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub weight_decay: f32,
    /// AdamW: apply `weight_decay` to the weight, not the gradient.
    pub decoupled_weight_decay: bool,
    /// The slots' name part (`"Adam"` or `"AdamW"`); give optimizers of one graph different
    /// names.
    pub name: String,
}

impl Adam {
    /// Adam with PyTorch's defaults: β1 0.9, β2 0.999, ε 1e-8, no weight decay.
    pub fn new(lr: impl Into<LearningRate>) -> Self {
        Adam {
            lr: lr.into(),
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            name: "Adam".into(),
        }
    }

    /// AdamW with decoupled weight decay `weight_decay` (PyTorch's default is 0.01) and
    /// Adam's other defaults.
    pub fn adamw(lr: impl Into<LearningRate>, weight_decay: f32) -> Self {
        Adam {
            weight_decay,
            decoupled_weight_decay: true,
            name: "AdamW".into(),
            ..Adam::new(lr)
        }
    }

    fn check(&self, op: &str, loc: Loc) -> Result<()> {
        let bad = |what: &str, v: f32, rule: &str| {
            Err(Error::build(op, loc, format!("{what} must be {rule}, got {v}")).of_value())
        };
        for (what, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return bad(what, b, "in [0, 1)");
            }
        }
        for (what, v) in [
            ("epsilon", self.epsilon),
            ("weight_decay", self.weight_decay),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(what, v, "finite and >= 0");
            }
        }
        Ok(())
    }
}

impl Optimizer for Adam {
    #[track_caller]
    fn apply_gradients(
        &self,
        g: &mut Graph,
        grads_and_vars: &[(Tensor, Tensor)],
    ) -> Result<Tensor> {
        let (op, loc) = ("Adam", Location::caller());
        self.check(op, loc)?;
        check_pairs(g, grads_and_vars, op, loc)?;
        let lr = self.lr.tensor(g, op, loc)?;
        let first = grads_and_vars[0].1;
        let (bc1, bc2, mut updates) = on_device_of(g, first, |g| {
            let t = g.variable_with(
                &format!("{}/t", self.name),
                Shape::from([]),
                DType::F32,
                Initializer::Zeros,
            )?;
            let one = g.constant(1.0f32)?;
            let t_new = g.add(t, one)?;
            let update = g.assign(t, t_new)?;
            let mut correction = |beta: f32| -> Result<Tensor> {
                let beta = g.constant(beta)?;
                let power = g.pow(beta, t_new)?;
                g.sub(one, power)
            };
            let bc1 = correction(self.beta1)?;
            let bc2 = correction(self.beta2)?;
            Ok((bc1, bc2, vec![update]))
        })?;
        let wd = self.weight_decay;
        for &(grad, w) in grads_and_vars {
            on_device_of(g, w, |g| {
                let c = |g: &mut Graph, v: f32| g.constant(v);
                let grad = if wd != 0.0 && !self.decoupled_weight_decay {
                    let l = c(g, wd)?;
                    let lw = g.mul(l, w)?;
                    g.add(grad, lw)?
                } else {
                    grad
                };
                let m = slot(g, w, &self.name, "m")?;
                let v = slot(g, w, &self.name, "v")?;
                let (b1, k1) = (c(g, self.beta1)?, c(g, 1.0 - self.beta1)?);
                let (b2, k2) = (c(g, self.beta2)?, c(g, 1.0 - self.beta2)?);
                let b1m = g.mul(b1, m)?;
                let k1g = g.mul(k1, grad)?;
                let m_new = g.add(b1m, k1g)?;
                let b2v = g.mul(b2, v)?;
                let gg = g.mul(grad, grad)?;
                let k2gg = g.mul(k2, gg)?;
                let v_new = g.add(b2v, k2gg)?;
                updates.push(g.assign(m, m_new)?);
                updates.push(g.assign(v, v_new)?);
                let m_hat = g.div(m_new, bc1)?;
                let v_hat = g.div(v_new, bc2)?;
                let root = g.sqrt(v_hat)?;
                let eps = c(g, self.epsilon)?;
                let denom = g.add(root, eps)?;
                let step = g.div(m_hat, denom)?;
                let delta = g.mul(lr, step)?;
                let base = if wd != 0.0 && self.decoupled_weight_decay {
                    let l = c(g, wd)?;
                    let lrl = g.mul(lr, l)?;
                    let one = c(g, 1.0)?;
                    let keep = g.sub(one, lrl)?;
                    g.mul(w, keep)?
                } else {
                    w
                };
                let w_new = g.sub(base, delta)?;
                updates.push(g.assign(w, w_new)?);
                Ok(())
            })?;
        }
        g.group(&updates)
    }
}

/// `vars` are distinct f32 variables of `g`, at least one.
fn check_vars(g: &Graph, vars: &[Tensor], op: &str, loc: Loc) -> Result<()> {
    if vars.is_empty() {
        return Err(Error::build(op, loc, "no variables to update").of_value());
    }
    for (k, &v) in vars.iter().enumerate() {
        let n = g.arg(v, op, loc)?;
        if !n.op.is_variable() {
            return Err(Error::build(
                op,
                loc,
                format!(
                    "'{}' is a {}, not a variable; optimizers update variables",
                    n.name,
                    n.op.name()
                ),
            ));
        }
        if n.dtype != DType::F32 {
            return Err(Error::build(
                op,
                loc,
                format!(
                    "variable '{}' is {}; optimizers update f32 variables",
                    n.name, n.dtype
                ),
            )
            .of_dtypes(&[n.dtype]));
        }
        if vars[..k].contains(&v) {
            return Err(
                Error::build(op, loc, format!("variable '{}' is listed twice", n.name)).of_value(),
            );
        }
    }
    Ok(())
}

/// Each pair is `(gradient, variable)` with the gradient of the variable's shape and dtype.
fn check_pairs(g: &Graph, pairs: &[(Tensor, Tensor)], op: &str, loc: Loc) -> Result<()> {
    let vars: Vec<Tensor> = pairs.iter().map(|&(_, v)| v).collect();
    check_vars(g, &vars, op, loc)?;
    for &(d, v) in pairs {
        let (dn, vn) = (g.arg(d, op, loc)?, g.arg(v, op, loc)?);
        if dn.shape != vn.shape || dn.dtype != vn.dtype {
            let e = Error::build(
                op,
                loc,
                format!(
                    "the gradient '{}' is {} {}, but variable '{}' is {} {}",
                    dn.name, dn.dtype, dn.shape, vn.name, vn.dtype, vn.shape
                ),
            );
            return Err(if dn.dtype != vn.dtype {
                e.of_dtypes(&[dn.dtype, vn.dtype])
            } else {
                e.of_shapes(&[&dn.shape, &vn.shape])
            });
        }
    }
    Ok(())
}

/// A zero-initialized slot variable `"{var}/{opt}/{what}"` shaped like `w`.
fn slot(g: &mut Graph, w: Tensor, opt: &str, what: &str) -> Result<Tensor> {
    let (name, shape) = {
        let n = g.node(w)?;
        (format!("{}/{opt}/{what}", n.name), n.shape.clone())
    };
    g.variable_with(&name, shape, DType::F32, Initializer::Zeros)
}

/// Build with `f` in the device scope `w` was built in (if any), so slots live and updates
/// run where the variable does.
fn on_device_of<T>(g: &mut Graph, w: Tensor, f: impl FnOnce(&mut Graph) -> Result<T>) -> Result<T> {
    match g.requested_device(w)? {
        Some(spec) => g.device(&spec.to_string(), f),
        None => f(g),
    }
}
