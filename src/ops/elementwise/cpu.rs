//! `cpu:0`'s fast path for fused elementwise kernels.
//!
//! The output is cut into chunks of [`CHUNK`] words, and each chunk runs the expression's
//! nodes in order over scratch buffers small enough to stay in cache, so no intermediate is
//! ever a whole array, whatever the chain length. Large outputs split their chunks across
//! rayon's pool. Before the first chunk, a [`Program`] decides where every node's value lies:
//! a literal, a broadcast scalar and anything computed only from them is one word folded at
//! build time (through the scalar functions); an input of the output's shape is read straight
//! from its slice; other broadcasts and strided views are gathered per chunk by a walk that
//! increments a multi-index (no division per element). Per node and chunk, the op and dtype
//! are matched once and the inner loop is a closure over words that LLVM vectorizes (`exp`,
//! `sigmoid`, `tanh`, `log` and `erf` included: they are branch-free, from
//! [`vmath`](super::vmath)); on x86_64 the same loops run from a copy compiled for AVX2+FMA
//! or AVX-512, chosen once per block of chunks. Ops without a dedicated
//! loop call the scalar functions of [`reference`](super::reference), which
//! define the semantics; the dedicated loops compute the same IEEE operations (Rust never
//! contracts `a*b + c`), so both agree bit for bit with
//! [`ElementwiseKernel::reference`], which the tests check.

use super::reference::{
    binary_cpu, cast_cpu, erf, maximum_f32, minimum_f32, relu_f32, sign_f32, unary_cpu,
};
use super::{vmath, BinaryOp, ElementwiseKernel, Node, UnaryOp};
use crate::ops::CpuIn;
use crate::{DType, Error, Result};
use rayon::prelude::*;

mod bias;
mod slots;
use bias::BiasAct;
use slots::Slots;

/// Words per chunk: a chain's live buffers (8 KiB each) stay in L1/L2.
pub const CHUNK: usize = 2048;

/// Below this much work (output words × steps) a kernel stays on the calling thread. Waking
/// the pool costs 5–15 µs on the 2-core development machine (more when it is busy), and
/// measured there under load, a second thread paid off from about 2^18 words for `a + b`,
/// 2^16–2^18 for `exp(a)` and 2^15 for W2's 7 steps.
pub const PARALLEL_WORK: usize = 1 << 18;

/// Evaluate `k` into `out` (see the module docs). `inputs[i]` holds input `i`'s words (its
/// whole buffer when it is read through a view) or is the output slot itself.
pub fn run(k: &ElementwiseKernel, inputs: &[CpuIn<'_>], out: &mut [u32]) -> Result<()> {
    let n = k.out_shape.numel();
    if out.len() != n || inputs.len() != k.inputs.len() {
        return Err(Error::Internal(format!(
            "{}: {} input(s) and {} output words given for {} input(s) and {} elements",
            k.expr.describe(),
            inputs.len(),
            out.len(),
            k.inputs.len(),
            n
        )));
    }
    if n == 0 {
        return Ok(());
    }
    // An in-place input read exactly as the output is laid out is copied chunk by chunk
    // before the chunk is overwritten; any other (which the planner does not make) is
    // copied whole first.
    let plain = |i: usize| k.view(i).is_none() && k.inputs[i].0 == k.out_shape;
    let whole: Option<Vec<u32>> = inputs
        .iter()
        .enumerate()
        .any(|(i, x)| matches!(x, CpuIn::Output) && !plain(i))
        .then(|| out.to_vec());
    let data: Vec<Option<&[u32]>> = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| match x {
            CpuIn::Words(w) => Some(*w),
            CpuIn::Output if plain(i) => None,
            CpuIn::Output => whole.as_deref(),
        })
        .collect();
    let program = Program::new(k, &data)?;
    let words: Vec<&[u32]> = data.iter().map(|d| d.unwrap_or_default()).collect();
    program.execute(&words, out);
    Ok(())
}

/// A kernel compiled once and applied to ranges of its output from another kernel's tasks:
/// a convolution's epilogue (bias, activation, residual) over the rows it has just written,
/// while they are in cache, instead of a second pass over the whole output.
pub(crate) struct RangeProgram<'a> {
    program: Program,
    data: Vec<&'a [u32]>,
}

