//! Variables: state kept by the session across runs and plans, assignments landing when a
//! run finishes, initializers, host reads and writes — on every device.

use crate::common::{folding_session_on, gpus, session_on};
use wgflow::{DType, Device, Error, Graph, HostTensor, Initializer, Session};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32")
}

#[test]
fn a_counter_counts_across_runs_on_every_device() {
    for d in devices() {
        let mut g = Graph::new();
        let step = g.variable("step", 0i32).unwrap();
        let one = g.constant(1i32).unwrap();
        let next = g.assign_add(step, one).unwrap();
        let mut s = session_on(&g, d);
        for k in 1..=3 {
            let out = s.run(&[], &[next]).unwrap();
            assert_eq!(
                out[0].item::<i32>().unwrap(),
                k,
                "{d}: the assignment's value"
            );
        }
        assert_eq!(
            s.read_variable(step).unwrap().item::<i32>().unwrap(),
            3,
            "{d}"
        );
    }
}

#[test]
fn reads_in_a_run_see_the_value_at_its_start_and_assignments_land_at_its_end() {
    for d in devices() {
        let mut g = Graph::new();
        let v = g.variable("v", HostTensor::from([3.0f32, -1.0])).unwrap();
        let two = g.constant(2.0f32).unwrap();
        let doubled = g.mul(v, two).unwrap();
        let set = g.assign(v, doubled).unwrap();
        let one = g.constant(1.0f32).unwrap();
        let after = g.add(v, one).unwrap();
        let mut s = session_on(&g, d);
        let out = s.run(&[], &[v, set, after]).unwrap();
        assert_eq!(f32s(&out[0]), [3.0, -1.0], "{d}: fetched variable");
        assert_eq!(f32s(&out[1]), [6.0, -2.0], "{d}: new value");
        assert_eq!(f32s(&out[2]), [4.0, 0.0], "{d}: read in the same run");
        assert_eq!(f32s(&s.read_variable(v).unwrap()), [6.0, -2.0], "{d}");
        let out = s.run(&[], &[after]).unwrap();
        assert_eq!(f32s(&out[0]), [7.0, -1.0], "{d}: the next run sees it");
    }
}

#[test]
fn two_variables_swap_in_one_run() {
    for d in devices() {
        let mut g = Graph::new();
        let a = g.variable("a", HostTensor::from([1.0f32, 2.0])).unwrap();
        let b = g.variable("b", HostTensor::from([10.0f32, 20.0])).unwrap();
        let x = g.assign(a, b).unwrap();
        let y = g.assign(b, a).unwrap();
        let both = g.group(&[x, y]).unwrap();
        let mut s = session_on(&g, d);
        s.run_targets(&[], &[both]).unwrap();
        assert_eq!(f32s(&s.read_variable(a).unwrap()), [10.0, 20.0], "{d}");
        assert_eq!(f32s(&s.read_variable(b).unwrap()), [1.0, 2.0], "{d}");
    }
}

