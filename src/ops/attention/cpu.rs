//! cpu:0's attention passes (also the kernels' reference): one task per head, which walks
//! its queries (or keys) in blocks of [`BLOCK`] rows. A block's scores are a `[BLOCK, T]`
//! tile in the task's own scratch (flash attention's on-chip tile: nothing of `[Tq, Tk]`
//! reaches the arena). Every product runs as rows of vectorized multiply-adds over
//! contiguous rows (the head's `kᵀ`, `vᵀ`, `qᵀ` or `dOᵀ` transposed once into scratch), only
//! over the positions the mask lets through, and the softmax's `exp` is `vmath::exp`.

use super::{AttentionKernel, AttentionPass};
use crate::ops::elementwise::vmath;
use crate::ops::family::missing_inputs;
use crate::{Error, Result};
use rayon::prelude::*;

/// Query (or key) rows of one tile.
const BLOCK: usize = 64;

/// `out[..n] = Σ_e a[e] · b[e·rs .. e·rs + n]` (`b` row-major with row stride `rs`), 16
/// outputs at a time held in registers across the whole sum.
#[inline(always)]
fn row_times(a: &[f32], b: &[f32], rs: usize, n: usize, out: &mut [f32]) {
    const L: usize = 16;
    let mut c0 = 0;
    while c0 + L <= n {
        let mut acc = [0.0f32; L];
        for (e, &x) in a.iter().enumerate() {
            let src = &b[e * rs + c0..e * rs + c0 + L];
            for l in 0..L {
                acc[l] = x.mul_add(src[l], acc[l]);
            }
        }
        out[c0..c0 + L].copy_from_slice(&acc);
        c0 += L;
    }
    if c0 < n {
        let w = n - c0;
        let mut acc = [0.0f32; L];
        for (e, &x) in a.iter().enumerate() {
            let src = &b[e * rs + c0..e * rs + n];
            for l in 0..w {
                acc[l] = x.mul_add(src[l], acc[l]);
            }
        }
        out[c0..n].copy_from_slice(&acc[..w]);
    }
}

/// `dst[e·n + j] = src[j·d + e]`: rows `0..n` of a `[n, d]` block transposed.
#[inline(always)]
fn transpose(src: &[f32], n: usize, d: usize, dst: &mut Vec<f32>) {
    dst.clear();
    dst.resize(n * d, 0.0);
    for j in 0..n {
        for e in 0..d {
            dst[e * n + j] = src[j * d + e];
        }
    }
}

/// Per-task scratch: two score tiles and two transposed operands.
#[derive(Default)]
struct Tiles {
    s: Vec<f32>,
    t: Vec<f32>,
    a: Vec<f32>,
    b: Vec<f32>,
}

pub(super) fn run(k: &AttentionKernel, inputs: &[&[u32]], out: &mut [u32]) -> Result<()> {
    let n = k.pass.arity();
    if inputs.len() < n {
        return Err(missing_inputs(k, inputs.len()));
    }
    let (h, tq, tk, d) = (k.heads, k.tq, k.tk, k.d);
    let sizes: Vec<usize> = match k.pass {
        AttentionPass::Forward => vec![h * tq * d, h * tk * d, h * tk * d],
        AttentionPass::Lse => vec![h * tq * d, h * tk * d],
        AttentionPass::GradQ | AttentionPass::GradK => {
            vec![
                h * tq * d,
                h * tk * d,
                h * tk * d,
                h * tq * d,
                h * tq,
                h * tq,
            ]
        }
        AttentionPass::GradV => vec![h * tq * d, h * tk * d, h * tq * d, h * tq],
    };
    let (rows, width) = k.rows();
    if sizes.iter().enumerate().any(|(i, &s)| inputs[i].len() != s) || out.len() != rows * width {
        return Err(Error::Internal(format!(
            "{}: inputs of {:?} words and {} output words",
            crate::ops::KernelDef::describe(k),
            inputs.iter().map(|w| w.len()).collect::<Vec<_>>(),
            out.len()
        )));
    }
    if out.is_empty() {
        return Ok(());
    }
    let ins: Vec<&[f32]> = inputs.iter().map(|w| bytemuck::cast_slice(w)).collect();
    let f = ins.as_slice();
    let out: &mut [f32] = bytemuck::cast_slice_mut(out);
    let per_head = out.len() / h;
    let task = |b: usize, o: &mut [f32], tiles: &mut Tiles| head(k, f, b, o, tiles);
    if h * tq * tk * d < 1 << 16 || h == 1 {
        let mut tiles = Tiles::default();
        for (b, o) in out.chunks_mut(per_head).enumerate() {
            task(b, o, &mut tiles)?;
        }
        Ok(())
    } else {
        out.par_chunks_mut(per_head)
            .enumerate()
            .try_for_each_init(Tiles::default, |tiles, (b, o)| task(b, o, tiles))
    }
}

