//! The session's variables: one storage per variable, on the device its plans place it,
//! outside every plan's arena and shared by all of them. A plan's backend borrows the storage
//! when it is prepared (GPU bind groups hold the buffer), reads it during runs, and copies
//! assignments into it when a run finishes.

use super::gpu::bytes::{extend_host_words, write_device_bytes};
use super::gpu::context::{self, GpuContext};
use super::{Created, Storage};
use crate::device::Device;
use crate::ops::Initializer;
use crate::{DType, Error, HostTensor, Result, Shape};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// One variable.
#[derive(Clone)]
pub struct Slot {
    pub device: Device,
    pub shape: Shape,
    pub dtype: DType,
    pub storage: Storage,
}

impl Slot {
    /// Bytes of the value on its device (f16 packed two to a word on GPUs, padded to 4).
    pub fn bytes(&self) -> u64 {
        self.device
            .storage_bytes(self.dtype, self.shape.numel() as u64)
    }
}

/// Every variable of a session, by node name.
#[derive(Default, Clone)]
pub struct VarStore {
    slots: HashMap<String, Slot>,
    /// One read-back buffer per GPU for [`VarStore::read`], the size of the largest variable
    /// read there so far: reading many variables (a checkpoint) or one repeatedly neither
    /// allocates nor faults in a fresh staging buffer each time.
    readback: Arc<Mutex<BTreeMap<Device, wgpu::Buffer>>>,
}

impl VarStore {
    /// The variable's storage, creating and initializing it on `device` the first time. A
    /// variable found on another device is an internal error: placement puts a variable on
    /// the same device in every plan.
    pub fn get_or_init(
        &mut self,
        name: &str,
        device: Device,
        shape: &Shape,
        dtype: DType,
        init: &Initializer,
        created: &mut Created,
    ) -> Result<Slot> {
        if let Some(slot) = self.slots.get(name) {
            if slot.device != device || &slot.shape != shape || slot.dtype != dtype {
                return Err(Error::Internal(format!(
                    "variable '{name}' lives on {} as {} {}, but a plan wants it on {device} as {dtype} {shape}",
                    slot.device, slot.dtype, slot.shape
                )));
            }
            return Ok(slot.clone());
        }
        let slot = match init {
            Initializer::Value(value) => self.create(name, device, value, created)?,
            _ => create_initialized(name, device, shape, dtype, init, created)?,
        };
        self.slots.insert(name.to_string(), slot.clone());
        Ok(slot)
    }

    /// Whether the variable has storage yet.
    pub fn contains(&self, name: &str) -> bool {
        self.slots.contains_key(name)
    }

    /// The variable's slot, if it has storage.
    pub fn slot(&self, name: &str) -> Option<&Slot> {
        self.slots.get(name)
    }

    /// Names of the variables with storage, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.slots.keys().cloned().collect();
        v.sort();
        v
    }

    fn create(
        &self,
        name: &str,
        device: Device,
        value: &HostTensor,
        created: &mut Created,
    ) -> Result<Slot> {
        let storage = match device {
            Device::Cpu => {
                let mut words = cpu_words(name, value.shape(), value.dtype())?;
                words.extend_from_slice(value.words());
                Storage::Cpu(Arc::new(RwLock::new(words)))
            }
            Device::Gpu(index) => {
                let ctx = context::get(index)?;
                let buf = gpu_buffer(&ctx, name, device, value.shape(), value.dtype(), created)?;
                write_gpu(&ctx, device, name, &buf, value)?;
                Storage::Gpu(ctx, Arc::new(buf))
            }
        };
        Ok(Slot {
            device,
            shape: value.shape().clone(),
            dtype: value.dtype(),
            storage,
        })
    }

    /// Overwrite several variables at once, all or nothing: the storage of every variable
    /// that has none is created first (the step that can run out of device memory), and only
    /// when all of it exists is any value written.
    pub fn write_all(
        &mut self,
        values: &[(&str, Device, &HostTensor)],
        created: &mut Created,
    ) -> Result<()> {
        for &(name, _, value) in values {
            if let Some(slot) = self.slots.get(name) {
                check_value(name, slot, value)?;
            }
        }
        let mut fresh = Vec::new();
        for &(name, device, value) in values {
            if !self.slots.contains_key(name) {
                fresh.push((name, self.create(name, device, value, created)?));
            }
        }
        for &(name, _, value) in values {
            if let Some(slot) = self.slots.get(name) {
                overwrite(name, slot, value)?;
            }
        }
        for (name, slot) in fresh {
            self.slots.insert(name.to_string(), slot);
        }
        Ok(())
    }

    /// The variable's current value, or `None` if it has no storage yet.
    pub fn read(&self, name: &str) -> Result<Option<HostTensor>> {
        let Some(slot) = self.slots.get(name) else {
            return Ok(None);
        };
        let numel = slot.shape.numel();
        let mut words = crate::host::fresh_vec(numel).ok_or_else(|| Error::Alloc {
            node: name.to_string(),
            device: "host".into(),
            what: format!("a copy of variable {} {}", slot.dtype, slot.shape),
            bytes: numel as u64 * 4,
        })?;
        match &slot.storage {
            Storage::Cpu(w) => {
                words.extend_from_slice(&w.read().unwrap_or_else(PoisonError::into_inner))
            }
            Storage::Gpu(ctx, buf) => {
                let mut cache = self.readback.lock().unwrap_or_else(PoisonError::into_inner);
                read_buffer(ctx, slot, buf, &mut cache, &mut words)?
            }
        }
        HostTensor::from_words(slot.shape.clone(), slot.dtype, words).map(Some)
    }
}

