//! Graphs with state for tests/graph/graphdef.rs (graph-file version 2): every initializer, and a
//! small training graph (linear regression by gradient descent).

use wgflow::{f16, DType, Graph, HostTensor, Initializer, Tensor};

/// A variable of every initializer (values inline and as base64, every dtype), an
/// assignment and a group. Returns the graph and its variables.
pub fn every_initializer() -> (Graph, Vec<Tensor>) {
    let mut g = Graph::new();
    let vars = g
        .name_scope("v", |g| {
            let big: Vec<f32> = (0..1500).map(|i| (i as f32 * 0.11).cos()).collect();
            Ok(vec![
                g.variable(
                    "value",
                    [[f32::NAN, -0.0, f32::INFINITY], [0.1, -3.5, 1e-45]],
                )?,
                g.variable("big", big)?,
                g.variable("flags", [true, false, true])?,
                g.variable("half", [f16::from_f32(0.5), f16::from_f32(-65504.0)])?,
                g.variable("ints", [i32::MIN, -1, 7])?,
                g.variable_with("count", [], DType::U32, Initializer::Zeros)?,
                g.variable_with("ones", [2, 2], DType::I32, Initializer::Ones)?,
                g.variable_with(
                    "uniform",
                    [3, 4],
                    DType::F32,
                    Initializer::Uniform {
                        low: -2.0,
                        high: 3.0,
                        seed: 5,
                    },
                )?,
                g.variable_with(
                    "normal",
                    [6],
                    DType::F16,
                    Initializer::Normal {
                        mean: 1.0,
                        std: 0.5,
                        seed: u64::MAX,
                    },
                )?,
                g.variable_with(
                    "glorot",
                    [4, 3],
                    DType::F32,
                    Initializer::GlorotUniform { seed: 11 },
                )?,
                g.variable_with(
                    "he",
                    [2, 3, 3, 3],
                    DType::F32,
                    Initializer::HeNormal { seed: 0 },
                )?,
            ])
        })
        .unwrap();
    let one = g.constant(1u32).unwrap();
    let count = g.assign_add(vars[5], one).unwrap();
    let value = g.constant([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
    let set = g.assign(vars[0], value).unwrap();
    g.group(&[count, set]).unwrap();
    (g, vars)
}

/// The training graph's tensors.
pub struct Train {
    pub graph: Graph,
    pub x: Tensor,
    pub y: Tensor,
    pub w: Tensor,
    pub b: Tensor,
    pub step: Tensor,
    pub loss: Tensor,
    /// Runs one step of gradient descent on `loss` and counts it.
    pub train: Tensor,
}

/// The learning rate of [`train`].
pub const LR: f32 = 0.05;

/// `loss = sum((sum(x * w, 1) + b - y)²)` over a batch of 4, `w` (2) Glorot-initialized, `b`
/// a scalar; `train` is `group(w -= LR·∂loss/∂w, b -= LR·∂loss/∂b, step += 1)`.
pub fn train() -> Train {
    let mut g = Graph::new();
    let x = g.placeholder("x", [4, 2], DType::F32).unwrap();
    let y = g.placeholder("y", [4], DType::F32).unwrap();
    let w = g
        .variable_with("w", [2], DType::F32, Initializer::GlorotUniform { seed: 3 })
        .unwrap();
    let b = g.variable("b", 0.5f32).unwrap();
    let step = g.variable("step", 0i32).unwrap();
    let xw = g.mul(x, w).unwrap();
    let dot = g.sum(xw, [1], false).unwrap();
    let pred = g.add(dot, b).unwrap();
    let e = g.sub(pred, y).unwrap();
    let sq = g.mul(e, e).unwrap();
    let loss = g.sum(sq, wgflow::Axes::All, false).unwrap();
    let grads = g.gradients(loss, &[w, b]).unwrap();
    let lr = g.constant(LR).unwrap();
    let dw = g.mul(grads[0].unwrap(), lr).unwrap();
    let db = g.mul(grads[1].unwrap(), lr).unwrap();
    let uw = g.assign_sub(w, dw).unwrap();
    let ub = g.assign_sub(b, db).unwrap();
    let one = g.constant(1i32).unwrap();
    let us = g.assign_add(step, one).unwrap();
    let train = g.group(&[uw, ub, us]).unwrap();
    Train {
        graph: g,
        x,
        y,
        w,
        b,
        step,
        loss,
        train,
    }
}

/// The training feeds: `y = 2·x0 − x1 + 0.25` plus a little noise.
pub fn batch() -> (HostTensor, HostTensor) {
    let x = [[1.0f32, 0.5], [-0.5, 2.0], [0.25, -1.0], [1.5, 1.5]];
    let noise = [0.01f32, -0.02, 0.0, 0.03];
    let y: Vec<f32> = x
        .iter()
        .zip(noise)
        .map(|(r, n)| 2.0 * r[0] - r[1] + 0.25 + n)
        .collect();
    (HostTensor::from(x), HostTensor::from(y))
}

/// `(w, b)` after `steps` steps of the same descent in f64, from `(w0, b0)`.
pub fn descend_f64(w0: [f64; 2], b0: f64, steps: usize) -> ([f64; 2], f64) {
    let (x, y) = batch();
    let x: Vec<f64> = x
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect();
    let y: Vec<f64> = y
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect();
    let (mut w, mut b) = (w0, b0);
    let lr = f64::from(LR);
    for _ in 0..steps {
        let (mut gw, mut gb) = ([0.0; 2], 0.0);
        for i in 0..4 {
            let e = x[2 * i] * w[0] + x[2 * i + 1] * w[1] + b - y[i];
            gw[0] += 2.0 * e * x[2 * i];
            gw[1] += 2.0 * e * x[2 * i + 1];
            gb += 2.0 * e;
        }
        w = [w[0] - lr * gw[0], w[1] - lr * gw[1]];
        b -= lr * gb;
    }
    (w, b)
}
