//! A two-layer MLP forward pass split across devices, the `with tf.device(...)` way:
//! layer 1 (`relu(x @ w1 + b1)`) is pinned to `cpu:0`, layer 2 (`softmax(h @ w2 + b2)`) to
//! `gpu:0`. Crossing from one to the other costs one Transfer step in the plan.
//!
//! Soft placement is on, so on a machine without a GPU layer 2 falls back to `cpu:0` (with a
//! warning) and the plan has no transfer. The result is checked against a second session of
//! the same graph that runs everything on `cpu:0`. Run with `RUST_LOG=wgflow=info` to see the
//! placement log.

use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

const BATCH: usize = 4;
const IN: usize = 8;
const HIDDEN: usize = 16;
const CLASSES: usize = 3;

/// A tiny linear congruential generator (Numerical Recipes constants): deterministic weights
/// without a `rand` dependency.
struct Lcg(u32);

impl Lcg {
    /// The next value, uniform in `[-scale, scale)`.
    fn next(&mut self, scale: f32) -> f32 {
        self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let unit = (self.0 >> 8) as f32 / (1u32 << 24) as f32; // [0, 1)
        (unit * 2.0 - 1.0) * scale
    }

    fn tensor(&mut self, shape: &[usize], scale: f32) -> wgflow::Result<HostTensor> {
        let n = shape.iter().product();
        HostTensor::new(
            shape,
            (0..n).map(|_| self.next(scale)).collect::<Vec<f32>>(),
        )
    }
}

/// `x @ w + b` with constant parameters of `fan_in x fan_out`, scaled like Xavier init.
fn dense(
    g: &mut Graph,
    rng: &mut Lcg,
    x: Tensor,
    fan_in: usize,
    fan_out: usize,
) -> wgflow::Result<Tensor> {
    let scale = (6.0 / (fan_in + fan_out) as f32).sqrt();
    let w = g.constant(rng.tensor(&[fan_in, fan_out], scale)?)?;
    let b = g.constant(rng.tensor(&[fan_out], 0.1)?)?;
    let xw = g.matmul(x, w)?;
    g.add(xw, b)
}

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    println!("devices:");
    for d in wgflow::devices() {
        println!("  {d}");
    }

    let mut rng = Lcg(42);
    let mut g = Graph::new();
    let x = g.placeholder("x", [BATCH, IN], DType::F32)?;
    let h = g.name_scope("layer1", |g| {
        g.device("cpu:0", |g| {
            let z = dense(g, &mut rng, x, IN, HIDDEN)?;
            g.relu(z)
        })
    })?;
    let y = g.name_scope("layer2", |g| {
        g.device("gpu:0", |g| {
            let logits = dense(g, &mut rng, h, HIDDEN, CLASSES)?;
            g.softmax(logits, -1)
        })
    })?;

    // A fixed batch of inputs in [-1, 1].
    let input: Vec<f32> = (0..BATCH * IN).map(|i| (i as f32 * 0.7).sin()).collect();
    let feed = HostTensor::new([BATCH, IN], input)?;

    let options = SessionOptions {
        soft_placement: true,
        log_device_placement: true,
        ..Default::default()
    };
    let mut session = Session::new(&g, options)?;
    let plan = session.plan(&[y])?;
    println!("default device: {}", session.default_device());
    println!("placement:");
    for (name, device) in &plan.placement {
        println!("  {name:<28} {device}");
    }
    println!("transfers per run: {}", plan.transfer_count());

    let out = session.run(&[(x, feed.clone())], &[y])?;
    let probs = out[0].to_vec::<f32>()?;
    println!("probabilities ({}):", out[0].shape());
    for row in probs.chunks(CLASSES) {
        let cells: Vec<String> = row.iter().map(|p| format!("{p:.6}")).collect();
        println!(
            "  [{}]  sum {:.6}",
            cells.join(", "),
            row.iter().sum::<f32>()
        );
    }

    // The same graph with every node on cpu:0: GPUs hidden, so the gpu:0 scope soft-places
    // onto the default device (and warns). `default_device` alone only moves unscoped nodes.
    println!("reference: the same graph with GPUs hidden, everything on cpu:0");
    let reference_options = SessionOptions {
        soft_placement: true,
        visible_devices: Some(Vec::new()),
        default_device: Some(Device::Cpu),
        ..Default::default()
    };
    let mut reference = Session::new(&g, reference_options)?;
    let reference_plan = reference.plan(&[y])?;
    assert!(
        reference_plan
            .placement
            .iter()
            .all(|(_, d)| *d == Device::Cpu),
        "the reference session should run everything on cpu:0"
    );
    let expected = reference.run(&[(x, feed)], &[y])?[0].to_vec::<f32>()?;
    let max_diff = probs
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("max |split - cpu:0 only| = {max_diff:e}");
    assert!(
        max_diff < 1e-5,
        "split result differs from cpu:0 by {max_diff}"
    );
    Ok(())
}
