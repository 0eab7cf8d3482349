//! The memory plan: reuse bounds, the live-bytes lower bound, the no-overlap invariant over
//! random graphs, and device limits.

use crate::common;

use wgflow::compile::{self, memory::overlaps, Plan, Target};
use wgflow::device::DeviceLimits;
use wgflow::{Axes, DType, Device, Graph, HostTensor, Tensor};

const N: usize = 1 << 20;

fn chain(g: &mut Graph, x: Tensor, len: usize) -> Tensor {
    let mut t = x;
    for i in 0..len {
        t = if i % 2 == 0 {
            g.neg(t).unwrap()
        } else {
            g.abs(t).unwrap()
        };
    }
    t
}

#[test]
fn a_chain_of_20_unary_ops_reuses_memory() {
    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let y = chain(&mut g, x, 20);
    let one = (N * 4) as u64;
    let data: Vec<f32> = (0..N).map(|i| (i as f32 * 0.001).sin()).collect();
    let want: Vec<f32> = data.iter().map(|v| v.abs()).collect();
    for dev in devices {
        for fuse in [false, true] {
            let mut s = wgflow::Session::new(
                &g,
                wgflow::SessionOptions {
                    default_device: Some(dev),
                    visible_devices: Some(common::gpu_indices()),
                    fuse,
                    ..Default::default()
                },
            )
            .unwrap();
            let plan = s.plan(&[y]).unwrap();
            let m = plan.memory(dev).unwrap();
            assert!(
                m.peak_bytes <= 3 * one,
                "{dev} fuse={fuse}: peak {} > 3 tensors",
                m.peak_bytes
            );
            assert!(m.lower_bound_bytes <= m.peak_bytes);
            // Each step writes in place over its dying input (the feed included): one slot.
            assert_eq!(m.peak_bytes, one, "{dev} fuse={fuse}:\n{}", plan.describe());
            if fuse {
                assert_eq!(plan.dispatch_count(), 1, "the chain fuses into one kernel");
            } else {
                assert_eq!(plan.dispatch_count(), 20);
                assert!(
                    m.no_reuse_bytes >= 20 * one,
                    "no-reuse {}",
                    m.no_reuse_bytes
                );
                assert_eq!(m.in_place.len(), 20);
            }
            let out = s.run(&[(x, HostTensor::from(data.clone()))], &[y]).unwrap();
            assert_eq!(out[0].to_f32().unwrap(), want, "{dev} fuse={fuse}");
        }
    }
}

/// Past `max_buffer_size` nothing can hold the tensor: a clear error at plan time.
#[test]
fn a_tensor_over_the_buffer_limit_is_a_clear_error() {
    for gpu in common::gpus() {
        let limit = wgflow::devices()
            .into_iter()
            .find(|d| d.device == gpu)
            .unwrap()
            .limits
            .max_buffer_size;
        let n = (limit / 4 + 1) as usize;
        let mut g = Graph::new();
        let x = g.placeholder("big", [n], DType::F32).unwrap();
        let y = g.relu(x).unwrap();
        let mut s = common::session_on(&g, gpu);
        let err = s.plan(&[y]).unwrap_err().to_string();
        assert!(err.contains("max_buffer_size"), "{err}");
        assert!(
            err.contains(&limit.to_string()) && err.contains(&gpu.to_string()),
            "{err}"
        );
    }
}

/// A tiny deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random DAG of elementwise, reduce, matmul, transpose and reshape nodes over [R, C] tensors.
fn random_graph(seed: u64) -> (Graph, Tensor, Vec<Tensor>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    let mut g = Graph::new();
    let (r, c) = (1 + rng.below(16), 1 + rng.below(16));
    let x = g.placeholder("x", [r, c], DType::F32).unwrap();
    let mut pool = vec![x];
    let mut outputs = Vec::new();
    for _ in 0..(5 + rng.below(25)) {
        let a = pool[rng.below(pool.len())];
        let b = pool[rng.below(pool.len())];
        let t = match rng.below(8) {
            0 => g.add(a, b).unwrap(),
            1 => g.mul(a, b).unwrap(),
            2 => g.tanh(a).unwrap(),
            3 => {
                let s = g.sum(a, [1], true).unwrap();
                g.sub(a, s).unwrap()
            }
            4 => {
                let t = g.transpose(a, &[1, 0]).unwrap();
                let m = g.matmul(a, t).unwrap();
                let k = g.matmul(m, a).unwrap();
                let c = g.constant(0.01f32).unwrap();
                g.mul(k, c).unwrap()
            }
            5 => {
                let f = g.reshape(a, &[-1]).unwrap();
                let e = g.abs(f).unwrap();
                let e = g.neg(e).unwrap();
                let e = g.exp(e).unwrap();
                g.reshape(e, &[r as isize, c as isize]).unwrap()
            }
            6 => g.maximum(a, b).unwrap(),
            _ => {
                let m = g.max(a, Axes::All, true).unwrap();
                g.sub(b, m).unwrap()
            }
        };
        pool.push(t);
        if rng.below(4) == 0 {
            outputs.push(t);
        }
    }
    outputs.push(*pool.last().unwrap());
    (g, x, outputs)
}

