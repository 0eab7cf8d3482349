//! Movement ops: reshape/squeeze/expand_dims (views: no kernel, no copy), transpose/permute,
//! and index-math copies: one signed-stride gather (slice with any step, flip, broadcast_to),
//! concat, constant pad, and gather along an axis. Composites (stack, split, tile, reflect
//! pad) are built from these in `graph/build/movement.rs`, one_hot in
//! `graph/build/composite.rs`.
//!
//! Movement kernels copy 32-bit words without looking at them, so every dtype binds as `u32`.

use crate::ops::family::{
    missing_inputs, Arity, CpuIn, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef,
    LowerCx, Lowered, Reject,
};
use crate::ops::wgsl::{self as shader, Writer};
use crate::ops::Kernel;
use crate::{DType, Shape};

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

mod cpu;
pub mod file;
mod grad;
mod shape;
mod wgsl;

use shape::{concat_shape, gather_shape, pad_shape, strided_shape};
pub use shape::{permute_shape, reshape_shape, slice_plan};

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

    pub fn reference(&self, input: &[u32]) -> Vec<u32> {
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
        shader::storage_binding(&mut bindings, 0, "in0", self.dtype);
        shader::storage_binding(&mut bindings, 1, "out", self.dtype);
        let mut body = Writer::new();
        body.indent(1);
        shader::strided_index(
            &mut body,
            "src",
            "i",
            self.out_shape.dims(),
            &self.src_strides(),
        );
        shader::fill_template(
            include_str!("../../../shaders/permute.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", shader::WORKGROUP.to_string()),
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
        shader::storage_binding(&mut bindings, i, &format!("in{i}"), untyped(*d));
    }
    shader::storage_binding(&mut bindings, inputs.len(), "out", untyped(dtype));
    shader::fill_template(
        include_str!("../../../shaders/gather.wgsl"),
        &[
            ("BINDINGS", bindings.finish()),
            ("WG", shader::WORKGROUP.to_string()),
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
    pub fn reference(&self, input: &[u32]) -> Vec<u32> {
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
    /// A max pool over `out_shape` (channels of `[N, C, H, W]` f32) whose result the kernel
    /// writes instead, each plane pooled from the input plane it would have copied (set by
    /// fusion on cpu:0 only, see [`KernelDef::absorb`]).
    pub pool: Option<Box<crate::ops::PoolKernel>>,
}

impl ConcatKernel {
    fn inner(&self) -> usize {
        self.out_shape.dims()[self.axis + 1..].iter().product()
    }

    /// Each input's first element in the output, when every input is one contiguous run of
    /// it (nothing before the axis varies: a batch-1 concatenation along channels) and no
    /// pool was absorbed: a planner may then have the inputs' producers write straight into
    /// the output, and the concatenation copies nothing.
    pub fn chunks(&self) -> Option<Vec<usize>> {
        let dims = self.out_shape.dims();
        if self.pool.is_some() || dims.get(..self.axis)?.iter().product::<usize>() != 1 {
            return None;
        }
        let inner = self.inner();
        let mut at = 0;
        let mut starts = Vec::with_capacity(self.in_shapes.len());
        for s in &self.in_shapes {
            starts.push(at);
            at += s.dims().get(self.axis)? * inner;
        }
        (at == self.out_shape.numel()).then_some(starts)
    }

    pub fn reference(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let inner = self.inner();
        let total = self.out_shape.dims()[self.axis];
        let mut out = Vec::with_capacity(self.out_shape.numel());
        for outer in 0..self.out_shape.numel() / (inner * total) {
            for (input, shape) in inputs.iter().zip(&self.in_shapes) {
                let block = shape.dims()[self.axis] * inner;
                out.extend_from_slice(&input[outer * block..(outer + 1) * block]);
            }
        }
        match &self.pool {
            None => out,
            Some(p) => p.reference(&out),
        }
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
    pub fn reference(&self, input: &[u32]) -> Vec<u32> {
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
    pub(super) fn split(&self) -> (usize, usize) {
        let d = self.x_shape.dims();
        (d[self.axis], d[self.axis + 1..].iter().product())
    }

    /// The clamped row an index word selects.
    pub fn row(index: u32, n: usize) -> usize {
        let (k, n) = (index as i32 as i64, n as i64);
        (if k < 0 { k + n } else { k }).clamp(0, n - 1) as usize
    }

    pub fn reference(&self, x: &[u32], idx: &[u32]) -> Vec<u32> {
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
    /// A slice of a tensor with run-time dimensions takes them whole (its builder checks).
    fn rebinds(&self) -> bool {
        true
    }

    /// A strided read's offset and strides hold the sizes it was built with: under others,
    /// only its declared shape (against the strides' rank) is checked.
    fn infer_resized(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        match (self, inputs.first()) {
            (Movement::Strided { strides, .. }, Some((_, dtype))) => {
                let out = declared.need_shape(self.name())?;
                if out.rank() != strides.len() {
                    return Err(Reject::from(format!(
                        "{} to {out} with {} strides",
                        self.name(),
                        strides.len()
                    )));
                }
                Ok((out.clone(), *dtype))
            }
            _ => self.infer(inputs, declared),
        }
    }

    /// A slice's offset and strides were computed from the sizes it was built with: its
    /// arguments are read back from those, then applied to the bound input (a run-time axis,
    /// sliced whole, takes its new size: the stop clamps).
    fn rebind(
        &self,
        g: &mut Graph,
        node: &NodeDef,
        x: &[Tensor],
        probe_in: &[Shape],
        probe_out: &Shape,
    ) -> crate::Result<Tensor> {
        file::rebind(self, g, node, x, (&probe_in[0], probe_out))
    }

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
    ) -> Result<(Shape, DType), Reject> {
        let Some((input, dtype)) = inputs.first() else {
            return Err(Reject::from(format!("{} needs an input", self.name())));
        };
        let shape = match self {
            Movement::Reshape => {
                let out = declared.need_shape("reshape")?;
                if out.numel() != input.numel() {
                    return Err(Reject::from(format!(
                        "cannot reshape {input} ({} elements) to {out} ({} elements)",
                        input.numel(),
                        out.numel()
                    )));
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
                        pool: None,
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

    /// See `movement/grad.rs`: each op's gradient puts `dy` back where it was read from.
    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        self.vjp(g, cx)
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
    fn kind(&self) -> &'static str {
        "permute"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Movement
    }

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

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        if inputs.is_empty() {
            return Err(missing_inputs(self, inputs.len()));
        }
        Ok(PermuteKernel::reference(self, inputs[0]))
    }

    /// Row by row, in parallel (see `cpu.rs`).
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        cpu::permute_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for StridedKernel {
    fn kind(&self) -> &'static str {
        "strided"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Movement
    }

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

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        if inputs.is_empty() {
            return Err(missing_inputs(self, inputs.len()));
        }
        Ok(StridedKernel::reference(self, inputs[0]))
    }

    /// Row by row, in parallel (see `cpu.rs`).
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        cpu::strided_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for ConcatKernel {
    fn kind(&self) -> &'static str {
        "concat"
    }

    fn input_runs(&self) -> Option<Vec<usize>> {
        self.chunks()
    }

    fn class(&self) -> KernelClass {
        KernelClass::Movement
    }

    fn describe(&self) -> String {
        let text = format!("concat axis {} to {}", self.axis, self.out_shape);
        match &self.pool {
            None => text,
            Some(p) => format!("{text} then {}", p.describe()),
        }
    }

    /// A max pool over the concatenation along channels: each plane is pooled from its
    /// input, and the full-size concatenation is never stored.
    fn absorb(&mut self, consumer: &Kernel) -> bool {
        let Kernel::Pool(p) = consumer else {
            return false;
        };
        let fits = p.kind == crate::ops::PoolKind::Max
            && self.pool.is_none()
            && self.axis == 1
            && self.out_shape.rank() == 4
            && self.dtype == DType::F32
            && p.x == self.out_shape
            && p.window.dilation == [1, 1];
        if fits {
            self.pool = Some(Box::new(p.clone()));
        }
        fits
    }

    fn wgsl(&self) -> String {
        ConcatKernel::wgsl(self)
    }

    /// Words move untyped, except f16 (2 bytes on a GPU).
    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        Ok(ConcatKernel::reference(self, inputs))
    }

    /// Row by row, in parallel (see `cpu.rs`); pooled plane by plane.
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        match &self.pool {
            None => cpu::concat_into(self, inputs, out),
            Some(p) => cpu::pooled_concat_into(self, p, inputs, out),
        }
    }

    fn invocations(&self) -> u64 {
        self.pool
            .as_ref()
            .map_or(self.out_shape.numel(), |p| p.out.numel()) as u64
    }
}

impl KernelDef for PadKernel {
    fn kind(&self) -> &'static str {
        "pad"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Movement
    }

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

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        if inputs.is_empty() {
            return Err(missing_inputs(self, inputs.len()));
        }
        Ok(PadKernel::reference(self, inputs[0]))
    }

    /// Row by row (see `cpu.rs`).
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        cpu::pad_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

impl KernelDef for GatherKernel {
    fn kind(&self) -> &'static str {
        "gather"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Movement
    }

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

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        if inputs.len() < 2 {
            return Err(missing_inputs(self, inputs.len()));
        }
        Ok(GatherKernel::reference(self, inputs[0], inputs[1]))
    }

    /// Whole rows, in parallel (see `cpu.rs`).
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        cpu::take_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}
