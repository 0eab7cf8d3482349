//! `cargo bench --bench onnx`: batch-1 inference latency of the `onnx` package's light models
//! (ResNet-50, DenseNet-121, Inception v1, SqueezeNet, ShuffleNet; `tests/data/onnx-light`) on
//! cpu:0 and the first GPU adapter, against onnxruntime's CPU provider
//! (`benches/onnxruntime_light.py`, when the peers' Python has onnxruntime), and the import
//! time of ResNet-50
//! (parse + build + first plan and run on cpu:0).
//! The two take turns (onnxruntime, wgflow, onnxruntime, wgflow) and each keeps the faster of
//! its two medians, so a neighbour's load on a shared machine weighs on both alike.
//! `WGFLOW_BENCH_PYTHON` picks the interpreter (default: the repository's `.venv-bench`, else
//! `python3`); `WGFLOW_BENCH_QUICK=1` runs fewer iterations; `WGFLOW_BENCH_ONLY=cpu` skips the GPU.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;
use wgflow::onnx::{import, ImportOptions, Model};
use wgflow::{Device, HostTensor, Session, SessionOptions};

const MODELS: [(&str, &str); 5] = [
    ("resnet50", "ResNet-50"),
    ("densenet121", "DenseNet-121"),
    ("inception_v1", "Inception v1"),
    ("squeezenet", "SqueezeNet"),
    ("shufflenet", "ShuffleNet"),
];

fn quick() -> bool {
    std::env::var("WGFLOW_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-light")
}

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

/// onnxruntime's milliseconds per model and its version, or a note saying why there are none.
fn onnxruntime_ms(python: &str) -> Result<(HashMap<String, f64>, String), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/onnxruntime_light.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(dir())
        .args(MODELS.iter().map(|m| m.0))
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if let Some(note) = text.lines().find_map(|l| l.strip_prefix("note=")) {
        return Err(note.to_string());
    }
    let mut ms = HashMap::new();
    let mut version = String::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("onnxruntime=") {
            version = v.to_string();
        } else if let Some((k, v)) = line.split_once("_ms=") {
            if let Ok(v) = v.parse() {
                ms.insert(k.to_string(), v);
            }
        }
    }
    if ms.is_empty() {
        return Err(format!("{python} {script} printed no times"));
    }
    Ok((ms, version))
}

fn input(model: &Model) -> HostTensor {
    let dims = model.inputs[0].shape.dims().to_vec();
    let n: usize = dims.iter().product();
    HostTensor::new(dims, (0..n).map(|i| (i as f64 / n as f64) as f32).collect()).expect("input")
}

/// Median milliseconds of one run on `device` (the session compiled and warm).
fn latency(model: &Model, device: Device) -> Result<f64, String> {
    let options = SessionOptions {
        default_device: Some(device),
        ..Default::default()
    };
    let mut session = Session::new(&model.graph, options).map_err(|e| e.to_string())?;
    let feeds = [(model.inputs[0].tensor, input(model))];
    let fetches = model.output_tensors();
    let mut run = || session.run(&feeds, &fetches).map_err(|e| e.to_string());
    run()?;
    run()?;
    let (reps, iters) = if quick() { (3, 2) } else { (7, 5) };
    let mut samples = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..iters {
            run()?;
        }
        samples.push(t.elapsed().as_secs_f64() * 1e3 / iters as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn main() {
    let python = python();
    let before = onnxruntime_ms(&python);
    let gpu = (std::env::var("WGFLOW_BENCH_ONLY").as_deref() != Ok("cpu"))
        .then(|| {
            wgflow::devices()
                .into_iter()
                .find(|d| d.device.is_gpu())
                .map(|d| (d.device, d.name))
        })
        .flatten();

    // Import: parse + build + first plan and run, cold, on cpu:0.
    let t = Instant::now();
    let resnet = import(
        &dir().join("light_resnet50.onnx"),
        &ImportOptions::default(),
    )
    .expect("import ResNet-50");
    let parsed = t.elapsed().as_secs_f64() * 1e3;
    let mut session = Session::new(
        &resnet.graph,
        SessionOptions {
            default_device: Some(Device::Cpu),
            ..Default::default()
        },
    )
    .expect("session");
    session
        .run(
            &[(resnet.inputs[0].tensor, input(&resnet))],
            &resnet.output_tensors(),
        )
        .expect("first run");
    let first = t.elapsed().as_secs_f64() * 1e3;

    let models: Vec<Model> = MODELS
        .iter()
        .map(|(file, _)| {
            import(
                &dir().join(format!("light_{file}.onnx")),
                &ImportOptions::default(),
            )
            .expect("import")
        })
        .collect();
    let cpu_pass =
        || -> Vec<Result<f64, String>> { models.iter().map(|m| latency(m, Device::Cpu)).collect() };
    let first_pass = cpu_pass();
    let after = onnxruntime_ms(&python);
    let second_pass = cpu_pass();
    let mut rows = Vec::new();
    for (((file, title), model), (a, b)) in MODELS
        .iter()
        .zip(&models)
        .zip(first_pass.into_iter().zip(second_pass))
    {
        let cpu = match (a, b) {
            (Ok(a), Ok(b)) => Ok(a.min(b)),
            (e @ Err(_), _) | (_, e @ Err(_)) => e,
        };
        let gpu_ms = gpu.as_ref().map(|(d, _)| latency(model, *d));
        rows.push((*file, *title, model.graph.len(), cpu, gpu_ms));
    }
    let ort: Result<(HashMap<String, f64>, String), String> = match (before, after) {
        (Ok((a, v)), Ok((b, _))) => Ok((
            a.iter()
                .map(|(k, x)| (k.clone(), b.get(k).map_or(*x, |y| x.min(*y))))
                .collect(),
            v,
        )),
        (Ok(r), Err(_)) | (Err(_), Ok(r)) => Ok(r),
        (Err(e), Err(_)) => Err(e),
    };

    let fmt = |r: &Result<f64, String>| match r {
        Ok(ms) => format!("{ms:.1}"),
        Err(e) => format!("error: {e}"),
    };
    println!(
        "batch-1 latency, ms (median of {}; {}; ResNet-50 import {parsed:.0} ms, {first:.0} ms in all with its first plan and run on cpu:0)",
        if quick() { "3" } else { "7" },
        match &ort {
            Ok((_, v)) => format!("onnxruntime {v} CPU provider via {python}"),
            Err(e) => format!("no onnxruntime: {e}"),
        }
    );
    println!(
        "| model | wgflow nodes | wgflow cpu:0 | onnxruntime CPU | cpu:0 / onnxruntime | {} |",
        gpu.as_ref()
            .map_or("no GPU".to_string(), |(d, n)| format!("wgflow {d} ({n})"))
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (file, title, nodes, cpu, gpu_ms) in rows {
        let peer = ort.as_ref().ok().and_then(|(m, _)| m.get(file).copied());
        println!(
            "| {title} | {nodes} | {} | {} | {} | {} |",
            fmt(&cpu),
            peer.map_or("-".into(), |p| format!("{p:.1}")),
            match (&cpu, peer) {
                (Ok(c), Some(p)) => format!("{:.2}×", c / p),
                _ => "-".into(),
            },
            gpu_ms.as_ref().map_or("-".into(), fmt)
        );
    }
}