impl<'a> RangeProgram<'a> {
    /// The program over `inputs` (as for [`run`]); `None` when an input is the output slot
    /// read other than as the output is laid out (that needs a whole copy first).
    pub fn new(k: &ElementwiseKernel, inputs: &[CpuIn<'a>]) -> Result<Option<Self>> {
        if inputs.len() != k.inputs.len() {
            return Err(Error::Internal(format!(
                "{}: {} input(s) given for {}",
                k.expr.describe(),
                inputs.len(),
                k.inputs.len()
            )));
        }
        let plain = |i: usize| k.view(i).is_none() && k.inputs[i].0 == k.out_shape;
        let mut data = Vec::with_capacity(inputs.len());
        for (i, x) in inputs.iter().enumerate() {
            match x {
                CpuIn::Words(w) => data.push(Some(*w)),
                CpuIn::Output if plain(i) => data.push(None),
                CpuIn::Output => return Ok(None),
            }
        }
        let program = Program::new(k, &data)?;
        let data = data.iter().map(|d| d.unwrap_or_default()).collect();
        Ok(Some(RangeProgram { program, data }))
    }

    /// When the program is `out + b` (then maybe ReLU) over the output slot in place, with
    /// `b` one value per run of output words: the run's length, whether ReLU follows, and
    /// `b` at an output word. A producer can then apply it to its sums in registers (only
    /// x86's direct convolution does).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub fn bias_in_place(&self) -> Option<(usize, bool, impl Fn(usize) -> f32 + '_)> {
        let b = self.program.bias_act.as_ref()?;
        let (run, relu) = b.in_place()?;
        Some((run, relu, move |pos| b.bias_at(&self.data, pos)))
    }

    /// Output words `start..start + out.len()`, on this thread (an output-slot input reads
    /// `out` as it is on entry).
    pub fn apply(&self, start: usize, out: &mut [u32]) {
        if let Some(b) = &self.program.bias_act {
            // No scratch: a convolution applies this to each row piece it writes, often a
            // few hundred words, where the scratch's bookkeeping was most of the cost.
            b.apply_wide(&self.data, start, out);
            return;
        }
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = const {
                std::cell::RefCell::new(Scratch {
                    bufs: Vec::new(),
                    splats: Vec::new(),
                    index: Vec::new(),
                })
            };
        }
        let p = &self.program;
        SCRATCH.with_borrow_mut(|s| {
            if s.bufs.len() < p.slots {
                s.bufs.resize(p.slots, vec![0; CHUNK]);
            }
            s.splats.resize(s.bufs.len(), None);
            if s.index.len() < p.rank {
                s.index.resize(p.rank, 0);
            }
            p.dispatch_block(&self.data, start, out, s);
        })
    }
}

/// Where a node's value lies in each chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    /// The same word at every element.
    Splat(u32),
    /// Input `.0`'s words from `.1 + start` on: contiguous, in the output's order.
    Direct(usize, usize),
    /// A scratch buffer.
    Slot(usize),
}

/// Where a step writes: a scratch buffer, or the output's chunk (the root's step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dst {
    Slot(usize),
    Out,
}

/// A strided read of an input over the output's index space: element `c` of the output
/// reads word `offset + Σ c_k · strides[k]`, over coalesced dimensions (size-1 axes dropped,
/// neighbours that are contiguous with each other merged).
#[derive(Debug, Clone)]
struct Walk {
    input: usize,
    offset: i64,
    dims: Vec<usize>,
    strides: Vec<i64>,
}

#[derive(Debug)]
enum Kind {
    Gather(Walk),
    /// This chunk of the output as it was on entry (an input written over in place).
    Entry,
    Unary(UnaryOp, DType, Val),
    Cast(DType, DType, Val),
    Binary(BinaryOp, DType, Val, Val),
    Select(Val, Val, Val),
    Copy(Val),
}

#[derive(Debug)]
struct Step {
    kind: Kind,
    dst: Dst,
}

