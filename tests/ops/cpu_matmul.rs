//! cpu:0's matmul (sgemm for f32 and f16, the scalar loop for integers) against float64
//! products computed here: odd sizes, broadcast batches, every epilogue input kind (full,
//! row, scalar) with activations, NaN and infinities, K = 0, and split-K.

use wgflow::compile::StepKind;
use wgflow::ops::Kernel;
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, SliceArg, Tensor};

/// Deterministic values in [-1, 1).
fn det(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn konst(g: &mut Graph, shape: &[usize], v: &[f32]) -> Tensor {
    g.constant(HostTensor::new(shape.to_vec(), v.to_vec()).unwrap())
        .unwrap()
}

/// A cpu:0 session without constant folding (which would compute the graph on the host
/// before the kernels under test run).
fn cpu_session(g: &Graph) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
}

/// NumPy's matmul in float64: 1-D operands promoted (row on the left, column on the right,
/// the inserted 1 dropped), batch dims broadcast index by index.
fn reference(a: &[f32], sa: &[usize], b: &[f32], sb: &[usize]) -> (Vec<usize>, Vec<f64>) {
    let pa = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.to_vec()
    };
    let pb = if sb.len() == 1 {
        vec![sb[0], 1]
    } else {
        sb.to_vec()
    };
    let (m, k, n) = (pa[pa.len() - 2], pa[pa.len() - 1], pb[pb.len() - 1]);
    let (ba, bb) = (&pa[..pa.len() - 2], &pb[..pb.len() - 2]);
    let rank = ba.len().max(bb.len());
    let pad = |s: &[usize]| {
        let mut v = vec![1; rank - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (ba, bb) = (pad(ba), pad(bb));
    let batch: Vec<usize> = ba.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
    let mut out = Vec::new();
    for bi in 0..batch.iter().product::<usize>() {
        let (mut ia, mut ib, mut rem, mut sta, mut stb) = (0, 0, bi, 1, 1);
        for d in (0..rank).rev() {
            let i = rem % batch[d];
            rem /= batch[d];
            ia += if ba[d] == 1 { 0 } else { i * sta };
            ib += if bb[d] == 1 { 0 } else { i * stb };
            sta *= ba[d];
            stb *= bb[d];
        }
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f64;
                for kk in 0..k {
                    acc += a[ia * m * k + i * k + kk] as f64 * b[ib * k * n + kk * n + j] as f64;
                }
                out.push(acc);
            }
        }
    }
    let mut shape = batch;
    if sa.len() >= 2 {
        shape.push(m);
    }
    if sb.len() >= 2 {
        shape.push(n);
    }
    (shape, out)
}

/// `got` within `atol + rtol * |want|` of `want`; NaN must meet NaN, infinities must match.
fn check(what: &str, got: &[f32], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&x, &w)) in got.iter().zip(want).enumerate() {
        let x = x as f64;
        let ok = if w.is_nan() {
            x.is_nan()
        } else if w.is_infinite() {
            x == w
        } else {
            (x - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: got {x}, want {w}");
    }
}

/// The matmul kernels of `y`'s plan on cpu:0, and whether each carries an epilogue.
fn matmul_epilogues(s: &mut Session, y: Tensor) -> Vec<bool> {
    let plan = s.plan(&[y]).unwrap();
    plan.steps
        .iter()
        .filter_map(|st| match &st.kind {
            StepKind::Dispatch {
                kernel: Kernel::MatMul(k),
                ..
            } => Some(k.epilogue.is_some()),
            _ => None,
        })
        .collect()
}

fn run_case(sa: &[usize], sb: &[usize], seed: u32, rtol: f64, atol: f64) {
    let (va, vb) = (
        det(sa.iter().product(), seed),
        det(sb.iter().product(), seed + 1),
    );
    let mut g = Graph::new();
    let (a, b) = (konst(&mut g, sa, &va), konst(&mut g, sb, &vb));
    let y = g.matmul(a, b).unwrap();
    let (shape, want) = reference(&va, sa, &vb, sb);
    let got = cpu_session(&g).run(&[], &[y]).unwrap().remove(0);
    assert_eq!(got.dims(), &shape[..], "{sa:?} @ {sb:?}: shape");
    check(
        &format!("{sa:?} @ {sb:?}"),
        &got.to_f32().unwrap(),
        &want,
        rtol,
        atol,
    );
}

#[test]
fn odd_sizes_match_float64() {
    for (m, k, n) in [
        (1, 1, 1),
        (7, 13, 5),
        (130, 257, 129),
        (1, 300, 1),
        (65, 1, 33),
    ] {
        run_case(&[m, k], &[k, n], (m * k * n) as u32, 1e-5, 1e-5);
    }
}

#[test]
fn broadcast_batches_and_vectors_match_float64() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 1, 2, 5], &[1, 4, 5, 3]),
        (&[2, 1, 33, 70], &[3, 70, 41]),
        (&[5, 3, 4], &[4, 2]),
        (&[3, 5], &[4, 5, 7]),
        (&[6], &[2, 6, 3]),
        (&[2, 4, 6], &[6]),
        (&[9], &[9]),
        (&[1], &[2, 1, 3]),
        (&[1, 2, 3], &[1, 3, 2]),
    ];
    for (i, &(sa, sb)) in cases.iter().enumerate() {
        run_case(sa, sb, 100 + i as u32, 1e-5, 1e-5);
    }
}