/// That `value` has variable `name`'s shape and dtype.
fn check_value(name: &str, slot: &Slot, value: &HostTensor) -> Result<()> {
    if slot.shape != *value.shape() || slot.dtype != value.dtype() {
        return Err(Error::Feed {
            kind: if slot.dtype != value.dtype() {
                crate::FeedKind::DType
            } else {
                crate::FeedKind::Shape
            },
            name: name.to_string(),
            message: format!(
                "the variable is {} {}, the value {} {}",
                slot.dtype,
                slot.shape,
                value.dtype(),
                value.shape()
            ),
        });
    }
    Ok(())
}

/// Copy `value` (checked by [`check_value`]) into an existing variable's storage.
fn overwrite(name: &str, slot: &Slot, value: &HostTensor) -> Result<()> {
    match &slot.storage {
        Storage::Cpu(words) => words
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .copy_from_slice(value.words()),
        Storage::Gpu(ctx, buf) => {
            write_gpu(ctx, slot.device, name, buf, value)?;
            ctx.queue.submit([]);
        }
    }
    Ok(())
}

/// Elements of an initial value made at a time on the host (4 MiB of words): a variable of
/// any size is initialized without a host copy of its whole value.
const INIT_PIECE: usize = 1 << 20;

/// A variable's memory on `cpu:0`, allocated fallibly.
fn cpu_words(name: &str, shape: &Shape, dtype: DType) -> Result<Vec<u32>> {
    let n = shape.numel();
    let mut words = Vec::new();
    words.try_reserve_exact(n).map_err(|_| Error::Alloc {
        node: name.to_string(),
        device: Device::Cpu.to_string(),
        what: format!("variable {dtype} {shape}"),
        bytes: n as u64 * 4,
    })?;
    Ok(words)
}

/// A variable's GPU buffer (zeroed, as wgpu creates every buffer), checked against the
/// device's `max_buffer_size` before it is asked for.
fn gpu_buffer(
    ctx: &GpuContext,
    name: &str,
    device: Device,
    shape: &Shape,
    dtype: DType,
    created: &mut Created,
) -> Result<wgpu::Buffer> {
    let size = device.storage_bytes(dtype, shape.numel() as u64).max(4);
    if size > ctx.limits.max_buffer_size {
        return Err(Error::Limit {
            node: name.to_string(),
            device: device.to_string(),
            what: format!("variable {dtype} {shape}"),
            bytes: size,
            limit_name: "max_buffer_size",
            limit: ctx.limits.max_buffer_size,
        });
    }
    let buf = ctx.scoped(&format!("allocating variable '{name}'"), |d| {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: Some(name),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    })?;
    created.buffers += 1;
    Ok(buf)
}

