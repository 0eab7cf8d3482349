//! `cargo bench --bench table`: wgflow vs a hand-written wgpu program running the same WGSL on
//! the same adapter, plus the memory planner's zoo. Prints one table per section.
//!
//! The baseline replays each dispatch of wgflow's plan with its own buffers, pipelines and
//! bind groups, all dispatches in one compute pass and one submit per iteration — the least
//! a hand-written program could do — so the ratio is wgflow's executor overhead. The two
//! are timed in alternating batches (medians of 9), so both see the same drift of a shared
//! machine.
//! Set `WGFLOW_BENCH_DEVICE=gpu:1` to pick another adapter, `WGFLOW_BENCH_QUICK=1` for fewer
//! iterations, `WGFLOW_BENCH_ONLY=memory` for the memory table alone, `WGFLOW_BENCH_ONLY=cpu`
//! for W1-W7 on cpu:0 against NumPy (`benches/numpy_w.py`, run when Python with NumPy is
//! present), TensorFlow and JAX (`benches/peers_w.py`, see `table/cpu.rs`) and the adapter
//! (none with `WGFLOW_BENCH_DEVICE=cpu:0`); `WGFLOW_BENCH_LOAD=2,50` runs that table beside a
//! background load (two threads, each busy half of every 10 ms).

#[path = "table/first_run.rs"]
mod first_run;

