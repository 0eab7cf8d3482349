//! Devices, visibility, placement (explicit, default, soft), and graphs split across devices.

use crate::common;

use wgflow::compile::StepKind;
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions};

#[test]
fn devices_list_gpus_in_preference_order_then_cpu() {
    let gpus = common::gpus();
    let list = wgflow::devices();
    assert_eq!(
        list.last().unwrap().device,
        Device::Cpu,
        "cpu:0 is last and always present"
    );
    assert_eq!(list.len(), gpus.len() + 1);
    let rank = |t: &str| {
        ["discrete", "integrated", "virtual", "software", "other"]
            .iter()
            .position(|x| *x == t)
            .unwrap()
    };
    for w in list[..gpus.len()].windows(2) {
        assert!(
            rank(&w[0].device_type) <= rank(&w[1].device_type),
            "{} before {}",
            w[0],
            w[1]
        );
    }
    for (i, d) in list[..gpus.len()].iter().enumerate() {
        assert_eq!(d.device, Device::Gpu(i));
        assert!(d.limits.max_storage_buffer_binding_size >= 1 << 27, "{d}");
        assert!(!d.name.is_empty() && !d.backend.is_empty());
    }
    // The first hardware GPU; software adapters (lavapipe, llvmpipe) rank below cpu:0.
    let best = Device::best();
    let hardware = list[..gpus.len()]
        .iter()
        .find(|d| d.device_type != "software")
        .map(|d| d.device);
    assert_eq!(best, hardware.unwrap_or(Device::Cpu));
}

#[test]
fn visible_devices_restrict_the_session() {
    let gpus = common::gpus();
    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0]).unwrap();
    let b = g.exp(a).unwrap();
    // No GPU visible: everything falls back to cpu:0.
    let mut s = Session::new(
        &g,
        SessionOptions {
            visible_devices: Some(vec![]),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(s.default_device(), Device::Cpu);
    s.run(&[], &[b]).unwrap();
    if gpus.len() >= 2 {
        let s = Session::new(
            &g,
            SessionOptions {
                visible_devices: Some(vec![1]),
                ..Default::default()
            },
        )
        .unwrap();
        // Only gpu:1 visible: it is the default if it is hardware; a software adapter ranks
        // below cpu:0.
        let software = wgflow::devices()[1].device_type == "software";
        let expected = if software {
            Device::Cpu
        } else {
            Device::Gpu(1)
        };
        assert_eq!(s.default_device(), expected);
    }
    let err = Session::new(
        &g,
        SessionOptions {
            visible_devices: Some(vec![42]),
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("gpu:42") && err.contains("does not exist"),
        "{err}"
    );
    let valid: Vec<String> = (0..gpus.len()).map(|i| i.to_string()).collect();
    assert!(
        err.contains("visible_devices") && err.contains("valid GPU indices"),
        "{err}"
    );
    if !gpus.is_empty() {
        assert!(err.contains(&valid.join(", ")), "{err}");
    }
}

#[test]
fn missing_device_is_an_error_naming_node_and_devices_unless_soft() {
    let mut g = Graph::new();
    let a = g.constant([1.0f32, -2.0]).unwrap();
    let b = g.device("/device:GPU:7", |g| g.abs(a)).unwrap();
    let mut s = Session::new(&g, SessionOptions::default()).unwrap();
    let err = s.run(&[], &[b]).unwrap_err().to_string();
    assert!(
        err.contains("cannot place node 'abs' (abs) on gpu:7"),
        "{err}"
    );
    assert!(
        err.contains("available: ") && err.contains("cpu:0"),
        "{err}"
    );
    assert!(
        err.contains("tests/graph/placement.rs"),
        "names where the node was built: {err}"
    );

    let mut s = Session::new(
        &g,
        SessionOptions {
            soft_placement: true,
            log_device_placement: true,
            ..Default::default()
        },
    )
    .unwrap();
    let out = s.run(&[], &[b]).unwrap();
    assert_eq!(out[0].to_f32().unwrap(), vec![1.0, 2.0]);
    let plan = s.plan(&[b]).unwrap();
    let placed = plan.placement.iter().find(|(n, _)| n == "abs").unwrap().1;
    assert_eq!(placed, s.default_device());
}

#[test]
fn scopes_nest_and_the_innermost_wins() {
    let gpus = common::gpus();
    let mut g = Graph::new();
    let x = g.placeholder("x", [3], DType::F32).unwrap();
    let (outer, inner) = g
        .device("cpu:0", |g| {
            let o = g.neg(x)?;
            let i = g.device("gpu", |g| g.exp(o))?;
            Ok((o, i))
        })
        .unwrap();
    assert_eq!(
        g.requested_device(outer).unwrap().unwrap().to_string(),
        "cpu:0"
    );
    assert_eq!(
        g.requested_device(inner).unwrap().unwrap().to_string(),
        "gpu"
    );
    let mut s = Session::new(
        &g,
        SessionOptions {
            soft_placement: true,
            ..Default::default()
        },
    )
    .unwrap();
    let plan = s.plan(&[inner]).unwrap();
    let dev = |name: &str| plan.placement.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(dev("neg"), Device::Cpu);
    assert_eq!(
        dev("exp"),
        if gpus.is_empty() {
            Device::Cpu
        } else {
            Device::Gpu(0)
        }
    );
    // The placeholder is colocated with its consumer: no transfer for the feed itself.
    assert_eq!(dev("x"), Device::Cpu);
    let out = s
        .run(&[(x, HostTensor::from([0.0f32, 1.0, -1.0]))], &[inner])
        .unwrap();
    common::assert_close(
        "exp(-x)",
        &out[0],
        &HostTensor::from([1.0f32, (-1.0f32).exp(), 1.0f32.exp()]),
        1e-6,
        0.0,
    );
}

struct Mlp {
    g: Graph,
    x: wgflow::Tensor,
    y: wgflow::Tensor,
    z: wgflow::Tensor,
}

/// A small MLP; with `devs`, layer 1 runs on devs[0], layer 2 on devs[1], softmax on devs[2]
/// and the final sum back on devs[0].
fn mlp(devs: Option<[String; 3]>) -> Mlp {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 4], DType::F32).unwrap();
    let w1 = g
        .constant(
            HostTensor::new(
                [4, 3],
                (0..12).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>(),
            )
            .unwrap(),
        )
        .unwrap();
    let w2 = g
        .constant(
            HostTensor::new(
                [3, 2],
                (0..6).map(|i| (i as f32 * 0.91).cos()).collect::<Vec<_>>(),
            )
            .unwrap(),
        )
        .unwrap();
    let on = |g: &mut Graph, k: usize, f: &dyn Fn(&mut Graph) -> wgflow::Result<wgflow::Tensor>| {
        match &devs {
            Some(d) => g.device(&d[k], |g| f(g)),
            None => f(g),
        }
    };
    let h = on(&mut g, 0, &|g| {
        let m = g.matmul(x, w1)?;
        g.relu(m)
    })
    .unwrap();
    let h2 = on(&mut g, 1, &|g| g.matmul(h, w2)).unwrap();
    let y = on(&mut g, 2, &|g| g.softmax(h2, -1)).unwrap();
    let z = on(&mut g, 0, &|g| g.sum(y, wgflow::Axes::All, false)).unwrap();
    Mlp { g, x, y, z }
}

