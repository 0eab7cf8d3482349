//! Fetch and feed costs on one GPU, next to a hand-written wgpu program moving the same bytes
//! on the same adapter (`WGFLOW_BENCH_ONLY=transfer`).
//!
//! * fetch: wgflow's `Session::run` fetching a variable (no dispatch: the run is the
//!   read-back alone) vs copy to a staging buffer made once + one submit + map + one memcpy of
//!   the mapped bytes into a fresh `Vec`;
//! * feed: `Session::run_targets` with the placeholder fed and a one-element op on it as the
//!   target (the run is the upload and one tiny dispatch) vs `queue.write_buffer` + submit +
//!   wait;
//! * `read_variable` next to the same hand-written fetch;
//! * W1 (`a + b`, 16M f32) run and its 64 MiB result fetched, vs the table's hand-written
//!   replay of the same dispatch followed by the hand-written fetch.
//!
//! Each pair is timed in alternating batches (medians of 9), so both see the same drift of a
//! shared machine. The hand-written f16 path copies the packed 2-byte values; wgflow's host
//! tensors hold one word per element, so its f16 fetch widens while copying.

use super::{konst, quick, session, time_pair, Baseline};
use std::hint::black_box;
use wgflow::backend::gpu::context;
use wgflow::{DType, Device, Graph, HostTensor, SliceArg};

/// `n` deterministic words of `dtype` (f16 bit patterns for f16).
fn words(dtype: DType, n: usize) -> HostTensor {
    let mut s = 0x9e37_79b9u32;
    let v: Vec<u32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            match dtype {
                DType::F16 => s & 0x7bff,
                DType::Bool => s & 1,
                _ => s & 0x3fff_ffff,
            }
        })
        .collect();
    HostTensor::from_words([n].into(), dtype, v).unwrap()
}

/// Hand-written fetch and feed of `bytes` bytes through plain wgpu.
struct Hand {
    ctx: std::sync::Arc<context::GpuContext>,
    buf: wgpu::Buffer,
    staging: wgpu::Buffer,
    bytes: u64,
}

impl Hand {
    fn new(gpu: usize, bytes: u64) -> Hand {
        let ctx = context::get(gpu).unwrap();
        let mk = |usage| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let buf = mk(wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST);
        let staging = mk(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        Hand {
            ctx,
            buf,
            staging,
            bytes,
        }
    }

    fn fetch(&self) -> Vec<u8> {
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&self.buf, 0, &self.staging, 0, self.bytes);
        self.ctx.queue.submit([enc.finish()]);
        self.staging
            .map_async(wgpu::MapMode::Read, 0..self.bytes, |r| r.unwrap());
        self.ctx.wait().unwrap();
        let out = self
            .staging
            .get_mapped_range(0..self.bytes)
            .unwrap()
            .to_vec();
        self.staging.unmap();
        out
    }

    fn feed(&self, data: &[u8]) {
        self.ctx.queue.write_buffer(&self.buf, 0, data);
        self.ctx.queue.submit([]);
        self.ctx.wait().unwrap();
    }
}

/// Device bytes of `t` as a hand-written program would hold them (f16 packed).
fn packed(t: &HostTensor) -> Vec<u8> {
    match t.dtype() {
        DType::F16 => {
            let mut v: Vec<u8> = t
                .words()
                .iter()
                .flat_map(|&w| (w as u16).to_ne_bytes())
                .collect();
            v.resize(v.len().next_multiple_of(4), 0);
            v
        }
        _ => t.bytes().to_vec(),
    }
}