use std::time::{Duration, Instant};
use wgflow::backend::gpu::context;
use wgflow::compile::{Plan, Source, StepKind, ValueId};
use wgflow::{Axes, DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

#[path = "table/transfer.rs"]
mod transfer;

#[path = "table/cpu.rs"]
mod cpu;

#[path = "table/memory.rs"]
mod memory;

use memory::memory_zoo;

fn quick() -> bool {
    std::env::var("WGFLOW_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// Median seconds per iteration over `reps` batches of `iters`.
fn time(mut f: impl FnMut(), iters: usize) -> f64 {
    f();
    f();
    let reps = if quick() { 3 } else { 7 };
    let mut samples: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() / iters as f64
        })
        .collect();
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

/// Like [`time`] for two programs, alternating their batches so that both see the same
/// drift of a shared machine; returns both medians.
fn time_pair(mut f: impl FnMut(), mut g: impl FnMut(), iters: usize) -> (f64, f64) {
    f();
    g();
    f();
    g();
    let reps = if quick() { 3 } else { 9 };
    let mut fs = Vec::new();
    let mut gs = Vec::new();
    for _ in 0..reps {
        for (h, out) in [(&mut f as &mut dyn FnMut(), &mut fs), (&mut g, &mut gs)] {
            let t = Instant::now();
            for _ in 0..iters {
                h();
            }
            out.push(t.elapsed().as_secs_f64() / iters as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    (median(&mut fs), median(&mut gs))
}

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

/// A compute pipeline for `wgsl`'s `main`, with the layout wgpu derives from the shader.
fn compute_pipeline(d: &wgpu::Device, wgsl: &str) -> wgpu::ComputePipeline {
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// Replays the dispatches of a single-GPU plan with plain wgpu.
struct Baseline {
    ctx: std::sync::Arc<context::GpuContext>,
    passes: Vec<(wgpu::ComputePipeline, wgpu::BindGroup, (u32, u32))>,
    _buffers: Vec<wgpu::Buffer>,
}

impl Baseline {
    fn new(plan: &Plan, gpu: usize) -> Baseline {
        let ctx = context::get(gpu).unwrap();
        let d = &ctx.device;
        let mut buffers: std::collections::HashMap<ValueId, wgpu::Buffer> = Default::default();
        let mut buffer_of = |v: ValueId, plan: &Plan| -> wgpu::Buffer {
            let root = plan.root(v);
            buffers
                .entry(root)
                .or_insert_with(|| {
                    let val = &plan.values[root];
                    let b = d.create_buffer(&wgpu::BufferDescriptor {
                        label: None,
                        size: val.bytes().max(16),
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    if let Source::Constant(t) = &val.source {
                        ctx.queue.write_buffer(&b, 0, t.bytes());
                    }
                    b
                })
                .clone()
        };
        let mut passes = Vec::new();
        for step in &plan.steps {
            let StepKind::Dispatch { kernel, inputs } = &step.kind else {
                panic!("baseline replays single-device plans")
            };
            let kernel = &kernel.for_adapter(&ctx.adapter_kind());
            let pipeline = compute_pipeline(d, &kernel.wgsl());
            let mut vals = inputs.clone();
            vals.push(step.output);
            let bufs: Vec<wgpu::Buffer> = vals.iter().map(|&v| buffer_of(v, plan)).collect();
            let sizes: Vec<u64> = vals.iter().map(|&v| plan.values[v].bytes()).collect();
            let entries: Vec<wgpu::BindGroupEntry> = bufs
                .iter()
                .zip(&sizes)
                .enumerate()
                .map(|(i, (b, &s))| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: b,
                        offset: 0,
                        size: wgpu::BufferSize::new(s),
                    }),
                })
                .collect();
            let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            let grid = kernel
                .workgroups(ctx.limits.max_compute_workgroups_per_dimension)
                .unwrap();
            passes.push((pipeline, bind_group, grid));
        }
        Baseline {
            ctx: ctx.clone(),
            passes,
            _buffers: buffers.into_values().collect(),
        }
    }

    fn run(&self) {
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for (p, bg, (x, y)) in &self.passes {
                pass.set_pipeline(p);
                pass.set_bind_group(0, bg, &[]);
                pass.dispatch_workgroups(*x, *y, 1);
            }
        }
        self.ctx.queue.submit([enc.finish()]);
        self.ctx.wait().unwrap();
    }
}

struct Row {
    name: &'static str,
    wgflow_s: f64,
    baseline_s: Option<f64>,
    unit: &'static str,
    work: f64,
    kernels: usize,
}

fn session(g: &Graph, dev: Device, fuse: bool) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(dev),
            fuse,
            // The workloads' inputs are constants standing in for device-resident tensors.
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
}

fn bench_targets(
    name: &'static str,
    g: &Graph,
    out: Tensor,
    (dev, gpu): (Device, usize),
    (unit, work): (&'static str, f64),
    iters: usize,
) -> Row {
    let mut s = session(g, dev, true);
    let plan = s.plan(&[out]).unwrap();
    let base = Baseline::new(&plan, gpu);
    let (wgflow_s, baseline_s) =
        time_pair(|| s.run_targets(&[], &[out]).unwrap(), || base.run(), iters);
    Row {
        name,
        wgflow_s,
        baseline_s: Some(baseline_s),
        unit,
        work,
        kernels: plan.dispatch_count(),
    }
}

/// W1, W2, W3 and W5 (W4 is [`mlp_w4`]): name, graph and fetched tensor, and the unit and
/// amount of work per run (bytes moved or flops).
#[allow(clippy::type_complexity)]
fn workloads() -> Vec<(&'static str, (Graph, Tensor), (&'static str, f64))> {
    let w1 = {
        let n = 16 * 1024 * 1024;
        let mut g = Graph::new();
        let a = konst(&mut g, &[n], 1);
        let b = konst(&mut g, &[n], 2);
        let c = g.add(a, b).unwrap();
        ("W1 add 16M", (g, c), ("GB/s", 12.0 * n as f64))
    };
    // ((a*b + c) max 0) * 0.5 + exp(-a), N = 4M.
    let w2 = {
        let n = 4 * 1024 * 1024;
        let mut g = Graph::new();
        let a = konst(&mut g, &[n], 3);
        let b = konst(&mut g, &[n], 4);
        let c = konst(&mut g, &[n], 5);
        let zero = g.constant(0.0f32).unwrap();
        let half = g.constant(0.5f32).unwrap();
        let ab = g.mul(a, b).unwrap();
        let abc = g.add(ab, c).unwrap();
        let m = g.maximum(abc, zero).unwrap();
        let h = g.mul(m, half).unwrap();
        let na = g.neg(a).unwrap();
        let e = g.exp(na).unwrap();
        let y = g.add(h, e).unwrap();
        ("W2 fused chain 4M", (g, y), ("GB/s", 16.0 * n as f64))
    };
    let w3 = {
        let n = 1024;
        let mut g = Graph::new();
        let a = konst(&mut g, &[n, n], 6);
        let b = konst(&mut g, &[n, n], 8);
        let c = g.matmul(a, b).unwrap();
        (
            "W3 matmul 1024^3",
            (g, c),
            ("GFLOP/s", 2.0 * (n * n * n) as f64),
        )
    };
    let w5 = {
        let n = 4096;
        let mut g = Graph::new();
        let a = konst(&mut g, &[n, n], 9);
        let s = g.sum(a, [1], false).unwrap();
        (
            "W5 row sums 4096^2",
            (g, s),
            ("GB/s", 4.0 * (n * n + n) as f64),
        )
    };
    vec![w1, w2, w3, w5]
}

/// W4's graph: batch 256, 784 -> 512 -> 512 -> 10, relu between layers, softmax at the end.
fn mlp_w4() -> (Graph, Tensor, Tensor) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [256, 784], DType::F32).unwrap();
    let mut h = x;
    for (i, (k, n)) in [(784usize, 512usize), (512, 512), (512, 10)]
        .into_iter()
        .enumerate()
    {
        let w = konst(&mut g, &[k, n], 10 + i as u32);
        let b = konst(&mut g, &[n], 20 + i as u32);
        let m = g.matmul(h, w).unwrap();
        let a = g.add(m, b).unwrap();
        h = if i < 2 {
            g.relu(a).unwrap()
        } else {
            g.softmax(a, -1).unwrap()
        };
    }
    (g, x, h)
}

/// W4 as a training step: the same MLP with Glorot-initialized variables, softmax
/// cross-entropy against fed one-hot labels, and Adam. Prints the forward pass (the loss)
/// and the train step timed in one run, their ratio, the kernels of each, and the training
/// plan's peak arena against its live-bytes lower bound.
fn w4_training(dev: Device, iters: usize) {
    use wgflow::train::{Adam, Optimizer};
    let mut g = Graph::new();
    let x = g.placeholder("x", [256, 784], DType::F32).unwrap();
    let y = g.placeholder("y", [256, 10], DType::F32).unwrap();
    let mut h = x;
    let mut vars = Vec::new();
    for (i, (k, n)) in [(784usize, 512usize), (512, 512), (512, 10)]
        .into_iter()
        .enumerate()
    {
        let w = g
            .variable_with(
                &format!("w{i}"),
                [k, n],
                DType::F32,
                wgflow::Initializer::GlorotUniform { seed: i as u64 },
            )
            .unwrap();
        let b = g
            .variable_with(
                &format!("b{i}"),
                [n],
                DType::F32,
                wgflow::Initializer::Zeros,
            )
            .unwrap();
        vars.extend([w, b]);
        let a = g.linear(h, w, Some(b)).unwrap();
        h = if i < 2 { g.relu(a).unwrap() } else { a };
    }
    let logp = g.log_softmax(h, -1).unwrap();
    let picked = g.mul(logp, y).unwrap();
    let total = g.sum(picked, Axes::All, false).unwrap();
    let scale = g.constant(-1.0f32 / 256.0).unwrap();
    let loss = g.mul(total, scale).unwrap();
    let train = Adam::new(1e-3).minimize(&mut g, loss, &vars).unwrap();
    let xs = HostTensor::new([256, 784], det(256 * 784, 7)).unwrap();
    let labels: Vec<f32> = (0..256 * 10)
        .map(|i| if i % 10 == (i / 10) % 10 { 1.0 } else { 0.0 })
        .collect();
    let ys = HostTensor::new([256, 10], labels).unwrap();
    let feeds = [(x, xs), (y, ys)];
    let cell = std::cell::RefCell::new(session(&g, dev, true));
    let (fwd, step) = time_pair(
        || cell.borrow_mut().run_targets(&feeds, &[loss]).unwrap(),
        || cell.borrow_mut().run_targets(&feeds, &[train]).unwrap(),
        iters,
    );
    let mut s = cell.into_inner();
    let fwd_plan = s.plan(&[loss]).unwrap();
    let plan = s.plan(&[train]).unwrap();
    let mem = plan.memory(dev).unwrap();
    println!(
        "W4 MLP training step (Adam, batch 256) on {dev}: forward {:.2} ms ({} kernels), train step {:.2} ms ({} kernels), ratio {:.2}; training arena peak {} B, live-bytes lower bound {} B ({:.3}x)",
        fwd * 1e3,
        fwd_plan.dispatch_count(),
        step * 1e3,
        plan.dispatch_count(),
        step / fwd,
        mem.peak_bytes,
        mem.lower_bound_bytes,
        mem.peak_bytes as f64 / mem.lower_bound_bytes.max(1) as f64
    );
}

/// Seconds per copy of `bytes` bytes between two buffers on the GPU (one submit each): with
/// `copy_buffer_to_buffer`, and with a vec4 WGSL copy kernel (`out[i] = in[i]`).
fn buffer_copy_seconds(gpu: usize, bytes: u64, iters: usize) -> (f64, f64) {
    let ctx = context::get(gpu).unwrap();
    let mk = |usage| {
        ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage,
            mapped_at_creation: false,
        })
    };
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
    let src = mk(usage);
    let dst = mk(usage | wgpu::BufferUsages::COPY_DST);
    let dma = time(
        || {
            let mut enc = ctx.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes);
            ctx.queue.submit([enc.finish()]);
            ctx.wait().unwrap();
        },
        iters,
    );
    let n4 = bytes / 16;
    let wgsl = format!(
        "@group(0) @binding(0) var<storage, read_write> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i < {n4}u) {{
        out[i] = in0[i];
    }}
}}"
    );
    let d = &ctx.device;
    let pipeline = compute_pipeline(d, &wgsl);
    let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: src.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: dst.as_entire_binding(),
            },
        ],
    });
    let (x, y) =
        wgflow::ops::wgsl::grid(n4, 256, ctx.limits.max_compute_workgroups_per_dimension).unwrap();
    let kernel = time(
        || {
            let mut enc = ctx.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.dispatch_workgroups(x, y, 1);
            }
            ctx.queue.submit([enc.finish()]);
            ctx.wait().unwrap();
        },
        iters,
    );
    (dma, kernel)
}

