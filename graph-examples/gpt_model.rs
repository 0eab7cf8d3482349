// The character-level GPT of the `train_gpt` example, shared with tests/grad/gpt.rs (through
// `include!`): the vocabulary, the parameters, the training forward pass and loss, and the
// one-token decoder with per-layer key/value caches.

use wgflow::ops::Initializer;
use wgflow::{Axes, DType, Graph, HostTensor, Shape, Tensor};

/// The vocabulary: the newline, then the 95 printable ASCII characters (anything else is
/// read as `?`), so checkpoints do not depend on the corpus.
pub const VOCAB: usize = 96;

/// A character's token.
pub fn encode_char(c: char) -> i32 {
    match c {
        '\n' => 0,
        ' '..='~' => c as i32 - 31,
        _ => '?' as i32 - 31,
    }
}

/// A token's character.
pub fn decode_token(t: i32) -> char {
    match t {
        1..=95 => char::from(t as u8 + 31),
        _ => '\n',
    }
}

/// The model's sizes.
#[derive(Debug, Clone, Copy)]
pub struct GptConfig {
    /// Positions of the training windows and of the decoder's caches.
    pub context: usize,
    pub width: usize,
    pub heads: usize,
    pub layers: usize,
}

/// One pre-norm block's parameters.
pub struct Block {
    pub ln1: (Tensor, Tensor),
    pub wq: Tensor,
    pub wk: Tensor,
    pub wv: Tensor,
    pub wo: Tensor,
    pub ln2: (Tensor, Tensor),
    pub w1: Tensor,
    pub b1: Tensor,
    pub w2: Tensor,
    pub b2: Tensor,
}

/// The model's variables: token and position embeddings, the blocks, the final layer norm.
/// The output projection is the token embedding's transpose (tied).
pub struct Gpt {
    pub cfg: GptConfig,
    pub wte: Tensor,
    pub wpe: Tensor,
    pub blocks: Vec<Block>,
    pub lnf: (Tensor, Tensor),
    /// Attention, layer normalisation and the loss as fused primitives
    /// (`Graph::attention`, `Graph::layer_norm`, `Graph::sparse_softmax_cross_entropy`; the
    /// default) or as composites of primitives: matmuls, a mask and a softmax, which store
    /// the `[T, T]` probabilities; means and elementwise ops; a log-softmax and a gather.
    pub fused: bool,
}

impl Gpt {
    /// Variables, initialised as GPT-2 does (normal with std 0.02, the residual projections
    /// scaled by `1/sqrt(2·layers)`, layer norms at 1 and 0) from `seed`.
    pub fn new(g: &mut Graph, cfg: GptConfig, seed: u64) -> wgflow::Result<Gpt> {
        let d = cfg.width;
        let mut k = seed;
        let mut normal = |g: &mut Graph, name: &str, shape: &[usize], std: f32| {
            k += 1;
            let init = Initializer::Normal { mean: 0.0, std, seed: k };
            g.variable_with(name, Shape(shape.to_vec()), DType::F32, init)
        };
        let ln = |g: &mut Graph, name: &str| -> wgflow::Result<(Tensor, Tensor)> {
            let gamma = g.variable_with(&format!("{name}.g"), Shape(vec![d]), DType::F32, Initializer::Ones)?;
            let beta = g.variable_with(&format!("{name}.b"), Shape(vec![d]), DType::F32, Initializer::Zeros)?;
            Ok((gamma, beta))
        };
        let wte = normal(g, "wte", &[VOCAB, d], 0.02)?;
        let wpe = normal(g, "wpe", &[cfg.context, d], 0.01)?;
        let resid = 0.02 / (2.0 * cfg.layers as f32).sqrt();
        let mut blocks = Vec::new();
        for l in 0..cfg.layers {
            let p = format!("h{l}");
            blocks.push(Block {
                ln1: ln(g, &format!("{p}.ln1"))?,
                wq: normal(g, &format!("{p}.wq"), &[d, d], 0.02)?,
                wk: normal(g, &format!("{p}.wk"), &[d, d], 0.02)?,
                wv: normal(g, &format!("{p}.wv"), &[d, d], 0.02)?,
                wo: normal(g, &format!("{p}.wo"), &[d, d], resid)?,
                ln2: ln(g, &format!("{p}.ln2"))?,
                w1: normal(g, &format!("{p}.w1"), &[d, 4 * d], 0.02)?,
                b1: g.variable_with(&format!("{p}.b1"), Shape(vec![4 * d]), DType::F32, Initializer::Zeros)?,
                w2: normal(g, &format!("{p}.w2"), &[4 * d, d], resid)?,
                b2: g.variable_with(&format!("{p}.b2"), Shape(vec![d]), DType::F32, Initializer::Zeros)?,
            });
        }
        let lnf = ln(g, "lnf")?;
        Ok(Gpt { cfg, wte, wpe, blocks, lnf, fused: true })
    }

