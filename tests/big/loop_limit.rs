//! Mesa's llvmpipe/lavapipe silently end every loop of an invocation after 65,535 iterations
//! in total. Long matmuls (K) and convolutions (input channels × window) are split so that
//! no invocation comes near that; what cannot be split (a huge pooling window) is an error on
//! software adapters, never a wrong result. Each case is checked against float64 on cpu:0
//! and every GPU, at the split boundaries.

use crate::common::{assert_close, gpus, session_on};
use wgflow::{Conv2dOptions, Device, Error, Graph, HostTensor};

/// Positive multiples of 1/16: products are multiples of 1/256, so every f32 partial sum of
/// up to 2^16 of them is exact and a lost tail cannot hide inside the tolerance.
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 5) % 17 + 1) as f32 / 16.0)
        .collect()
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

#[test]
fn long_k_matmuls_are_exact_on_every_device() {
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let (mut outs, mut want, mut what) = (Vec::new(), Vec::new(), Vec::new());
    // Around one chunk (32768), past the limit with one output per invocation (70000) and
    // with 4×4 blocks (300000 / 4 > 65535).
    for k in [32768, 32769, 70000, 300000] {
        for (m, n) in [(1, 1), (4, 4)] {
            let (va, vb) = (data(m * k, k), data(k * n, k + 1));
            let a = g
                .constant(HostTensor::new(vec![m, k], va.clone()).unwrap())
                .unwrap();
            let b = g
                .constant(HostTensor::new(vec![k, n], vb.clone()).unwrap())
                .unwrap();
            outs.push(g.matmul(a, b).unwrap());
            let mut r = Vec::new();
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k)
                        .map(|t| va[i * k + t] as f64 * vb[t * n + j] as f64)
                        .sum();
                    r.push(s as f32);
                }
            }
            want.push(HostTensor::new(vec![m, n], r).unwrap());
            what.push(format!("[{m}, {k}] @ [{k}, {n}]"));
        }
        // 1-D: a dot product.
        let (va, vb) = (data(k, 2 * k), data(k, 2 * k + 1));
        let a = g
            .constant(HostTensor::new(vec![k], va.clone()).unwrap())
            .unwrap();
        let b = g
            .constant(HostTensor::new(vec![k], vb.clone()).unwrap())
            .unwrap();
        outs.push(g.matmul(a, b).unwrap());
        let s: f64 = va.iter().zip(&vb).map(|(&x, &y)| x as f64 * y as f64).sum();
        want.push(HostTensor::new(Vec::<usize>::new(), vec![s as f32]).unwrap());
        what.push(format!("[{k}] @ [{k}]"));
    }
    for d in devices() {
        let got = session_on(&g, d).run(&[], &outs).unwrap();
        for i in 0..outs.len() {
            assert_close(&format!("{} on {d}", what[i]), &got[i], &want[i], 1e-6, 0.0);
        }
    }
}

/// Channels are split so that channels · (1 + kh · (1 + kw)) stays within 32,768 loop
/// iterations (2520 channels for 3×3: one chunk, 2521: two). Mesa unrolls the 3×3 window
/// loops, so 8192 channels still ran right unsplit; 70,000 did not (the tail was dropped).
#[test]
fn many_channel_convolutions_are_exact_on_every_device() {
    let _heavy = crate::heavy();
    let mut g = Graph::new();
    let (mut outs, mut want) = (Vec::new(), Vec::new());
    for c in [2520, 2521, 8192, 70000] {
        let (o, h, w) = (2, 3, 3);
        let (vx, vw) = (data(c * h * w, c), data(o * c * 9, c + 1));
        let x = g
            .constant(HostTensor::new(vec![1, c, h, w], vx.clone()).unwrap())
            .unwrap();
        let wt = g
            .constant(HostTensor::new(vec![o, c, 3, 3], vw.clone()).unwrap())
            .unwrap();
        let bias = g
            .constant(HostTensor::new(vec![o], vec![0.5f32, -0.25]).unwrap())
            .unwrap();
        let opts = Conv2dOptions {
            padding: [1, 1],
            ..Default::default()
        };
        let y = g.conv2d(x, wt, Some(bias), opts).unwrap();
        let y = g.relu(y).unwrap();
        outs.push(y);
        let mut r = Vec::new();
        for oc in 0..o {
            for oy in 0..h {
                for ox in 0..w {
                    let mut s = [0.5f64, -0.25][oc];
                    for ci in 0..c {
                        for ki in 0..3 {
                            for kj in 0..3 {
                                let (iy, ix) = ((oy + ki) as isize - 1, (ox + kj) as isize - 1);
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xv = vx[(ci * h + iy as usize) * w + ix as usize] as f64;
                                s += xv * vw[((oc * c + ci) * 3 + ki) * 3 + kj] as f64;
                            }
                        }
                    }
                    r.push(s.max(0.0) as f32);
                }
            }
        }
        want.push(HostTensor::new(vec![1, o, h, w], r).unwrap());
    }
    for d in devices() {
        let got = session_on(&g, d).run(&[], &outs).unwrap();
        for (i, c) in [2520, 2521, 8192, 70000].iter().enumerate() {
            assert_close(
                &format!("conv2d over {c} channels on {d}"),
                &got[i],
                &want[i],
                // Up to 28 chunk sums of ~2^15 each, added in f32.
                4e-6,
                0.0,
            );
        }
    }
}

