// The two model graphs of the `cnn` and `transformer` examples, shared with tests/ops/models.rs
// through `include!` (so this file has no inner doc comments and no `main`).
//
// Weights are deterministic, not random: element `i` of parameter number `k` is
// `sin(0.1 * i + k) * scale`, computed in f64 and rounded to f32, which
// tests/golden/gen_nn.py reproduces exactly in NumPy.

use wgflow::{Conv2dOptions, Graph, HostTensor, Tensor};

/// The deterministic parameter number `k` of `shape`.
pub fn det_weights(shape: &[usize], k: usize, scale: f64) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((0.1 * i as f64 + k as f64).sin() * scale) as f32)
        .collect();
    HostTensor::new(shape.to_vec(), v).expect("shape matches")
}

fn param(g: &mut Graph, shape: &[usize], k: usize, scale: f64) -> wgflow::Result<Tensor> {
    g.constant(det_weights(shape, k, scale))
}

/// CNN input shape `[N, C, H, W]`.
pub const CNN_INPUT: [usize; 4] = [2, 1, 8, 8];

/// conv2d(1→4, 3×3, pad 1) → relu → max_pool2d(2×2) → reshape → linear(64→10) → softmax.
pub fn build_cnn(g: &mut Graph, x: Tensor) -> wgflow::Result<Tensor> {
    let w = param(g, &[4, 1, 3, 3], 1, 0.5)?;
    let b = param(g, &[4], 2, 0.1)?;
    let opts = Conv2dOptions {
        padding: [1, 1],
        ..Default::default()
    };
    let c = g.conv2d(x, w, Some(b), opts)?;
    let r = g.relu(c)?;
    let p = g.max_pool2d(r, [2, 2], [2, 2], [0, 0])?;
    let flat = g.reshape(p, &[CNN_INPUT[0] as isize, -1])?;
    let w2 = param(g, &[64, 10], 3, 0.3)?;
    let b2 = param(g, &[10], 4, 0.1)?;
    let logits = g.linear(flat, w2, Some(b2))?;
    g.softmax(logits, -1)
}

/// Transformer input shape `[batch, seq, d_model]`.
pub const TRANSFORMER_INPUT: [usize; 3] = [2, 5, 8];
const HEADS: usize = 2;
const D_FF: usize = 16;

/// GELU, tanh approximation, as a composite of primitives:
/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_tanh(g: &mut Graph, x: Tensor) -> wgflow::Result<Tensor> {
    let c = g.constant(HostTensor::scalar((2.0f64 / std::f64::consts::PI).sqrt() as f32))?;
    let k = g.constant(HostTensor::scalar(0.044715f32))?;
    let half = g.constant(HostTensor::scalar(0.5f32))?;
    let one = g.constant(HostTensor::scalar(1.0f32))?;
    let x2 = g.mul(x, x)?;
    let x3 = g.mul(x2, x)?;
    let kx3 = g.mul(k, x3)?;
    let inner = g.add(x, kx3)?;
    let scaled = g.mul(c, inner)?;
    let t = g.tanh(scaled)?;
    let t1 = g.add(one, t)?;
    let hx = g.mul(half, x)?;
    g.mul(hx, t1)
}

/// Pre-norm block: `x + attn(ln1(x))`, then `+ mlp(ln2(.))` with a GELU MLP; multi-head
/// attention with `HEADS` heads and softmax over keys.
pub fn build_transformer(g: &mut Graph, x: Tensor) -> wgflow::Result<Tensor> {
    let [b, s, d] = TRANSFORMER_INPUT.map(|v| v as isize);
    let (h, dh) = (HEADS as isize, d / HEADS as isize);
    let du = d as usize;
    let g1 = param(g, &[du], 10, 0.2)?;
    let one = g.constant(HostTensor::scalar(1.0f32))?;
    let g1 = g.add(g1, one)?;
    let b1 = param(g, &[du], 11, 0.1)?;
    let ln1 = g.layer_norm(x, Some(g1), Some(b1), -1, 1e-5)?;
    let mut heads = Vec::new();
    for (k, name) in ["q", "k", "v"].iter().enumerate() {
        let w = param(g, &[du, du], 12 + 2 * k, 0.4)?;
        let bias = param(g, &[du], 13 + 2 * k, 0.1)?;
        let y = g.name_scope(name, |g| g.linear(ln1, w, Some(bias)))?;
        let y = g.reshape(y, &[b, s, h, dh])?;
        heads.push(g.transpose(y, &[0, 2, 1, 3])?);
    }
    let kt = g.transpose(heads[1], &[0, 1, 3, 2])?;
    let scores = g.matmul(heads[0], kt)?;
    let scale = g.constant(HostTensor::scalar(1.0 / (dh as f32).sqrt()))?;
    let scores = g.mul(scores, scale)?;
    let attn = g.softmax(scores, -1)?;
    let ctx = g.matmul(attn, heads[2])?;
    let ctx = g.transpose(ctx, &[0, 2, 1, 3])?;
    let ctx = g.reshape(ctx, &[b, s, d])?;
    let wo = param(g, &[du, du], 18, 0.4)?;
    let bo = param(g, &[du], 19, 0.1)?;
    let attn_out = g.linear(ctx, wo, Some(bo))?;
    let x1 = g.add(x, attn_out)?;
    let g2 = param(g, &[du], 20, 0.2)?;
    let g2 = g.add(g2, one)?;
    let b2 = param(g, &[du], 21, 0.1)?;
    let ln2 = g.layer_norm(x1, Some(g2), Some(b2), -1, 1e-5)?;
    let w1 = param(g, &[du, D_FF], 22, 0.4)?;
    let bb1 = param(g, &[D_FF], 23, 0.1)?;
    let w2 = param(g, &[D_FF, du], 24, 0.4)?;
    let bb2 = param(g, &[du], 25, 0.1)?;
    let hid = g.linear(ln2, w1, Some(bb1))?;
    let act = gelu_tanh(g, hid)?;
    let mlp = g.linear(act, w2, Some(bb2))?;
    g.add(x1, mlp)
}

/// Run `y` (fed `input` at `x`) on the best device and on `cpu:0`; print the output and the
/// largest difference between the two.
pub fn run_on_best_and_cpu(g: &Graph, x: Tensor, y: Tensor, input: HostTensor) -> wgflow::Result<()> {
    let mut best = wgflow::Session::new(g, wgflow::SessionOptions::default())?;
    let out = best.run(&[(x, input.clone())], &[y])?;
    let ran_on = best
        .plan(&[y])?
        .device_of(g.name(y)?)
        .map(|d| d.to_string())
        .unwrap_or_default();
    println!(
        "{} nodes; output {} on {ran_on}:\n{}",
        g.len(),
        out[0].shape(),
        out[0]
    );
    let cpu_options = wgflow::SessionOptions {
        default_device: Some(wgflow::Device::Cpu),
        ..Default::default()
    };
    let mut cpu = wgflow::Session::new(g, cpu_options)?;
    let reference = cpu.run(&[(x, input)], &[y])?;
    let diff = out[0]
        .to_f32()?
        .iter()
        .zip(reference[0].to_f32()?)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("max |{ran_on} - cpu:0| = {diff:e}");
    Ok(())
}
