//! Movement ops: reshape/squeeze/expand_dims (views: no kernel, no copy), transpose/permute,
//! and index-math copies: one signed-stride gather (slice with any step, flip, broadcast_to),
//! concat, constant pad, and gather along an axis. Composites (stack, split, tile, reflect
//! pad, one_hot) are built from these in `graph/build_movement.rs`.
//!
//! Movement kernels copy 32-bit words without looking at them, so every dtype binds as `u32`.

use crate::ops::family::{Arity, Declared, EmptyInput, Family, KernelDef, LowerCx, Lowered};
use crate::ops::wgsl::{self, Writer};
use crate::ops::Kernel;
use crate::{DType, Shape};

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod file;

/// Shape rule for reshape; one dimension may be -1 and is inferred.
pub fn reshape_shape(input: &Shape, target: &[isize]) -> Result<Shape, String> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            -1 => return Err(format!("only one -1 is allowed in {target:?}")),
            d if d < 0 => return Err(format!("dimension {d} in {target:?} is negative")),
            d => known = known.checked_mul(d as usize).ok_or("shape overflows")?,
        }
    }
    let n = input.numel();
    let mut dims: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 {
            return Err(format!(
                "cannot infer the -1 in {target:?}: the other dimensions hold zero elements"
            ));
        }
        if !n.is_multiple_of(known) {
            return Err(format!(
                "cannot reshape {input} ({n} elements) to {target:?}"
            ));
        }
        dims[i] = n / known;
    }
    let out = Shape(dims);
    if out.numel() != n {
        return Err(format!(
            "cannot reshape {input} ({n} elements) to {out} ({} elements)",
            out.numel()
        ));
    }
    Ok(out)
}

/// Shape rule for permute; `perm` must be a permutation of `0..rank` (negatives allowed).
pub fn permute_shape(input: &Shape, perm: &[isize]) -> Result<(Vec<usize>, Shape), String> {
    if perm.len() != input.rank() {
        return Err(format!(
            "permutation {perm:?} has {} axes but shape {input} has {}",
            perm.len(),
            input.rank()
        ));
    }
    let mut resolved = Vec::with_capacity(perm.len());
    for &p in perm {
        let ax = input
            .axis(p)
            .ok_or_else(|| format!("axis {p} in {perm:?} is out of range for shape {input}"))?;
        if resolved.contains(&ax) {
            return Err(format!("{perm:?} is not a permutation: axis {p} repeats"));
        }
        resolved.push(ax);
    }
    let dims = resolved.iter().map(|&a| input.dims()[a]).collect();
    Ok((resolved, Shape(dims)))
}

/// `out[i] = in[offset(i)]` with the output's axes taken from `perm` of the input's.
#[derive(Debug, Clone, PartialEq)]
pub struct PermuteKernel {
    pub in_shape: Shape,
    pub perm: Vec<usize>,
    pub out_shape: Shape,
    pub dtype: DType,
}

impl PermuteKernel {
    /// The input stride of each output axis.
    pub fn src_strides(&self) -> Vec<usize> {
        let s = self.in_shape.strides();
        self.perm.iter().map(|&p| s[p]).collect()
    }

    pub fn run_cpu(&self, input: &[u32]) -> Vec<u32> {
        let dims = self.out_shape.dims();
        let strides = self.src_strides();
        (0..self.out_shape.numel())
            .map(|i| {
                let (mut rem, mut off) = (i, 0);
                for k in (0..dims.len()).rev() {
                    off += (rem % dims[k]) * strides[k];
                    rem /= dims[k];
                }
                input[off]
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let mut bindings = Writer::new();
        wgsl::storage_binding(&mut bindings, 0, "in0", self.dtype);
        wgsl::storage_binding(&mut bindings, 1, "out", self.dtype);
        let mut body = Writer::new();
        body.indent(1);
        wgsl::strided_index(
            &mut body,
            "src",
            "i",
            self.out_shape.dims(),
            &self.src_strides(),
        );
        wgsl::fill_template(
            include_str!("../../shaders/permute.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("N", format!("{}u", self.out_shape.numel())),
                ("BODY", body.finish()),
            ],
        )
    }
}

/// What a [`StridedKernel`] node was built as (for names and messages only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StridedKind {
    Slice,
    Flip,
    BroadcastTo,
}

impl StridedKind {
    pub fn name(self) -> &'static str {
        match self {
            StridedKind::Slice => "slice",
            StridedKind::Flip => "flip",
            StridedKind::BroadcastTo => "broadcast_to",
        }
    }
}

