//! A pre-norm transformer block forward pass: layer_norm, two-head attention with softmax,
//! a GELU (tanh form) MLP and residuals, on the best device and on `cpu:0`.
//! Checked against NumPy in tests/ops/models.rs.

include!("models.rs");

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut g = Graph::new();
    let x = g.placeholder("x", TRANSFORMER_INPUT.to_vec(), wgflow::DType::F32)?;
    let y = build_transformer(&mut g, x)?;
    let input = det_weights(&TRANSFORMER_INPUT, 5, 1.0);
    run_on_best_and_cpu(&g, x, y, input)
}
