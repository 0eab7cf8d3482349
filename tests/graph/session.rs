//! Running: pruning, feeds, fetch errors, plan caching and its counters, async.

use crate::common;

use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions};

fn devices_to_test() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

#[test]
fn only_what_fetches_need_runs_and_missing_feeds_are_named() {
    for dev in devices_to_test() {
        let mut g = Graph::new();
        let x = g.placeholder("x", [2], DType::F32).unwrap();
        let unused = g.placeholder("unused", [2], DType::F32).unwrap();
        let y = g.exp(x).unwrap();
        let z = g.add(y, unused).unwrap();
        let mut s = common::session_on(&g, dev);
        // `unused` is outside the subgraph `y` needs: no feed required, nothing else compiled.
        let out = s
            .run(&[(x, HostTensor::from([0.0f32, 1.0]))], &[y])
            .unwrap();
        common::assert_close(
            "exp",
            &out[0],
            &HostTensor::from([1.0f32, 1.0f32.exp()]),
            1e-6,
            0.0,
        );
        let plan = s.plan(&[y]).unwrap();
        assert_eq!(plan.dispatch_count(), 1);
        assert!(plan
            .placement
            .iter()
            .all(|(n, _)| n != "unused" && n != "add"));
        // `z` needs `unused`.
        let err = s
            .run(&[(x, HostTensor::from([0.0f32, 1.0]))], &[z])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("feed 'unused'") && err.contains("was not fed"),
            "{err}"
        );
    }
}

#[test]
fn bad_feeds_are_clear_errors() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3], DType::F32).unwrap();
    let c = g.constant([1.0f32]).unwrap();
    let y = g.relu(x).unwrap();
    let mut s = Session::new(&g, SessionOptions::default()).unwrap();
    let err = s
        .run(&[(x, HostTensor::from([1.0f32, 2.0]))], &[y])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("feed 'x'") && err.contains("expected f32 [2, 3], got f32 [2]"),
        "{err}"
    );
    let err = s
        .run(&[(x, HostTensor::zeros([2, 3], DType::I32))], &[y])
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected f32 [2, 3], got i32 [2, 3]"), "{err}");
    let err = s
        .run(&[(c, HostTensor::from([1.0f32]))], &[y])
        .unwrap_err()
        .to_string();
    assert!(err.contains("only placeholders can be fed"), "{err}");
    let good = HostTensor::zeros([2, 3], DType::F32);
    let err = s
        .run(&[(x, good.clone()), (x, good)], &[y])
        .unwrap_err()
        .to_string();
    assert!(err.contains("fed twice"), "{err}");
    let err = s.run_named(&[], &["nope"]).unwrap_err().to_string();
    assert!(
        err.contains("fetch 'nope'") && err.contains("no node has this name"),
        "{err}"
    );
    let mut other = Graph::new();
    let o = other.constant(1.0f32).unwrap();
    let err = s.run(&[], &[o]).unwrap_err().to_string();
    assert!(err.contains("another graph"), "{err}");
}

#[test]
fn second_run_of_a_cached_plan_creates_nothing() {
    for dev in devices_to_test() {
        let mut g = Graph::new();
        let x = g.placeholder("x", [4, 4], DType::F32).unwrap();
        let w = g
            .constant(
                HostTensor::new([4, 4], (0..16).map(|i| i as f32).collect::<Vec<_>>()).unwrap(),
            )
            .unwrap();
        let h = g.matmul(x, w).unwrap();
        let s2 = g.sum(h, [1], false).unwrap();
        let mut s = common::session_on(&g, dev);
        let feed = HostTensor::new([4, 4], vec![1.0f32; 16]).unwrap();
        let first = s.run(&[(x, feed.clone())], &[s2]).unwrap();
        let after_first = s.counters();
        assert_eq!(after_first.plans_compiled, 1);
        if dev.is_gpu() {
            assert!(
                after_first.bind_groups_created >= 2 && after_first.buffers_created >= 2,
                "{after_first:?}"
            );
        }
        let feed2 = HostTensor::new([4, 4], vec![2.0f32; 16]).unwrap();
        let second = s.run(&[(x, feed2)], &[s2]).unwrap();
        let after_second = s.counters();
        assert_eq!(after_second.runs, 2);
        assert_eq!(
            (
                after_second.plans_compiled,
                after_second.pipelines_created,
                after_second.bind_groups_created,
                after_second.buffers_created
            ),
            (
                after_first.plans_compiled,
                after_first.pipelines_created,
                after_first.bind_groups_created,
                after_first.buffers_created
            ),
            "{dev}: the second run created resources"
        );
        // Row sums of ones @ w: each row of w sums 0+1+..; column sums are 24,28,32,36, total 120.
        assert_eq!(first[0].to_f32().unwrap(), vec![120.0; 4]);
        assert_eq!(second[0].to_f32().unwrap(), vec![240.0; 4]);
        // A different fetch list is a different signature.
        s.run(&[(x, feed)], &[h]).unwrap();
        assert_eq!(s.counters().plans_compiled, 2);
    }
}

