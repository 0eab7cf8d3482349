//! The reductions' scalar reference: one output at a time, one element at a time through
//! `binary_cpu`, in the WGSL kernels' order; the fast path in `cpu.rs` is tested against it.

use super::*;
use std::borrow::Cow;

impl ReduceKernel {
    /// The reduced tensor's words: the input itself, or the fused prologue evaluated over
    /// `sources` (the prologue's inputs).
    pub(super) fn source_cpu<'a>(&self, sources: &[&'a [u32]]) -> Cow<'a, [u32]> {
        match &self.prologue {
            None => Cow::Borrowed(sources.first().copied().unwrap_or_default()),
            Some(p) => Cow::Owned(
                ElementwiseKernel {
                    expr: p.expr.clone(),
                    inputs: p.inputs.clone(),
                    out_shape: self.in_shape.clone(),
                    out_dtype: self.dtype,
                    views: Vec::new(),
                }
                .run_fast(sources),
            ),
        }
    }

    /// The scalar reference the fast kernel is tested against: one output at a time, one
    /// element at a time through `binary_cpu`, in the same order. `inputs`: the reduced
    /// tensor (or the prologue's inputs), then the epilogue's extras.
    #[doc(hidden)]
    pub fn reference(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let n = self.sources();
        let src = self.source_cpu(&inputs[..n]);
        let out = if self.dtype == DType::F16 {
            // f16 accumulates in f32 (as the WGSL kernel does) and rounds once at the end.
            let wide = ReduceKernel {
                dtype: DType::F32,
                epilogue: None,
                prologue: None,
                ..self.clone()
            };
            let input: Vec<u32> = src.iter().map(|&w| f16_to_f32_word(w)).collect();
            let out = wide.reduce_reference(&input, inputs.get(n).copied());
            if self.op.out_dtype(DType::F16) == DType::F16 {
                out.into_iter().map(f32_to_f16_word).collect()
            } else {
                out
            }
        } else {
            self.reduce_reference(&src, inputs.get(n).copied())
        };
        match &self.epilogue {
            None => out,
            Some(e) => e.apply_cpu(&out, &inputs[n..], &self.out_shape, self.dtype),
        }
    }

    fn reduce_reference(&self, input: &[u32], partials: Option<&[u32]>) -> Vec<u32> {
        let (kd, ks, rd, rs) = self.split();
        let kept: usize = kd.iter().product();
        let r = self.reduced_count();
        if let Pass::ArgOfPartials { chunks } = self.pass {
            let parts = partials.unwrap_or(&[]);
            return (0..kept)
                .map(|o| {
                    let base = offset(o, &kd, &ks);
                    let idx: Vec<u32> = (0..chunks)
                        .map(|c| parts.get(o * chunks + c).copied().unwrap_or(0))
                        .collect();
                    let vals: Vec<u32> = idx
                        .iter()
                        .map(|&i| input[base + offset(i as usize, &rd, &rs)])
                        .collect();
                    idx.get(self.arg_cpu(&vals) as usize).copied().unwrap_or(0)
                })
                .collect();
        }
        let (chunk, nch) = self.chunking();
        let fast = self.fast_path();
        // Offsets of the reduced elements from a kept position's base (identity for rows).
        let offsets: Vec<usize> = match fast {
            Some(_) => Vec::new(),
            None => (0..r).map(|i| offset(i, &rd, &rs)).collect(),
        };
        (0..kept * nch)
            .map(|oc| {
                let (o, c) = (oc / nch, oc % nch);
                let (lo, hi) = chunk_range(c, chunk, nch, r);
                match fast {
                    Some((strategy, _)) => {
                        self.fold_row_reference(strategy, &input[o * r + lo..o * r + hi])
                    }
                    None => {
                        let base = offset(o, &kd, &ks);
                        let vals: Vec<u32> = offsets[lo..hi]
                            .iter()
                            .map(|off| input[base + off])
                            .collect();
                        self.fold_reference(&vals, lo)
                    }
                }
            })
            .collect()
    }

    /// The position of the first extreme among `vals` (a NaN counts as the extreme).
    fn arg_cpu(&self, vals: &[u32]) -> u32 {
        let d = self.dtype;
        let better = if self.op == ReduceOp::ArgMax {
            BinaryOp::Greater
        } else {
            BinaryOp::Less
        };
        let nan = |w: u32| d == DType::F32 && f32::from_bits(w).is_nan();
        let mut best = vals.first().copied().unwrap_or(0);
        let mut at = 0u32;
        for (r, &v) in vals.iter().enumerate().skip(1) {
            if !nan(best) && (nan(v) || binary_cpu(better, d, v, best) != 0) {
                best = v;
                at = r as u32;
            }
        }
        at
    }

    /// The Loop strategy's fold of `vals`, the reduced elements from index `lo` on, in the
    /// WGSL kernel's order: sums add blocks of [`SUM_BLOCK`] into the total (a two-level
    /// cascade keeps the rounding error near `(SUM_BLOCK + n / SUM_BLOCK) * eps`).
    fn fold_reference(&self, vals: &[u32], lo: usize) -> u32 {
        let d = self.dtype;
        let c = |op: BinaryOp, a: u32, b: u32| binary_cpu(op, d, a, b);
        match self.op {
            ReduceOp::All => vals.iter().all(|&v| truthy(d, v)) as u32,
            ReduceOp::Any => vals.iter().any(|&v| truthy(d, v)) as u32,
            ReduceOp::ArgMax | ReduceOp::ArgMin => self.arg_cpu(vals) + lo as u32,
            ReduceOp::Sum | ReduceOp::Mean => {
                let mut acc = sum_identity(d);
                for block in vals.chunks(SUM_BLOCK) {
                    let s = block
                        .iter()
                        .fold(sum_identity(d), |s, &v| c(BinaryOp::Add, s, v));
                    acc = c(BinaryOp::Add, acc, s);
                }
                self.finish_cpu(acc)
            }
            ReduceOp::Prod => vals
                .iter()
                .fold(one_word(d), |a, &v| c(BinaryOp::Mul, a, v)),
            ReduceOp::Max | ReduceOp::Min => {
                let op = self.combine_op();
                let first = vals.first().copied().unwrap_or(0);
                vals.iter().skip(1).fold(first, |a, &v| c(op, a, v))
            }
        }
    }

    pub(super) fn finish_cpu(&self, acc: u32) -> u32 {
        if self.op != ReduceOp::Mean {
            return acc;
        }
        let count = self.mean_count();
        let n = match self.dtype {
            DType::F32 => (count as f32).to_bits(),
            _ => count as u32,
        };
        binary_cpu(BinaryOp::Div, self.dtype, acc, n)
    }

    fn fold_row_reference(&self, strategy: ReduceStrategy, row: &[u32]) -> u32 {
        let (d, op) = (self.dtype, self.combine_op());
        let c = |a: u32, b: u32| binary_cpu(op, d, a, b);
        let acc = match strategy {
            ReduceStrategy::RowsVec4 if self.is_sum() => {
                let mut lanes = [sum_identity(d); 4];
                for block in row.chunks(4 * SUM_BLOCK) {
                    let mut s = [sum_identity(d); 4];
                    for chunk in block.chunks_exact(4) {
                        for (l, &v) in s.iter_mut().zip(chunk) {
                            *l = c(*l, v);
                        }
                    }
                    for (l, v) in lanes.iter_mut().zip(s) {
                        *l = c(*l, v);
                    }
                }
                c(c(lanes[0], lanes[1]), c(lanes[2], lanes[3]))
            }
            ReduceStrategy::RowsVec4 => {
                let mut lanes = [row[0], row[1], row[2], row[3]];
                for chunk in row[4..].chunks_exact(4) {
                    for (l, &v) in lanes.iter_mut().zip(chunk) {
                        *l = c(*l, v);
                    }
                }
                c(c(lanes[0], lanes[1]), c(lanes[2], lanes[3]))
            }
            _ => {
                let mut part: Vec<u32> = row[..TREE_WG].to_vec();
                for (i, &v) in row.iter().enumerate().skip(TREE_WG) {
                    part[i % TREE_WG] = c(part[i % TREE_WG], v);
                }
                let mut s = TREE_WG / 2;
                while s > 0 {
                    for t in 0..s {
                        part[t] = c(part[t], part[t + s]);
                    }
                    s /= 2;
                }
                part[0]
            }
        };
        self.finish_cpu(acc)
    }
}

/// NumPy truthiness of one element: non-zero, with NaN true and -0.0 false.
pub(super) fn truthy(d: DType, w: u32) -> bool {
    match d {
        DType::F32 => f32::from_bits(w) != 0.0,
        _ => w != 0,
    }
}

pub(super) fn one_word(d: DType) -> u32 {
    match d {
        DType::F32 => 1.0f32.to_bits(),
        _ => 1,
    }
}