/// One axis of a slice, Python's `start:stop:step` (`None` takes the default for the step's sign).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceArg {
    pub start: Option<isize>,
    pub stop: Option<isize>,
    pub step: isize,
}

impl SliceArg {
    /// `:` (the whole axis).
    pub fn full() -> Self {
        SliceArg::new(None, None, 1)
    }

    /// `start:stop`.
    pub fn range(start: isize, stop: isize) -> Self {
        SliceArg::new(Some(start), Some(stop), 1)
    }

    pub fn new(start: Option<isize>, stop: Option<isize>, step: isize) -> Self {
        SliceArg { start, stop, step }
    }

    /// Python's `slice.indices(n)` and the element count: `(start, step, count)`.
    pub fn resolve(&self, n: usize) -> Result<(isize, isize, usize), String> {
        let (n, step) = (n as isize, self.step);
        if step == 0 {
            return Err("slice step cannot be zero".into());
        }
        let fix = |v: isize, lo: isize, hi: isize| {
            let v = if v < 0 { v + n } else { v };
            v.clamp(lo, hi)
        };
        let (start, stop) = if step > 0 {
            (
                self.start.map_or(0, |v| fix(v, 0, n)),
                self.stop.map_or(n, |v| fix(v, 0, n)),
            )
        } else {
            (
                self.start.map_or(n - 1, |v| fix(v, -1, n - 1)),
                self.stop.map_or(-1, |v| fix(v, -1, n - 1)),
            )
        };
        let span = if step > 0 { stop - start } else { start - stop };
        // 1 + (span - 1) / |step| cannot overflow, even for a step of isize::MIN.
        let count = if span <= 0 {
            0
        } else {
            1 + (span as usize - 1) / step.unsigned_abs()
        };
        Ok((start, step, count))
    }
}

/// Shape rule for slice: one [`SliceArg`] per leading axis (missing trailing axes are `:`).
/// Returns the output shape, the word offset of the first element and the signed strides.
pub fn slice_plan(input: &Shape, args: &[SliceArg]) -> Result<(Shape, i64, Vec<i64>), String> {
    if args.len() > input.rank() {
        return Err(format!(
            "{} slice arguments for shape {input} of rank {}",
            args.len(),
            input.rank()
        ));
    }
    let strides = input.strides();
    let (mut dims, mut offset, mut out_strides) = (Vec::new(), 0i64, Vec::new());
    for (k, &n) in input.dims().iter().enumerate() {
        let arg = args.get(k).copied().unwrap_or_else(SliceArg::full);
        let (start, step, count) = arg.resolve(n)?;
        dims.push(count);
        if count == 0 {
            // An empty result reads nothing: no offset to account for.
            out_strides.push(0);
            continue;
        }
        let step = step as i64;
        let overflow = || format!("slice {arg:?} of axis {k} overflows the index range");
        offset = (start as i64)
            .checked_mul(strides[k] as i64)
            .and_then(|o| o.checked_add(offset))
            .ok_or_else(overflow)?;
        out_strides.push(step.checked_mul(strides[k] as i64).ok_or_else(overflow)?);
    }
    Ok((Shape(dims), offset, out_strides))
}

/// Signed-offset addressing: `let name = u32(offset + Σ coord_k(linear) * strides[k])`.
pub(crate) fn signed_index(
    w: &mut Writer,
    name: &str,
    linear: &str,
    dims: &[usize],
    strides: &[i64],
    offset: i64,
) {
    let mut terms = vec![format!("{offset}")];
    let mut inner = 1usize;
    for k in (0..dims.len()).rev() {
        if strides[k] != 0 && dims[k] != 1 {
            let coord = if inner == 1 {
                format!("i32({linear} % {}u)", dims[k])
            } else {
                format!("i32(({linear} / {inner}u) % {}u)", dims[k])
            };
            terms.push(format!("{coord} * {}", strides[k]));
        }
        inner *= dims[k];
    }
    w.line(&format!("let {name} = u32({});", terms.join(" + ")));
}

