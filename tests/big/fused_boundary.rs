//! The fused primitives at the dispatch-grid boundary and past 2^24 elements: layer
//! normalisation and cross-entropy over 65,537 rows (one GPU workgroup per row, one past
//! `max_compute_workgroups_per_dimension`, so the grid folds into 2-D; 65,537 × 257 =
//! 2^24 + 65,793 values),
//! and `segment_sum` with an output of 2^24 + 4 elements (one invocation per element).
//! cpu:0 and every GPU, against float64 computed here.

use crate::common;

use wgflow::{Axes, DType, Device, Graph, HostTensor};

const ROWS: usize = 65_537;

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

fn val(i: usize) -> f32 {
    ((i.wrapping_mul(2_654_435_761) >> 7) % 1000) as f32 * 0.004 - 2.0
}

#[test]
fn row_ops_over_more_rows_than_a_grid_dimension() {
    let _heavy = crate::heavy();
    let d = 257;
    let n = ROWS * d;
    assert!(n > 1 << 24);
    let x: Vec<f32> = (0..n).map(val).collect();
    let gamma: Vec<f32> = (0..d).map(|e| 1.0 + e as f32 * 0.001).collect();
    let beta: Vec<f32> = (0..d).map(|e| e as f32 * -0.002).collect();
    let c = 5;
    let logits: Vec<f32> = (0..ROWS * c).map(|i| val(i * 3)).collect();
    let labels: Vec<i32> = (0..ROWS).map(|r| (r * 7 % c) as i32).collect();
    // Rows to check: the first, around each 65,535-workgroup edge, the last.
    let rows = [0, 1, 65_534, 65_535, 65_536];
    for device in devices() {
        let mut g = Graph::new();
        let xt = g.placeholder("x", [ROWS, d], DType::F32).unwrap();
        let gt = g
            .constant(HostTensor::new([d], gamma.clone()).unwrap())
            .unwrap();
        let bt = g
            .constant(HostTensor::new([d], beta.clone()).unwrap())
            .unwrap();
        let y = g.layer_norm(xt, Some(gt), Some(bt), -1, 1e-5).unwrap();
        let lt = g.placeholder("l", [ROWS, c], DType::F32).unwrap();
        let yt = g
            .constant(HostTensor::new([ROWS], labels.clone()).unwrap())
            .unwrap();
        let loss = g.sparse_softmax_cross_entropy(lt, yt).unwrap();
        let total = g.sum(loss, Axes::All, false).unwrap();
        let dl = g.gradients(total, &[lt]).unwrap()[0].unwrap();
        let out = common::session_on(&g, device)
            .run(
                &[
                    (xt, HostTensor::new([ROWS, d], x.clone()).unwrap()),
                    (lt, HostTensor::new([ROWS, c], logits.clone()).unwrap()),
                ],
                &[y, loss, dl],
            )
            .unwrap();
        let (y, loss, dl) = (
            out[0].to_vec::<f32>().unwrap(),
            out[1].to_vec::<f32>().unwrap(),
            out[2].to_vec::<f32>().unwrap(),
        );
        for r in rows {
            let xr: Vec<f64> = x[r * d..(r + 1) * d].iter().map(|&v| v as f64).collect();
            let mean = xr.iter().sum::<f64>() / d as f64;
            let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
            for e in [0, d / 2, d - 1] {
                let want = (xr[e] - mean) / (var + 1e-5).sqrt() * gamma[e] as f64 + beta[e] as f64;
                let got = y[r * d + e] as f64;
                assert!(
                    (got - want).abs() < 1e-4,
                    "{device} y[{r}, {e}] {got} vs {want}"
                );
            }
            let lr: Vec<f64> = logits[r * c..(r + 1) * c]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let s: f64 = lr.iter().map(|v| v.exp()).sum();
            let l = labels[r] as usize;
            let want = s.ln() - lr[l];
            assert!(
                (loss[r] as f64 - want).abs() < 1e-5,
                "{device} loss[{r}] {} vs {want}",
                loss[r]
            );
            for e in 0..c {
                let want = lr[e].exp() / s - f64::from(e == l);
                let got = dl[r * c + e] as f64;
                assert!(
                    (got - want).abs() < 1e-6,
                    "{device} dlogits[{r}, {e}] {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn segment_sum_with_an_output_past_2_to_the_24() {
    let _heavy = crate::heavy();
    let inner = (1 << 22) + 1;
    let data: Vec<f32> = (0..4 * inner).map(val).collect();
    let ids = HostTensor::new([4], vec![1i32, 0, 1, 3]).unwrap();
    for device in devices() {
        let mut g = Graph::new();
        let dt = g.placeholder("d", [4, inner], DType::F32).unwrap();
        let it = g.constant(ids.clone()).unwrap();
        let s = g.segment_sum(dt, it, 4, 0).unwrap();
        let out = common::session_on(&g, device)
            .run(
                &[(dt, HostTensor::new([4, inner], data.clone()).unwrap())],
                &[s],
            )
            .unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(out.len(), 4 * inner);
        for (k, &v) in out.iter().enumerate() {
            let (r, j) = (k / inner, k % inner);
            let want = match r {
                0 => data[inner + j],
                1 => data[j] + data[2 * inner + j],
                2 => 0.0,
                _ => data[3 * inner + j],
            };
            assert_eq!(v, want, "{device} out[{r}, {j}]");
        }
    }
}
