//! One wgpu `Device` + `Queue` per adapter, created on first use and shared by every session;
//! limits; error scopes around every create call; the pipeline cache keyed by WGSL text.

#[cfg(not(target_arch = "wasm32"))]
use crate::device::Device;
use crate::device::{DeviceLimits, PhysicalDevice};
use crate::{Error, Result};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

struct Registry {
    adapters: Vec<wgpu::Adapter>,
    infos: Vec<PhysicalDevice>,
    contexts: Mutex<Vec<Option<Arc<GpuContext>>>>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

#[cfg(not(target_arch = "wasm32"))]
fn rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn backend_rank(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "software",
        wgpu::DeviceType::Other => "other",
    }
}

fn limits_of(l: &wgpu::Limits, features: wgpu::Features) -> DeviceLimits {
    DeviceLimits {
        max_buffer_size: l.max_buffer_size,
        max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
        max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
        max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
        min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
        shader_f16: features.contains(wgpu::Features::SHADER_F16),
    }
}

fn registry() -> &'static Registry {
    // In a web page, WebGPU's adapter is a promise, which this synchronous registry must
    // not block on (and outside a window or worker, as in Node.js, `navigator.gpu` does not
    // exist): it lists none, and sessions run on cpu:0.
    #[cfg(target_arch = "wasm32")]
    return REGISTRY.get_or_init(|| Registry {
        adapters: Vec::new(),
        infos: Vec::new(),
        contexts: Mutex::new(Vec::new()),
    });
    #[cfg(not(target_arch = "wasm32"))]
    REGISTRY.get_or_init(|| {
        let backends = wgpu::Backends::from_env().unwrap_or(
            wgpu::Backends::VULKAN
                | wgpu::Backends::GL
                | wgpu::Backends::METAL
                | wgpu::Backends::DX12,
        );
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        desc.flags = wgpu::InstanceFlags::empty().with_env();
        let instance = wgpu::Instance::new(desc);
        let mut adapters: Vec<wgpu::Adapter> =
            resolve_native(instance.enumerate_adapters(backends))
                .into_iter()
                .filter(|a| {
                    let ok = a
                        .get_downlevel_capabilities()
                        .flags
                        .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS);
                    if !ok {
                        log::info!(
                            "skipping adapter {:?}: no compute shaders",
                            a.get_info().name
                        );
                    }
                    ok
                })
                .collect();
        adapters.sort_by_key(|a| {
            let i = a.get_info();
            (rank(i.device_type), backend_rank(i.backend), i.name.clone())
        });
        let infos = adapters
            .iter()
            .enumerate()
            .map(|(n, a)| {
                let i = a.get_info();
                PhysicalDevice {
                    device: Device::Gpu(n),
                    name: i.name.clone(),
                    backend: i.backend.to_str().to_string(),
                    device_type: type_name(i.device_type).into(),
                    driver: format!("{} {}", i.driver, i.driver_info).trim().to_string(),
                    limits: limits_of(&a.limits(), a.features()),
                }
            })
            .collect::<Vec<_>>();
        let n = adapters.len();
        Registry {
            adapters,
            infos,
            contexts: Mutex::new(vec![None; n]),
        }
    })
}

