//! Traced runs: run metadata per step, the Chrome trace-event export, the per-op profile.

use crate::common;

use serde_json::Value;
use std::collections::HashMap;
use std::time::Instant;
use wgflow::compile::StepKind;
use wgflow::trace::{Profile, RunOptions, SpanKind};
use wgflow::{DType, Device, Graph, HostTensor, Tensor};

fn devices_to_test() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

/// x[8,16] @ w[16,4] + b, relu, then exp: a matmul (with a fused epilogue) and more.
fn mlp() -> (Graph, Tensor, Tensor) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [8, 16], DType::F32).unwrap();
    let w: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
    let w = g.constant(HostTensor::new([16, 4], w).unwrap()).unwrap();
    let h = g.matmul(x, w).unwrap();
    let r = g.relu(h).unwrap();
    let y = g.exp(r).unwrap();
    (g, x, y)
}

fn feed() -> HostTensor {
    let v: Vec<f32> = (0..128).map(|i| (i as f32 * 0.11).cos()).collect();
    HostTensor::new([8, 16], v).unwrap()
}

/// Every event has the required fields; complete events on one track never overlap.
fn check_chrome(trace: &Value) {
    assert_eq!(trace["displayTimeUnit"], "ms");
    let events = trace["traceEvents"].as_array().expect("traceEvents array");
    let mut ends: HashMap<u64, f64> = HashMap::new();
    let mut last_ts: HashMap<u64, f64> = HashMap::new();
    for e in events {
        for field in ["name", "ph", "ts", "pid", "tid"] {
            assert!(e.get(field).is_some(), "{field} missing in {e}");
        }
        let tid = e["tid"].as_u64().unwrap();
        let ts = e["ts"].as_f64().unwrap();
        let prev = last_ts.insert(tid, ts).unwrap_or(0.0);
        assert!(ts >= prev, "timestamps go back on track {tid}: {e}");
        if e["ph"] == "X" {
            let dur = e["dur"].as_f64().expect("dur on a complete event");
            assert!(dur >= 0.0);
            let end = ends.get(&tid).copied().unwrap_or(0.0);
            // Tracks run one thing at a time (a transfer shows on both its devices).
            assert!(ts + 1e-3 >= end, "overlap on track {tid}: {e}");
            ends.insert(tid, ts + dur);
        }
    }
}

