//! A small CNN forward pass: conv2d → relu → max_pool2d → reshape → linear → softmax,
//! with deterministic weights (see models.rs), on the best device and on `cpu:0`.
//! Checked against NumPy in tests/ops/models.rs.

include!("models.rs");

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut g = Graph::new();
    let x = g.placeholder("x", CNN_INPUT.to_vec(), wgflow::DType::F32)?;
    let y = build_cnn(&mut g, x)?;
    let input = det_weights(&CNN_INPUT, 0, 1.0);
    run_on_best_and_cpu(&g, x, y, input)
}