/// Print fetch, feed and `read_variable` times of each case on `WGFLOW_BENCH_DEVICE` (a GPU,
/// `gpu:0` by default) next to the hand-written path, with their ratios.
pub fn fetch_and_feed() {
    let spec = std::env::var("WGFLOW_BENCH_DEVICE").unwrap_or_else(|_| "gpu:0".into());
    let dev = Device::parse(&spec).unwrap();
    let Device::Gpu(gpu) = dev else {
        panic!("the transfer bench needs a GPU device")
    };
    let cases: [(&str, DType, usize); 5] = [
        ("1 KiB i32", DType::I32, 256),
        ("64 MiB f32", DType::F32, 16 << 20),
        ("128 MiB f32", DType::F32, 32 << 20),
        ("4M f16", DType::F16, 4 << 20),
        ("4M i32", DType::I32, 4 << 20),
    ];
    println!(
        "{:<14} {:<14} {:>10} {:>10} {:>7}",
        "transfer", "path", "wgflow", "hand wgpu", "ratio"
    );
    let row = |case: &str, path: &str, (w, h): (f64, f64)| {
        println!(
            "{case:<14} {path:<14} {:>7.2} ms {:>7.2} ms {:>7.3}",
            w * 1e3,
            h * 1e3,
            w / h
        );
    };
    for (name, dtype, n) in cases {
        // About 200 MiB moved per batch, so the small cases' batches are not a single copy.
        let iters = if quick() {
            1
        } else {
            (200 << 20) / (n * 4).max(1)
        }
        .clamp(3, 100);
        let value = words(dtype, n);
        let bytes = dev.storage_bytes(dtype, n as u64);
        let hand = Hand::new(gpu, bytes);
        let data = packed(&value);
        hand.feed(&data);

        let mut g = Graph::new();
        let v = g.variable("v", value.clone()).unwrap();
        let x = g.placeholder("x", [n], dtype).unwrap();
        let first = g.slice(x, &[SliceArg::range(0, 1)]).unwrap();
        let used = g.cast(first, DType::U32).unwrap();
        let mut s = session(&g, dev, true);
        assert_eq!(s.plan(&[v]).unwrap().dispatch_count(), 0);
        assert_eq!(s.run(&[], &[v]).unwrap()[0], value, "{name}: fetch");
        let feeds = [(x, value)];
        s.run_targets(&feeds, &[used]).unwrap();

        let fetch = time_pair(
            || drop(black_box(s.run(&[], &[v]).unwrap())),
            || drop(black_box(hand.fetch())),
            iters,
        );
        row(name, "fetch", fetch);
        let feed = time_pair(
            || s.run_targets(&feeds, &[used]).unwrap(),
            || hand.feed(&data),
            iters,
        );
        row(name, "feed", feed);
        let read = time_pair(
            || drop(black_box(s.read_variable(v).unwrap())),
            || drop(black_box(hand.fetch())),
            iters,
        );
        row(name, "read_variable", read);
    }
    // W1 with its result fetched.
    {
        let n = 16 << 20;
        let mut g = Graph::new();
        let a = konst(&mut g, &[n], 1);
        let b = konst(&mut g, &[n], 2);
        let c = g.add(a, b).unwrap();
        let mut s = session(&g, dev, true);
        let base = Baseline::new(&s.plan(&[c]).unwrap(), gpu);
        let hand = Hand::new(gpu, 4 * n as u64);
        let w1 = time_pair(
            || drop(black_box(s.run(&[], &[c]).unwrap())),
            || {
                base.run();
                drop(black_box(hand.fetch()));
            },
            3,
        );
        row("W1 16M f32", "run + fetch", w1);
    }
    // cpu:0: a fetch is one copy of the value's words out of the arena or variable.
    let n = 16 << 20;
    let value = words(DType::F32, n);
    let mut g = Graph::new();
    let v = g.variable("v", value.clone()).unwrap();
    let mut s = session(&g, Device::Cpu, true);
    let words = value.words();
    let cpu = time_pair(
        || drop(black_box(s.run(&[], &[v]).unwrap())),
        || drop(black_box(words.to_vec())),
        3,
    );
    println!(
        "{:<14} {:<14} {:>7.2} ms {:>7.2} ms {:>7.3}   (cpu:0; 'hand' is one Vec copy)",
        "64 MiB f32",
        "fetch",
        cpu.0 * 1e3,
        cpu.1 * 1e3,
        cpu.0 / cpu.1
    );
}
