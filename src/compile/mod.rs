//! Graph → Plan. Each pass is a function in its own file that takes the previous result and
//! returns a new one: prune → place → lower → fuse → schedule → plan memory.

pub mod fuse;
pub mod lower;
pub mod memory;
pub mod place;
pub mod prune;
pub mod schedule;

pub use memory::MemoryPlan;

use crate::device::{Device, DeviceLimits};
use crate::graph::{Graph, Tensor};
use crate::id::IdVec;
use crate::ops::Kernel;
use crate::{DType, HostTensor, Result, Shape};
use std::collections::BTreeMap;

pub use crate::id::ValueId;

crate::id::typed_id!(
    /// Index of a step in [`Plan::steps`]; steps run in index order.
    StepId
);

/// Where a value's data comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Written from the feed of the placeholder with this node name at the start of a run.
    Feed(String),
    /// Baked into the plan; lives outside the arena for the plan's whole life.
    Constant(HostTensor),
    /// Produced by a step.
    Step,
    /// Shares the storage of another value (reshape).
    View(ValueId),
    /// A variable (by node name) kept by the session outside the arena, shared by every plan
    /// of the session; `init` gives its value when the session first needs it.
    Variable {
        name: String,
        init: crate::ops::Initializer,
    },
}

/// One tensor value of a plan, on one device.
#[derive(Debug, Clone)]
pub struct Value {
    pub shape: Shape,
    pub dtype: DType,
    pub device: Device,
    pub source: Source,
    /// The graph node it came from (for messages and reports).
    pub name: String,
}

impl Value {
    /// Bytes of storage on its device (see [`Device::storage_bytes`]).
    pub fn bytes(&self) -> u64 {
        self.device
            .storage_bytes(self.dtype, self.shape.numel() as u64)
    }
}

/// What a step does.
// A plan holds tens of steps, so the size of a `Dispatch` does not matter, and boxing the
// kernel would put a `Box` in every pattern that matches a kernel kind.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StepKind {
    /// Run a kernel; `inputs` are bound in order, then the output.
    Dispatch {
        kernel: Kernel,
        inputs: Vec<ValueId>,
    },
    /// Copy a value from another device onto this step's device.
    Transfer { src: ValueId },
}

/// One unit of work on one device.
#[derive(Debug, Clone)]
pub struct Step {
    pub kind: StepKind,
    pub output: ValueId,
    pub device: Device,
    /// The graph nodes this step computes (several after fusion).
    pub nodes: Vec<String>,
}

impl Step {
    pub fn inputs(&self) -> Vec<ValueId> {
        match &self.kind {
            StepKind::Dispatch { inputs, .. } => inputs.clone(),
            StepKind::Transfer { src } => vec![*src],
        }
    }
}

/// What the compiler needs to know about the session's devices.
#[derive(Debug, Clone)]
pub struct Target {
    /// Visible devices with their limits (`cpu:0` always among them).
    pub devices: Vec<(Device, DeviceLimits)>,
    /// Where unscoped nodes go.
    pub default_device: Device,
    /// Where an unscoped GPU-only op (a raw WGSL kernel) goes when the default device is
    /// `cpu:0`: the first visible GPU when the session chose `cpu:0` over software adapters
    /// ([`Device::best`]), `None` when the user chose `cpu:0` (then it is a placement error).
    pub gpu_only_default: Option<Device>,
    /// Fall back to the default device when a scope names a device that is not there.
    pub soft_placement: bool,
    /// Merge elementwise chains into single kernels.
    pub fuse: bool,
    /// Evaluate elementwise work on constants once, when compiling.
    pub fold_constants: bool,
}

impl Target {
    pub fn limits(&self, d: Device) -> Option<&DeviceLimits> {
        self.devices.iter().find(|(x, _)| *x == d).map(|(_, l)| l)
    }
}

/// A compiled graph: ordered steps over values, with a memory plan per device.
#[derive(Debug, Clone)]
pub struct Plan {
    pub values: IdVec<ValueId, Value>,
    pub steps: IdVec<StepId, Step>,
    /// Placeholder node name → the value its feed is written to.
    pub feeds: Vec<(String, ValueId)>,
    pub fetches: Vec<ValueId>,
    /// Assignments, in graph order: `(value, variable)`. When a run finishes, each `value`
    /// is copied into its `variable`'s storage.
    pub assigns: Vec<(ValueId, ValueId)>,
    /// Every kept node's name and device, in graph order.
    pub placement: Vec<(String, Device)>,
    pub memory: BTreeMap<Device, MemoryPlan>,
}

