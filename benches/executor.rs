//! `cargo bench --bench executor`: cpu:0's executor cost per kernel, the time a run spends
//! around its kernels rather than in them.
//!
//! A chain of `N` tiny matmuls (`[4,4] @ [4,4]`, which no pass fuses) is run with `N` = 1
//! and `N` = 200; the difference over 199 is the cost of one more kernel: the executor's
//! bookkeeping plus a 4x4 matmul (tens of nanoseconds). A traced run of the 200-chain gives
//! the second view: the run's untraced time minus the sum of its kernels' traced times, per
//! kernel. Both are medians of interleaved batches (a shared machine drifts).

use std::time::Instant;
use wgflow::trace::RunOptions;
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn chain(n: usize) -> (Graph, Tensor, Tensor) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [4, 4], DType::F32).unwrap();
    let w: Vec<f32> = (0..16)
        .map(|j| if j % 5 == 0 { 1.0 } else { 0.01 })
        .collect();
    let w = g.constant(HostTensor::new([4, 4], w).unwrap()).unwrap();
    let mut h = x;
    for _ in 0..n {
        h = g.matmul(h, w).unwrap();
    }
    (g, x, h)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::var("WGFLOW_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (reps, iters) = if quick { (5, 50) } else { (15, 200) };
    let feed = HostTensor::new([4, 4], vec![0.5f32; 16]).unwrap();
    let mut sessions: Vec<(usize, Session, Tensor, Tensor)> = [1usize, 200]
        .into_iter()
        .map(|n| {
            let (g, x, y) = chain(n);
            let options = SessionOptions {
                default_device: Some(Device::Cpu),
                ..Default::default()
            };
            let mut s = Session::new(&g, options).unwrap();
            let kernels = s.plan(&[y]).unwrap().dispatch_count();
            assert_eq!(kernels, n, "the chain must not fuse");
            (n, s, x, y)
        })
        .collect();
    let mut samples = vec![Vec::new(); sessions.len()];
    let mut traced_sum = Vec::new();
    for _ in 0..reps {
        for (k, (_, s, x, y)) in sessions.iter_mut().enumerate() {
            let feeds = [(*x, feed.clone())];
            s.run_targets(&feeds, &[*y]).unwrap();
            let t = Instant::now();
            for _ in 0..iters {
                s.run_targets(&feeds, &[*y]).unwrap();
            }
            samples[k].push(t.elapsed().as_secs_f64() / iters as f64);
        }
        let (_, s, x, y) = &mut sessions[1];
        let (_, meta) = s
            .run_with(&[(*x, feed.clone())], &[*y], &RunOptions { trace: true })
            .unwrap();
        traced_sum.push(meta.dispatches().map(|e| e.duration.as_secs_f64()).sum());
    }
    let t1 = median(samples[0].clone());
    let t200 = median(samples[1].clone());
    let kernels = median(traced_sum);
    println!(
        "cpu:0 executor, a chain of N 4x4 matmuls (medians of {reps} batches of {iters} runs):"
    );
    println!("  N=1:   {:8.2} us per run", t1 * 1e6);
    println!("  N=200: {:8.2} us per run", t200 * 1e6);
    println!(
        "  per extra kernel: {:.3} us ((N=200 - N=1) / 199, a 4x4 matmul included)",
        (t200 - t1) / 199.0 * 1e6
    );
    println!(
        "  N=200 run minus its kernels' traced time: {:.3} us per kernel (kernels alone {:.3} us each)",
        (t200 - kernels) / 200.0 * 1e6,
        kernels / 200.0 * 1e6
    );
}
