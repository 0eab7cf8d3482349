//! The scan kernel's CPU path, also its scalar reference: `cpu:0` runs the same chunks in the
//! same order as the WGSL, so results match bit for bit.

use super::{ScanKernel, ScanPass};
use crate::ops::family::{missing_inputs, KernelDef};

impl ScanKernel {
    /// The CPU kernel: the same chunks in the same order as the WGSL. Inputs that do not
    /// match the kernel (fewer than it binds, or shorter than its shape) are an error.
    pub fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let binds = if self.pass == ScanPass::FromPrefix {
            2
        } else {
            1
        };
        if inputs.len() < binds {
            return Err(missing_inputs(self, inputs.len()));
        }
        let (x, d) = (inputs[0], self.dtype);
        let (elements, totals) = (
            self.outer * self.n * self.inner,
            self.outer * self.chunks() * self.inner,
        );
        if x.len() < elements || (binds == 2 && inputs[1].len() < totals) {
            return Err(crate::Error::Internal(format!(
                "{} ran on {} word(s), fewer than its shape",
                self.describe(),
                x.len()
            )));
        }
        let (chunk, chunks, inner, n) = (self.chunk(), self.chunks(), self.inner, self.n);
        let totals = self.pass == ScanPass::Totals;
        let mut out = vec![
            0u32;
            if totals {
                self.outer * chunks * inner
            } else {
                x.len()
            }
        ];
        for t in 0..self.outer * chunks * inner {
            let (o, c, i) = (t / (chunks * inner), (t / inner) % chunks, t % inner);
            let lo = c * chunk;
            let len = chunk.min(n - lo.min(n));
            let base = o * n * inner + i;
            let mut acc = match self.pass {
                ScanPass::FromPrefix => inputs[1][t],
                ScanPass::Whole | ScanPass::Totals => self.op.identity(d),
            };
            for s in 0..len {
                let k = if self.reverse {
                    lo + len - 1 - s
                } else {
                    lo + s
                };
                let at = base + k * inner;
                if totals {
                    acc = self.op.combine(d, acc, x[at]);
                } else if self.exclusive {
                    out[at] = acc;
                    acc = self.op.combine(d, acc, x[at]);
                } else {
                    acc = self.op.combine(d, acc, x[at]);
                    out[at] = acc;
                }
            }
            if totals {
                out[t] = acc;
            }
        }
        Ok(out)
    }
}
