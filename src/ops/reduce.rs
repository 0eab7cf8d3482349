//! Reductions over a set of axes (keepdims or not): sum, mean, max, min, prod, all, any, and
//! argmax/argmin (the index of the first extreme in row-major order of the reduced axes).
//! var, std and logsumexp are composites in `graph/build_nn.rs`.

use crate::dtype::{f16_to_f32_word, f32_to_f16_word};
use crate::ops::elementwise::binary_cpu;
use crate::ops::family::{Arity, EmptyInput, Family, KernelDef, LowerCx, Lowered};
use crate::ops::wgsl::{self, Writer};
use crate::ops::{BinaryOp, ElementwiseKernel, Epilogue, Expr, Kernel};
use crate::{DType, Shape};
use std::borrow::Cow;

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod file;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    /// Logical and over bool input.
    All,
    /// Logical or over bool input.
    Any,
    /// Row-major index (i32) of the first maximum among the reduced elements; a NaN counts as
    /// the maximum, so the first NaN's index is returned (NumPy's rule).
    ArgMax,
    /// Like `ArgMax` for the minimum; the first NaN wins as well.
    ArgMin,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 9] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
        ReduceOp::All,
        ReduceOp::Any,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }

    /// Whether the op returns an index rather than a folded value.
    pub fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }

    /// The output dtype for an input of dtype `d`.
    pub fn out_dtype(self, d: DType) -> DType {
        match self {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I32,
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            _ => d,
        }
    }
}

