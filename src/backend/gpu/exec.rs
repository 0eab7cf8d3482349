//! Executing a plan's steps on one wgpu device. Everything that allocates (arena, constant
//! buffer, staging buffers, pipelines, bind groups) happens in `GpuPlan::prepare`, once per
//! compiled plan; a run only writes feeds, records dispatches and reads back.

use super::context::{self, CachedPipeline, GpuContext};
use crate::backend::timing::{Clock, Recorder, Span, SpanKind};
use crate::backend::vars::{Storage, VarStore};
use crate::backend::{Backend, Created};
use crate::compile::{MemoryPlan, Plan, Source, StepKind, ValueId};
use crate::device::{Device, DeviceLimits};
use crate::{DType, Error, Result};
use futures::future::BoxFuture;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes that `numel` elements of `dtype` take on a GPU: f16 packs two to a word, padded.
fn gpu_len(dtype: DType, numel: usize) -> usize {
    (numel * dtype.gpu_size()).next_multiple_of(4)
}

/// Host words → the bytes a GPU stores: f16 packs to 2 bytes per element, padded to 4.
pub fn device_bytes(dtype: DType, words: &[u32]) -> Cow<'_, [u8]> {
    if dtype != DType::F16 {
        return Cow::Borrowed(bytemuck::cast_slice(words));
    }
    let mut out = Vec::with_capacity(gpu_len(dtype, words.len()));
    out.extend(words.iter().flat_map(|&w| (w as u16).to_ne_bytes()));
    out.resize(gpu_len(dtype, words.len()), 0);
    Cow::Owned(out)
}

/// Write `words` as a GPU stores them (see [`device_bytes`]) straight into `dst`, mapped or
/// staging memory that holds exactly their device bytes: f16 is packed while copying.
pub fn write_device_bytes(
    dtype: DType,
    words: &[u32],
    dst: wgpu::WriteOnly<'_, [u8]>,
) -> Result<()> {
    let len = gpu_len(dtype, words.len());
    if dst.len() != len {
        return Err(Error::Internal(format!(
            "{} {dtype} elements take {len} bytes on a GPU, not {}",
            words.len(),
            dst.len()
        )));
    }
    let mut dst = dst;
    if dtype != DType::F16 {
        dst.copy_from_slice(bytemuck::cast_slice(words));
        return Ok(());
    }
    let (packed, mut pad) = dst.split_at(2 * words.len());
    let (pairs, _) = packed.into_chunks::<2>();
    pairs.write_iter(words.iter().map(|&w| (w as u16).to_ne_bytes()));
    pad.fill(0);
    Ok(())
}

/// Append the host words of `numel` elements that a GPU stores as `bytes` to `out` (the
/// inverse of [`device_bytes`]): one copy, f16 widened while copying.
pub fn extend_host_words(
    dtype: DType,
    bytes: &[u8],
    numel: usize,
    out: &mut Vec<u32>,
) -> Result<()> {
    let used = numel * dtype.gpu_size();
    let bytes = bytes.get(..used).ok_or_else(|| {
        Error::Internal(format!(
            "{numel} {dtype} elements read back from {} bytes",
            bytes.len()
        ))
    })?;
    // Mapped memory is aligned, so the casts succeed; the byte-wise paths are the fallback.
    if dtype == DType::F16 {
        match bytemuck::try_cast_slice::<u8, u16>(bytes) {
            Ok(h) => out.extend(h.iter().map(|&h| u32::from(h))),
            Err(_) => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|c| u32::from(u16::from_ne_bytes([c[0], c[1]]))),
            ),
        }
    } else {
        match bytemuck::try_cast_slice::<u8, u32>(bytes) {
            Ok(w) => out.extend_from_slice(w),
            Err(_) => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])),
            ),
        }
    }
    Ok(())
}

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
        if matches!(kernel, crate::ops::Kernel::RawWgsl(_)) {
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
    dispatches: HashMap<usize, Dispatch>,
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
        i: usize,
        kernel: &crate::ops::Kernel,
        inputs: &[ValueId],
    ) -> Result<PendingDispatch> {
        let (ctx, device, step) = (&self.ctx, self.device, &plan.steps[i]);
        let adapter = ctx.adapter_kind();
        let kernel = &kernel.for_adapter(&adapter);
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
        let resources = slots
            .iter()
            .map(|&v| self.slice(plan, v))
            .collect::<Result<Vec<_>>>()?;
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
    step: usize,
    spec: context::PipelineSpec,
    windows: Vec<(wgpu::Buffer, u64, u64)>,
    grid: (u32, u32),
}

