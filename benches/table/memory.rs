//! The memory planner's zoo (`WGFLOW_BENCH_ONLY=memory`): for each graph, every op's output
//! in its own buffer, every value of the fused plan in its own buffer, the live-bytes lower
//! bound and the planned arena.

use wgflow::compile::{self, Target};
use wgflow::device::DeviceLimits;
use wgflow::{Axes, DType, Device, Graph, HostTensor, Tensor};

/// The memory planner on a zoo of graphs: no-reuse, live-bytes lower bound, planned arena.
pub fn memory_zoo() {
    let target = Target {
        devices: vec![
            (
                Device::Gpu(0),
                DeviceLimits {
                    max_buffer_size: 1 << 40,
                    max_storage_buffer_binding_size: 1 << 40,
                    max_storage_buffers_per_shader_stage: 8,
                    max_compute_workgroups_per_dimension: 65535,
                    min_storage_buffer_offset_alignment: 256,
                    shader_f16: true,
                },
            ),
            (Device::Cpu, DeviceLimits::cpu()),
        ],
        default_device: Device::Gpu(0),
        gpu_only_default: None,
        soft_placement: false,
        fuse: true,
        fold_constants: true,
    };
    let mut zoo: Vec<(String, Graph, Vec<Tensor>)> = Vec::new();
    {
        let mut g = Graph::new();
        let x = g.placeholder("x", [256, 784], DType::F32).unwrap();
        let mut h = x;
        for (k, n) in [(784usize, 512usize), (512, 512), (512, 10)] {
            let w = g.constant(HostTensor::zeros([k, n], DType::F32)).unwrap();
            let m = g.matmul(h, w).unwrap();
            h = g.relu(m).unwrap();
        }
        let y = g.softmax(h, -1).unwrap();
        zoo.push(("mlp 784-512-512-10".into(), g, vec![y]));
    }
    {
        let (g, y) = mobilenet_v2_like();
        zoo.push(("mobilenet-v2 1x3x224x224".into(), g, vec![y]));
    }
    {
        let (g, y) = transformer_block(128, 256, 4);
        zoo.push(("transformer block 128x256".into(), g, vec![y]));
    }
    for seed in 0..50u64 {
        let (g, outs) = random_dag(seed);
        zoo.push((format!("random dag {seed}"), g, outs));
    }
    println!();
    // "unfused" is every op's output in its own buffer (a naive executor); "no-reuse" is
    // every value of the fused plan in its own buffer.
    println!(
        "{:<24} {:>12} {:>12} {:>14} {:>12} {:>7} {:>9}",
        "graph", "unfused B", "no-reuse B", "lower bound B", "planned B", "ratio", "saving"
    );
    let unfused_target = Target {
        fuse: false,
        fold_constants: false,
        ..target.clone()
    };
    let mut ratios = Vec::new();
    for (name, g, outs) in &zoo {
        let plan = compile::compile(g, outs, &target).unwrap();
        let m = plan.memory(Device::Gpu(0)).unwrap();
        let ratio = m.peak_bytes as f64 / m.lower_bound_bytes.max(1) as f64;
        ratios.push(ratio);
        if !name.starts_with("random") || ratio > 1.0 {
            let naive = compile::compile(g, outs, &unfused_target).unwrap();
            let unfused = naive.memory(Device::Gpu(0)).unwrap().no_reuse_bytes;
            println!(
                "{:<24} {:>12} {:>12} {:>14} {:>12} {:>7.3} {:>8.1}x",
                name,
                unfused,
                m.no_reuse_bytes,
                m.lower_bound_bytes,
                m.peak_bytes,
                ratio,
                unfused as f64 / m.peak_bytes.max(1) as f64
            );
        }
    }
    let at_bound = ratios.iter().filter(|&&r| r <= 1.0).count();
    let worst = ratios.iter().cloned().fold(0.0, f64::max);
    println!(
        "{} graphs: {} ({:.0}%) planned at the lower bound; worst ratio {:.3}",
        ratios.len(),
        at_bound,
        100.0 * at_bound as f64 / ratios.len() as f64,
        worst
    );
}

fn zeros(g: &mut Graph, shape: &[usize]) -> Tensor {
    g.constant(HostTensor::zeros(shape.to_vec(), DType::F32))
        .unwrap()
}

