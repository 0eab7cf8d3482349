//! Gradient checks: analytic gradients (the backward graph) against central finite
//! differences of the forward graph, on cpu:0, then every GPU against cpu:0.
//!
//! The differentiated scalar is `sum(f(xs) * w)` with fixed random weights `w`, so every
//! output element matters and the gradients are not all equal.

use super::{gpus, session_on};
use wgflow::{DType, Device, Graph, HostTensor, Result, Tensor};

/// A function of the inputs to differentiate.
pub type Build<'a> = &'a dyn Fn(&mut Graph, &[Tensor]) -> Result<Tensor>;

/// Deterministic pseudo-random values in `[lo, hi)` (xorshift; no dependency on rand).
pub fn uniform(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// A random f32 tensor of `shape` with values in `[lo, hi)`.
pub fn rand(shape: &[usize], lo: f32, hi: f32, seed: u64) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::new(shape.to_vec(), uniform(n, lo, hi, seed)).expect("tensor")
}

/// The graph `sum(f(xs) * w)` over placeholders `x0, x1, …`, with the gradients of every
/// input in `wrt` (the others are constants of the function).
pub struct GradGraph {
    pub graph: Graph,
    pub xs: Vec<Tensor>,
    pub loss: Tensor,
    pub grads: Vec<Option<Tensor>>,
}

pub fn grad_graph(f: Build<'_>, inputs: &[HostTensor], wrt: &[usize]) -> GradGraph {
    let mut g = Graph::new();
    let xs: Vec<Tensor> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            g.placeholder(&format!("x{i}"), t.shape().clone(), t.dtype())
                .expect("placeholder")
        })
        .collect();
    let y = f(&mut g, &xs).expect("forward");
    let shape = g.shape(y).unwrap().clone();
    let w = g
        .constant(rand(&shape.0, 0.5, 1.5, 7 + shape.numel() as u64))
        .expect("weights");
    let w = if g.dtype(y).unwrap() == DType::F32 {
        w
    } else {
        g.cast(w, g.dtype(y).unwrap()).expect("cast")
    };
    let yw = g.mul(y, w).expect("weighted");
    let loss = g.sum(yw, wgflow::Axes::All, false).expect("loss");
    let want: Vec<Tensor> = wrt.iter().map(|&i| xs[i]).collect();
    let grads = g.gradients(loss, &want).expect("gradients");
    GradGraph {
        graph: g,
        xs,
        loss,
        grads,
    }
}

/// Check the gradients of `f` with respect to the inputs listed in `wrt` against central
/// differences with step `eps` on cpu:0 (within `atol + rtol·|fd|`), then each GPU's
/// gradients against cpu:0's (within `gpu_tol` relative to the largest gradient).
pub fn check(
    what: &str,
    f: Build<'_>,
    inputs: &[HostTensor],
    wrt: &[usize],
    eps: f32,
    rtol: f32,
    atol: f32,
) {
    let gg = grad_graph(f, inputs, wrt);
    let feeds: Vec<(Tensor, HostTensor)> =
        gg.xs.iter().copied().zip(inputs.iter().cloned()).collect();
    let fetches: Vec<Tensor> = gg
        .grads
        .iter()
        .map(|g| g.unwrap_or_else(|| panic!("{what}: a gradient is None")))
        .collect();
    let mut cpu = session_on(&gg.graph, Device::Cpu);
    let analytic = cpu.run(&feeds, &fetches).expect("gradient run");
    for (k, &i) in wrt.iter().enumerate() {
        let x = inputs[i].to_f32().expect("f32 input");
        let got = analytic[k].to_f32().expect("f32 gradient");
        assert_eq!(got.len(), x.len(), "{what}: gradient {i} size");
        for j in 0..x.len() {
            let mut loss_at = |delta: f32| -> f64 {
                let mut v = x.clone();
                v[j] += delta;
                let mut fd = feeds.clone();
                fd[i].1 = HostTensor::new(inputs[i].shape().0.clone(), v)
                    .expect("tensor")
                    .cast_like(&inputs[i]);
                let out = cpu.run(&fd, &[gg.loss]).expect("forward run");
                out[0].to_f32().expect("loss")[0] as f64
            };
            let fd = ((loss_at(eps) - loss_at(-eps)) / (2.0 * eps as f64)) as f32;
            let a = got[j];
            assert!(
                (a - fd).abs() <= atol + rtol * fd.abs(),
                "{what}: d/dx{i}[{j}] analytic {a} vs finite difference {fd}"
            );
        }
    }
    for gpu in gpus() {
        let mut s = session_on(&gg.graph, gpu);
        let out = s.run(&feeds, &fetches).expect("gpu gradient run");
        for (k, (a, b)) in out.iter().zip(&analytic).enumerate() {
            let (a, b) = (a.to_f32().unwrap(), b.to_f32().unwrap());
            let scale = b.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            for (j, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-4 * scale + 1e-5,
                    "{what} on {gpu}: gradient {k}[{j}] {x} vs cpu:0 {y}"
                );
            }
        }
    }
}

/// Extension used by [`check`]: convert a perturbed f32 copy back to the input's dtype.
pub trait CastLike {
    fn cast_like(self, like: &HostTensor) -> HostTensor;
}

impl CastLike for HostTensor {
    fn cast_like(self, like: &HostTensor) -> HostTensor {
        if like.dtype() == DType::F32 {
            self
        } else {
            panic!("finite differences only over f32 inputs")
        }
    }
}