/// Shape rule: `axes` (possibly negative, possibly `None` for all) against `input`.
/// Returns the sorted, de-duplicated axes and the output shape.
pub fn reduce_shape(
    input: &Shape,
    axes: Option<&[isize]>,
    keepdims: bool,
) -> Result<(Vec<usize>, Shape), String> {
    let mut resolved = Vec::new();
    match axes {
        None => resolved.extend(0..input.rank()),
        Some(list) => {
            for &a in list {
                let ax = input.axis(a).ok_or_else(|| {
                    format!(
                        "axis {a} is out of range for shape {input} (rank {})",
                        input.rank()
                    )
                })?;
                if resolved.contains(&ax) {
                    return Err(format!("axis {a} is repeated in {list:?}"));
                }
                resolved.push(ax);
            }
        }
    }
    resolved.sort_unstable();
    let dims = input
        .dims()
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (resolved.contains(&i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect::<Vec<_>>();
    Ok((resolved, Shape(dims)))
}

/// NumPy's rule for empty reductions: max, min, argmax and argmin have no identity, so
/// reducing a zero-size axis into a non-empty result is an error naming the axis.
pub fn check_empty(op: ReduceOp, input: &Shape, axes: &[usize], out: &Shape) -> Result<(), String> {
    let empty = axes.iter().find(|&&a| input.dims()[a] == 0);
    match empty {
        Some(a)
            if out.numel() > 0
                && matches!(
                    op,
                    ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
                ) =>
        {
            Err(format!(
                "axis {a} of shape {input} has size zero: {} of an empty sequence has no value",
                op.name()
            ))
        }
        _ => Ok(()),
    }
}

/// Elementwise work fused in front of a reduction (set by fusion): the reduced values are
/// `expr` over `inputs`, each broadcast to the reduction's input shape, computed as they are
/// loaded, so they never reach memory (`sum(x * x)`, softmax's `sum(exp(x - max))`).
#[derive(Debug, Clone, PartialEq)]
pub struct Prologue {
    pub expr: Expr,
    pub inputs: Vec<(Shape, DType)>,
}

/// A reduction of one input over `axes` (sorted, unique).
#[derive(Debug, Clone, PartialEq)]
pub struct ReduceKernel {
    pub op: ReduceOp,
    pub in_shape: Shape,
    pub dtype: DType,
    pub axes: Vec<usize>,
    pub out_shape: Shape,
    /// Elementwise work applied to each result before it is stored (set by fusion); its
    /// extra inputs have the output's shape or one element.
    pub epilogue: Option<Epilogue>,
    /// Elementwise work that produces the reduced values (set by fusion). Its inputs take
    /// the reduced tensor's place among the kernel's inputs.
    pub prologue: Option<Box<Prologue>>,
    /// Which part of a split reduction this kernel computes (set by lowering, see
    /// [`ReduceKernel::passes`]).
    pub pass: Pass,
}

/// Long reductions run as several kernels, so that no invocation loops over more than a few
/// thousand elements. Besides spreading the work over many workgroups, this is what keeps
/// results right on Mesa's llvmpipe/lavapipe: it ends every loop of an invocation after
/// 65,535 iterations in total (gallivm's loop limiter), silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Pass {
    /// The whole reduction in one kernel.
    #[default]
    Whole,
    /// Folds the reduced elements (in row-major order of the reduced axes) in `chunk`-long
    /// pieces, the last one taking the remainder: the output is the kept dims followed by
    /// one axis of `max(1, count / chunk)` partial results. `Mean` folds as `Sum`; an arg op
    /// returns each piece's winning index among all reduced elements.
    Partial { chunk: usize },
    /// `Mean` over partial sums that cover `count` elements.
    MeanOfPartials { count: usize },
    /// argmax/argmin over the winners of `chunks` pieces: reads the original sources and,
    /// in the binding after them, the partial pass's indices.
    ArgOfPartials { chunks: usize },
}

impl ReduceKernel {
    fn split(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>) {
        let strides = self.in_shape.strides();
        let (mut kd, mut ks, mut rd, mut rs) = (vec![], vec![], vec![], vec![]);
        for (i, &d) in self.in_shape.dims().iter().enumerate() {
            if self.axes.contains(&i) {
                rd.push(d);
                rs.push(strides[i]);
            } else {
                kd.push(d);
                ks.push(strides[i]);
            }
        }
        (kd, ks, rd, rs)
    }

    /// Number of input elements folded into each output element.
    pub fn reduced_count(&self) -> usize {
        self.axes.iter().map(|&a| self.in_shape.dims()[a]).product()
    }

    /// Kernel inputs that feed the reduced values: the prologue's inputs, or the tensor.
    pub fn sources(&self) -> usize {
        self.prologue.as_ref().map_or(1, |p| p.inputs.len())
    }

    /// `inputs`: the reduced tensor (or the prologue's inputs), then the epilogue's extras.
    pub fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let n = self.sources();
        let src: Cow<[u32]> = match &self.prologue {
            None => Cow::Borrowed(inputs[0]),
            Some(p) => Cow::Owned(
                ElementwiseKernel {
                    expr: p.expr.clone(),
                    inputs: p.inputs.clone(),
                    out_shape: self.in_shape.clone(),
                    out_dtype: self.dtype,
                    views: Vec::new(),
                }
                .run_cpu(&inputs[..n]),
            ),
        };
        let out = if self.dtype == DType::F16 {
            // f16 accumulates in f32 (as the WGSL kernel does) and rounds once at the end.
            let wide = ReduceKernel {
                dtype: DType::F32,
                epilogue: None,
                prologue: None,
                ..self.clone()
            };
            let input: Vec<u32> = src.iter().map(|&w| f16_to_f32_word(w)).collect();
            let out = wide.reduce_cpu(&input, inputs.get(n).copied());
            if self.op.out_dtype(DType::F16) == DType::F16 {
                out.into_iter().map(f32_to_f16_word).collect()
            } else {
                out
            }
        } else {
            self.reduce_cpu(&src, inputs.get(n).copied())
        };
        match &self.epilogue {
            None => out,
            Some(e) => e.run_cpu(&out, &inputs[n..], &self.out_shape, self.dtype),
        }
    }

    fn reduce_cpu(&self, input: &[u32], partials: Option<&[u32]>) -> Vec<u32> {
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
                        self.fold_row_cpu(strategy, &input[o * r + lo..o * r + hi])
                    }
                    None => {
                        let base = offset(o, &kd, &ks);
                        let vals: Vec<u32> = offsets[lo..hi]
                            .iter()
                            .map(|off| input[base + off])
                            .collect();
                        self.fold_cpu(&vals, lo)
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
    fn fold_cpu(&self, vals: &[u32], lo: usize) -> u32 {
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

    /// WGSL (templates `shaders/reduce.wgsl`, `shaders/arg_reduce.wgsl`): one invocation per
    /// output element looping over the reduced elements in row-major order.
    pub fn wgsl(&self) -> String {
        if let Some((strategy, r)) = self.fast_path() {
            return self.wgsl_rows(strategy, r);
        }
        let (kd, ks, rd, rs) = self.split();
        let count = self.reduced_count();
        let (chunk, chunks) = self.chunking();
        let d = self.dtype;
        let out_d = self.op.out_dtype(d);
        let mut bindings = Writer::new();
        self.bind_sources(&mut bindings, false);
        let (func, epi_args) = self.epilogue_parts();
        let func = format!("{}\n{func}", self.prologue_functions(false));
        let n_src = self.sources();
        let mut next = n_src;
        if let Pass::ArgOfPartials { .. } = self.pass {
            wgsl::storage_binding(&mut bindings, next, "parts", DType::I32);
            next += 1;
        }
        for (j, (_, xd)) in self.extra().iter().enumerate() {
            let b = next + j;
            wgsl::storage_binding(&mut bindings, b, &format!("in{b}"), *xd);
        }
        wgsl::storage_binding(&mut bindings, next + self.extra().len(), "out", out_d);
        let mut base = Writer::new();
        base.indent(1);
        wgsl::strided_index(&mut base, "base", "o", &kd, &ks);
        // `let {name} = <offset of reduced element {linear}>;` at `level`.
        let offset = |w: &mut Writer, name: &str, linear: &str, level: usize| {
            w.indent(level);
            wgsl::strided_index(w, name, linear, &rd, &rs);
        };
        let mut fold = Writer::new();
        let common = [
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{}u", self.out_shape.numel())),
            ("CHUNKS", chunks.to_string()),
            ("CHUNK", chunk.to_string()),
            ("R", count.to_string()),
            ("BASE", base.finish()),
        ];
        if self.op.is_arg() {
            let cmp = if self.op == ReduceOp::ArgMax {
                ">"
            } else {
                "<"
            };
            let better = if d.is_float() {
                format!("!wgf_isnan(best) && (wgf_isnan(v) || v {cmp} best)")
            } else {
                format!("v {cmp} best")
            };
            let f = &mut fold;
            if let Pass::ArgOfPartials { chunks: k } = self.pass {
                f.indent(1);
                f.line(&format!("var at = u32(parts[o * {k}u]);"));
                offset(f, "off0", "at", 1);
                f.line(&format!("var best = {};", self.src_load("base + off0")));
                f.line(&format!("for (var k = 1u; k < {k}u; k = k + 1u) {{"));
                f.line(&format!("    let r = u32(parts[o * {k}u + k]);"));
            } else {
                offset(f, "off0", "lo", 1);
                f.line(&format!("var best = {};", self.src_load("base + off0")));
                f.line("var at = lo;");
                f.line("for (var r = lo + 1u; r < hi; r = r + 1u) {");
            }
            offset(f, "off", "r", 2);
            f.line(&format!("let v = {};", self.src_load("base + off")));
            f.line(&format!("if ({better}) {{"));
            f.line("    best = v;");
            f.line("    at = r;");
            f.line("}");
            f.indent(1);
            f.line("}");
            let mut values = vec![("BINDINGS", bindings.finish()), ("FUNC", func)];
            values.extend(common);
            values.push(("FOLD", fold.finish()));
            return wgsl::fill_template(include_str!("../../shaders/arg_reduce.wgsl"), &values);
        }
        let combine = match (self.op, d.is_float()) {
            (ReduceOp::Sum | ReduceOp::Mean, _) => "acc + v",
            (ReduceOp::Prod, _) => "acc * v",
            // NaN is true; the bit test keeps fast-math drivers from folding `NaN != 0` to false.
            (ReduceOp::All, true) => "acc && (v != 0.0 || wgf_isnan(v))",
            (ReduceOp::Any, true) => "acc || (v != 0.0 || wgf_isnan(v))",
            (ReduceOp::All, false) => "acc && (v != OTHER_ZERO)",
            (ReduceOp::Any, false) => "acc || (v != OTHER_ZERO)",
            (ReduceOp::Max, true) => "wgf_max(acc, v)",
            (ReduceOp::Min, true) => "wgf_min(acc, v)",
            (ReduceOp::Max, false) => "max(acc, v)",
            _ => "min(acc, v)",
        }
        .replace("OTHER_ZERO", &zero_of(d));
        let f = &mut fold;
        f.indent(1);
        if self.is_sum() {
            let ident = sum_identity_wgsl(d);
            f.line(&format!("var acc = {ident};"));
            f.line(&format!(
                "for (var b = lo; b < hi; b = b + {SUM_BLOCK}u) {{"
            ));
            f.line(&format!("    var s = {ident};"));
            f.line(&format!("    let e = min(b + {SUM_BLOCK}u, hi);"));
            f.line("    for (var r = b; r < e; r = r + 1u) {");
            offset(f, "off", "r", 3);
            f.line(&format!("s = s + {};", self.src_load("base + off")));
            f.indent(1);
            f.line("    }");
            f.line("    acc = acc + s;");
            f.line("}");
        } else {
            let (init, start) = match self.op {
                ReduceOp::Prod => (wgsl::one(d), "lo"),
                ReduceOp::All => ("true".to_string(), "lo"),
                ReduceOp::Any => ("false".to_string(), "lo"),
                _ => {
                    offset(f, "off0", "lo", 1);
                    (self.src_load("base + off0"), "lo + 1u")
                }
            };
            f.line(&format!("var acc = {init};"));
            f.line(&format!("for (var r = {start}; r < hi; r = r + 1u) {{"));
            offset(f, "off", "r", 2);
            f.line(&format!("let v = {};", self.src_load("base + off")));
            f.line(&format!("acc = {combine};"));
            f.indent(1);
            f.line("}");
        }
        let finish = self.finish_wgsl();
        let mut values = vec![("BINDINGS", bindings.finish()), ("FUNC", func)];
        values.extend(common);
        values.extend([
            ("FOLD", fold.finish()),
            (
                "STORE",
                wgsl::store("out", "oc", &self.apply_epilogue(&finish, &epi_args), out_d),
            ),
        ]);
        wgsl::fill_template(include_str!("../../shaders/reduce.wgsl"), &values)
    }

    /// `acc` turned into the result: divided by the count for `Mean`.
    fn finish_wgsl(&self) -> String {
        let d = self.dtype;
        let n = self.mean_count();
        match (self.op, d.compute()) {
            (ReduceOp::Mean, DType::F32) => {
                format!("acc / {}", wgsl::literal(DType::F32, (n as f32).to_bits()))
            }
            (ReduceOp::Mean, DType::I32) => {
                format!("wgf_div_i32(acc, {})", wgsl::literal(d, n as u32))
            }
            (ReduceOp::Mean, _) => format!("wgf_div_u32(acc, {})", wgsl::literal(d, n as u32)),
            _ => "acc".to_string(),
        }
    }
}

/// The row-major offset of element `linear` of `dims` laid out with `strides`.
fn offset(linear: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut rem = linear;
    let mut off = 0;
    for k in (0..dims.len()).rev() {
        off += (rem % dims[k]) * strides[k];
        rem /= dims[k];
    }
    off
}

/// NumPy truthiness of one element: non-zero, with NaN true and -0.0 false.
fn truthy(d: DType, w: u32) -> bool {
    match d {
        DType::F32 => f32::from_bits(w) != 0.0,
        _ => w != 0,
    }
}

/// The zero literal compared against in `all`/`any` (bools load as `bool`).
fn zero_of(d: DType) -> String {
    match d {
        DType::Bool => "false".into(),
        _ => wgsl::literal(d, 0),
    }
}

fn one_word(d: DType) -> u32 {
    match d {
        DType::F32 => 1.0f32.to_bits(),
        _ => 1,
    }
}

/// How a reduction walks its input. The CPU kernel follows the same order as the WGSL one,
/// so sums agree bit for bit between `cpu:0` and every GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceStrategy {
    /// One invocation per output, looping over the reduced axes in row-major order.
    Loop,
    /// Contiguous rows whose length divides by 4: one invocation per row with vec4 loads into
    /// four lane accumulators, folded as `(l0 ∘ l1) ∘ (l2 ∘ l3)`. Many short rows.
    RowsVec4,
    /// Few long contiguous rows: a workgroup of 256 per row; thread `t` folds elements `t`,
    /// `t + 256`, … (coalesced), then a tree in workgroup memory.
    Tree,
}

/// Rows at least this long, when there are at most [`TREE_MAX_ROWS`] of them, use a tree.
const TREE_MIN_LEN: usize = 4096;
const TREE_MAX_ROWS: usize = 64;
const TREE_WG: usize = 256;
/// Elements a [`Pass::Partial`] chunk holds, per strategy: every invocation loops at most
/// twice this (over vec4s for `RowsVec4`, per thread for `Tree`), far below llvmpipe's
/// 65,535-iteration limit, and sums stay accurate (each thread adds at most 64 terms in a
/// tree, or blocks of [`SUM_BLOCK`]).
const LOOP_CHUNK: usize = 4096;
const VEC4_CHUNK: usize = 4 * 1024;
const TREE_CHUNK: usize = TREE_WG * 64;
/// Arg reductions run at most two passes, so the second reads at most this many winners.
const MAX_ARG_CHUNKS: usize = 16384;
/// Sums add this many terms into a block sum before adding the block to the total.
const SUM_BLOCK: usize = 64;

/// Chunk `c`'s half-open range of `count` reduced elements: `chunk` long, the last one
/// `count - (chunks - 1) * chunk` long (so at least `chunk`).
fn chunk_range(c: usize, chunk: usize, chunks: usize, count: usize) -> (usize, usize) {
    let lo = c * chunk;
    (lo, if c + 1 == chunks { count } else { lo + chunk })
}

/// The additive identity that keeps a sum of `-0.0`s at `-0.0` (as NumPy's is).
fn sum_identity(d: DType) -> u32 {
    match d {
        DType::F32 | DType::F16 => 0x8000_0000,
        _ => 0,
    }
}

impl ReduceKernel {
    /// The strategy this kernel uses (chosen by shape; the same on every device).
    pub fn strategy(&self) -> ReduceStrategy {
        self.fast_path().map_or(ReduceStrategy::Loop, |(s, _)| s)
    }

    /// Invocations of the WGSL kernel.
    pub fn invocations(&self) -> u64 {
        let n = self.out_shape.numel() as u64;
        match self.strategy() {
            ReduceStrategy::Tree => n * TREE_WG as u64,
            _ => n,
        }
    }

    /// `(chunk length, chunks)` of the reduced elements each output folds.
    fn chunking(&self) -> (usize, usize) {
        let r = self.reduced_count();
        match self.pass {
            Pass::Partial { chunk } => (chunk, (r / chunk.max(1)).max(1)),
            _ => (r, 1),
        }
    }

    /// Number of kept (not reduced) positions.
    fn kept(&self) -> usize {
        self.in_shape.numel() / self.reduced_count().max(1)
    }

    /// A vectorised or tree strategy and the row length, when the reduced axes are the
    /// trailing ones (each output folds one contiguous row) and the op folds values.
    fn fast_path(&self) -> Option<(ReduceStrategy, usize)> {
        let rank = self.in_shape.rank();
        let trailing = self
            .axes
            .iter()
            .enumerate()
            .all(|(i, &a)| a == rank - self.axes.len() + i);
        let folds = matches!(
            self.op,
            ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min
        );
        if self.axes.is_empty() || !trailing || !folds || !self.dtype.is_numeric() {
            return None;
        }
        let r = self.reduced_count();
        let rows = self.kept();
        if r >= TREE_MIN_LEN && rows <= TREE_MAX_ROWS {
            Some((ReduceStrategy::Tree, r))
        } else if r >= 8 && r.is_multiple_of(4) {
            Some((ReduceStrategy::RowsVec4, r))
        } else {
            None
        }
    }

    /// The kernels this reduction runs as, in order: itself when every invocation's loop is
    /// short, else partial passes over chunks and a final pass (see [`Pass`]). Each fold pass
    /// reads the previous one's output; an [`Pass::ArgOfPartials`] pass reads the original
    /// sources and then the partial indices.
    pub fn passes(self) -> Vec<ReduceKernel> {
        let r = self.reduced_count();
        if self.op.is_arg() {
            let chunk = LOOP_CHUNK.max(r.div_ceil(MAX_ARG_CHUNKS));
            if r < 2 * chunk || self.pass != Pass::Whole {
                return vec![self];
            }
            let chunks = r / chunk;
            let partial = ReduceKernel {
                pass: Pass::Partial { chunk },
                out_shape: self.partial_shape(chunks),
                ..self.clone()
            };
            let last = ReduceKernel {
                pass: Pass::ArgOfPartials { chunks },
                ..self
            };
            return vec![partial, last];
        }
        let chunk = match self.strategy() {
            ReduceStrategy::Tree => TREE_CHUNK,
            ReduceStrategy::RowsVec4 => VEC4_CHUNK,
            ReduceStrategy::Loop => LOOP_CHUNK,
        };
        if r < 2 * chunk || matches!(self.pass, Pass::Partial { .. }) {
            return vec![self];
        }
        let chunks = r / chunk;
        let mean_count = match self.pass {
            Pass::MeanOfPartials { count } => count,
            _ => r,
        };
        let partial = ReduceKernel {
            op: if self.op == ReduceOp::Mean {
                ReduceOp::Sum
            } else {
                self.op
            },
            pass: Pass::Partial { chunk },
            out_shape: self.partial_shape(chunks),
            epilogue: None,
            ..self.clone()
        };
        let in_shape = partial.out_shape.clone();
        let rest = ReduceKernel {
            axes: vec![in_shape.rank() - 1],
            in_shape,
            prologue: None,
            pass: if self.op == ReduceOp::Mean {
                Pass::MeanOfPartials { count: mean_count }
            } else {
                Pass::Whole
            },
            ..self
        };
        let mut all = vec![partial];
        all.extend(rest.passes());
        all
    }

    /// The kept dims followed by `chunks`.
    fn partial_shape(&self, chunks: usize) -> Shape {
        let mut dims: Vec<usize> = (0..self.in_shape.rank())
            .filter(|a| !self.axes.contains(a))
            .map(|a| self.in_shape.dims()[a])
            .collect();
        dims.push(chunks);
        Shape(dims)
    }

    /// How many elements a `Mean` divides by.
    fn mean_count(&self) -> usize {
        match self.pass {
            Pass::MeanOfPartials { count } => count,
            _ => self.reduced_count(),
        }
    }

    fn combine_op(&self) -> BinaryOp {
        match self.op {
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Maximum,
            ReduceOp::Min => BinaryOp::Minimum,
            _ => BinaryOp::Add,
        }
    }

    fn finish_cpu(&self, acc: u32) -> u32 {
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

    fn is_sum(&self) -> bool {
        matches!(self.op, ReduceOp::Sum | ReduceOp::Mean)
    }

    fn fold_row_cpu(&self, strategy: ReduceStrategy, row: &[u32]) -> u32 {
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

    /// WGSL of the row strategies.
    fn wgsl_rows(&self, strategy: ReduceStrategy, r: usize) -> String {
        let d = self.dtype;
        let t = d.wgsl();
        let n = self.out_shape.numel();
        let (chunk, chunks) = self.chunking();
        let comb = |a: &str, b: &str| -> String {
            match (self.combine_op(), d.is_float()) {
                (BinaryOp::Add, _) => format!("({a} + {b})"),
                (BinaryOp::Mul, _) => format!("({a} * {b})"),
                (BinaryOp::Maximum, true) => format!("wgf_max({a}, {b})"),
                (BinaryOp::Minimum, true) => format!("wgf_min({a}, {b})"),
                (BinaryOp::Maximum, false) => format!("max({a}, {b})"),
                _ => format!("min({a}, {b})"),
            }
        };
        let mut w = Writer::new();
        let vec = strategy == ReduceStrategy::RowsVec4;
        w.line(&format!(
            "// wgflow reduction ({strategy:?}): {} of rows of {r}, in {chunks} chunk(s) of {chunk}.",
            self.op.name()
        ));
        self.bind_sources(&mut w, vec);
        let n_src = self.sources();
        for (j, (_, xd)) in self.extra().iter().enumerate() {
            let b = n_src + j;
            wgsl::storage_binding(&mut w, b, &format!("in{b}"), *xd);
        }
        wgsl::storage_binding(&mut w, n_src + self.extra().len(), "out", d);
        let (func, epi_args) = self.epilogue_parts();
        let finish = self.apply_epilogue(&self.finish_wgsl(), &epi_args);
        let pro = self.prologue_functions(vec);
        for line in wgsl::PRELUDE.lines().chain(func.lines()).chain(pro.lines()) {
            w.line(line);
        }
        // Output `oc` folds elements [lo, hi) of row `o` (chunk `c`; the last one takes the
        // remainder); `start` is the chunk's first element in the input.
        let range = |w: &mut Writer| {
            w.line(&format!("let o = oc / {chunks}u;"));
            w.line(&format!("let c = oc % {chunks}u;"));
            w.line(&format!("let lo = c * {chunk}u;"));
            w.line(&format!(
                "let hi = select(lo + {chunk}u, {r}u, c + 1u == {chunks}u);"
            ));
            w.line(&format!("let start = o * {r}u + lo;"));
        };
        if vec {
            let lanes = |a: &str, b: &str| -> String {
                match self.combine_op() {
                    BinaryOp::Add | BinaryOp::Mul => comb(a, b),
                    _ => {
                        let l: Vec<String> = ["x", "y", "z", "w"]
                            .iter()
                            .map(|c| comb(&format!("{a}.{c}"), &format!("{b}.{c}")))
                            .collect();
                        format!("vec4<{t}>({})", l.join(", "))
                    }
                }
            };
            w.line(&format!("@compute @workgroup_size({})", wgsl::WORKGROUP));
            w.line("fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
            w.indent(1);
            w.line(&format!(
                "let oc = gid.x + gid.y * nwg.x * {}u;",
                wgsl::WORKGROUP
            ));
            w.line(&format!("if (oc >= {n}u) {{"));
            w.line("    return;");
            w.line("}");
            range(&mut w);
            w.line("let base = start / 4u;");
            w.line("let n4 = (hi - lo) / 4u;");
            if self.is_sum() {
                // Blocks of SUM_BLOCK vec4s are summed, then added to the lanes' totals.
                let ident = format!("vec4<{t}>({})", sum_identity_wgsl(d));
                w.line(&format!("var v4 = {ident};"));
                w.line(&format!(
                    "for (var b = 0u; b < n4; b = b + {SUM_BLOCK}u) {{"
                ));
                w.line(&format!("    var s4 = {ident};"));
                w.line(&format!("    let e = min(b + {SUM_BLOCK}u, n4);"));
                w.line("    for (var j = b; j < e; j = j + 1u) {");
                w.line(&format!(
                    "        s4 = s4 + {};",
                    self.src_load4("base + j")
                ));
                w.line("    }");
                w.line("    v4 = v4 + s4;");
                w.line("}");
            } else {
                w.line(&format!("var v4 = {};", self.src_load4("base")));
                w.line("for (var j = 1u; j < n4; j = j + 1u) {");
                w.line(&format!("    let v = {};", self.src_load4("base + j")));
                w.line(&format!("    v4 = {};", lanes("v4", "v")));
                w.line("}");
            }
            w.line(&format!(
                "let acc = {};",
                comb(&comb("v4.x", "v4.y"), &comb("v4.z", "v4.w"))
            ));
            w.line(&format!("{};", wgsl::store("out", "oc", &finish, d)));
            w.indent(0);
            w.line("}");
            return w.finish();
        }
        w.line(&format!("var<workgroup> part: array<{t}, {TREE_WG}>;"));
        w.line("");
        w.line(&format!("@compute @workgroup_size({TREE_WG})"));
        w.line("fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
        w.indent(1);
        // No early return: every invocation must reach the barriers.
        w.line(&format!("let oc = min(wid.x + wid.y * nwg.x, {}u);", n - 1));
        w.line("let valid = wid.x + wid.y * nwg.x < oc + 1u;");
        w.line("let t = lid.x;");
        range(&mut w);
        w.line(&format!("var p = {};", self.src_load("start + t")));
        w.line(&format!(
            "for (var i = lo + t + {TREE_WG}u; i < hi; i = i + {TREE_WG}u) {{"
        ));
        w.line(&format!(
            "    p = {};",
            comb("p", &self.src_load(&format!("o * {r}u + i")))
        ));
        w.line("}");
        w.line("part[t] = p;");
        w.line("workgroupBarrier();");
        let mut s = TREE_WG / 2;
        while s > 0 {
            w.line(&format!("if (t < {s}u) {{"));
            w.line(&format!(
                "    part[t] = {};",
                comb("part[t]", &format!("part[t + {s}u]"))
            ));
            w.line("}");
            w.line("workgroupBarrier();");
            s /= 2;
        }
        w.line("if (t == 0u && valid) {");
        w.line("    let acc = part[0];");
        w.line(&format!("    {};", wgsl::store("out", "oc", &finish, d)));
        w.line("}");
        w.indent(0);
        w.line("}");
        w.finish()
    }
}

/// [`sum_identity`] as a WGSL expression of the compute type (`-0.0` spelled by its bits,
/// so no compiler can fold it to `+0.0`).
fn sum_identity_wgsl(d: DType) -> String {
    match d.compute() {
        DType::F32 => "bitcast<f32>(0x80000000u)".to_string(),
        other => wgsl::literal(other, 0),
    }
}

impl ReduceKernel {
    /// Bind the source inputs from binding 0: `in0` (as vec4s when `vec`), or the prologue's
    /// inputs, full-shape ones as vec4s when `vec`.
    fn bind_sources(&self, w: &mut Writer, vec: bool) {
        match &self.prologue {
            None => wgsl::storage_binding_vec(w, 0, "in0", self.dtype, vec),
            Some(p) => {
                for (j, (s, d)) in p.inputs.iter().enumerate() {
                    let v = vec && s == &self.in_shape;
                    wgsl::storage_binding_vec(w, j, &format!("in{j}"), *d, v);
                }
            }
        }
    }

    /// The reduced value at linear input index `idx`.
    fn src_load(&self, idx: &str) -> String {
        match self.prologue {
            None => wgsl::load("in0", idx, self.dtype),
            Some(_) => format!("wgf_load({idx})"),
        }
    }

    /// The four reduced values from vec4 index `idx4` (row strategies).
    fn src_load4(&self, idx4: &str) -> String {
        match self.prologue {
            None => wgsl::load_vec4("in0", idx4, self.dtype),
            Some(_) => format!("wgf_load4({idx4})"),
        }
    }

    /// `wgf_pro` (the prologue expression) and `wgf_load`, or `wgf_load4` when `vec`: each
    /// input is read at its broadcast index, full-shape inputs as vec4s in `wgf_load4`.
    fn prologue_functions(&self, vec: bool) -> String {
        let Some(p) = &self.prologue else {
            return String::new();
        };
        let t = self.dtype.wgsl();
        let dtypes: Vec<DType> = p.inputs.iter().map(|(_, d)| *d).collect();
        let mut w = Writer::new();
        w.line(&crate::ops::elementwise::expr_fn_wgsl(
            "wgf_pro", &p.expr, &dtypes, self.dtype,
        ));
        let dims = self.in_shape.dims();
        // Loads of input j at linear index `at` (a broadcast index unless full-shape).
        let scalar = |w: &mut Writer, j: usize, s: &Shape, d: DType, at: &str, name: &str| {
            if s == &self.in_shape {
                w.line(&format!(
                    "let {name} = {};",
                    wgsl::load(&format!("in{j}"), at, d)
                ));
            } else if s.numel() == 1 {
                w.line(&format!(
                    "let {name} = {};",
                    wgsl::load(&format!("in{j}"), "0u", d)
                ));
            } else {
                let strides = s.broadcast_strides(&self.in_shape);
                wgsl::strided_index(w, &format!("{name}_at"), at, dims, &strides);
                let load = wgsl::load(&format!("in{j}"), &format!("{name}_at"), d);
                w.line(&format!("let {name} = {load};"));
            }
        };
        if !vec {
            w.line(&format!("fn wgf_load(i: u32) -> {t} {{"));
            w.indent(1);
            for (j, (s, d)) in p.inputs.iter().enumerate() {
                scalar(&mut w, j, s, *d, "i", &format!("x{j}"));
            }
            let args: Vec<String> = (0..p.inputs.len()).map(|j| format!("x{j}")).collect();
            w.line(&format!("return wgf_pro({});", args.join(", ")));
            w.indent(0);
            w.line("}");
            return w.finish();
        }
        w.line(&format!("fn wgf_load4(i4: u32) -> vec4<{t}> {{"));
        w.indent(1);
        let lanes = ["x", "y", "z", "w"];
        for (j, (s, d)) in p.inputs.iter().enumerate() {
            if s == &self.in_shape {
                let wide = wgsl::load_vec4(&format!("in{j}"), "i4", *d);
                w.line(&format!("let v{j} = {wide};"));
            } else {
                for (l, _) in lanes.iter().enumerate() {
                    scalar(
                        &mut w,
                        j,
                        s,
                        *d,
                        &format!("(i4 * 4u + {l}u)"),
                        &format!("x{j}_{l}"),
                    );
                }
            }
        }
        let per_lane: Vec<String> = lanes
            .iter()
            .enumerate()
            .map(|(l, lane)| {
                let args: Vec<String> = p
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(j, (s, _))| {
                        if s == &self.in_shape {
                            format!("v{j}.{lane}")
                        } else {
                            format!("x{j}_{l}")
                        }
                    })
                    .collect();
                format!("wgf_pro({})", args.join(", "))
            })
            .collect();
        w.line(&format!("return vec4<{t}>({});", per_lane.join(", ")));
        w.indent(0);
        w.line("}");
        w.finish()
    }

    fn extra(&self) -> &[(Shape, DType)] {
        self.epilogue.as_ref().map_or(&[], |e| e.extra.as_slice())
    }

    /// The epilogue function (empty without one) and the loads of its extra inputs for
    /// output `o`: full-shape inputs at `o`, one-element inputs at 0.
    fn epilogue_parts(&self) -> (String, Vec<String>) {
        let Some(e) = &self.epilogue else {
            return (String::new(), Vec::new());
        };
        let loads = e
            .extra
            .iter()
            .enumerate()
            .map(|(j, (s, d))| {
                let idx = if s.numel() == 1 { "0u" } else { "o" };
                wgsl::load(&format!("in{}", self.sources() + j), idx, *d)
            })
            .collect();
        (e.wgsl_function(self.dtype), loads)
    }

    fn apply_epilogue(&self, value: &str, args: &[String]) -> String {
        if self.epilogue.is_none() {
            return value.to_string();
        }
        // The epilogue sees the stored value: an f16 result is rounded first, as on the CPU.
        let value = if self.dtype == DType::F16 {
            format!("wgf_round_f16({value})")
        } else {
            value.to_string()
        };
        let mut all = vec![format!("({value})")];
        all.extend(args.iter().cloned());
        format!("wgf_epi({})", all.join(", "))
    }

    /// Whether elementwise work can be fused after this reduction: it folds values (not an
    /// index or a truth value), so the epilogue sees the reduction's own dtype.
    pub fn takes_epilogue(&self) -> bool {
        self.epilogue.is_none()
            && matches!(
                self.op,
                ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min
            )
    }
}

// ---------------------------------------------------------------- the family

/// A reduction of its input over `axes` (sorted, non-negative); keepdims follows from the
/// node's rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduce {
    pub op: ReduceOp,
    pub axes: Vec<usize>,
}

impl Family for Reduce {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(1)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let whole = ReduceKernel {
            prologue: None,
            epilogue: None,
            op: self.op,
            in_shape: cx.in_shape(0).clone(),
            dtype: cx.in_dtype(0),
            axes: self.axes.clone(),
            out_shape: cx.shape.clone(),
            pass: Pass::Whole,
        };
        let mut passes = whole.passes();
        let last = passes.pop().ok_or_else(|| {
            crate::Error::Internal(format!("reduction '{}' lowered to no kernel", cx.name))
        })?;
        // Partial passes: each reads the previous one's output (arg ops: i32 indices, the
        // node's dtype).
        let mut prev = cx.args[0];
        for p in passes {
            let shape = p.out_shape.clone();
            prev = cx.partial(Kernel::Reduce(p), shape, vec![prev]);
        }
        let inputs = match last.pass {
            Pass::ArgOfPartials { .. } => vec![cx.args[0], prev],
            _ => vec![prev],
        };
        Ok(Lowered::Dispatch {
            kernel: Kernel::Reduce(last),
            inputs,
        })
    }

    fn on_empty_input(&self, dtype: DType) -> EmptyInput {
        let one = match dtype {
            DType::F32 => 1.0f32.to_bits(),
            DType::F16 => 0x3c00,
            _ => 1,
        };
        match self.op {
            ReduceOp::Sum | ReduceOp::Any => EmptyInput::Fill(0),
            ReduceOp::Prod | ReduceOp::All => EmptyInput::Fill(one),
            // NumPy: the mean of nothing is NaN (with a warning); integer means give 0.
            ReduceOp::Mean => EmptyInput::Fill(match dtype {
                DType::F32 => f32::NAN.to_bits(),
                DType::F16 => 0x7e00,
                _ => 0,
            }),
            // Rejected when built: no identity.
            ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin => {
                EmptyInput::Impossible
            }
        }
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(self, g, node, x)
    }
}

impl KernelDef for ReduceKernel {
    fn describe(&self) -> String {
        let of = match &self.prologue {
            None => self.in_shape.to_string(),
            Some(p) => format!("{} {}", p.expr.describe(), self.in_shape),
        };
        let pass = match self.pass {
            Pass::Whole => String::new(),
            Pass::Partial { chunk } => format!(" in chunks of {chunk}"),
            Pass::MeanOfPartials { count } => format!(" of partial sums of {count} elements"),
            Pass::ArgOfPartials { chunks } => format!(" among {chunks} chunk winners"),
        };
        let base = format!("{} over axes {:?} of {of}{pass}", self.op.name(), self.axes);
        match &self.epilogue {
            None => base,
            Some(e) => format!("{base} then {}", e.expr.describe()),
        }
    }

    fn wgsl(&self) -> String {
        ReduceKernel::wgsl(self)
    }

    fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        ReduceKernel::run_cpu(self, inputs)
    }

    fn invocations(&self) -> u64 {
        ReduceKernel::invocations(self)
    }
}
