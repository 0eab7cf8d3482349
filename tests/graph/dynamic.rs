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

type Build = fn(&mut Graph, Tensor) -> wgflow::Result<Tensor>;

/// One graph per op family over `x` of shape `[n, 4, 6]`.
fn family_cases() -> Vec<(&'static str, Build)> {
    vec![
        ("elementwise", |g, x| {
            let c = g.constant(HostTensor::new([6], values(6, 7))?)?;
            let y = g.mul(x, c)?;
            g.tanh(y)
        }),
        ("sum and max over the batch", |g, x| {
            let s = g.sum(x, [0], false)?;
            let m = g.max(x, [0, 2], true)?;
            let m = g.reshape(m, &[4])?;
            let m = g.reshape(m, &[4, 1])?;
            g.add(s, m)
        }),
        ("mean over everything", |g, x| g.mean(x, Axes::All, false)),
        ("var and softmax", |g, x| {
            let v = g.var(x, [0, 1], 1, false)?;
            let s = g.softmax(x, -1)?;
            let s = g.sum(s, [0], false)?;
            g.add(s, v)
        }),
        ("matmul", |g, x| {
            let w = g.constant(HostTensor::new([6, 3], values(18, 8))?)?;
            g.matmul(x, w)
        }),
        ("reshape -1 and transpose", |g, x| {
            let r = g.reshape(x, &[-1, 12])?;
            g.transpose(r, &[1, 0])
        }),
        ("broadcast and concat", |g, x| {
            let c = g.concat(&[x, x], 2)?;
            let one = g.constant(1.0f32)?;
            let b = g.broadcast_to(one, &[1, 4, 12])?;
            g.sub(c, b)
        }),
        ("conv2d and pooling", |g, x| {
            let img = g.reshape(x, &[-1, 1, 4, 6])?;
            let w = g.constant(HostTensor::new([2, 1, 3, 3], values(18, 9))?)?;
            let c = g.conv2d(img, w, None, Default::default())?;
            g.max_pool2d(c, [2, 2], [1, 1], [0, 0])
        }),
        ("fused layer norm and cross-entropy", |g, x| {
            let gamma = g.constant(HostTensor::new([6], values(6, 3))?)?;
            let beta = g.constant(HostTensor::new([6], values(6, 4))?)?;
            let y = g.layer_norm(x, Some(gamma), Some(beta), -1, 1e-5)?;
            let labels = g.argmax(x, Some(2), false)?;
            let l = g.sparse_softmax_cross_entropy(y, labels)?;
            let l = g.expand_dims(l, -1)?;
            let out = g.add(y, l)?;
            let total = g.sum(out, Axes::All, false)?;
            let dx = g.gradients(total, &[x])?[0].expect("a gradient");
            g.add(out, dx)
        }),
        ("fused attention and its gradient", |g, x| {
            let y = g.attention(x, x, x, true, None)?;
            let total = g.sum(y, Axes::All, false)?;
            let dx = g.gradients(total, &[x])?[0].expect("a gradient");
            g.add(y, dx)
        }),
        ("cumsum and layer norm", |g, x| {
            let c = g.cumsum(x, 0)?;
            g.layer_norm(c, None, None, -1, 1e-5)
        }),
        ("take with a run-time index count", |g, x| {
            let flat = g.reshape(x, &[-1])?;
            let idx = g.constant(HostTensor::new([3], vec![0i32, 2, 5])?)?;
            let t = g.take(x, idx, 2)?;
            let s = g.sum(flat, Axes::All, false)?;
            g.add(t, s)
        }),
        ("slices of known axes, flip, pad", |g, x| {
            use wgflow::ops::SliceArg;
            let full = SliceArg::full();
            let s = g.slice(
                x,
                &[
                    full,
                    SliceArg::range(1, 3),
                    SliceArg::new(Some(-1), None, -2),
                ],
            )?;
            let f = g.flip(s, [0, 2])?;
            g.pad(f, &[(0, 0), (1, 2), (0, 1)], wgflow::PadMode::Constant(0.5))
        }),
        ("zeros_like and ones_like", |g, x| {
            let z = g.zeros_like(x)?;
            let o = g.ones_like(x)?;
            let s = g.add(x, o)?;
            g.sub(s, z)
        }),
        ("shape_of and size_of", |g, x| {
            let s = g.shape_of(x)?;
            let s = g.cast(s, DType::F32)?;
            let n = g.size_of(x, &[0], DType::F32)?;
            g.mul(s, n)
        }),
    ]
}

