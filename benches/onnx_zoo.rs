//! `cargo bench --bench onnx_zoo`: cpu:0 against onnxruntime's CPU provider on models as
//! users export them (torchvision, Hugging Face `transformers`, torch LSTM/GRU), at batch 1
//! and batch 8, with a geometric mean per batch size. No kernel here was tuned for them.
//!
//! The models and their feeds come from `scripts/onnx/zoo_models.py`, run once in a venv of
//! `scripts/onnx/zoo-requirements.txt` (pinned; about 6 GB with torch's CUDA wheels):
//!
//! ```text
//! python3 -m venv ~/.cache/wgflow-zoo/venv
//! ~/.cache/wgflow-zoo/venv/bin/pip install -r scripts/onnx/zoo-requirements.txt
//! ~/.cache/wgflow-zoo/venv/bin/python scripts/onnx/zoo_models.py ~/.cache/wgflow-zoo/models
//! cargo bench --bench onnx_zoo
//! ```
//!
//! `WGFLOW_ZOO_DIR` overrides the models' folder, `WGFLOW_BENCH_PYTHON` the interpreter that
//! runs onnxruntime (`benches/onnxruntime_zoo.py`; default: the zoo's venv, else `python3`),
//! `WGFLOW_ZOO_MODELS=a,b` picks models and `WGFLOW_BENCH_QUICK=1` runs fewer blocks. Each
//! model is measured in turns, onnxruntime, wgflow, onnxruntime, wgflow, and each keeps the
//! faster of its two medians, so a neighbour's load weighs on both alike. wgflow runs each
//! model through `onnx::InferenceSession`, as a user would: one import with the symbolic
//! batch and sequence as run-time dimensions, or one per batch size where a size becomes
//! data (the line says so).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wgflow::onnx::{ImportOptions, InferenceSession};
use wgflow::{Device, HostTensor, SessionOptions};

fn quick() -> bool {
    std::env::var("WGFLOW_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| ".".into()))
}

fn zoo() -> PathBuf {
    std::env::var("WGFLOW_ZOO_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| home().join(".cache/wgflow-zoo/models"))
}

fn python() -> String {
    if let Ok(p) = std::env::var("WGFLOW_BENCH_PYTHON") {
        return p;
    }
    let venv = home().join(".cache/wgflow-zoo/venv/bin/python");
    if venv.exists() {
        venv.to_string_lossy().into_owned()
    } else {
        "python3".into()
    }
}

/// onnxruntime's milliseconds per batch size for `name`, and its version.
fn onnxruntime_ms(python: &str, name: &str) -> Result<(HashMap<usize, f64>, String), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/onnxruntime_zoo.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(zoo())
        .arg(name)
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
        } else if let Some((b, v)) = line.strip_prefix('b').and_then(|l| l.split_once("_ms=")) {
            if let (Ok(b), Ok(v)) = (b.parse(), v.parse()) {
                ms.insert(b, v);
            }
        }
    }
    if ms.is_empty() {
        return Err(format!("{python} {script} printed no times for {name}"));
    }
    Ok((ms, version))
}

struct Entry {
    name: String,
    /// Per batch size, each input's name and `.npy` file.
    batches: Vec<(usize, Vec<(String, String)>)>,
}

fn manifest(dir: &Path) -> Result<Vec<Entry>, String> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).map_err(|e| e.to_string())?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let models = json["models"].as_array().ok_or("manifest: no models")?;
    let mut out = Vec::new();
    for m in models {
        let name = m["name"]
            .as_str()
            .ok_or("manifest: a model without a name")?;
        let mut batches = Vec::new();
        for (b, spec) in m["batches"].as_object().ok_or("manifest: no batches")? {
            let feeds = spec["feeds"]
                .as_object()
                .ok_or("manifest: no feeds")?
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            batches.push((b.parse().map_err(|_| "manifest: a batch size")?, feeds));
        }
        batches.sort_by_key(|b| b.0);
        out.push(Entry {
            name: name.to_string(),
            batches,
        });
    }
    Ok(out)
}