/// A variable's storage filled from its initializer in pieces of [`INIT_PIECE`] elements: the
/// device's limits and memory are checked before any value is made, and no host buffer of
/// the whole value exists (on `cpu:0` the pieces are drawn in parallel straight into the
/// variable's memory).
fn create_initialized(
    name: &str,
    device: Device,
    shape: &Shape,
    dtype: DType,
    init: &Initializer,
    created: &mut Created,
) -> Result<Slot> {
    use rayon::prelude::*;
    let n = shape.numel();
    let storage = match device {
        Device::Cpu => {
            let mut words = cpu_words(name, shape, dtype)?;
            words.resize(n, 0);
            words
                .par_chunks_mut(INIT_PIECE)
                .enumerate()
                .for_each(|(k, piece)| init.fill(shape, dtype, k * INIT_PIECE, piece));
            Storage::Cpu(Arc::new(RwLock::new(words)))
        }
        Device::Gpu(index) => {
            let ctx = context::get(index)?;
            let buf = gpu_buffer(&ctx, name, device, shape, dtype, created)?;
            // wgpu zeroes new buffers, so zeros need no writes.
            if !matches!(init, Initializer::Zeros) {
                let mut piece = Vec::new();
                piece
                    .try_reserve_exact(INIT_PIECE.min(n))
                    .map_err(|_| Error::Alloc {
                        node: name.to_string(),
                        device: "host".into(),
                        what: "a piece of a variable's initial value".into(),
                        bytes: INIT_PIECE.min(n) as u64 * 4,
                    })?;
                piece.resize(INIT_PIECE.min(n), 0);
                for (k, start) in (0..n).step_by(INIT_PIECE).enumerate() {
                    let piece = &mut piece[..INIT_PIECE.min(n - start)];
                    init.fill(shape, dtype, start, piece);
                    write_gpu_words(&ctx, device, name, &buf, start, dtype, piece)?;
                    ctx.queue.submit([]);
                    // Staged writes hold host memory until the device has taken them.
                    if k % 64 == 63 {
                        ctx.wait()?;
                    }
                }
            }
            Storage::Gpu(ctx, Arc::new(buf))
        }
    };
    Ok(Slot {
        device,
        shape: shape.clone(),
        dtype,
        storage,
    })
}

/// Write `value` into variable `name`'s GPU buffer: one copy into wgpu's staging memory (f16
/// packed while copying), landing before the next submission.
fn write_gpu(
    ctx: &GpuContext,
    device: Device,
    name: &str,
    buf: &wgpu::Buffer,
    value: &HostTensor,
) -> Result<()> {
    write_gpu_words(ctx, device, name, buf, 0, value.dtype(), value.words())
}

/// Write `words` (host words of `dtype` elements) into a GPU buffer from element `start` on
/// (a multiple of 2, so that f16 pairs stay whole).
fn write_gpu_words(
    ctx: &GpuContext,
    device: Device,
    name: &str,
    buf: &wgpu::Buffer,
    start: usize,
    dtype: DType,
    words: &[u32],
) -> Result<()> {
    let size = device.storage_bytes(dtype, words.len() as u64);
    let Some(size) = wgpu::BufferSize::new(size) else {
        return Ok(());
    };
    let offset = device.storage_bytes(dtype, start as u64);
    let _gl = ctx.gl_guard();
    let mut view = ctx
        .queue
        .write_buffer_with(buf, offset, size)
        .ok_or_else(|| Error::Gpu {
            device: device.to_string(),
            action: format!("writing variable '{name}'"),
            message: "the queue refused the write".into(),
        })?;
    write_device_bytes(dtype, words, view.slice(..))
}

/// Copy a whole variable buffer back through the device's read-back buffer in `cache`
/// (grown to the variable's size if smaller), appending its words to `out`.
fn read_buffer(
    ctx: &GpuContext,
    slot: &Slot,
    buf: &wgpu::Buffer,
    cache: &mut BTreeMap<Device, wgpu::Buffer>,
    out: &mut Vec<u32>,
) -> Result<()> {
    let size = slot.bytes().max(4);
    let gpu_err = |action: &str, message: String| Error::Gpu {
        device: slot.device.to_string(),
        action: action.into(),
        message,
    };
    let staging = match cache.get(&slot.device) {
        Some(b) if b.size() >= size => b.clone(),
        _ => {
            // Drop the smaller one first, so the two never coexist.
            cache.remove(&slot.device);
            let b = ctx.scoped("allocating the variables' read-back buffer", |d| {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wgflow variable read"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?;
            cache.insert(slot.device, b.clone());
            b
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let _gl = ctx.gl_guard();
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgflow variable read"),
            });
        enc.copy_buffer_to_buffer(buf, 0, &staging, 0, size);
        ctx.queue.submit([enc.finish()]);
        staging.map_async(wgpu::MapMode::Read, 0..size, move |r| {
            let _ = tx.send(r);
        });
    }
    ctx.wait()?;
    // Another thread polling the same device may have collected the callback and be about to
    // run it, so wait for it rather than expecting it to have run already.
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .map_err(|_| gpu_err("reading a variable", "the map callback did not run".into()))?
        .map_err(|e| gpu_err("mapping a variable's read-back buffer", e.to_string()))?;
    let _gl = ctx.gl_guard();
    let copied = staging
        .get_mapped_range(0..size)
        .map_err(|e| gpu_err("viewing a variable's read-back buffer", e.to_string()))
        .and_then(|view| extend_host_words(slot.dtype, &view, slot.shape.numel(), out));
    staging.unmap();
    copied
}
