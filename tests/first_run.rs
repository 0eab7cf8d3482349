//! Fast first runs: register-blocked matmuls that read K from A's binding (so products that
//! differ only in K share one pipeline), a plan's pipelines created together (concurrently
//! where the backend allows it), and each pipeline's creation time in the debug log.
//!
//! Its own test binary: the log records are captured by a logger installed once per process.

mod common;

use std::sync::{Mutex, OnceLock};
use wgflow::ops::{AdapterKind, Kernel};
use wgflow::{Device, Graph, HostTensor, Tensor};

/// Every record at debug level or above, as "target: message".
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Debug
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let line = format!("{}: {}", r.target(), r.args());
            self.0.lock().unwrap().push(line);
        }
    }
    fn flush(&self) {}
}

fn captured() -> &'static Capture {
    static LOGGER: OnceLock<&'static Capture> = OnceLock::new();
    LOGGER.get_or_init(|| {
        let logger: &'static Capture = Box::leak(Box::new(Capture(Mutex::new(Vec::new()))));
        log::set_logger(logger).expect("no other logger in this binary");
        log::set_max_level(log::LevelFilter::Debug);
        logger
    })
}

/// Small exactly representable values (multiples of 1/8 in [-2, 2)), different per seed.
fn det(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| ((i * 7919 + seed * 104_729) % 32) as f32 / 8.0 - 2.0)
        .collect()
}

fn konst(g: &mut Graph, shape: &[usize], seed: u64) -> (Tensor, Vec<f32>) {
    let n = shape.iter().product();
    let v = det(n, seed);
    let t = g
        .constant(HostTensor::new(shape.to_vec(), v.clone()).unwrap())
        .unwrap();
    (t, v)
}

/// `a [m, k] @ b [k, n]` in float64.
fn matmul64(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                .sum();
        }
    }
    out
}

fn devices() -> Vec<Device> {
    let mut d = common::gpus();
    d.push(Device::Cpu);
    d
}