/// An expression compiled for one kernel's inputs: steps per chunk and the scratch they use.
#[derive(Debug)]
struct Program {
    steps: Vec<Step>,
    slots: usize,
    /// Longest gather walk (its multi-index lives in the scratch).
    rank: usize,
    /// Output elements over which every gathered input that is constant along its innermost
    /// axis (a per-channel scale over `[N, C, H, W]`) keeps one value, when that is at least
    /// [`RUN_MIN`]: chunks are cut at these runs' boundaries, so each such input is one
    /// word per chunk (a splat operand, not a filled buffer).
    run: Option<usize>,
    /// The expression is `x + bias` or `relu(x + bias)` over the output slot in place, with
    /// a bias that is one word per run (a convolution's epilogue): one pass per run.
    bias_act: Option<BiasAct>,
}

/// The shortest run worth cutting chunks at (shorter chunks cost more in per-step dispatch
/// than the fills they save).
const RUN_MIN: usize = 256;

/// `w`'s run (its innermost axis's size) when that axis is broadcast (stride 0).
fn splat_run(w: &Walk) -> Option<usize> {
    match (w.dims.last(), w.strides.last()) {
        (Some(&d), Some(&0)) => Some(d),
        _ => None,
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// How input `i` is read.
enum Source {
    Splat(u32),
    Direct(usize),
    Walk(Walk),
    /// The output's own slot, laid out as the output (in place).
    Entry,
}

impl Program {
    /// `data[i]`: input `i`'s words, `None` for an input written over in place.
    fn new(k: &ElementwiseKernel, data: &[Option<&[u32]>]) -> Result<Program> {
        let dtypes: Vec<DType> = k.inputs.iter().map(|(_, d)| *d).collect();
        let nodes = k.expr.nodes();
        let types = k.expr.dtypes(&dtypes);
        let uses = k.expr.uses();
        let root = k.expr.root();
        let mut sources = Vec::with_capacity(k.inputs.len());
        for (i, d) in data.iter().enumerate() {
            sources.push(source(k, i, *d)?);
        }
        let mut slots = Slots::default();
        let mut steps = Vec::new();
        let mut vals: Vec<Val> = Vec::with_capacity(nodes.len());
        let mut rank = 0;
        for (at, node) in nodes.iter().enumerate() {
            let before = steps.len();
            let mut step = |kind: Kind, slots: &mut Slots| {
                let dst = if at == root {
                    Dst::Out
                } else {
                    Dst::Slot(slots.alloc(uses[at]))
                };
                steps.push(Step { kind, dst });
                match dst {
                    Dst::Slot(s) => Val::Slot(s),
                    // Nothing reads the root.
                    Dst::Out => Val::Splat(0),
                }
            };
            let val = match *node {
                Node::Input(i) => match sources.get(i) {
                    Some(Source::Splat(w)) => Val::Splat(*w),
                    Some(Source::Direct(off)) => Val::Direct(i, *off),
                    Some(Source::Walk(w)) => {
                        rank = rank.max(w.dims.len());
                        step(Kind::Gather(w.clone()), &mut slots)
                    }
                    // The output already holds it.
                    Some(Source::Entry) if at == root => Val::Splat(0),
                    Some(Source::Entry) => step(Kind::Entry, &mut slots),
                    None => {
                        return Err(Error::Internal(format!(
                            "{} reads input {i} of {}",
                            k.expr.describe(),
                            k.inputs.len()
                        )))
                    }
                },
                Node::Lit(_, w) => Val::Splat(w),
                Node::Unary(op, a) => match vals[a] {
                    Val::Splat(w) => Val::Splat(unary_cpu(op, types[a], w)),
                    va => step(Kind::Unary(op, types[a], va), &mut slots),
                },
                Node::Cast(to, a) => match vals[a] {
                    Val::Splat(w) => Val::Splat(cast_cpu(types[a], to, w)),
                    va => step(Kind::Cast(types[a], to, va), &mut slots),
                },
                Node::Binary(op, a, b) => match (vals[a], vals[b]) {
                    (Val::Splat(x), Val::Splat(y)) => Val::Splat(binary_cpu(op, types[a], x, y)),
                    (va, vb) => step(Kind::Binary(op, types[a], va, vb), &mut slots),
                },
                Node::Select(c, a, b) => match vals[c] {
                    Val::Splat(w) => {
                        let v = if w != 0 { vals[a] } else { vals[b] };
                        slots.hold(v, uses[at]);
                        v
                    }
                    vc => step(Kind::Select(vc, vals[a], vals[b]), &mut slots),
                },
            };
            for o in node.operands() {
                slots.release(vals[o]);
            }
            // A value nobody reads (an expression that is not canonical) frees the buffer it
            // was just given.
            if let (Val::Slot(s), 0, true) = (val, uses[at], steps.len() > before) {
                slots.free.push(s);
            }
            vals.push(val);
        }
        let in_place =
            matches!(nodes[root], Node::Input(i) if matches!(sources.get(i), Some(Source::Entry)));
        if !in_place && !steps.iter().any(|s| s.dst == Dst::Out) {
            // The result is a folded word, an input, or a value passed on by a `where`.
            steps.push(Step {
                kind: Kind::Copy(vals[root]),
                dst: Dst::Out,
            });
        }
        let run = steps
            .iter()
            .filter_map(|s| match &s.kind {
                Kind::Gather(w) => splat_run(w),
                _ => None,
            })
            .reduce(gcd)
            .filter(|&r| r >= RUN_MIN);
        let bias_act = BiasAct::find(nodes, root, &types, &sources);
        Ok(Program {
            steps,
            slots: slots.refs.len(),
            rank,
            run,
            bias_act,
        })
    }

    /// Run every chunk of the output, in parallel when the work pays for it.
    fn execute(&self, data: &[&[u32]], out: &mut [u32]) {
        let n = out.len();
        let threads = rayon::current_num_threads();
        let work = n.saturating_mul(self.steps.len().max(1));
        if work < PARALLEL_WORK || threads < 2 || n <= CHUNK {
            self.run_block(data, 0, out);
            return;
        }
        // A few blocks per thread, so a thread that finishes early steals another.
        let block = n.div_ceil(threads * 4).next_multiple_of(CHUNK);
        out.par_chunks_mut(block)
            .enumerate()
            .for_each(|(b, blk)| self.run_block(data, b * block, blk));
    }

    /// Consecutive chunks from output word `start`, on one thread with one scratch.
    fn run_block(&self, data: &[&[u32]], start: usize, out: &mut [u32]) {
        let mut scratch = Scratch {
            bufs: vec![vec![0; CHUNK]; self.slots],
            splats: vec![None; self.slots],
            index: vec![0; self.rank],
        };
        self.dispatch_block(data, start, out, &mut scratch);
    }

    /// [`Program::block`] in the widest form the CPU runs (`s` holds at least this
    /// program's slots and index).
    fn dispatch_block(&self, data: &[&[u32]], start: usize, out: &mut [u32], s: &mut Scratch) {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512 {
                // SAFETY: the CPU supports AVX-512F (and so AVX2 and FMA), checked just above.
                unsafe { self.block_avx512(data, start, out, s) };
                return;
            }
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
                // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                unsafe { self.block_avx2(data, start, out, s) };
                return;
            }
        }
        self.block(data, start, out, s);
    }

    /// [`Program::block`] compiled for AVX2 and FMA: the same operations on wider registers
    /// (the math functions' `mul_add` becomes one instruction instead of a libm call).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2(&self, data: &[&[u32]], start: usize, out: &mut [u32], s: &mut Scratch) {
        self.block(data, start, out, s)
    }

    /// [`Program::block`] compiled for AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn block_avx512(&self, data: &[&[u32]], start: usize, out: &mut [u32], s: &mut Scratch) {
        self.block(data, start, out, s)
    }

    /// The chunks of one block; the feature check is made once per block, not per chunk.
    #[inline(always)]
    fn block(&self, data: &[&[u32]], start: usize, out: &mut [u32], s: &mut Scratch) {
        if let Some(b) = &self.bias_act {
            b.apply(data, start, out);
            return;
        }
        let Some(run) = self.run else {
            for (c, chunk) in out.chunks_mut(CHUNK).enumerate() {
                self.chunk(data, start + c * CHUNK, chunk, s);
            }
            return;
        };
        let mut at = 0;
        while at < out.len() {
            let pos = start + at;
            let len = CHUNK.min(run - pos % run).min(out.len() - at);
            self.chunk(data, pos, &mut out[at..at + len], s);
            at += len;
        }
    }

    /// One chunk: output words `start..start + out.len()`.
    #[inline(always)]
    fn chunk(&self, data: &[&[u32]], start: usize, out: &mut [u32], s: &mut Scratch) {
        let len = out.len();
        for step in &self.steps {
            // A broadcast input whose value is one word over this whole chunk: no buffer.
            let one_word = match (&step.kind, step.dst) {
                (Kind::Gather(w), Dst::Slot(_)) => splat_run(w)
                    .filter(|r| start % r + len <= *r)
                    .map(|_| word_at(w, data[w.input], start)),
                _ => None,
            };
            if let Dst::Slot(i) = step.dst {
                s.splats[i] = one_word;
            }
            if one_word.is_some() {
                continue;
            }
            let mut buf = match step.dst {
                Dst::Slot(i) => Some(std::mem::take(&mut s.bufs[i])),
                Dst::Out => None,
            };
            if let Kind::Entry = step.kind {
                if let Some(b) = &mut buf {
                    b[..len].copy_from_slice(out);
                }
            } else {
                let (bufs, splats) = (&s.bufs, &s.splats);
                let src = |v: Val| match v {
                    Val::Splat(w) => Src::Splat(w),
                    Val::Direct(i, off) => Src::Slice(&data[i][off + start..off + start + len]),
                    Val::Slot(j) => match splats[j] {
                        Some(w) => Src::Splat(w),
                        None => Src::Slice(&bufs[j][..len]),
                    },
                };
                let dst: &mut [u32] = match &mut buf {
                    Some(b) => &mut b[..len],
                    None => &mut *out,
                };
                match &step.kind {
                    Kind::Gather(w) => gather(w, data[w.input], start, dst, &mut s.index),
                    Kind::Unary(op, d, a) => unary(*op, *d, src(*a), dst),
                    Kind::Cast(from, to, a) => cast(*from, *to, src(*a), dst),
                    Kind::Binary(op, d, a, b) => binary(*op, *d, src(*a), src(*b), dst),
                    Kind::Select(c, a, b) => select(src(*c), src(*a), src(*b), dst),
                    Kind::Copy(a) => match src(*a) {
                        Src::Splat(w) => dst.fill(w),
                        Src::Slice(a) => dst.copy_from_slice(a),
                    },
                    Kind::Entry => {}
                }
            }
            if let (Dst::Slot(i), Some(b)) = (step.dst, buf) {
                s.bufs[i] = b;
            }
        }
    }
}

