//! segment_sum on cpu:0 and every GPU: against f64 sums and against f32 sums added in
//! ascending position here (the documented order, so the bits must match exactly), with
//! dropped ids, a long axis that runs as several GPU passes, integers that wrap, special
//! values, gradients (its own and `take`'s, which now runs through it) against hand-derived
//! rules, an embedding-sized gradient without a `[vocab, tokens]` intermediate, errors and
//! graph files.

use crate::common::{assert_close, gpus, session_on, Rng};
use wgflow::ops::segment::SEGMENT_CHUNK;
use wgflow::{Axes, DType, Device, Graph, HostTensor, Shape};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

fn t<T: wgflow::Element>(shape: &[usize], v: Vec<T>) -> HostTensor {
    HostTensor::new(Shape(shape.to_vec()), v).unwrap()
}

fn value(r: &mut Rng) -> f32 {
    (r.below(2001) as f32 - 1000.0) / 300.0
}

/// `[pre, m, post]` data summed into `[pre, n, post]` in ascending position, in `T`.
fn seg_ref<T: Copy + Default + std::ops::Add<Output = T>>(
    data: &[T],
    ids: &[i32],
    (pre, m, post): (usize, usize, usize),
    n: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); pre * n * post];
    for q in 0..pre {
        for (j, &id) in ids.iter().enumerate() {
            if id < 0 || id as usize >= n {
                continue;
            }
            for c in 0..post {
                let o = (q * n + id as usize) * post + c;
                out[o] = out[o] + data[(q * m + j) * post + c];
            }
        }
    }
    out
}

fn run_segment(
    device: Device,
    dims: &[usize],
    axis: usize,
    data: &[f32],
    ids: &[i32],
    n: usize,
) -> (HostTensor, usize) {
    let mut g = Graph::new();
    let x = g.constant(t(dims, data.to_vec())).unwrap();
    let i = g.placeholder("ids", [ids.len()], DType::I32).unwrap();
    let y = g.segment_sum(x, i, n, axis as isize).unwrap();
    let mut s = session_on(&g, device);
    let feeds = [(i, t(&[ids.len()], ids.to_vec()))];
    let a = s.run(&feeds, &[y]).unwrap().remove(0);
    let b = s.run(&feeds, &[y]).unwrap().remove(0);
    assert_eq!(a.words(), b.words(), "{device}: two runs differ");
    let dispatches = s.plan(&[y]).unwrap().dispatch_count();
    (a, dispatches)
}

#[test]
fn sums_match_f64_and_the_documented_order_bit_for_bit_on_every_device() {
    // Odd sizes, an axis in the middle, ids out of range on both sides (dropped), empty
    // segments, a single position.
    let cases: [(&[usize], usize, usize); 5] = [
        (&[3, 37, 5], 1, 11),
        (&[37, 6], 0, 50),
        (&[2, 3, 1], 2, 4),
        (&[1], 0, 1),
        (&[4, 300, 2], 1, 7),
    ];
    let mut r = Rng(7);
    for (dims, axis, n) in cases {
        let m = dims[axis];
        let pre: usize = dims[..axis].iter().product();
        let post: usize = dims[axis + 1..].iter().product();
        let data: Vec<f32> = (0..dims.iter().product()).map(|_| value(&mut r)).collect();
        let ids: Vec<i32> = (0..m).map(|_| r.below(n + 4) as i32 - 2).collect();
        let mut out_dims = dims.to_vec();
        out_dims[axis] = n;
        let exact = seg_ref(&data, &ids, (pre, m, post), n);
        let wide: Vec<f64> = data.iter().map(|&v| v as f64).collect();
        let f64s = seg_ref(&wide, &ids, (pre, m, post), n);
        let f64s: Vec<f32> = f64s.iter().map(|&v| v as f32).collect();
        for device in devices() {
            let (got, _) = run_segment(device, dims, axis, &data, &ids, n);
            let what = format!("{device} {dims:?} axis {axis} into {n}");
            assert_close(&what, &got, &t(&out_dims, f64s.clone()), 1e-5, 1e-4);
            assert_eq!(
                got.words(),
                t(&out_dims, exact.clone()).words(),
                "{what}: order"
            );
        }
    }
}

