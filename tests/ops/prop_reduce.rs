//! Property test of reductions against float64 computed here: random shapes (up to 2^20
//! elements, some axes 1), random axis lists (negative, unsorted), keepdims, on cpu:0 and
//! every GPU. Sums and means must be within 2e-6 of float64 (values are positive, so there is
//! no cancellation to excuse), max/min/argmax exact.

use crate::common;

use proptest::prelude::*;
use wgflow::{Axes, DType, Device, Graph, HostTensor};

fn case() -> impl Strategy<Value = (Vec<usize>, Vec<isize>, bool, u32)> {
    prop::collection::vec(prop_oneof![Just(1usize), 2usize..9, 9usize..700], 1..5)
        .prop_filter("at most 2^20 elements", |d| {
            d.iter().product::<usize>() <= 1 << 20
        })
        .prop_flat_map(|dims| {
            let r = dims.len();
            (
                Just(dims),
                prop::sample::subsequence((0..r).collect::<Vec<_>>(), 1..=r).prop_shuffle(),
                prop::collection::vec(any::<bool>(), r),
                any::<bool>(),
                any::<u32>(),
            )
                .prop_map(move |(dims, axes, neg, keep, seed)| {
                    let axes = axes
                        .iter()
                        .map(|&a| {
                            if neg[a] {
                                a as isize - r as isize
                            } else {
                                a as isize
                            }
                        })
                        .collect();
                    (dims, axes, keep, seed)
                })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn reductions_match_float64((dims, axes, keepdims, seed) in case()) {
        let n: usize = dims.iter().product();
        let x: Vec<f32> = (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2_654_435_761);
                0.5 + (h >> 8) as f32 / 16_777_216.0
            })
            .collect();
        let rank = dims.len();
        let red: Vec<usize> = axes.iter().map(|&a| a.rem_euclid(rank as isize) as usize).collect();
        // float64 reference in output order (kept axes in order).
        let kept: Vec<usize> = (0..rank).filter(|a| !red.contains(a)).collect();
        let n_out: usize = kept.iter().map(|&a| dims[a]).product();
        let (mut sum, mut max, mut min) = (vec![0f64; n_out], vec![f32::MIN; n_out], vec![f32::MAX; n_out]);
        let strides: Vec<usize> = (0..rank).map(|a| dims[a + 1..].iter().product()).collect();
        for (i, &v) in x.iter().enumerate() {
            let o = kept.iter().fold(0, |o, &a| o * dims[a] + (i / strides[a]) % dims[a]);
            sum[o] += v as f64;
            max[o] = max[o].max(v);
            min[o] = min[o].min(v);
        }
        let count: usize = red.iter().map(|&a| dims[a]).product();
        let mut g = Graph::new();
        let t = g.placeholder("x", dims.clone(), DType::F32).unwrap();
        let ax = Axes::List(axes.clone());
        let fetch = [
            g.sum(t, ax.clone(), keepdims).unwrap(),
            g.mean(t, ax.clone(), keepdims).unwrap(),
            g.max(t, ax.clone(), keepdims).unwrap(),
            g.min(t, ax, keepdims).unwrap(),
        ];
        let want_dims: Vec<usize> = (0..rank)
            .filter_map(|a| match (red.contains(&a), keepdims) {
                (false, _) => Some(dims[a]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        let feed = HostTensor::new(dims.clone(), x).unwrap();
        let mut devices = common::gpus();
        devices.push(Device::Cpu);
        for d in devices {
            let mut sess = common::session_on(&g, d);
            let out = sess.run(&[(t, feed.clone())], &fetch).unwrap();
            for o in &out {
                prop_assert_eq!(o.dims(), &want_dims[..], "on {}", d);
            }
            let vals: Vec<Vec<f32>> = out.iter().map(|o| o.to_f32().unwrap()).collect();
            for k in 0..n_out {
                let rel = |g: f32, w: f64| (g as f64 - w).abs() / w.abs();
                prop_assert!(rel(vals[0][k], sum[k]) <= 2e-6, "sum[{}] on {}: {} vs {}", k, d, vals[0][k], sum[k]);
                let mean = sum[k] / count as f64;
                prop_assert!(rel(vals[1][k], mean) <= 2e-6, "mean[{}] on {}: {} vs {}", k, d, vals[1][k], mean);
                prop_assert_eq!(vals[2][k], max[k], "max[{}] on {}", k, d);
                prop_assert_eq!(vals[3][k], min[k], "min[{}] on {}", k, d);
            }
        }
    }
}
