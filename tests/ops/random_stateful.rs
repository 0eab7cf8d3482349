//! Stateful random ops and dropout: new numbers on every run from the session's run counter,
//! the same sequence in every session and (uniform) bit for bit on every device, checked
//! against Philox4x32-10 written out again here; dropout's mask, scaling and gradient.

use crate::common::{gpus, session_on};
use wgflow::{DType, Device, Error, Graph, HostTensor, Session};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32")
}

/// Philox4x32-10 (Salmon et al., Random123's constants), independent of the library's.
fn philox(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for r in 0..10 {
        if r > 0 {
            k[0] = k[0].wrapping_add(0x9E37_79B9);
            k[1] = k[1].wrapping_add(0xBB67_AE85);
        }
        let p0 = u64::from(c[0]) * 0xD251_1F53;
        let p1 = u64::from(c[2]) * 0xCD9E_8D57;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// The documented uniform numbers: element `i` of run `run` (None: stateless) under `seed`.
fn uniform_ref(n: usize, low: f32, high: f32, seed: u64, run: Option<u64>) -> Vec<f32> {
    let key = [seed as u32, (seed >> 32) as u32];
    (0..n)
        .map(|i| {
            let ctr = match run {
                Some(k) => [i as u32, k as u32, (k >> 32) as u32, 1],
                None => [i as u32, 0, 0, 0],
            };
            let u = (philox(ctr, key)[0] >> 8) as f32 / 16_777_216.0;
            low + (high - low) * u
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn mean_var(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var)
}

#[test]
fn stateful_uniform_follows_the_documented_stream_run_by_run_on_every_device() {
    let (low, high, seed) = (-1.5f32, 2.5f32, 0x1234_5678_9abc_def0u64);
    for d in devices() {
        let mut g = Graph::new();
        // 1000 elements: several workgroups, the last one partial.
        let u = g
            .stateful_random_uniform([10, 100], low, high, seed)
            .unwrap();
        let mut s = session_on(&g, d);
        let mut previous: Option<Vec<f32>> = None;
        for run in 0..4u64 {
            let got = f32s(&s.run(&[], &[u]).unwrap()[0]);
            let want = uniform_ref(1000, low, high, seed, Some(run));
            assert_eq!(bits(&got), bits(&want), "{d}: run {run}");
            assert!(got.iter().all(|&x| (low..high).contains(&x)), "{d}");
            if let Some(p) = previous {
                let same = p.iter().zip(&got).filter(|(a, b)| a == b).count();
                assert!(
                    same < 5,
                    "{d}: run {run} repeats {same} of the last run's numbers"
                );
            }
            previous = Some(got);
        }
    }
}

#[test]
fn a_session_sequence_repeats_in_a_new_session_and_matches_across_devices() {
    let mut g = Graph::new();
    let u = g.stateful_random_uniform([257], 0.0, 1.0, 3).unwrap();
    let z = g.stateful_random_normal([257], 1.0, 2.0, 4).unwrap();
    let sequence = |d: Device| -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut s = session_on(&g, d);
        (0..3)
            .map(|_| {
                let out = s.run(&[], &[u, z]).unwrap();
                (f32s(&out[0]), f32s(&out[1]))
            })
            .collect()
    };
    let cpu = sequence(Device::Cpu);
    assert_eq!(cpu, sequence(Device::Cpu), "a second cpu:0 session");
    for d in gpus() {
        let gpu = sequence(d);
        for (k, ((gu, gz), (cu, cz))) in gpu.iter().zip(&cpu).enumerate() {
            assert_eq!(bits(gu), bits(cu), "{d}: uniform, run {k}");
            for (i, (a, b)) in gz.iter().zip(cz).enumerate() {
                // std 2: devices' log1p/sqrt differ in the last bits (1e-6·std documented).
                assert!(
                    (a - b).abs() <= 2e-6,
                    "{d}: normal, run {k}, element {i}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn the_counter_counts_only_runs_that_read_it() {
    for d in devices() {
        let mut g = Graph::new();
        let u = g.stateful_random_uniform([64], 0.0, 1.0, 9).unwrap();
        let c = g.constant([1.0f32, 2.0]).unwrap();
        let other = g.neg(c).unwrap();
        let mut s = session_on(&g, d);
        let first = f32s(&s.run(&[], &[u]).unwrap()[0]);
        s.run(&[], &[other]).unwrap();
        s.run(&[], &[other]).unwrap();
        let second = f32s(&s.run(&[], &[u]).unwrap()[0]);
        assert_eq!(
            bits(&first),
            bits(&uniform_ref(64, 0.0, 1.0, 9, Some(0))),
            "{d}"
        );
        assert_eq!(
            bits(&second),
            bits(&uniform_ref(64, 0.0, 1.0, 9, Some(1))),
            "{d}"
        );
        // Fetching two plans' worth: a plan that reads the op twice still counts one run.
        let both = s.run(&[], &[u, u]).unwrap();
        assert_eq!(both[0].words(), both[1].words(), "{d}");
        assert_eq!(f32s(&both[0]), uniform_ref(64, 0.0, 1.0, 9, Some(2)), "{d}");
    }
}

#[test]
fn failed_runs_do_not_advance_the_counter() {
    for d in devices() {
        let mut g = Graph::new();
        let u = g.stateful_random_uniform([16], 0.0, 1.0, 5).unwrap();
        let x = g.placeholder("x", [16], DType::F32).unwrap();
        let ux = g.add(u, x).unwrap();
        let mut s = session_on(&g, d);
        // A missing feed, then a feed of the wrong shape: neither run executes.
        assert!(s.run(&[], &[ux]).is_err());
        let wrong = HostTensor::new([3], vec![0.0f32; 3]).unwrap();
        assert!(s.run(&[(x, wrong)], &[ux]).is_err());
        let zeros = HostTensor::new([16], vec![0.0f32; 16]).unwrap();
        let first = f32s(&s.run(&[(x, zeros.clone())], &[ux]).unwrap()[0]);
        assert_eq!(
            bits(&first),
            bits(&uniform_ref(16, 0.0, 1.0, 5, Some(0))),
            "{d}"
        );
        assert!(s.run(&[], &[ux]).is_err());
        let second = f32s(&s.run(&[(x, zeros)], &[ux]).unwrap()[0]);
        assert_eq!(
            bits(&second),
            bits(&uniform_ref(16, 0.0, 1.0, 5, Some(1))),
            "{d}"
        );
    }
}

#[test]
fn stateless_ops_are_unchanged_and_differ_from_the_stateful_stream() {
    for d in devices() {
        let mut g = Graph::new();
        let fixed = g.random_uniform([300], 0.0, 1.0, 5).unwrap();
        let moving = g.stateful_random_uniform([300], 0.0, 1.0, 5).unwrap();
        let mut s = session_on(&g, d);
        let want = bits(&uniform_ref(300, 0.0, 1.0, 5, None));
        for run in 0..3 {
            let out = s.run(&[], &[fixed, moving]).unwrap();
            assert_eq!(out[0].words(), want, "{d}: stateless, run {run}");
            let same = out[0]
                .words()
                .iter()
                .zip(out[1].words())
                .filter(|(a, b)| a == b)
                .count();
            assert!(
                same < 3,
                "{d}: the stateful stream repeats the stateless one"
            );
        }
        // A plan of the stateless op alone feeds no counter.
        let plan = s.plan(&[fixed]).unwrap();
        assert!(plan.feeds.is_empty(), "{:?}", plan.feeds);
    }
}

#[test]
fn uniform_and_normal_statistics_over_65536_samples() {
    const N: usize = 1 << 16;
    for d in devices() {
        let mut g = Graph::new();
        let u = g.stateful_random_uniform([N], 0.0, 1.0, 11).unwrap();
        let z = g.stateful_random_normal([256, 256], 0.0, 1.0, 12).unwrap();
        let mut s = session_on(&g, d);
        let a = s.run(&[], &[u, z]).unwrap();
        let b = s.run(&[], &[u, z]).unwrap();
        for (k, out) in [&a, &b].into_iter().enumerate() {
            let (m, v) = mean_var(&f32s(&out[0]));
            // Standard errors: mean 0.289/256 = 1.1e-3, variance ~3.3e-4 (five of each).
            assert!((m - 0.5).abs() < 5.7e-3, "{d}: run {k}: uniform mean {m}");
            assert!(
                (v - 1.0 / 12.0).abs() < 1.7e-3,
                "{d}: run {k}: uniform var {v}"
            );
            let (m, v) = mean_var(&f32s(&out[1]));
            // Mean 1/256, variance sqrt(2/N) = 5.5e-3.
            assert!(m.abs() < 2e-2, "{d}: run {k}: normal mean {m}");
            assert!((v - 1.0).abs() < 2.8e-2, "{d}: run {k}: normal var {v}");
        }
        // Consecutive runs are uncorrelated: |r| within five standard errors (1/256).
        let (x, y) = (f32s(&a[0]), f32s(&b[0]));
        let cov: f64 = x
            .iter()
            .zip(&y)
            .map(|(&p, &q)| (f64::from(p) - 0.5) * (f64::from(q) - 0.5))
            .sum::<f64>()
            / N as f64;
        let r = cov * 12.0;
        assert!(r.abs() < 5.0 / 256.0, "{d}: correlation {r} between runs");
    }
}

#[test]
fn dropout_keeps_one_minus_rate_scales_and_draws_a_new_mask_each_run() {
    const N: usize = 1 << 16;
    let rate = 0.3f32;
    let scale = (1.0 / (1.0 - f64::from(rate))) as f32;
    for d in devices() {
        let mut g = Graph::new();
        let x = g.placeholder("x", [256, 256], DType::F32).unwrap();
        let y = g.dropout(x, rate, 21).unwrap();
        // The same stream as the dropout's own uniform: same seed, shape and counter.
        let u = g.stateful_random_uniform([256, 256], 0.0, 1.0, 21).unwrap();
        let xs: Vec<f32> = (0..N).map(|i| 1.0 + (i % 97) as f32 * 0.25).collect();
        let feed = HostTensor::new([256, 256], xs.clone()).unwrap();
        let mut s = session_on(&g, d);
        // The uniform draw, then the comparison, select and product fused into one kernel.
        let plan = s.plan(&[y]).unwrap();
        assert_eq!(plan.dispatch_count(), 2, "{d}\n{}", plan.describe());
        let mut masks = Vec::new();
        for run in 0..2 {
            let out = s.run(&[(x, feed.clone())], &[y, u]).unwrap();
            let (ys, us) = (f32s(&out[0]), f32s(&out[1]));
            let mut kept = 0;
            for i in 0..N {
                let keep = us[i] >= rate;
                let want = if keep { xs[i] * scale } else { 0.0 };
                assert_eq!(ys[i], want, "{d}: run {run}, element {i} (u = {})", us[i]);
                kept += keep as usize;
            }
            let frac = kept as f64 / N as f64;
            // Binomial standard error sqrt(0.21 / N) = 1.8e-3.
            assert!((frac - 0.7).abs() < 9e-3, "{d}: run {run}: kept {frac}");
            masks.push(ys.iter().map(|&v| v != 0.0).collect::<Vec<bool>>());
        }
        let same = masks[0]
            .iter()
            .zip(&masks[1])
            .filter(|(a, b)| a == b)
            .count();
        // Independent masks agree on 0.7² + 0.3² = 58% of the elements.
        let agree = same as f64 / N as f64;
        assert!((agree - 0.58).abs() < 0.02, "{d}: masks agree on {agree}");
    }
}

#[test]
fn dropout_gradient_is_the_scaled_mask_times_the_incoming_gradient() {
    let rate = 0.5f32;
    for d in devices() {
        let mut g = Graph::new();
        let x = g.placeholder("x", [4, 33], DType::F32).unwrap();
        let y = g.dropout(x, rate, 8).unwrap();
        let u = g.stateful_random_uniform([4, 33], 0.0, 1.0, 8).unwrap();
        let wv: Vec<f32> = (0..132).map(|i| (i as f32 - 60.0) * 0.125).collect();
        let w = g
            .constant(HostTensor::new([4, 33], wv.clone()).unwrap())
            .unwrap();
        let yw = g.mul(y, w).unwrap();
        let loss = g.sum(yw, [0, 1], false).unwrap();
        let dx = g.gradients(loss, &[x]).unwrap()[0].expect("a gradient");
        let feed = HostTensor::new([4, 33], vec![3.0f32; 132]).unwrap();
        let mut s = session_on(&g, d);
        for run in 0..2 {
            let out = s.run(&[(x, feed.clone())], &[dx, u, y]).unwrap();
            let (grad, us, ys) = (f32s(&out[0]), f32s(&out[1]), f32s(&out[2]));
            for i in 0..132 {
                let want = if us[i] >= rate { wv[i] * 2.0 } else { 0.0 };
                assert_eq!(grad[i], want, "{d}: run {run}, element {i}");
                assert_eq!(ys[i] != 0.0, us[i] >= rate, "{d}: the forward mask");
            }
        }
    }
}

#[test]
fn dropout_of_f16_scales_in_f16() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [300], DType::F16).unwrap();
    let y = g.dropout(x, 0.25, 4).unwrap();
    let u = g.stateful_random_uniform([300], 0.0, 1.0, 4).unwrap();
    let xs: Vec<wgflow::f16> = (0..300)
        .map(|i| wgflow::f16::from_f32(0.5 + i as f32 / 64.0))
        .collect();
    let mut s = session_on(&g, Device::Cpu);
    let out = s
        .run(&[(x, HostTensor::new([300], xs.clone()).unwrap())], &[y, u])
        .unwrap();
    let ys = out[0].to_vec::<wgflow::f16>().unwrap();
    let us = f32s(&out[1]);
    let scale = wgflow::f16::from_f64(1.0 / 0.75);
    for i in 0..300 {
        let want = if us[i] >= 0.25 {
            wgflow::f16::from_f32(xs[i].to_f32() * scale.to_f32())
        } else {
            wgflow::f16::ZERO
        };
        assert_eq!(ys[i], want, "element {i}");
    }
}

#[test]
fn dropout_rate_zero_is_the_identity_and_bad_arguments_are_errors() {
    let mut g = Graph::new();
    let x = g.constant([1.0f32, 2.0]).unwrap();
    assert_eq!(g.dropout(x, 0.0, 1).unwrap(), x);
    for rate in [1.0, 1.5, -0.25, f32::NAN] {
        let e = g.dropout(x, rate, 1).unwrap_err();
        assert!(
            e.to_string().contains("rate must lie in [0, 1)"),
            "{rate}: {e}"
        );
    }
    let i = g.constant([1i32, 2]).unwrap();
    let e = g.dropout(i, 0.5, 1).unwrap_err().to_string();
    assert!(e.contains("dropout") && e.contains("i32"), "{e}");
    let e = g
        .stateful_random_uniform([2], 1.0, 0.0, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("low <= high"), "{e}");
    let e = g
        .stateful_random_normal([2], 0.0, -1.0, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("std >= 0"), "{e}");
}

#[test]
fn the_run_counter_is_one_unscoped_placeholder_the_user_cannot_feed() {
    let mut g = Graph::new();
    let a = g
        .name_scope("layer", |g| {
            g.device("cpu:0", |g| g.stateful_random_uniform([3], 0.0, 1.0, 1))
        })
        .unwrap();
    let b = g.stateful_random_normal([2], 0.0, 1.0, 2).unwrap();
    let counter = g
        .tensor("wgflow/run_counter")
        .expect("the counter placeholder");
    assert_eq!(g.inputs(a).unwrap(), vec![counter]);
    assert_eq!(g.inputs(b).unwrap(), vec![counter]);
    assert_eq!(g.requested_device(counter).unwrap(), None);
    assert_eq!(g.dtype(counter).unwrap(), DType::U32);
    let mut s = session_on(&g, Device::Cpu);
    let err = s
        .run(&[(counter, HostTensor::from([0u32, 0]))], &[a])
        .unwrap_err();
    assert!(matches!(err, Error::Feed { .. }), "{err}");
    assert!(err.to_string().contains("run counter"), "{err}");

    // A node of another kind under the reserved name.
    let mut h = Graph::new();
    h.placeholder("wgflow/run_counter", [3], DType::F32)
        .unwrap();
    let e = h
        .stateful_random_uniform([2], 0.0, 1.0, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("reserved") && e.contains("u32 [2]"), "{e}");
    // ... which the session will not feed either.
    let p = h.tensor("wgflow/run_counter").unwrap();
    let y = h.neg(p).unwrap();
    let err = session_on(&h, Device::Cpu).run(&[], &[y]).unwrap_err();
    assert!(matches!(err, Error::Feed { .. }), "{err}");
    assert!(
        err.to_string().contains("reserved for the run counter"),
        "{err}"
    );
}

#[test]
fn plans_on_two_devices_share_one_counter_and_reruns_create_nothing() {
    for d in gpus() {
        let mut g = Graph::new();
        let on_cpu = g
            .device("cpu:0", |g| g.stateful_random_uniform([500], 0.0, 1.0, 77))
            .unwrap();
        let spec = d.to_string();
        let on_gpu = g
            .device(&spec, |g| g.stateful_random_uniform([500], 0.0, 1.0, 77))
            .unwrap();
        let mut s = session_on(&g, d);
        for run in 0..2 {
            let out = s.run(&[], &[on_cpu, on_gpu]).unwrap();
            assert_eq!(out[0].words(), out[1].words(), "{d}: run {run}");
            assert_eq!(
                f32s(&out[0]),
                uniform_ref(500, 0.0, 1.0, 77, Some(run)),
                "{d}"
            );
        }
        let before = s.counters();
        s.run(&[], &[on_cpu, on_gpu]).unwrap();
        let after = s.counters();
        assert_eq!(before.buffers_created, after.buffers_created, "{d}");
        assert_eq!(before.pipelines_created, after.pipelines_created, "{d}");
        assert_eq!(before.bind_groups_created, after.bind_groups_created, "{d}");
    }
}

#[test]
fn stateful_ops_and_dropout_survive_a_graph_file() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [40], DType::F32).unwrap();
    let y = g.dropout(x, 0.25, 6).unwrap();
    let z = g.stateful_random_normal([5], 0.0, 1.0, 7).unwrap();
    let text = g.to_json().unwrap();
    assert!(text.contains("stateful_random_uniform") && text.contains("stateful_random_normal"));
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_json().unwrap(), text);
    let run = |g: &Graph, y: &str, z: &str| {
        let mut s: Session = session_on(g, Device::Cpu);
        let feed = HostTensor::new([40], vec![2.0f32; 40]).unwrap();
        (0..2)
            .map(|_| {
                s.run_named(&[("x", feed.clone())], &[y, z])
                    .unwrap()
                    .into_iter()
                    .map(|t| t.words().to_vec())
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let (yn, zn) = (
        g.name(y).unwrap().to_string(),
        g.name(z).unwrap().to_string(),
    );
    assert_eq!(run(&g, &yn, &zn), run(&h, &yn, &zn));

    // A file whose stateful op reads another u32 [2] placeholder is refused.
    let counter =
        r#"{"name": "wgflow/run_counter", "op": "placeholder", "shape": [2], "dtype": "u32"},"#;
    let other = r#"{"name": "other", "op": "placeholder", "shape": [2], "dtype": "u32"},"#;
    let reads = r#""inputs": ["wgflow/run_counter"], "shape": [5]"#;
    assert!(text.contains(counter) && text.contains(reads), "{text}");
    let forged = text
        .replace(counter, &format!("{counter}\n    {other}"))
        .replace(reads, r#""inputs": ["other"], "shape": [5]"#);
    let e = Graph::from_json(&forged).unwrap_err().to_string();
    assert!(
        e.contains("must read the placeholder 'wgflow/run_counter'"),
        "{e}"
    );
}

#[test]
fn empty_stateful_tensors_are_empty() {
    for d in devices() {
        let mut g = Graph::new();
        let u = g.stateful_random_uniform([0, 5], 0.0, 1.0, 1).unwrap();
        let x = g
            .constant(HostTensor::new([0], Vec::<f32>::new()).unwrap())
            .unwrap();
        let y = g.dropout(x, 0.5, 2).unwrap();
        let mut s = session_on(&g, d);
        let out = s.run(&[], &[u, y]).unwrap();
        assert_eq!(out[0].shape().0, vec![0, 5], "{d}");
        assert_eq!(out[1].shape().0, vec![0], "{d}");
    }
}