#[test]
fn a_long_axis_sorts_and_sums_in_passes_with_the_same_bits() {
    // More positions than one GPU sum pass walks, most of them in a handful of segments
    // (a frequent character), a few hundred rare ones.
    let m = SEGMENT_CHUNK + 1000;
    let (n, post) = (300usize, 3usize);
    let mut r = Rng(19);
    let data: Vec<f32> = (0..m * post).map(|_| value(&mut r)).collect();
    let ids: Vec<i32> = (0..m)
        .map(|_| {
            if r.below(4) == 0 {
                r.below(n) as i32
            } else {
                r.below(3) as i32
            }
        })
        .collect();
    let want = seg_ref(&data, &ids, (1, m, post), n);
    for device in devices() {
        let (got, dispatches) = run_segment(device, &[m, post], 0, &data, &ids, n);
        assert_eq!(got.words(), t(&[n, post], want.clone()).words(), "{device}");
        if device != Device::Cpu {
            // Keys, 13·14/2 bitonic stages for 8192 sort keys, two sum passes.
            assert_eq!(dispatches, 1 + 91 + 2, "{device}");
        } else {
            assert_eq!(dispatches, 1, "cpu:0 runs one kernel");
        }
    }
}

#[test]
fn integers_wrap_and_special_floats_propagate() {
    for device in devices() {
        let mut g = Graph::new();
        let x = g
            .constant(t(&[4], vec![i32::MAX, 1, i32::MIN, -1]))
            .unwrap();
        let i = g.constant(t(&[4], vec![0i32, 0, 1, 1])).unwrap();
        let y = g.segment_sum(x, i, 2, 0).unwrap();
        let f = g
            .constant(t(
                &[5],
                vec![f32::NAN, 1.0, f32::INFINITY, f32::NEG_INFINITY, -0.0],
            ))
            .unwrap();
        let fi = g.constant(t(&[5], vec![0i32, 0, 1, 1, 2])).unwrap();
        let z = g.segment_sum(f, fi, 4, 0).unwrap();
        let out = session_on(&g, device).run(&[], &[y, z]).unwrap();
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            vec![i32::MIN, i32::MAX],
            "{device}"
        );
        let z = out[1].to_vec::<f32>().unwrap();
        assert!(z[0].is_nan() && z[1].is_nan(), "{device}: {z:?}");
        // A sum starts from +0: -0 + 0 = +0 (as NumPy's and JAX's segment sums give).
        assert_eq!(z[2].to_bits(), 0, "{device}");
        assert_eq!(z[3].to_bits(), 0, "{device}: empty segment");
    }
}

#[test]
fn gradients_of_segment_sum_and_take_follow_the_rules_on_every_device() {
    // loss = Σ w·y for fixed w: d/d(data)[q, j, c] = w[q, ids[j], c] (0 for a dropped id);
    // take's gradient adds w's rows at each (wrapped, clamped) index.
    let (pre, m, post, n) = (2usize, 9usize, 3usize, 5usize);
    let mut r = Rng(5);
    let data: Vec<f32> = (0..pre * m * post).map(|_| value(&mut r)).collect();
    let ids: Vec<i32> = vec![0, 4, -1, 2, 2, 7, 0, 4, 4];
    let w: Vec<f32> = (0..pre * n * post).map(|_| value(&mut r)).collect();
    let x_take: Vec<f32> = (0..n * post).map(|_| value(&mut r)).collect();
    let take_idx: Vec<i32> = vec![1, -1, 4, 1, 9, -9, 0];
    let w2: Vec<f32> = (0..take_idx.len() * post).map(|_| value(&mut r)).collect();
    let mut dd = vec![0.0f32; pre * m * post];
    for q in 0..pre {
        for j in 0..m {
            for c in 0..post {
                if (0..n as i32).contains(&ids[j]) {
                    dd[(q * m + j) * post + c] = w[(q * n + ids[j] as usize) * post + c];
                }
            }
        }
    }
    let mut dx = vec![0.0f64; n * post];
    for (k, &i) in take_idx.iter().enumerate() {
        let row = (if i < 0 { i + n as i32 } else { i }).clamp(0, n as i32 - 1) as usize;
        for c in 0..post {
            dx[row * post + c] += w2[k * post + c] as f64;
        }
    }
    let dx: Vec<f32> = dx.iter().map(|&v| v as f32).collect();
    for device in devices() {
        let mut g = Graph::new();
        let x = g.constant(t(&[pre, m, post], data.clone())).unwrap();
        let i = g.constant(t(&[m], ids.clone())).unwrap();
        let wt = g.constant(t(&[pre, n, post], w.clone())).unwrap();
        let y = g.segment_sum(x, i, n, 1).unwrap();
        let l1 = g.mul(y, wt).unwrap();
        let l1 = g.sum(l1, Axes::All, false).unwrap();
        let e = g.constant(t(&[n, post], x_take.clone())).unwrap();
        let ti = g.placeholder("ti", [take_idx.len()], DType::I32).unwrap();
        let tk = g.take(e, ti, 0).unwrap();
        let w2t = g.constant(t(&[take_idx.len(), post], w2.clone())).unwrap();
        let l2 = g.mul(tk, w2t).unwrap();
        let l2 = g.sum(l2, Axes::All, false).unwrap();
        let loss = g.add(l1, l2).unwrap();
        let grads: Vec<_> = g
            .gradients(loss, &[x, e])
            .unwrap()
            .into_iter()
            .map(|d| d.unwrap())
            .collect();
        let feeds = [(ti, t(&[take_idx.len()], take_idx.clone()))];
        let out = session_on(&g, device).run(&feeds, &grads).unwrap();
        let what = device.to_string();
        assert_close(&what, &out[0], &t(&[pre, m, post], dd.clone()), 0.0, 0.0);
        assert_close(&what, &out[1], &t(&[n, post], dx.clone()), 1e-6, 1e-6);
    }
}