/// In a web page: ask the browser for its WebGPU adapter and a device on it, and make them
/// `gpu:0` for every session after. Returns the number of adapters (0 or 1). Must be awaited
/// before the first session or device list (which would otherwise find none); a second call
/// returns the first one's count.
#[cfg(target_arch = "wasm32")]
pub async fn init_web() -> Result<usize> {
    if let Some(reg) = REGISTRY.get() {
        return Ok(reg.adapters.len());
    }
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::BROWSER_WEBGPU;
    let instance = wgpu::Instance::new(desc);
    let Ok(adapter) = instance
        .request_adapter(&wgpu::RequestAdapterOptions::default())
        .await
    else {
        return Ok(registry().adapters.len());
    };
    let required_features = adapter.features() & wgpu::Features::SHADER_F16;
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("wgflow"),
            required_features,
            required_limits: adapter.limits(),
            ..Default::default()
        })
        .await
        .map_err(|e| Error::Gpu {
            device: "gpu:0".into(),
            action: "requesting the device".into(),
            message: e.to_string(),
        })?;
    let name = "gpu:0".to_string();
    // Error scopes are not awaited in a page (`scoped`): the first error is kept here
    // instead, and the next read-back returns it, so a failed run never looks like a result.
    let uncaptured = Arc::new(Mutex::new(None::<String>));
    {
        let first = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e| {
            log::error!("uncaptured wgpu error on gpu:0: {e}");
            let mut first = first.lock().unwrap_or_else(PoisonError::into_inner);
            first.get_or_insert_with(|| e.to_string());
        }));
    }
    let i = adapter.get_info();
    let info = PhysicalDevice {
        device: crate::device::Device::Gpu(0),
        name: format!("WebGPU {}", i.name).trim().to_string(),
        backend: i.backend.to_str().to_string(),
        device_type: match i.device_type {
            wgpu::DeviceType::Cpu => "software",
            wgpu::DeviceType::DiscreteGpu => "discrete",
            wgpu::DeviceType::IntegratedGpu => "integrated",
            _ => "other",
        }
        .into(),
        driver: format!("{} {}", i.driver, i.driver_info).trim().to_string(),
        limits: limits_of(&device.limits(), device.features()),
    };
    let ctx = Arc::new(GpuContext {
        timestamps: false,
        gl_serial: None,
        name,
        limits: limits_of(&device.limits(), device.features()),
        info: info.clone(),
        backend: i.backend,
        device_type: i.device_type,
        device,
        queue,
        pipelines: Mutex::new(HashMap::new()),
        disk_cache: None,
        uncaptured,
    });
    let reg = Registry {
        adapters: vec![adapter],
        infos: vec![info],
        contexts: Mutex::new(vec![Some(ctx)]),
    };
    // A session made before this call has already settled on no adapter.
    REGISTRY.set(reg).map_err(|_| Error::Device {
        spec: "gpu:0".into(),
        message: "init_web ran after the first session or device list".into(),
    })?;
    Ok(1)
}

/// Number of usable wgpu adapters.
pub fn adapter_count() -> usize {
    registry().adapters.len()
}

/// Descriptions of the usable adapters, in `gpu:N` order.
pub fn adapter_infos() -> Vec<PhysicalDevice> {
    registry().infos.clone()
}

/// The context of `gpu:index`, created on first use.
pub fn get(index: usize) -> Result<Arc<GpuContext>> {
    let reg = registry();
    let adapter = reg.adapters.get(index).ok_or_else(|| Error::Device {
        spec: format!("gpu:{index}"),
        message: format!("no such GPU; {} adapter(s) found", reg.adapters.len()),
    })?;
    // A panic elsewhere while this was held leaves the list intact: keep using it.
    let mut contexts = reg.contexts.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(ctx) = &contexts[index] {
        return Ok(ctx.clone());
    }
    let info = reg.infos[index].clone();
    let cache_file = pipeline_cache_file(adapter);
    let mut required_features = if cache_file.is_some() {
        wgpu::Features::PIPELINE_CACHE
    } else {
        wgpu::Features::empty()
    };
    // f16 tensors need it; kernels without f16 do not `enable` it, so asking costs nothing.
    required_features |= adapter.features() & wgpu::Features::SHADER_F16;
    // Traced runs time each dispatch with pass timestamps where the adapter has them; an
    // untraced run never writes a query, so asking costs nothing.
    required_features |= adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
    let (device, queue) = resolve_native(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("wgflow"),
        required_features,
        // Ask for everything the adapter offers: the planner reads these limits.
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| Error::Gpu {
        device: format!("gpu:{index}"),
        action: "requesting the device".into(),
        message: e.to_string(),
    })?;
    let name = format!("gpu:{index}");
    {
        let name = name.clone();
        // wgpu's default handler panics; errors we did not scope are logged instead.
        device.on_uncaptured_error(Arc::new(move |e| {
            log::error!("uncaptured wgpu error on {name}: {e}");
        }));
    }
    let disk_cache = cache_file.map(|path| {
        // A cache is an optimisation: one that cannot be read (or is implausibly large, or
        // not a regular file) is ignored.
        let data = crate::files::read_regular(&path, 1 << 30, "pipeline cache").ok();
        log::info!(
            "{name}: pipeline cache {} ({} bytes loaded)",
            path.display(),
            data.as_ref().map_or(0, Vec::len)
        );
        // SAFETY: the data was written by `PipelineCache::get_data` for an adapter with the
        // same cache key (vendor and device id); wgpu checks the header (driver version
        // included) and, with `fallback`, starts empty when it does not match.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("wgflow pipeline cache"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        DiskCache { cache, path }
    });
    let adapter_info = adapter.get_info();
    let timestamps = device.features().contains(wgpu::Features::TIMESTAMP_QUERY)
        && !std::env::var("WGFLOW_TIMING").is_ok_and(|v| v == "host");
    log::debug!(
        "{name}: traced runs use {}",
        if timestamps {
            "GPU timestamps"
        } else {
            "host timings"
        }
    );
    let ctx = Arc::new(GpuContext {
        timestamps,
        gl_serial: (adapter_info.backend == wgpu::Backend::Gl).then(|| Mutex::new(())),
        name,
        limits: limits_of(&device.limits(), device.features()),
        info,
        backend: adapter_info.backend,
        device_type: adapter_info.device_type,
        device,
        queue,
        pipelines: Mutex::new(HashMap::new()),
        disk_cache,
        uncaptured: Arc::new(Mutex::new(None)),
    });
    contexts[index] = Some(ctx.clone());
    Ok(ctx)
}

