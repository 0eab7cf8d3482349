//! cumsum / cumprod (with exclusive and reverse) on cpu:0 and every GPU, against scans
//! computed here in f64 / wrapping integers, at sizes on both sides of the chunked path.

use crate::common;

use crate::common::{assert_close, gpus, session_on};
use wgflow::ops::ScanOp;
use wgflow::{DType, Device, Error, Graph, HostTensor, Shape};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

/// The scan of `x` (row-major `shape`) along `axis`, in f64, sequential in the axis order.
fn reference(
    op: ScanOp,
    x: &[f64],
    shape: &[usize],
    axis: usize,
    exclusive: bool,
    reverse: bool,
) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let n = shape[axis];
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = if op == ScanOp::Sum { 0.0 } else { 1.0 };
            for s in 0..n {
                let k = if reverse { n - 1 - s } else { s };
                let at = (o * n + k) * inner + i;
                if exclusive {
                    out[at] = acc;
                }
                acc = if op == ScanOp::Sum {
                    acc + x[at]
                } else {
                    acc * x[at]
                };
                if !exclusive {
                    out[at] = acc;
                }
            }
        }
    }
    out
}

fn run_f32(
    device: Device,
    op: ScanOp,
    x: &[f32],
    shape: &[usize],
    axis: isize,
    exclusive: bool,
    reverse: bool,
) -> HostTensor {
    let mut g = Graph::new();
    let t = g
        .constant(HostTensor::new(Shape(shape.to_vec()), x.to_vec()).unwrap())
        .unwrap();
    let y = g.cumulative(op, t, axis, exclusive, reverse).unwrap();
    session_on(&g, device).run(&[], &[y]).unwrap().remove(0)
}

#[test]
fn small_scans_match_f64_on_every_device() {
    let cases: &[(&[usize], isize)] = &[
        (&[7], 0),
        (&[3, 5], 0),
        (&[3, 5], 1),
        (&[3, 5], -1),
        (&[2, 3, 4], 1),
        (&[4, 1, 3], 0),
    ];
    for device in devices() {
        for &(shape, axis) in cases {
            let n: usize = shape.iter().product();
            // Values near 1 keep products finite and sums exact-ish.
            let x: Vec<f32> = (0..n).map(|i| 0.5 + ((i * 7) % 11) as f32 / 8.0).collect();
            let ax = if axis < 0 {
                shape.len() as isize + axis
            } else {
                axis
            } as usize;
            for op in [ScanOp::Sum, ScanOp::Prod] {
                for (exclusive, reverse) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let got = run_f32(device, op, &x, shape, axis, exclusive, reverse);
                    let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                    let want: Vec<f32> = reference(op, &xs, shape, ax, exclusive, reverse)
                        .iter()
                        .map(|&v| v as f32)
                        .collect();
                    let want = HostTensor::new(Shape(shape.to_vec()), want).unwrap();
                    let what = format!(
                        "{} {shape:?} axis {axis} exclusive {exclusive} reverse {reverse} on {device}",
                        op.name()
                    );
                    assert_close(&what, &got, &want, 1e-5, 1e-6);
                }
            }
        }
    }
}

#[test]
fn integer_scans_wrap_like_numpy() {
    for device in devices() {
        let mut g = Graph::new();
        let a = g.constant([i32::MAX, 1, 1, -3, 7]).unwrap();
        let s = g.cumsum(a, 0).unwrap();
        let b = g.constant([3u32, 1 << 20, 1 << 20, 5]).unwrap();
        let p = g.cumprod(b, 0).unwrap();
        let out = session_on(&g, device).run(&[], &[s, p]).unwrap();
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            vec![i32::MAX, i32::MIN, i32::MIN + 1, i32::MAX - 1, i32::MIN + 5],
            "{device}"
        );
        let p3 = 3u32.wrapping_mul(1 << 20);
        let p4 = p3.wrapping_mul(1 << 20);
        assert_eq!(
            out[1].to_vec::<u32>().unwrap(),
            vec![3, p3, p4, p4.wrapping_mul(5)],
            "{device}"
        );
    }
}

#[test]
fn nan_and_infinity_propagate_from_their_position() {
    for device in devices() {
        let x = [1.0f32, f32::NAN, 2.0, 3.0, f32::INFINITY, 1.0];
        let got = run_f32(device, ScanOp::Sum, &x, &[6], 0, false, false);
        let v = got.to_vec::<f32>().unwrap();
        assert_eq!(v[0], 1.0, "{device}");
        assert!(v[1..].iter().all(|x| x.is_nan()), "{device}: {v:?}");
        let got = run_f32(device, ScanOp::Sum, &x, &[6], 0, false, true);
        let v = got.to_vec::<f32>().unwrap();
        assert_eq!(
            &v[2..],
            &[f32::INFINITY, f32::INFINITY, f32::INFINITY, 1.0],
            "{device}"
        );
        assert!(v[..2].iter().all(|x| x.is_nan()), "{device}: {v:?}");
    }
}

