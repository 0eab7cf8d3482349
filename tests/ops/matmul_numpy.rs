//! `matmul` follows NumPy's shape rules: 1-D operands (a row on the left, a column on the
//! right, the inserted 1 dropped), and batch dims that broadcast both ways, read in place.
//! Every case runs on cpu:0 and every GPU against a float64 product computed here.

use crate::common::{assert_close, gpus, session_on};
use wgflow::compile::StepKind;
use wgflow::ops::Kernel;
use wgflow::{DType, Device, Graph, HostTensor, Tensor};

/// Small multiples of 1/8, so f32 products and short sums are exact.
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 8.0 - 1.0)
        .collect()
}

fn konst(g: &mut Graph, shape: &[usize], seed: usize) -> (Tensor, Vec<f32>) {
    let v = data(shape.iter().product(), seed);
    let t = g
        .constant(HostTensor::new(shape.to_vec(), v.clone()).unwrap())
        .unwrap();
    (t, v)
}

/// NumPy's matmul in float64, written from its definition: promote 1-D operands, broadcast
/// the batch dims index by index, drop the promoted dims.
fn reference(a: &[f32], sa: &[usize], b: &[f32], sb: &[usize]) -> (Vec<usize>, Vec<f64>) {
    let pa: Vec<usize> = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.to_vec()
    };
    let pb: Vec<usize> = if sb.len() == 1 {
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
        let (mut ia, mut ib, mut rem) = (0, 0, bi);
        let (mut sta, mut stb) = (1, 1);
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

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

#[test]
fn shapes_and_values_follow_numpy() {
    // (A, B, NumPy's result shape)
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[5], &[5, 3], &[3]),
        (&[4, 5], &[5], &[4]),
        (&[5], &[5], &[]),
        (&[6], &[2, 6, 3], &[2, 3]),
        (&[2, 4, 6], &[6], &[2, 4]),
        (&[2, 1, 3, 5], &[4, 5, 2], &[2, 4, 3, 2]),
        (&[3, 5], &[5, 5, 2], &[5, 3, 2]),
        (&[5, 3, 4], &[4, 2], &[5, 3, 2]),
        // Broadcast both ways, and a batch dim of 1 on both sides.
        (&[3, 1, 2, 5], &[1, 4, 5, 3], &[3, 4, 2, 3]),
        (&[1, 2, 3], &[1, 3, 2], &[1, 2, 2]),
        // K = 1, M = 1, N = 1, odd sizes.
        (&[3, 1], &[1, 4], &[3, 4]),
        (&[1], &[1], &[]),
        (&[1], &[2, 1, 3], &[2, 3]),
        (&[1, 7], &[7, 1], &[1, 1]),
        (&[3, 5, 7], &[7, 9], &[3, 5, 9]),
        (&[7], &[3, 7, 1], &[3, 1]),
        // Register-blocked on software adapters (N, K divisible by 4), vectors included.
        (&[16], &[16, 32], &[32]),
        (&[8], &[3, 8, 16], &[3, 16]),
        (&[2, 1, 32, 16], &[3, 16, 64], &[2, 3, 32, 64]),
        (&[32, 16], &[4, 16, 32], &[4, 32, 32]),
        // Workgroup-tiled on hardware adapters, with a broadcast batch.
        (&[64, 16], &[2, 16, 64], &[2, 64, 64]),
    ];
    let mut g = Graph::new();
    let mut outs = Vec::new();
    let mut want = Vec::new();
    for (i, &(sa, sb, so)) in cases.iter().enumerate() {
        let (a, va) = konst(&mut g, sa, 2 * i);
        let (b, vb) = konst(&mut g, sb, 2 * i + 1);
        let y = g.matmul(a, b).unwrap();
        assert_eq!(g.shape(y).unwrap().dims(), so, "{sa:?} @ {sb:?}");
        let (shape, r) = reference(&va, sa, &vb, sb);
        assert_eq!(shape, so, "reference shape of {sa:?} @ {sb:?}");
        outs.push(y);
        let r: Vec<f32> = r.iter().map(|&x| x as f32).collect();
        want.push(HostTensor::new(so.to_vec(), r).unwrap());
    }
    for d in devices() {
        let got = session_on(&g, d).run(&[], &outs).unwrap();
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            let (sa, sb, _) = cases[i];
            assert_close(&format!("{sa:?} @ {sb:?} on {d}"), got, want, 1e-6, 1e-6);
        }
    }
}

