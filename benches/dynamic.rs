//! Run-time dimensions: what a new batch size costs, and that a bound plan runs as fast as
//! the static graph's. `cargo bench --bench dynamic` (cpu:0, and the first GPU if any).
//!
//! For the W4 MLP (784-512-512-10, bias + ReLU) and the W6 train step (W4 with softmax
//! cross-entropy and Adam), built once with a run-time batch:
//! * **bind + compile**: `Session::compile_only_with_dims` for a new batch size (the graph
//!   rebuilt with the size, then the static pipeline: fusion, kernels, memory plan);
//! * **new size, first run**: a run with a batch size the session has not seen (binding,
//!   compiling, preparing buffers and pipelines, running), against the static graph's first
//!   run in a fresh session;
//! * **steady state**: the median of interleaved runs of the bound plan and of the static
//!   graph of the same batch size, in the same process.

use std::time::Instant;
use wgflow::train::{Adam, Optimizer};
use wgflow::{
    Axes, DType, Device, Dim, Graph, HostTensor, Initializer, Session, SessionOptions, Tensor,
};

struct Model {
    g: Graph,
    x: Tensor,
    y: Tensor,
    out: Tensor,
}

/// W4 (`train: false`, fetches the logits) or W6 (`train: true`, fetches the train op).
fn model(batch: Option<usize>, train: bool) -> Model {
    let mut g = Graph::new();
    let n = batch.map_or(Dim::named("batch"), Dim::Known);
    let x = g
        .placeholder_dyn("x", [n.clone(), 784.into()], DType::F32)
        .unwrap();
    let y = g.placeholder_dyn("y", [n, 10.into()], DType::F32).unwrap();
    let mut h = x;
    let mut params = Vec::new();
    for (i, (k, m)) in [(784usize, 512usize), (512, 512), (512, 10)]
        .into_iter()
        .enumerate()
    {
        let init = Initializer::GlorotUniform { seed: i as u64 };
        let w = g
            .variable_with(&format!("w{i}"), [k, m], DType::F32, init)
            .unwrap();
        let b = g
            .variable_with(&format!("b{i}"), [m], DType::F32, Initializer::Zeros)
            .unwrap();
        params.extend([w, b]);
        let a = g.linear(h, w, Some(b)).unwrap();
        h = if i < 2 { g.relu(a).unwrap() } else { a };
    }
    let out = if train {
        let logp = g.log_softmax(h, -1).unwrap();
        let picked = g.mul(logp, y).unwrap();
        let per = g.sum(picked, [1], false).unwrap();
        let mean = g.mean(per, Axes::All, false).unwrap();
        let loss = g.neg(mean).unwrap();
        Adam::new(1e-3).minimize(&mut g, loss, &params).unwrap()
    } else {
        h
    };
    Model { g, x, y, out }
}

fn feeds(m: &Model, n: usize) -> Vec<(Tensor, HostTensor)> {
    let xs: Vec<f32> = (0..n * 784)
        .map(|i| ((i * 37) % 101) as f32 / 101.0)
        .collect();
    let ys: Vec<f32> = (0..n * 10)
        .map(|i| f32::from(u8::from(i % 10 == (i / 10) % 10)))
        .collect();
    vec![
        (m.x, HostTensor::new([n, 784], xs).unwrap()),
        (m.y, HostTensor::new([n, 10], ys).unwrap()),
    ]
}

fn session(g: &Graph, device: Device) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(device),
            ..Default::default()
        },
    )
    .unwrap()
}

fn run(s: &mut Session, m: &Model, f: &[(Tensor, HostTensor)], train: bool) {
    if train {
        s.run_targets(f, &[m.out]).unwrap();
    } else {
        s.run(f, &[m.out]).unwrap();
    }
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut devices = vec![Device::Cpu];
    devices.extend(
        wgflow::devices()
            .into_iter()
            .map(|d| d.device)
            .filter(|d| d.is_gpu())
            .take(1),
    );
    println!(
        "{:<8} {:<4} {:>6} {:>14} {:>16} {:>16} {:>14} {:>14}",
        "device",
        "",
        "batch",
        "bind+compile",
        "new size, 1st",
        "static, 1st",
        "bound steady",
        "static steady"
    );
    for device in devices {
        for (name, train) in [("W4", false), ("W6", true)] {
            let dynamic = model(None, train);
            let mut s = session(&dynamic.g, device);
            // Warm the process (adapter, pipeline cache) with another size first.
            run(&mut s, &dynamic, &feeds(&dynamic, 8), train);
            for batch in [256usize, 29] {
                let t = Instant::now();
                s.compile_only_with_dims(&[dynamic.out], &[("batch", batch)])
                    .unwrap();
                let compile = ms(t);
                let f = feeds(&dynamic, batch);
                let t = Instant::now();
                run(&mut s, &dynamic, &f, train);
                let first = ms(t);
                let fixed = model(Some(batch), train);
                let ff = feeds(&fixed, batch);
                let mut r = session(&fixed.g, device);
                let t = Instant::now();
                run(&mut r, &fixed, &ff, train);
                let static_first = ms(t);
                let iters = if device == Device::Cpu { 30 } else { 10 };
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for _ in 0..iters {
                    let t = Instant::now();
                    run(&mut s, &dynamic, &f, train);
                    a.push(ms(t));
                    let t = Instant::now();
                    run(&mut r, &fixed, &ff, train);
                    b.push(ms(t));
                }
                println!(
                    "{:<8} {:<4} {:>6} {:>11.2} ms {:>13.2} ms {:>13.2} ms {:>11.3} ms {:>11.3} ms",
                    device.to_string(),
                    name,
                    batch,
                    compile,
                    first,
                    static_first,
                    median(a),
                    median(b)
                );
            }
        }
    }
}
