//! The CPU table: W1-W7 on cpu:0 and on the adapter, next to NumPy (`benches/numpy_w.py`)
//! and TensorFlow, TensorFlow+XLA and JAX (`benches/peers_w.py`) when they run here, each
//! Python script run once before and once after wgflow's runs, keeping the faster.

use super::{det, mlp_w4, session, time, workloads};
use wgflow::train::{Adam, Optimizer};
use wgflow::{Axes, Conv2dOptions, DType, Device, Graph, HostTensor, Initializer, Tensor};

const NAMES: [&str; 7] = [
    "W1 add 16M",
    "W2 fused chain 4M",
    "W3 matmul 1024^3",
    "W4 MLP fwd 256x784-512-512-10",
    "W5 row sums 4096^2",
    "W6 MLP train step (Adam)",
    "W7 CNN train step (Adam)",
];

/// The value after `key` on a line of `text` (`key=value` lines).
fn get(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

fn python_stdout(python: &str, script: &str) -> Option<String> {
    let out = std::process::Command::new(python)
        .arg(script)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// NumPy's milliseconds for W1..W5 from `benches/numpy_w.py`, when `python` (the peers'
/// interpreter) runs it here, and NumPy's version.
fn numpy_ms(python: &str) -> Option<([f64; 5], String)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/numpy_w.py");
    let text = python_stdout(python, script)?;
    let mut ms = [0.0; 5];
    for (i, m) in ms.iter_mut().enumerate() {
        *m = get(&text, &format!("W{}_ms=", i + 1))?.parse().ok()?;
    }
    Some((ms, get(&text, "numpy=").unwrap_or_default()))
}

/// The interpreter that runs `numpy_w.py` and `peers_w.py`: `WGFLOW_BENCH_PYTHON`, else the repository's
/// `.venv-bench`, else `python3`.
fn peers_python() -> String {
    if let Ok(p) = std::env::var("WGFLOW_BENCH_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-bench/bin/python");
    if std::path::Path::new(venv).exists() {
        venv.into()
    } else {
        "python3".into()
    }
}

/// TensorFlow's, TensorFlow+XLA's and JAX's milliseconds per workload (`None`: not run).
#[derive(Default)]
struct Peers {
    ms: [[Option<f64>; 7]; 3],
    versions: Vec<String>,
    notes: Vec<String>,
}

const PEERS: [(&str, &str); 3] = [("tf", "TF"), ("tfxla", "TF+XLA"), ("jax", "JAX")];

fn peers_ms(python: &str) -> Peers {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peers_w.py");
    let mut p = Peers::default();
    if !std::path::Path::new(script).exists() {
        return p;
    }
    let Some(text) = python_stdout(python, script) else {
        p.notes.push(format!("{python} {script} failed"));
        return p;
    };
    for (k, (key, _)) in PEERS.iter().enumerate() {
        for w in 0..7 {
            p.ms[k][w] = get(&text, &format!("W{}_{key}_ms=", w + 1)).and_then(|v| v.parse().ok());
        }
    }
    for lib in ["tensorflow", "jax"] {
        if let Some(v) = get(&text, &format!("{lib}=")) {
            p.versions.push(format!("{lib} {v}"));
        }
    }
    p.notes = text
        .lines()
        .filter_map(|l| l.strip_prefix("note="))
        .map(str::to_string)
        .collect();
    p
}

/// Softmax cross-entropy of `logits` against one-hot `y`, averaged over the `n` rows.
fn cross_entropy(g: &mut Graph, logits: Tensor, y: Tensor, n: usize) -> Tensor {
    let logp = g.log_softmax(logits, -1).unwrap();
    let picked = g.mul(logp, y).unwrap();
    let total = g.sum(picked, Axes::All, false).unwrap();
    let scale = g.constant(-1.0f32 / n as f32).unwrap();
    g.mul(total, scale).unwrap()
}

/// One-hot labels `[n, 10]`, row `i` of class `i % 10`.
fn one_hot(n: usize) -> HostTensor {
    let labels: Vec<f32> = (0..n * 10)
        .map(|i| if i % 10 == (i / 10) % 10 { 1.0 } else { 0.0 })
        .collect();
    HostTensor::new([n, 10], labels).unwrap()
}

/// A train step's graph, its feeds and its train target.
pub struct TrainStep {
    pub graph: Graph,
    pub feeds: Vec<(Tensor, HostTensor)>,
    pub train: Tensor,
}

fn param(g: &mut Graph, name: &str, shape: &[usize], seed: u64) -> Tensor {
    let init = if shape.len() == 1 {
        Initializer::Zeros
    } else {
        Initializer::GlorotUniform { seed }
    };
    g.variable_with(name, shape.to_vec(), DType::F32, init)
        .unwrap()
}

/// W6: W4's MLP (batch 256, 784-512-512-10, bias+relu) trained with softmax cross-entropy
/// and Adam over its 6 parameters, the batch fed each step.
pub fn w6() -> TrainStep {
    let mut g = Graph::new();
    let x = g.placeholder("x", [256, 784], DType::F32).unwrap();
    let y = g.placeholder("y", [256, 10], DType::F32).unwrap();
    let mut h = x;
    let mut params = Vec::new();
    for (i, (k, n)) in [(784usize, 512usize), (512, 512), (512, 10)]
        .into_iter()
        .enumerate()
    {
        let w = param(&mut g, &format!("w{i}"), &[k, n], i as u64);
        let b = param(&mut g, &format!("b{i}"), &[n], 0);
        params.extend([w, b]);
        let a = g.linear(h, w, Some(b)).unwrap();
        h = if i < 2 { g.relu(a).unwrap() } else { a };
    }
    let loss = cross_entropy(&mut g, h, y, 256);
    let train = Adam::new(1e-3).minimize(&mut g, loss, &params).unwrap();
    let xs = HostTensor::new([256, 784], det(256 * 784, 7)).unwrap();
    TrainStep {
        graph: g,
        feeds: vec![(x, xs), (y, one_hot(256))],
        train,
    }
}

/// W7: a CNN on a batch of 64 1x8x8 images (the `train_digits` example's): conv 3x3x16 with
/// padding 1 and a bias, relu, max-pool 2, conv 3x3x32 with padding 1 and a bias, relu,
/// max-pool 2, flatten, linear 128 -> 10, softmax cross-entropy, Adam.
pub fn w7() -> TrainStep {
    let mut g = Graph::new();
    let x = g.placeholder("x", [64, 1, 8, 8], DType::F32).unwrap();
    let y = g.placeholder("y", [64, 10], DType::F32).unwrap();
    let shapes: [(&str, &[usize]); 6] = [
        ("c1", &[16, 1, 3, 3]),
        ("cb1", &[16]),
        ("c2", &[32, 16, 3, 3]),
        ("cb2", &[32]),
        ("w", &[128, 10]),
        ("b", &[10]),
    ];
    let p: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(k, (name, shape))| param(&mut g, name, shape, k as u64))
        .collect();
    let pad = Conv2dOptions {
        padding: [1, 1],
        ..Default::default()
    };
    let c = g.conv2d(x, p[0], Some(p[1]), pad).unwrap();
    let c = g.relu(c).unwrap();
    let c = g.max_pool2d(c, [2, 2], [2, 2], [0, 0]).unwrap();
    let c = g.conv2d(c, p[2], Some(p[3]), pad).unwrap();
    let c = g.relu(c).unwrap();
    let c = g.max_pool2d(c, [2, 2], [2, 2], [0, 0]).unwrap();
    let flat = g.reshape(c, &[64, -1]).unwrap();
    let logits = g.linear(flat, p[4], Some(p[5])).unwrap();
    let loss = cross_entropy(&mut g, logits, y, 64);
    let train = Adam::new(1e-3).minimize(&mut g, loss, &p).unwrap();
    let xs = HostTensor::new([64, 1, 8, 8], det(64 * 64, 8)).unwrap();
    TrainStep {
        graph: g,
        feeds: vec![(x, xs), (y, one_hot(64))],
        train,
    }
}

