//! Numba's `@vectorize(['float32(float32, float32)', 'int32(int32, int32)'], target='cuda')`
//! in wgflow: one elementwise function, two typed signatures, applied to float and integer
//! arrays. The signature is picked from the input dtypes when the node is built; the
//! function fuses with the `relu` after it into a single kernel.
//!
//! With no GPU present everything runs on `cpu:0` (the same expression, evaluated on the
//! host). Run with `RUST_LOG=wgflow=info` to see placement.

use wgflow::ops::custom::ElementwiseFn;
use wgflow::{Graph, Session, SessionOptions};

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    // @vectorize(['float32(float32, float32)', 'int32(int32, int32)'])
    // def add_scaled(a, b): return a + 2 * b
    let add_scaled = ElementwiseFn::new("add_scaled", |[a, b]| a + 2 * b)
        .signature("float32(float32, float32)")?
        .signature("int32(int32, int32)")?;

    let mut g = Graph::new();
    let n: i32 = 8;
    let xf = g.constant((0..n).map(|i| i as f32 * 0.5).collect::<Vec<_>>())?;
    let yf = g.constant((0..n).map(|i| 1.0 - i as f32).collect::<Vec<_>>())?;
    let xi = g.constant((0..n).collect::<Vec<_>>())?;
    let yi = g.constant((0..n).map(|i| 10 * i).collect::<Vec<_>>())?;

    let (zf, zi, fused) = g.device("gpu:0", |g| {
        let zf = g.apply(&add_scaled, &[xf, yf])?; // float32 signature
        let zi = g.apply(&add_scaled, &[xi, yi])?; // int32 signature
        let fused = g.relu(zf)?; // fuses with add_scaled: one kernel
        Ok((zf, zi, fused))
    })?;

    let options = SessionOptions {
        soft_placement: true, // no GPU: fall back to cpu:0
        // The inputs are constants; keep the kernels (instead of folding them on the host
        // when compiling) so that they run on the GPU.
        fold_constants: false,
        ..Default::default()
    };
    let mut session = Session::new(&g, options)?;
    let plan = session.plan(&[fused])?;
    println!(
        "relu(add_scaled(x, y)) runs as {} kernel(s) on {}",
        plan.dispatch_count(),
        plan.device_of(g.name(fused)?)
            .map(|d| d.to_string())
            .unwrap_or_default()
    );
    let out = session.run(&[], &[zf, zi, fused])?;
    println!("add_scaled(f32) = {}", out[0]);
    println!("add_scaled(i32) = {}", out[1]);
    println!("relu(add_scaled) = {}", out[2]);

    // A signature that does not match is an error listing the signatures, not a crash.
    let u = g.constant([1u32, 2, 3])?;
    if let Err(e) = g.apply(&add_scaled, &[u, u]) {
        println!("as expected: {e}");
    }
    Ok(())
}
