//! `cargo bench --bench gpt`: training throughput (tokens/s) of the `train_gpt` example's
//! default model (2 layers, width 128, 4 heads, context 64, batch 16) on cpu:0 and the first
//! GPU adapter, against the same model and AdamW step in JAX (`jax.jit` on the CPU,
//! `benches/gpt_jax.py`, when the peers' Python has JAX), plus generation tokens/s through
//! the key/value caches and the training step's arena against its live-bytes lower bound.
//! The two take turns (JAX, wgflow, JAX, wgflow) and each keeps its better run, so a
//! neighbour's load on a shared machine weighs on both alike.
//! `WGFLOW_BENCH_PYTHON` picks the interpreter (default: the repository's `.venv-bench`,
//! else `python3`); `WGFLOW_BENCH_ONLY=cpu` skips the GPU.

include!("../graph-examples/gpt_model.rs");

use std::time::Instant;
use wgflow::train::{Adam, Optimizer};
use wgflow::{Device, Session, SessionOptions};

const CFG: GptConfig = GptConfig {
    context: 64,
    width: 128,
    heads: 4,
    layers: 2,
};
const BATCH: usize = 16;

fn python() -> String {
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

/// JAX's tokens/s and version, or why there are none.
fn jax(python: &str) -> Result<(f64, String), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/gpt_jax.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .args([
            "--batch",
            &BATCH.to_string(),
            "--context",
            &CFG.context.to_string(),
        ])
        .args([
            "--width",
            &CFG.width.to_string(),
            "--heads",
            &CFG.heads.to_string(),
        ])
        .args(["--layers", &CFG.layers.to_string(), "--steps", "40"])
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().last().unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|_| format!("no JAX ({python} printed '{line}')"))?;
    let tps = v["tokens_per_s"].as_f64().ok_or("no tokens_per_s")?;
    let version = v["jax_version"].as_str().unwrap_or("?").to_string();
    Ok((tps, version))
}

struct Bench {
    g: Graph,
    x: Tensor,
    y: Tensor,
    lr: Tensor,
    train: Tensor,
    dec: Decoder,
}

fn build() -> wgflow::Result<Bench> {
    let mut g = Graph::new();
    let gpt = Gpt::new(&mut g, CFG, 1)?;
    let (b, t) = (BATCH, CFG.context);
    let x = g.placeholder("tokens", [b, t], DType::I32)?;
    let y = g.placeholder("targets", [b * t], DType::I32)?;
    let lr = g.placeholder("lr", Shape::scalar(), DType::F32)?;
    let logits = gpt.forward(&mut g, x, b, t)?;
    let loss = gpt.loss(&mut g, logits, y, b * t)?;
    let train = Adam::adamw(lr, 0.01).minimize(&mut g, loss, &gpt.params())?;
    let dec = gpt.decoder(&mut g)?;
    Ok(Bench {
        g,
        x,
        y,
        lr,
        train,
        dec,
    })
}

/// (training tokens/s, generation tokens/s, arena peak / lower bound) on `device`.
fn measure(bench: &Bench, device: Device, steps: usize) -> wgflow::Result<(f64, f64, f64)> {
    let mut s = Session::new(
        &bench.g,
        SessionOptions {
            default_device: Some(device),
            ..Default::default()
        },
    )?;
    let (b, t) = (BATCH, CFG.context);
    let mut seed = 0x1234_5678u64;
    let mut feeds = || -> wgflow::Result<Vec<(Tensor, HostTensor)>> {
        let mut tok = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % VOCAB as u64) as i32
        };
        let xs: Vec<i32> = (0..b * t).map(|_| tok()).collect();
        let ys: Vec<i32> = (0..b * t).map(|_| tok()).collect();
        Ok(vec![
            (bench.x, HostTensor::new(Shape(vec![b, t]), xs)?),
            (bench.y, HostTensor::new(Shape(vec![b * t]), ys)?),
            (bench.lr, HostTensor::new(Shape::scalar(), vec![1e-3f32])?),
        ])
    };
    for _ in 0..3 {
        s.run_targets(&feeds()?, &[bench.train])?;
    }
    let start = Instant::now();
    for _ in 0..steps {
        s.run_targets(&feeds()?, &[bench.train])?;
    }
    let train_tps = (steps * b * t) as f64 / start.elapsed().as_secs_f64();
    let plan = s.plan(&[bench.train])?;
    let ratio = plan.memory(device).map_or(f64::NAN, |m| {
        m.peak_bytes as f64 / m.lower_bound_bytes.max(1) as f64
    });
    let one = |v: i32| HostTensor::new(Shape(vec![1]), vec![v]);
    let start = Instant::now();
    for pos in 0..CFG.context {
        let f = [
            (bench.dec.tok, one(pos as i32 % 90 + 1)?),
            (bench.dec.pos, one(pos as i32)?),
        ];
        s.run(&f, &[bench.dec.logits, bench.dec.update])?;
    }
    let gen_tps = CFG.context as f64 / start.elapsed().as_secs_f64();
    Ok((train_tps, gen_tps, ratio))
}

fn main() {
    let bench = build().expect("the model graph");
    let python = python();
    let j1 = jax(&python);
    let c1 = measure(&bench, Device::Cpu, 40).expect("cpu:0");
    let j2 = jax(&python);
    let c2 = measure(&bench, Device::Cpu, 40).expect("cpu:0");
    let cpu = if c1.0 >= c2.0 { c1 } else { c2 };
    let jax = match (j1, j2) {
        (Ok(a), Ok(b)) => Ok(if a.0 >= b.0 { a } else { b }),
        (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
        (Err(e), Err(_)) => Err(e),
    };
    let gpu = (std::env::var("WGFLOW_BENCH_ONLY").as_deref() != Ok("cpu"))
        .then(|| wgflow::devices().into_iter().find(|d| d.device.is_gpu()))
        .flatten()
        .map(|d| {
            (
                d.device,
                format!("{}, {}", d.name, d.backend),
                measure(&bench, d.device, 5),
            )
        });
    println!(
        "train_gpt's model: {} layers, width {}, {} heads, context {}, batch {} ({} tokens a step), AdamW",
        CFG.layers,
        CFG.width,
        CFG.heads,
        CFG.context,
        BATCH,
        BATCH * CFG.context
    );
    println!("| device | training tokens/s | vs JAX | generation tokens/s (KV cache) | arena / live-bytes lower bound |");
    println!("|---|---:|---:|---:|---:|");
    let vs = |tps: f64| match &jax {
        Ok((j, _)) => format!("{:.2}×", tps / j),
        Err(_) => "-".into(),
    };
    println!(
        "| wgflow cpu:0 | {:.0} | {} | {:.0} | {:.2} |",
        cpu.0,
        vs(cpu.0),
        cpu.1,
        cpu.2
    );
    match &jax {
        Ok((j, v)) => println!("| JAX {v} (jit, CPU) | {j:.0} | 1.00× | - | - |"),
        Err(e) => println!("| JAX | {e} | | | |"),
    }
    if let Some((d, name, r)) = gpu {
        match r {
            Ok(r) => println!(
                "| wgflow {d} ({name}) | {:.0} | {} | {:.0} | {:.2} |",
                r.0,
                vs(r.0),
                r.1,
                r.2
            ),
            Err(e) => println!("| wgflow {d} ({name}) | error: {e} | | | |"),
        }
    }
}