#[test]
fn every_family_with_a_run_time_batch_equals_the_static_graph_bit_for_bit() {
    for device in devices() {
        for (name, build) in family_cases() {
            let mut g = Graph::new();
            let x = g
                .placeholder_dyn("x", [None, Some(4), Some(6)], DType::F32)
                .unwrap();
            let y = build(&mut g, x).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut s = session_on(&g, device);
            for n in [3usize, 1, 5, 3] {
                let feed = HostTensor::new([n, 4, 6], values(n * 24, n as u64)).unwrap();
                let got = s
                    .run(&[(x, feed.clone())], &[y])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let mut fixed = Graph::new();
                let fx = fixed.placeholder("x", [n, 4, 6], DType::F32).unwrap();
                let fy = build(&mut fixed, fx).unwrap();
                let want = session_on(&fixed, device)
                    .run(&[(fx, feed)], &[fy])
                    .unwrap();
                assert_eq!(got[0].shape(), want[0].shape(), "{name} on {device}, n={n}");
                assert_eq!(got[0].words(), want[0].words(), "{name} on {device}, n={n}");
            }
            assert_eq!(s.counters().plans_compiled, 3, "{name} on {device}");
        }
    }
}

#[test]
fn run_time_sizes_are_checked_with_clear_errors() {
    let mut g = Graph::new();
    let x = g
        .placeholder_dyn("x", [Dim::named("batch"), 2.into()], DType::F32)
        .unwrap();
    let y = g
        .placeholder_dyn("y", [Dim::named("batch")], DType::F32)
        .unwrap();
    let s = g.sum(x, [1], false).unwrap();
    let z = g.add(s, y).unwrap();
    // What a builder can check, it checks at build time, naming the dimension.
    let e = g.add(x, y).unwrap_err().to_string();
    assert!(e.contains("[batch, 2]") && e.contains("[batch]"), "{e}");
    let e = g.shape(x).unwrap_err().to_string();
    assert!(e.contains("[batch, 2]") && e.contains("Graph::dims"), "{e}");
    let e = g
        .slice(x, &[wgflow::ops::SliceArg::range(0, 1)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("axis 0 of [batch, 2] is known only at run time"),
        "{e}"
    );
    let img = g
        .placeholder_dyn(
            "img",
            [1.into(), 1.into(), Dim::named("h"), 8.into()],
            DType::F32,
        )
        .unwrap();
    let w = g
        .constant(HostTensor::new([1, 1, 3, 3], vec![1.0f32; 9]).unwrap())
        .unwrap();
    let opts = wgflow::Conv2dOptions {
        stride: [2, 2],
        ..Default::default()
    };
    let e = g.conv2d(img, w, None, opts).unwrap_err().to_string();
    assert!(e.contains("cannot carry") && e.contains("conv2d"), "{e}");
    assert!(g.to_json().unwrap().contains("\"shape\": [1, 1, \"h\", 8]"));

    // Builders that would turn a run-time size into values refuse it, never guess.
    let idx = g
        .constant(HostTensor::new([1, 1], vec![0i32]).unwrap())
        .unwrap();
    let e = g.gather_nd(x, idx).unwrap_err().to_string();
    assert!(e.contains("gather_nd") && e.contains("[batch, 2]"), "{e}");
    let same = wgflow::Conv2dOptions {
        padding: [1, 1],
        ..Default::default()
    };
    let c = g.conv2d(img, w, None, same).unwrap();
    assert_eq!(g.dims(c).unwrap()[2], Dim::named("h"));
    let l = g.sum(c, Axes::All, false).unwrap();
    let e = g.gradients(l, &[w]).unwrap_err().to_string();
    assert!(e.contains("known spatial sizes"), "{e}");
    let mut s = session_on(&g, Device::Cpu);
    let f = |shape: &[usize]| {
        HostTensor::new(shape.to_vec(), vec![1.0f32; shape.iter().product()]).unwrap()
    };
    let e = s
        .run(&[(x, f(&[3, 2])), (y, f(&[4]))], &[z])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'batch'") && e.contains("x") && e.contains("y"),
        "{e}"
    );
    let e = s
        .run(&[(x, f(&[3, 2, 1])), (y, f(&[3]))], &[z])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 2") && e.contains("[batch, 2]"), "{e}");
    let e = s
        .run(&[(x, f(&[3, 5])), (y, f(&[3]))], &[z])
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 1 must be 2"), "{e}");
    // A fetch that needs a size no feed gave.
    let e = s.run(&[(x, f(&[3, 2]))], &[z]).unwrap_err().to_string();
    assert!(e.contains("batch") || e.contains("not fed"), "{e}");
    // A size that breaks a limit is an error at the run, naming the sizes and the op.
    let mut g = Graph::new();
    let x = g
        .placeholder_dyn("x", [Dim::named("n"), 1.into()], DType::F32)
        .unwrap();
    let wide = g
        .constant(HostTensor::new([1, 1 << 20], vec![0.0f32; 1 << 20]).unwrap())
        .unwrap();
    let big = g.add(x, wide).unwrap();
    let mut s = session_on(&g, Device::Cpu);
    assert_eq!(
        s.run(&[(x, f(&[2, 1]))], &[big]).unwrap()[0].shape().dims(),
        [2, 1 << 20]
    );
    let e = s
        .run(&[(x, f(&[8192, 1]))], &[big])
        .unwrap_err()
        .to_string();
    assert!(e.contains("n=8192") && e.contains("2^32"), "{e}");
}