    /// Every trainable variable, in a fixed order.
    pub fn params(&self) -> Vec<Tensor> {
        let mut p = vec![self.wte, self.wpe];
        for b in &self.blocks {
            p.extend([b.ln1.0, b.ln1.1, b.wq, b.wk, b.wv, b.wo, b.ln2.0, b.ln2.1]);
            p.extend([b.w1, b.b1, b.w2, b.b2]);
        }
        p.extend([self.lnf.0, self.lnf.1]);
        p
    }

    fn head_dim(&self) -> usize {
        self.cfg.width / self.cfg.heads
    }

    /// `[rows, width]` → `[lead.., heads, rows', head_dim]` for attention: `x` is `[b·t,
    /// width]` seen as `[b, t, heads, hd]`, returned as `[b, heads, t, hd]`.
    fn split_heads(&self, g: &mut Graph, x: Tensor, b: usize, t: usize) -> wgflow::Result<Tensor> {
        let (h, hd) = (self.cfg.heads as isize, self.head_dim() as isize);
        let x = g.reshape(x, &[b as isize, t as isize, h, hd])?;
        g.transpose(x, &[0, 2, 1, 3])
    }

    /// Layer normalisation of `[rows, width]` with `(γ, β)`, fused or written out.
    fn norm(&self, g: &mut Graph, x: Tensor, (gamma, beta): (Tensor, Tensor)) -> wgflow::Result<Tensor> {
        if self.fused {
            return g.layer_norm(x, Some(gamma), Some(beta), -1, 1e-5);
        }
        let m = g.mean(x, [-1], true)?;
        let c = g.sub(x, m)?;
        let sq = g.mul(c, c)?;
        let v = g.mean(sq, [-1], true)?;
        let eps = scalar(g, 1e-5)?;
        let v = g.add(v, eps)?;
        let r = g.rsqrt(v)?;
        let y = g.mul(c, r)?;
        let y = g.mul(y, gamma)?;
        g.add(y, beta)
    }

    /// Mean next-token cross-entropy (nats) of `logits` (`[rows, VOCAB]`) against
    /// `targets` (`[rows]` i32), fused or as a log-softmax and a gather.
    pub fn loss(&self, g: &mut Graph, logits: Tensor, targets: Tensor, rows: usize) -> wgflow::Result<Tensor> {
        if self.fused {
            let l = g.sparse_softmax_cross_entropy(logits, targets)?;
            return g.mean(l, Axes::All, false);
        }
        let logp = g.log_softmax(logits, -1)?;
        let t = g.reshape(targets, &[rows as isize, 1])?;
        let picked = g.gather_elements(logp, t, -1)?;
        let mean = g.mean(picked, Axes::All, false)?;
        g.neg(mean)
    }

    /// The MLP half of a block, on `[rows, width]`.
    fn mlp(&self, g: &mut Graph, blk: &Block, x: Tensor) -> wgflow::Result<Tensor> {
        let h = self.norm(g, x, blk.ln2)?;
        let h = g.linear(h, blk.w1, Some(blk.b1))?;
        let h = g.gelu(h, true)?;
        let h = g.linear(h, blk.w2, Some(blk.b2))?;
        g.add(x, h)
    }

    /// Next-token logits `[b·t, VOCAB]` for `tokens` (`[b, t]` i32, `t <= context`), with
    /// causal multi-head attention (see [`Gpt::fused`]).
    pub fn forward(&self, g: &mut Graph, tokens: Tensor, b: usize, t: usize) -> wgflow::Result<Tensor> {
        let (d, hd) = (self.cfg.width, self.head_dim());
        let flat = g.reshape(tokens, &[(b * t) as isize])?;
        let x = g.take(self.wte, flat, 0)?;
        let x = g.reshape(x, &[b as isize, t as isize, d as isize])?;
        let pos = g.slice(self.wpe, &[wgflow::SliceArg::new(Some(0), Some(t as isize), 1)])?;
        let x = g.add(x, pos)?;
        let mut x = g.reshape(x, &[(b * t) as isize, d as isize])?;
        let mask: Vec<f32> = (0..t * t)
            .map(|i| if i % t > i / t { -1e9 } else { 0.0 })
            .collect();
        let mask = g.constant(HostTensor::new(Shape(vec![t, t]), mask)?)?;
        let scale = scalar(g, 1.0 / (hd as f64).sqrt())?;
        for blk in &self.blocks {
            let h = self.norm(g, x, blk.ln1)?;
            let q = g.matmul(h, blk.wq)?;
            let k = g.matmul(h, blk.wk)?;
            let v = g.matmul(h, blk.wv)?;
            let (q, k, v) = (
                self.split_heads(g, q, b, t)?,
                self.split_heads(g, k, b, t)?,
                self.split_heads(g, v, b, t)?,
            );
            let y = if self.fused {
                g.attention(q, k, v, true, None)?
            } else {
                let kt = g.transpose(k, &[0, 1, 3, 2])?;
                let s = g.matmul(q, kt)?;
                let s = g.mul(s, scale)?;
                let s = g.add(s, mask)?;
                let a = g.softmax(s, -1)?;
                g.matmul(a, v)?
            };
            let y = g.transpose(y, &[0, 2, 1, 3])?;
            let y = g.reshape(y, &[(b * t) as isize, d as isize])?;
            let y = g.matmul(y, blk.wo)?;
            x = g.add(x, y)?;
            x = self.mlp(g, blk, x)?;
        }
        let x = self.norm(g, x, self.lnf)?;
        let wt = g.transpose(self.wte, &[1, 0])?;
        g.matmul(x, wt)
    }

