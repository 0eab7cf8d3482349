//! `WGFLOW_BENCH_ONLY=first-runs`: W4's and W3's first runs in fresh processes, each pair
//! sharing new, empty cache directories (Mesa's shader cache and wgflow's pipeline cache):
//! the first process is cold, the second finds both caches warm.

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use wgflow::{DType, Device, Graph, HostTensor};

/// Seconds of the first run in a child process (see [`cold_and_warm`]), with `workload`
/// (`w4` or `w3`) and the given cache directories.
fn child(exe: &Path, spec: &str, workload: &str, dir: &Path) -> Option<f64> {
    let out = Command::new(exe)
        .env("WGFLOW_BENCH_ONLY", "first-runs")
        .env("WGFLOW_BENCH_FIRST_RUN", workload)
        .env("WGFLOW_BENCH_DEVICE", spec)
        .env("WGFLOW_CACHE_DIR", dir.join("wgflow"))
        .env("MESA_SHADER_CACHE_DIR", dir.join("mesa"))
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("first_run_s="))
        .and_then(|v| v.trim().parse().ok())
}

/// Print W4's and W3's cold and warm first-run seconds on `spec`. A child process (with
/// `WGFLOW_BENCH_FIRST_RUN` set) instead prints `first_run_s=` for its one workload: seconds
/// from session creation to the fetched result.
pub fn cold_and_warm(spec: &str) {
    if let Ok(workload) = std::env::var("WGFLOW_BENCH_FIRST_RUN") {
        let Ok(dev) = Device::parse(spec) else {
            return;
        };
        let (g, x, y, feed) = if workload == "w3" {
            let mut g = Graph::new();
            let x = g.placeholder("x", [1024, 1024], DType::F32).unwrap();
            let b = super::konst(&mut g, &[1024, 1024], 8);
            let y = g.matmul(x, b).unwrap();
            (g, x, y, super::det(1024 * 1024, 6))
        } else {
            let (g, x, y) = super::mlp_w4();
            (g, x, y, super::det(256 * 784, 7))
        };
        let shape = if workload == "w3" {
            [1024, 1024]
        } else {
            [256, 784]
        };
        let feed = HostTensor::new(shape, feed).unwrap();
        let t0 = Instant::now();
        let mut s = super::session(&g, dev, true);
        s.run(&[(x, feed)], &[y]).unwrap();
        println!("first_run_s={}", t0.elapsed().as_secs_f64());
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        println!("first runs: no executable path");
        return;
    };
    for workload in ["w4", "w3"] {
        let dir = std::env::temp_dir().join(format!(
            "wgflow-first-runs-{workload}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        // Mesa disables its cache (silently cold every time) when the directory does not
        // exist.
        if std::fs::create_dir_all(dir.join("mesa")).is_err() {
            println!("{workload} first run: cannot create {}", dir.display());
            continue;
        }
        let cold = child(&exe, spec, workload, &dir);
        let warm = child(&exe, spec, workload, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        match (cold, warm) {
            (Some(c), Some(w)) => println!(
                "{} first run on {spec} in a new process: cold caches {c:.3} s, warm caches {w:.3} s",
                workload.to_uppercase()
            ),
            _ => println!("{workload} first run: the child processes failed"),
        }
    }
}
