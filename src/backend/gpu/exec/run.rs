//! A prepared plan's run phase: writing feeds, recording and submitting dispatches, and
//! reading values back.

use super::*;

impl GpuPlan {
    /// The buffer, byte offset and size holding value `v`.
    pub(super) fn slice(&self, plan: &Plan, v: ValueId) -> Result<(&wgpu::Buffer, u64, u64)> {
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
    pub(super) fn stage(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<bool> {
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
    pub(super) fn stage_into(
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
    pub(super) fn map_uploads(&mut self) -> Result<()> {
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
    pub(super) fn submit(&mut self, enc: wgpu::CommandEncoder) {
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
    pub fn encode(&mut self, steps: &[StepId]) -> Result<()> {
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
        if let Err(e) = self.ctx.take_uncaptured("running the plan") {
            self.staging.unmap();
            return Err(e);
        }
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
pub(super) fn request_write_map(
    buffer: &wgpu::Buffer,
) -> std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    buffer.map_async(wgpu::MapMode::Write, .., move |r| {
        let _ = tx.send(r);
    });
    rx
}