/// K = 70,000 runs split-K (partial products over 32,768-long chunks, then a sum).
#[test]
fn split_k_matches_float64() {
    run_case(&[3, 70_000], &[70_000, 2], 7, 1e-4, 1e-3);
}

#[test]
fn epilogues_match_float64() {
    let (m, k, n) = (37, 45, 29);
    let (va, vb) = (det(m * k, 1), det(k * n, 2));
    let (vbias, vres) = (det(n, 3), det(m * n, 4));
    let mut g = Graph::new();
    let a = konst(&mut g, &[m, k], &va);
    let b = konst(&mut g, &[k, n], &vb);
    let bias = konst(&mut g, &[n], &vbias);
    let res = konst(&mut g, &[m, n], &vres);
    let scale = konst(&mut g, &[], &[-1.5]);
    let (_, p) = reference(&va, &[m, k], &vb, &[k, n]);
    let mut outs = Vec::new();
    let mut wants: Vec<Vec<f64>> = Vec::new();
    // Row input (a bias), then an activation.
    let mm = g.matmul(a, b).unwrap();
    let z = g.add(mm, bias).unwrap();
    outs.push(g.relu(z).unwrap());
    wants.push(
        (0..m * n)
            .map(|o| (p[o] + vbias[o % n] as f64).max(0.0))
            .collect(),
    );
    // Full input (a residual) and a scalar.
    let mm = g.matmul(a, b).unwrap();
    let z = g.mul(mm, scale).unwrap();
    outs.push(g.add(z, res).unwrap());
    wants.push((0..m * n).map(|o| p[o] * -1.5 + vres[o] as f64).collect());
    // A row input when B is a vector: the row spans M.
    let (vv, vrow) = (det(k, 5), det(m, 6));
    let v = konst(&mut g, &[k], &vv);
    let row = konst(&mut g, &[m], &vrow);
    let mv = g.matmul(a, v).unwrap();
    let z = g.sub(mv, row).unwrap();
    outs.push(g.tanh(z).unwrap());
    let (_, pv) = reference(&va, &[m, k], &vv, &[k]);
    wants.push((0..m).map(|i| (pv[i] - vrow[i] as f64).tanh()).collect());
    let mut s = cpu_session(&g);
    for (i, &y) in outs.iter().enumerate() {
        assert_eq!(
            matmul_epilogues(&mut s, y),
            vec![true],
            "case {i}: the elementwise work should fuse into the matmul"
        );
    }
    let got = s.run(&[], &outs).unwrap();
    for (i, (got, want)) in got.iter().zip(&wants).enumerate() {
        check(
            &format!("epilogue case {i}"),
            &got.to_f32().unwrap(),
            want,
            1e-5,
            1e-5,
        );
    }
}