/// Words are copied untyped (as u32) except f16, which a GPU stores in 2 bytes. `inputs` are
/// the dtypes of the bindings before `out`; `dtype` is the element type that moves.
fn copy_kernel(inputs: &[DType], dtype: DType, n: usize, body: Writer) -> String {
    let untyped = |d: DType| if d == DType::F16 { d } else { DType::U32 };
    let mut bindings = Writer::new();
    for (i, d) in inputs.iter().enumerate() {
        wgsl::storage_binding(&mut bindings, i, &format!("in{i}"), untyped(*d));
    }
    wgsl::storage_binding(&mut bindings, inputs.len(), "out", untyped(dtype));
    wgsl::fill_template(
        include_str!("../../shaders/gather.wgsl"),
        &[
            ("BINDINGS", bindings.finish()),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{n}u")),
            ("BODY", body.finish()),
        ],
    )
}

fn coords(i: usize, dims: &[usize]) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    let mut rem = i;
    for k in (0..dims.len()).rev() {
        c[k] = rem % dims[k];
        rem /= dims[k];
    }
    c
}

/// `out[i] = in0[offset + Σ coord_k(i) * strides[k]]` with signed strides over a contiguous
/// input: slice (any step), flip and broadcast_to (stride 0) are all this kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct StridedKernel {
    pub kind: StridedKind,
    pub out_shape: Shape,
    pub offset: i64,
    pub strides: Vec<i64>,
    pub dtype: DType,
}

