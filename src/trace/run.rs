//! Run metadata: what a traced run did, step by step, with the plan's facts (kernel, fused
//! nodes, dispatch size, bytes moved) beside each measured duration.

use crate::backend::gpu::context;
use crate::backend::timing::{Clock, Recorder, SpanKind};
use crate::compile::{Plan, StepId, StepKind, ValueId};
use crate::device::Device;
use crate::ops::Kernel;
use std::sync::Arc;
use std::time::Duration;

/// What to record while running ([`crate::Session::run_with`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Time every upload, step, transfer and read-back. A traced run submits and waits for
    /// each step on its own, so it is slower than an untraced one; with `trace` off a run
    /// takes exactly the untraced path.
    pub trace: bool,
}

/// One timed piece of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub kind: SpanKind,
    /// Index into `plan.steps` (dispatches and transfers).
    pub step: Option<StepId>,
    /// The fused graph nodes joined by `+` (dispatches), or what moved (`upload x`, ...).
    pub name: String,
    /// The graph nodes this event computes or moves.
    pub nodes: Vec<String>,
    /// The kernel as its device runs it ([`Kernel::describe`]); `None` for data movement.
    pub kernel: Option<String>,
    /// The kind of kernel (`matmul`, `elementwise`, ...; [`kernel_kind`]); for data movement
    /// `upload`, `transfer` or `download`.
    pub kind_name: &'static str,
    /// The device that did the work (a transfer's target).
    pub device: Device,
    /// A transfer's source device.
    pub from: Option<Device>,
    /// Workgroup grid `(x, y)` on a GPU; `None` on `cpu:0` and for data movement.
    pub workgroups: Option<(u32, u32)>,
    pub workgroup_size: Option<u32>,
    /// Kernel invocations (elements of work on `cpu:0`).
    pub invocations: Option<u64>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Floating-point operations, where the kernel kind has a count ([`kernel_flops`]).
    pub flops: Option<u64>,
    /// Start from the beginning of the run.
    pub start: Duration,
    pub duration: Duration,
    pub clock: Clock,
}

/// What a run did: returned by [`crate::Session::run_with`].
#[derive(Debug, Clone)]
pub struct RunMetadata {
    /// The plan that ran.
    pub plan: Arc<Plan>,
    /// Host time around the whole run.
    pub wall: Duration,
    /// Every upload, step, transfer and read-back in order; empty when the run was not traced.
    pub events: Vec<TraceEvent>,
}

impl RunMetadata {
    /// Build the metadata of a run of `plan` from what `rec` recorded.
    pub fn from_recorder(plan: Arc<Plan>, wall: Duration, rec: Option<Recorder>) -> RunMetadata {
        let events = rec
            .map(|r| r.spans.iter().map(|s| event(&plan, s)).collect())
            .unwrap_or_default();
        RunMetadata { plan, wall, events }
    }

    /// The dispatch events only.
    pub fn dispatches(&self) -> impl Iterator<Item = &TraceEvent> {
        self.events.iter().filter(|e| e.kind == SpanKind::Dispatch)
    }

    /// Sum of the dispatch durations.
    pub fn kernel_time(&self) -> Duration {
        self.dispatches().map(|e| e.duration).sum()
    }
}

fn bytes(plan: &Plan, values: &[ValueId]) -> u64 {
    values.iter().map(|&v| plan.values[v].bytes()).sum()
}

fn names(plan: &Plan, values: &[ValueId]) -> Vec<String> {
    values
        .iter()
        .map(|&v| plan.values[v].name.clone())
        .collect()
}

fn event(plan: &Plan, s: &crate::backend::timing::Span) -> TraceEvent {
    let mut e = TraceEvent {
        kind: s.kind,
        step: s.step,
        name: String::new(),
        nodes: Vec::new(),
        kernel: None,
        kind_name: match s.kind {
            SpanKind::Upload => "upload",
            SpanKind::Transfer => "transfer",
            SpanKind::Download => "download",
            SpanKind::Dispatch => "dispatch",
        },
        device: s.device,
        from: None,
        workgroups: None,
        workgroup_size: None,
        invocations: None,
        bytes_read: 0,
        bytes_written: 0,
        flops: None,
        start: s.start,
        duration: s.duration,
        clock: s.clock,
    };
    match (s.kind, s.step.map(|i| &plan.steps[i])) {
        (SpanKind::Dispatch, Some(step)) => {
            e.nodes = step.nodes.clone();
            e.name = step.nodes.join("+");
            e.bytes_written = plan.values[step.output].bytes();
            if let StepKind::Dispatch { kernel, inputs } = &step.kind {
                e.bytes_read = bytes(plan, inputs);
                let kernel = as_run(kernel, step.device);
                e.kernel = Some(kernel.describe());
                e.kind_name = kernel_kind(&kernel);
                e.invocations = Some(kernel.invocations());
                e.flops = kernel_flops(&kernel, plan.values[step.output].shape.numel() as u64);
                if let Device::Gpu(i) = step.device {
                    e.workgroup_size = Some(kernel.workgroup_size());
                    e.workgroups = context::get(i).ok().and_then(|c| {
                        kernel.workgroups(c.limits.max_compute_workgroups_per_dimension)
                    });
                }
            }
        }
        (SpanKind::Transfer, Some(step)) => {
            let src = step.inputs();
            e.nodes = step.nodes.clone();
            e.name = format!("transfer {}", names(plan, &src).join(","));
            e.from = src.first().map(|&v| plan.values[v].device);
            e.bytes_read = bytes(plan, &src);
            e.bytes_written = plan.values[step.output].bytes();
        }
        (SpanKind::Upload, _) => {
            e.nodes = names(plan, &s.values);
            e.name = format!("upload {}", e.nodes.join(","));
            e.bytes_written = bytes(plan, &s.values);
        }
        _ => {
            e.nodes = names(plan, &s.values);
            e.name = format!("download {}", e.nodes.join(","));
            e.bytes_read = bytes(plan, &s.values);
        }
    }
    e
}

/// The kernel as `device` runs it: GPUs choose strategies per adapter (matmul blocking).
fn as_run(kernel: &Kernel, device: Device) -> Kernel {
    match device {
        Device::Gpu(i) => match context::get(i) {
            Ok(c) => kernel.for_adapter(&c.adapter_kind()),
            Err(_) => kernel.clone(),
        },
        Device::Cpu => kernel.clone(),
    }
}

/// A short name of the kernel's kind, for grouping in tables.
pub fn kernel_kind(kernel: &Kernel) -> &'static str {
    kernel.as_dyn().kind()
}

/// Floating-point operations of one dispatch of `kernel` writing `out_elements` elements:
/// matmul `2·M·N·K`, convolution `2·outputs·(C/groups)·KH·KW`, elementwise one per output
/// element, reductions and scans one per input element; `None` for kernels that only move data
/// (and pooling, raw kernels).
pub fn kernel_flops(kernel: &Kernel, out_elements: u64) -> Option<u64> {
    kernel.as_dyn().flops(out_elements)
}
