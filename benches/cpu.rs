//! `cargo bench --bench cpu`: the CPU device's matmul — a 1024³ f32 product (GFLOP/s) and the
//! W4 MLP forward (256×784→512→512→10, relu between layers, softmax at the end; ms per run),
//! both on `cpu:0` with the inputs already resident (constants, not folded) and no read-back.
//! `WGFLOW_BENCH_QUICK=1` runs fewer iterations.
//!
//! Measured on the 2-core development machine (shared, so ±20%): the scalar reference kernel
//! ran the 1024³ product at 0.30 GFLOP/s and W4 in 1098 ms; through `matrixmultiply`'s
//! threaded sgemm, 69 GFLOP/s and 8.4 ms.

use std::time::Instant;
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn quick() -> bool {
    std::env::var("WGFLOW_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// Median seconds per call of `f` over a few batches, after one warm-up call; batches stop
/// early once `budget` seconds are spent, so a slow kernel still finishes.
fn time(mut f: impl FnMut(), budget: f64) -> f64 {
    f();
    let reps = if quick() { 3 } else { 7 };
    let start = Instant::now();
    let mut samples = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
        if start.elapsed().as_secs_f64() > budget {
            break;
        }
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

/// Deterministic values in [-1, 1).
fn det(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn konst(g: &mut Graph, shape: &[usize], seed: u32) -> Tensor {
    let n = shape.iter().product();
    g.constant(HostTensor::new(shape.to_vec(), det(n, seed)).unwrap())
        .unwrap()
}

fn session(g: &Graph) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            fuse: true,
            // The inputs are constants standing in for device-resident tensors.
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
}

fn main() {
    let n = 1024;
    let mut g = Graph::new();
    let a = konst(&mut g, &[n, n], 1);
    let b = konst(&mut g, &[n, n], 2);
    let c = g.matmul(a, b).unwrap();
    let mut s = session(&g);
    let per = time(|| s.run_targets(&[], &[c]).unwrap(), 20.0);
    let flops = 2.0 * (n * n * n) as f64;
    println!(
        "cpu:0 matmul {n}x{n}x{n} f32: {:.2} ms, {:.2} GFLOP/s",
        per * 1e3,
        flops / per / 1e9
    );

    let mut g = Graph::new();
    let x = g.placeholder("x", [256, 784], DType::F32).unwrap();
    let mut h = x;
    for (i, (k, n)) in [(784usize, 512usize), (512, 512), (512, 10)]
        .into_iter()
        .enumerate()
    {
        let w = konst(&mut g, &[k, n], 10 + i as u32);
        let bias = konst(&mut g, &[n], 20 + i as u32);
        let m = g.matmul(h, w).unwrap();
        let z = g.add(m, bias).unwrap();
        h = if i < 2 {
            g.relu(z).unwrap()
        } else {
            g.softmax(z, -1).unwrap()
        };
    }
    let feed = HostTensor::new([256, 784], det(256 * 784, 7)).unwrap();
    let mut s = session(&g);
    let per = time(|| drop(s.run(&[(x, feed.clone())], &[h]).unwrap()), 20.0);
    println!(
        "cpu:0 W4 MLP forward 256x784-512-512-10: {:.2} ms",
        per * 1e3
    );
}