/// The recurrent models' pattern: a time step's rows of an input projection (a slice) and a
/// transposed tensor, read as views, added to `h @ W`: on cpu:0 the view inputs become the
/// matmul's epilogue instead of a separate elementwise pass over its output.
#[test]
fn epilogues_read_views_of_larger_buffers() {
    let (steps, b, k, n) = (5, 3, 67, 24);
    let (vp, vh, vw, vt) = (
        det(steps * b * n, 11),
        det(b * k, 12),
        det(k * n, 13),
        det(n * b, 14),
    );
    let mut g = Graph::new();
    let proj = konst(&mut g, &[steps * b, n], &vp);
    let h = konst(&mut g, &[b, k], &vh);
    let w = konst(&mut g, &[k, n], &vw);
    let tr = konst(&mut g, &[n, b], &vt);
    let (_, p) = reference(&vh, &[b, k], &vw, &[k, n]);
    let mut outs = Vec::new();
    let mut wants: Vec<Vec<f64>> = Vec::new();
    for t in [0, 2, steps - 1] {
        let rows = g
            .slice(
                proj,
                &[SliceArg::range((t * b) as isize, ((t + 1) * b) as isize)],
            )
            .unwrap();
        let mm = g.matmul(h, w).unwrap();
        let z = g.add(rows, mm).unwrap();
        outs.push(g.sigmoid(z).unwrap());
        wants.push(
            (0..b * n)
                .map(|o| {
                    let x = vp[t * b * n + o] as f64 + p[o];
                    1.0 / (1.0 + (-x).exp())
                })
                .collect(),
        );
    }
    // A transposed view and a full-size input together.
    let tt = g.transpose(tr, &[1, 0]).unwrap();
    let mm = g.matmul(h, w).unwrap();
    let z = g.sub(mm, tt).unwrap();
    let res = konst(&mut g, &[b, n], &vp[..b * n]);
    outs.push(g.mul(z, res).unwrap());
    wants.push(
        (0..b * n)
            .map(|o| (p[o] - vt[(o % n) * b + o / n] as f64) * vp[o] as f64)
            .collect(),
    );
    let mut s = cpu_session(&g);
    for (i, &y) in outs.iter().enumerate() {
        let plan = s.plan(&[y]).unwrap();
        assert_eq!(
            (matmul_epilogues(&mut s, y), plan.steps.len()),
            (vec![true], 1),
            "case {i}: the sliced or transposed input should be read by the matmul's epilogue"
        );
    }
    let got = s.run(&[], &outs).unwrap();
    for (i, (got, want)) in got.iter().zip(&wants).enumerate() {
        check(
            &format!("view epilogue case {i}"),
            &got.to_f32().unwrap(),
            want,
            1e-5,
            1e-6,
        );
    }
}

#[test]
fn nan_and_infinities_propagate() {
    let (m, k, n) = (4, 3, 3);
    let inf = f32::INFINITY;
    #[rustfmt::skip]
    let va = vec![
        f32::NAN, 1.0, 2.0, // row 0: NaN everywhere
        inf, 1.0, 0.0,      // row 1: inf * B[0, j]: +inf, -inf, or NaN (inf * 0)
        inf, -inf, 1.0,     // row 2: inf - inf = NaN where both B entries are positive
        1.0, 2.0, 3.0,      // row 3: finite
    ];
    #[rustfmt::skip]
    let vb = vec![
        1.0, -2.0, 0.0,
        1.0, 1.0, 1.0,
        0.5, 0.25, 2.0,
    ];
    let mut g = Graph::new();
    let a = konst(&mut g, &[m, k], &va);
    let b = konst(&mut g, &[k, n], &vb);
    let y = g.matmul(a, b).unwrap();
    let got = cpu_session(&g).run(&[], &[y]).unwrap().remove(0);
    let (_, want) = reference(&va, &[m, k], &vb, &[k, n]);
    #[rustfmt::skip]
    let by_hand = [
        f64::NAN, f64::NAN, f64::NAN,
        f64::INFINITY, f64::NEG_INFINITY, f64::NAN,
        f64::NAN, f64::NEG_INFINITY, f64::NAN,
        4.5, 0.75, 8.0,
    ];
    for (i, (w, h)) in want.iter().zip(by_hand).enumerate() {
        assert!(
            (w.is_nan() && h.is_nan()) || *w == h,
            "reference element {i}: {w} vs {h}"
        );
    }
    check("NaN/inf", &got.to_f32().unwrap(), &want, 0.0, 0.0);
}