/// Per-thread scratch: one buffer per slot (or the one word a slot holds throughout this
/// chunk), and a gather's multi-index.
struct Scratch {
    bufs: Vec<Vec<u32>>,
    splats: Vec<Option<u32>>,
    index: Vec<usize>,
}

/// The word `w` reads for output element `at`.
fn word_at(w: &Walk, data: &[u32], at: usize) -> u32 {
    let (mut rem, mut off) = (at, w.offset);
    for k in (0..w.dims.len()).rev() {
        off += (rem % w.dims[k]) as i64 * w.strides[k];
        rem /= w.dims[k];
    }
    data[off as usize]
}

/// How input `i` is read (see [`Source`]); checks that every word it reads lies in `data`.
fn source(k: &ElementwiseKernel, i: usize, data: Option<&[u32]>) -> Result<Source> {
    let out = &k.out_shape;
    let n = out.numel();
    let (shape, _) = &k.inputs[i];
    let bad = |why: String| {
        Error::Internal(format!(
            "input {i} ({shape}) of elementwise {}: {why}",
            k.expr.describe()
        ))
    };
    let view = k.view(i);
    let Some(data) = data else {
        return Ok(Source::Entry);
    };
    // A view's shape only marks its broadcast axes (size 1), as in the reference: fusion
    // can record the viewed buffer's shape there (a transpose read through a cast), and
    // the bounds check below guards every read.
    let broadcasts = shape.rank() <= out.rank()
        && (view.is_some()
            || shape
                .dims()
                .iter()
                .rev()
                .zip(out.dims().iter().rev())
                .all(|(&d, &o)| d == 1 || d == o));
    if !broadcasts {
        return Err(bad(format!("does not broadcast to {out}")));
    }
    if view.is_some_and(|v| v.strides.len() != shape.rank()) {
        return Err(bad("its view's rank differs from its shape's".into()));
    }
    let (offset, strides): (i64, Vec<i64>) = match view {
        Some(v) => (v.offset, v.strides_over(shape, out)),
        None if shape == out => {
            if data.len() < n {
                return Err(bad(format!("{} words for {n} elements", data.len())));
            }
            return Ok(Source::Direct(0));
        }
        None => (
            0,
            shape
                .broadcast_strides(out)
                .into_iter()
                .map(|s| s as i64)
                .collect(),
        ),
    };
    let (dims, st) = crate::shape::coalesce(out.dims(), &strides);
    // The lowest and highest words read (i128: no overflow whatever the strides).
    let (mut lo, mut hi) = (offset as i128, offset as i128);
    for (&d, &s) in dims.iter().zip(&st) {
        let reach = (d as i128 - 1) * s as i128;
        lo += reach.min(0);
        hi += reach.max(0);
    }
    if lo < 0 || hi >= data.len() as i128 {
        return Err(bad(format!(
            "reads words {lo}..={hi} of a buffer of {}",
            data.len()
        )));
    }
    let offset_words = offset as usize;
    Ok(if st.iter().all(|&s| s == 0) {
        Source::Splat(data[offset_words])
    } else if st == [1] {
        Source::Direct(offset_words)
    } else {
        Source::Walk(Walk {
            input: i,
            offset,
            dims,
            strides: st,
        })
    })
}