impl Backend for GpuPlan {
    fn prepare(
        plan: &Plan,
        device: Device,
        store: &mut VarStore,
        created: &mut Created,
    ) -> Result<Self> {
        let Device::Gpu(index) = device else {
            return Err(Error::Internal(format!("{device} is not a GPU")));
        };
        let ctx = context::get(index)?;
        // Pipelines are counted per plan to decide whether the disk cache needs writing.
        let pipelines_before = created.pipelines;
        let mut vars = HashMap::new();
        for (id, v) in plan.values.iter().enumerate() {
            if let (Source::Variable { name, init }, true) = (&v.source, v.device == device) {
                let slot = store.get_or_init(name, device, &v.shape, v.dtype, init, created)?;
                let Storage::Gpu(_, buf) = slot.storage else {
                    return Err(Error::Internal(format!(
                        "variable '{name}' is not on {device}"
                    )));
                };
                vars.insert(id, buf);
            }
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
            uploads: Uploads::new(&ctx, plan, device, created)?,
            queued: false,
            dispatches: HashMap::new(),
            pending: None,
            timestamps: None,
            vars,
        };
        let mut pending = Vec::new();
        for (i, step) in plan.steps.iter().enumerate() {
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

    fn dispatch(&mut self, _plan: &Plan, steps: &[usize]) -> Result<()> {
        self.encode(steps)
    }

    fn dispatch_timed(&mut self, plan: &Plan, steps: &[usize], rec: &mut Recorder) -> Result<()> {
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

impl GpuPlan {
    /// The buffer, byte offset and size holding value `v`.
    fn slice(&self, plan: &Plan, v: ValueId) -> Result<(&wgpu::Buffer, u64, u64)> {
        let root = plan.root(v);
        let size = plan.values[v].bytes();
        let mp = plan
            .memory(self.device)
            .ok_or_else(|| Error::Internal(format!("no memory plan for {}", self.device)))?;
        let missing = || Error::Internal(format!("value {v} has no storage on {}", self.device));
        match plan.values[root].source {
            Source::Constant(_) => {
                let off = *mp.constant_offsets.get(&root).ok_or_else(missing)?;
                Ok((self.constants.as_ref().ok_or_else(missing)?, off, size))
            }
            Source::Variable { .. } => Ok((&**self.vars.get(&root).ok_or_else(missing)?, 0, size)),
            _ => Ok((
                &self.arena,
                *mp.offsets.get(&root).ok_or_else(missing)?,
                size,
            )),
        }
    }

    /// Write a value's bytes (a feed or a transfer's arrival). A feed goes through the feeds'
    /// staging buffer and a copy recorded after everything recorded so far. Anything else is
    /// queued with `Queue::write_buffer`, which lands before the *next* submission, so pending
    /// commands are submitted first: they may still use this arena range for a value that is
    /// dead by now.
    pub fn write(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<()> {
        if self.stage(plan, v, words)? {
            return Ok(());
        }
        self.flush();
        let (buf, off, _) = self.slice(plan, v)?;
        let dtype = plan.values[v].dtype;
        let Some(size) = wgpu::BufferSize::new(gpu_len(dtype, words.len()) as u64) else {
            return Ok(());
        };
        let _gl = self.ctx.gl_guard();
        let mut view = self
            .ctx
            .queue
            .write_buffer_with(buf, off, size)
            .ok_or_else(|| Error::Gpu {
                device: self.device.to_string(),
                action: format!("writing {}", plan.values[v].name),
                message: "the queue refused the write".into(),
            })?;
        write_device_bytes(dtype, words, view.slice(..))?;
        self.queued = true;
        Ok(())
    }

    /// Write feed `v` into its region of the feeds' staging buffer and record the copy into
    /// the arena; `false` if `v` has no region (not a feed, or empty).
    fn stage(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<bool> {
        let Some(&at) = self.uploads.as_ref().and_then(|u| u.regions.get(&v)) else {
            return Ok(false);
        };
        self.map_uploads()?;
        let mut enc = self.pending.take().unwrap_or_else(|| {
            let _gl = self.ctx.gl_guard();
            self.ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("wgflow run"),
                })
        });
        let staged = self.stage_into(plan, v, words, at, &mut enc);
        self.pending = Some(enc);
        staged?;
        if let Some(u) = self.uploads.as_mut() {
            u.used = true;
        }
        Ok(true)
    }

    /// [`Self::stage`]'s work once the buffer is mapped: the bytes at `at`, the copy in `enc`.
    fn stage_into(
        &self,
        plan: &Plan,
        v: ValueId,
        words: &[u32],
        at: u64,
        enc: &mut wgpu::CommandEncoder,
    ) -> Result<()> {
        let (buf, off, size) = self.slice(plan, v)?;
        let uploads = self
            .uploads
            .as_ref()
            .ok_or_else(|| Error::Internal("the feeds' staging buffer vanished".into()))?;
        let _gl = self.ctx.gl_guard();
        {
            let mut view = uploads
                .buffer
                .get_mapped_range_mut(at..at + size)
                .map_err(|e| Error::Gpu {
                    device: self.device.to_string(),
                    action: format!("writing feed {}", plan.values[v].name),
                    message: e.to_string(),
                })?;
            write_device_bytes(plan.values[v].dtype, words, view.slice(..))?;
        }
        enc.copy_buffer_to_buffer(&uploads.buffer, at, buf, off, size);
        Ok(())
    }

    /// Make the feeds' staging buffer writable, waiting for its re-mapping (requested when the
    /// last run's copies out of it were submitted) if it has not finished yet.
    fn map_uploads(&mut self) -> Result<()> {
        let Some(u) = self.uploads.as_mut() else {
            return Ok(());
        };
        if matches!(u.map, UploadMap::Unmapped) {
            let _gl = self.ctx.gl_guard();
            u.map = UploadMap::Pending(request_write_map(&u.buffer));
        }
        let UploadMap::Pending(rx) = &u.map else {
            return Ok(());
        };
        let result = match rx.try_recv() {
            Ok(r) => r,
            Err(_) => {
                self.ctx.wait()?;
                // Another thread polling the device may have collected the callback and be
                // about to run it, so wait for it rather than expect it to have run.
                rx.recv_timeout(Duration::from_secs(60))
                    .map_err(|_| Error::Gpu {
                        device: self.device.to_string(),
                        action: "mapping the feeds' staging buffer".into(),
                        message: "the map callback did not run".into(),
                    })?
            }
        };
        u.map = UploadMap::Unmapped;
        result.map_err(|e| Error::Gpu {
            device: self.device.to_string(),
            action: "mapping the feeds' staging buffer".into(),
            message: e.to_string(),
        })?;
        u.map = UploadMap::Mapped;
        Ok(())
    }

    /// Submit `enc`'s commands. If they copy out of the feeds' staging buffer, it is unmapped first
    /// and its re-mapping requested right after, to be ready for the next run.
    fn submit(&mut self, enc: wgpu::CommandEncoder) {
        let _gl = self.ctx.gl_guard();
        let commands = enc.finish();
        let remap = match self.uploads.as_mut() {
            Some(u) if u.used => {
                if matches!(u.map, UploadMap::Mapped) {
                    u.buffer.unmap();
                }
                u.map = UploadMap::Unmapped;
                u.used = false;
                Some(u)
            }
            _ => None,
        };
        self.ctx.queue.submit([commands]);
        self.queued = false;
        if let Some(u) = remap {
            u.map = UploadMap::Pending(request_write_map(&u.buffer));
        }
    }

    /// Record the dispatch steps `steps` (indices into `plan.steps`) in one compute pass.
    pub fn encode(&mut self, steps: &[usize]) -> Result<()> {
        let _gl = self.ctx.gl_guard();
        let mut enc = self.pending.take().unwrap_or_else(|| {
            self.ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("wgflow run"),
                })
        });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgflow steps"),
                timestamp_writes: None,
            });
            for i in steps {
                let d = self.dispatches.get(i).ok_or_else(|| {
                    Error::Internal(format!("step {i} was not prepared on {}", self.device))
                })?;
                pass.set_pipeline(&d.pipeline.pipeline);
                pass.set_bind_group(0, &d.bind_group, &[]);
                pass.dispatch_workgroups(d.grid.0, d.grid.1, 1);
            }
        }
        self.pending = Some(enc);
        Ok(())
    }

    /// Run `steps` with one compute pass each, timestamps written at the start and end of
    /// every pass, then read the timestamps back. The spans are placed on the host's clock
    /// from when the work was submitted (the GPU cannot start earlier), so they never
    /// overlap later host-timed work.
    fn timestamped(&mut self, plan: &Plan, steps: &[usize], rec: &mut Recorder) -> Result<()> {
        self.finish(true)?;
        let needed = 2 * steps.len() as u32;
        if self.timestamps.as_ref().is_none_or(|t| t.queries < needed) {
            let on_device = plan
                .steps
                .iter()
                .filter(|s| s.device == self.device && matches!(s.kind, StepKind::Dispatch { .. }))
                .count() as u32;
            let queries = needed.max(2 * on_device).max(2);
            let bytes = u64::from(queries) * wgpu::QUERY_SIZE as u64;
            let made = self.ctx.scoped("creating timestamp queries", |d| {
                let set = d.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("wgflow timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count: queries,
                });
                let buffer = |label, usage| {
                    d.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(label),
                        size: bytes,
                        usage,
                        mapped_at_creation: false,
                    })
                };
                Timestamps {
                    set,
                    resolve: buffer(
                        "wgflow timestamp resolve",
                        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    ),
                    read: buffer(
                        "wgflow timestamp read",
                        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    ),
                    queries,
                }
            })?;
            self.timestamps = Some(made);
        }
        let ts = self
            .timestamps
            .as_ref()
            .ok_or_else(|| Error::Internal("no timestamp queries".into()))?;
        let gl = self.ctx.gl_guard();
        let t0 = Instant::now();
        let mut enc = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgflow traced run"),
            });
        for (k, i) in steps.iter().enumerate() {
            let d = self.dispatches.get(i).ok_or_else(|| {
                Error::Internal(format!("step {i} was not prepared on {}", self.device))
            })?;
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgflow traced step"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &ts.set,
                    beginning_of_pass_write_index: Some(2 * k as u32),
                    end_of_pass_write_index: Some(2 * k as u32 + 1),
                }),
            });
            pass.set_pipeline(&d.pipeline.pipeline);
            pass.set_bind_group(0, &d.bind_group, &[]);
            pass.dispatch_workgroups(d.grid.0, d.grid.1, 1);
        }
        let bytes = u64::from(needed) * wgpu::QUERY_SIZE as u64;
        enc.resolve_query_set(&ts.set, 0..needed, &ts.resolve, 0);
        enc.copy_buffer_to_buffer(&ts.resolve, 0, &ts.read, 0, bytes);
        self.ctx.queue.submit([enc.finish()]);
        let (tx, mut rx) = futures::channel::oneshot::channel();
        ts.read.map_async(wgpu::MapMode::Read, 0..bytes, move |r| {
            let _ = tx.send(r);
        });
        drop(gl);
        self.ctx.wait()?;
        let mapped = rx.try_recv().ok().flatten().ok_or_else(|| Error::Gpu {
            device: self.device.to_string(),
            action: "reading timestamps".into(),
            message: "the map callback did not run".into(),
        })?;
        mapped.map_err(|e| Error::Gpu {
            device: self.device.to_string(),
            action: "mapping the timestamp buffer".into(),
            message: e.to_string(),
        })?;
        let ticks: Vec<u64> = {
            let _gl = self.ctx.gl_guard();
            let view = ts.read.get_mapped_range(0..bytes).map_err(|e| Error::Gpu {
                device: self.device.to_string(),
                action: "viewing the timestamp buffer".into(),
                message: e.to_string(),
            })?;
            bytemuck::pod_collect_to_vec::<u8, u64>(&view)
        };
        {
            let _gl = self.ctx.gl_guard();
            ts.read.unmap();
        }
        let period = f64::from(self.ctx.queue.get_timestamp_period());
        let base = ticks.first().copied().unwrap_or(0);
        let ns = |t: u64| Duration::from_nanos((t as f64 * period) as u64);
        let submitted = t0.saturating_duration_since(rec.origin);
        for (k, &i) in steps.iter().enumerate() {
            let (begin, end) = (ticks[2 * k], ticks[2 * k + 1]);
            rec.spans.push(Span {
                kind: SpanKind::Dispatch,
                step: Some(i),
                values: Vec::new(),
                device: self.device,
                start: submitted + ns(begin.saturating_sub(base)),
                duration: ns(end.saturating_sub(begin)),
                clock: Clock::GpuTimestamp,
            });
        }
        Ok(())
    }

    /// Submit recorded commands, and queued writes, if any.
    pub fn flush(&mut self) {
        if let Some(enc) = self.pending.take() {
            self.submit(enc);
        } else if self.queued {
            let _gl = self.ctx.gl_guard();
            self.ctx.queue.submit([]);
            self.queued = false;
        }
    }

    /// Copy `values` back to the host through the staging buffer: one copy each (a value
    /// fetched twice is copied once), one submit, one map, and one copy out of the mapped range
    /// into each result's storage.
    pub async fn read(&mut self, plan: &Plan, values: &[ValueId]) -> Result<Vec<Vec<u32>>> {
        let mut enc = {
            let _gl = self.ctx.gl_guard();
            self.pending.take().unwrap_or_else(|| {
                self.ctx
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("wgflow readback"),
                    })
            })
        };
        let mut at = 0u64;
        // Per value: its byte offset in the staging buffer.
        let mut spans: Vec<u64> = Vec::with_capacity(values.len());
        let mut copied: HashMap<ValueId, u64> = HashMap::new();
        for &v in values {
            if let Some(&a) = copied.get(&v) {
                spans.push(a);
                continue;
            }
            let (buf, off, size) = self.slice(plan, v)?;
            if at + size > self.staging_size {
                return Err(Error::Internal("staging buffer too small".into()));
            }
            if size > 0 {
                let _gl = self.ctx.gl_guard();
                enc.copy_buffer_to_buffer(buf, off, &self.staging, at, size);
            }
            spans.push(at);
            copied.insert(v, at);
            at += size;
        }
        self.submit(enc);
        let (tx, rx) = futures::channel::oneshot::channel();
        let used = at.max(4);
        {
            let _gl = self.ctx.gl_guard();
            self.staging
                .map_async(wgpu::MapMode::Read, 0..used, move |r| {
                    let _ = tx.send(r);
                });
        }
        self.ctx.wait()?;
        let mapped = rx.await.map_err(|_| Error::Gpu {
            device: self.device.to_string(),
            action: "reading back".into(),
            message: "the map callback was dropped".into(),
        })?;
        mapped.map_err(|e| Error::Gpu {
            device: self.device.to_string(),
            action: "mapping the staging buffer".into(),
            message: e.to_string(),
        })?;
        let _gl = self.ctx.gl_guard();
        let out = {
            let view = self
                .staging
                .get_mapped_range(0..used)
                .map_err(|e| Error::Gpu {
                    device: self.device.to_string(),
                    action: "viewing the staging buffer".into(),
                    message: e.to_string(),
                })?;
            values
                .iter()
                .zip(&spans)
                .map(|(&v, &a)| {
                    let mut words = host_vec(plan, v)?;
                    let value = &plan.values[v];
                    let bytes = view.get(a as usize..).unwrap_or_default();
                    extend_host_words(value.dtype, bytes, value.shape.numel(), &mut words)?;
                    Ok(words)
                })
                .collect::<Result<Vec<_>>>()
        };
        self.staging.unmap();
        out
    }
}

/// Request `buffer` (MAP_WRITE) mapped for writing as soon as the GPU is done with it; the
/// callback's result arrives on the returned channel once the device is polled.
fn request_write_map(
    buffer: &wgpu::Buffer,
) -> std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    buffer.map_async(wgpu::MapMode::Write, .., move |r| {
        let _ = tx.send(r);
    });
    rx
}
