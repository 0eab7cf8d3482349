//! What a traced run records: one [`Span`] per upload, dispatch, transfer and read-back,
//! with where its duration came from. A run that is not traced never creates a
//! [`Recorder`], so the steady-state path is unchanged; `crate::trace` turns the spans into
//! run metadata, Chrome trace events and per-op tables.

use crate::compile::{StepId, ValueId};
use crate::device::Device;
use std::time::Duration;
use web_time::Instant;

/// What a span timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A feed written to its device.
    Upload,
    /// One `Dispatch` step of the plan.
    Dispatch,
    /// One `Transfer` step: read back from the source device and written to the target.
    Transfer,
    /// Fetched values read back to the host (one span per device).
    Download,
}

/// Where a duration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// GPU timestamp queries written around the step's own compute pass.
    GpuTimestamp,
    /// The host clock around work submitted on its own and waited for (CPU steps, GPUs
    /// without `TIMESTAMP_QUERY`, uploads, transfers and read-backs).
    Host,
}

impl Clock {
    /// `"gpu-timestamp"` or `"host"`.
    pub fn label(self) -> &'static str {
        match self {
            Clock::GpuTimestamp => "gpu-timestamp",
            Clock::Host => "host",
        }
    }
}

/// One timed piece of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub kind: SpanKind,
    /// Index into `plan.steps` (dispatches and transfers).
    pub step: Option<StepId>,
    /// The value written (uploads) or the values read (downloads).
    pub values: Vec<ValueId>,
    /// The device that did the work (the target device of a transfer).
    pub device: Device,
    /// Start, from the beginning of the run.
    pub start: Duration,
    pub duration: Duration,
    pub clock: Clock,
}

/// Collects the spans of one traced run.
#[derive(Debug)]
pub struct Recorder {
    /// When the run began; spans start relative to it.
    pub origin: Instant,
    pub spans: Vec<Span>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            origin: Instant::now(),
            spans: Vec::new(),
        }
    }
}

impl Recorder {
    /// Record host-timed work that began at `t0` and ended now.
    pub fn host(
        &mut self,
        kind: SpanKind,
        step: Option<StepId>,
        values: Vec<ValueId>,
        device: Device,
        t0: Instant,
    ) {
        let now = Instant::now();
        self.spans.push(Span {
            kind,
            step,
            values,
            device,
            start: t0.saturating_duration_since(self.origin),
            duration: now.saturating_duration_since(t0),
            clock: Clock::Host,
        });
    }
}
