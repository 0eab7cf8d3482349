//! Executing a plan's steps on one wgpu device. Everything that allocates (arena, constant
//! buffer, staging buffers, pipelines, bind groups) happens in `GpuPlan::prepare`, once per
//! compiled plan; a run only writes feeds, records dispatches and reads back.

use super::context::{self, CachedPipeline, GpuContext};
use crate::backend::timing::{Clock, Recorder, Span, SpanKind};
use crate::backend::{Backend, Created};
use crate::backend::{Storage, VariableStorage};
use crate::compile::{MemoryPlan, Plan, Source, StepId, StepKind, ValueId};
use crate::device::{Device, DeviceLimits};
use crate::{Error, Result};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use web_time::Instant;

mod run;
mod timestamps;

use super::bytes::{device_bytes, extend_host_words, gpu_len, write_device_bytes};

/// A fresh vector for `numel` host words of value `v`, reserved fallibly.
fn host_vec(plan: &Plan, v: ValueId) -> Result<Vec<u32>> {
    let value = &plan.values[v];
    let numel = value.shape.numel();
    crate::host::fresh_vec(numel).ok_or_else(|| Error::Alloc {
        node: value.name.clone(),
        device: "host".into(),
        what: format!("the fetched {} {}", value.dtype, value.shape),
        bytes: numel as u64 * 4,
    })
}

/// The feeds' staging buffer: one region per placeholder fed on this device, written by the
/// host while mapped and copied into the arena by the run's own commands. It is re-mapped as
/// soon as those copies are submitted, so between runs it waits mapped: a feed costs one copy
/// into memory that is already faulted in, where `Queue::write_buffer` would allocate (and
/// fault in) a fresh staging buffer of the feed's size on every run.
struct Uploads {
    buffer: wgpu::Buffer,
    regions: HashMap<ValueId, u64>,
    map: UploadMap,
    /// Whether commands recorded since the last submission copy from the buffer.
    used: bool,
}

enum UploadMap {
    Mapped,
    /// Re-mapping: the callback sends its result here.
    Pending(std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>),
    Unmapped,
}

impl Uploads {
    /// The staging buffer for `plan`'s feeds on `device`, mapped; `None` without feeds there.
    fn new(
        ctx: &GpuContext,
        plan: &Plan,
        device: Device,
        created: &mut Created,
    ) -> Result<Option<Uploads>> {
        let mut regions = HashMap::new();
        let mut size = 0u64;
        for &(_, v) in &plan.feeds {
            let bytes = plan.values[v].bytes();
            if plan.values[v].device == device && bytes > 0 && !regions.contains_key(&v) {
                regions.insert(v, size);
                size = (size + bytes).next_multiple_of(wgpu::MAP_ALIGNMENT);
            }
        }
        if regions.is_empty() {
            return Ok(None);
        }
        let buffer = ctx.scoped("allocating the feeds' staging buffer", |d| {
            d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgflow feeds"),
                size,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            })
        })?;
        created.buffers += 1;
        Ok(Some(Uploads {
            buffer,
            regions,
            map: UploadMap::Mapped,
            used: false,
        }))
    }
}

struct Dispatch {
    pipeline: Arc<CachedPipeline>,
    bind_group: wgpu::BindGroup,
    grid: (u32, u32),
}

/// `(buffer, byte offset, byte size)` of one binding.
type Window<'a> = (&'a wgpu::Buffer, u64, u64);