/// A MobileNet-v2-shaped CNN: a strided stem, inverted residual blocks (1x1 expand ×6,
/// 3x3 depthwise, 1x1 project, residual when shapes match), global pooling, a classifier.
fn mobilenet_v2_like() -> (Graph, Tensor) {
    use wgflow::graph::Conv2dOptions;
    let mut g = Graph::new();
    let x = g.placeholder("x", [1, 3, 224, 224], DType::F32).unwrap();
    let conv = |g: &mut Graph,
                x: Tensor,
                cin: usize,
                cout: usize,
                k: usize,
                stride: usize,
                groups: usize| {
        let w = zeros(g, &[cout, cin / groups, k, k]);
        let opts = Conv2dOptions {
            stride: [stride, stride],
            padding: [k / 2, k / 2],
            dilation: [1, 1],
            groups,
        };
        let y = g.conv2d(x, w, None, opts).unwrap();
        g.clip(y, 0.0, 6.0).unwrap()
    };
    let mut h = conv(&mut g, x, 3, 32, 3, 2, 1);
    let mut c = 32;
    // (expansion t, output channels, first stride, repeats): MobileNet-v2's table.
    for (t, cout, stride, repeats) in [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 2, 3),
        (6, 64, 2, 4),
        (6, 96, 1, 3),
        (6, 160, 2, 3),
        (6, 320, 1, 1),
    ] {
        for i in 0..repeats {
            let s = if i == 0 { stride } else { 1 };
            let e = if t == 1 {
                h
            } else {
                conv(&mut g, h, c, c * t, 1, 1, 1)
            };
            let d = conv(&mut g, e, c * t, c * t, 3, s, c * t);
            let w = zeros(&mut g, &[cout, c * t, 1, 1]);
            let p = g.conv2d(d, w, None, Conv2dOptions::default()).unwrap();
            h = if s == 1 && c == cout {
                g.add(h, p).unwrap()
            } else {
                p
            };
            c = cout;
        }
    }
    let h = conv(&mut g, h, c, 1280, 1, 1, 1);
    let pooled = g.mean(h, [2, 3], false).unwrap();
    let w = zeros(&mut g, &[1280, 1000]);
    let logits = g.matmul(pooled, w).unwrap();
    let y = g.softmax(logits, -1).unwrap();
    (g, y)
}

/// A pre-norm transformer block: attention with `heads` heads and a GELU MLP, residuals.
fn transformer_block(seq: usize, dim: usize, heads: usize) -> (Graph, Tensor) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [seq, dim], DType::F32).unwrap();
    let hd = dim / heads;
    let h = g.layer_norm(x, None, None, -1, 1e-5).unwrap();
    let proj = |g: &mut Graph, h: Tensor, n: usize| {
        let w = zeros(g, &[dim, n]);
        g.matmul(h, w).unwrap()
    };
    let split = |g: &mut Graph, t: Tensor| {
        let r = g
            .reshape(t, &[seq as isize, heads as isize, hd as isize])
            .unwrap();
        g.transpose(r, &[1, 0, 2]).unwrap()
    };
    let (q, k, v) = (
        proj(&mut g, h, dim),
        proj(&mut g, h, dim),
        proj(&mut g, h, dim),
    );
    let (q, k, v) = (split(&mut g, q), split(&mut g, k), split(&mut g, v));
    let kt = g.transpose(k, &[0, 2, 1]).unwrap();
    let scores = g.matmul(q, kt).unwrap();
    let scale = g.constant(1.0 / (hd as f32).sqrt()).unwrap();
    let scores = g.mul(scores, scale).unwrap();
    let p = g.softmax(scores, -1).unwrap();
    let a = g.matmul(p, v).unwrap();
    let a = g.transpose(a, &[1, 0, 2]).unwrap();
    let a = g.reshape(a, &[seq as isize, dim as isize]).unwrap();
    let o = proj(&mut g, a, dim);
    let x1 = g.add(x, o).unwrap();
    let h2 = g.layer_norm(x1, None, None, -1, 1e-5).unwrap();
    let up = proj(&mut g, h2, 4 * dim);
    let act = g.gelu(up, true).unwrap();
    let w = zeros(&mut g, &[4 * dim, dim]);
    let down = g.matmul(act, w).unwrap();
    let y = g.add(x1, down).unwrap();
    (g, y)
}

fn random_dag(seed: u64) -> (Graph, Vec<Tensor>) {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut next = |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as usize
    };
    let mut g = Graph::new();
    let (r, c) = (8 + next(64), 8 + next(64));
    let x = g.placeholder("x", [r, c], DType::F32).unwrap();
    let mut pool = vec![x];
    let mut outs = Vec::new();
    for _ in 0..(10 + next(30)) {
        let a = pool[next(pool.len())];
        let b = pool[next(pool.len())];
        let t = match next(5) {
            0 => g.add(a, b).unwrap(),
            1 => {
                let t = g.transpose(a, &[1, 0]).unwrap();
                let m = g.matmul(a, t).unwrap();
                g.matmul(m, b).unwrap()
            }
            2 => {
                let s = g.sum(a, Axes::from([1]), true).unwrap();
                g.sub(b, s).unwrap()
            }
            3 => g.tanh(a).unwrap(),
            _ => g.mul(a, b).unwrap(),
        };
        pool.push(t);
        if next(5) == 0 {
            outs.push(t);
        }
    }
    outs.push(*pool.last().unwrap());
    (g, outs)
}