/// The product of a batch of matrices and a vector keeps its bias and activation as the
/// kernel's epilogue; the bias spans the result's last dim, which is M here.
#[test]
fn vector_products_keep_their_epilogue() {
    let mut g = Graph::new();
    let (w, vw) = konst(&mut g, &[3, 6, 5], 1);
    let (v, vv) = konst(&mut g, &[5], 2);
    let (bias, vbias) = konst(&mut g, &[6], 3);
    let (u, vu) = konst(&mut g, &[5], 4);
    let (m, vm) = konst(&mut g, &[5, 8], 5);
    let mv = g.matmul(w, v).unwrap();
    let y = g.add(mv, bias).unwrap();
    let y = g.relu(y).unwrap();
    let um = g.matmul(u, m).unwrap();
    let two = g.constant(2.0f32).unwrap();
    let z = g.mul(um, two).unwrap();
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&[y, z]).unwrap();
    assert_eq!(plan.dispatch_count(), 2, "{}", plan.describe());
    for st in &plan.steps {
        match &st.kind {
            StepKind::Dispatch {
                kernel: Kernel::MatMul(k),
                ..
            } => assert!(k.epilogue.is_some(), "{}", plan.describe()),
            StepKind::Dispatch { .. } => panic!("{}", plan.describe()),
            _ => {}
        }
    }
    let (_, r) = reference(&vw, &[3, 6, 5], &vv, &[5]);
    let wy: Vec<f32> = r
        .iter()
        .enumerate()
        .map(|(i, &x)| (x + vbias[i % 6] as f64).max(0.0) as f32)
        .collect();
    let (_, r) = reference(&vu, &[5], &vm, &[5, 8]);
    let wz: Vec<f32> = r.iter().map(|&x| (2.0 * x) as f32).collect();
    let wy = HostTensor::new(vec![3, 6], wy).unwrap();
    let wz = HostTensor::new(vec![8], wz).unwrap();
    for d in devices() {
        let got = session_on(&g, d).run(&[], &[y, z]).unwrap();
        assert_close(&format!("relu(W @ v + b) on {d}"), &got[0], &wy, 1e-6, 1e-6);
        assert_close(&format!("2 (u @ M) on {d}"), &got[1], &wz, 1e-6, 1e-6);
    }
}

#[test]
fn bad_shapes_are_build_errors_naming_them() {
    let mut g = Graph::new();
    let p = |g: &mut Graph, name: &str, s: &[usize]| {
        g.placeholder(name, s.to_vec(), DType::F32).unwrap()
    };
    let v3 = p(&mut g, "v3", &[3]);
    let m45 = p(&mut g, "m45", &[4, 5]);
    let msg = g.matmul(v3, m45).unwrap_err().to_string();
    assert!(
        msg.contains("matmul at")
            && msg.contains("tests/ops/matmul_numpy.rs")
            && msg.contains("[3] and [4, 5]")
            && msg.contains("inner dimensions 3 and 4 differ"),
        "{msg}"
    );
    let m53 = p(&mut g, "m53", &[5, 3]);
    let v4 = p(&mut g, "v4", &[4]);
    let msg = g.matmul(m53, v4).unwrap_err().to_string();
    assert!(
        msg.contains("[5, 3] and [4]") && msg.contains("3 and 4 differ"),
        "{msg}"
    );
    let msg = g.matmul(v3, v4).unwrap_err().to_string();
    assert!(
        msg.contains("[3] and [4]") && msg.contains("3 and 4 differ"),
        "{msg}"
    );
    let a = p(&mut g, "a", &[2, 3, 4, 5]);
    let b = p(&mut g, "b", &[4, 5, 6]);
    let msg = g.matmul(a, b).unwrap_err().to_string();
    assert!(
        msg.contains("[2, 3, 4, 5] and [4, 5, 6]")
            && msg.contains("batch dimensions [2, 3] and [4] cannot broadcast")
            && msg.contains("3 vs 4 at batch axis -1"),
        "{msg}"
    );
    let s = g
        .placeholder("s", [0usize; 0].to_vec(), DType::F32)
        .unwrap();
    let msg = g.matmul(s, v3).unwrap_err().to_string();
    assert!(msg.contains("at least 1 dimension"), "{msg}");
}