#[test]
fn run_async_and_run_named_agree_with_run() {
    let mut g = Graph::new();
    let x = g
        .name_scope("inputs", |g| g.placeholder("x", [3], DType::F32))
        .unwrap();
    assert_eq!(g.name(x).unwrap(), "inputs/x");
    let y = g.name_scope("block", |g| g.tanh(x)).unwrap();
    assert_eq!(g.name(y).unwrap(), "block/tanh");
    let mut s = Session::new(&g, SessionOptions::default()).unwrap();
    let data = HostTensor::from([-1.0f32, 0.0, 2.0]);
    let a = s.run(&[(x, data.clone())], &[y]).unwrap();
    let b = futures::executor::block_on(s.run_async(&[(x, data.clone())], &[y])).unwrap();
    let c = s.run_named(&[("inputs/x", data)], &["block/tanh"]).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert!((a[0].to_f32().unwrap()[2] - 2.0f32.tanh()).abs() < 1e-6);
}

#[test]
fn fetching_leaves_and_views_directly() {
    for dev in devices_to_test() {
        let mut g = Graph::new();
        let x = g.placeholder("x", [2, 2], DType::I32).unwrap();
        let c = g.constant([[1i32, 2], [3, 4]]).unwrap();
        let r = g.reshape(c, &[-1]).unwrap();
        let y = g.add(x, c).unwrap();
        let yr = g.reshape(y, &[4]).unwrap();
        let mut s = common::session_on(&g, dev);
        let feed = HostTensor::new([2, 2], vec![10i32, 20, 30, 40]).unwrap();
        let out = s.run(&[(x, feed.clone())], &[x, c, r, yr, y]).unwrap();
        assert_eq!(out[0], feed);
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(out[2].dims(), &[4]);
        assert_eq!(out[3].to_vec::<i32>().unwrap(), vec![11, 22, 33, 44]);
        assert_eq!(out[3].dims(), &[4]);
        assert_eq!(out[4].dims(), &[2, 2]);
    }
}

#[test]
fn integer_division_by_zero_is_defined_and_identical_everywhere() {
    let mut g = Graph::new();
    let a = g.constant([7i32, -7, i32::MIN, 5]).unwrap();
    let b = g.constant([0i32, 2, -1, -2]).unwrap();
    let q = g.div(a, b).unwrap();
    let ua = g.constant([7u32, 9]).unwrap();
    let ub = g.constant([0u32, 2]).unwrap();
    let uq = g.div(ua, ub).unwrap();
    for dev in devices_to_test() {
        let mut s = common::session_on(&g, dev);
        let out = s.run(&[], &[q, uq]).unwrap();
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            vec![7, -3, i32::MIN, -2],
            "{dev}"
        );
        assert_eq!(out[1].to_vec::<u32>().unwrap(), vec![7, 4], "{dev}");
    }
}

#[test]
fn nan_propagates_through_maximum_minimum_and_max() {
    let mut g = Graph::new();
    let a = g.constant([f32::NAN, 1.0, 2.0]).unwrap();
    let b = g.constant([0.0f32, f32::NAN, 1.0]).unwrap();
    let mx = g.maximum(a, b).unwrap();
    let mn = g.minimum(a, b).unwrap();
    let red = g.max(a, wgflow::Axes::All, false).unwrap();
    let relu = g.relu(a).unwrap();
    for dev in devices_to_test() {
        let mut s = common::session_on(&g, dev);
        let out = s.run(&[], &[mx, mn, red, relu]).unwrap();
        let m = out[0].to_f32().unwrap();
        assert!(
            m[0].is_nan() && m[1].is_nan() && m[2] == 2.0,
            "{dev} maximum {m:?}"
        );
        let m = out[1].to_f32().unwrap();
        assert!(
            m[0].is_nan() && m[1].is_nan() && m[2] == 1.0,
            "{dev} minimum {m:?}"
        );
        assert!(out[2].item::<f32>().unwrap().is_nan(), "{dev} max");
        assert!(out[3].to_f32().unwrap()[0].is_nan(), "{dev} relu");
    }
}
