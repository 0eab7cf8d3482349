//! Plan (compile) time of large graphs, printed as a table: `cargo bench --bench plan`.
//! No device is needed: the target is a described GPU (lavapipe's limits) and cpu:0.
//! `PLAN_SIZES=1000,5000` picks the node counts (default 1k, 10k, 20k).

use std::time::Instant;
use wgflow::compile::{self, Target};
use wgflow::device::DeviceLimits;
use wgflow::{DType, Device, Graph, Tensor};

fn target(fuse: bool) -> Target {
    Target {
        devices: vec![
            (
                Device::Gpu(0),
                DeviceLimits {
                    max_buffer_size: 1 << 31,
                    max_storage_buffer_binding_size: 1 << 27,
                    max_storage_buffers_per_shader_stage: 8,
                    max_compute_workgroups_per_dimension: 65535,
                    min_storage_buffer_offset_alignment: 256,
                    shader_f16: false,
                },
            ),
            (Device::Cpu, DeviceLimits::cpu()),
        ],
        default_device: Device::Gpu(0),
        gpu_only_default: None,
        soft_placement: false,
        fuse,
        fold_constants: true,
    }
}

type Build = fn(&mut Graph, usize) -> Tensor;

/// `neg` repeated: one fused kernel.
fn chain(g: &mut Graph, n: usize) -> Tensor {
    let mut y = g.placeholder("x", [1024], DType::F32).unwrap();
    for _ in 0..n {
        y = g.neg(y).unwrap();
    }
    y
}

/// One input scaled n/2 ways, summed back by a chain of adds.
fn fan(g: &mut Graph, n: usize) -> Tensor {
    let x = g.placeholder("x", [1024], DType::F32).unwrap();
    let c = g.full([1], DType::F32, 0.5).unwrap();
    let mut acc = g.mul(x, c).unwrap();
    for _ in 1..n / 2 {
        let t = g.mul(x, c).unwrap();
        acc = g.add(acc, t).unwrap();
    }
    acc
}

/// n/2 independent placeholders reduced, summed by a balanced tree (wide, many kernels).
fn wide(g: &mut Graph, n: usize) -> Tensor {
    let mut level: Vec<Tensor> = (0..n / 2)
        .map(|i| {
            let x = g.placeholder(&format!("x{i}"), [64], DType::F32).unwrap();
            g.sum(x, 0, false).unwrap()
        })
        .collect();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|p| match p {
                [a, b] => g.add(*a, *b).unwrap(),
                [a] => *a,
                _ => unreachable!(),
            })
            .collect();
    }
    level[0]
}

/// `matmul` repeated.
fn matmuls(g: &mut Graph, n: usize) -> Tensor {
    let mut y = g.placeholder("x", [16, 16], DType::F32).unwrap();
    let w = g.placeholder("w", [16, 16], DType::F32).unwrap();
    for _ in 0..n {
        y = g.matmul(y, w).unwrap();
    }
    y
}

fn main() {
    let sizes: Vec<usize> = std::env::var("PLAN_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 20_000]);
    let graphs: [(&str, Build, bool); 6] = [
        ("elementwise chain", chain, true),
        ("elementwise chain, unfused", chain, false),
        ("fan-out/fan-in", fan, true),
        ("fan-out/fan-in, unfused", fan, false),
        ("wide reductions + add tree", wide, true),
        ("matmul chain", matmuls, true),
    ];
    println!(
        "{:<30} {:>8} {:>10} {:>8}",
        "graph", "nodes", "plan ms", "steps"
    );
    for (name, build, fuse) in graphs {
        for &n in &sizes {
            let mut g = Graph::new();
            let y = build(&mut g, n);
            let start = Instant::now();
            let plan = compile::compile(&g, &[y], &target(fuse)).expect("plan");
            let ms = start.elapsed().as_secs_f64() * 1e3;
            println!(
                "{name:<30} {:>8} {ms:>10.1} {:>8}",
                g.len(),
                plan.steps.len()
            );
        }
    }
}
