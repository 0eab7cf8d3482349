//! Fused attention on cpu:0 and every GPU: the output and the gradients of q, k and v
//! against float64 (the probabilities and their vector-Jacobian product written out here),
//! against the composite `softmax(scale · q kᵀ + mask) v` and its gradients, causal and not,
//! odd sizes, fewer queries than keys (decoding), no `[Tq, Tk]` value in the plan, errors and
//! graph files.

use crate::common::{assert_close, gpus, session_on, Rng};
use wgflow::{Axes, DType, Device, Graph, HostTensor, Shape, Tensor};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

fn t(shape: &[usize], v: Vec<f32>) -> HostTensor {
    HostTensor::new(Shape(shape.to_vec()), v).unwrap()
}

fn values(r: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (r.below(2001) as f32 - 1000.0) / 1000.0 * scale)
        .collect()
}

/// The float64 forward pass and the gradients of `Σ w ⊙ out` for `[h, tq, d]`, `[h, tk, d]`.
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    w: &[f32],
    (h, tq, tk, d): (usize, usize, usize, usize),
    causal: bool,
    scale: f64,
) -> [Vec<f32>; 4] {
    let (mut o, mut dq) = (vec![0.0f64; h * tq * d], vec![0.0f64; h * tq * d]);
    let (mut dk, mut dv) = (vec![0.0f64; h * tk * d], vec![0.0f64; h * tk * d]);
    for b in 0..h {
        let qr = |i: usize, e: usize| q[(b * tq + i) * d + e] as f64;
        let kr = |j: usize, e: usize| k[(b * tk + j) * d + e] as f64;
        let vr = |j: usize, e: usize| v[(b * tk + j) * d + e] as f64;
        let wr = |i: usize, e: usize| w[(b * tq + i) * d + e] as f64;
        for i in 0..tq {
            let seen = if causal {
                (i + 1 + tk - tq).min(tk)
            } else {
                tk
            };
            let s: Vec<f64> = (0..seen)
                .map(|j| scale * (0..d).map(|e| qr(i, e) * kr(j, e)).sum::<f64>())
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
            let p: Vec<f64> = s.iter().map(|x| (x - m).exp() / z).collect();
            for e in 0..d {
                o[(b * tq + i) * d + e] = (0..seen).map(|j| p[j] * vr(j, e)).sum();
            }
            let dp: Vec<f64> = (0..seen)
                .map(|j| (0..d).map(|e| wr(i, e) * vr(j, e)).sum())
                .collect();
            let pdp: f64 = (0..seen).map(|j| p[j] * dp[j]).sum();
            for j in 0..seen {
                let ds = p[j] * (dp[j] - pdp);
                for e in 0..d {
                    dq[(b * tq + i) * d + e] += scale * ds * kr(j, e);
                    dk[(b * tk + j) * d + e] += scale * ds * qr(i, e);
                    dv[(b * tk + j) * d + e] += p[j] * wr(i, e);
                }
            }
        }
    }
    [o, dq, dk, dv].map(|x| x.iter().map(|&v| v as f32).collect())
}

/// `softmax(scale · q kᵀ + mask) v` from primitives (the reference composite).
#[allow(clippy::too_many_arguments)]
fn composite(
    g: &mut Graph,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tq: usize,
    tk: usize,
    causal: bool,
    scale: f32,
) -> Tensor {
    let kt = g.transpose(k, &[0, 2, 1]).unwrap();
    let s = g.matmul(q, kt).unwrap();
    let sc = g.full(Shape::scalar(), DType::F32, scale as f64).unwrap();
    let mut s = g.mul(s, sc).unwrap();
    if causal {
        let mask: Vec<f32> = (0..tq * tk)
            .map(|x| {
                if x % tk > x / tk + tk - tq {
                    -1e30
                } else {
                    0.0
                }
            })
            .collect();
        let m = g.constant(t(&[tq, tk], mask)).unwrap();
        s = g.add(s, m).unwrap();
    }
    let p = g.softmax(s, -1).unwrap();
    g.matmul(p, v).unwrap()
}

// Past one 64-row tile of cpu:0's kernels: (2, 70, 70, ..) and (1, 67, 130, ..).
const CASES: [(usize, usize, usize, usize, bool); 8] = [
    (2, 70, 70, 8, true),
    (1, 67, 130, 4, true),
    (1, 66, 65, 3, false),
    (2, 7, 7, 5, true),
    (3, 5, 9, 8, false),
    (1, 3, 8, 4, true),
    (2, 13, 13, 24, true),
    (1, 1, 6, 3, false),
];