    /// The decoder: one token at position `pos` (both fed), its key and value written into
    /// each layer's cache (`[heads, context, hd]` variables, not trained), attention over the
    /// cached positions `0..=pos` (the rest masked), the next-token logits `[1, VOCAB]`.
    pub fn decoder(&self, g: &mut Graph) -> wgflow::Result<Decoder> {
        let (c, d, h, hd) = (self.cfg.context, self.cfg.width, self.cfg.heads, self.head_dim());
        let tok = g.placeholder("decode/token", [1], DType::I32)?;
        let pos = g.placeholder("decode/pos", [1], DType::I32)?;
        let te = g.take(self.wte, tok, 0)?;
        let pe = g.take(self.wpe, pos, 0)?;
        let mut x = g.add(te, pe)?;
        // here[p] = (p == pos), later[p] = (p > pos), over the cache's positions.
        let positions = g.arange(0.0, c as f64, 1.0, DType::I32)?;
        let here = g.equal(positions, pos)?;
        let here = g.reshape(here, &[1, c as isize, 1])?;
        let later = g.greater(positions, pos)?;
        let big = scalar(g, -1e9)?;
        let zero = scalar(g, 0.0)?;
        let later = g.select(later, big, zero)?;
        let scale = scalar(g, 1.0 / (hd as f64).sqrt())?;
        let mut caches = Vec::new();
        let mut writes = Vec::new();
        for (l, blk) in self.blocks.iter().enumerate() {
            let hn = self.norm(g, x, blk.ln1)?;
            let heads = |g: &mut Graph, w: Tensor| -> wgflow::Result<Tensor> {
                let y = g.matmul(hn, w)?;
                let y = g.reshape(y, &[h as isize, 1, hd as isize])?;
                Ok(y)
            };
            let (q, k, v) = (heads(g, blk.wq)?, heads(g, blk.wk)?, heads(g, blk.wv)?);
            let mut cached = |g: &mut Graph, name: &str, new: Tensor| -> wgflow::Result<Tensor> {
                let cache = g.variable_with(
                    &format!("decode/h{l}.{name}"),
                    Shape(vec![h, c, hd]),
                    DType::F32,
                    Initializer::Zeros,
                )?;
                let updated = g.select(here, new, cache)?;
                writes.push(g.assign(cache, updated)?);
                caches.push(cache);
                Ok(updated)
            };
            let kc = cached(g, "k", k)?;
            let vc = cached(g, "v", v)?;
            let kt = g.transpose(kc, &[0, 2, 1])?;
            let s = g.matmul(q, kt)?;
            let s = g.mul(s, scale)?;
            let s = g.add(s, later)?;
            let a = g.softmax(s, -1)?;
            let y = g.matmul(a, vc)?;
            let y = g.reshape(y, &[1, d as isize])?;
            let y = g.matmul(y, blk.wo)?;
            x = g.add(x, y)?;
            x = self.mlp(g, blk, x)?;
        }
        let x = self.norm(g, x, self.lnf)?;
        let wt = g.transpose(self.wte, &[1, 0])?;
        let logits = g.matmul(x, wt)?;
        let update = g.group(&writes)?;
        Ok(Decoder { tok, pos, logits, update, caches })
    }
}

/// The decoder's feeds and fetches (see [`Gpt::decoder`]).
pub struct Decoder {
    pub tok: Tensor,
    pub pos: Tensor,
    pub logits: Tensor,
    /// Writes every layer's cache; fetch it with the logits.
    pub update: Tensor,
    pub caches: Vec<Tensor>,
}

/// An f32 scalar constant.
fn scalar(g: &mut Graph, v: f64) -> wgflow::Result<Tensor> {
    g.full(Shape::scalar(), DType::F32, v)
}