fn assert_f64(what: &str, got: &HostTensor, want: &[f64]) {
    let got = got.to_f32().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1.0);
        assert!(
            (f64::from(*g) - w).abs() <= tol,
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

/// Three products with the same M and N and different K, each with another epilogue kind
/// (a bias row then relu, a scalar, a full-shape addend), at M and N on either side of the
/// register blocks' edges, on every device against float64.
#[test]
fn products_differing_in_k_match_float64_on_every_device() {
    let shapes = [
        (1, 4, [4, 8, 12]),
        (15, 16, [4, 16, 20]),
        (16, 16, [12, 16, 28]),
        (17, 36, [4, 20, 60]),
        (32, 32, [16, 32, 36]),
        (33, 12, [8, 12, 784]),
        (64, 64, [16, 64, 80]),
    ];
    for device in devices() {
        for &(m, n, ks) in &shapes {
            let mut g = Graph::new();
            let mut outs = Vec::new();
            let mut want = Vec::new();
            for (e, &k) in ks.iter().enumerate() {
                let seed = (m * 1000 + n * 10 + e) as u64;
                let (a, av) = konst(&mut g, &[m, k], seed);
                let (b, bv) = konst(&mut g, &[k, n], seed + 1);
                let p = g.matmul(a, b).unwrap();
                let prod = matmul64(&av, &bv, m, k, n);
                let (y, w): (Tensor, Vec<f64>) = match e {
                    0 => {
                        let (bias, biv) = konst(&mut g, &[n], seed + 2);
                        let s = g.add(p, bias).unwrap();
                        let w = prod
                            .iter()
                            .enumerate()
                            .map(|(i, x)| (x + f64::from(biv[i % n])).max(0.0))
                            .collect();
                        (g.relu(s).unwrap(), w)
                    }
                    1 => {
                        let c = g.constant(-0.5f32).unwrap();
                        (
                            g.mul(p, c).unwrap(),
                            prod.iter().map(|x| x * -0.5).collect(),
                        )
                    }
                    _ => {
                        let (full, fv) = konst(&mut g, &[m, n], seed + 3);
                        let w = prod
                            .iter()
                            .zip(&fv)
                            .map(|(x, f)| x + f64::from(*f))
                            .collect();
                        (g.add(p, full).unwrap(), w)
                    }
                };
                outs.push(y);
                want.push(w);
            }
            let got = common::session_on(&g, device).run(&[], &outs).unwrap();
            for (e, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_f64(&format!("{device} m={m} n={n} k={} #{e}", ks[e]), got, want);
            }
        }
    }
}

/// Every kernel of such a plan, as each kind of adapter gets it, passes naga; products that
/// differ only in K get the same WGSL where the kernel reads K from A's binding, and a
/// batched one does not.
#[test]
fn shared_k_kernels_validate_and_coincide() {
    let mut g = Graph::new();
    let (x1, _) = konst(&mut g, &[48, 56], 1);
    let (w1, _) = konst(&mut g, &[56, 24], 2);
    let (x2, _) = konst(&mut g, &[48, 72], 3);
    let (w2, _) = konst(&mut g, &[72, 24], 4);
    let (bias, _) = konst(&mut g, &[24], 5);
    let (x3, _) = konst(&mut g, &[2, 48, 56], 6);
    let p1 = g.matmul(x1, w1).unwrap();
    let y1 = g.add(p1, bias).unwrap();
    let p2 = g.matmul(x2, w2).unwrap();
    let y2 = g.add(p2, bias).unwrap();
    let y3 = g.matmul(x3, w1).unwrap();
    let mut s = common::session_on(&g, Device::Cpu);
    let plan = s.plan(&[y1, y2, y3]).unwrap();
    let matmuls: Vec<&Kernel> = plan
        .steps
        .iter()
        .filter_map(|st| match &st.kind {
            wgflow::compile::StepKind::Dispatch { kernel, .. } => Some(kernel),
            _ => None,
        })
        .filter(|k| matches!(k, Kernel::MatMul(_)))
        .collect();
    assert_eq!(matmuls.len(), 3);
    for software in [true, false] {
        for gl in [false, true] {
            let adapter = AdapterKind { software, gl };
            let ks: Vec<Kernel> = matmuls.iter().map(|k| k.for_adapter(&adapter)).collect();
            for k in &ks {
                common::wgsl::check(k);
            }
            let Kernel::MatMul(first) = &ks[0] else {
                unreachable!()
            };
            assert!(first.shares_k(), "{adapter:?}");
            assert_eq!(ks[0].wgsl(), ks[1].wgsl(), "{adapter:?}");
            assert!(ks[0].wgsl().contains("arrayLength(&in0)"));
            let Kernel::MatMul(batched) = &ks[2] else {
                unreachable!()
            };
            assert!(!batched.shares_k(), "{adapter:?}");
            assert!(!ks[2].wgsl().contains("arrayLength"));
        }
    }
}

/// A plan's pipelines are created together (on threads on Vulkan, one by one on GL): the
/// counters count each distinct kernel once, a second session creates none, the results
/// are right, and the debug log gives each pipeline's creation time and later its cache hit.
#[test]
fn pipelines_created_together_are_counted_and_logged() {
    let log = captured();
    for device in common::gpus() {
        let mut g = Graph::new();
        // Shapes no other test in this binary uses, so the process-wide cache starts empty.
        let (x1, x1v) = konst(&mut g, &[20, 36], 11);
        let (w1, w1v) = konst(&mut g, &[36, 44], 12);
        let (x2, x2v) = konst(&mut g, &[20, 52], 13);
        let (w2, w2v) = konst(&mut g, &[52, 44], 14);
        let p1 = g.matmul(x1, w1).unwrap();
        let p2 = g.matmul(x2, w2).unwrap();
        let e1 = g.exp(p1).unwrap();
        let t2 = g.tanh(p2).unwrap();
        let sum = g.add(e1, t2).unwrap();
        let total = g.sum(sum, [1], false).unwrap();
        let fetches = [p1, p2, total];
        let (r1, r2) = (
            matmul64(&x1v, &w1v, 20, 36, 44),
            matmul64(&x2v, &w2v, 20, 52, 44),
        );
        let want_total: Vec<f64> = (0..20)
            .map(|i| {
                (0..44)
                    .map(|j| r1[i * 44 + j].exp() + r2[i * 44 + j].tanh())
                    .sum()
            })
            .collect();
        let mut s = common::session_on(&g, device);
        let got = s.run(&[], &fetches).unwrap();
        assert_f64(&format!("{device} p1"), &got[0], &r1);
        assert_f64(&format!("{device} p2"), &got[1], &r2);
        let total_got = got[2].to_f32().unwrap();
        for (i, (a, b)) in total_got.iter().zip(&want_total).enumerate() {
            assert!(
                (f64::from(*a) - b).abs() <= 1e-4 * b.abs().max(1.0),
                "{device} total {i}: {a} vs {b}"
            );
        }
        let plan = s.plan(&fetches).unwrap();
        let mut distinct: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|st| match &st.kind {
                wgflow::compile::StepKind::Dispatch { kernel, .. } => Some(kernel),
                _ => None,
            })
            .map(|k| {
                k.for_adapter(&AdapterKind {
                    software: true,
                    gl: false,
                })
                .wgsl()
            })
            .collect();
        let dispatches = distinct.len();
        distinct.sort();
        distinct.dedup();
        let created = s.counters().pipelines_created;
        // Both products read K from A's binding on every adapter (blocked, not tiled).
        assert!(
            distinct.len() < dispatches,
            "{device}: {dispatches} dispatches"
        );
        assert_eq!(created as usize, distinct.len(), "{device}");
        let mut again = common::session_on(&g, device);
        again.run(&[], &fetches).unwrap();
        assert_eq!(again.counters().pipelines_created, 0, "{device}");

        let lines = log.0.lock().unwrap().clone();
        let name = device.to_string();
        let labels = ["matmul [20, 36] @ [36, 44]]", "matmul [20, 52] @ [52, 44]]"];
        let mine = |l: &&String| {
            l.contains(&format!("{name}: pipeline ")) && labels.iter().any(|b| l.contains(b))
        };
        let created_line = lines
            .iter()
            .filter(mine)
            .find(|l| l.contains("created in"))
            .unwrap_or_else(|| panic!("{device}: no creation logged for the products"));
        let ms: f64 = created_line
            .split("created in ")
            .nth(1)
            .and_then(|r| r.strip_suffix(" ms"))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{device}: no time in {created_line}"));
        assert!(ms > 0.0, "{created_line}");
        assert!(
            lines.iter().filter(mine).any(|l| l.contains("same as")),
            "{device}: one product is not logged as sharing the other's pipeline"
        );
        let label = labels
            .into_iter()
            .find(|b| created_line.contains(b))
            .unwrap_or_default();
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("{name}: pipeline "))
                    && l.contains(label)
                    && l.contains("in-memory cache hit")),
            "{device}: the second session's cache hit is not logged"
        );
    }
}