#[test]
fn empty_k_gives_zeros_and_the_epilogue() {
    let mut g = Graph::new();
    let a = konst(&mut g, &[3, 0], &[]);
    let b = konst(&mut g, &[0, 4], &[]);
    let y = g.matmul(a, b).unwrap();
    let bias = konst(&mut g, &[4], &[1.0, -2.0, 3.0, -4.0]);
    let z = g.add(y, bias).unwrap();
    let a2 = konst(&mut g, &[2, 3, 0], &[]);
    let b2 = konst(&mut g, &[0, 5], &[]);
    let y2 = g.matmul(a2, b2).unwrap();
    let got = cpu_session(&g).run(&[], &[y, z, y2]).unwrap();
    check(
        "[3,0]@[0,4]",
        &got[0].to_f32().unwrap(),
        &[0.0; 12],
        0.0,
        0.0,
    );
    let want: Vec<f64> = (0..12).map(|o| [1.0, -2.0, 3.0, -4.0][o % 4]).collect();
    check(
        "[3,0]@[0,4] + bias",
        &got[1].to_f32().unwrap(),
        &want,
        0.0,
        0.0,
    );
    assert_eq!(got[2].dims(), &[2, 3, 5]);
    check(
        "[2,3,0]@[0,5]",
        &got[2].to_f32().unwrap(),
        &[0.0; 30],
        0.0,
        0.0,
    );
}

/// f16 widens to f32, multiplies through sgemm and rounds once; integers keep the exact loop.
#[test]
fn f16_and_integer_products() {
    let (m, k, n) = (5, 17, 6);
    let (va, vb) = (det(m * k, 11), det(k * n, 12));
    let mut g = Graph::new();
    let a = konst(&mut g, &[m, k], &va);
    let b = konst(&mut g, &[k, n], &vb);
    let (ah, bh) = (
        g.cast(a, DType::F16).unwrap(),
        g.cast(b, DType::F16).unwrap(),
    );
    let yh = g.matmul(ah, bh).unwrap();
    let ia: Vec<i32> = (0..m * k).map(|i| (i as i32 % 11) - 5).collect();
    let ib: Vec<i32> = (0..k * n).map(|i| (i as i32 % 7) - 3).collect();
    let ai = g
        .constant(HostTensor::new([m, k], ia.clone()).unwrap())
        .unwrap();
    let bi = g
        .constant(HostTensor::new([k, n], ib.clone()).unwrap())
        .unwrap();
    let yi = g.matmul(ai, bi).unwrap();
    let got = cpu_session(&g).run(&[], &[yh, yi]).unwrap();
    // The reference from the f16-rounded operands.
    let round =
        |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect() };
    let (_, want) = reference(&round(&va), &[m, k], &round(&vb), &[k, n]);
    assert_eq!(got[0].dtype(), DType::F16);
    check("f16", &got[0].to_f32().unwrap(), &want, 1e-3, 1e-3);
    let want_i: Vec<i32> = (0..m * n)
        .map(|o| {
            (0..k)
                .map(|kk| ia[o / n * k + kk] * ib[kk * n + o % n])
                .sum()
        })
        .collect();
    assert_eq!(got[1].to_vec::<i32>().unwrap(), want_i, "i32");
}

