//! The fused row ops on cpu:0 and every GPU: layer normalisation and softmax cross-entropy
//! with integer labels, forward and backward, against float64 written out here; rows from 1
//! to 70,000 wide (past a GPU workgroup's stride and a 50k vocabulary), large and infinite
//! logits, labels outside the classes, no log-probabilities in the plan, errors, graph files.

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

fn values(r: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n)
        .map(|_| lo + (hi - lo) * r.below(1 << 20) as f32 / (1 << 20) as f32)
        .collect()
}

/// Layer normalisation of `[rows, d]` and the gradients of `Σ w ⊙ y` in float64:
/// `[y, dx, dγ, dβ]`.
fn ln_reference(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    w: &[f32],
    d: usize,
    eps: f64,
) -> [Vec<f32>; 4] {
    let rows = x.len() / d;
    let (mut y, mut dx) = (vec![0.0f64; x.len()], vec![0.0f64; x.len()]);
    let (mut dg, mut db) = (vec![0.0f64; d], vec![0.0f64; d]);
    for r in 0..rows {
        let xr: Vec<f64> = x[r * d..(r + 1) * d].iter().map(|&v| v as f64).collect();
        let mean = xr.iter().sum::<f64>() / d as f64;
        let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        let rs = 1.0 / (var + eps).sqrt();
        let xhat: Vec<f64> = xr.iter().map(|v| (v - mean) * rs).collect();
        let g: Vec<f64> = (0..d)
            .map(|e| w[r * d + e] as f64 * gamma[e] as f64)
            .collect();
        let a = g.iter().sum::<f64>() / d as f64;
        let b = (0..d).map(|e| g[e] * xhat[e]).sum::<f64>() / d as f64;
        for e in 0..d {
            y[r * d + e] = xhat[e] * gamma[e] as f64 + beta[e] as f64;
            dx[r * d + e] = rs * (g[e] - a - xhat[e] * b);
            dg[e] += w[r * d + e] as f64 * xhat[e];
            db[e] += w[r * d + e] as f64;
        }
    }
    [y, dx, dg, db].map(|v| v.iter().map(|&x| x as f32).collect())
}

/// Per-row cross-entropy of `[rows, c]` logits and the gradient of `Σ w ⊙ loss` in float64.
fn xent_reference(x: &[f32], labels: &[i32], w: &[f32], c: usize) -> [Vec<f32>; 2] {
    let rows = labels.len();
    let (mut loss, mut dx) = (vec![0.0f64; rows], vec![0.0f64; rows * c]);
    for r in 0..rows {
        let xr: Vec<f64> = x[r * c..(r + 1) * c].iter().map(|&v| v as f64).collect();
        let m = xr.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = xr.iter().map(|v| (v - m).exp()).sum();
        let l = labels[r];
        if l < 0 || l as usize >= c {
            loss[r] = f64::NAN;
            dx[r * c..(r + 1) * c].fill(f64::NAN);
            continue;
        }
        loss[r] = m + s.ln() - xr[l as usize];
        for e in 0..c {
            let p = (xr[e] - m).exp() / s;
            dx[r * c + e] = (p - f64::from(e == l as usize)) * w[r] as f64;
        }
    }
    [loss, dx].map(|v| v.iter().map(|&x| x as f32).collect())
}

#[test]
fn fused_layer_norm_and_its_gradients_match_float64_on_every_device() {
    let mut r = Rng(41);
    // (leading axes, D): one value per row, odd widths, a row past 64·64 and one of 70,000.
    let cases: [(&[usize], usize); 6] = [
        (&[3], 1),
        (&[5], 7),
        (&[2, 3], 33),
        (&[4], 130),
        (&[3], 4099),
        (&[2], 70_000),
    ];
    for (lead, d) in cases {
        let rows: usize = lead.iter().product();
        let mut shape = lead.to_vec();
        shape.push(d);
        // An offset far from zero: the two-pass variance keeps its digits.
        let x = values(&mut r, rows * d, 95.0, 105.0);
        let gamma = values(&mut r, d, 0.5, 1.5);
        let beta = values(&mut r, d, -1.0, 1.0);
        let w = values(&mut r, rows * d, -1.0, 1.0);
        let want = ln_reference(&x, &gamma, &beta, &w, d, 1e-5);
        for device in devices() {
            let mut g = Graph::new();
            let xt = g
                .placeholder("x", Shape(shape.clone()), DType::F32)
                .unwrap();
            let gt = g.constant(t(&[d], gamma.clone())).unwrap();
            let bt = g.constant(t(&[d], beta.clone())).unwrap();
            let wt = g.constant(t(&shape, w.clone())).unwrap();
            let y = g.layer_norm(xt, Some(gt), Some(bt), -1, 1e-5).unwrap();
            assert_eq!(g.node(y).unwrap().op.name(), "layer_norm", "fused");
            let l = g.mul(y, wt).unwrap();
            let l = g.sum(l, Axes::All, false).unwrap();
            let grads = g.gradients(l, &[xt, gt, bt]).unwrap();
            let mut fetches = vec![y];
            fetches.extend(grads.into_iter().map(|x| x.unwrap()));
            let out = session_on(&g, device)
                .run(&[(xt, t(&shape, x.clone()))], &fetches)
                .unwrap();
            let what = format!("{device} {shape:?}");
            let shapes = [shape.as_slice(), &shape, &[d], &[d]];
            for (i, name) in ["y", "dx", "dgamma", "dbeta"].iter().enumerate() {
                // dγ and dβ sum `rows` terms; dx subtracts two means of the row.
                let atol = if i == 1 {
                    2e-5 * (d as f32).sqrt()
                } else {
                    2e-5 * rows as f32
                };
                assert_close(
                    &format!("{what} {name}"),
                    &out[i],
                    &t(shapes[i], want[i].clone()),
                    2e-4,
                    atol,
                );
            }
        }
    }
}

