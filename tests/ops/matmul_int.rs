//! i32 matmuls wrap as two's-complement arithmetic does, on every device, against an i64
//! product computed here and wrapped once: cpu:0's i16-pair kernel (operands within i16,
//! the quantized models' case) and its u8 × s8 VNNI kernel (operands spanning at most 256
//! values, shifted into u8 and s8) at every blocking boundary, the fallback for wider operands,
//! strided and broadcast operands, and the sizes at which it goes parallel.

use crate::common::{gpus, session_on};
use wgflow::{DType, Device, Graph, HostTensor, Tensor};

/// A deterministic value in `lo..=hi`, with both ends and zero among the first few.
fn value(i: usize, seed: usize, lo: i64, hi: i64) -> i32 {
    match (i + seed) % 97 {
        0 => lo as i32,
        1 => hi as i32,
        2 => 0,
        _ => {
            let x = (i as u64 * 2654435761 + seed as u64 * 40503) % 1_000_003;
            (lo + (x as i64 * 7919) % (hi - lo + 1)) as i32
        }
    }
}

fn konst(g: &mut Graph, shape: &[usize], seed: usize, range: (i64, i64)) -> (Tensor, Vec<i32>) {
    let v: Vec<i32> = (0..shape.iter().product())
        .map(|i| value(i, seed, range.0, range.1))
        .collect();
    let t = g
        .constant(HostTensor::new(shape.to_vec(), v.clone()).unwrap())
        .unwrap();
    (t, v)
}

/// `[batch?, m, k] · [batch?, k, n]` in i64, wrapped to i32 at the end (a batch of 1
/// broadcasts).
fn reference(
    a: &[i32],
    b: &[i32],
    batch: usize,
    (ba, bb): (bool, bool),
    m: usize,
    k: usize,
    n: usize,
) -> Vec<i32> {
    let mut out = Vec::with_capacity(batch * m * n);
    for t in 0..batch {
        let (ia, ib) = (if ba { t } else { 0 }, if bb { t } else { 0 });
        for i in 0..m {
            for j in 0..n {
                let s: i64 = (0..k)
                    .map(|kk| a[ia * m * k + i * k + kk] as i64 * b[ib * k * n + kk * n + j] as i64)
                    .sum();
                out.push(s as i32);
            }
        }
    }
    out
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

const I16: (i64, i64) = (i16::MIN as i64, i16::MAX as i64);
const U8_SHIFTED: (i64, i64) = (-255, 255);
const WIDE: (i64, i64) = (-(1 << 20), 1 << 20);
const U8: (i64, i64) = (0, 255);
const S8: (i64, i64) = (-128, 127);

#[test]
fn integer_products_wrap_like_i32_on_every_device() {
    // (batch of A, batch of B, m, k, n, A's range, B's range, B given transposed)
    #[allow(clippy::type_complexity)]
    let cases: &[(
        usize,
        usize,
        usize,
        usize,
        usize,
        (i64, i64),
        (i64, i64),
        bool,
    )] = &[
        (1, 1, 1, 1, 1, I16, I16, false),
        // Odd K (a half pair), N off the panel width, M off the row block.
        (1, 1, 5, 7, 3, I16, I16, false),
        (1, 1, 4, 24, 24, I16, I16, false),
        (1, 1, 9, 33, 49, U8_SHIFTED, U8_SHIFTED, false),
        // K across the 256-pair block, exactly at it and one past.
        (1, 1, 13, 512, 50, I16, I16, false),
        (1, 1, 7, 513, 25, I16, I16, true),
        (1, 1, 3, 1031, 17, U8_SHIFTED, I16, false),
        // Every product −32768 · −32768: sums past 2^31 wrap.
        (1, 1, 2, 6, 2, (-32768, -32768), (-32768, -32768), false),
        // Operands wider than i16 take the exact general path.
        (1, 1, 6, 40, 20, WIDE, I16, false),
        (1, 1, 6, 40, 20, I16, WIDE, true),
        // ... also when A is large enough to be packed on the pool.
        (1, 1, 300, 300, 3, WIDE, I16, false),
        (
            1,
            1,
            3,
            9,
            4,
            (i32::MIN as i64, i32::MAX as i64),
            I16,
            false,
        ),
        // Batches, one of them broadcast.
        (3, 1, 5, 19, 26, I16, U8_SHIFTED, false),
        (2, 1, 4, 8, 30, U8_SHIFTED, I16, true),
        (1, 2, 4, 8, 30, U8_SHIFTED, I16, false),
        // Large enough for cpu:0's pool: panels of columns, then blocks of rows.
        (1, 1, 64, 512, 600, U8_SHIFTED, U8_SHIFTED, false),
        (1, 1, 2050, 1030, 9, U8_SHIFTED, I16, false),
        // Spans of at most 256 values (VNNI's u8 × s8 quads): unshifted, A shifted, B
        // shifted, both; K off a quad and across the 1,024-value block; M off the 8-row
        // block; N off the 32-column panel.
        (1, 1, 13, 1031, 49, U8, S8, false),
        (1, 1, 9, 1025, 33, (-200, 55), S8, false),
        (1, 1, 17, 6, 70, U8, (-255, 0), true),
        (1, 1, 11, 2053, 65, (100, 355), (-300, -45), false),
        (3, 1, 7, 98, 40, (-128, 127), U8, false),
        (1, 1, 96, 768, 640, (-37, 218), S8, false),
        (1, 1, 1030, 515, 9, (-37, 218), S8, true),
        // Extremes of i32 one span wide, and a span of 257 (the i16 kernel).
        (
            1,
            1,
            5,
            37,
            35,
            (i32::MAX as i64 - 255, i32::MAX as i64),
            S8,
            false,
        ),
        (
            1,
            1,
            5,
            37,
            35,
            S8,
            (i32::MIN as i64, i32::MIN as i64 + 255),
            false,
        ),
        (1, 1, 5, 37, 35, (0, 256), S8, false),
        // u8 · s8 sums past 2^31: 70,000 products of 255 · −128 (AMX's tiles from 16
        // rows).
        (1, 1, 1, 70_000, 1, (255, 255), (-128, -128), false),
        (1, 1, 16, 70_000, 1, (255, 255), (-128, -128), false),
        // AMX's tiles: M off the 32-row block, K off the 64-value step and across the
        // 2,048-value block, N off the 32-column panel, both shifts.
        (1, 1, 33, 1000, 47, U8, S8, false),
        (1, 1, 64, 4197, 96, (-37, 218), (-300, -45), false),
        (2, 1, 47, 2049, 33, (-200, 55), S8, true),
    ];
    let mut g = Graph::new();
    let (mut outs, mut want, mut feeds) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &(nba, nbb, m, k, n, ra, rb, bt)) in cases.iter().enumerate() {
        let sa: Vec<usize> = if nba > 1 { vec![nba, m, k] } else { vec![m, k] };
        let (a, va) = konst(&mut g, &sa, 2 * i, ra);
        // B's values in [k, n] order; given transposed, it is stored [n, k] and transposed
        // in the graph, which cpu:0 reads in place.
        // cpu:0 packs a constant B once per plan and a fed one on every run: both are
        // checked.
        let sb: Vec<usize> = match (bt, nbb > 1) {
            (true, _) => vec![n, k],
            (false, true) => vec![nbb, k, n],
            (false, false) => vec![k, n],
        };
        let (stored, vs) = konst(&mut g, &sb, 2 * i + 1, rb);
        let fed = g
            .placeholder(&format!("b{i}"), sb.clone(), DType::I32)
            .unwrap();
        feeds.push((fed, HostTensor::new(sb, vs.clone()).unwrap()));
        let vb: Vec<i32> = if bt {
            (0..k * n).map(|x| vs[(x % n) * k + x / n]).collect()
        } else {
            vs
        };
        let batch = nba.max(nbb);
        let w = reference(&va, &vb, batch, (nba > 1, nbb > 1), m, k, n);
        for b in [stored, fed] {
            let b = if bt {
                g.transpose(b, &[1, 0]).unwrap()
            } else {
                b
            };
            outs.push(g.matmul(a, b).unwrap());
            want.push(w.clone());
        }
    }
    for d in devices() {
        let got = session_on(&g, d).run(&feeds, &outs).unwrap();
        let twice = cases.iter().flat_map(|c| [c, c]);
        for (c, (got, want)) in twice.zip(got.iter().zip(&want)) {
            let got: Vec<i32> = got.to_vec().unwrap();
            let bad = got.iter().zip(want).position(|(x, y)| x != y);
            assert!(
                bad.is_none() && got.len() == want.len(),
                "{c:?} on {d}: element {bad:?}: {:?} against {:?}",
                bad.map(|i| got[i]),
                bad.map(|i| want[i])
            );
        }
    }
}

