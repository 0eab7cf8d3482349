//! i32 matmuls wrap as two's-complement arithmetic does, on every device, against an i64
//! product computed here and wrapped once: cpu:0's i16-pair kernel (operands within i16,
//! the quantized models' case) at every blocking boundary, its fallback for wider operands,
//! strided and broadcast operands, and the sizes at which it goes parallel.

use crate::common::{gpus, session_on};
use wgflow::{Device, Graph, HostTensor, Tensor};

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
    ];
    let mut g = Graph::new();
    let (mut outs, mut want) = (Vec::new(), Vec::new());
    for (i, &(nba, nbb, m, k, n, ra, rb, bt)) in cases.iter().enumerate() {
        let sa: Vec<usize> = if nba > 1 { vec![nba, m, k] } else { vec![m, k] };
        let (a, va) = konst(&mut g, &sa, 2 * i, ra);
        // B's values in [k, n] order; given transposed, it is stored [n, k] and transposed
        // in the graph, which cpu:0 reads in place.
        let (b, vb) = if bt {
            let (t, vt) = konst(&mut g, &[n, k], 2 * i + 1, rb);
            let v: Vec<i32> = (0..k * n).map(|x| vt[(x % n) * k + x / n]).collect();
            (g.transpose(t, &[1, 0]).unwrap(), v)
        } else {
            let sb: Vec<usize> = if nbb > 1 { vec![nbb, k, n] } else { vec![k, n] };
            konst(&mut g, &sb, 2 * i + 1, rb)
        };
        outs.push(g.matmul(a, b).unwrap());
        let batch = nba.max(nbb);
        want.push(reference(&va, &vb, batch, (nba > 1, nbb > 1), m, k, n));
    }
    for d in devices() {
        let got = session_on(&g, d).run(&[], &outs).unwrap();
        for (c, (got, want)) in cases.iter().zip(got.iter().zip(&want)) {
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