/// Input words for output words `start..start + dst.len()` along `w`: the multi-index is
/// found once per chunk, then each run along the innermost axis is a copy, a fill or a
/// strided loop, and the index carries into outer axes between runs.
fn gather(w: &Walk, data: &[u32], start: usize, dst: &mut [u32], index: &mut [usize]) {
    let r = w.dims.len();
    let idx = &mut index[..r];
    let (mut rem, mut at) = (start, w.offset);
    for k in (0..r).rev() {
        idx[k] = rem % w.dims[k];
        rem /= w.dims[k];
        at += idx[k] as i64 * w.strides[k];
    }
    let (inner, s) = (w.dims[r - 1], w.strides[r - 1]);
    let mut p = 0;
    while p < dst.len() {
        let run = (inner - idx[r - 1]).min(dst.len() - p);
        let d = &mut dst[p..p + run];
        let a = at as usize;
        match s {
            1 => d.copy_from_slice(&data[a..a + run]),
            0 => d.fill(data[a]),
            _ => {
                for (j, o) in d.iter_mut().enumerate() {
                    *o = data[(at + j as i64 * s) as usize];
                }
            }
        }
        p += run;
        idx[r - 1] += run;
        at += run as i64 * s;
        let mut k = r - 1;
        while k > 0 && idx[k] == w.dims[k] {
            at -= w.dims[k] as i64 * w.strides[k];
            idx[k] = 0;
            k -= 1;
            idx[k] += 1;
            at += w.strides[k];
        }
    }
}

