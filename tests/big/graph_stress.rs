//! Graphs whose shape stresses the compiler: long chains, nested diamonds, wide fan-out and
//! fan-in, shared subexpressions. Each runs on cpu:0 and every GPU against values computed
//! here; planning must stay linear (the exponential cases get a generous wall-clock bound,
//! since without the fix they do not finish at all; tight timings live in `benches/plan.rs`).

use crate::common;

use std::time::{Duration, Instant};
use wgflow::compile::{Plan, StepKind};
use wgflow::ops::Kernel;
use wgflow::{DType, Device, Graph, HostTensor, Tensor};

const N: usize = 1000;

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

fn data() -> Vec<f32> {
    (0..N).map(|i| (i as f32 - 500.0) * 0.125).collect()
}

/// The operation count of every elementwise kernel in the plan.
fn elementwise_ops(plan: &Plan) -> Vec<usize> {
    plan.steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Dispatch {
                kernel: Kernel::Elementwise(k),
                ..
            } => Some(k.expr.op_count()),
            _ => None,
        })
        .collect()
}

/// Plan and run `y` on `dev`, feeding `x`; returns the plan and the result.
fn run(g: &Graph, dev: Device, x: Tensor, y: Tensor, feed: &[f32]) -> (Plan, Vec<f32>) {
    let mut s = common::session_on(g, dev);
    let start = Instant::now();
    let plan = s.plan(&[y]).expect("plan");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{dev}: planning took {:?}",
        start.elapsed()
    );
    let out = s
        .run(&[(x, HostTensor::from(feed.to_vec()))], &[y])
        .expect("run");
    ((*plan).clone(), out[0].to_f32().expect("f32"))
}

/// `d_i = add(d_{i-1}, d_{i-1})`: every value has two uses in its consumer. Inlined as a
/// tree the expression doubles at each level (2^30 operations); as a DAG it is 30.
#[test]
fn diamonds_nested_30_deep_fuse_into_one_kernel_of_30_ops() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let mut d = x;
    for _ in 0..30 {
        d = g.add(d, d).unwrap();
    }
    let feed = data();
    // Doubling is exact in f32 for these magnitudes.
    let want: Vec<f32> = feed.iter().map(|v| v * (1u64 << 30) as f32).collect();
    for dev in devices() {
        let (plan, got) = run(&g, dev, x, d, &feed);
        assert_eq!(plan.dispatch_count(), 1, "{dev}:\n{}", plan.describe());
        assert_eq!(
            elementwise_ops(&plan),
            vec![30],
            "{dev}: no work duplicated"
        );
        assert_eq!(got, want, "{dev}");
        assert!(
            plan.describe().len() < 10_000,
            "{dev}: the listing stays short"
        );
    }
}

/// Shared values inside one fused kernel are computed once: `e = exp(x)` feeds 64 products
/// that are summed, all fused; the kernel does no more operations than the graph has.
#[test]
fn shared_subexpressions_are_computed_once_per_kernel() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let e = g.exp(x).unwrap();
    let mut acc = None;
    let mut graph_ops = 1;
    for i in 0..64 {
        let c = g.full([1], DType::F32, 1.0 + i as f64 / 64.0).unwrap();
        let t = g.mul(e, c).unwrap();
        graph_ops += 1;
        acc = Some(match acc {
            None => t,
            Some(a) => {
                graph_ops += 1;
                g.add(a, t).unwrap()
            }
        });
    }
    let y = acc.unwrap();
    let scale: f64 = (0..64).map(|i| 1.0 + i as f64 / 64.0).sum();
    let feed: Vec<f32> = data().iter().map(|v| v / 64.0).collect();
    for dev in devices() {
        let (plan, got) = run(&g, dev, x, y, &feed);
        assert_eq!(plan.dispatch_count(), 1, "{dev}:\n{}", plan.describe());
        let ops = elementwise_ops(&plan);
        assert!(ops[0] <= graph_ops, "{dev}: {} ops > {graph_ops}", ops[0]);
        for (i, (&g, &v)) in got.iter().zip(&feed).enumerate() {
            let want = (v as f64).exp() * scale;
            assert!(
                ((g as f64) - want).abs() <= 1e-5 * want.abs(),
                "{dev} [{i}]: {g} vs {want}"
            );
        }
    }
}

/// 10,001 negations in one kernel: WGSL front ends cap expression nesting (naga near 200),
/// so the kernel binds one `let` per operation.
#[test]
fn a_chain_of_10001_ops_runs_as_one_kernel() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let mut y = x;
    for _ in 0..10_001 {
        y = g.neg(y).unwrap();
    }
    let feed = data();
    let want: Vec<f32> = feed.iter().map(|v| -v).collect();
    // Creating the pipeline of a 10,000-statement shader (wgpu's back ends, the driver's
    // compiler) once overflowed a 2 MiB test thread; wgflow's own passes are held to 2 MiB
    // by `a_10000_op_chain_plans_and_runs_on_a_2_mib_stack`.
    let worker = std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || {
            for dev in devices() {
                let (plan, got) = run(&g, dev, x, y, &feed);
                assert_eq!(plan.dispatch_count(), 1, "{dev}");
                assert_eq!(elementwise_ops(&plan), vec![10_001], "{dev}");
                assert_eq!(got, want, "{dev}");
            }
        });
    worker.unwrap().join().expect("every device agrees");
}

