//! Reductions over a set of axes (keepdims or not): sum, mean, max, min, prod, all, any, and
//! argmax/argmin (the index of the first extreme in row-major order of the reduced axes).
//! var, std and logsumexp are composites in `graph/build_nn.rs`.

use crate::backend::gpu::codegen::{self, Writer};
use crate::dtype::{f16_to_f32_word, f32_to_f16_word};
use crate::ops::elementwise::binary_cpu;
use crate::ops::{BinaryOp, ElementwiseKernel, Epilogue, Expr};
use crate::{DType, Shape};
use std::borrow::Cow;

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
            let out = wide.reduce_cpu(&input);
            if self.op.out_dtype(DType::F16) == DType::F16 {
                out.into_iter().map(f32_to_f16_word).collect()
            } else {
                out
            }
        } else {
            self.reduce_cpu(&src)
        };
        match &self.epilogue {
            None => out,
            Some(e) => e.run_cpu(&out, &inputs[n..], &self.out_shape, self.dtype),
        }
    }

    fn reduce_cpu(&self, input: &[u32]) -> Vec<u32> {
        if let Some((strategy, r)) = self.fast_path() {
            return (0..self.out_shape.numel())
                .map(|o| self.fold_row_cpu(strategy, &input[o * r..(o + 1) * r]))
                .collect();
        }
        let (kd, ks, rd, rs) = self.split();
        let outer: usize = kd.iter().product();
        let count = self.reduced_count();
        let offsets: Vec<usize> = (0..count).map(|r| offset(r, &rd, &rs)).collect();
        (0..outer)
            .map(|o| {
                let base = offset(o, &kd, &ks);
                let vals = offsets.iter().map(|off| input[base + off]);
                self.fold_cpu(vals, count)
            })
            .collect()
    }

    fn fold_cpu(&self, mut vals: impl Iterator<Item = u32>, count: usize) -> u32 {
        let d = self.dtype;
        let combine = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Maximum,
            ReduceOp::Min => BinaryOp::Minimum,
            ReduceOp::All => return vals.all(|v| truthy(d, v)) as u32,
            ReduceOp::Any => return vals.any(|v| truthy(d, v)) as u32,
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let better = if self.op == ReduceOp::ArgMax {
                    BinaryOp::Greater
                } else {
                    BinaryOp::Less
                };
                let nan = |w: u32| d == DType::F32 && f32::from_bits(w).is_nan();
                let mut best = vals.next().unwrap_or(0);
                let mut at = 0u32;
                for (r, v) in vals.enumerate() {
                    if !nan(best) && (nan(v) || binary_cpu(better, d, v, best) != 0) {
                        best = v;
                        at = r as u32 + 1;
                    }
                }
                return at;
            }
        };
        let mut acc = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => 0,
            ReduceOp::Prod => one_word(d),
            _ => vals.next().unwrap_or(0),
        };
        for v in vals {
            acc = binary_cpu(combine, d, acc, v);
        }
        if self.op == ReduceOp::Mean {
            let n = match d {
                DType::F32 => (count as f32).to_bits(),
                _ => count as u32,
            };
            acc = binary_cpu(BinaryOp::Div, d, acc, n);
        }
        acc
    }

    /// WGSL (templates `shaders/reduce.wgsl`, `shaders/arg_reduce.wgsl`): one invocation per
    /// output element looping over the reduced elements in row-major order.
    pub fn wgsl(&self) -> String {
        if let Some((strategy, r)) = self.fast_path() {
            return self.wgsl_rows(strategy, r);
        }
        let (kd, ks, rd, rs) = self.split();
        let count = self.reduced_count();
        let d = self.dtype;
        let out_d = self.op.out_dtype(d);
        let mut bindings = Writer::new();
        self.bind_sources(&mut bindings, false);
        let (func, epi_args) = self.epilogue_parts();
        let func = format!("{}\n{func}", self.prologue_functions(false));
        let n_src = self.sources();
        for (j, (_, xd)) in self.extra().iter().enumerate() {
            let b = n_src + j;
            codegen::storage_binding(&mut bindings, b, &format!("in{b}"), *xd);
        }
        codegen::storage_binding(&mut bindings, n_src + self.extra().len(), "out", out_d);
        let mut base = Writer::new();
        base.indent(1);
        codegen::strided_index(&mut base, "base", "o", &kd, &ks);
        let mut offset = Writer::new();
        offset.indent(2);
        codegen::strided_index(&mut offset, "off", "r", &rd, &rs);
        let common = [
            ("BINDINGS", bindings.finish()),
            ("WG", codegen::WORKGROUP.to_string()),
            ("N", format!("{}u", self.out_shape.numel())),
            ("BASE", base.finish()),
            ("R", format!("{count}u")),
            ("OFFSET", offset.finish()),
        ];
        if self.op.is_arg() {
            let cmp = if self.op == ReduceOp::ArgMax {
                ">"
            } else {
                "<"
            };
            let (isnan_best, isnan_v) = if d.is_float() {
                ("wgf_isnan(best)", "wgf_isnan(v)")
            } else {
                ("false", "false")
            };
            let mut values = common.to_vec();
            values.extend([
                ("INIT", self.src_load("base")),
                ("LOAD", self.src_load("base + off")),
                ("FUNC", func),
                (
                    "BETTER",
                    format!("!{isnan_best} && ({isnan_v} || v {cmp} best)"),
                ),
            ]);
            return codegen::fill_template(include_str!("../../shaders/arg_reduce.wgsl"), &values);
        }
        let (init, start) = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => (codegen::literal(d, 0), "0u"),
            ReduceOp::Prod => (codegen::one(d), "0u"),
            ReduceOp::All => ("true".to_string(), "0u"),
            ReduceOp::Any => ("false".to_string(), "0u"),
            _ => (self.src_load("base"), "1u"),
        };
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
        };
        let finish = match (self.op, d.compute()) {
            (ReduceOp::Mean, DType::F32) => {
                format!(
                    "acc / {}",
                    codegen::literal(DType::F32, (count as f32).to_bits())
                )
            }
            (ReduceOp::Mean, DType::I32) => {
                format!("wgf_div_i32(acc, {})", codegen::literal(d, count as u32))
            }
            (ReduceOp::Mean, _) => {
                format!("wgf_div_u32(acc, {})", codegen::literal(d, count as u32))
            }
            _ => "acc".to_string(),
        };
        let mut values = common.to_vec();
        values.extend([
            ("INIT", init),
            ("START", start.to_string()),
            ("LOAD", self.src_load("base + off")),
            ("COMBINE", combine.replace("OTHER_ZERO", &zero_of(d))),
            (
                "STORE",
                codegen::store("out", "o", &self.apply_epilogue(&finish, &epi_args), out_d),
            ),
            ("FUNC", func),
        ]);
        codegen::fill_template(include_str!("../../shaders/reduce.wgsl"), &values)
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
        _ => codegen::literal(d, 0),
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
        let rows = self.out_shape.numel();
        if r >= TREE_MIN_LEN && rows <= TREE_MAX_ROWS {
            Some((ReduceStrategy::Tree, r))
        } else if r >= 8 && r.is_multiple_of(4) {
            Some((ReduceStrategy::RowsVec4, r))
        } else {
            None
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

    fn finish_cpu(&self, acc: u32, count: usize) -> u32 {
        if self.op != ReduceOp::Mean {
            return acc;
        }
        let n = match self.dtype {
            DType::F32 => (count as f32).to_bits(),
            _ => count as u32,
        };
        binary_cpu(BinaryOp::Div, self.dtype, acc, n)
    }

    fn fold_row_cpu(&self, strategy: ReduceStrategy, row: &[u32]) -> u32 {
        let (d, op) = (self.dtype, self.combine_op());
        let c = |a: u32, b: u32| binary_cpu(op, d, a, b);
        let acc = match strategy {
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
        self.finish_cpu(acc, row.len())
    }

    /// WGSL of the row strategies.
    fn wgsl_rows(&self, strategy: ReduceStrategy, r: usize) -> String {
        let d = self.dtype;
        let t = d.wgsl();
        let n = self.out_shape.numel();
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
        let finish = match (self.op, d.compute()) {
            (ReduceOp::Mean, DType::F32) => {
                format!(
                    "acc / {}",
                    codegen::literal(DType::F32, (r as f32).to_bits())
                )
            }
            (ReduceOp::Mean, DType::I32) => {
                format!("wgf_div_i32(acc, {})", codegen::literal(d, r as u32))
            }
            (ReduceOp::Mean, _) => format!("wgf_div_u32(acc, {})", codegen::literal(d, r as u32)),
            _ => "acc".to_string(),
        };
        let mut w = Writer::new();
        let vec = strategy == ReduceStrategy::RowsVec4;
        w.line(&format!(
            "// wgflow reduction ({strategy:?}): {} of rows of {r}.",
            self.op.name()
        ));
        self.bind_sources(&mut w, vec);
        let n_src = self.sources();
        for (j, (_, xd)) in self.extra().iter().enumerate() {
            let b = n_src + j;
            codegen::storage_binding(&mut w, b, &format!("in{b}"), *xd);
        }
        codegen::storage_binding(&mut w, n_src + self.extra().len(), "out", d);
        let (func, epi_args) = self.epilogue_parts();
        let finish = self.apply_epilogue(&finish, &epi_args);
        let pro = self.prologue_functions(vec);
        for line in codegen::PRELUDE
            .lines()
            .chain(func.lines())
            .chain(pro.lines())
        {
            w.line(line);
        }
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
            w.line(&format!("@compute @workgroup_size({})", codegen::WORKGROUP));
            w.line("fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
            w.indent(1);
            w.line(&format!(
                "let o = gid.x + gid.y * nwg.x * {}u;",
                codegen::WORKGROUP
            ));
            w.line(&format!("if (o >= {n}u) {{"));
            w.line("    return;");
            w.line("}");
            w.line(&format!("let base = o * {}u;", r / 4));
            w.line(&format!("var v4 = {};", self.src_load4("base")));
            w.line(&format!("for (var j = 1u; j < {}u; j = j + 1u) {{", r / 4));
            w.line(&format!("    let v = {};", self.src_load4("base + j")));
            w.line(&format!("    v4 = {};", lanes("v4", "v")));
            w.line("}");
            w.line(&format!(
                "let acc = {};",
                comb(&comb("v4.x", "v4.y"), &comb("v4.z", "v4.w"))
            ));
            w.line(&format!("{};", codegen::store("out", "o", &finish, d)));
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
        w.line("let o = wid.x + wid.y * nwg.x;");
        w.line("let t = lid.x;");
        w.line(&format!("let base = min(o, {}u) * {r}u;", n - 1));
        w.line(&format!("var p = {};", self.src_load("base + t")));
        w.line(&format!(
            "for (var i = t + {TREE_WG}u; i < {r}u; i = i + {TREE_WG}u) {{"
        ));
        w.line(&format!(
            "    p = {};",
            comb("p", &self.src_load("base + i"))
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
        w.line(&format!("if (t == 0u && o < {n}u) {{"));
        w.line("    let acc = part[0];");
        w.line(&format!("    {};", codegen::store("out", "o", &finish, d)));
        w.line("}");
        w.indent(0);
        w.line("}");
        w.finish()
    }
}

impl ReduceKernel {
    /// Bind the source inputs from binding 0: `in0` (as vec4s when `vec`), or the prologue's
    /// inputs, full-shape ones as vec4s when `vec`.
    fn bind_sources(&self, w: &mut Writer, vec: bool) {
        match &self.prologue {
            None => codegen::storage_binding_vec(w, 0, "in0", self.dtype, vec),
            Some(p) => {
                for (j, (s, d)) in p.inputs.iter().enumerate() {
                    let v = vec && s == &self.in_shape;
                    codegen::storage_binding_vec(w, j, &format!("in{j}"), *d, v);
                }
            }
        }
    }

    /// The reduced value at linear input index `idx`.
    fn src_load(&self, idx: &str) -> String {
        match self.prologue {
            None => codegen::load("in0", idx, self.dtype),
            Some(_) => format!("wgf_load({idx})"),
        }
    }

    /// The four reduced values from vec4 index `idx4` (row strategies).
    fn src_load4(&self, idx4: &str) -> String {
        match self.prologue {
            None => codegen::load_vec4("in0", idx4, self.dtype),
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
        let params: Vec<String> = dtypes
            .iter()
            .enumerate()
            .map(|(i, d)| format!("x{i}: {}", d.wgsl()))
            .collect();
        let mut w = Writer::new();
        w.line(&format!("fn wgf_pro({}) -> {t} {{", params.join(", ")));
        w.line(&format!(
            "    return {};",
            crate::ops::elementwise::expr_wgsl(&p.expr, &dtypes)
        ));
        w.line("}");
        let dims = self.in_shape.dims();
        // Loads of input j at linear index `at` (a broadcast index unless full-shape).
        let scalar = |w: &mut Writer, j: usize, s: &Shape, d: DType, at: &str, name: &str| {
            if s == &self.in_shape {
                w.line(&format!(
                    "let {name} = {};",
                    codegen::load(&format!("in{j}"), at, d)
                ));
            } else if s.numel() == 1 {
                w.line(&format!(
                    "let {name} = {};",
                    codegen::load(&format!("in{j}"), "0u", d)
                ));
            } else {
                let strides = s.broadcast_strides(&self.in_shape);
                codegen::strided_index(w, &format!("{name}_at"), at, dims, &strides);
                let load = codegen::load(&format!("in{j}"), &format!("{name}_at"), d);
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
                let wide = codegen::load_vec4(&format!("in{j}"), "i4", *d);
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
                codegen::load(&format!("in{}", self.sources() + j), idx, *d)
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
