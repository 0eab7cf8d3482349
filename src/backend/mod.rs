//! Backends: machinery only, no op knowledge. A backend prepares a plan's resources on its
//! device once (arena, constants, pipelines, bind groups) and then executes its steps per
//! run. Every device kind implements [`Backend`]; this module walks a plan's steps and hands
//! each to the backend of its device, so a new kind of device is one folder here plus one
//! [`Device`] variant (and one arm in [`prepare`]).
//!
//! Steps run in schedule order. Consecutive dispatches on one device go to its backend in
//! one call (one compute pass of one encoder on a GPU); a transfer or a read-back submits
//! what is pending on the devices it touches.

pub mod cpu;
pub mod devices;
pub mod gpu;
pub mod timing;
pub mod vars;

pub use devices::{devices, gpu_count, visible_devices, visible_gpus_from_env};
#[cfg(target_arch = "wasm32")]
pub use gpu::context::init_web;

use crate::compile::{Plan, Source, StepId, StepKind, ValueId};
use crate::device::Device;
use crate::{Error, HostTensor, Result};
use futures::future::BoxFuture;
use gpu::context::GpuContext;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use timing::{Recorder, SpanKind};
pub use vars::VarStore;
use web_time::Instant;

/// Where one variable's value lives (the session's [`VarStore`] owns it; a prepared plan binds
/// it).
#[derive(Clone)]
pub enum Storage {
    /// `cpu:0`: the words, locked for reading by kernels and for writing by assignments.
    Cpu(Arc<RwLock<Vec<u32>>>),
    /// A GPU buffer of the variable's bytes.
    Gpu(Arc<GpuContext>, Arc<wgpu::Buffer>),
}

/// The storage of a plan's variables on one device, by value: what [`Backend::prepare`] binds.
pub type VariableStorage = HashMap<ValueId, Storage>;

/// What preparing a plan created on the devices; the session adds it to its counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Created {
    pub buffers: u64,
    pub pipelines: u64,
    pub bind_groups: u64,
    /// Host bytes cpu:0's kernels prepared from plan constants (packed weights).
    pub prepared_bytes: u64,
}

impl std::ops::AddAssign for Created {
    fn add_assign(&mut self, other: Created) {
        self.buffers += other.buffers;
        self.pipelines += other.pipelines;
        self.bind_groups += other.bind_groups;
        self.prepared_bytes += other.prepared_bytes;
    }
}

/// One plan's resources on one device, and how its steps run there.
pub trait Backend: Send {
    /// Allocate what `plan` needs on `device` (which the plan uses), counting what it
    /// creates in `created` as it goes, so a prepare that fails partway still reports the
    /// buffers and pipelines it made (a session's counters stay true). `vars` holds the
    /// storage of the plan's variables on `device`.
    fn prepare(
        plan: &Plan,
        device: Device,
        vars: &VariableStorage,
        created: &mut Created,
    ) -> Result<Self>
    where
        Self: Sized;

    /// Called at the start of every run (the CPU allocates its arena on the first).
    fn begin_run(&mut self, plan: &Plan) -> Result<()>;

    /// Write value `v`'s words: a feed, or a transfer's arrival.
    fn upload(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<()>;

    /// Run the dispatch steps `steps` (consecutive indices into `plan.steps`, all on this
    /// device), in order.
    fn dispatch(&mut self, plan: &Plan, steps: &[StepId]) -> Result<()>;

    /// [`Backend::dispatch`] for a traced run: the steps run (and are waited for) here, and
    /// each gets a [`timing::Span`] of kind `Dispatch` in `rec`, timed by the device's
    /// timestamps where it has them and by the host clock otherwise.
    fn dispatch_timed(&mut self, plan: &Plan, steps: &[StepId], rec: &mut Recorder) -> Result<()>;

    /// Copy `values` back to the host, one vector of words each, in order.
    fn download<'a>(
        &'a mut self,
        plan: &'a Plan,
        values: &'a [ValueId],
    ) -> BoxFuture<'a, Result<Vec<Vec<u32>>>>;