/// Axes longer than one chunk run as chunk totals, a scan of the totals and a scan from the
/// prefixes; beyond 2048² elements the totals are chunked again. Integer sums are exact, so
/// every element is checked.
#[test]
fn long_axes_scan_in_chunks_exactly() {
    for device in devices() {
        for &(n, reverse, exclusive) in &[
            (2048usize, false, false),
            (2049, false, true),
            (100_003, true, false),
            ((1 << 22) + 2053, false, false),
            ((1 << 22) + 2053, true, true),
        ] {
            let x: Vec<i32> = (0..n).map(|i| (i % 7) as i32 - 3).collect();
            let mut g = Graph::new();
            let t = g.constant(x.clone()).unwrap();
            let y = g.cumulative(ScanOp::Sum, t, 0, exclusive, reverse).unwrap();
            let mut s = session_on(&g, device);
            // Chunked: totals, prefixes (chunked again past 2048² elements), the scan.
            let plan = s.plan(&[y]).unwrap();
            assert_eq!(plan.devices(), vec![device]);
            let want_steps = match n {
                0..=2048 => 1,
                2049..=4_194_304 => 3,
                _ => 5,
            };
            assert_eq!(plan.steps.len(), want_steps, "n {n}: {}", plan.describe());
            let got = s.run(&[], &[y]).unwrap()[0].to_vec::<i32>().unwrap();
            let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let want = reference(ScanOp::Sum, &xs, &[n], 0, exclusive, reverse);
            let bad = got.iter().zip(&want).position(|(&a, &b)| f64::from(a) != b);
            assert_eq!(
                bad, None,
                "n {n} reverse {reverse} exclusive {exclusive} on {device}"
            );
        }
    }
}

#[test]
fn a_long_f32_column_scan_stays_close_to_f64() {
    let (rows, cols) = (70_001usize, 3usize);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 2_654_435_761) % 1000) as f32 / 1000.0)
        .collect();
    let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let want = reference(ScanOp::Sum, &xs, &[rows, cols], 0, false, false);
    for device in devices() {
        let got = run_f32(device, ScanOp::Sum, &x, &[rows, cols], 0, false, false)
            .to_vec::<f32>()
            .unwrap();
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            let err = (f64::from(a) - b).abs() / b.abs().max(1.0);
            assert!(err < 1e-4, "{device}: element {i} {a} vs {b}");
        }
    }
}

#[test]
fn bad_scans_are_build_errors() {
    let mut g = Graph::new();
    let b = g.constant([true, false]).unwrap();
    let e = g.cumsum(b, 0).unwrap_err();
    assert!(matches!(e, Error::Build { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("cumsum") && m.contains("bool") && m.contains("ops_scan.rs"),
        "{m}"
    );
    let x = g.constant([1.0f32, 2.0]).unwrap();
    let m = g.cumprod(x, 1).unwrap_err().to_string();
    assert!(m.contains("cumprod") && m.contains("axis 1"), "{m}");
}

#[test]
fn scans_round_trip_through_graph_files() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3], DType::F32).unwrap();
    let y = g.cumulative(ScanOp::Prod, x, -1, true, true).unwrap();
    let z = g.cumsum(y, 0).unwrap();
    let text = g.to_json().unwrap();
    assert!(
        text.contains(r#""op": "cumprod""#) && text.contains(r#""exclusive": true"#),
        "{text}"
    );
    let back = Graph::from_json(&text).unwrap();
    assert_eq!(back.to_json().unwrap(), text);
    let feed = HostTensor::new(Shape(vec![2, 3]), vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let z2 = back.tensor(g.name(z).unwrap()).unwrap();
    let x2 = back.tensor("x").unwrap();
    let got = session_on(&back, Device::Cpu)
        .run(&[(x2, feed)], &[z2])
        .unwrap()
        .remove(0);
    // Exclusive reverse products along rows: [6, 3, 1], [30, 6, 1]; then sums down columns.
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        vec![6.0, 3.0, 1.0, 36.0, 9.0, 2.0]
    );
    let bad = text.replace(r#""reverse": true"#, r#""reverse": true, "flip": 1"#);
    let e = Graph::from_json(&bad).unwrap_err().to_string();
    assert!(e.contains("flip"), "{e}");
}

#[test]
fn every_scan_kernel_validates_with_naga() {
    use wgflow::ops::scan::{ScanKernel, ScanPass};
    use wgflow::ops::Kernel;
    for dtype in [DType::F32, DType::I32, DType::U32] {
        for op in [ScanOp::Sum, ScanOp::Prod] {
            for pass in [ScanPass::Whole, ScanPass::Totals, ScanPass::FromPrefix] {
                for (exclusive, reverse) in [(false, false), (true, true)] {
                    let k = Kernel::Scan(ScanKernel {
                        op,
                        exclusive,
                        reverse,
                        outer: 3,
                        n: 5000,
                        inner: 2,
                        dtype,
                        pass,
                    });
                    common::wgsl::check(&k);
                }
            }
        }
    }
}

/// Past the kernels' limits at once: 2 × 16,776,961 i32 (33.5M elements, > 2^24; 134 MB,
/// over lavapipe's 128 MiB binding limit, so input and output bind as windows), scanned
/// along axis 0 with one invocation per column: 16,776,961 invocations, one more than
/// 65,535 workgroups × 256, so the grid folds into two dimensions. Checked against sums
/// computed here.
#[test]
fn a_scan_past_the_grid_and_binding_limits_is_exact() {
    let cols = 65_535 * 256 + 1;
    let x: Vec<i32> = (0..2 * cols).map(|i| (i % 7) as i32 - 3).collect();
    for device in devices() {
        let mut g = Graph::new();
        let t = g
            .constant(HostTensor::new(vec![2, cols], x.clone()).unwrap())
            .unwrap();
        let y = g.cumsum(t, 0).unwrap();
        let got = session_on(&g, device).run(&[], &[y]).unwrap()[0]
            .to_vec::<i32>()
            .unwrap();
        assert_eq!(&got[..cols], &x[..cols], "row 0 on {device}");
        let bad = (0..cols).find(|&c| got[cols + c] != x[c] + x[cols + c]);
        assert_eq!(bad, None, "row 1 on {device}");
    }
}