/// Median milliseconds of one run of `session` on `feeds` (after two warm-up runs), in
/// blocks of about 50 ms.
fn latency(session: &mut InferenceSession, feeds: &[(&str, HostTensor)]) -> Result<f64, String> {
    let mut run = || {
        session
            .run(None, feeds)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let t = Instant::now();
    run()?;
    let once = t.elapsed().as_secs_f64();
    run()?;
    let iters = ((0.05 / once.max(1e-6)) as usize).clamp(1, 20);
    let mut samples = Vec::new();
    for _ in 0..if quick() { 3 } else { 7 } {
        let t = Instant::now();
        for _ in 0..iters {
            run()?;
        }
        samples.push(t.elapsed().as_secs_f64() * 1e3 / iters as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// wgflow's milliseconds per batch size for one model on cpu:0, through the
/// onnxruntime-style session users call (int64 feeds, sizes from the feeds).
fn wgflow_ms(
    dir: &Path,
    e: &Entry,
    session: &mut InferenceSession,
) -> Result<HashMap<usize, f64>, String> {
    let mut ms = HashMap::new();
    for (batch, files) in &e.batches {
        let mut feeds = Vec::new();
        for (input, file) in files {
            let t = wgflow::npy::read(dir.join(file)).map_err(|e| e.to_string())?;
            feeds.push((input.as_str(), t));
        }
        ms.insert(*batch, latency(session, &feeds)?);
    }
    Ok(ms)
}

fn main() {
    let dir = zoo();
    let entries = match manifest(&dir) {
        Ok(e) => e,
        Err(err) => {
            println!(
                "no model zoo at {} ({err}): see benches/onnx_zoo.rs for the three commands \
                 that make it",
                dir.display()
            );
            return;
        }
    };
    let only: Option<Vec<String>> = std::env::var("WGFLOW_ZOO_MODELS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let python = python();
    let mut version = String::new();
    let mut rows = Vec::new();
    for e in entries
        .iter()
        .filter(|e| only.as_ref().is_none_or(|o| o.contains(&e.name)))
    {
        let t = Instant::now();
        let options = SessionOptions {
            default_device: Some(Device::Cpu),
            ..Default::default()
        };
        let path = dir.join(format!("{}.onnx", e.name));
        let mut session = match InferenceSession::new(&path, ImportOptions::default(), options) {
            Ok(s) => s,
            Err(err) => {
                println!("{}: import failed: {err}", e.name);
                continue;
            }
        };
        let import_ms = t.elapsed().as_secs_f64() * 1e3;
        let best = |a: Result<HashMap<usize, f64>, String>,
                    b: Result<HashMap<usize, f64>, String>| {
            match (a, b) {
                (Ok(a), Ok(b)) => Ok(a
                    .iter()
                    .map(|(k, x)| (*k, b.get(k).map_or(*x, |y| x.min(*y))))
                    .collect::<HashMap<_, _>>()),
                (Ok(r), Err(_)) | (Err(_), Ok(r)) => Ok(r),
                (Err(e), Err(_)) => Err(e),
            }
        };
        let ort_a = onnxruntime_ms(&python, &e.name);
        let ours_a = wgflow_ms(&dir, e, &mut session);
        let ort_b = onnxruntime_ms(&python, &e.name);
        let ours_b = wgflow_ms(&dir, e, &mut session);
        if let Ok((_, v)) = ort_a.as_ref().or(ort_b.as_ref()) {
            version.clone_from(v);
        }
        let ort = best(ort_a.map(|r| r.0), ort_b.map(|r| r.0));
        let ours = best(ours_a, ours_b);
        for (batch, _) in &e.batches {
            let w = ours.as_ref().map(|m| m.get(batch).copied());
            let o = ort.as_ref().ok().and_then(|m| m.get(batch).copied());
            println!(
                "{} b{batch}: wgflow {} onnxruntime {} (import {import_ms:.0} ms{})",
                e.name,
                match &w {
                    Ok(Some(ms)) => format!("{ms:.2} ms"),
                    Ok(None) => "-".into(),
                    Err(err) => format!("error: {err}"),
                },
                o.map_or("-".into(), |v| format!("{v:.2} ms")),
                if session.per_binding().is_some() {
                    ", imported per batch size"
                } else {
                    ""
                },
            );
            rows.push((e.name.clone(), *batch, w.ok().flatten(), o));
        }
    }
    println!(
        "\ncpu:0 against onnxruntime {version} CPU provider ({python}), {} threads, \
         time ratio wgflow / onnxruntime (below 1: wgflow faster)\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| model | batch | wgflow ms | onnxruntime ms | ratio |");
    println!("|---|---:|---:|---:|---:|");
    let mut logs: HashMap<usize, Vec<f64>> = HashMap::new();
    for (name, batch, w, o) in &rows {
        let ratio = match (w, o) {
            (Some(w), Some(o)) if *o > 0.0 => {
                logs.entry(*batch).or_default().push((w / o).ln());
                format!("{:.2}", w / o)
            }
            _ => "-".into(),
        };
        let f = |v: &Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        println!("| {name} | {batch} | {} | {} | {ratio} |", f(w), f(o));
    }
    let mut batches: Vec<_> = logs.into_iter().collect();
    batches.sort_by_key(|b| b.0);
    for (batch, l) in batches {
        let over = l.iter().filter(|&&x| x > 1.5f64.ln()).count();
        println!(
            "\nbatch {batch}: geometric mean ratio {:.2} over {} models; {over} over 1.5",
            (l.iter().sum::<f64>() / l.len() as f64).exp(),
            l.len()
        );
    }
}
