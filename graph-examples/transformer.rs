//! A pre-norm transformer block forward pass: layer_norm, two-head attention with softmax,
//! a GELU (tanh form) MLP and residuals, on the best device and on `cpu:0`.
//! Checked against NumPy in tests/models.rs.

include!("models.rs");

use wgflow::{Device, Session, SessionOptions};

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut g = Graph::new();
    let x = g.placeholder("x", TRANSFORMER_INPUT.to_vec(), wgflow::DType::F32)?;
    let y = build_transformer(&mut g, x)?;
    let input = det_weights(&TRANSFORMER_INPUT, 5, 1.0);
    let mut best = Session::new(&g, SessionOptions::default())?;
    let out = best.run(&[(x, input.clone())], &[y])?;
    let ran_on = best
        .plan(&[y])?
        .device_of(g.name(y))
        .map(|d| d.to_string())
        .unwrap_or_default();
    println!(
        "{} nodes; output {} on {ran_on}:\n{}",
        g.len(),
        out[0].shape(),
        out[0]
    );
    let cpu_options = SessionOptions {
        default_device: Some(Device::Cpu),
        ..Default::default()
    };
    let mut cpu = Session::new(&g, cpu_options)?;
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