/// W1..W7 on `dev`: median seconds per run, inputs resident (constants, not folded), no
/// read-back; W4 feeds its 256x784 batch, W6 and W7 their batch and labels (one
/// `run_targets` per train step). Also the kernels of W6's and W7's steps.
fn device_seconds(dev: Device, iters: usize) -> ([f64; 7], [usize; 2]) {
    let mut t = [0.0; 7];
    for (i, (_, (g, out), _)) in workloads().into_iter().enumerate() {
        let mut s = session(&g, dev, true);
        let k = [0, 1, 2, 4][i];
        t[k] = time(|| s.run_targets(&[], &[out]).unwrap(), iters);
    }
    let (g, x, h) = mlp_w4();
    let feed = HostTensor::new([256, 784], det(256 * 784, 7)).unwrap();
    let mut s = session(&g, dev, true);
    let feeds = [(x, feed)];
    t[3] = time(|| s.run_targets(&feeds, &[h]).unwrap(), iters * 2);
    let mut kernels = [0; 2];
    for (k, (step, n)) in [(w6(), iters), (w7(), iters * 2)].into_iter().enumerate() {
        let mut s = session(&step.graph, dev, true);
        t[5 + k] = time(|| s.run_targets(&step.feeds, &[step.train]).unwrap(), n);
        kernels[k] = s.plan(&[step.train]).unwrap().dispatch_count();
    }
    (t, kernels)
}

