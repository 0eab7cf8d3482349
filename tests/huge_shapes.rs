//! A small graph file can declare a tensor of 2^31 elements (8 GiB of f32). Planning it must
//! not reserve that memory, and running it where the memory is not there must be an error
//! naming the node and the bytes, never an aborted process.

mod common;

use std::path::PathBuf;
use std::process::Command;
use wgflow::{DType, Device, Error, Graph, HostTensor, Session, SessionOptions, Tensor};

const N: usize = 1 << 31;
const BYTES: &str = "8589934592";

/// `random_uniform` of `[2^31]`, and the sum of constants of shapes `[2^16, 1]` and
/// `[1, 2^15]`, which broadcasts to `[2^16, 2^15]` (constant folding would compute it on the
/// host while planning).
fn huge_graph() -> (Graph, Tensor, Tensor) {
    let mut g = Graph::new();
    let r = g.random_uniform([N], 0.0, 1.0, 7).unwrap();
    let a = g
        .constant(HostTensor::zeros([1 << 16, 1], DType::F32))
        .unwrap();
    let b = g
        .constant(HostTensor::zeros([1, 1 << 15], DType::F32))
        .unwrap();
    let y = g.add(a, b).unwrap();
    (g, r, y)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgflow-huge-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The process's virtual size in bytes: a reserved arena shows here even before it is
/// touched (unlike the resident size).
fn virtual_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn session(g: &Graph, device: Device) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(device),
            visible_devices: Some(common::gpu_indices()),
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn huge_tensors_plan_on_cpu_without_reserving_and_fail_on_gpus_with_the_limit() {
    let (g, r, _) = huge_graph();
    let path = scratch("api").join("huge.json");
    g.save(&path).unwrap();
    let loaded = Graph::load(&path).unwrap();
    // `r` is a tensor of the built graph: the loaded one is looked up by name.
    let name = g.name(r).unwrap().to_string();
    for (what, g) in [("built", &g), ("loaded", &loaded)] {
        let r = g.tensor(&name).unwrap();
        let before = virtual_bytes();
        let mut cpu = session(g, Device::Cpu);
        let plan = cpu.plan(&[r]).unwrap();
        let grew = virtual_bytes().saturating_sub(before);
        // The plan's arena is 8 GiB; nothing close to that may be mapped for planning.
        assert!(
            grew < 1 << 31,
            "{what}: planning on cpu:0 mapped {grew} bytes"
        );
        assert!(plan.memory(Device::Cpu).unwrap().peak_bytes >= 1 << 33);
        drop(cpu);
        // `y` is planned by the CLI test below, under a memory limit: folding it on old code
        // computed 8 GiB in this process.
        for gpu in common::gpus() {
            let e = session(g, gpu).plan(&[r]).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::Limit { .. }), "{what} {gpu}: {msg}");
            assert!(
                msg.contains(&format!("node '{}'", g.name(r).unwrap())) && msg.contains(BYTES),
                "{what} {gpu}: {msg}"
            );
        }
    }
}

/// Runs the CLI under a 4 GB address-space limit: enough for the GPU drivers, half of what
/// the tensor needs.
fn wgflow_limited(args: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 4000000 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env_remove("WGFLOW_VISIBLE_DEVICES")
        .output()
        .expect("run wgflow")
}

#[test]
fn the_cli_under_a_memory_limit_errors_instead_of_aborting() {
    let (g, r, y) = huge_graph();
    let dir = scratch("cli");
    let file = dir.join("huge.json");
    g.save(&file).unwrap();
    let file = file.display().to_string();
    let out = dir.join("out").display().to_string();
    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    for node in [g.name(r).unwrap(), g.name(y).unwrap()] {
        for d in &devices {
            let d = d.to_string();
            let plan = wgflow_limited(&["plan", &file, "--fetch", node, "--device", &d]);
            let run =
                wgflow_limited(&["run", &file, "--fetch", node, "--device", &d, "--out", &out]);
            let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
            if d == "cpu:0" {
                assert!(
                    plan.status.success(),
                    "plan {node} on {d}: {:?}\n{}",
                    plan.status,
                    stderr(&plan)
                );
            }
            let failures = if d == "cpu:0" {
                vec![&run]
            } else {
                vec![&plan, &run]
            };
            for o in failures {
                // Exit code 1 is wgflow's error path; an abort is a signal and has no code.
                assert_eq!(o.status.code(), Some(1), "{node} on {d}: {}", stderr(o));
                let msg = stderr(o);
                assert!(
                    msg.contains(&format!("node '{node}' on {d}")) && msg.contains(BYTES),
                    "{node} on {d}: {msg}"
                );
            }
        }
    }
}