/// One head's output rows, with the widest vector instructions the CPU has (the
/// multiply-adds and `vmath::exp` are inlined into it, so they use FMA and 512-bit registers
/// where they exist).
fn head(
    k: &AttentionKernel,
    f: &[&[f32]],
    b: usize,
    o: &mut [f32],
    tiles: &mut Tiles,
) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512 {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { head_avx512(k, f, b, o, tiles) };
        }
        if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
            // SAFETY: as above.
            return unsafe { head_avx2(k, f, b, o, tiles) };
        }
    }
    head_body(k, f, b, o, tiles)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn head_avx512(
    k: &AttentionKernel,
    f: &[&[f32]],
    b: usize,
    o: &mut [f32],
    tiles: &mut Tiles,
) -> Result<()> {
    head_body(k, f, b, o, tiles)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn head_avx2(
    k: &AttentionKernel,
    f: &[&[f32]],
    b: usize,
    o: &mut [f32],
    tiles: &mut Tiles,
) -> Result<()> {
    head_body(k, f, b, o, tiles)
}

#[inline(always)]
fn head_body(
    k: &AttentionKernel,
    f: &[&[f32]],
    b: usize,
    o: &mut [f32],
    tiles: &mut Tiles,
) -> Result<()> {
    let (tq, tk, d) = (k.tq, k.tk, k.d);
    let head = |i: usize, t: usize| &f[i][b * t * d..(b + 1) * t * d];
    match k.pass {
        AttentionPass::Forward | AttentionPass::Lse | AttentionPass::GradQ => {
            transpose(head(1, tk), tk, d, &mut tiles.a);
            if k.pass == AttentionPass::GradQ {
                transpose(head(2, tk), tk, d, &mut tiles.b);
            }
            for i0 in (0..tq).step_by(BLOCK) {
                let bq = BLOCK.min(tq - i0);
                query_block(k, f, b, i0, bq, o, tiles)?;
            }
        }
        AttentionPass::GradK | AttentionPass::GradV => {
            transpose(head(0, tq), tq, d, &mut tiles.a);
            let g = if k.pass == AttentionPass::GradK { 3 } else { 2 };
            transpose(head(g, tq), tq, d, &mut tiles.b);
            for j0 in (0..tk).step_by(BLOCK) {
                let bk = BLOCK.min(tk - j0);
                key_block(k, f, b, j0, bk, o, tiles)?;
            }
        }
    }
    Ok(())
}

/// Queries `i0..i0+bq` of head `b`: the forward output, the log-sum-exp or `dQ`, into `o`
/// (the head's rows). `tiles.a` holds the head's `kᵀ` (`[d, tk]`), and for `dQ` `tiles.b`
/// its `vᵀ`.
#[inline(always)]
fn query_block(
    k: &AttentionKernel,
    f: &[&[f32]],
    b: usize,
    i0: usize,
    bq: usize,
    o: &mut [f32],
    tiles: &mut Tiles,
) -> Result<()> {
    let (tq, tk, d, scale) = (k.tq, k.tk, k.d, k.scale);
    let q = f[0];
    let Tiles { s, t, a, b: vt } = tiles;
    s.resize(bq * tk, 0.0);
    t.resize(bq * tk, 0.0);
    for r in 0..bq {
        let i = b * tq + i0 + r;
        let seen = k.visible(i0 + r);
        let row = &mut s[r * tk..(r + 1) * tk];
        row_times(&q[i * d..(i + 1) * d], a, tk, seen, row);
        match k.pass {
            AttentionPass::Forward | AttentionPass::Lse => {
                row[..seen].iter_mut().for_each(|x| *x *= scale);
                let m = vmath::lane_max(&row[..seen]);
                for x in row[..seen].iter_mut() {
                    *x = vmath::exp(*x - m);
                }
                let l = vmath::lane_sum(&row[..seen]);
                if k.pass == AttentionPass::Lse {
                    o[i0 + r] = m + l.ln();
                    continue;
                }
                let inv = 1.0 / l;
                row[..seen].iter_mut().for_each(|x| *x *= inv);
                row_times(
                    &row[..seen],
                    &f[2][b * tk * d..],
                    d,
                    d,
                    &mut o[(i0 + r) * d..],
                );
            }
            AttentionPass::GradQ => {
                let (dout, lse, delta) = (f[3], f[4][i], f[5][i]);
                let dp = &mut t[r * tk..(r + 1) * tk];
                row_times(&dout[i * d..(i + 1) * d], vt, tk, seen, dp);
                for (x, &dp) in row[..seen].iter_mut().zip(dp.iter()) {
                    *x = scale * vmath::exp(scale * *x - lse) * (dp - delta);
                }
                row_times(
                    &row[..seen],
                    &f[1][b * tk * d..],
                    d,
                    d,
                    &mut o[(i0 + r) * d..],
                );
            }
            AttentionPass::GradK | AttentionPass::GradV => {
                return Err(Error::Internal(
                    "attention: a key pass in query blocks".into(),
                ))
            }
        }
    }
    Ok(())
}

/// Keys `j0..j0+bk` of head `b`: `dK` or `dV` into `o` (the head's rows). `tiles.a` holds
/// the head's `qᵀ` (`[d, tq]`), `tiles.b` its `dOᵀ`.
#[inline(always)]
fn key_block(
    k: &AttentionKernel,
    f: &[&[f32]],
    b: usize,
    j0: usize,
    bk: usize,
    o: &mut [f32],
    tiles: &mut Tiles,
) -> Result<()> {
    let (tq, tk, d, scale) = (k.tq, k.tk, k.d, k.scale);
    let grad_k = k.pass == AttentionPass::GradK;
    let kk = f[1];
    let lse = &f[if grad_k { 4 } else { 3 }][b * tq..(b + 1) * tq];
    let Tiles { s, t, a: qt, b: gt } = tiles;
    s.resize(bk * tq, 0.0);
    t.resize(bk * tq, 0.0);
    for r in 0..bk {
        let j = b * tk + j0 + r;
        let first = k.first_query(j0 + r);
        let n = tq - first;
        // Scores of key j against queries first..tq.
        let row = &mut s[r * tq..r * tq + n];
        row_times(&kk[j * d..(j + 1) * d], &qt[first..], tq, n, row);
        let out = &mut o[(j0 + r) * d..];
        if grad_k {
            let delta = &f[5][b * tq + first..(b + 1) * tq];
            let dp = &mut t[r * tq..r * tq + n];
            row_times(&f[2][j * d..(j + 1) * d], &gt[first..], tq, n, dp);
            for (((x, &dp), &l), &dl) in row.iter_mut().zip(dp.iter()).zip(&lse[first..]).zip(delta)
            {
                *x = scale * vmath::exp(scale * *x - l) * (dp - dl);
            }
            row_times(row, &f[0][(b * tq + first) * d..], d, d, out);
        } else {
            for (x, &l) in row.iter_mut().zip(&lse[first..]) {
                *x = vmath::exp(scale * *x - l);
            }
            row_times(row, &f[2][(b * tq + first) * d..], d, d, out);
        }
    }
    Ok(())
}