/// d mean(tanh(x·w)) / dw with a run-time batch, against central differences in f64.
#[test]
fn gradients_with_a_run_time_batch_match_finite_differences() {
    let mut g = Graph::new();
    let x = g.placeholder_dyn("x", [None, Some(3)], DType::F32).unwrap();
    let w = g
        .variable("w", HostTensor::new([3, 2], values(6, 5)).unwrap())
        .unwrap();
    let h = g.matmul(x, w).unwrap();
    let t = g.tanh(h).unwrap();
    let loss = g.mean(t, Axes::All, false).unwrap();
    let dw = g.gradients(loss, &[w]).unwrap()[0].unwrap();
    let wv: Vec<f64> = values(6, 5).iter().map(|&v| f64::from(v)).collect();
    for device in devices() {
        let mut s = session_on(&g, device);
        for n in [4usize, 1, 7] {
            let xv = values(n * 3, 100 + n as u64);
            let got = s
                .run(&[(x, HostTensor::new([n, 3], xv.clone()).unwrap())], &[dw])
                .unwrap()[0]
                .to_vec::<f32>()
                .unwrap();
            let f = |w: &[f64]| -> f64 {
                let mut sum = 0.0;
                for r in 0..n {
                    for c in 0..2 {
                        let z: f64 = (0..3)
                            .map(|k| f64::from(xv[r * 3 + k]) * w[k * 2 + c])
                            .sum();
                        sum += z.tanh();
                    }
                }
                sum / (2 * n) as f64
            };
            for i in 0..6 {
                let (mut up, mut down) = (wv.clone(), wv.clone());
                up[i] += 1e-6;
                down[i] -= 1e-6;
                let want = (f(&up) - f(&down)) / 2e-6;
                assert!(
                    (f64::from(got[i]) - want).abs() < 1e-5,
                    "{device} n={n} dw[{i}] {} vs {want}",
                    got[i]
                );
            }
        }
    }
}

/// Version 3 graph files: run-time dimensions by name, saved and loaded back to a graph
/// that runs the same numbers; older versions cannot hold them; static graphs keep theirs.
#[test]
fn graph_files_keep_run_time_dimensions() {
    let m = mlp(None);
    let text = m.g.to_json().unwrap();
    assert!(text.contains("\"version\": 3"), "{text}");
    assert!(text.contains("[\"batch\", 8]"), "{text}");
    let back = Graph::from_json(&text).unwrap();
    assert_eq!(back.to_json().unwrap(), text, "saved again byte for byte");
    let t = |name: &str| back.tensor(name).unwrap();
    let x = t("x");
    assert_eq!(back.dims(x).unwrap(), [Dim::named("batch"), Dim::Known(8)]);
    let (loss, logits) = (t(m.g.name(m.loss).unwrap()), t(m.g.name(m.logits).unwrap()));
    let step = t(m.g.name(m.step).unwrap());
    let mut a = session_on(&m.g, Device::Cpu);
    let mut b = session_on(&back, Device::Cpu);
    for n in [5usize, 2, 5] {
        let feeds = batch_feeds(&m, n, n as u64);
        let loaded = vec![(x, feeds[0].1.clone()), (t("labels"), feeds[1].1.clone())];
        let want = a.run(&feeds, &[m.loss, m.logits, m.step]).unwrap();
        let got = b.run(&loaded, &[loss, logits, step]).unwrap();
        assert_eq!(got[0].words(), want[0].words(), "batch {n}");
        assert_eq!(got[1].words(), want[1].words(), "batch {n}");
    }
    // Version 2 cannot hold them; a name no placeholder declared is an error.
    let old = text.replace("\"version\": 3", "\"version\": 2");
    let e = Graph::from_json(&old).unwrap_err().to_string();
    assert!(e.contains("\"version\": 3"), "{e}");
    let stray = text.replacen("[\"batch\", 16]", "[\"rows\", 16]", 1);
    assert_ne!(stray, text);
    let e = Graph::from_json(&stray).unwrap_err().to_string();
    assert!(
        e.contains("'rows'") && e.contains("earlier placeholder"),
        "{e}"
    );
    for bad in [
        "\"8*\"",
        "\"a b\"",
        "\"\"",
        "[1]",
        "-3",
        "\"99999999999*batch\"",
    ] {
        let t = text.replacen("[\"batch\", 8]", &format!("[{bad}, 8]"), 1);
        let e = Graph::from_json(&t).unwrap_err().to_string();
        assert!(e.contains("shape"), "{bad}: {e}");
    }
    // Given sizes, the graph is static again and saves as before (version 2: variables).
    let fixed = m.g.with_dims(&[("batch", 4)]).unwrap();
    assert!(fixed.to_json().unwrap().contains("\"version\": 2"));
}