/// The on-disk pipeline cache file of an adapter, if caching is on and the adapter supports
/// it: in `$WGFLOW_CACHE_DIR`, else in `wgflow` under the platform's cache directory
/// (`dirs::cache_dir`: `$XDG_CACHE_HOME` or `$HOME/.cache` on Linux, `~/Library/Caches` on
/// macOS, `%LOCALAPPDATA%` on Windows). `WGFLOW_PIPELINE_CACHE=0` turns it off.
fn pipeline_cache_file(adapter: &wgpu::Adapter) -> Option<std::path::PathBuf> {
    if std::env::var("WGFLOW_PIPELINE_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    if !adapter.features().contains(wgpu::Features::PIPELINE_CACHE) {
        return None;
    }
    let key = wgpu::util::pipeline_cache_key(&adapter.get_info())?;
    let dir = std::env::var_os("WGFLOW_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("wgflow")))?;
    Some(dir.join(key))
}

struct DiskCache {
    cache: wgpu::PipelineCache,
    path: std::path::PathBuf,
}

/// What a compute pipeline is made from: a kernel's WGSL, its entry point and its number of
/// storage bindings; `label` names it in wgpu's objects, errors and the debug log.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub label: String,
    pub wgsl: String,
    pub entry: String,
    pub bindings: usize,
}

impl PipelineSpec {
    /// The in-memory cache key: the WGSL, plus the entry point where it is not "main" (only
    /// raw kernels have others).
    fn key(&self) -> String {
        if self.entry == "main" {
            self.wgsl.clone()
        } else {
            format!("{}\n{}", self.entry, self.wgsl)
        }
    }
}

/// A compute pipeline and its bind-group layout.
pub struct CachedPipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

/// A wgpu device and queue for one adapter.
pub struct GpuContext {
    pub name: String,
    /// What `wgflow::devices()` shows for this adapter (display strings).
    pub info: PhysicalDevice,
    /// The adapter's graphics API and type, which decisions about it are made from.
    pub backend: wgpu::Backend,
    pub device_type: wgpu::DeviceType,
    pub limits: DeviceLimits,
    /// Traced runs time dispatches with timestamp queries (the device has
    /// `TIMESTAMP_QUERY`, and `WGFLOW_TIMING=host` does not ask for host timings).
    pub timestamps: bool,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pipelines: Mutex<HashMap<String, Arc<CachedPipeline>>>,
    disk_cache: Option<DiskCache>,
    /// GL adapters only: held around every call into wgpu. wgpu-hal's GL backend guards its
    /// one GL context with a lock that *panics* after 6 s ("Could not lock adapter context"),
    /// and llvmpipe can hold it longer (a cold GLSL compile, a long dispatch): waiting here
    /// instead has no timeout.
    gl_serial: Option<Mutex<()>>,
    /// In a page: the first error no scope captured (native runs scope every call).
    uncaptured: Arc<Mutex<Option<String>>>,
}

impl GpuContext {
    /// The first error no scope captured since the last call, as [`Error::Gpu`] naming
    /// `action` (in a page, where error scopes are not awaited; always `Ok` natively).
    pub fn take_uncaptured(&self, action: &str) -> Result<()> {
        let mut first = self
            .uncaptured
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match first.take() {
            None => Ok(()),
            Some(message) => Err(Error::Gpu {
                device: self.name.clone(),
                action: action.to_string(),
                message,
            }),
        }
    }

