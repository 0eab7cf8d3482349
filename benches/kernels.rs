//! Criterion benches of steady-state runs on the best device (a GPU if present, else cpu:0):
//! `cargo bench --bench kernels`. For the side-by-side table against hand-written wgpu, see
//! `cargo bench --bench table`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use wgflow::{Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn konst(g: &mut Graph, shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| (((i as u32) ^ seed).wrapping_mul(2654435761) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    g.constant(HostTensor::new(shape.to_vec(), data).unwrap())
        .unwrap()
}

fn session(g: &Graph) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::best()),
            ..Default::default()
        },
    )
    .unwrap()
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("wgflow on {}", Device::best()));
    group.sample_size(10);

    let n = 1 << 22;
    let mut g = Graph::new();
    let a = konst(&mut g, &[n], 1);
    let b = konst(&mut g, &[n], 2);
    let y = g.add(a, b).unwrap();
    let mut s = session(&g);
    group.throughput(Throughput::Bytes(12 * n as u64));
    group.bench_function("add 4M", |bench| {
        bench.iter(|| s.run_targets(&[], &[y]).unwrap())
    });

    let mut g = Graph::new();
    let a = konst(&mut g, &[n], 3);
    let b = konst(&mut g, &[n], 4);
    let c0 = konst(&mut g, &[n], 5);
    let zero = g.constant(0.0f32).unwrap();
    let half = g.constant(0.5f32).unwrap();
    let ab = g.mul(a, b).unwrap();
    let abc = g.add(ab, c0).unwrap();
    let m = g.maximum(abc, zero).unwrap();
    let h = g.mul(m, half).unwrap();
    let na = g.neg(a).unwrap();
    let e = g.exp(na).unwrap();
    let y = g.add(h, e).unwrap();
    let mut s = session(&g);
    group.throughput(Throughput::Bytes(16 * n as u64));
    group.bench_function("fused chain 4M", |bench| {
        bench.iter(|| s.run_targets(&[], &[y]).unwrap())
    });

    let k = 512;
    let mut g = Graph::new();
    let a = konst(&mut g, &[k, k], 6);
    let b = konst(&mut g, &[k, k], 7);
    let y = g.matmul(a, b).unwrap();
    let mut s = session(&g);
    group.throughput(Throughput::Elements(2 * (k * k * k) as u64));
    group.bench_function("matmul 512^3 (elements = flops)", |bench| {
        bench.iter(|| s.run_targets(&[], &[y]).unwrap())
    });

    let r = 2048;
    let mut g = Graph::new();
    let a = konst(&mut g, &[r, r], 8);
    let y = g.sum(a, [1], false).unwrap();
    let mut s = session(&g);
    group.throughput(Throughput::Bytes(4 * (r * r) as u64));
    group.bench_function("row sums 2048^2", |bench| {
        bench.iter(|| s.run_targets(&[], &[y]).unwrap())
    });
    group.finish();
}

criterion_group!(kernels, benches);
criterion_main!(kernels);
