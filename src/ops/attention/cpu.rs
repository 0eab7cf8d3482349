//! cpu:0's attention passes (also the kernels' reference): one output row (a query's or a
//! key's) per task, its scores recomputed from `q` and `k` as they are needed, so nothing of
//! `[Tq, Tk]` is stored.

use super::{AttentionKernel, AttentionPass};
use crate::ops::family::missing_inputs;
use crate::{Error, Result};
use rayon::prelude::*;

/// Below this many multiply-adds one thread does it all.
const SERIAL: usize = 1 << 16;

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn axpy(acc: &mut [f32], a: f32, x: &[f32]) {
    for (o, v) in acc.iter_mut().zip(x) {
        *o += a * v;
    }
}

pub(super) fn run(k: &AttentionKernel, inputs: &[&[u32]], out: &mut [u32]) -> Result<()> {
    let n = k.pass.arity();
    if inputs.len() < n {
        return Err(missing_inputs(k, inputs.len()));
    }
    let (h, tq, tk, d) = (k.heads, k.tq, k.tk, k.d);
    let f = |i: usize| -> &[f32] { bytemuck::cast_slice(inputs[i]) };
    let (q, kk) = (f(0), f(1));
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
    let out: &mut [f32] = bytemuck::cast_slice_mut(out);
    let scale = k.scale;
    let qrow = |b: usize, i: usize| &q[(b * tq + i) * d..][..d];
    let krow = |b: usize, j: usize| &kk[(b * tk + j) * d..][..d];
    let width = width.max(1);
    let work = h * tq * tk * d;
    let body = |r: usize, o: &mut [f32], s: &mut Vec<f32>| match k.pass {
        AttentionPass::Forward | AttentionPass::Lse => {
            let (b, i) = (r / tq, r % tq);
            let seen = k.visible(i);
            s.clear();
            s.extend((0..seen).map(|j| scale * dot(qrow(b, i), krow(b, j))));
            let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut l = 0.0f32;
            for x in s.iter_mut() {
                *x = (*x - m).exp();
                l += *x;
            }
            if k.pass == AttentionPass::Lse {
                o[0] = m + l.ln();
                return;
            }
            let v = f(2);
            o.fill(0.0);
            for (j, &p) in s.iter().enumerate() {
                axpy(o, p / l, &v[(b * tk + j) * d..][..d]);
            }
        }
        AttentionPass::GradQ => {
            let (b, i) = (r / tq, r % tq);
            let (v, dout, lse, delta) = (f(2), f(3), f(4), f(5));
            let g = &dout[(b * tq + i) * d..][..d];
            o.fill(0.0);
            for j in 0..k.visible(i) {
                let p = (scale * dot(qrow(b, i), krow(b, j)) - lse[b * tq + i]).exp();
                let dp = dot(g, &v[(b * tk + j) * d..][..d]);
                axpy(o, scale * p * (dp - delta[b * tq + i]), krow(b, j));
            }
        }
        AttentionPass::GradK | AttentionPass::GradV => {
            let (b, j) = (r / tk, r % tk);
            let grad_k = k.pass == AttentionPass::GradK;
            let (dout, lse) = if grad_k { (f(3), f(4)) } else { (f(2), f(3)) };
            o.fill(0.0);
            for i in k.first_query(j)..tq {
                let p = (scale * dot(qrow(b, i), krow(b, j)) - lse[b * tq + i]).exp();
                let g = &dout[(b * tq + i) * d..][..d];
                if grad_k {
                    let dp = dot(g, &f(2)[(b * tk + j) * d..][..d]);
                    axpy(o, scale * p * (dp - f(5)[b * tq + i]), qrow(b, i));
                } else {
                    axpy(o, p, g);
                }
            }
        }
    };
    if work < SERIAL {
        let mut s = Vec::new();
        for (r, o) in out.chunks_mut(width).enumerate() {
            body(r, o, &mut s);
        }
    } else {
        out.par_chunks_mut(width)
            .enumerate()
            .for_each_init(Vec::new, |s, (r, o)| body(r, o, s));
    }
    Ok(())
}