#[test]
fn an_embedding_gradient_builds_no_vocab_by_tokens_matrix() {
    // 50k × 64 table, 512 tokens: a one-hot would be 100 MB; the segment sum's peak is the
    // gradient itself plus small keys.
    let (vocab, width, tokens) = (50_000usize, 64usize, 512usize);
    let mut g = Graph::new();
    let table = g.zeros([vocab, width], DType::F32).unwrap();
    let ids = g.placeholder("ids", [tokens], DType::I32).unwrap();
    let rows = g.take(table, ids, 0).unwrap();
    let sq = g.square(rows).unwrap();
    let loss = g.sum(sq, Axes::All, false).unwrap();
    let d = g.gradients(loss, &[table]).unwrap().remove(0).unwrap();
    let grad_bytes = (vocab * width * 4) as u64;
    for device in devices() {
        let mut s = session_on(&g, device);
        let plan = s.plan(&[d]).unwrap();
        let mem = plan.memory(device).expect("a memory plan");
        assert!(
            mem.peak_bytes < grad_bytes + (4 << 20),
            "{device}: peak {} B\n{}",
            mem.peak_bytes,
            plan.describe()
        );
        assert!(!plan.describe().contains(&format!("[{vocab}, {tokens}]")));
    }
}

#[test]
fn bad_arguments_are_build_errors() {
    let mut g = Graph::new();
    let x = g.zeros([6, 4], DType::F32).unwrap();
    let ids = g.zeros([6], DType::I32).unwrap();
    let short = g.zeros([5], DType::I32).unwrap();
    let wide = g.zeros([6, 1], DType::I32).unwrap();
    let fids = g.zeros([6], DType::F32).unwrap();
    let h = g.zeros([6, 4], DType::F16).unwrap();
    let expect = |r: wgflow::Result<wgflow::Tensor>, has: &str| {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(has), "'{e}' should say '{has}'");
        assert!(
            e.contains("ops_segment.rs"),
            "'{e}' should point at the caller"
        );
    };
    expect(g.segment_sum(x, short, 3, 0), "1-D of the length");
    expect(g.segment_sum(x, wide, 3, 0), "1-D of the length");
    expect(g.segment_sum(x, fids, 3, 0), "must be i32");
    expect(g.segment_sum(x, ids, 3, 2), "out of range");
    expect(g.segment_sum(h, ids, 3, 0), "not supported");
}

#[test]
fn graph_files_round_trip_and_no_positions_give_zeros() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [3, 4], DType::F32).unwrap();
    let i = g.placeholder("i", [4], DType::I32).unwrap();
    let y = g.segment_sum(x, i, 9, -1).unwrap();
    let json = g.to_json().unwrap();
    assert!(json.contains("segment_sum"), "{json}");
    let h = Graph::from_json(&json).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    let _ = y;
    for device in devices() {
        let mut g = Graph::new();
        let x = g.zeros([2, 0], DType::F32).unwrap();
        let i = g.zeros([0], DType::I32).unwrap();
        let y = g.segment_sum(x, i, 3, 1).unwrap();
        let out = session_on(&g, device).run(&[], &[y]).unwrap().remove(0);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0; 6], "{device}");
    }
}