#[test]
fn fused_cross_entropy_and_its_gradient_match_float64_on_every_device() {
    let mut r = Rng(7);
    // (rows, classes, logit range): one class, small, a 50k vocabulary, large logits.
    let cases = [
        (4, 1, 3.0),
        (6, 5, 4.0),
        (9, 257, 6.0),
        (3, 50_000, 8.0),
        (5, 40, 3.0e4),
    ];
    for (rows, c, range) in cases {
        let x = values(&mut r, rows * c, -range, range);
        let mut labels: Vec<i32> = (0..rows).map(|_| r.below(c) as i32).collect();
        // A label past the classes and a negative one give NaN rows.
        if rows > 4 {
            labels[1] = c as i32;
            labels[3] = -1;
        }
        let w = values(&mut r, rows, 0.5, 1.5);
        let want = xent_reference(&x, &labels, &w, c);
        for device in devices() {
            let mut g = Graph::new();
            let xt = g.placeholder("x", [rows, c], DType::F32).unwrap();
            let lt = g
                .constant(HostTensor::new([rows], labels.clone()).unwrap())
                .unwrap();
            let wt = g.constant(t(&[rows], w.clone())).unwrap();
            let loss = g.sparse_softmax_cross_entropy(xt, lt).unwrap();
            let l = g.mul(loss, wt).unwrap();
            let l = g.sum(l, Axes::All, false).unwrap();
            let dx = g.gradients(l, &[xt]).unwrap()[0].unwrap();
            let out = session_on(&g, device)
                .run(&[(xt, t(&[rows, c], x.clone()))], &[loss, dx])
                .unwrap();
            let what = format!("{device} rows {rows} classes {c} range {range}");
            assert_close(
                &format!("{what} loss"),
                &out[0],
                &t(&[rows], want[0].clone()),
                1e-5,
                2e-4,
            );
            assert_close(
                &format!("{what} dlogits"),
                &out[1],
                &t(&[rows, c], want[1].clone()),
                1e-4,
                1e-6,
            );
        }
    }
}

#[test]
fn cross_entropy_of_infinite_logits_follows_log_softmax() {
    let inf = f32::INFINITY;
    // Rows: a -inf logit elsewhere (0 probability), +inf at the label (NaN, as
    // log_softmax), +inf elsewhere (+inf loss), all -inf (NaN).
    let x = vec![
        1.0, -inf, 2.0, //
        0.0, inf, 1.0, //
        inf, 0.0, 1.0, //
        -inf, -inf, -inf,
    ];
    let labels = vec![0i32, 1, 1, 2];
    let mut want = [0.0f32; 4];
    want[0] = ((1.0f64.exp() + 2.0f64.exp()).ln() - 1.0) as f32;
    want[1] = f32::NAN;
    want[2] = inf;
    want[3] = f32::NAN;
    for device in devices() {
        let mut g = Graph::new();
        let xt = g.constant(t(&[4, 3], x.clone())).unwrap();
        let lt = g
            .constant(HostTensor::new([4], labels.clone()).unwrap())
            .unwrap();
        let fused = g.sparse_softmax_cross_entropy(xt, lt).unwrap();
        let lp = g.log_softmax(xt, -1).unwrap();
        let l2 = g.reshape(lt, &[4, 1]).unwrap();
        let picked = g.gather_elements(lp, l2, -1).unwrap();
        let comp = g.neg(picked).unwrap();
        let comp = g.reshape(comp, &[4]).unwrap();
        let out = session_on(&g, device).run(&[], &[fused, comp]).unwrap();
        assert_close(
            &format!("{device} fused"),
            &out[0],
            &t(&[4], want.to_vec()),
            1e-6,
            1e-6,
        );
        assert_close(
            &format!("{device} composite"),
            &out[1],
            &t(&[4], want.to_vec()),
            1e-6,
            1e-6,
        );
    }
}

