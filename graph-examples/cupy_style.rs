//! A CuPy-style array program:
//!
//! ```python
//! x = cp.linspace(-2, 2, 9, dtype=cp.float32)
//! i = cp.arange(9, dtype=cp.int32)
//! y = cp.tanh(x) * cp.exp(-x * x)                 # elementwise math
//! total = y.sum(); peak = y.max()                 # reductions
//! sq_diff = cp.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)')
//! rev = cp.RawKernel(r'''...''', 'reverse')       # a hand-written kernel
//! ```
//!
//! Arrays enter as constants built on the host (wgflow has no `arange` op: a graph's
//! constants are data, so NumPy-style constructors are plain Rust iterators). The raw WGSL
//! kernel runs only on a GPU; without one that part is skipped with a note.

use wgflow::ops::custom::{ElementwiseFn, Invocations, OutputRule, RawWgsl};
use wgflow::{Device, Graph, Session, SessionOptions};

const REVERSE: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn reverse(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = arrayLength(&y);
    if (gid.x < n) {
        y[gid.x] = x[n - 1u - gid.x];
    }
}
"#;

fn linspace(start: f32, stop: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| start + (stop - start) * i as f32 / (n - 1) as f32)
        .collect()
}

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let device = Device::best();
    println!("running on {device}");

    let mut g = Graph::new();
    let x = g.constant(linspace(-2.0, 2.0, 9))?;
    let i = g.constant((0..9).collect::<Vec<i32>>())?;

    // y = tanh(x) * exp(-x * x): four primitives, fused into one kernel.
    let xx = g.mul(x, x)?;
    let nxx = g.neg(xx)?;
    let e = g.exp(nxx)?;
    let t = g.tanh(x)?;
    let y = g.mul(t, e)?;
    let total = g.sum(y, wgflow::Axes::All, false)?;
    let peak = g.max(y, wgflow::Axes::All, false)?;
    let i_sum = g.sum(i, wgflow::Axes::All, false)?;

    // cp.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)')
    let sq_diff =
        ElementwiseFn::new("sq_diff", |[a, b]| (a - b) * (a - b)).signature("f32(f32, f32)")?;
    let d = g.apply(&sq_diff, &[y, x])?;

    let mut fetches = vec![y, total, peak, i_sum, d];
    let rev = if device.is_gpu() {
        let k = RawWgsl::new(
            "reverse",
            REVERSE,
            "reverse",
            OutputRule::LikeInput(0),
            Invocations::PerOutputElement,
        );
        let r = g.raw_kernel(&k, &[x])?;
        fetches.push(r);
        Some(r)
    } else {
        println!("note: no GPU, so the raw WGSL kernel is skipped");
        None
    };

    let options = SessionOptions {
        default_device: Some(device),
        // The inputs are constants; keep the kernels (instead of folding them on the host
        // when compiling) so that they run on the device.
        fold_constants: false,
        ..Default::default()
    };
    let mut session = Session::new(&g, options)?;
    let plan = session.plan(&fetches)?;
    println!("{} kernel dispatches", plan.dispatch_count());
    let out = session.run(&[], &fetches)?;
    println!("x            = {}", HostFmt(&linspace(-2.0, 2.0, 9)));
    println!("y            = {}", out[0]);
    println!("sum(y)       = {}", out[1]);
    println!("max(y)       = {}", out[2]);
    println!("sum(arange)  = {}", out[3]);
    println!("(y - x)^2    = {}", out[4]);
    if rev.is_some() {
        println!("reverse(x)   = {}", out[5]);
    }
    Ok(())
}

struct HostFmt<'a>(&'a [f32]);

impl std::fmt::Display for HostFmt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self.0.iter().map(|v| format!("{v}")).collect();
        write!(f, "[{}]", items.join(", "))
    }
}
