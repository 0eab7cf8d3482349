//! Run-time dimensions: placeholders with `None` sizes, bound per run from the feeds.

use crate::common::{gpus, session_on};
use wgflow::train::{Adam, Optimizer};
use wgflow::{Axes, DType, Device, Dim, Graph, HostTensor, Tensor};

/// Deterministic pseudo-random floats in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

struct Mlp {
    g: Graph,
    x: Tensor,
    labels: Tensor,
    logits: Tensor,
    loss: Tensor,
    step: Tensor,
}

/// 8 → 16 (ReLU) → 4 with a mean cross-entropy and an Adam step; `batch` `None` for a
/// run-time batch.
fn mlp(batch: Option<usize>) -> Mlp {
    let mut g = Graph::new();
    let n = batch.map_or(Dim::named("batch"), Dim::Known);
    let x = g
        .placeholder_dyn("x", [n.clone(), 8.into()], DType::F32)
        .unwrap();
    let labels = g.placeholder_dyn("labels", [n], DType::I32).unwrap();
    let w1 = g
        .variable("w1", HostTensor::new([8, 16], values(128, 1)).unwrap())
        .unwrap();
    let b1 = g
        .variable("b1", HostTensor::new([16], values(16, 2)).unwrap())
        .unwrap();
    let w2 = g
        .variable("w2", HostTensor::new([16, 4], values(64, 3)).unwrap())
        .unwrap();
    let b2 = g
        .variable("b2", HostTensor::new([4], values(4, 4)).unwrap())
        .unwrap();
    let h = g.linear(x, w1, Some(b1)).unwrap();
    let h = g.relu(h).unwrap();
    let logits = g.linear(h, w2, Some(b2)).unwrap();
    let logp = g.log_softmax(logits, -1).unwrap();
    let onehot = g.one_hot(labels, 4).unwrap();
    let picked = g.mul(logp, onehot).unwrap();
    let per = g.sum(picked, [1], false).unwrap();
    let mean = g.mean(per, Axes::All, false).unwrap();
    let loss = g.neg(mean).unwrap();
    let step = Adam::new(0.01)
        .minimize(&mut g, loss, &[w1, b1, w2, b2])
        .unwrap();
    Mlp {
        g,
        x,
        labels,
        logits,
        loss,
        step,
    }
}

fn batch_feeds(m: &Mlp, n: usize, seed: u64) -> Vec<(Tensor, HostTensor)> {
    let labels: Vec<i32> = (0..n)
        .map(|i| ((i * 7 + seed as usize) % 4) as i32)
        .collect();
    vec![
        (m.x, HostTensor::new([n, 8], values(n * 8, seed)).unwrap()),
        (m.labels, HostTensor::new([n], labels).unwrap()),
    ]
}

#[test]
fn one_graph_trains_every_batch_size_like_static_graphs() {
    for device in devices() {
        let dynamic = mlp(None);
        assert_eq!(
            dynamic.g.dims(dynamic.x).unwrap(),
            [Dim::named("batch"), Dim::Known(8)]
        );
        let mut s = session_on(&dynamic.g, device);
        for (k, &n) in [1usize, 64, 29, 64, 1].iter().enumerate() {
            let feeds = batch_feeds(&dynamic, n, k as u64 + 10);
            // The same step on a static graph of this batch size, from the same state (the
            // weights and Adam's moments and step count).
            let fixed = mlp(Some(n));
            let mut r = session_on(&fixed.g, device);
            let state: Vec<(String, HostTensor)> = s
                .initialized_variables()
                .into_iter()
                .map(|name| {
                    let v = s.read_variable(dynamic.g.tensor(&name).unwrap()).unwrap();
                    (name, v)
                })
                .collect();
            for (name, v) in &state {
                r.write_variable(fixed.g.tensor(name).unwrap(), v).unwrap();
            }
            let before = s.counters();
            let got = s
                .run(&feeds, &[dynamic.loss, dynamic.logits, dynamic.step])
                .unwrap();
            let after = s.counters();
            if k >= 3 {
                assert_eq!(
                    after.plans_compiled, before.plans_compiled,
                    "{device} batch {n}"
                );
                assert_eq!(
                    after.buffers_created, before.buffers_created,
                    "{device} batch {n}"
                );
                assert_eq!(after.pipelines_created, before.pipelines_created);
                assert_eq!(after.bind_groups_created, before.bind_groups_created);
            }
            assert_eq!(got[1].shape().dims(), [n, 4]);
            let fixed_feeds = vec![
                (fixed.x, feeds[0].1.clone()),
                (fixed.labels, feeds[1].1.clone()),
            ];
            let want = r
                .run(&fixed_feeds, &[fixed.loss, fixed.logits, fixed.step])
                .unwrap();
            assert_eq!(got[0].words(), want[0].words(), "{device} batch {n}: loss");
            assert_eq!(
                got[1].words(),
                want[1].words(),
                "{device} batch {n}: logits"
            );
            for (name, _) in &state {
                let a = s.read_variable(dynamic.g.tensor(name).unwrap()).unwrap();
                let b = r.read_variable(fixed.g.tensor(name).unwrap()).unwrap();
                assert_eq!(
                    a.words(),
                    b.words(),
                    "{device} batch {n}: {name} after the step"
                );
            }
        }
        assert_eq!(s.counters().plans_compiled, 3, "{device}");
    }
}