#[test]
fn fused_attention_and_its_gradients_match_float64_and_the_composite_on_every_device() {
    let mut r = Rng(29);
    for (h, tq, tk, d, causal) in CASES {
        let (qs, ks) = ([h, tq, d], [h, tk, d]);
        let q = values(&mut r, h * tq * d, 1.5);
        let k = values(&mut r, h * tk * d, 1.5);
        let v = values(&mut r, h * tk * d, 1.0);
        let w = values(&mut r, h * tq * d, 1.0);
        let scale = 1.0 / (d as f32).sqrt();
        let want = reference(&q, &k, &v, &w, (h, tq, tk, d), causal, scale as f64);
        for device in devices() {
            let mut g = Graph::new();
            let (qt, kt) = (
                g.constant(t(&qs, q.clone())).unwrap(),
                g.constant(t(&ks, k.clone())).unwrap(),
            );
            let vt = g.constant(t(&ks, v.clone())).unwrap();
            let wt = g.constant(t(&qs, w.clone())).unwrap();
            let fused = g.attention(qt, kt, vt, causal, None).unwrap();
            let comp = composite(&mut g, qt, kt, vt, tq, tk, causal, scale);
            let mut fetches = vec![fused, comp];
            for o in [fused, comp] {
                let l = g.mul(o, wt).unwrap();
                let l = g.sum(l, Axes::All, false).unwrap();
                fetches.extend(
                    g.gradients(l, &[qt, kt, vt])
                        .unwrap()
                        .into_iter()
                        .map(|x| x.unwrap()),
                );
            }
            let out = session_on(&g, device).run(&[], &fetches).unwrap();
            let what = format!("{device} h {h} tq {tq} tk {tk} d {d} causal {causal}");
            let shapes = [&qs, &qs, &ks, &ks];
            for (n, name) in ["out", "dq", "dk", "dv"].iter().enumerate() {
                let fused = if n == 0 { &out[0] } else { &out[1 + n] };
                let comp = if n == 0 { &out[1] } else { &out[4 + n] };
                let want = t(shapes[n], want[n].clone());
                assert_close(&format!("{what} fused {name}"), fused, &want, 1e-4, 2e-5);
                assert_close(&format!("{what} composite {name}"), comp, &want, 1e-4, 2e-5);
            }
        }
    }
}

#[test]
fn multi_head_layout_and_no_scores_in_the_plan() {
    // [batch, heads, T, hd] with T = 37: no value of the plan has a [.., 37, 37] shape.
    let (b, h, tt, d) = (2, 3, 37, 8);
    let mut r = Rng(3);
    let shape = [b, h, tt, d];
    let n = b * h * tt * d;
    let (q, k, v) = (
        values(&mut r, n, 1.0),
        values(&mut r, n, 1.0),
        values(&mut r, n, 1.0),
    );
    let want = reference(&q, &k, &v, &vec![1.0; n], (b * h, tt, tt, d), true, 0.25);
    for device in devices() {
        let mut g = Graph::new();
        let qt = g.placeholder("q", shape, DType::F32).unwrap();
        let kt = g.placeholder("k", shape, DType::F32).unwrap();
        let vt = g.placeholder("v", shape, DType::F32).unwrap();
        let o = g.attention(qt, kt, vt, true, Some(0.25)).unwrap();
        let l = g.sum(o, Axes::All, false).unwrap();
        let grads: Vec<Tensor> = g
            .gradients(l, &[qt, kt, vt])
            .unwrap()
            .into_iter()
            .map(|x| x.unwrap())
            .collect();
        let mut s = session_on(&g, device);
        let mut fetches = vec![o];
        fetches.extend(&grads);
        let feeds = [
            (qt, t(&shape, q.clone())),
            (kt, t(&shape, k.clone())),
            (vt, t(&shape, v.clone())),
        ];
        let out = s.run(&feeds, &fetches).unwrap();
        for (i, name) in ["out", "dq", "dk", "dv"].iter().enumerate() {
            assert_close(
                &format!("{device} {name}"),
                &out[i],
                &t(&shape, want[i].clone()),
                1e-4,
                2e-5,
            );
        }
        let plan = s.plan(&fetches).unwrap().describe();
        assert!(
            !plan.contains(&format!("{tt}, {tt}]")),
            "{device}: a [T, T] value\n{plan}"
        );
    }
}

#[test]
fn bad_arguments_are_build_errors_and_graph_files_round_trip() {
    let mut g = Graph::new();
    let q = g.placeholder("q", [2, 5, 4], DType::F32).unwrap();
    let k = g.placeholder("k", [2, 3, 4], DType::F32).unwrap();
    let k8 = g.placeholder("k8", [2, 6, 8], DType::F32).unwrap();
    let k0 = g.placeholder("k0", [2, 0, 4], DType::F32).unwrap();
    let qi = g.placeholder("qi", [2, 5, 4], DType::I32).unwrap();
    let v6 = g.placeholder("v6", [2, 6, 4], DType::F32).unwrap();
    let expect = |r: wgflow::Result<Tensor>, has: &str| {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(has), "'{e}' should say '{has}'");
        assert!(
            e.contains("ops_attention.rs"),
            "'{e}' should point at the caller"
        );
    };
    expect(
        g.attention(q, k, k, true, None),
        "at most as many queries as keys",
    );
    expect(g.attention(q, k8, k8, false, None), "share");
    expect(g.attention(qi, k, k, false, None), "expects f32");
    expect(g.attention(q, k, v6, false, None), "must have the shape");
    expect(g.attention(q, k0, k0, false, None), "no keys");
    expect(g.attention(q, k, k, false, Some(f32::NAN)), "not finite");
    let o = g.attention(q, k, k, false, Some(0.5)).unwrap();
    let l = g.sum(o, Axes::All, false).unwrap();
    let _ = g.gradients(l, &[q, k]).unwrap();
    let json = g.to_json().unwrap();
    for op in [
        "\"attention\"",
        "attention_lse",
        "attention_grad_q",
        "attention_grad_k",
        "attention_grad_v",
    ] {
        assert!(json.contains(op), "{op} in {json}");
    }
    let back = Graph::from_json(&json).unwrap();
    assert_eq!(back.to_def().unwrap(), g.to_def().unwrap());
}