/// Two run-time dimensions (`[batch, seq, 8]`, as a transformer's input): flattening to rows,
/// splitting heads back out by name, attention-style scores; equal to static graphs.
#[test]
fn two_run_time_dimensions_flatten_and_split_by_name() {
    let build = |g: &mut Graph, x: Tensor, named: bool| -> wgflow::Result<Tensor> {
        let rows = g.reshape(x, &[-1, 8])?;
        let w = g.constant(HostTensor::new([8, 8], values(64, 3))?)?;
        let h = g.matmul(rows, w)?;
        let heads = if named {
            g.reshape_dims(
                h,
                [Dim::named("batch"), Dim::named("seq"), 2.into(), 4.into()],
            )?
        } else {
            let d = g.shape(x)?.dims().to_vec();
            g.reshape(h, &[d[0] as isize, d[1] as isize, 2, 4])?
        };
        let q = g.transpose(heads, &[0, 2, 1, 3])?;
        let k = g.transpose(heads, &[0, 2, 3, 1])?;
        let s = g.matmul(q, k)?;
        g.softmax(s, -1)
    };
    for device in devices() {
        let mut g = Graph::new();
        let x = g
            .placeholder_dyn(
                "x",
                [Dim::named("batch"), Dim::named("seq"), 8.into()],
                DType::F32,
            )
            .unwrap();
        let y = build(&mut g, x, true).unwrap();
        assert_eq!(
            g.dims(y).unwrap(),
            [
                Dim::named("batch"),
                Dim::Known(2),
                Dim::named("seq"),
                Dim::named("seq")
            ]
        );
        let mut s = session_on(&g, device);
        for (b, t) in [(2usize, 3usize), (1, 5), (2, 3)] {
            let feed = HostTensor::new([b, t, 8], values(b * t * 8, (b * 10 + t) as u64)).unwrap();
            let got = s.run(&[(x, feed.clone())], &[y]).unwrap();
            let mut fixed = Graph::new();
            let fx = fixed.placeholder("x", [b, t, 8], DType::F32).unwrap();
            let fy = build(&mut fixed, fx, false).unwrap();
            let want = session_on(&fixed, device)
                .run(&[(fx, feed)], &[fy])
                .unwrap();
            assert_eq!(got[0].shape(), want[0].shape(), "{device} {b}x{t}");
            assert_eq!(got[0].words(), want[0].words(), "{device} {b}x{t}");
        }
        assert_eq!(s.counters().plans_compiled, 2);
    }
}