/// An operand in one chunk.
#[derive(Clone, Copy)]
enum Src<'a> {
    Slice(&'a [u32]),
    Splat(u32),
}

fn fb(w: u32) -> f32 {
    f32::from_bits(w)
}

#[inline(always)]
fn map(a: Src<'_>, o: &mut [u32], f: impl Fn(u32) -> u32) {
    match a {
        Src::Slice(a) => {
            let a = &a[..o.len()];
            for (o, &x) in o.iter_mut().zip(a) {
                *o = f(x);
            }
        }
        Src::Splat(x) => o.fill(f(x)),
    }
}

#[inline(always)]
fn map_f(a: Src<'_>, o: &mut [u32], f: impl Fn(f32) -> f32) {
    map(a, o, |x| f(fb(x)).to_bits())
}

#[inline(always)]
fn zip(a: Src<'_>, b: Src<'_>, o: &mut [u32], f: impl Fn(u32, u32) -> u32) {
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => {
            let (a, b) = (&a[..o.len()], &b[..o.len()]);
            for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Src::Slice(_), Src::Splat(y)) => map(a, o, |x| f(x, y)),
        (Src::Splat(x), Src::Slice(_)) => map(b, o, |y| f(x, y)),
        (Src::Splat(x), Src::Splat(y)) => o.fill(f(x, y)),
    }
}

