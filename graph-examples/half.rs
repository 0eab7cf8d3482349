//! f16 inference: the same two-layer MLP in f32 and in f16, on the best device. A GPU with the
//! `shader-f16` feature stores f16 tensors in 2 bytes, so the f16 plan needs half the arena;
//! without the feature (llvmpipe's GL adapter) soft placement moves the f16 work to `cpu:0`,
//! and with no GPU everything runs there. The results agree to f16 precision.
//!
//! Run with `RUST_LOG=wgflow=info` to see placement.

use wgflow::{f16, DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn mlp(g: &mut Graph, dtype: DType) -> wgflow::Result<(Tensor, Tensor)> {
    let value = |i: usize, scale: f32| ((i * 7919) % 1000) as f32 / 1000.0 * scale - scale / 2.0;
    let konst = |g: &mut Graph, shape: [usize; 2], seed: usize| {
        let n = shape[0] * shape[1];
        let vals: Vec<f32> = (0..n).map(|i| value(i + seed, 0.2)).collect();
        let t = HostTensor::new(shape, vals)?;
        let c = g.constant(t)?;
        g.cast(c, dtype)
    };
    let x = g.placeholder(&format!("x_{dtype}"), [64, 256], dtype)?;
    let w1 = konst(g, [256, 512], 1)?;
    let w2 = konst(g, [512, 10], 2)?;
    let h = g.matmul(x, w1)?;
    let h = g.gelu(h, false)?;
    let y = g.matmul(h, w2)?;
    let y = g.softmax(y, -1)?;
    Ok((x, y))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut g = Graph::new();
    let (x32, y32) = mlp(&mut g, DType::F32)?;
    let (x16, y16) = mlp(&mut g, DType::F16)?;

    let device = Device::best();
    let mut session = Session::new(
        &g,
        SessionOptions {
            soft_placement: true,
            ..Default::default()
        },
    )?;
    let input: Vec<f32> = (0..64 * 256)
        .map(|i| ((i * 31) % 97) as f32 / 97.0 - 0.5)
        .collect();
    let feed32 = HostTensor::new([64, 256], input.clone())?;
    let feed16 = HostTensor::new([64, 256], input.into_iter().map(f16::from_f32).collect())?;
    let out = session.run(&[(x32, feed32), (x16, feed16)], &[y32, y16])?;

    for (name, y) in [("f32", y32), ("f16", y16)] {
        let plan = session.plan(&[y])?;
        let placed = plan.device_of(g.name(y)?).map(|d| d.to_string());
        let arena: u64 = plan.memory.values().map(|m| m.peak_bytes).sum();
        println!(
            "{name}: {} kernels on {}, arena {arena} bytes",
            plan.dispatch_count(),
            placed.unwrap_or_default()
        );
    }
    let (a, b) = (out[0].to_f32()?, out[1].to_f32()?);
    let worst = a
        .iter()
        .zip(&b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0f32, f32::max);
    println!("best device {device}; largest |f32 - f16| probability difference: {worst:.2e}");
    if worst > 1e-2 {
        return Err(format!("f16 and f32 disagree by {worst}").into());
    }
    Ok(())
}