/// TensorFlow's first tutorial (`y_ * tf.log(y)` with both `[None, 10]`): an unnamed run-time
/// dimension of a placeholder nothing uses yet takes the symbol it meets in an elementwise
/// op, so the program builds; the feeds must then agree. Named or already-used dimensions
/// are never merged.
#[test]
fn unnamed_dimensions_of_fresh_placeholders_meet_as_in_tensorflow() {
    let mut g = Graph::new();
    let x = g
        .placeholder_dyn("x", [Dim::Unknown, 3.into()], DType::F32)
        .unwrap();
    let w = g
        .constant(HostTensor::new([3, 1], vec![1.0f32, -2.0, 0.5]).unwrap())
        .unwrap();
    let y = g.matmul(x, w).unwrap();
    let t = g
        .placeholder_dyn("t", [Dim::Unknown, 1.into()], DType::F32)
        .unwrap();
    let d = g.sub(y, t).unwrap();
    assert_eq!(g.dims(t).unwrap(), [Dim::named("x.0"), Dim::Known(1)]);
    assert_eq!(g.dims(d).unwrap(), [Dim::named("x.0"), Dim::Known(1)]);
    let sq = g.mul(d, d).unwrap();
    let loss = g.mean(sq, Axes::All, false).unwrap();
    // The graph file names the shared dimension and loads to the same graph.
    let text = g.to_json().unwrap();
    let back = Graph::from_json(&text).unwrap();
    assert_eq!(back.to_json().unwrap(), text);
    for dev in devices() {
        let mut s = session_on(&g, dev);
        for n in [5usize, 2] {
            let xs = values(n * 3, n as u64);
            let ts = values(n, 7);
            let want: f64 = (0..n)
                .map(|i| {
                    let r = &xs[i * 3..i * 3 + 3];
                    let e = r[0] as f64 - 2.0 * r[1] as f64 + 0.5 * r[2] as f64 - ts[i] as f64;
                    e * e
                })
                .sum::<f64>()
                / n as f64;
            let feeds = [
                (x, HostTensor::new([n, 3], xs).unwrap()),
                (t, HostTensor::new([n, 1], ts).unwrap()),
            ];
            let got = s.run(&feeds, &[loss]).unwrap()[0].to_vec::<f32>().unwrap()[0];
            assert!(
                (got as f64 - want).abs() <= 1e-5 * want.max(1.0),
                "{dev} {n}: {got} vs {want}"
            );
        }
        // Sizes that disagree are a feed error naming the dimension, not a wrong answer.
        let feeds = [
            (x, HostTensor::new([4, 3], vec![0.0f32; 12]).unwrap()),
            (t, HostTensor::new([3, 1], vec![0.0f32; 3]).unwrap()),
        ];
        let e = s.run(&feeds, &[loss]).unwrap_err().to_string();
        assert!(
            e.contains("feed 't': dimension 'x.0' is 3 here") && e.contains("4 in the feed of 'x'"),
            "{dev}: {e}"
        );
    }
    // The merged-away dimension is gone: a binding names only x.0.
    assert_eq!(g.dim_names(), ["x.0"]);
    let fixed = g.with_dims(&[("x.0", 4)]).unwrap();
    assert_eq!(fixed.shape(t).unwrap().dims(), &[4, 1]);
    // Labels declared first still join the batch of the tensor they meet (a used or named
    // dimension is the one kept), here a named one.
    let mut g = Graph::new();
    let labels = g
        .placeholder_dyn("labels", [Dim::Unknown, 2.into()], DType::F32)
        .unwrap();
    let h = g
        .placeholder_dyn("h", [Dim::named("batch"), 2.into()], DType::F32)
        .unwrap();
    let e = g.exp(h).unwrap();
    let p = g.mul(labels, e).unwrap();
    assert_eq!(
        g.dims(labels).unwrap(),
        [Dim::named("batch"), Dim::Known(2)]
    );
    assert_eq!(g.dim_names(), ["batch"]);
    let mut s = session_on(&g, Device::Cpu);
    let out = s
        .run(
            &[
                (labels, HostTensor::new([1, 2], vec![2.0f32, -1.0]).unwrap()),
                (h, HostTensor::new([1, 2], vec![0.0f32, 1.0]).unwrap()),
            ],
            &[p],
        )
        .unwrap();
    let want = [2.0f32, -(1.0f64.exp() as f32)];
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
    // A fresh placeholder joins a used one; two used ones, or two names, stay apart.
    let mut g = Graph::new();
    let a = g.placeholder_dyn("a", [Dim::Unknown], DType::F32).unwrap();
    let b = g.placeholder_dyn("b", [Dim::Unknown], DType::F32).unwrap();
    let _used = g.exp(b).unwrap();
    g.add(a, b).unwrap();
    assert_eq!(g.dims(a).unwrap(), [Dim::named("b.0")]);
    let p = g.placeholder_dyn("p", [Dim::Unknown], DType::F32).unwrap();
    let _p_used = g.exp(p).unwrap();
    let e = g.add(b, p).unwrap_err().to_string();
    assert!(e.contains("cannot broadcast"), "{e}");
    let c = g
        .placeholder_dyn("c", [Dim::named("rows")], DType::F32)
        .unwrap();
    let d = g
        .placeholder_dyn("d", [Dim::named("cols")], DType::F32)
        .unwrap();
    let e = g.add(c, d).unwrap_err().to_string();
    assert!(e.contains("cannot broadcast"), "{e}");
}