#[inline(always)]
fn zip_f(a: Src<'_>, b: Src<'_>, o: &mut [u32], f: impl Fn(f32, f32) -> f32) {
    zip(a, b, o, |x, y| f(fb(x), fb(y)).to_bits())
}

/// The comparisons, over `t`, the operand type the words are reinterpreted as.
macro_rules! compare {
    ($op:expr, $a:expr, $b:expr, $o:expr, $t:expr) => {{
        let t = $t;
        match $op {
            BinaryOp::Equal => zip($a, $b, $o, |x, y| (t(x) == t(y)) as u32),
            BinaryOp::NotEqual => zip($a, $b, $o, |x, y| (t(x) != t(y)) as u32),
            BinaryOp::Less => zip($a, $b, $o, |x, y| (t(x) < t(y)) as u32),
            BinaryOp::LessEqual => zip($a, $b, $o, |x, y| (t(x) <= t(y)) as u32),
            BinaryOp::Greater => zip($a, $b, $o, |x, y| (t(x) > t(y)) as u32),
            _ => zip($a, $b, $o, |x, y| (t(x) >= t(y)) as u32),
        }
    }};
}

#[inline(always)]
fn unary(op: UnaryOp, d: DType, a: Src<'_>, o: &mut [u32]) {
    use UnaryOp as U;
    match (d, op) {
        (DType::F32, U::Neg) => map_f(a, o, |x| -x),
        (DType::F32, U::Abs) => map_f(a, o, f32::abs),
        (DType::F32, U::Exp) => map_f(a, o, vmath::exp),
        (DType::F32, U::Sigmoid) => map_f(a, o, vmath::sigmoid),
        (DType::F32, U::Tanh) => map_f(a, o, vmath::tanh),
        (DType::F32, U::Log) => map_f(a, o, vmath::log),
        (DType::F32, U::Erf) => map_f(a, o, erf),
        (DType::F32, U::Sqrt) => map_f(a, o, f32::sqrt),
        (DType::F32, U::Relu) => map(a, o, relu_f32),
        (DType::F32, U::Floor) => map_f(a, o, f32::floor),
        (DType::F32, U::Ceil) => map_f(a, o, f32::ceil),
        (DType::F32, U::Round) => map_f(a, o, f32::round_ties_even),
        (DType::F32, U::Sign) => map_f(a, o, sign_f32),
        (DType::F32, U::Reciprocal) => map_f(a, o, |x| 1.0 / x),
        (DType::F32, U::Rsqrt) => map_f(a, o, |x| 1.0 / x.sqrt()),
        (DType::F32, U::IsNan) => map(a, o, |x| fb(x).is_nan() as u32),
        (DType::F32, U::IsInf) => map(a, o, |x| fb(x).is_infinite() as u32),
        (DType::F32, U::IsFinite) => map(a, o, |x| fb(x).is_finite() as u32),
        (DType::Bool, U::LogicalNot) => map(a, o, |x| (x == 0) as u32),
        (DType::I32, U::Neg) => map(a, o, |x| (x as i32).wrapping_neg() as u32),
        (DType::I32, U::Abs) => map(a, o, |x| (x as i32).wrapping_abs() as u32),
        (DType::I32, U::Relu) => map(a, o, |x| (x as i32).max(0) as u32),
        _ => map(a, o, |x| unary_cpu(op, d, x)),
    }
}

