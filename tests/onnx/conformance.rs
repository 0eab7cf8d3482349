//! The ONNX backend conformance suite's node tests, on every device, against the outputs the
//! suite stores (computed by the `onnx` package's NumPy reference, not by wgflow).
//!
//! Cases come from `scripts/onnx/gen_node_tests.py` (pinned in `scripts/onnx/requirements.txt`)
//! in the standard layout, read from `$WGFLOW_ONNX_NODE_TESTS` (default
//! `target/onnx-node-tests`). Missing data is a skip, or a failure under
//! `WGFLOW_REQUIRE_ONNX_TESTS=1` (CI). Every case runs on every device (about 85 s in release
//! on 2 cores: cpu:0 takes a second, each software GPU about 40 s). A case
//! of `tests/onnx/passing.txt` that fails on a device its line names fails the test;
//! `WGFLOW_ONNX_UPDATE=1` rewrites the list from this run; `WGFLOW_ONNX_ONLY=substring`, `WGFLOW_ONNX_CPU_ONLY=1` and `WGFLOW_ONNX_VERBOSE=1`
//! help when working on one op.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;
use wgflow::onnx::{load_tensor, proto, ImportOptions, InferenceSession};
use wgflow::{Device, HostTensor, SessionOptions};

const PASSING: &str = "tests/onnx/passing.txt";

struct Case {
    name: String,
    dir: PathBuf,
    /// Every input and output is float32.
    float32: bool,
}

fn data_dir() -> PathBuf {
    std::env::var_os("WGFLOW_ONNX_NODE_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/onnx-node-tests"))
}

fn pb_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let i = name
                        .strip_prefix(prefix)?
                        .strip_suffix(".pb")?
                        .parse()
                        .ok()?;
                    Some((i, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

fn elem_type(path: &Path) -> i32 {
    use prost_free::decode_tensor;
    decode_tensor(path).and_then(|t| t.data_type).unwrap_or(0)
}

/// Decoding a `TensorProto` header without the dtype policy (to classify cases).
mod prost_free {
    use super::proto;
    use std::path::Path;
    use wgflow::onnx::Message;

    pub fn decode_tensor(path: &Path) -> Option<proto::TensorProto> {
        let bytes = std::fs::read(path).ok()?;
        <proto::TensorProto as Message>::decode(bytes.as_slice()).ok()
    }
}

fn cases(dir: &Path) -> Vec<Case> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let d = e.path();
        if !d.join("model.onnx").is_file() {
            continue;
        }
        let data = d.join("test_data_set_0");
        let files: Vec<PathBuf> = pb_files(&data, "input_")
            .into_iter()
            .chain(pb_files(&data, "output_"))
            .collect();
        let float32 = files.iter().all(|f| elem_type(f) == 1);
        out.push(Case {
            name: e.file_name().to_string_lossy().into_owned(),
            dir: d,
            float32,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn load_all(paths: &[PathBuf]) -> Result<Vec<(String, HostTensor)>, String> {
    paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
            load_tensor(&bytes, &ImportOptions::default()).map_err(|e| e.to_string())
        })
        .collect()
}

fn compare(i: usize, got: &HostTensor, want: &HostTensor) -> Result<(), String> {
    if got.dims() != want.dims() || got.dtype() != want.dtype() {
        return Err(format!(
            "output {i}: got {} {:?}, want {} {:?}",
            got.dtype(),
            got.dims(),
            want.dtype(),
            want.dims()
        ));
    }
    if !got.dtype().is_float() {
        return if got.words() == want.words() {
            Ok(())
        } else {
            Err(format!("output {i}: values differ"))
        };
    }
    let (g, w) = (
        got.to_f32().map_err(|e| e.to_string())?,
        want.to_f32().map_err(|e| e.to_string())?,
    );
    for (k, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= 1e-5 + 1e-3 * b.abs()
        };
        if !ok {
            return Err(format!("output {i}[{k}]: got {a}, want {b}"));
        }
    }
    Ok(())
}

/// Run one case on `device`: `Ok` when every output matches.
/// One case as the CLI runs it: an `InferenceSession` fed by input name (int64 inputs as
/// i32, shape-like inputs made constants of the import when it needs their values), the
/// outputs fetched by their ONNX names.
fn run_case(case: &Case, device: Device) -> Result<(), String> {
    let data = case.dir.join("test_data_set_0");
    let inputs = load_all(&pb_files(&data, "input_"))?;
    let outputs = load_all(&pb_files(&data, "output_"))?;
    let bytes = std::fs::read(case.dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let options = SessionOptions {
        default_device: Some(device),
        visible_devices: Some(crate::common::gpu_indices()),
        ..Default::default()
    };
    let mut session =
        InferenceSession::from_bytes(bytes, Some(&case.dir), ImportOptions::default(), options)
            .map_err(|e| e.to_string())?;
    // A file's tensor may be unnamed: it feeds the input at its position.
    let declared: Vec<String> = session.inputs().iter().map(|i| i.name.clone()).collect();
    let mut feeds: Vec<(&str, HostTensor)> = Vec::new();
    for (k, name) in declared.iter().enumerate() {
        let v = inputs
            .iter()
            .find(|(n, _)| n == name)
            .or_else(|| inputs.get(k))
            .ok_or_else(|| format!("no data for input '{name}'"))?;
        feeds.push((name.as_str(), v.1.clone()));
    }
    let names: Vec<String> = session.outputs().iter().map(|o| o.name.clone()).collect();
    if names.len() != outputs.len() {
        return Err(format!(
            "{} outputs, {} expected",
            names.len(),
            outputs.len()
        ));
    }
    let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
    let got = session
        .run(Some(&fetch), &feeds)
        .map_err(|e| e.to_string())?;
    for (i, (g, (_, w))) in got.iter().zip(&outputs).enumerate() {
        compare(i, g, w)?;
    }
    Ok(())
}

fn run_guarded(case: &Case, device: Device) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| run_case(case, device))) {
        Ok(r) => r,
        Err(_) => Err("PANIC".into()),
    }
}

