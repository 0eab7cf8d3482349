//! The session's variables: one storage per variable, on the device its plans place it,
//! outside every plan's arena and shared by all of them. A plan's backend borrows the storage
//! when it is prepared (GPU bind groups hold the buffer), reads it during runs, and copies
//! assignments into it when a run finishes.

use super::gpu::context::{self, GpuContext};
use super::gpu::exec::{extend_host_words, write_device_bytes};
use super::Created;
use crate::device::Device;
use crate::ops::Initializer;
use crate::{DType, Error, HostTensor, Result, Shape};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// Where one variable's value lives.
#[derive(Clone)]
pub enum Storage {
    /// `cpu:0`: the words, locked for reading by kernels and for writing by assignments.
    Cpu(Arc<RwLock<Vec<u32>>>),
    /// A GPU buffer of the variable's bytes.
    Gpu(Arc<GpuContext>, Arc<wgpu::Buffer>),
}

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
        let value = init.value(shape, dtype)?;
        let slot = self.create(name, device, &value, created)?;
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
                let mut words = Vec::new();
                words
                    .try_reserve_exact(value.words().len())
                    .map_err(|_| Error::Alloc {
                        node: name.to_string(),
                        device: device.to_string(),
                        what: format!("variable {} {}", value.dtype(), value.shape()),
                        bytes: value.words().len() as u64 * 4,
                    })?;
                words.extend_from_slice(value.words());
                Storage::Cpu(Arc::new(RwLock::new(words)))
            }
            Device::Gpu(index) => {
                let ctx = context::get(index)?;
                let size = device
                    .storage_bytes(value.dtype(), value.len() as u64)
                    .max(4);
                if size > ctx.limits.max_buffer_size {
                    return Err(Error::Limit {
                        node: name.to_string(),
                        device: device.to_string(),
                        what: format!("variable {} {}", value.dtype(), value.shape()),
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

    /// Overwrite the variable's value (shape and dtype must match), creating its storage on
    /// `device` if it has none yet.
    pub fn write(
        &mut self,
        name: &str,
        device: Device,
        value: &HostTensor,
        created: &mut Created,
    ) -> Result<()> {
        let Some(slot) = self.slots.get(name) else {
            let slot = self.create(name, device, value, created)?;
            self.slots.insert(name.to_string(), slot);
            return Ok(());
        };
        if slot.shape != *value.shape() || slot.dtype != value.dtype() {
            return Err(Error::Feed {
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
        match &slot.storage {
            Storage::Cpu(words) => words
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .copy_from_slice(value.words()),
            Storage::Gpu(ctx, buf) => {
                write_gpu(ctx, device, name, buf, value)?;
                ctx.queue.submit([]);
            }
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

/// Write `value` into variable `name`'s GPU buffer: one copy into wgpu's staging memory (f16
/// packed while copying), landing before the next submission.
fn write_gpu(
    ctx: &GpuContext,
    device: Device,
    name: &str,
    buf: &wgpu::Buffer,
    value: &HostTensor,
) -> Result<()> {
    let size = device.storage_bytes(value.dtype(), value.len() as u64);
    let Some(size) = wgpu::BufferSize::new(size) else {
        return Ok(());
    };
    let _gl = ctx.gl_guard();
    let mut view = ctx
        .queue
        .write_buffer_with(buf, 0, size)
        .ok_or_else(|| Error::Gpu {
            device: device.to_string(),
            action: format!("writing variable '{name}'"),
            message: "the queue refused the write".into(),
        })?;
    write_device_bytes(value.dtype(), value.words(), view.slice(..))
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