impl StridedKernel {
    pub fn run_cpu(&self, input: &[u32]) -> Vec<u32> {
        let dims = self.out_shape.dims();
        (0..self.out_shape.numel())
            .map(|i| {
                let c = coords(i, dims);
                let off = self.offset
                    + c.iter()
                        .zip(&self.strides)
                        .map(|(&c, &s)| c as i64 * s)
                        .sum::<i64>();
                input[off as usize]
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let mut body = Writer::new();
        body.indent(1);
        signed_index(
            &mut body,
            "src",
            "i",
            self.out_shape.dims(),
            &self.strides,
            self.offset,
        );
        body.line("out[i] = in0[src];");
        copy_kernel(&[self.dtype], self.dtype, self.out_shape.numel(), body)
    }
}

/// Concatenation along `axis` of inputs that agree on every other axis.
#[derive(Debug, Clone, PartialEq)]
pub struct ConcatKernel {
    pub in_shapes: Vec<Shape>,
    pub axis: usize,
    pub out_shape: Shape,
    pub dtype: DType,
}

impl ConcatKernel {
    fn inner(&self) -> usize {
        self.out_shape.dims()[self.axis + 1..].iter().product()
    }

    pub fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let inner = self.inner();
        let total = self.out_shape.dims()[self.axis];
        let mut out = Vec::with_capacity(self.out_shape.numel());
        for outer in 0..self.out_shape.numel() / (inner * total) {
            for (input, shape) in inputs.iter().zip(&self.in_shapes) {
                let block = shape.dims()[self.axis] * inner;
                out.extend_from_slice(&input[outer * block..(outer + 1) * block]);
            }
        }
        out
    }

    pub fn wgsl(&self) -> String {
        let inner = self.inner();
        let total = self.out_shape.dims()[self.axis];
        let mut body = Writer::new();
        body.indent(1);
        body.line(&format!("let inn = i % {inner}u;"));
        body.line(&format!("let a = (i / {inner}u) % {total}u;"));
        body.line(&format!("let outer = i / {}u;", inner * total));
        let mut start = 0;
        let last = self.in_shapes.len() - 1;
        for (k, shape) in self.in_shapes.iter().enumerate() {
            let d = shape.dims()[self.axis];
            let cond = if k == 0 {
                format!("if (a < {}u) {{", start + d)
            } else if k < last {
                format!("}} else if (a < {}u) {{", start + d)
            } else {
                "} else {".to_string()
            };
            if last == 0 {
                body.line("{");
            } else {
                body.line(&cond);
            }
            body.line(&format!(
                "    out[i] = in{k}[(outer * {d}u + a - {start}u) * {inner}u + inn];"
            ));
            start += d;
        }
        body.line("}");
        let ins = vec![self.dtype; self.in_shapes.len()];
        copy_kernel(&ins, self.dtype, self.out_shape.numel(), body)
    }
}

/// Constant padding: `before[k]` elements of `value` (its raw word) ahead of axis `k`, the
/// rest after it up to `out_shape`.
#[derive(Debug, Clone, PartialEq)]
pub struct PadKernel {
    pub in_shape: Shape,
    pub before: Vec<usize>,
    pub value: u32,
    pub out_shape: Shape,
    pub dtype: DType,
}

impl PadKernel {
    pub fn run_cpu(&self, input: &[u32]) -> Vec<u32> {
        let (od, id, st) = (
            self.out_shape.dims(),
            self.in_shape.dims(),
            self.in_shape.strides(),
        );
        (0..self.out_shape.numel())
            .map(|i| {
                let mut src = 0;
                for (k, c) in coords(i, od).into_iter().enumerate() {
                    match c.checked_sub(self.before[k]) {
                        Some(c) if c < id[k] => src += c * st[k],
                        _ => return self.value,
                    }
                }
                input[src]
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let (od, id, st) = (
            self.out_shape.dims(),
            self.in_shape.dims(),
            self.in_shape.strides(),
        );
        let mut body = Writer::new();
        body.indent(1);
        body.line("var ok = true;");
        body.line("var src = 0u;");
        let mut inner = 1usize;
        for k in (0..od.len()).rev() {
            body.line(&format!(
                "let c{k} = i32((i / {inner}u) % {}u) - {};",
                od[k], self.before[k]
            ));
            body.line(&format!("ok = ok && c{k} >= 0 && c{k} < {};", id[k]));
            body.line(&format!("src = src + u32(max(c{k}, 0)) * {}u;", st[k]));
            inner *= od[k];
        }
        let value = if self.dtype == DType::F16 {
            // naga types `bitcast<vec2<f16>>` wrongly; unpack gives the same exact value.
            format!("f16(unpack2x16float({}u).x)", self.value)
        } else {
            format!("{}u", self.value)
        };
        body.line(&format!(
            "out[i] = select({value}, in0[select(0u, src, ok)], ok);"
        ));
        copy_kernel(&[self.dtype], self.dtype, self.out_shape.numel(), body)
    }
}

/// `take(x, indices, axis)`: indices are i32; a negative index counts from the end once, and
/// what is still out of range is clamped to the axis (fed indices cannot be checked at build
/// time; constant ones are).
#[derive(Debug, Clone, PartialEq)]
pub struct GatherKernel {
    pub x_shape: Shape,
    pub indices: usize,
    pub axis: usize,
    pub out_shape: Shape,
    pub dtype: DType,
}

impl GatherKernel {
    fn split(&self) -> (usize, usize) {
        let d = self.x_shape.dims();
        (d[self.axis], d[self.axis + 1..].iter().product())
    }

    /// The clamped row an index word selects.
    pub fn row(index: u32, n: usize) -> usize {
        let (k, n) = (index as i32 as i64, n as i64);
        (if k < 0 { k + n } else { k }).clamp(0, n - 1) as usize
    }

    pub fn run_cpu(&self, x: &[u32], idx: &[u32]) -> Vec<u32> {
        let (n, inner) = self.split();
        (0..self.out_shape.numel())
            .map(|i| {
                let (inn, j, outer) = (
                    i % inner,
                    (i / inner) % self.indices,
                    i / (inner * self.indices),
                );
                x[(outer * n + Self::row(idx[j], n)) * inner + inn]
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let (n, inner) = self.split();
        let mut body = Writer::new();
        body.indent(1);
        body.line(&format!("let inn = i % {inner}u;"));
        body.line(&format!("let j = (i / {inner}u) % {}u;", self.indices));
        body.line(&format!("let outer = i / {}u;", inner * self.indices));
        body.line("let k0 = bitcast<i32>(in1[j]);");
        body.line(&format!(
            "let k = clamp(select(k0, k0 + {n}, k0 < 0), 0, {});",
            n - 1
        ));
        body.line(&format!(
            "out[i] = in0[(outer * {n}u + u32(k)) * {inner}u + inn];"
        ));
        copy_kernel(
            &[self.dtype, DType::I32],
            self.dtype,
            self.out_shape.numel(),
            body,
        )
    }
}

/// A strided read of `out` from `input`: every element it reads must lie inside the input.
fn strided_shape(
    input: &Shape,
    out: &Shape,
    offset: i64,
    strides: &[i64],
) -> Result<Shape, String> {
    if strides.len() != out.rank() {
        return Err(format!("{} strides for output shape {out}", strides.len()));
    }
    if out.numel() > 0 {
        // The lowest and highest word read, in i128 so no stride can overflow them.
        let (mut lo, mut hi) = (offset as i128, offset as i128);
        for (&d, &s) in out.dims().iter().zip(strides) {
            let span = (d as i128 - 1) * s as i128;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        if lo < 0 || hi >= input.numel() as i128 {
            return Err(format!(
                "reading {out} from offset {offset} with strides {strides:?} leaves the input {input}"
            ));
        }
    }
    Ok(out.clone())
}

/// Concat along `axis`: equal ranks and dtypes, equal sizes outside the axis.
fn concat_shape(inputs: &[(Shape, DType)], axis: usize) -> Result<Shape, String> {
    let (base, dtype) = &inputs[0];
    if axis >= base.rank() {
        return Err(format!("axis {axis} is out of range for shape {base}"));
    }
    let mut total = 0usize;
    for (s, d) in inputs {
        let agree = s.rank() == base.rank()
            && (0..s.rank()).all(|j| j == axis || s.dims()[j] == base.dims()[j]);
        if !agree || d != dtype {
            return Err(format!(
                "{d} {s} does not match {dtype} {base} outside axis {axis}"
            ));
        }
        total = total
            .checked_add(s.dims()[axis])
            .ok_or("the concatenated axis overflows")?;
    }
    let mut dims = base.dims().to_vec();
    dims[axis] = total;
    Ok(Shape(dims))
}

/// Constant padding: `out` holds `input` at `before` on every axis.
fn pad_shape(input: &Shape, out: &Shape, before: &[usize]) -> Result<Shape, String> {
    let fits = out.rank() == input.rank()
        && before.len() == input.rank()
        && (0..input.rank()).all(|k| {
            input.dims()[k]
                .checked_add(before[k])
                .is_some_and(|n| n <= out.dims()[k])
        });
    if !fits {
        return Err(format!(
            "shape {input} padded by {before:?} in front does not fit {out}"
        ));
    }
    Ok(out.clone())
}

/// `take`: `x.shape[:axis] + indices.shape + x.shape[axis+1:]`, i32 indices.
fn gather_shape(inputs: &[(Shape, DType)], axis: usize) -> Result<Shape, String> {
    let [(x, _), (indices, di)] = inputs else {
        return Err(format!("take needs 2 inputs, {} given", inputs.len()));
    };
    if *di != DType::I32 {
        return Err(format!("indices must be i32, got {di}"));
    }
    if axis >= x.rank() {
        return Err(format!("axis {axis} is out of range for shape {x}"));
    }
    let d = x.dims();
    let dims = d[..axis]
        .iter()
        .chain(indices.dims())
        .chain(&d[axis + 1..])
        .copied()
        .collect();
    Ok(Shape(dims))
}

// ---------------------------------------------------------------- the family

/// The movement primitives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Movement {
    /// A view with the node's shape: no data moves.
    Reshape,
    Permute(Vec<usize>),
    /// `out[i] = in[offset + Σ coord_k * strides[k]]` over the contiguous input, signed strides.
    Strided {
        kind: StridedKind,
        offset: i64,
        strides: Vec<i64>,
    },
    /// Concatenate all inputs along an axis.
    Concat(usize),
    /// Constant padding: `before[k]` elements ahead of axis `k`; `value` is the raw word.
    Pad {
        before: Vec<usize>,
        value: u32,
    },
    /// `take(x, indices, axis)` with i32 indices (clamped; see [`GatherKernel`]).
    Gather(usize),
}

impl Family for Movement {
    fn name(&self) -> &'static str {
        match self {
            Movement::Reshape => "reshape",
            Movement::Permute(_) => "transpose",
            Movement::Strided { kind, .. } => kind.name(),
            Movement::Concat(_) => "concat",
            Movement::Pad { .. } => "pad",
            Movement::Gather(_) => "take",
        }
    }

    fn arity(&self) -> Arity {
        match self {
            Movement::Concat(_) => Arity::AtLeast(2),
            Movement::Gather(_) => Arity::Exactly(2),
            Movement::Reshape
            | Movement::Permute(_)
            | Movement::Strided { .. }
            | Movement::Pad { .. } => Arity::Exactly(1),
        }
    }

    fn is_view(&self) -> bool {
        matches!(self, Movement::Reshape)
    }

    /// Movement keeps the dtype (take's indices are i32). A reshape, strided read or pad
    /// produces its declared shape, which must hold the same elements, read only inside the
    /// input, or contain the input at `before`.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> Result<(Shape, DType), String> {
        let Some((input, dtype)) = inputs.first() else {
            return Err(format!("{} needs an input", self.name()));
        };
        let shape = match self {
            Movement::Reshape => {
                let out = declared.need_shape("reshape")?;
                if out.numel() != input.numel() {
                    return Err(format!(
                        "cannot reshape {input} ({} elements) to {out} ({} elements)",
                        input.numel(),
                        out.numel()
                    ));
                }
                out.clone()
            }
            Movement::Permute(perm) => {
                let perm: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
                permute_shape(input, &perm)?.1
            }
            Movement::Strided {
                offset, strides, ..
            } => strided_shape(input, declared.need_shape(self.name())?, *offset, strides)?,
            Movement::Concat(axis) => concat_shape(inputs, *axis)?,
            Movement::Pad { before, .. } => pad_shape(input, declared.need_shape("pad")?, before)?,
            Movement::Gather(axis) => gather_shape(inputs, *axis)?,
        };
        Ok((shape, *dtype))
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

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let (out_shape, dtype) = (cx.shape.clone(), cx.dtype);
        let kernel = match self {
            Movement::Reshape => return Ok(Lowered::View(cx.args[0])),
            Movement::Permute(perm) => Kernel::Permute(PermuteKernel {
                in_shape: cx.in_shape(0).clone(),
                perm: perm.clone(),
                out_shape,
                dtype,
            }),
            Movement::Strided {
                kind,
                offset,
                strides,
            } => Kernel::Strided(StridedKernel {
                kind: *kind,
                out_shape,
                offset: *offset,
                strides: strides.clone(),
                dtype,
            }),
            Movement::Concat(axis) => {
                // Empty pieces add nothing (and could not be bound).
                let kept: Vec<usize> = (0..cx.args.len())
                    .filter(|&i| cx.in_shape(i).numel() > 0)
                    .collect();
                return Ok(Lowered::Dispatch {
                    kernel: Kernel::Concat(ConcatKernel {
                        in_shapes: kept.iter().map(|&i| cx.in_shape(i).clone()).collect(),
                        axis: *axis,
                        out_shape,
                        dtype,
                    }),
                    inputs: kept.iter().map(|&i| cx.args[i]).collect(),
                });
            }
            Movement::Pad { before, value } => Kernel::Pad(PadKernel {
                in_shape: cx.in_shape(0).clone(),
                before: before.clone(),
                value: *value,
                out_shape,
                dtype,
            }),
            Movement::Gather(axis) => Kernel::Gather(GatherKernel {
                x_shape: cx.in_shape(0).clone(),
                indices: cx.in_shape(1).numel(),
                axis: *axis,
                out_shape,
                dtype,
            }),
        };
        Ok(cx.dispatch(kernel))
    }

    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        match self {
            // Padding nothing gives the pad value.
            Movement::Pad { value, .. } => EmptyInput::Fill(*value),
            Movement::Concat(_) => EmptyInput::Lower,
            Movement::Reshape
            | Movement::Permute(_)
            | Movement::Strided { .. }
            | Movement::Gather(_) => EmptyInput::Impossible,
        }
    }
}

impl KernelDef for PermuteKernel {
    fn describe(&self) -> String {
        format!("transpose {:?} of {}", self.perm, self.in_shape)
    }