/// A train step's run on cpu:0 against the sum of its kernels' traced times: what the
/// executor costs per kernel around a real step. Medians of `runs` runs each; `None` when a
/// traced run of the train target fails.
fn step_overhead(step: &TrainStep, runs: usize) -> Option<(f64, f64, usize)> {
    use wgflow::trace::RunOptions;
    let mut s = session(&step.graph, Device::Cpu, true);
    let targets = [step.train];
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let run = time(|| s.run_targets(&step.feeds, &targets).unwrap(), runs);
    let mut kernels = Vec::new();
    for _ in 0..runs {
        let (_, meta) = s
            .run_with(&step.feeds, &targets, &RunOptions { trace: true })
            .ok()?;
        kernels.push(meta.dispatches().map(|e| e.duration.as_secs_f64()).sum());
    }
    let n = s.plan(&targets).ok()?.dispatch_count();
    Some((run, median(kernels), n))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |m| format!("{m:.2} ms"))
}

/// The workloads on cpu:0 and on `gpu`, next to NumPy, TensorFlow and JAX when present: what
/// a user without a GPU gets, against the frameworks they would otherwise use.
pub fn cpu_table(gpu: Device, iters: usize) {
    let load = background_load();
    let python = peers_python();
    let numpy_before = numpy_ms(&python);
    let peers_before = peers_ms(&python);
    let (cpu, kernels) = device_seconds(Device::Cpu, iters);
    // `WGFLOW_BENCH_DEVICE=cpu:0` leaves the adapter's column out rather than run cpu:0 twice.
    let gpu_s = (gpu != Device::Cpu).then(|| device_seconds(gpu, iters).0);
    let numpy_after = numpy_ms(&python);
    let peers_after = peers_ms(&python);
    // Each script runs before and after wgflow; the faster of the two stands (the drift of
    // a shared machine only ever slows a run down).
    let numpy = match (numpy_before, numpy_after) {
        (Some((a, v)), Some((b, _))) => Some((std::array::from_fn(|i| a[i].min(b[i])), v)),
        (a, b) => a.or(b),
    };
    let mut peers = Peers {
        versions: peers_before.versions.clone(),
        notes: peers_before.notes.clone(),
        ..Default::default()
    };
    for k in 0..3 {
        for w in 0..7 {
            peers.ms[k][w] = match (peers_before.ms[k][w], peers_after.ms[k][w]) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
    if peers.versions.is_empty() {
        peers.versions = peers_after.versions;
    }
    println!();
    println!(
        "cpu:0 against {} and {} ({python} benches/numpy_w.py and peers_w.py; each script run before and after wgflow, the faster run of each workload kept) and {gpu}:",
        numpy.as_ref().map_or("NumPy (not found)".into(), |(_, v)| format!("NumPy {v}")),
        if peers.versions.is_empty() {
            "TensorFlow/JAX (not found)".into()
        } else {
            peers.versions.join(", ")
        },
    );
    for n in &peers.notes {
        println!("  note: {n}");
    }
    if let Some(l) = &load {
        println!("  all of it beside a background load: {l}");
    }
    println!(
        "{:<32} {:>10} {:>10} {:>10} {:>10} {:>12} {:>11} {:>10}",
        "workload", "NumPy", "TF", "TF+XLA", "JAX", "wgflow cpu:0", "wgflow/best", gpu
    );
    for (i, name) in NAMES.iter().enumerate() {
        let np = numpy.as_ref().and_then(|(m, _)| m.get(i).copied());
        let cols = [np, peers.ms[0][i], peers.ms[1][i], peers.ms[2][i]];
        let best = cols.iter().flatten().cloned().reduce(f64::min);
        println!(
            "{:<32} {:>10} {:>10} {:>10} {:>10} {:>12} {:>11} {:>10}",
            name,
            ms(cols[0]),
            ms(cols[1]),
            ms(cols[2]),
            ms(cols[3]),
            ms(Some(cpu[i] * 1e3)),
            best.map_or_else(|| "—".into(), |b| format!("{:.2}x", cpu[i] * 1e3 / b)),
            ms(gpu_s.map(|t| t[i] * 1e3)),
        );
    }
    println!(
        "(wgflow/best: wgflow cpu:0's time over the fastest peer's, < 1 when cpu:0 is fastest; TF runs W7 in NHWC; W6 {} kernels, W7 {} kernels per step on cpu:0)",
        kernels[0], kernels[1]
    );
    for (name, step) in [("W6", w6()), ("W7", w7())] {
        if let Some((run, k, n)) = step_overhead(&step, iters) {
            println!(
                "{name} on cpu:0: step {:.3} ms, its {n} kernels {:.3} ms (traced), {:.2} us per kernel outside them",
                run * 1e3,
                k * 1e3,
                (run - k) / n as f64 * 1e6
            );
        }
    }
}

/// `WGFLOW_BENCH_LOAD=THREADS[,DUTY]`: other work on the same cores for the whole table,
/// peers' runs included: `THREADS` threads, each busy for `DUTY`% of every 10 ms (100 when
/// left out), as a browser tab or a build beside the user's program would be. The threads
/// run until the bench exits. Returns what the table's header says about it.
fn background_load() -> Option<String> {
    let spec = std::env::var("WGFLOW_BENCH_LOAD").ok()?;
    let mut parts = spec.split(',');
    let threads: usize = parts.next()?.trim().parse().ok()?;
    let duty: u64 = parts
        .next()
        .map_or(Some(100), |d| d.trim().parse().ok())?
        .min(100);
    let busy = std::time::Duration::from_micros(duty * 100);
    let idle = std::time::Duration::from_micros((100 - duty) * 100);
    for _ in 0..threads {
        std::thread::spawn(move || {
            let mut x = 1u64;
            loop {
                let t = std::time::Instant::now();
                while t.elapsed() < busy {
                    for _ in 0..1000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
                if !idle.is_zero() {
                    std::thread::sleep(idle);
                }
            }
        });
    }
    Some(format!(
        "{threads} threads, each busy {duty}% of every 10 ms"
    ))
}