    /// Copy each assignment `(value, variable)` whose variable lives on this device into the
    /// variable's storage, in order, after everything recorded so far.
    fn assign(&mut self, plan: &Plan, assigns: &[(ValueId, ValueId)]) -> Result<()>;

    /// Submit what is recorded; with `wait`, block until the device has finished it.
    fn finish(&mut self, wait: bool) -> Result<()>;
}

/// A plan's resources on every device it uses.
pub struct Prepared {
    backends: BTreeMap<Device, Box<dyn Backend>>,
}

impl Prepared {
    fn on(&mut self, device: Device) -> Result<&mut (dyn Backend + 'static)> {
        self.backends
            .get_mut(&device)
            .map(|b| &mut **b)
            .ok_or_else(|| Error::Internal(format!("{device} was not prepared")))
    }
}

/// Allocate everything a plan needs on every device it uses; its variables live in `vars`.
/// What was created is counted in `created`, also when a device fails partway.
pub fn prepare(plan: &Plan, vars: &mut VarStore, created: &mut Created) -> Result<Prepared> {
    let mut backends = BTreeMap::new();
    for d in plan.devices() {
        let storage = variables_on(plan, d, vars, created)?;
        let backend: Box<dyn Backend> = match d {
            Device::Cpu => Box::new(cpu::CpuPlan::prepare(plan, d, &storage, created)?),
            Device::Gpu(_) => Box::new(gpu::exec::GpuPlan::prepare(plan, d, &storage, created)?),
        };
        backends.insert(d, backend);
    }
    Ok(Prepared { backends })
}

/// The storage of `plan`'s variables on `device`, each created and initialized in `vars` the
/// first time a plan needs it.
fn variables_on(
    plan: &Plan,
    device: Device,
    vars: &mut VarStore,
    created: &mut Created,
) -> Result<VariableStorage> {
    let mut out = HashMap::new();
    for (id, v) in plan.values_by_id() {
        if let (Source::Variable { name, init }, true) = (&v.source, v.device == device) {
            let slot = vars.get_or_init(name, device, &v.shape, v.dtype, init, created)?;
            out.insert(id, slot.storage);
        }
    }
    Ok(out)
}

/// Read one value back from its device.
async fn download_one(plan: &Plan, p: &mut Prepared, v: ValueId) -> Result<Vec<u32>> {
    let mut out = p.on(plan.values[v].device)?.download(plan, &[v]).await?;
    out.pop()
        .ok_or_else(|| Error::Internal("empty read-back".into()))
}

/// Land the run's assignments, after its fetches were read. (Lowering copied any value that
/// is itself a variable, so the copies' order does not matter.)
fn assign(plan: &Plan, p: &mut Prepared) -> Result<()> {
    let mut by_device: BTreeMap<Device, Vec<(ValueId, ValueId)>> = BTreeMap::new();
    for &(v, var) in &plan.assigns {
        by_device
            .entry(plan.values[var].device)
            .or_default()
            .push((v, var));
    }
    for (d, list) in by_device {
        p.on(d)?.assign(plan, &list)?;
    }
    Ok(())
}

/// Run a prepared plan. `feeds` maps placeholder names to checked host tensors. With
/// `read_back` false the fetches are computed, the devices waited on, and nothing is copied
/// back (TensorFlow's target nodes).
pub async fn execute(
    plan: &Plan,
    p: &mut Prepared,
    feeds: &HashMap<String, &HostTensor>,
    read_back: bool,
) -> Result<Vec<HostTensor>> {
    execute_traced(plan, p, feeds, read_back, None).await
}