/// A constant integer weight is packed once per plan, and the session counts the packed
/// bytes: at least one per value (8-bit lanes) and at most four per padded value; a fed
/// weight is packed per run and counts nothing; a second run counts nothing more.
#[test]
fn packed_constant_weights_are_counted_once_per_plan() {
    let (m, k, n) = (20, 300, 70);
    let mut g = Graph::new();
    let a = g.placeholder("a", [m, k], DType::I32).unwrap();
    let (w, _) = konst(&mut g, &[k, n], 5, S8);
    let wf = g.placeholder("w", [k, n], DType::I32).unwrap();
    let constant = g.matmul(a, w).unwrap();
    let fed = g.matmul(a, wf).unwrap();
    let va: Vec<i32> = (0..m * k).map(|i| value(i, 3, 0, 255)).collect();
    let vw: Vec<i32> = (0..k * n).map(|i| value(i, 5, -128, 127)).collect();
    let feeds = [
        (a, HostTensor::new([m, k], va).unwrap()),
        (wf, HostTensor::new([k, n], vw).unwrap()),
    ];
    let mut s = session_on(&g, Device::Cpu);
    s.run(&feeds[..1], &[constant]).unwrap();
    let packed = s.counters().cpu_prepared_bytes;
    let padded = (k.next_multiple_of(64) * n.next_multiple_of(32) * 4) as u64;
    assert!(
        (k * n) as u64 <= packed && packed <= padded + 4 * n.next_multiple_of(32) as u64,
        "{packed} B packed for a {k} x {n} weight"
    );
    s.run(&feeds[..1], &[constant]).unwrap();
    assert_eq!(
        s.counters().cpu_prepared_bytes,
        packed,
        "a second run repacked"
    );
    let mut s = session_on(&g, Device::Cpu);
    s.run(&feeds, &[fed]).unwrap();
    assert_eq!(
        s.counters().cpu_prepared_bytes,
        0,
        "a fed weight was counted"
    );
}
