//! One graph, any batch size: the W4 MLP (784-512-512-10, bias + ReLU) built once with a
//! batch dimension known only at run time (`tf.placeholder(tf.float32, [None, 784])`), run
//! with batches of 1, 64, 29 and 64 on the best device, then on cpu:0 in a new session.
//!
//! ```text
//! cargo run --release --example dynamic_batch
//! ```
//!
//! Each run prints the output's shape and how many plans the session has compiled: a new
//! batch size compiles a plan (bind the size, rebuild the graph with it, then the static
//! pipeline: fusion, kernels, memory plan); a size seen before reuses its plan.

use wgflow::{DType, Device, Dim, Graph, HostTensor, Initializer, Session, SessionOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut g = Graph::new();
    let x = g.placeholder_dyn("x", [Dim::named("batch"), 784.into()], DType::F32)?;
    let mut h = x;
    for (k, (fan_in, fan_out)) in [(784, 512), (512, 512), (512, 10)].into_iter().enumerate() {
        let init = Initializer::HeNormal { seed: k as u64 };
        let w = g.variable_with(&format!("w{k}"), [fan_in, fan_out], DType::F32, init)?;
        let b = g.variable_with(&format!("b{k}"), [fan_out], DType::F32, Initializer::Zeros)?;
        h = g.linear(h, w, Some(b))?;
        if k < 2 {
            h = g.relu(h)?;
        }
    }
    println!("x: {}, logits: {}", dims(&g.dims(x)?), dims(&g.dims(h)?));
    for device in [Device::best(), Device::Cpu] {
        println!("on {device}:");
        let options = SessionOptions {
            default_device: Some(device),
            ..Default::default()
        };
        let mut s = Session::new(&g, options)?;
        for batch in [1usize, 64, 29, 64] {
            let images = HostTensor::new([batch, 784], vec![0.5f32; batch * 784])?;
            let out = s.run(&[(x, images)], &[h])?;
            println!(
                "batch {batch}: output {}, plans compiled {}",
                out[0].shape(),
                s.counters().plans_compiled
            );
        }
    }
    Ok(())
}

fn dims(d: &[Dim]) -> String {
    wgflow::graph::dims_text(d)
}