/// An MLP split over cpu:0, gpu:0 and gpu:1 gives the single-device answer, with transfers
/// only on edges that cross devices.
#[test]
fn graph_split_across_devices_matches_one_device() {
    let gpus = common::gpus();
    let devs: Vec<String> = ["cpu:0".to_string()]
        .into_iter()
        .chain(gpus.iter().map(|d| d.to_string()))
        .collect();
    let three = [
        devs[0].clone(),
        devs[1 % devs.len()].clone(),
        devs[2 % devs.len()].clone(),
    ];
    let split = mlp(Some(three.clone()));
    let feed = HostTensor::new([2, 4], vec![0.5f32, -1.0, 2.0, 0.25, 1.5, 0.0, -0.5, 3.0]).unwrap();
    let mut s = Session::new(&split.g, SessionOptions::default()).unwrap();
    let got = s
        .run(&[(split.x, feed.clone())], &[split.y, split.z])
        .unwrap();

    let mut one_device = vec![Device::Cpu];
    one_device.extend(gpus.iter().copied());
    for d in one_device {
        let single = mlp(None);
        let mut s1 = common::session_on(&single.g, d);
        let want = s1
            .run(&[(single.x, feed.clone())], &[single.y, single.z])
            .unwrap();
        common::assert_close(&format!("split vs {d}"), &got[0], &want[0], 1e-5, 1e-6);
        common::assert_close(&format!("split sum vs {d}"), &got[1], &want[1], 1e-5, 1e-6);
        assert_eq!(s1.plan(&[single.y, single.z]).unwrap().transfer_count(), 0);
    }
    // Hand-computed reference for the CPU oracle itself.
    let xv = feed.to_f32().unwrap();
    let w1v: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
    let w2v: Vec<f32> = (0..6).map(|i| (i as f32 * 0.91).cos()).collect();
    let mut want = Vec::new();
    for r in 0..2 {
        let hv: Vec<f32> = (0..3)
            .map(|j| {
                (0..4)
                    .map(|k| xv[r * 4 + k] * w1v[k * 3 + j])
                    .sum::<f32>()
                    .max(0.0)
            })
            .collect();
        let o: Vec<f32> = (0..2)
            .map(|j| (0..3).map(|k| hv[k] * w2v[k * 2 + j]).sum::<f32>())
            .collect();
        let m = o[0].max(o[1]);
        let e: Vec<f32> = o.iter().map(|v| (v - m).exp()).collect();
        let sum: f32 = e.iter().sum();
        want.extend(e.iter().map(|v| v / sum));
    }
    common::assert_close(
        "split softmax",
        &got[0],
        &HostTensor::new([2, 2], want).unwrap(),
        1e-5,
        1e-6,
    );
    common::assert_close("split sum", &got[1], &HostTensor::scalar(2.0f32), 1e-5, 0.0);

    let plan = s.plan(&[split.y, split.z]).unwrap();
    // Edges between layers on different devices; constants are copied at compile time.
    let crossings = [(0, 1), (1, 2), (2, 0)]
        .iter()
        .filter(|(a, b)| three[*a] != three[*b])
        .count();
    assert_eq!(plan.transfer_count(), crossings, "{}", plan.describe());
    for st in &plan.steps {
        if let StepKind::Transfer { src } = st.kind {
            assert_ne!(
                plan.values[src].device, st.device,
                "transfer within one device"
            );
        }
    }
    if gpus.len() >= 2 {
        let used = plan.devices();
        assert!(
            used.contains(&Device::Cpu)
                && used.contains(&Device::Gpu(0))
                && used.contains(&Device::Gpu(1))
        );
    }
}