#[test]
fn plans_of_a_session_share_one_copy_and_reruns_create_nothing() {
    for d in devices() {
        let mut g = Graph::new();
        let w = g
            .variable("w", HostTensor::from([1.0f32, 2.0, 3.0]))
            .unwrap();
        let x = g.placeholder("x", [3], DType::F32).unwrap();
        let lr = g.constant(0.5f32).unwrap();
        let step = g.mul(x, lr).unwrap();
        let train = g.assign_sub(w, step).unwrap();
        let y = g.sum(w, wgflow::Axes::All, false).unwrap();
        let mut s = session_on(&g, d);
        let feed = HostTensor::from([2.0f32, 2.0, 2.0]);
        s.run_targets(&[(x, feed.clone())], &[train]).unwrap();
        assert_eq!(
            s.run(&[], &[y]).unwrap()[0].item::<f32>().unwrap(),
            3.0,
            "{d}"
        );
        let before = s.counters();
        s.run_targets(&[(x, feed.clone())], &[train]).unwrap();
        let after = s.counters();
        assert_eq!(
            (
                after.buffers_created,
                after.pipelines_created,
                after.bind_groups_created,
                after.plans_compiled
            ),
            (
                before.buffers_created,
                before.pipelines_created,
                before.bind_groups_created,
                before.plans_compiled
            ),
            "{d}: a second run of a cached train step creates nothing"
        );
        assert_eq!(
            s.run(&[], &[y]).unwrap()[0].item::<f32>().unwrap(),
            0.0,
            "{d}"
        );
        // One variable buffer on a GPU, however many plans read it: the two plans' arenas,
        // constants and staging buffers are the rest.
        if d.is_gpu() {
            let mut fresh = session_on(&g, d);
            fresh.read_variable(w).unwrap();
            assert_eq!(
                fresh.counters().buffers_created,
                1,
                "{d}: one buffer per variable"
            );
        }
    }
}

#[test]
fn host_writes_are_seen_by_every_plan() {
    for d in devices() {
        let mut g = Graph::new();
        let v = g
            .variable_with("v", [2, 2], DType::F32, Initializer::Zeros)
            .unwrap();
        let t = g.transpose(v, &[1, 0]).unwrap();
        let mut s = session_on(&g, d);
        assert_eq!(f32s(&s.run(&[], &[t]).unwrap()[0]), [0.0; 4], "{d}");
        let value = HostTensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        s.write_variable(v, &value).unwrap();
        assert_eq!(
            f32s(&s.run(&[], &[t]).unwrap()[0]),
            [1.0, 3.0, 2.0, 4.0],
            "{d}"
        );
        let wrong = HostTensor::from([1.0f32]);
        let e = s.write_variable(v, &wrong).unwrap_err();
        assert!(e.to_string().contains("f32 [2, 2]"), "{e}");
    }
}

#[test]
fn initializers_are_identical_on_every_device_and_scaled_by_fans() {
    let mut g = Graph::new();
    let w = g
        .variable_with(
            "w",
            [300, 100],
            DType::F32,
            Initializer::GlorotUniform { seed: 7 },
        )
        .unwrap();
    let h = g
        .variable_with(
            "h",
            [64, 32, 3, 3],
            DType::F32,
            Initializer::HeNormal { seed: 3 },
        )
        .unwrap();
    let o = g
        .variable_with("o", [5], DType::I32, Initializer::Ones)
        .unwrap();
    let mut reference: Option<Vec<HostTensor>> = None;
    for d in devices() {
        let mut s = session_on(&g, d);
        let vals: Vec<HostTensor> = [w, h, o]
            .iter()
            .map(|&v| s.read_variable(v).unwrap())
            .collect();
        let wv = f32s(&vals[0]);
        let limit = (6.0f64 / 400.0).sqrt() as f32;
        assert!(wv.iter().all(|x| x.abs() <= limit), "{d}: glorot bound");
        let mean = wv.iter().map(|&x| x as f64).sum::<f64>() / wv.len() as f64;
        let var = wv.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / wv.len() as f64;
        // U(-l, l) has variance l²/3 = 2 / (fan_in + fan_out).
        assert!(
            (var - 2.0 / 400.0).abs() < 0.05 * 2.0 / 400.0,
            "{d}: glorot variance {var}"
        );
        let hv = f32s(&vals[1]);
        let hvar = hv.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / hv.len() as f64;
        let want = 2.0 / (32.0 * 9.0);
        assert!(
            (hvar - want).abs() < 0.05 * want,
            "{d}: he variance {hvar} vs {want}"
        );
        assert_eq!(vals[2].to_vec::<i32>().unwrap(), [1; 5]);
        match &reference {
            None => reference = Some(vals),
            Some(r) => {
                for (a, b) in r.iter().zip(&vals) {
                    assert_eq!(
                        a.words(),
                        b.words(),
                        "{d}: initial values differ from cpu:0"
                    );
                }
            }
        }
    }
}

