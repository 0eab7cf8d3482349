//! Tensors past `max_storage_buffer_binding_size` (128 MiB on lavapipe and llvmpipe) run:
//! kernels bind them as several windows of one buffer. Elementwise, reductions, matmul, a
//! transpose and transfers at 1x, 2x and 3x the limit, on every GPU against values computed
//! here (and cpu:0 where the op is cheap). Raw WGSL kernels, which see whole bindings, get a
//! clear error instead.

use crate::common;

use wgflow::{DType, Device, Graph, HostTensor};

fn limit(gpu: Device) -> u64 {
    wgflow::devices()
        .into_iter()
        .find(|d| d.device == gpu)
        .map(|d| d.limits.max_storage_buffer_binding_size)
        .unwrap()
}

fn val(i: usize) -> f32 {
    ((i.wrapping_mul(2_654_435_761) >> 7) % 1000) as f32 * 0.001
}

#[test]
fn elementwise_past_the_binding_limit() {
    let _heavy = crate::heavy();
    for gpu in common::gpus() {
        for k in [1u64, 2, 3] {
            // Just past k windows, with an odd tail.
            let n = (k * limit(gpu) / 4 + 7) as usize;
            let x: Vec<f32> = (0..n).map(val).collect();
            let mut g = Graph::new();
            let t = g.placeholder("x", vec![n], DType::F32).unwrap();
            let two = g.constant(2.0f32).unwrap();
            let y = g.mul(t, two).unwrap();
            let z = g.add(y, t).unwrap(); // 3x, fused into one kernel over three windows each
            let mut s = common::session_on(&g, gpu);
            let out = s
                .run(&[(t, HostTensor::new(vec![n], x.clone()).unwrap())], &[z])
                .unwrap_or_else(|e| panic!("{k}x on {gpu}: {e}"));
            let got = out[0].to_vec::<f32>().unwrap();
            for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
                assert_eq!(g, v * 2.0 + v, "{k}x on {gpu}: element {i} of {n}");
            }
        }
    }
}

#[test]
fn reductions_matmul_and_transpose_past_the_binding_limit() {
    let _heavy = crate::heavy();
    for gpu in common::gpus() {
        let n = (3 * limit(gpu) / 4 + 64) as usize;
        // Row sums and a column max of [rows, 64]; matmul [rows, 64] @ [64, 3].
        let cols = 64;
        let rows = n / cols;
        let x: Vec<f32> = (0..rows * cols).map(val).collect();
        let w: Vec<f32> = (0..cols * 3).map(|i| (i % 7) as f32 - 3.0).collect();
        let mut g = Graph::new();
        let t = g.placeholder("x", vec![rows, cols], DType::F32).unwrap();
        let tw = g
            .constant(HostTensor::new(vec![cols, 3], w.clone()).unwrap())
            .unwrap();
        let rs = g.sum(t, [1], false).unwrap();
        let cm = g.max(t, [0], false).unwrap();
        let mm = g.matmul(t, tw).unwrap();
        let tr = g.transpose(t, &[1, 0]).unwrap();
        let tr_sum = g.sum(tr, [1], false).unwrap(); // column sums through the big transpose
        let mut s = common::session_on(&g, gpu);
        let out = s
            .run(
                &[(t, HostTensor::new(vec![rows, cols], x.clone()).unwrap())],
                &[rs, cm, mm, tr_sum],
            )
            .unwrap_or_else(|e| panic!("on {gpu}: {e}"));
        let rs = out[0].to_vec::<f32>().unwrap();
        let cm = out[1].to_vec::<f32>().unwrap();
        let mm = out[2].to_vec::<f32>().unwrap();
        let cs = out[3].to_vec::<f32>().unwrap();
        let mut col_max = vec![f32::MIN; cols];
        let mut col_sum = vec![0f64; cols];
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let want: f64 = row.iter().map(|&v| v as f64).sum();
            assert!(
                (rs[r] as f64 - want).abs() <= 1e-5 * want.max(1.0),
                "row {r} on {gpu}"
            );
            for j in 0..3 {
                let want: f64 = (0..cols).map(|c| row[c] as f64 * w[c * 3 + j] as f64).sum();
                let got = mm[r * 3 + j] as f64;
                assert!(
                    (got - want).abs() <= 1e-4,
                    "matmul [{r}, {j}] on {gpu}: {got} vs {want}"
                );
            }
            for c in 0..cols {
                col_max[c] = col_max[c].max(row[c]);
                col_sum[c] += row[c] as f64;
            }
        }
        assert_eq!(cm, col_max, "column max on {gpu}");
        for c in 0..cols {
            let rel = (cs[c] as f64 - col_sum[c]).abs() / col_sum[c];
            assert!(
                rel <= 2e-6,
                "column {c} sum via transpose on {gpu}: {} vs {}",
                cs[c],
                col_sum[c]
            );
        }
    }
}

