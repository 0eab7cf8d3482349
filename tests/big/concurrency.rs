//! Several threads at once: distinct pipelines compiled concurrently on every adapter (run
//! with empty shader caches by `.ci/run`; the shapes here are new in every run, so nothing is
//! cached anyway), sessions of their own per thread, and one session shared by threads.
//! llvmpipe GL once failed this way: wgpu's GL context lock panics after 6 s, and the panic
//! poisoned wgflow's pipeline cache for every later test.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use wgflow::{DType, Device, Graph, HostTensor};

fn seed() -> usize {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize)
}

/// `sum(a @ b, axis 1) * 2 + 1` for `[m, k] @ [k, n]`, with the float64 reference.
fn job(m: usize, k: usize, n: usize) -> (Graph, Vec<f32>, Vec<f32>, Vec<f64>) {
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
    let want: Vec<f64> = (0..m)
        .map(|i| {
            let s: f64 = (0..n)
                .map(|j| {
                    (0..k)
                        .map(|l| a[i * k + l] as f64 * b[l * n + j] as f64)
                        .sum::<f64>()
                })
                .sum();
            s * 2.0 + 1.0
        })
        .collect();
    let mut g = Graph::new();
    let ta = g.placeholder("a", vec![m, k], DType::F32).unwrap();
    let tb = g.placeholder("b", vec![k, n], DType::F32).unwrap();
    let p = g.matmul(ta, tb).unwrap();
    let s = g.sum(p, [1], false).unwrap();
    let two = g.constant(2.0f32).unwrap();
    let one = g.constant(1.0f32).unwrap();
    let s2 = g.mul(s, two).unwrap();
    let _out = g.add(s2, one).unwrap();
    (g, a, b, want)
}

fn run_job(d: Device, m: usize, k: usize, n: usize) {
    let (g, a, b, want) = job(m, k, n);
    let mut sess = common::session_on(&g, d);
    let (ta, tb) = (g.tensor("a").unwrap(), g.tensor("b").unwrap());
    let out = g.tensors().last().unwrap();
    let got = sess
        .run(
            &[
                (ta, HostTensor::new(vec![m, k], a).unwrap()),
                (tb, HostTensor::new(vec![k, n], b).unwrap()),
            ],
            &[out],
        )
        .unwrap_or_else(|e| panic!("{m}x{k}x{n} on {d}: {e}"));
    let got = got[0].to_vec::<f32>().unwrap();
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{m}x{k}x{n} on {d}: [{i}] {g} vs {w}"
        );
    }
}

#[test]
fn distinct_pipelines_compile_concurrently_on_every_adapter() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let base = 5 + seed() % 50;
    let mut threads = Vec::new();
    for d in common::gpus() {
        for t in 0..3 {
            threads.push(std::thread::spawn(move || {
                for i in 0..3 {
                    // New shapes every run and every thread: every kernel compiles cold.
                    let m = base + 3 * t + i;
                    run_job(d, m, 2 * m + 1, m + 4 * i + 3);
                }
            }));
        }
    }
    for t in threads {
        t.join().expect("a compiling thread panicked");
    }
}

#[test]
fn one_session_shared_by_threads() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    for d in common::gpus().into_iter().chain([Device::Cpu]) {
        let mut g = Graph::new();
        let x = g.placeholder("x", vec![1000], DType::F32).unwrap();
        let sq = g.mul(x, x).unwrap();
        let s = g.sum(sq, [0], false).unwrap();
        let sess = Arc::new(Mutex::new(common::session_on(&g, d)));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let sess = sess.clone();
                std::thread::spawn(move || {
                    for r in 0..5 {
                        let v = (t * 10 + r) as f32 * 0.5;
                        let feed = HostTensor::new(vec![1000], vec![v; 1000]).unwrap();
                        let out = sess.lock().unwrap().run(&[(x, feed)], &[s]).unwrap();
                        let want = 1000.0 * (v as f64) * (v as f64);
                        let got = out[0].item::<f32>().unwrap() as f64;
                        assert!((got - want).abs() <= 1e-6 * want, "{d}: {got} vs {want}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a session thread panicked");
        }
    }
}
