//! `cargo bench --bench cpu_nn`: cpu:0's reductions and convolutions. W5 (row sums of a
//! 4096×4096 f32 matrix) against NumPy (run through `python3` when present, else the figure
//! measured on the development machine), column sums and one whole-tensor sum of 16M
//! elements; the `train_digits` CNN's forward pass (a batch of 64 and the 360 test images)
//! and one Adam training step, all on `cpu:0` with inputs resident (constants, not folded)
//! and no read-back. Each case is timed as the median of several runs after a warm-up;
//! `WGFLOW_BENCH_QUICK=1` runs fewer.
//!
//! Measured on the shared 2-core development machine, the scalar kernels (main at ff79a0f,
//! this same bench) and the fast ones run back to back, twice (medians, ms; ±30% noise):
//!
//! | case | scalar | fast |
//! |---|---|---|
//! | W5 row sums 4096² | 57–67 | 4.1–7.3 (NumPy in the same runs: 4.2–5.0) |
//! | column sums 4096² | 289–306 | 9.5–9.7 |
//! | sum of all 16M | 83 | 6.3–7.2 |
//! | max of rows 4096² | 79–82 | 8.3–9.5 |
//! | digits CNN forward, batch 64 | 26–34 | 4.3–7.0 |
//! | digits CNN forward, 360 images | 140–176 | 33–37 |
//! | digits CNN training step, batch 64 | 182–196 | 111–124 |

use std::process::Command;
use std::time::Instant;
use wgflow::train::{Adam, Optimizer};
use wgflow::{Device, Session, SessionOptions};

include!("../graph-examples/digits_model.rs");

/// NumPy's W5 on the 2-core development machine (NumPy 2.4, median), used without Python.
const NUMPY_W5_MS: f64 = 3.58;

fn quick() -> bool {
    std::env::var("WGFLOW_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// Median seconds per call of `f` after one warm-up call; stops early after `budget` s.
fn time(mut f: impl FnMut(), budget: f64) -> f64 {
    f();
    let reps = if quick() { 5 } else { 21 };
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

fn session(g: &Graph) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            fuse: true,
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
}

/// NumPy's median milliseconds for `a.sum(axis=1)` of a 4096² f32 matrix, if Python runs.
fn numpy_w5() -> Option<f64> {
    let script = "import numpy as np, time\n\
        a = np.random.default_rng(0).random((4096, 4096), dtype=np.float32)\n\
        a.sum(axis=1)\n\
        ts = []\n\
        for _ in range(21):\n    t = time.perf_counter(); a.sum(axis=1); ts.append(time.perf_counter() - t)\n\
        print(sorted(ts)[10] * 1e3)\n";
    let out = Command::new("python3").args(["-c", script]).output().ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

/// Median ms of a reduction of a 4096² constant on cpu:0.
fn reduction(what: &str, build: impl Fn(&mut Graph, Tensor) -> Tensor) -> f64 {
    let n = 4096;
    let mut g = Graph::new();
    let a = g
        .constant(HostTensor::new([n, n], det(n * n, 9)).unwrap())
        .unwrap();
    let s = build(&mut g, a);
    let mut sess = session(&g);
    let ms = time(|| sess.run_targets(&[], &[s]).unwrap(), 20.0) * 1e3;
    println!(
        "cpu:0 {what}: {ms:.2} ms ({:.1} GB/s)",
        64.0 * 1.048576 / ms
    );
    ms
}

fn main() {
    let w5 = reduction("W5 row sums 4096^2", |g, a| g.sum(a, [1], false).unwrap());
    let (np, source) = match numpy_w5() {
        Some(ms) => (ms, "python3, this run"),
        None => (NUMPY_W5_MS, "committed figure"),
    };
    println!(
        "NumPy W5: {np:.2} ms ({source}); cpu:0 at {:.2}x NumPy's speed",
        np / w5
    );
    reduction("column sums 4096^2", |g, a| g.sum(a, [0], false).unwrap());
    reduction("sum of all 16M", |g, a| g.sum(a, Axes::All, false).unwrap());
    reduction("max of rows 4096^2", |g, a| g.max(a, [1], false).unwrap());

    let data = load_digits(&data_dir()).unwrap();
    let mut d = build_digits(&data, Model::Cnn, 1).unwrap();
    let train = Adam::new(0.003)
        .minimize(&mut d.graph, d.loss, &d.params)
        .unwrap();
    let mut s = session(&d.graph);
    let idx = batches(1, 64, 42).remove(0);
    let fwd = time(
        || drop(s.run(&[(d.batch, idx.clone())], &[d.loss]).unwrap()),
        20.0,
    );
    println!(
        "cpu:0 digits CNN forward, batch 64 (loss): {:.2} ms",
        fwd * 1e3
    );
    let test = time(|| drop(s.run(&[], &[d.accuracy]).unwrap()), 20.0);
    println!(
        "cpu:0 digits CNN forward, 360 test images (accuracy): {:.2} ms",
        test * 1e3
    );
    let step = time(
        || s.run_targets(&[(d.batch, idx.clone())], &[train]).unwrap(),
        20.0,
    );
    println!(
        "cpu:0 digits CNN training step, batch 64: {:.2} ms",
        step * 1e3
    );
}