    /// What kernel strategies this adapter gets: by its device type, unless
    /// `WGFLOW_KERNELS=software` or `WGFLOW_KERNELS=hardware` forces one family (to test or
    /// benchmark the other family's kernels on any adapter).
    pub fn adapter_kind(&self) -> crate::ops::AdapterKind {
        let software = match std::env::var("WGFLOW_KERNELS").as_deref() {
            Ok("software") => true,
            Ok("hardware") => false,
            // Lavapipe, llvmpipe and WARP report themselves as CPU devices.
            _ => self.device_type == wgpu::DeviceType::Cpu,
        };
        crate::ops::AdapterKind {
            software,
            gl: self.backend == wgpu::Backend::Gl,
        }
    }

    /// On a GL adapter, exclusive use of wgpu until the guard drops (see `gl_serial`);
    /// `None` elsewhere. Not reentrant: callers take it around leaf calls only.
    pub fn gl_guard(&self) -> Option<MutexGuard<'_, ()>> {
        self.gl_serial
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Run `f` inside validation and out-of-memory error scopes; a captured error becomes
    /// [`Error::Gpu`] naming `action`. A panic inside wgpu (a driver-level failure) becomes
    /// an error too, so one failed call cannot take the caller's thread or locks with it.
    #[cfg(target_arch = "wasm32")]
    pub fn scoped<T>(&self, action: &str, f: impl FnOnce(&wgpu::Device) -> T) -> Result<T> {
        // In a page an error scope's pop is a promise, which this synchronous call must not
        // block on: errors there reach the uncaptured-error log instead.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&self.device))).map_err(
            |panic| Error::Gpu {
                device: self.name.clone(),
                action: action.to_string(),
                message: format!("wgpu panicked: {}", panic_message(&panic)),
            },
        )
    }

    /// Run `f` inside validation and out-of-memory error scopes; a captured error becomes
    /// [`Error::Gpu`] naming `action`. A panic inside wgpu (a driver-level failure) becomes
    /// an error too, so one failed call cannot take the caller's thread or locks with it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn scoped<T>(&self, action: &str, f: impl FnOnce(&wgpu::Device) -> T) -> Result<T> {
        let _gl = self.gl_guard();
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&self.device)));
        let v = resolve_native(validation.pop());
        let o = resolve_native(oom.pop());
        let value = value.map_err(|panic| Error::Gpu {
            device: self.name.clone(),
            action: action.to_string(),
            message: format!("wgpu panicked: {}", panic_message(&panic)),
        })?;
        match v.or(o) {
            None => Ok(value),
            Some(e) => Err(Error::Gpu {
                device: self.name.clone(),
                action: action.to_string(),
                message: e.to_string(),
            }),
        }
    }

    /// The pipeline for `wgsl` (entry point `entry`) with `bindings` storage bindings, from
    /// the cache or created now. Returns whether it was created.
    pub fn pipeline_at(
        &self,
        label: &str,
        wgsl: &str,
        entry: &str,
        bindings: usize,
    ) -> Result<(Arc<CachedPipeline>, bool)> {
        let spec = PipelineSpec {
            label: label.to_string(),
            wgsl: wgsl.to_string(),
            entry: entry.to_string(),
            bindings,
        };
        let mut got = self.pipelines_for(std::slice::from_ref(&spec))?;
        got.pop()
            .ok_or_else(|| Error::Internal(format!("no pipeline made for {label}")))
    }

    /// The pipelines for `specs`, in order, each with whether this call created it: found in
    /// the in-memory cache, or created now, several at once on threads where the backend
    /// allows it (not GL: its one context serialises every call, see `gl_serial`). The
    /// driver compiles a shader when its pipeline is created, so a plan's kernels compile in
    /// parallel. Each pipeline's creation time (or its cache hit) goes to the debug log.
    pub fn pipelines_for(
        &self,
        specs: &[PipelineSpec],
    ) -> Result<Vec<(Arc<CachedPipeline>, bool)>> {
        // Entries are inserted whole, so a panic while this was held cannot leave a bad one.
        // Held while compiling, so two threads never compile the same pipeline.
        let mut cache = self
            .pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let keys: Vec<String> = specs.iter().map(PipelineSpec::key).collect();
        let mut misses: Vec<usize> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            if cache.contains_key(key) {
                log::debug!(
                    "{}: pipeline {}: in-memory cache hit",
                    self.name,
                    specs[i].label
                );
            } else if let Some(&j) = misses.iter().find(|&&j| keys[j] == *key) {
                log::debug!(
                    "{}: pipeline {}: same as {}",
                    self.name,
                    specs[i].label,
                    specs[j].label
                );
            } else {
                misses.push(i);
            }
        }
        let start = web_time::Instant::now();
        let threads = if self.gl_serial.is_some() {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(misses.len())
        };
        let made: Vec<Result<CachedPipeline>> = if threads <= 1 {
            misses
                .iter()
                .map(|&i| self.create_pipeline(&specs[i]))
                .collect()
        } else {
            // Workers take the next uncompiled pipeline until none is left.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let slots: Vec<Mutex<Option<Result<CachedPipeline>>>> =
                misses.iter().map(|_| Mutex::new(None)).collect();
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|| loop {
                        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = misses.get(n) else { break };
                        let p = self.create_pipeline(&specs[i]);
                        *slots[n].lock().unwrap_or_else(PoisonError::into_inner) = Some(p);
                    });
                }
            });
            slots
                .into_iter()
                .zip(&misses)
                .map(|(slot, &i)| {
                    slot.into_inner()
                        .unwrap_or_else(PoisonError::into_inner)
                        .unwrap_or_else(|| {
                            Err(Error::Internal(format!(
                                "pipeline {} was not created",
                                specs[i].label
                            )))
                        })
                })
                .collect()
        };
        if !misses.is_empty() {
            log::debug!(
                "{}: {} pipeline(s) created in {:.2} ms on {} thread(s)",
                self.name,
                misses.len(),
                start.elapsed().as_secs_f64() * 1e3,
                threads.max(1)
            );
        }
        // Keep every pipeline that was made, even when another failed.
        let mut first_error = None;
        for (p, &i) in made.into_iter().zip(&misses) {
            match p {
                Ok(p) => {
                    cache.insert(keys[i].clone(), Arc::new(p));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        keys.iter()
            .enumerate()
            .map(|(i, key)| {
                let p = cache.get(key).cloned().ok_or_else(|| {
                    Error::Internal(format!("pipeline {} missing", specs[i].label))
                })?;
                Ok((p, misses.contains(&i)))
            })
            .collect()
    }

    /// Create one pipeline (naga translation and the driver's compile), timed in the debug
    /// log.
    fn create_pipeline(&self, spec: &PipelineSpec) -> Result<CachedPipeline> {
        let label = spec.label.as_str();
        let compile_start = web_time::Instant::now();
        let created = self.scoped(&format!("creating pipeline {label}"), |device| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(spec.wgsl.as_str().into()),
            });
            let entries: Vec<wgpu::BindGroupLayoutEntry> = (0..spec.bindings as u32)
                .map(|b| wgpu::BindGroupLayoutEntry {
                    binding: b,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only: false },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                })
                .collect();
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries: &entries,
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(&spec.entry),
                compilation_options: Default::default(),
                cache: self.disk_cache.as_ref().map(|c| &c.cache),
            });
            CachedPipeline { pipeline, layout }
        })?;
        log::debug!(
            "{}: pipeline {label}: not in the in-memory cache, created in {:.2} ms",
            self.name,
            compile_start.elapsed().as_secs_f64() * 1e3
        );
        Ok(created)
    }

    /// Write the driver's pipeline cache to disk (after new pipelines were created), so the
    /// next process compiles them faster. Failures only log: the cache is an optimisation.
    pub fn persist_pipeline_cache(&self) {
        let Some(dc) = &self.disk_cache else { return };
        let data = {
            let _gl = self.gl_guard();
            dc.cache.get_data()
        };
        let Some(data) = data else {
            return;
        };
        // Atomic: processes sharing the cache directory each write a whole file.
        let written = dc
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| crate::files::write_atomic(&dc.path, &data));
        match written {
            Ok(()) => log::debug!("{}: pipeline cache saved ({} bytes)", self.name, data.len()),
            Err(e) => log::warn!(
                "{}: could not save the pipeline cache to {}: {e}",
                self.name,
                dc.path.display()
            ),
        }
    }

    /// Block until all submitted work is done.
    pub fn wait(&self) -> Result<()> {
        let _gl = self.gl_guard();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| Error::Gpu {
                device: self.name.clone(),
                action: "waiting for the queue".into(),
                message: e.to_string(),
            })
    }
}

/// The text of a caught panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Drive a wgpu future to completion on this thread. On native backends wgpu's futures
/// (adapter and device requests, error-scope pops) are ready when first polled.
///
/// `pollster` rather than `futures::executor::block_on`: this runs while another executor may
/// be driving the caller (inside `Session::run_async`, itself under `futures`' `block_on` in
/// `Session::run`), and `futures`' executor panics when entered twice on one thread;
/// `pollster` has no such guard and parks the thread instead of spinning.
pub(crate) fn resolve_native<F: Future>(f: F) -> F::Output {
    pollster::block_on(f)
}
