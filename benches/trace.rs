//! Cost of tracing, printed as a table: `cargo bench --bench trace`. For each device, the
//! median of untraced runs (`Session::run`, the steady-state path) against traced runs
//! (`Session::run_with` with `trace: true`), of a small MLP-like graph: matmul + bias + relu,
//! twice. `TRACE_RUNS=N` sets the runs per row (default 200).

use std::time::{Duration, Instant};
use wgflow::trace::RunOptions;
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn graph() -> (Graph, Tensor, Tensor) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [64, 256], DType::F32).unwrap();
    let mut h = x;
    for (i, (k, n)) in [(256usize, 256usize), (256, 64)].into_iter().enumerate() {
        let w: Vec<f32> = (0..k * n).map(|j| ((j + i) as f32 * 0.01).sin()).collect();
        let w = g.constant(HostTensor::new([k, n], w).unwrap()).unwrap();
        let b = g
            .constant(HostTensor::new([n], vec![0.1f32; n]).unwrap())
            .unwrap();
        h = g.matmul(h, w).unwrap();
        h = g.add(h, b).unwrap();
        h = g.relu(h).unwrap();
    }
    (g, x, h)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("TRACE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut devices = vec![Device::Cpu];
    devices.extend(
        wgflow::devices()
            .into_iter()
            .map(|d| d.device)
            .filter(|d| d.is_gpu()),
    );
    println!(
        "{:<7} {:>6} {:>16} {:>16} {:>8} {:>14}",
        "device", "runs", "trace off (ms)", "trace on (ms)", "on/off", "kernel timing"
    );
    for dev in devices {
        let (g, x, y) = graph();
        let options = SessionOptions {
            default_device: Some(dev),
            ..Default::default()
        };
        let mut s = Session::new(&g, options).unwrap();
        let feed = HostTensor::new([64, 256], vec![0.5f32; 64 * 256]).unwrap();
        let feeds = [(x, feed)];
        for _ in 0..5 {
            s.run(&feeds, &[y]).unwrap();
        }
        // Interleaved so drift in the machine's load hits both columns alike.
        let (mut off, mut on) = (Vec::new(), Vec::new());
        let mut timing = "-";
        for _ in 0..runs {
            let t = Instant::now();
            s.run(&feeds, &[y]).unwrap();
            off.push(t.elapsed());
            let t = Instant::now();
            let (_, meta) = s
                .run_with(&feeds, &[y], &RunOptions { trace: true })
                .unwrap();
            on.push(t.elapsed());
            timing = meta.dispatches().next().map_or("-", |e| e.clock.label());
        }
        let (off, on) = (median(off), median(on));
        println!(
            "{:<7} {:>6} {:>16.3} {:>16.3} {:>8.2} {:>14}",
            dev.to_string(),
            runs,
            off.as_secs_f64() * 1e3,
            on.as_secs_f64() * 1e3,
            on.as_secs_f64() / off.as_secs_f64(),
            timing
        );
    }
}