#[test]
fn traced_runs_report_every_step_once_within_the_wall_time() {
    for dev in devices_to_test() {
        let (g, x, y) = mlp();
        let mut s = common::session_on(&g, dev);
        let plain = s.run(&[(x, feed())], &[y]).unwrap();
        for _ in 0..3 {
            let t = Instant::now();
            let (out, meta) = s
                .run_with(&[(x, feed())], &[y], &RunOptions { trace: true })
                .unwrap();
            let wall = t.elapsed();
            assert_eq!(
                out[0].to_vec::<f32>().unwrap(),
                plain[0].to_vec::<f32>().unwrap()
            );
            let plan = &meta.plan;
            for (i, step) in plan.steps_by_id() {
                let n = meta.events.iter().filter(|e| e.step == Some(i)).count();
                assert_eq!(n, 1, "{dev}: step {i} appears {n} times");
                if let StepKind::Dispatch { .. } = step.kind {
                    let e = meta.events.iter().find(|e| e.step == Some(i)).unwrap();
                    assert_eq!(e.kind, SpanKind::Dispatch);
                    assert_eq!(e.nodes, step.nodes);
                    assert_eq!(e.device, dev);
                    assert!(e.kernel.is_some());
                    assert_eq!(e.bytes_written, plan.values[step.output].bytes());
                    assert!(e.bytes_read > 0);
                    if dev.is_gpu() {
                        assert!(e.workgroups.is_some(), "{dev}: no grid for step {i}");
                    }
                }
            }
            assert_eq!(meta.dispatches().count(), plan.dispatch_count());
            assert!(
                meta.events.iter().any(|e| e.kind == SpanKind::Upload),
                "{dev}: the feed upload is timed"
            );
            assert!(
                meta.kernel_time() <= wall,
                "{dev}: kernels {:?} > wall {wall:?}",
                meta.kernel_time()
            );
            assert!(meta.wall <= wall);
            let matmul = meta
                .dispatches()
                .find(|e| e.kind_name == "matmul")
                .expect("a matmul step");
            assert_eq!(matmul.flops, Some(2 * 8 * 4 * 16));
            let trace: Value = serde_json::from_str(&meta.chrome_trace_json()).unwrap();
            check_chrome(&trace);
            let xs: Vec<&Value> = trace["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "X" && e["cat"] == "dispatch")
                .collect();
            assert_eq!(xs.len(), plan.dispatch_count());
            for e in &xs {
                assert!(e["args"]["kernel"].is_string());
                assert!(e["args"]["bytes_written"].as_u64().unwrap() > 0);
                let timing = e["args"]["timing"].as_str().unwrap();
                assert!(timing == "host" || timing == "gpu-timestamp", "{timing}");
                if dev == Device::Cpu {
                    assert_eq!(timing, "host");
                }
            }
            assert!(trace["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["ph"] == "C"));
        }
    }
}

#[test]
fn untraced_runs_record_nothing_and_create_nothing() {
    for dev in devices_to_test() {
        let (g, x, y) = mlp();
        let mut s = common::session_on(&g, dev);
        s.run(&[(x, feed())], &[y]).unwrap();
        let before = s.counters();
        let (_, meta) = s
            .run_with(&[(x, feed())], &[y], &RunOptions::default())
            .unwrap();
        assert!(meta.events.is_empty());
        assert!(meta.wall > std::time::Duration::ZERO);
        s.run_with(&[(x, feed())], &[y], &RunOptions { trace: true })
            .unwrap();
        let after = s.counters();
        assert_eq!(after.runs, before.runs + 2);
        assert_eq!(
            (
                after.buffers_created,
                after.pipelines_created,
                after.bind_groups_created
            ),
            (
                before.buffers_created,
                before.pipelines_created,
                before.bind_groups_created
            ),
            "{dev}"
        );
    }
}

#[test]
fn transfers_show_as_flows_between_device_tracks() {
    let Some(&gpu) = common::gpus().first() else {
        return;
    };
    let mut g = Graph::new();
    let x = g.placeholder("x", [8, 16], DType::F32).unwrap();
    let a = g.device("cpu:0", |g| g.exp(x)).unwrap();
    let b = g.relu(a).unwrap();
    let mut s = common::session_on(&g, gpu);
    let (_, meta) = s
        .run_with(&[(x, feed())], &[b], &RunOptions { trace: true })
        .unwrap();
    assert!(meta.plan.transfer_count() >= 1);
    let t = meta
        .events
        .iter()
        .find(|e| e.kind == SpanKind::Transfer)
        .expect("a transfer event");
    assert_eq!(t.from, Some(Device::Cpu));
    assert_eq!(t.device, gpu);
    let trace = meta.chrome_trace();
    check_chrome(&trace);
    let events = trace["traceEvents"].as_array().unwrap();
    let starts = events.iter().filter(|e| e["ph"] == "s").count();
    let finishes = events.iter().filter(|e| e["ph"] == "f").count();
    assert_eq!(starts, meta.plan.transfer_count());
    assert_eq!(finishes, starts);
}

#[test]
fn profile_sums_runs_by_node_and_kind() {
    for dev in devices_to_test() {
        let (g, x, y) = mlp();
        let mut s = common::session_on(&g, dev);
        let runs: Vec<_> = (0..4)
            .map(|_| {
                s.run_with(&[(x, feed())], &[y], &RunOptions { trace: true })
                    .unwrap()
                    .1
            })
            .collect();
        let p = Profile::new(&runs);
        assert_eq!(p.runs, 4);
        let dispatches = runs[0].plan.dispatch_count() as u64;
        let calls: u64 = p.by_kind.iter().map(|r| r.calls).sum();
        assert_eq!(calls, 4 * dispatches);
        assert!(p.by_node.windows(2).all(|w| w[0].total >= w[1].total));
        let matmul = p.by_kind.iter().find(|r| r.name == "matmul").unwrap();
        assert_eq!(matmul.flops, Some(4 * 2 * 8 * 4 * 16));
        let table = p.to_table();
        for step in &runs[0].plan.steps {
            assert!(table.contains(&step.nodes.join("+")), "{table}");
        }
        let json: Value = serde_json::from_str(&p.to_json().to_string()).unwrap();
        assert_eq!(json["runs"], 4);
        assert!(json["by_node"].as_array().unwrap().len() >= dispatches as usize);
    }
}