/// [`execute`], recording a [`timing::Span`] for every upload, step and read-back into
/// `trace` when it is given. A traced run waits for each piece of work before timing the
/// next, so it is slower than an untraced one; with `trace` `None` the run is exactly
/// [`execute`]'s (no extra submits, waits or allocations).
pub async fn execute_traced(
    plan: &Plan,
    p: &mut Prepared,
    feeds: &HashMap<String, &HostTensor>,
    read_back: bool,
    mut trace: Option<&mut Recorder>,
) -> Result<Vec<HostTensor>> {
    for b in p.backends.values_mut() {
        b.begin_run(plan)?;
    }
    for (name, v) in &plan.feeds {
        let t = feeds.get(name).ok_or_else(|| Error::Feed {
            kind: crate::FeedKind::Missing,
            name: name.clone(),
            message: "was not fed".into(),
        })?;
        let device = plan.values[*v].device;
        let t0 = trace.is_some().then(Instant::now);
        let backend = p.on(device)?;
        backend.upload(plan, *v, t.words())?;
        if let Some(rec) = trace.as_deref_mut() {
            backend.finish(true)?;
            rec.host(
                SpanKind::Upload,
                None,
                vec![*v],
                device,
                t0.unwrap_or_else(Instant::now),
            );
        }
    }
    // Runs of consecutive dispatches on one device go out together: positions, not ids.
    let steps = plan.steps.as_slice();
    let mut i = 0;
    while i < steps.len() {
        let step = &steps[i];
        match &step.kind {
            StepKind::Dispatch { .. } => {
                let end = (i..steps.len())
                    .find(|&j| {
                        steps[j].device != step.device
                            || !matches!(steps[j].kind, StepKind::Dispatch { .. })
                    })
                    .unwrap_or(steps.len());
                let run: Vec<StepId> = (i..end).map(StepId::new).collect();
                match trace.as_deref_mut() {
                    Some(rec) => p.on(step.device)?.dispatch_timed(plan, &run, rec)?,
                    None => p.on(step.device)?.dispatch(plan, &run)?,
                }
                i = end;
            }
            StepKind::Transfer { src } => {
                let t0 = trace.is_some().then(Instant::now);
                let words = download_one(plan, p, *src).await?;
                let target = p.on(plan.values[step.output].device)?;
                target.upload(plan, step.output, &words)?;
                if let Some(rec) = trace.as_deref_mut() {
                    target.finish(true)?;
                    rec.host(
                        SpanKind::Transfer,
                        Some(StepId::new(i)),
                        vec![*src],
                        step.device,
                        t0.unwrap_or_else(Instant::now),
                    );
                }
                i += 1;
            }
        }
    }
    if !read_back {
        assign(plan, p)?;
        for b in p.backends.values_mut() {
            b.finish(true)?;
        }
        return Ok(Vec::new());
    }
    // Fetches: constants and feeds come straight from the host; device values are read back
    // with one batch per device.
    let mut results: Vec<Option<HostTensor>> = vec![None; plan.fetches.len()];
    let mut per_device: BTreeMap<Device, Vec<(usize, ValueId)>> = BTreeMap::new();
    for (k, &f) in plan.fetches.iter().enumerate() {
        let v = &plan.values[f];
        let host = match &plan.values[plan.root(f)].source {
            Source::Constant(t) => Some(t.words()),
            Source::Feed(name) => feeds.get(name).map(|t| t.words()),
            _ => None,
        };
        match host {
            Some(words) => {
                let words = crate::host::copy_of(words).ok_or_else(|| Error::Alloc {
                    node: v.name.clone(),
                    device: "host".into(),
                    what: format!("the fetched {} {}", v.dtype, v.shape),
                    bytes: words.len() as u64 * 4,
                })?;
                results[k] = Some(HostTensor::from_words(v.shape.clone(), v.dtype, words)?)
            }
            None => per_device.entry(v.device).or_default().push((k, f)),
        }
    }
    for (d, list) in per_device {
        let ids: Vec<ValueId> = list.iter().map(|&(_, f)| f).collect();
        let t0 = trace.is_some().then(Instant::now);
        let data = p.on(d)?.download(plan, &ids).await?;
        if let Some(rec) = trace.as_deref_mut() {
            rec.host(
                SpanKind::Download,
                None,
                ids.clone(),
                d,
                t0.unwrap_or_else(Instant::now),
            );
        }
        for ((k, f), words) in list.into_iter().zip(data) {
            let v = &plan.values[f];
            results[k] = Some(HostTensor::from_words(v.shape.clone(), v.dtype, words)?);
        }
    }
    assign(plan, p)?;
    for b in p.backends.values_mut() {
        b.finish(false)?;
    }
    results
        .into_iter()
        .map(|r| r.ok_or_else(|| Error::Internal("a fetch produced no value".into())))
        .collect()
}
