//! Sizes at the dispatch-grid boundary: `max_compute_workgroups_per_dimension` (65,535)
//! workgroups of 256 invocations in one dimension, one past it (the grid folds into 2-D),
//! and 2^24 + 1 (past f32's integer precision), for the kernel kinds that dispatch one
//! invocation per element: elementwise (scalar path: odd sizes), transpose and gather. Every
//! GPU, against values computed here.

use crate::common;

use wgflow::{DType, Graph, HostTensor};

const EDGE: usize = 65_535 * 256;

#[test]
fn elementwise_transpose_and_gather_at_the_grid_boundary() {
    let _heavy = crate::heavy();
    for gpu in common::gpus() {
        for n in [EDGE - 1, EDGE + 1, (1 << 24) + 1] {
            let x: Vec<f32> = (0..n).map(|i| (i % 65_521) as f32).collect();
            let idx: Vec<i32> = (0..n as i32).rev().collect();
            let mut g = Graph::new();
            let t = g.placeholder("x", vec![n], DType::F32).unwrap();
            let ti = g.placeholder("i", vec![n], DType::I32).unwrap();
            let neg = g.neg(t).unwrap();
            let rev = g.take(t, ti, 0).unwrap();
            // [n] as [n/… , …] needs a factorisation; [1, n] -> [n, 1] is a pure relabel, so
            // transpose [3, m] with 3m just past the edge instead.
            let m = n.div_ceil(3);
            let t2 = g.placeholder("y", vec![3, m], DType::F32).unwrap();
            let tr = g.transpose(t2, &[1, 0]).unwrap();
            let y: Vec<f32> = (0..3 * m).map(|i| (i % 65_521) as f32).collect();
            let mut s = common::session_on(&g, gpu);
            let out = s
                .run(
                    &[
                        (t, HostTensor::new(vec![n], x.clone()).unwrap()),
                        (ti, HostTensor::new(vec![n], idx).unwrap()),
                        (t2, HostTensor::new(vec![3, m], y.clone()).unwrap()),
                    ],
                    &[neg, rev, tr],
                )
                .unwrap();
            let neg = out[0].to_vec::<f32>().unwrap();
            let rev = out[1].to_vec::<f32>().unwrap();
            let tr = out[2].to_vec::<f32>().unwrap();
            for i in [0, 1, n / 2, EDGE - 2, EDGE - 1, EDGE, n - 2, n - 1] {
                if i >= n {
                    continue;
                }
                assert_eq!(neg[i], -x[i], "neg[{i}] of {n} on {gpu}");
                assert_eq!(rev[i], x[n - 1 - i], "take[{i}] of {n} on {gpu}");
            }
            assert!(
                neg.iter().zip(&x).all(|(a, b)| *a == -*b),
                "neg of {n} on {gpu}"
            );
            assert!(
                rev.iter().zip(x.iter().rev()).all(|(a, b)| a == b),
                "take of {n} on {gpu}"
            );
            for (k, &v) in tr.iter().enumerate() {
                let (j, r) = (k / 3, k % 3);
                assert_eq!(v, y[r * m + j], "transpose[{j}, {r}] of [3, {m}] on {gpu}");
            }
        }
    }
}