/// A 255×255 window loops 255 · 256 = 65,280 times and is right everywhere; a 256×256 one
/// (65,792) is right on cpu:0 and a compile-time error on software GPUs.
#[test]
fn pooling_windows_at_the_loop_limit() {
    let _heavy = crate::heavy();
    for (side, fits) in [(255usize, true), (256, false)] {
        let v = data(side * side, side);
        let mut g = Graph::new();
        let x = g
            .constant(HostTensor::new(vec![1, 1, side, side], v.clone()).unwrap())
            .unwrap();
        let mx = g.max_pool2d(x, [side, side], [1, 1], [0, 0]).unwrap();
        let av = g.avg_pool2d(x, [side, side], [1, 1], [0, 0]).unwrap();
        let max = v.iter().cloned().fold(f32::MIN, f32::max);
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let wmax = HostTensor::new(vec![1, 1, 1, 1], vec![max]).unwrap();
        let wavg = HostTensor::new(vec![1, 1, 1, 1], vec![mean as f32]).unwrap();
        for d in devices() {
            let software = wgflow::devices()
                .iter()
                .any(|p| p.device == d && p.device_type == "software");
            match session_on(&g, d).run(&[], &[mx, av]) {
                Ok(got) => {
                    assert!(fits || !software, "{side}x{side} window ran on {d}");
                    assert_close(&format!("max {side}² on {d}"), &got[0], &wmax, 0.0, 0.0);
                    assert_close(&format!("avg {side}² on {d}"), &got[1], &wavg, 1e-6, 0.0);
                }
                Err(e @ Error::LoopLimit { .. }) => {
                    assert!(!fits && software, "{d}: {e}");
                    let msg = e.to_string();
                    assert!(msg.contains("65792") && msg.contains("65535"), "{msg}");
                }
                Err(e) => panic!("{side}x{side} on {d}: {e}"),
            }
        }
    }
}

/// A GPU prepare that fails partway (the arena and constants are allocated before the
/// pooling kernel is refused) still counts the buffers it created.
#[test]
fn a_prepare_that_fails_partway_counts_its_buffers() {
    let _heavy = crate::heavy();
    let side = 256;
    let mut g = Graph::new();
    let x = g
        .constant(HostTensor::new(vec![1, 1, side, side], data(side * side, side)).unwrap())
        .unwrap();
    let mx = g.max_pool2d(x, [side, side], [1, 1], [0, 0]).unwrap();
    let y = g.relu(x).unwrap();
    for d in devices() {
        let software = wgflow::devices()
            .iter()
            .any(|p| p.device == d && p.device_type == "software");
        if !software {
            continue;
        }
        let mut s = session_on(&g, d);
        let before = s.counters();
        let e = s.run(&[], &[mx, y]).unwrap_err();
        assert!(matches!(e, Error::LoopLimit { .. }), "{e}");
        let after = s.counters();
        assert!(
            after.buffers_created > before.buffers_created,
            "{d}: {before:?} -> {after:?}"
        );
        assert_eq!(after.runs, before.runs, "{d}: nothing ran");
    }
}
