//! The one-pass form of the commonest epilogue (and reduction prologue): a per-channel
//! bias, then maybe ReLU.
use super::{splat_run, word_at, Source, Walk};
use crate::ops::elementwise::reference::relu_f32;
use crate::ops::elementwise::{BinaryOp, Node, UnaryOp};
use crate::DType;

/// `out = x + bias` (then `relu` when `relu`), `x` the output slot itself or an input read
/// in the output's order, the bias read by `walk` and constant over runs of `run` outputs.
#[derive(Debug)]
pub(super) struct BiasAct {
    /// `x`: `None` for the output slot (in place), else (input, offset of its first word).
    x: Option<(usize, usize)>,
    walk: Walk,
    run: usize,
    relu: bool,
}

impl BiasAct {
    /// The form of `nodes` (rooted at `root`) when it is one.
    pub(super) fn find(
        nodes: &[Node],
        root: usize,
        types: &[DType],
        sources: &[Source],
    ) -> Option<Self> {
        let (relu, sum) = match nodes[root] {
            Node::Unary(UnaryOp::Relu, a) => (true, a),
            _ => (false, root),
        };
        let Node::Binary(BinaryOp::Add, a, b) = nodes[sum] else {
            return None;
        };
        if types.get(sum) != Some(&DType::F32) {
            return None;
        }
        let source = |n: usize| match nodes[n] {
            Node::Input(i) => sources.get(i),
            _ => None,
        };
        let input = |n: usize| match nodes[n] {
            Node::Input(i) => i,
            _ => 0,
        };
        let (x, walk) = match (source(a)?, source(b)?) {
            (Source::Entry, Source::Walk(w)) | (Source::Walk(w), Source::Entry) => (None, w),
            (Source::Direct(off), Source::Walk(w)) => (Some((input(a), *off)), w),
            (Source::Walk(w), Source::Direct(off)) => (Some((input(b), *off)), w),
            _ => return None,
        };
        let run = splat_run(walk)?;
        Some(BiasAct {
            x,
            walk: walk.clone(),
            run,
            relu,
        })
    }

    /// `(run, relu)` when `x` is the output slot itself (the form a producer can apply to
    /// its own sums).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn in_place(&self) -> Option<(usize, bool)> {
        self.x.is_none().then_some((self.run, self.relu))
    }

    /// The bias added to output word `pos`.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn bias_at(&self, data: &[&[u32]], pos: usize) -> f32 {
        f32::from_bits(word_at(&self.walk, data[self.walk.input], pos))
    }

    /// [`BiasAct::apply`] compiled for AVX-512 where the CPU has it.
    pub(super) fn apply_wide(&self, data: &[&[u32]], start: usize, out: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512 {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { self.apply_avx512(data, start, out) };
            return;
        }
        self.apply(data, start, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn apply_avx512(&self, data: &[&[u32]], start: usize, out: &mut [u32]) {
        self.apply(data, start, out);
    }

    /// Output words `start..start + out.len()`, in place.
    #[inline(always)]
    pub(super) fn apply(&self, data: &[&[u32]], start: usize, out: &mut [u32]) {
        let mut at = 0;
        while at < out.len() {
            let pos = start + at;
            let len = (self.run - pos % self.run).min(out.len() - at);
            let b = f32::from_bits(word_at(&self.walk, data[self.walk.input], pos));
            let seg = &mut out[at..at + len];
            if let Some((i, off)) = self.x {
                let xs = &data[i][off + pos..][..len];
                if self.relu {
                    for (w, &x) in seg.iter_mut().zip(xs) {
                        *w = relu_f32((f32::from_bits(x) + b).to_bits());
                    }
                } else {
                    for (w, &x) in seg.iter_mut().zip(xs) {
                        *w = (f32::from_bits(x) + b).to_bits();
                    }
                }
            } else if self.relu {
                for w in seg {
                    *w = relu_f32((f32::from_bits(*w) + b).to_bits());
                }
            } else {
                for w in seg {
                    *w = (f32::from_bits(*w) + b).to_bits();
                }
            }
            at += len;
        }
    }
}