/// The kernel's WGSL and the `(buffer, offset, size)` of each of its bindings, in binding
/// order. A tensor over `max_storage_buffer_binding_size` is bound as several windows (see
/// [`super::split`]); raw WGSL kernels bind each tensor whole, so one over the limit is an
/// error.
fn windowed<'a>(
    kernel: &crate::ops::Kernel,
    resources: &[Window<'a>],
    limits: &DeviceLimits,
    alignment: u64,
    node: &str,
    device: Device,
) -> Result<(String, Vec<Window<'a>>)> {
    use super::split::{binding_decl, element_bytes, split_bindings, Split};
    let wgsl = kernel.wgsl();
    let max = limits.max_storage_buffer_binding_size;
    let mut windows: Vec<Window> = resources.to_vec();
    let mut splits = Vec::new();
    for (b, &(buf, off, size)) in resources.iter().enumerate() {
        if size <= max {
            continue;
        }
        let too_big = || Error::Limit {
            node: node.to_string(),
            device: device.to_string(),
            what: format!("binding {b} of a {}", kernel.describe()),
            bytes: size,
            limit_name: "max_storage_buffer_binding_size",
            limit: max,
        };
        if !kernel.as_dyn().binding_windows() {
            return Err(too_big());
        }
        let elem = binding_decl(&wgsl, b)
            .and_then(|(_, t)| element_bytes(&t))
            .ok_or_else(too_big)?;
        // Windows start on the offset alignment and hold whole vec4s.
        let step = lcm(alignment.max(16), elem);
        let window = max / step * step;
        if window == 0 {
            return Err(too_big());
        }
        let count = size.div_ceil(window) as usize;
        windows[b].2 = window;
        splits.push(Split {
            binding: b,
            window_elems: window / elem,
            windows: count,
            first_extra: windows.len(),
        });
        for w in 1..count as u64 {
            windows.push((buf, off + w * window, window.min(size - w * window)));
        }
    }
    if splits.is_empty() {
        return Ok((wgsl, windows));
    }
    if windows.len() > limits.max_storage_buffers_per_shader_stage as usize {
        return Err(Error::Shader {
            kernel: format!("{node} [{}]", kernel.describe()),
            message: format!(
                "its tensors over max_storage_buffer_binding_size = {max} bytes need {} storage bindings in all, more than this device's max_storage_buffers_per_shader_stage = {}",
                windows.len(),
                limits.max_storage_buffers_per_shader_stage
            ),
        });
    }
    Ok((split_bindings(&wgsl, &splits)?, windows))
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// One plan's resources on one GPU.
pub struct GpuPlan {
    pub ctx: Arc<GpuContext>,
    device: Device,
    arena: wgpu::Buffer,
    constants: Option<wgpu::Buffer>,
    staging: wgpu::Buffer,
    staging_size: u64,
    uploads: Option<Uploads>,
    /// Whether a `Queue::write_buffer` waits for the next submission.
    queued: bool,
    dispatches: HashMap<StepId, Dispatch>,
    pending: Option<wgpu::CommandEncoder>,
    /// Made by the first traced run on an adapter with timestamp queries; never otherwise.
    timestamps: Option<Timestamps>,
    /// The plan's variables on this device, by value: the session's buffers, shared.
    vars: HashMap<ValueId, Arc<wgpu::Buffer>>,
}

/// Two timestamp queries per dispatch step on this device, where they are resolved, and a
/// mappable copy.
struct Timestamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    queries: u32,
}