    fn wgsl(&self) -> String {
        PermuteKernel::wgsl(self)
    }

    /// Words move untyped, except f16 (2 bytes on a GPU).
    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        PermuteKernel::run_cpu(self, inputs[0])
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for StridedKernel {
    fn describe(&self) -> String {
        format!("{} to {}", self.kind.name(), self.out_shape)
    }

    fn wgsl(&self) -> String {
        StridedKernel::wgsl(self)
    }

    /// Words move untyped, except f16 (2 bytes on a GPU).
    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        StridedKernel::run_cpu(self, inputs[0])
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for ConcatKernel {
    fn describe(&self) -> String {
        format!("concat axis {} to {}", self.axis, self.out_shape)
    }

    fn wgsl(&self) -> String {
        ConcatKernel::wgsl(self)
    }

    /// Words move untyped, except f16 (2 bytes on a GPU).
    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        ConcatKernel::run_cpu(self, inputs)
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for PadKernel {
    fn describe(&self) -> String {
        format!("pad {} to {}", self.in_shape, self.out_shape)
    }

    fn wgsl(&self) -> String {
        PadKernel::wgsl(self)
    }

    /// Words move untyped, except f16 (2 bytes on a GPU).
    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        PadKernel::run_cpu(self, inputs[0])
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for GatherKernel {
    fn describe(&self) -> String {
        format!("take axis {} of {}", self.axis, self.x_shape)
    }

    fn wgsl(&self) -> String {
        GatherKernel::wgsl(self)
    }

    /// Words move untyped, except f16 (2 bytes on a GPU).
    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        GatherKernel::run_cpu(self, inputs[0], inputs[1])
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}