/// A constant f32 B (a layer's weight) is packed once per plan into column panels and
/// multiplied by the AVX2 4x24 kernel with A read in place (where the CPU has AVX2): row
/// counts around its blocks of 4, depths around its passes of 256, column counts around its
/// panels of 24, A stored transposed (read through strides), batches sharing B, a bias and
/// ReLU epilogue, and NaN and infinities in A, each against float64.
#[test]
fn constant_weights_packed_once_match_float64() {
    let avx2 = crate::cpu_reduce_conv::is_avx2();
    let cases: [(usize, usize, usize); 9] = [
        (4, 1, 1),
        (5, 3, 23),
        (7, 256, 24),
        (64, 257, 25),
        (9, 600, 97),
        (255, 64, 48),
        (256, 31, 49),
        (8, 520, 1),
        (13, 1024, 72),
    ];
    for (i, (m, k, n)) in cases.into_iter().enumerate() {
        let seed = 700 + 3 * i as u32;
        let (mut va, vw) = (det(m * k, seed), det(k * n, seed + 1));
        if i == 4 {
            va[3] = f32::NAN;
            va[k + 5] = f32::INFINITY;
            va[2 * k] = f32::NEG_INFINITY;
        }
        let bias = det(n, seed + 2);
        for transposed in [false, true] {
            let mut g = Graph::new();
            // A fed as stored, or fed as its transpose and transposed back (read in place
            // through strides, no transpose kernel).
            let (a, fed) = if transposed {
                let at = g.placeholder("at", [k, m], DType::F32).unwrap();
                let mut t = vec![0.0; m * k];
                for r in 0..m {
                    for c in 0..k {
                        t[c * m + r] = va[r * k + c];
                    }
                }
                (
                    g.transpose(at, &[1, 0]).unwrap(),
                    (at, HostTensor::new([k, m], t).unwrap()),
                )
            } else {
                let a = g.placeholder("a", [m, k], DType::F32).unwrap();
                (a, (a, HostTensor::new([m, k], va.clone()).unwrap()))
            };
            let w = konst(&mut g, &[k, n], &vw);
            let y = g.matmul(a, w).unwrap();
            let b = konst(&mut g, &[n], &bias);
            let z = g.add(y, b).unwrap();
            let z = g.relu(z).unwrap();
            let (_, want) = reference(&va, &[m, k], &vw, &[k, n]);
            let want_z: Vec<f64> = want
                .iter()
                .enumerate()
                .map(|(j, &v)| {
                    let s = v + bias[j % n] as f64;
                    if s.is_nan() || s > 0.0 {
                        s
                    } else {
                        0.0
                    }
                })
                .collect();
            let mut s = cpu_session(&g);
            let got = s.run(std::slice::from_ref(&fed), &[y, z]).unwrap();
            let what = format!("[{m}, {k}] @ constant [{k}, {n}] (A transposed: {transposed})");
            // f32 sums of k products of magnitude up to 1: a few ulps of k.
            let atol = 4e-8 * k as f64 + 1e-6;
            check(&what, &got[0].to_f32().unwrap(), &want, 1e-5, atol);
            check(
                &(what.clone() + " + bias, relu"),
                &got[1].to_f32().unwrap(),
                &want_z,
                1e-5,
                atol,
            );
            let packed = s.counters().cpu_prepared_bytes;
            assert_eq!(packed > 0, avx2, "{what}: {packed} bytes packed");
            s.run(std::slice::from_ref(&fed), &[y, z]).unwrap();
            assert_eq!(
                s.counters().cpu_prepared_bytes,
                packed,
                "{what}: packed again"
            );
        }
    }
    // Batches of A sharing the constant B: one GEMM of their stacked rows.
    let (bt, m, k, n) = (3, 6, 300, 50);
    let (va, vw) = (det(bt * m * k, 91), det(k * n, 92));
    let mut g = Graph::new();
    let a = g.placeholder("a", [bt, m, k], DType::F32).unwrap();
    let w = konst(&mut g, &[k, n], &vw);
    let y = g.matmul(a, w).unwrap();
    let (_, want) = reference(&va, &[bt, m, k], &vw, &[k, n]);
    let got = cpu_session(&g)
        .run(&[(a, HostTensor::new([bt, m, k], va).unwrap())], &[y])
        .unwrap();
    check(
        "batched A @ constant B",
        &got[0].to_f32().unwrap(),
        &want,
        1e-5,
        1e-5,
    );
}