/// The pass list: case name → backends it must pass on.
fn read_passing() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PASSING))
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (name, backends) = l.split_once(' ')?;
            Some((
                name.to_string(),
                backends.split(',').map(|s| s.trim().to_string()).collect(),
            ))
        })
        .collect()
}

/// The op type named in an "unsupported" error (`node 'x' (Op, opset N): unsupported ...`).
fn unsupported_op(err: &str) -> Option<String> {
    if !err.starts_with("onnx node '") {
        return None;
    }
    let i = err.find("' (")? + 1;
    let rest = &err[i + 2..];
    let op = rest.split(',').next()?;
    err.contains("unsupported").then(|| op.to_string())
}

#[test]
fn node_tests() {
    let dir = data_dir();
    let all = cases(&dir);
    if all.is_empty() {
        let msg = format!(
            "no ONNX node tests in {} (generate them with scripts/onnx/gen_node_tests.py, or set WGFLOW_ONNX_NODE_TESTS)",
            dir.display()
        );
        if std::env::var("WGFLOW_REQUIRE_ONNX_TESTS").is_ok_and(|v| v == "1") {
            panic!("WGFLOW_REQUIRE_ONNX_TESTS=1: {msg}");
        }
        eprintln!("skipped: {msg}");
        return;
    }
    let update = std::env::var("WGFLOW_ONNX_UPDATE").is_ok_and(|v| v == "1");
    let only = std::env::var("WGFLOW_ONNX_ONLY").ok();
    let passing = read_passing();
    let mut devices = vec![(Device::Cpu, "cpu".to_string())];
    let cpu_only = std::env::var("WGFLOW_ONNX_CPU_ONLY").is_ok_and(|v| v == "1");
    for d in wgflow::devices() {
        if d.device.is_gpu() && !cpu_only {
            devices.push((d.device, d.backend.to_lowercase()));
        }
    }
    let _ = crate::common::gpus(); // WGFLOW_REQUIRE_GPU=1: no adapter is a failure
    let float32_total = all.iter().filter(|c| c.float32).count();
    let mut failures = Vec::new();
    let mut passed_on: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // cpu:0's failures (case, float32-only, error), for the docs' list.
    let mut cpu_failures: Vec<(String, bool, String)> = Vec::new();
    for (device, backend) in &devices {
        let start = Instant::now();
        let (mut pass, mut pass_f32, mut ran) = (0, 0, 0);
        let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
        for case in &all {
            if only.as_deref().is_some_and(|o| !case.name.contains(o)) {
                continue;
            }
            let listed = passing.get(&case.name).is_some_and(|b| b.contains(backend));
            ran += 1;
            match run_guarded(case, *device) {
                Ok(()) => {
                    pass += 1;
                    pass_f32 += case.float32 as usize;
                    passed_on
                        .entry(case.name.clone())
                        .or_default()
                        .push(backend.clone());
                }
                Err(e) => {
                    if let Some(op) = unsupported_op(&e) {
                        *unsupported.entry(op).or_default() += 1;
                    }
                    if *device == Device::Cpu {
                        cpu_failures.push((case.name.clone(), case.float32, e.clone()));
                    }
                    if std::env::var("WGFLOW_ONNX_VERBOSE").is_ok() {
                        eprintln!(
                            "FAIL{} {} on {device}: {e}",
                            if case.float32 { "32" } else { "" },
                            case.name
                        );
                    }
                    if listed {
                        failures.push(format!("{} on {device} ({backend}): {e}", case.name));
                    }
                }
            }
        }
        println!(
            "onnx node tests on {device} ({backend}): {pass} passed of {ran} run; float32-only {pass_f32}/{float32_total}; all {pass}/{} ({:.1} s)",
            all.len(),
            start.elapsed().as_secs_f64()
        );
        let mut top: Vec<_> = unsupported.into_iter().collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        if !top.is_empty() && *device == Device::Cpu {
            let list: Vec<String> = top
                .iter()
                .take(25)
                .map(|(op, n)| format!("{op} {n}"))
                .collect();
            println!("  unsupported (failing cases): {}", list.join(", "));
        }
    }
    if std::env::var("WGFLOW_ONNX_DOC").is_ok_and(|v| v == "1") && only.is_none() {
        write_failure_doc(&cpu_failures, all.len(), float32_total);
    }
    if update {
        let mut text = String::from("# ONNX node tests that pass, and the backends they pass on (tests/onnx/conformance.rs).\n# Regenerate: WGFLOW_ONNX_UPDATE=1 cargo test --release --test onnx -- --nocapture\n");
        for (name, backends) in &passed_on {
            text += &format!("{name} {}\n", backends.join(","));
        }
        std::fs::write(Path::new(env!("CARGO_MANIFEST_DIR")).join(PASSING), text)
            .expect("write pass list");
        return;
    }
    assert!(
        failures.is_empty(),
        "{} listed cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `docs/onnx-conformance.md`: every case that fails on cpu:0, grouped by reason.
fn write_failure_doc(failures: &[(String, bool, String)], total: usize, float32_total: usize) {
    let mut groups: BTreeMap<String, Vec<(String, bool, String)>> = BTreeMap::new();
    for (name, f32_only, e) in failures {
        let reason = if let Some(op) = unsupported_op(e) {
            format!("op {op} (or one of its modes) is not supported")
        } else if let Some(i) = e.find("element type ") {
            let t = e[i + 13..].split_whitespace().next().unwrap_or("?");
            format!("element type {t} is outside the dtype policy")
        } else if e.contains("no ai.onnx opset") {
            "another domain only (ai.onnx.ml, ai.onnx.preview.training)".to_string()
        } else if e.contains("f64_as_f32") || e.contains("DOUBLE") {
            "float64 (outside the dtype policy unless f64_as_f32)".to_string()
        } else {
            "other (see each case)".to_string()
        };
        groups
            .entry(reason)
            .or_default()
            .push((name.clone(), *f32_only, e.clone()));
    }
    let f32_fail = failures.iter().filter(|f| f.1).count();
    let mut text = format!(
        "# ONNX node tests wgflow does not pass\n\n\
         Generated by `WGFLOW_ONNX_DOC=1 WGFLOW_ONNX_CPU_ONLY=1 cargo test --test onnx conformance` \
         (tests/onnx/conformance.rs) from the `onnx` package's node tests: {} of {total} cases fail on \
         cpu:0, {f32_fail} of them among the {float32_total} float32-only cases (marked **f32**). \
         The GPUs fail the same cases, plus float16 ones on adapters without `shader-f16` \
         (tests/onnx/passing.txt lists what passes where).\n",
        failures.len()
    );
    let mut order: Vec<_> = groups.into_iter().collect();
    order.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    for (reason, cases) in order {
        text += &format!("\n## {reason} ({} cases)\n\n", cases.len());
        for (name, f32_only, e) in cases {
            let mut e = e.replace('\n', " ");
            if e.len() > 200 {
                let cut = (0..=200)
                    .rev()
                    .find(|&i| e.is_char_boundary(i))
                    .unwrap_or(0);
                e = format!("{}…", &e[..cut]);
            }
            let mark = if f32_only { " **f32**" } else { "" };
            text += &format!("- `{name}`{mark}: {e}\n");
        }
    }
    std::fs::write(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/onnx-conformance.md"),
        text,
    )
    .expect("write docs/onnx-conformance.md");
}
