//! Timed runs: one compute pass per step between GPU timestamp queries, read back and placed
//! on the host's clock.

use super::*;

impl GpuPlan {
    /// Run `steps` with one compute pass each, timestamps written at the start and end of
    /// every pass, then read the timestamps back. The spans are placed on the host's clock
    /// from when the work was submitted (the GPU cannot start earlier), so they never
    /// overlap later host-timed work.
    pub(super) fn timestamped(
        &mut self,
        plan: &Plan,
        steps: &[StepId],
        rec: &mut Recorder,
    ) -> Result<()> {
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
        let (tx, rx) = std::sync::mpsc::channel();
        ts.read.map_async(wgpu::MapMode::Read, 0..bytes, move |r| {
            let _ = tx.send(r);
        });
        drop(gl);
        self.ctx.wait()?;
        // Another thread polling the same device may have collected the callback and be
        // about to run it, so wait for it rather than expect it to have run (expecting it
        // failed traced runs now and then when tests shared lavapipe).
        let mapped = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .map_err(|_| Error::Gpu {
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
}
