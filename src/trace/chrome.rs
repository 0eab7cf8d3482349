//! Chrome trace-event JSON (open in <https://ui.perfetto.dev> or `chrome://tracing`): one
//! track per device plus one for the host, a complete event per step, flow arrows for
//! cross-device transfers, and a counter of arena bytes in use.

use super::run::{RunMetadata, TraceEvent};
use crate::backend::timing::SpanKind;
use crate::compile::Plan;
use crate::device::Device;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The host's track (uploads and read-backs); devices follow from 1.
const HOST_TID: usize = 0;
const PID: u32 = 1;

fn micros(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e3
}

/// Bytes of `device`'s arena in use while step `i` runs: values whose lifetime covers it,
/// an output written in place over its input counted once.
pub fn arena_bytes_at(plan: &Plan, device: Device, i: usize) -> u64 {
    let Some(mp) = plan.memory(device) else {
        return 0;
    };
    mp.lifetimes
        .iter()
        .filter(|(v, &(first, last))| {
            let (first, last) = (first.index(), last.index());
            first <= i && i <= last && !(first == i && mp.in_place.contains_key(v))
        })
        .map(|(&v, _)| plan.values[v].bytes())
        .sum()
}

impl RunMetadata {
    /// The run as a Chrome trace-event JSON object (`traceEvents`, `displayTimeUnit`).
    pub fn chrome_trace(&self) -> Value {
        let devices = self.plan.devices();
        let tid = |d: Device| 1 + devices.iter().position(|&x| x == d).unwrap_or(0);
        let mut events: Vec<Value> = Vec::new();
        events.push(
            json!({"name": "process_name", "ph": "M", "pid": PID, "tid": HOST_TID,
            "ts": 0, "args": {"name": "wgflow run"}}),
        );
        events.push(
            json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": HOST_TID,
            "ts": 0, "args": {"name": "host"}}),
        );
        for &d in &devices {
            events.push(
                json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid(d),
                "ts": 0, "args": {"name": d.to_string()}}),
            );
        }
        let mut timed: Vec<(f64, Value)> = Vec::new();
        for (n, e) in self.events.iter().enumerate() {
            let ts = micros(e.start);
            let track = match e.kind {
                SpanKind::Upload | SpanKind::Download => HOST_TID,
                SpanKind::Dispatch | SpanKind::Transfer => tid(e.device),
            };
            timed.push((ts, complete(e, ts, track)));
            if let (SpanKind::Transfer, Some(from)) = (e.kind, e.from) {
                // The transfer shows on both devices' tracks, joined by a flow arrow.
                timed.push((ts, complete(e, ts, tid(from))));
                timed.push((
                    ts,
                    json!({"name": e.name, "cat": "transfer", "ph": "s",
                    "id": n, "pid": PID, "tid": tid(from), "ts": ts}),
                ));
                timed.push((
                    ts,
                    json!({"name": e.name, "cat": "transfer", "ph": "f",
                    "bp": "e", "id": n, "pid": PID, "tid": track, "ts": ts}),
                ));
            }
            if let Some(i) = e.step {
                let args: Map<String, Value> = devices
                    .iter()
                    .filter(|d| self.plan.memory(**d).is_some())
                    .map(|&d| {
                        (
                            d.to_string(),
                            json!(arena_bytes_at(&self.plan, d, i.index())),
                        )
                    })
                    .collect();
                timed.push((
                    ts,
                    json!({"name": "arena bytes in use", "ph": "C", "pid": PID,
                    "tid": HOST_TID, "ts": ts, "args": args}),
                ));
            }
        }
        timed.sort_by(|a, b| a.0.total_cmp(&b.0));
        events.extend(timed.into_iter().map(|(_, v)| v));
        json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {
                "wall_us": micros(self.wall),
                "devices": devices.iter().map(Device::to_string).collect::<Vec<_>>(),
            },
        })
    }

    /// [`RunMetadata::chrome_trace`] as text.
    pub fn chrome_trace_json(&self) -> String {
        self.chrome_trace().to_string()
    }
}

fn complete(e: &TraceEvent, ts: f64, tid: usize) -> Value {
    let kind = match e.kind {
        SpanKind::Upload => "upload",
        SpanKind::Dispatch => "dispatch",
        SpanKind::Transfer => "transfer",
        SpanKind::Download => "download",
    };
    json!({
        "name": e.name,
        "cat": kind,
        "ph": "X",
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": micros(e.duration),
        "args": {
            "step": e.step.map(crate::compile::StepId::index),
            "kernel": e.kernel,
            "nodes": e.nodes,
            "device": e.device.to_string(),
            "workgroups": e.workgroups.map(|(x, y)| [x, y]),
            "workgroup_size": e.workgroup_size,
            "invocations": e.invocations,
            "bytes_read": e.bytes_read,
            "bytes_written": e.bytes_written,
            "flops": e.flops,
            "timing": e.clock.label(),
        },
    })
}