#[test]
fn a_training_step_stores_no_log_probabilities() {
    // [rows, C] logits of a 1000-class model: the gradient's plan holds the logits and their
    // gradient, nothing else of that size (the composite keeps the log-probabilities, their
    // exponentials and a one-hot or scattered gradient too).
    let (rows, c) = (64, 1000);
    let mut g = Graph::new();
    let x = g.placeholder("x", [rows, 32], DType::F32).unwrap();
    let wv = g
        .variable(
            "w",
            HostTensor::new([32, c], vec![0.01f32; 32 * c]).unwrap(),
        )
        .unwrap();
    let labels = g.placeholder("labels", [rows], DType::I32).unwrap();
    let logits = g.matmul(x, wv).unwrap();
    let loss = g.sparse_softmax_cross_entropy(logits, labels).unwrap();
    let loss = g.mean(loss, Axes::All, false).unwrap();
    let dw = g.gradients(loss, &[wv]).unwrap()[0].unwrap();
    for device in devices() {
        let mut s = session_on(&g, device);
        let plan = s.plan(&[loss, dw]).unwrap().describe();
        let wide = plan.matches(&format!("-> f32 [{rows}, {c}]")).count();
        assert!(wide <= 2, "{device}: {wide} [rows, C] values\n{plan}");
    }
}

#[test]
fn bad_arguments_are_build_errors_and_graph_files_round_trip() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [4, 5], DType::F32).unwrap();
    let x0 = g.placeholder("x0", [4, 0], DType::F32).unwrap();
    let xh = g.placeholder("xh", [4, 5], DType::F16).unwrap();
    let l = g.placeholder("l", [4], DType::I32).unwrap();
    let lu = g.placeholder("lu", [4], DType::U32).unwrap();
    let l3 = g.placeholder("l3", [3], DType::I32).unwrap();
    let expect = |r: wgflow::Result<Tensor>, has: &str| {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(has), "'{e}' should say '{has}'");
        assert!(
            e.contains("ops_rows.rs"),
            "'{e}' should point at the caller"
        );
    };
    expect(
        g.sparse_softmax_cross_entropy(x, lu),
        "labels must be i32 [4]",
    );
    expect(
        g.sparse_softmax_cross_entropy(x, l3),
        "labels must be i32 [4]",
    );
    expect(g.sparse_softmax_cross_entropy(x0, l), "no classes");
    expect(g.sparse_softmax_cross_entropy(xh, l), "needs an f32 input");
    let scalar = g.placeholder("s", Shape::scalar(), DType::F32).unwrap();
    expect(g.sparse_softmax_cross_entropy(scalar, l), "rank 1 or more");
    // Layer norms that do not fuse stay composites: f16, another axis, no parameters.
    let gamma = g.placeholder("gamma", [5], DType::F32).unwrap();
    let beta = g.placeholder("beta", [5], DType::F32).unwrap();
    let gh = g.cast(gamma, DType::F16).unwrap();
    let bh = g.cast(beta, DType::F16).unwrap();
    let composite = [
        g.layer_norm(xh, Some(gh), Some(bh), -1, 1e-5).unwrap(),
        g.layer_norm(x, None, None, -1, 1e-5).unwrap(),
        g.layer_norm(x, Some(gamma), Some(beta), 0, 1e-5).unwrap(),
    ];
    for c in composite {
        assert_ne!(g.node(c).unwrap().op.name(), "layer_norm");
    }
    expect(
        g.layer_norm(x, Some(gamma), Some(beta), -1, f32::NAN),
        "not finite",
    );
    let y = g.layer_norm(x, Some(gamma), Some(beta), -1, 1e-3).unwrap();
    let loss = g.sparse_softmax_cross_entropy(y, l).unwrap();
    let total = g.sum(loss, Axes::All, false).unwrap();
    let _ = g.gradients(total, &[x, gamma, beta]).unwrap();
    let json = g.to_json().unwrap();
    for op in [
        "\"layer_norm\"",
        "layer_norm_xhat",
        "layer_norm_grad",
        "\"softmax_cross_entropy\"",
        "softmax_cross_entropy_grad",
        "\"eps\": 0.001",
    ] {
        assert!(json.contains(op), "{op} in {json}");
    }
    let back = Graph::from_json(&json).unwrap();
    assert_eq!(back.to_def().unwrap(), g.to_def().unwrap());
    // An eps on a cross-entropy node, or none on a layer norm, is a file error.
    let bad = json.replacen("\"eps\": 0.001", "\"epsilon\": 0.001", 1);
    assert!(Graph::from_json(&bad).is_err());
}