impl GpuPlan {
    /// The arena, the constant buffer (filled) and the staging buffer of a plan on `device`.
    fn allocate(
        ctx: &Arc<GpuContext>,
        plan: &Plan,
        device: Device,
        mp: &MemoryPlan,
        created: &mut Created,
    ) -> Result<(wgpu::Buffer, Option<wgpu::Buffer>, wgpu::Buffer, u64)> {
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let arena = ctx.scoped("allocating the arena", |d| {
            d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgflow arena"),
                size: mp.peak_bytes.max(4),
                usage,
                mapped_at_creation: false,
            })
        })?;
        created.buffers += 1;
        let constants = if mp.constant_bytes > 0 {
            let buf = ctx.scoped("allocating constants", |d| {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wgflow constants"),
                    size: mp.constant_bytes,
                    usage,
                    mapped_at_creation: false,
                })
            })?;
            created.buffers += 1;
            let _gl = ctx.gl_guard();
            for (&v, &off) in &mp.constant_offsets {
                if let Source::Constant(t) = &plan.values[v].source {
                    ctx.queue
                        .write_buffer(&buf, off, &device_bytes(t.dtype(), t.words()));
                }
            }
            Some(buf)
        } else {
            None
        };
        // One staging buffer serves the fetches (packed) and any transfer out of this device.
        let fetch_bytes: u64 = plan
            .fetches
            .iter()
            .filter(|&&f| plan.values[f].device == device)
            .map(|&f| plan.values[f].bytes())
            .sum();
        let transfer_bytes = plan
            .steps
            .iter()
            .filter_map(|s| match s.kind {
                StepKind::Transfer { src } if plan.values[src].device == device => {
                    Some(plan.values[src].bytes())
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let staging_size = fetch_bytes.max(transfer_bytes).max(4);
        let staging = ctx.scoped("allocating the staging buffer", |d| {
            d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgflow staging"),
                size: staging_size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        created.buffers += 1;

        Ok((arena, constants, staging, staging_size))
    }

    /// What dispatch step `i` needs: its pipeline's spec, grid and binding windows.
    fn pending_dispatch(
        &self,
        plan: &Plan,
        i: StepId,
        kernel: &crate::ops::Kernel,
        inputs: &[ValueId],
    ) -> Result<PendingDispatch> {
        let (ctx, device, step) = (&self.ctx, self.device, &plan.steps[i]);
        let adapter = ctx.adapter_kind();
        let mut kernel = kernel.for_adapter(&adapter);
        let label = format!("{} [{}]", step.nodes.join("+"), kernel.describe());
        // Lowering splits long loops; this is the net for shapes it cannot split (a
        // pooling window or one channel's convolution window past the limit).
        match kernel.loop_iterations() {
            Some(iterations) if adapter.software && iterations > crate::ops::LOOP_LIMIT => {
                return Err(Error::LoopLimit {
                    node: step.nodes.join("+"),
                    device: device.to_string(),
                    kernel: kernel.describe(),
                    iterations,
                    limit: crate::ops::LOOP_LIMIT,
                });
            }
            _ => {}
        }
        let mut slots: Vec<ValueId> = inputs.to_vec();
        slots.push(step.output);
        let mut resources = slots
            .iter()
            .map(|&v| self.slice(plan, v))
            .collect::<Result<Vec<_>>>()?;
        // Two inputs bound to one range (a value and a view of it) are aliasing writable
        // bindings, which WebGPU refuses: the kernel reads one binding for both where it can.
        'merge: loop {
            // The last resource is the output.
            for j in 1..resources.len() - 1 {
                for i in 0..j {
                    let (a, b) = (&resources[i], &resources[j]);
                    if a.0 == b.0 && a.1 == b.1 && a.2 == b.2 {
                        if let Some(k) = kernel.merge_input(i, j) {
                            kernel = k;
                            resources.remove(j);
                            continue 'merge;
                        }
                    }
                }
            }
            break;
        }
        let kernel = &kernel;
        let (wgsl, windows) = windowed(
            kernel,
            &resources,
            &ctx.limits,
            plan.memory(device).map_or(4, |m| m.alignment),
            &step.nodes.join("+"),
            device,
        )?;
        let grid = kernel.grid_on(
            &step.nodes.join("+"),
            device,
            ctx.limits.max_compute_workgroups_per_dimension,
        )?;
        Ok(PendingDispatch {
            step: i,
            spec: context::PipelineSpec {
                label,
                wgsl,
                entry: kernel.entry_point().to_string(),
                bindings: windows.len(),
            },
            windows: windows
                .into_iter()
                .map(|(buf, off, size)| (buf.clone(), off, size))
                .collect(),
            grid,
        })
    }

    /// The bind group of a pending dispatch, now that its pipeline exists.
    fn bind_dispatch(
        &mut self,
        d: PendingDispatch,
        pipeline: Arc<CachedPipeline>,
        created: &mut Created,
    ) -> Result<()> {
        let label = &d.spec.label;
        let entries: Vec<wgpu::BindGroupEntry> = d
            .windows
            .iter()
            .enumerate()
            .map(|(b, (buf, off, size))| wgpu::BindGroupEntry {
                binding: b as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: buf,
                    offset: *off,
                    size: wgpu::BufferSize::new(*size),
                }),
            })
            .collect();
        let bind_group =
            self.ctx
                .scoped(&format!("creating the bind group of {label}"), |dev| {
                    dev.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(label),
                        layout: &pipeline.layout,
                        entries: &entries,
                    })
                })?;
        created.bind_groups += 1;
        self.dispatches.insert(
            d.step,
            Dispatch {
                pipeline,
                bind_group,
                grid: d.grid,
            },
        );
        Ok(())
    }
}

/// A dispatch step between preparation and binding: its pipeline is created together with
/// the plan's others (concurrently where the backend allows it).
struct PendingDispatch {
    step: StepId,
    spec: context::PipelineSpec,
    windows: Vec<(wgpu::Buffer, u64, u64)>,
    grid: (u32, u32),
}