fn fake_gpu_target(fuse: bool) -> Target {
    Target {
        devices: vec![
            (
                Device::Gpu(0),
                DeviceLimits {
                    max_buffer_size: 1 << 30,
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
        fold_constants: fuse,
    }
}

fn check_invariants(plan: &Plan, what: &str) {
    for (d, m) in &plan.memory {
        let bad = overlaps(m, &|v| plan.values[v].bytes());
        assert!(
            bad.is_empty(),
            "{what} {d}: values alive together overlap: {bad:?}\n{}",
            plan.describe()
        );
        assert!(m.lower_bound_bytes <= m.peak_bytes, "{what} {d}");
        assert!(m.peak_bytes <= m.no_reuse_bytes, "{what} {d}");
        for o in m.offsets.values() {
            assert_eq!(o % m.alignment, 0, "{what} {d}: misaligned offset {o}");
        }
    }
}

#[test]
fn random_dags_never_overlap_live_values_and_fusion_keeps_results() {
    for seed in 0..60 {
        let (g, x, outs) = random_graph(seed);
        for fuse in [false, true] {
            let plan = compile::compile(&g, &outs, &fake_gpu_target(fuse)).unwrap();
            check_invariants(&plan, &format!("seed {seed} fuse={fuse} (gpu target)"));
            let mut cpu = fake_gpu_target(fuse);
            cpu.default_device = Device::Cpu;
            let plan = compile::compile(&g, &outs, &cpu).unwrap();
            check_invariants(&plan, &format!("seed {seed} fuse={fuse} (cpu target)"));
        }
        // The arena is shared, so a planner bug would corrupt values: compare fused and
        // unfused runs on cpu:0.
        let shape = g.shape(x).unwrap().clone();
        let feed = HostTensor::new(
            shape.clone(),
            (0..shape.numel())
                .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let mut results = Vec::new();
        for fuse in [false, true] {
            let mut s = wgflow::Session::new(
                &g,
                wgflow::SessionOptions {
                    default_device: Some(Device::Cpu),
                    fuse,
                    ..Default::default()
                },
            )
            .unwrap();
            results.push(s.run(&[(x, feed.clone())], &outs).unwrap());
        }
        for (a, b) in results[0].iter().zip(&results[1]) {
            common::assert_close(&format!("seed {seed}"), b, a, 1e-5, 1e-5);
        }
    }
}

#[test]
fn planned_peak_is_close_to_the_lower_bound_on_an_mlp() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [64, 256], DType::F32).unwrap();
    let mut h = x;
    for (i, (k, n)) in [(256, 512), (512, 512), (512, 10)].into_iter().enumerate() {
        let w = g
            .constant(HostTensor::new([k, n], vec![0.01f32; k * n]).unwrap())
            .unwrap();
        let b = g
            .constant(HostTensor::new([n], vec![0.1f32; n]).unwrap())
            .unwrap();
        let m = g.matmul(h, w).unwrap();
        let a = g.add(m, b).unwrap();
        h = if i < 2 {
            g.relu(a).unwrap()
        } else {
            g.softmax(a, -1).unwrap()
        };
    }
    let plan = compile::compile(&g, &[h], &fake_gpu_target(true)).unwrap();
    let m = plan.memory(Device::Gpu(0)).unwrap();
    check_invariants(&plan, "mlp");
    assert!(
        m.peak_bytes as f64 <= 1.05 * m.lower_bound_bytes as f64,
        "{}",
        plan.describe()
    );
    assert!(m.no_reuse_bytes > m.peak_bytes);
}

/// Built breadth-first, two branches would keep both big temporaries alive; the planner tries
/// other topological orders and finishes one branch before starting the next. (Transposes, so
/// that in-place reuse cannot hide the difference.)
#[test]
fn schedule_search_finishes_one_branch_before_the_next() {
    let n = 1 << 16;
    let big = (n * 4) as u64;
    let mut g = Graph::new();
    let x = g.placeholder("x", [256, 256], DType::F32).unwrap();
    let a1 = g.transpose(x, &[1, 0]).unwrap();
    let a2 = g.transpose(x, &[1, 0]).unwrap();
    let s1 = g.sum(a1, Axes::All, false).unwrap();
    let s2 = g.sum(a2, Axes::All, false).unwrap();
    let y = g.add(s1, s2).unwrap();
    let plan = compile::compile(&g, &[y], &fake_gpu_target(true)).unwrap();
    let m = plan.memory(Device::Gpu(0)).unwrap();
    check_invariants(&plan, "branches");
    // x and one temporary (plus small scalars), not x and both temporaries.
    assert!(
        m.peak_bytes < 3 * big,
        "peak {} with schedule:\n{}",
        m.peak_bytes,
        plan.describe()
    );
    let names: Vec<String> = plan.steps.iter().map(|s| s.nodes.join("+")).collect();
    // (The final add may run as the epilogue of either sum, so match the first node name.)
    let pos = |n: &str| {
        names
            .iter()
            .position(|x| x.split('+').next() == Some(n))
            .unwrap()
    };
    assert!(
        pos("sum") < pos("transpose_1") || pos("sum_1") < pos("transpose"),
        "{names:?}"
    );
    let mut s = wgflow::Session::new(
        &g,
        wgflow::SessionOptions {
            default_device: Some(Device::Cpu),
            ..Default::default()
        },
    )
    .unwrap();
    let xs: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.1).collect();
    let want: f32 = 2.0 * xs.iter().sum::<f32>();
    let got = s
        .run(&[(x, HostTensor::new([256, 256], xs).unwrap())], &[y])
        .unwrap()[0]
        .item::<f32>()
        .unwrap();
    assert!((got - want).abs() <= 1e-3 * want.abs(), "{got} vs {want}");
}