impl Plan {
    /// The values with their ids.
    pub fn values_by_id(&self) -> impl DoubleEndedIterator<Item = (ValueId, &Value)> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| (ValueId::new(i), v))
    }

    /// The steps with their ids, in run order.
    pub fn steps_by_id(&self) -> impl DoubleEndedIterator<Item = (StepId, &Step)> {
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| (StepId::new(i), s))
    }

    /// The memory plan of `device` (if anything lives there).
    pub fn memory(&self, device: Device) -> Option<&MemoryPlan> {
        self.memory.get(&device)
    }

    /// The device the node named `name` was placed on (if the plan kept it).
    pub fn device_of(&self, name: &str) -> Option<Device> {
        self.placement
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d)
    }

    /// What a run must produce: the fetches, then the assignments' new values.
    pub fn outputs(&self) -> Vec<ValueId> {
        let mut out = self.fetches.clone();
        out.extend(self.assigns.iter().map(|&(v, _)| v));
        out
    }

    /// Follow views to the value that owns the storage.
    pub fn root(&self, mut v: ValueId) -> ValueId {
        while let Source::View(of) = self.values[v].source {
            v = of;
        }
        v
    }

    /// Number of kernel dispatches per run.
    pub fn dispatch_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Dispatch { .. }))
            .count()
    }

    /// Number of cross-device transfers per run.
    pub fn transfer_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Transfer { .. }))
            .count()
    }

    /// The devices any step or value uses.
    pub fn devices(&self) -> Vec<Device> {
        let mut d: Vec<Device> = self.values.iter().map(|v| v.device).collect();
        d.sort();
        d.dedup();
        d
    }

    /// A readable listing: placement, schedule with kernels, memory.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "placement:");
        for (n, d) in &self.placement {
            let _ = writeln!(s, "  {n:<32} {d}");
        }
        let _ = writeln!(s, "schedule ({} steps):", self.steps.len());
        for (i, st) in self.steps.iter().enumerate() {
            let what = match &st.kind {
                StepKind::Dispatch { kernel, .. } => kernel.describe(),
                StepKind::Transfer { src } => format!("transfer from {}", self.values[*src].device),
            };
            let v = &self.values[st.output];
            let _ = writeln!(
                s,
                "  {i:>3} {:<6} {} -> {} {}  [{}]",
                st.device.to_string(),
                what,
                v.dtype,
                v.shape,
                st.nodes.join(", ")
            );
        }
        for (d, m) in &self.memory {
            let _ = writeln!(
                s,
                "memory {d}: peak {} B, lower bound {} B, no reuse {} B, constants {} B",
                m.peak_bytes, m.lower_bound_bytes, m.no_reuse_bytes, m.constant_bytes
            );
        }
        s
    }
}

/// Compile the part of `graph` that `fetches` need. The placeholders it reads are listed in
/// [`Plan::feeds`]; a run must feed each of them.
pub fn compile(graph: &Graph, fetches: &[Tensor], target: &Target) -> Result<Plan> {
    let start = web_time::Instant::now();
    let mut clock = PassClock::default();
    let kept = clock.time("prune", || prune::prune(graph, fetches))?;
    let placed = clock.time("place", || place::place(graph, &kept, target))?;
    let lowered = clock.time("lower", || lower::lower(graph, &placed, fetches))?;
    let lowered = if target.fold_constants {
        clock.time("fold", || fuse::fold_constants(lowered))
    } else {
        lowered
    };
    let fused = if target.fuse {
        clock.time("fuse", || fuse::fuse(lowered, target))
    } else {
        lowered
    };
    // The schedule decides which values are alive together: plan memory for each candidate
    // order and keep the lowest total peak (ties keep the earlier, default order).
    let candidates = clock.time("schedule", || schedule::candidates(fused))?;
    let mut best: Option<Plan> = None;
    for candidate in candidates {
        let planned = clock.time("memory", || memory::plan_memory(candidate, target))?;
        let peak = |p: &Plan| p.memory.values().map(|m| m.peak_bytes).sum::<u64>();
        if best.as_ref().is_none_or(|b| peak(&planned) < peak(b)) {
            best = Some(planned);
        }
    }
    let plan = best.ok_or_else(|| crate::Error::Internal("no schedule".into()))?;
    log::debug!(
        "compiled {} node(s) into {} step(s) in {:.2} ms ({})",
        kept.len(),
        plan.steps.len(),
        start.elapsed().as_secs_f64() * 1e3,
        clock.summary()
    );
    Ok(plan)
}

/// Time spent in each compile pass (summed when a pass runs more than once), for the debug
/// log: a slow compile should say which pass is slow.
#[derive(Default)]
struct PassClock {
    passes: Vec<(&'static str, std::time::Duration)>,
}

impl PassClock {
    fn time<T>(&mut self, pass: &'static str, f: impl FnOnce() -> T) -> T {
        let t = web_time::Instant::now();
        let r = f();
        let dt = t.elapsed();
        match self.passes.iter_mut().find(|(p, _)| *p == pass) {
            Some((_, d)) => *d += dt,
            None => self.passes.push((pass, dt)),
        }
        r
    }

    fn summary(&self) -> String {
        self.passes
            .iter()
            .map(|(p, d)| format!("{p} {:.2} ms", d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