#[test]
fn big_tensors_move_between_devices() {
    let _heavy = crate::heavy();
    let gpus = common::gpus();
    let Some(&first) = gpus.first() else { return };
    let n = (2 * limit(first) / 4 + 5) as usize;
    let x: Vec<f32> = (0..n).map(val).collect();
    let mut g = Graph::new();
    let t = g.placeholder("x", vec![n], DType::F32).unwrap();
    let spec = first.to_string();
    let y = g.device(&spec, |g| g.neg(t)).unwrap();
    // To every other device (the CPU and the other GPUs) and back through an add.
    let mut ends = vec![y];
    for d in gpus
        .iter()
        .skip(1)
        .map(|d| d.to_string())
        .chain(["cpu:0".to_string()])
    {
        let z = g.device(&d, |g| g.abs(y)).unwrap();
        ends.push(g.device(&spec, |g| g.add(z, y)).unwrap());
    }
    let mut s = common::session_on(&g, first);
    let out = s
        .run(&[(t, HostTensor::new(vec![n], x.clone()).unwrap())], &ends)
        .unwrap();
    assert_eq!(
        out[0]
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .zip(&x)
            .filter(|(a, b)| **a != -**b)
            .count(),
        0
    );
    for o in &out[1..] {
        // |-x| + -x == 0 for every finite x.
        assert!(o.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    }
}

#[test]
fn raw_kernels_over_the_binding_limit_are_a_clear_error() {
    let _heavy = crate::heavy();
    use wgflow::ops::custom::{Invocations, OutputRule, RawWgsl};
    for gpu in common::gpus() {
        let lim = limit(gpu);
        let n = (lim / 4 + 1) as usize;
        let k = RawWgsl::new(
            "copy",
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>) { if (gid.x < arrayLength(&y)) { y[gid.x] = x[gid.x]; } }",
            "main",
            OutputRule::LikeInput(0),
            Invocations::PerOutputElement,
        );
        let mut g = Graph::new();
        let x = g.placeholder("big", vec![n], DType::F32).unwrap();
        let y = g.raw_kernel(&k, &[x]).unwrap();
        let mut s = common::session_on(&g, gpu);
        let err = s.plan(&[y]).unwrap_err().to_string();
        assert!(
            err.contains("max_storage_buffer_binding_size") && err.contains(&lim.to_string()),
            "{err}"
        );
    }
}

/// The quantized models' integer products at the indexing boundaries: an i32 matmul of 8-bit
/// values whose output and left operand are each past the binding limit (so past 2^24
/// elements, and past 65,535 workgroups in one dimension), on cpu:0 (the `vpmaddwd` integer
/// GEMM) and every GPU (windowed bindings), exact against i64 sums computed here on a
/// sample of rows that includes both ends and every window seam.
#[test]
fn integer_matmul_past_the_binding_limit_is_exact() {
    let _heavy = crate::heavy();
    let gpus = common::gpus();
    let lim = gpus.first().map_or(128 << 20, |&g| limit(g));
    let (k, n) = (64usize, 48usize);
    let m = (lim as usize / 4) / n + 5;
    assert!(m * n > 1 << 24 && m * k * 4 > lim as usize);
    // 8-bit values, as MatMulInteger's zero-point-shifted operands.
    let q = |i: usize| ((i.wrapping_mul(2_654_435_761) >> 9) % 256) as i32 - 128;
    let a: Vec<i32> = (0..m * k).map(q).collect();
    let b: Vec<i32> = (0..k * n).map(|i| q(i + 7)).collect();
    let mut g = Graph::new();
    let ta = g.placeholder("a", vec![m, k], DType::I32).unwrap();
    let tb = g
        .constant(HostTensor::new(vec![k, n], b.clone()).unwrap())
        .unwrap();
    let y = g.matmul(ta, tb).unwrap();
    let feed = HostTensor::new(vec![m, k], a.clone()).unwrap();
    // Rows at the ends, around each window seam of the output and of A, and a stride.
    let mut rows: Vec<usize> = (0..m).step_by(4099).chain([1, m - 2, m - 1]).collect();
    for w in 1..4 {
        for bytes_per_row in [4 * n, 4 * k] {
            let seam = w * lim as usize / bytes_per_row;
            rows.extend(seam.saturating_sub(1)..(seam + 2).min(m));
        }
    }
    let mut devices = vec![Device::Cpu];
    devices.extend(gpus);
    for d in devices {
        let mut s = common::session_on(&g, d);
        let out = s
            .run(&[(ta, feed.clone())], &[y])
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        let got = out[0].to_vec::<i32>().unwrap();
        assert_eq!(got.len(), m * n, "{d}");
        for &r in &rows {
            for c in 0..n {
                let want: i64 = (0..k)
                    .map(|j| a[r * k + j] as i64 * b[j * n + c] as i64)
                    .sum();
                assert_eq!(
                    got[r * n + c] as i64,
                    want,
                    "{d}: row {r} of {m}, column {c}"
                );
            }
        }
    }
}