#[test]
fn assignments_from_feeds_constants_and_other_devices() {
    let gpus = gpus();
    for d in devices() {
        let mut g = Graph::new();
        let v = g.variable("v", HostTensor::from([0.0f32; 3])).unwrap();
        let x = g.placeholder("x", [3], DType::F32).unwrap();
        let from_feed = g.assign(v, x).unwrap();
        let c = g.constant([7.0f32, 8.0, 9.0]).unwrap();
        let from_constant = g.assign(v, c).unwrap();
        let mut s = folding_session_on(&g, d);
        s.run_targets(&[(x, HostTensor::from([1.0f32, 2.0, 3.0]))], &[from_feed])
            .unwrap();
        assert_eq!(f32s(&s.read_variable(v).unwrap()), [1.0, 2.0, 3.0], "{d}");
        s.run_targets(&[], &[from_constant]).unwrap();
        assert_eq!(f32s(&s.read_variable(v).unwrap()), [7.0, 8.0, 9.0], "{d}");
    }
    // A variable on one device, its update computed on another.
    for (i, &a) in gpus.iter().enumerate() {
        let b = if i + 1 < gpus.len() {
            gpus[i + 1]
        } else {
            Device::Cpu
        };
        let mut g = Graph::new();
        let v = g
            .device(&a.to_string(), |g| {
                g.variable("v", HostTensor::from([1.0f32, 2.0]))
            })
            .unwrap();
        let three = g.constant(3.0f32).unwrap();
        let update = g.device(&b.to_string(), |g| g.mul(v, three)).unwrap();
        let set = g.assign(v, update).unwrap();
        let mut s = session_on(&g, Device::Cpu);
        let plan = s.plan(&[set]).unwrap();
        assert_eq!(plan.device_of("v"), Some(a));
        assert_eq!(
            plan.device_of("assign"),
            Some(a),
            "assignments run where the variable is"
        );
        s.run_targets(&[], &[set]).unwrap();
        s.run_targets(&[], &[set]).unwrap();
        assert_eq!(
            f32s(&s.read_variable(v).unwrap()),
            [9.0, 18.0],
            "{a} <- {b}"
        );
    }
}

#[test]
fn bad_assignments_are_errors() {
    let mut g = Graph::new();
    let v = g.variable("v", HostTensor::from([1.0f32, 2.0])).unwrap();
    let c = g.constant([1.0f32, 2.0]).unwrap();
    let e = g.assign(c, v).unwrap_err();
    assert!(e.to_string().contains("not a variable"), "{e}");
    let wide = g.constant([1.0f32, 2.0, 3.0]).unwrap();
    let e = g.assign(v, wide).unwrap_err();
    assert!(
        e.to_string().contains("f32 [3]") && e.to_string().contains("variables.rs"),
        "{e}"
    );
    let ints = g.constant([1i32, 2]).unwrap();
    assert!(g.assign(v, ints).is_err());
    assert!(
        g.variable("v", 1.0f32).is_err(),
        "a second variable named v"
    );
    let e = g
        .variable_with(
            "r",
            [3],
            DType::I32,
            Initializer::Uniform {
                low: 0.0,
                high: 1.0,
                seed: 1,
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("f32 or f16"), "{e}");
    let first = g.assign(v, c).unwrap();
    let twice = g.mul(c, c).unwrap();
    let second = g.assign(v, twice).unwrap();
    let mut s = Session::new(&g, Default::default()).unwrap();
    let e = s.run_targets(&[], &[first, second]).unwrap_err();
    assert!(matches!(e, Error::Assign { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("'v'") && msg.contains("assign") && msg.contains("assign_1"),
        "{msg}"
    );
    let e = s.read_variable(c).unwrap_err();
    assert!(e.to_string().contains("not a variable"), "{e}");
}