#[inline(always)]
fn binary(op: BinaryOp, d: DType, a: Src<'_>, b: Src<'_>, o: &mut [u32]) {
    use BinaryOp as B;
    match (d, op) {
        (DType::F32, B::Add) => zip_f(a, b, o, |x, y| x + y),
        (DType::F32, B::Sub) => zip_f(a, b, o, |x, y| x - y),
        (DType::F32, B::Mul) => zip_f(a, b, o, |x, y| x * y),
        (DType::F32, B::Div) => zip_f(a, b, o, |x, y| x / y),
        (DType::F32, B::Maximum) => zip_f(a, b, o, maximum_f32),
        (DType::F32, B::Minimum) => zip_f(a, b, o, minimum_f32),
        (DType::F32, op) if op.is_comparison() => compare!(op, a, b, o, fb),
        (DType::I32, B::Add) => zip(a, b, o, u32::wrapping_add),
        (DType::I32, B::Sub) => zip(a, b, o, u32::wrapping_sub),
        (DType::I32, B::Mul) => zip(a, b, o, u32::wrapping_mul),
        (DType::I32, B::Maximum) => zip(a, b, o, |x, y| (x as i32).max(y as i32) as u32),
        (DType::I32, B::Minimum) => zip(a, b, o, |x, y| (x as i32).min(y as i32) as u32),
        (DType::I32, op) if op.is_comparison() => compare!(op, a, b, o, |x: u32| x as i32),
        (DType::U32 | DType::Bool, B::Add) => zip(a, b, o, u32::wrapping_add),
        (DType::U32 | DType::Bool, B::Sub) => zip(a, b, o, u32::wrapping_sub),
        (DType::U32 | DType::Bool, B::Mul) => zip(a, b, o, u32::wrapping_mul),
        (DType::U32 | DType::Bool, B::Maximum) => zip(a, b, o, u32::max),
        (DType::U32 | DType::Bool, B::Minimum) => zip(a, b, o, u32::min),
        (DType::U32 | DType::Bool, op) if op.is_comparison() => compare!(op, a, b, o, |x: u32| x),
        (DType::U32 | DType::Bool, B::LogicalAnd) => zip(a, b, o, |x, y| (x != 0 && y != 0) as u32),
        (DType::U32 | DType::Bool, B::LogicalOr) => zip(a, b, o, |x, y| (x != 0 || y != 0) as u32),
        (DType::U32 | DType::Bool, B::LogicalXor) => {
            zip(a, b, o, |x, y| ((x != 0) != (y != 0)) as u32)
        }
        _ => zip(a, b, o, |x, y| binary_cpu(op, d, x, y)),
    }
}

#[inline(always)]
fn cast(from: DType, to: DType, a: Src<'_>, o: &mut [u32]) {
    match (from, to) {
        (DType::F32, DType::I32) => map(a, o, |x| vmath::f32_to_i32(fb(x)) as u32),
        (DType::F32, DType::U32) => map(a, o, |x| vmath::f32_to_u32(fb(x))),
        (DType::F32, DType::Bool) => map(a, o, |x| (fb(x) != 0.0) as u32),
        (DType::I32, DType::F32) => map(a, o, |x| (x as i32 as f32).to_bits()),
        (DType::U32, DType::F32) => map(a, o, |x| (x as f32).to_bits()),
        (DType::Bool, DType::F32) => map(a, o, |x| if x != 0 { 1.0f32 } else { 0.0 }.to_bits()),
        _ => map(a, o, |x| cast_cpu(from, to, x)),
    }
}

#[inline(always)]
fn select(c: Src<'_>, a: Src<'_>, b: Src<'_>, o: &mut [u32]) {
    let Src::Slice(c) = c else {
        // A constant condition is resolved when the program is built.
        let pick = if matches!(c, Src::Splat(0)) { b } else { a };
        return map(pick, o, |x| x);
    };
    let c = &c[..o.len()];
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => {
            let (a, b) = (&a[..o.len()], &b[..o.len()]);
            for (((o, &c), &x), &y) in o.iter_mut().zip(c).zip(a).zip(b) {
                *o = if c != 0 { x } else { y };
            }
        }
        (Src::Slice(a), Src::Splat(y)) => {
            zip(
                Src::Slice(c),
                Src::Slice(a),
                o,
                |c, x| {
                    if c != 0 {
                        x
                    } else {
                        y
                    }
                },
            )
        }
        (Src::Splat(x), Src::Slice(b)) => {
            zip(
                Src::Slice(c),
                Src::Slice(b),
                o,
                |c, y| {
                    if c != 0 {
                        x
                    } else {
                        y
                    }
                },
            )
        }
        (Src::Splat(x), Src::Splat(y)) => map(Src::Slice(c), o, |c| if c != 0 { x } else { y }),
    }
}