fn main() {
    let only = std::env::var("WGFLOW_BENCH_ONLY").unwrap_or_default();
    if only == "first-runs" {
        first_run::cold_and_warm(
            &std::env::var("WGFLOW_BENCH_DEVICE").unwrap_or_else(|_| "gpu:0".into()),
        );
        return;
    }
    if only == "transfer" {
        transfer::fetch_and_feed();
        return;
    }
    if only == "memory" {
        memory_zoo();
        return;
    }
    if only == "train" {
        let spec = std::env::var("WGFLOW_BENCH_DEVICE").unwrap_or_else(|_| "gpu:0".into());
        w4_training(Device::parse(&spec).unwrap(), if quick() { 3 } else { 10 });
        return;
    }
    let spec = std::env::var("WGFLOW_BENCH_DEVICE").unwrap_or_else(|_| "gpu:0".into());
    let dev = Device::parse(&spec).unwrap();
    if only == "cpu" {
        cpu::cpu_table(dev, if quick() { 3 } else { 10 });
        return;
    }
    let Device::Gpu(gpu) = dev else {
        panic!("benchmarks need a GPU device")
    };
    let info = wgflow::devices()
        .into_iter()
        .find(|d| d.device == dev)
        .expect("no such GPU");
    println!(
        "adapter: {} ({}, {})",
        info.name, info.backend, info.device_type
    );
    let iters = if quick() { 3 } else { 10 };
    let mut rows = Vec::new();

    // Cold start: W4's and W3's first runs in fresh processes, caches empty and then warm.
    first_run::cold_and_warm(&spec);
    {
        let (g, x, h) = mlp_w4();
        let feed = HostTensor::new([256, 784], det(256 * 784, 7)).unwrap();
        let mut s = session(&g, dev, true);
        let per = time(|| drop(s.run(&[(x, feed.clone())], &[h]).unwrap()), iters);
        let kernels = s.plan(&[h]).unwrap().dispatch_count();
        rows.push(Row {
            name: "W4 MLP fwd 256x784-512-512-10",
            wgflow_s: per,
            baseline_s: None,
            unit: "ms",
            work: 0.0,
            kernels,
        });
    }
    w4_training(dev, iters);
    for (name, (g, out), work) in workloads() {
        rows.push(bench_targets(name, &g, out, (dev, gpu), work, iters));
    }
    // Fusion: an 8-op unary chain on 16M elements, fused vs not.
    {
        let n = 16 * 1024 * 1024;
        let mut g = Graph::new();
        let a = konst(&mut g, &[n], 11);
        let mut t = a;
        for i in 0..8 {
            t = if i % 2 == 0 {
                g.neg(t).unwrap()
            } else {
                g.abs(t).unwrap()
            };
        }
        let fused = bench_targets(
            "8-op chain 16M (fused)",
            &g,
            t,
            (dev, gpu),
            ("GB/s", 8.0 * n as f64),
            iters,
        );
        let mut s = session(&g, dev, false);
        let unfused = time(|| s.run_targets(&[], &[t]).unwrap(), iters.min(5));
        let (dma, kernel) = buffer_copy_seconds(gpu, 4 * n as u64, iters);
        println!(
            "8-op unary chain, 16M f32: fused {:.2} ms, unfused {:.2} ms, speed-up {:.1}x",
            fused.wgflow_s * 1e3,
            unfused * 1e3,
            unfused / fused.wgflow_s,
        );
        println!(
            "  copying the same 64 MiB: copy_buffer_to_buffer {:.2} ms (fused chain / copy {:.2}), a vec4 WGSL copy kernel {:.2} ms (fused chain / copy kernel {:.2})",
            dma * 1e3,
            fused.wgflow_s / dma,
            kernel * 1e3,
            fused.wgflow_s / kernel
        );
        rows.push(fused);
    }

    println!();
    println!(
        "{:<32} {:>8} {:>12} {:>12} {:>12} {:>7}",
        "workload", "kernels", "wgflow", "hand wgpu", "throughput", "ratio"
    );
    for r in &rows {
        let tp = if r.unit == "ms" {
            format!("{:.2} ms", r.wgflow_s * 1e3)
        } else {
            format!("{:.1} {}", r.work / r.wgflow_s / 1e9, r.unit)
        };
        let (base, ratio) = match r.baseline_s {
            Some(b) => (
                format!("{:.3} ms", b * 1e3),
                format!("{:.3}", r.wgflow_s / b),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:<32} {:>8} {:>12} {:>12} {:>12} {:>7}",
            r.name,
            r.kernels,
            format!("{:.3} ms", r.wgflow_s * 1e3),
            base,
            tp,
            ratio
        );
    }
    println!();
    transfer::fetch_and_feed();
    cpu::cpu_table(dev, iters);
    memory_zoo();
    let _ = Duration::ZERO;
}