impl Backend for GpuPlan {
    fn prepare(
        plan: &Plan,
        device: Device,
        storage: &VariableStorage,
        created: &mut Created,
    ) -> Result<Self> {
        let Device::Gpu(index) = device else {
            return Err(Error::Internal(format!("{device} is not a GPU")));
        };
        let ctx = context::get(index)?;
        // Pipelines are counted per plan to decide whether the disk cache needs writing.
        let pipelines_before = created.pipelines;
        let mut vars = HashMap::new();
        for (&id, s) in storage {
            let Storage::Gpu(_, buf) = s else {
                let name = &plan.values[id].name;
                return Err(Error::Internal(format!(
                    "variable '{name}' is not on {device}"
                )));
            };
            vars.insert(id, buf.clone());
        }
        let empty = MemoryPlan::default();
        let mp = plan.memory(device).unwrap_or(&empty);
        let (arena, constants, staging, staging_size) =
            GpuPlan::allocate(&ctx, plan, device, mp, created)?;
        let mut gp = GpuPlan {
            ctx: ctx.clone(),
            device,
            arena,
            constants,
            staging,
            staging_size,
            // In a page a buffer's mapping completes only when the page's event loop runs,
            // so feeds go through the queue's writes instead of a mapped staging buffer.
            uploads: if cfg!(target_arch = "wasm32") {
                None
            } else {
                Uploads::new(&ctx, plan, device, created)?
            },
            queued: false,
            dispatches: HashMap::new(),
            pending: None,
            timestamps: None,
            vars,
        };
        let mut pending = Vec::new();
        for (i, step) in plan.steps.iter_enumerated() {
            let StepKind::Dispatch { kernel, inputs } = &step.kind else {
                continue;
            };
            if step.device == device {
                pending.push(gp.pending_dispatch(plan, i, kernel, inputs)?);
            }
        }
        let specs: Vec<context::PipelineSpec> = pending.iter().map(|d| d.spec.clone()).collect();
        let pipelines = ctx.pipelines_for(&specs)?;
        for (d, (pipeline, new)) in pending.into_iter().zip(pipelines) {
            created.pipelines += u64::from(new);
            gp.bind_dispatch(d, pipeline, created)?;
        }
        if created.pipelines > pipelines_before {
            ctx.persist_pipeline_cache();
        }
        Ok(gp)
    }

    fn begin_run(&mut self, _plan: &Plan) -> Result<()> {
        Ok(())
    }

    fn upload(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<()> {
        self.write(plan, v, words)
    }

    fn dispatch(&mut self, _plan: &Plan, steps: &[StepId]) -> Result<()> {
        self.encode(steps)
    }

    fn dispatch_timed(&mut self, plan: &Plan, steps: &[StepId], rec: &mut Recorder) -> Result<()> {
        if !self.ctx.timestamps {
            // One submit and one wait per step, timed by the host.
            for &i in steps {
                let t0 = Instant::now();
                self.encode(&[i])?;
                self.finish(true)?;
                rec.host(SpanKind::Dispatch, Some(i), Vec::new(), self.device, t0);
            }
            return Ok(());
        }
        self.timestamped(plan, steps, rec)
    }

    fn download<'a>(
        &'a mut self,
        plan: &'a Plan,
        values: &'a [ValueId],
    ) -> BoxFuture<'a, Result<Vec<Vec<u32>>>> {
        Box::pin(self.read(plan, values))
    }

    fn assign(&mut self, plan: &Plan, assigns: &[(ValueId, ValueId)]) -> Result<()> {
        let _gl = self.ctx.gl_guard();
        let mut enc = self.pending.take().unwrap_or_else(|| {
            self.ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("wgflow assignments"),
                })
        });
        for &(v, var) in assigns {
            let target = self.vars.get(&var).ok_or_else(|| {
                Error::Internal(format!(
                    "variable value {var} has no storage on {}",
                    self.device
                ))
            })?;
            let (buf, off, size) = self.slice(plan, v)?;
            // An assignment of the variable's own value changes nothing.
            if std::ptr::eq(buf, &**target) || size == 0 {
                continue;
            }
            enc.copy_buffer_to_buffer(buf, off, target, 0, size);
        }
        self.pending = Some(enc);
        Ok(())
    }

    fn finish(&mut self, wait: bool) -> Result<()> {
        self.flush();
        if wait {
            self.ctx.wait()?;
        }
        Ok(())
    }
}