/// `x = x * 0.5 + 1` unrolled 100 times (the chain that broke naga's recursion limit),
/// against float64.
#[test]
fn an_unrolled_affine_recurrence_matches_float64() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let half = g.full([1], DType::F32, 0.5).unwrap();
    let one = g.full([1], DType::F32, 1.0).unwrap();
    let mut y = x;
    for _ in 0..100 {
        let m = g.mul(y, half).unwrap();
        y = g.add(m, one).unwrap();
    }
    let feed = data();
    for dev in devices() {
        let (plan, got) = run(&g, dev, x, y, &feed);
        assert_eq!(plan.dispatch_count(), 1, "{dev}");
        for (i, (&g, &v)) in got.iter().zip(&feed).enumerate() {
            let mut w = v as f64;
            for _ in 0..100 {
                w = w * 0.5 + 1.0;
            }
            assert!(((g as f64) - w).abs() <= 1e-6, "{dev} [{i}]: {g} vs {w}");
        }
    }
}

/// The CPU evaluator and the compiler walk expressions without recursion: planning and
/// running a 10,000-op chain fits a test thread's default 2 MiB stack.
#[test]
fn a_10000_op_chain_plans_and_runs_on_a_2_mib_stack() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let worker = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let mut g = Graph::new();
            let x = g.placeholder("x", [N], DType::F32).unwrap();
            let mut y = x;
            for i in 0..10_000 {
                y = if i % 2 == 0 {
                    g.neg(y).unwrap()
                } else {
                    g.abs(y).unwrap()
                };
            }
            let feed = data();
            let (plan, got) = run(&g, Device::Cpu, x, y, &feed);
            let wgsl = match &plan.steps.as_slice()[0].kind {
                StepKind::Dispatch { kernel, .. } => kernel.wgsl(),
                StepKind::Transfer { .. } => String::new(),
            };
            let want: Vec<f32> = feed.iter().map(|v| v.abs()).collect();
            (got == want, plan.dispatch_count(), wgsl)
        })
        .unwrap();
    let (ok, dispatches, wgsl) = worker.join().expect("no stack overflow");
    assert!(ok);
    assert_eq!(dispatches, 1);
    wgflow::ops::wgsl::validate("chain", &wgsl).expect("naga accepts the kernel");
}

/// One input fans out to 2,000 scaled copies that fan back in through a chain of adds:
/// everything fuses into one kernel over the single input.
#[test]
fn wide_fan_out_and_fan_in_fuse_and_match_float64() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let mut acc = None;
    let mut scale = 0.0f64;
    for i in 0..2000 {
        let c = (i % 7) as f64 * 0.25;
        scale += c;
        let k = g.full([1], DType::F32, c).unwrap();
        let t = g.mul(x, k).unwrap();
        acc = Some(match acc {
            None => t,
            Some(a) => g.add(a, t).unwrap(),
        });
    }
    let y = acc.unwrap();
    let feed = data();
    for dev in devices() {
        let (plan, got) = run(&g, dev, x, y, &feed);
        assert_eq!(plan.dispatch_count(), 1, "{dev}");
        for (i, (&g, &v)) in got.iter().zip(&feed).enumerate() {
            let want = v as f64 * scale;
            assert!(
                ((g as f64) - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{dev} [{i}]: {g} vs {want}"
            );
        }
    }
}

/// Fan-out to 300 reductions (each its own kernel, with the shift as a fused prologue) whose
/// scalars fan in: many values alive at once, and every one is right.
#[test]
fn fan_out_to_reductions_and_back() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [N], DType::F32).unwrap();
    let mut acc = None;
    for i in 0..300 {
        let k = g.full([1], DType::F32, i as f64).unwrap();
        let t = g.add(x, k).unwrap();
        let s = g.sum(t, 0, false).unwrap();
        acc = Some(match acc {
            None => s,
            Some(a) => g.add(a, s).unwrap(),
        });
    }
    let y = acc.unwrap();
    let feed = data();
    let base: f64 = feed.iter().map(|&v| v as f64).sum();
    let want: f64 = (0..300).map(|i| base + (N * i) as f64).sum();
    for dev in devices() {
        let (_, got) = run(&g, dev, x, y, &feed);
        assert!(
            ((got[0] as f64) - want).abs() <= 1e-5 * want.abs(),
            "{dev}: {} vs {want}",
            got[0]
        );
    }
}

/// Planning is linear in graph size: a 20,000-op chain, fused or not (quadratic passes took
/// minutes; the bound is generous, real figures are in `benches/plan.rs`).
#[test]
fn a_20000_op_chain_plans_quickly_fused_or_not() {
    // One at a time with the other big tests: parallel GL work here starved llvmpipe's
    // GL context lock (wgpu-hal gives up after a second).
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let x = g.placeholder("x", [64], DType::F32).unwrap();
    let mut y = x;
    for _ in 0..20_000 {
        y = g.neg(y).unwrap();
    }
    for fuse in [true, false] {
        let target = wgflow::compile::Target {
            devices: vec![(Device::Cpu, wgflow::device::DeviceLimits::cpu())],
            default_device: Device::Cpu,
            gpu_only_default: None,
            soft_placement: false,
            fuse,
            fold_constants: true,
        };
        let start = Instant::now();
        let plan = wgflow::compile::compile(&g, &[y], &target).expect("plan");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "fuse={fuse}: {:?}",
            start.elapsed()
        );
        assert_eq!(plan.dispatch_count(), if fuse { 1 } else { 20_000 });
    }
}
