//! NN kernels over NCHW tensors: direct 2-D convolution (stride, zero padding, dilation,
//! groups) and 2-D max/average pooling. Bias, activations and the normalisations are
//! composites in `graph/build/composite.rs` (conv2d's bias in `graph/build/nn.rs`); fusion
//! makes them the convolution's epilogue.

use crate::ops::elementwise::binary_cpu;
use crate::ops::family::{
    Arity, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef, LowerCx, Lowered, Reject,
};
use crate::ops::wgsl::{self, Writer};
use crate::ops::{BinaryOp, Epilogue, Kernel, Pass, ReduceKernel, ReduceOp};
use crate::{DType, Shape};

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod backward;
mod backward_cpu;
mod cpu;
mod direct;
pub mod file;
mod grad;
mod maxpool;
mod planes;
mod tiles;

mod window;

pub use backward::{NnGradKernel, NnGradOp};
pub use grad::reference;
pub use window::Window;

/// `out[n, o, y, x] = Σ_{c, i, j} in[n, g*C/G + c, y*s - p + i*d, x*s - p + j*d] * w[o, c, i, j]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Conv2dKernel {
    /// `[N, C, H, W]`.
    pub x: Shape,
    /// `[O, C / groups, KH, KW]`.
    pub w: Shape,
    pub window: Window,
    pub groups: usize,
    /// `[N, O, OH, OW]`.
    pub out: Shape,
    /// Elementwise work applied to each output before it is stored (set by fusion: bias,
    /// batch norm, activation, residual); its extra inputs broadcast to `out`.
    pub epilogue: Option<Epilogue>,
    /// When set, the kernel sums over input channels in chunks of this many (the last one
    /// shorter) and writes `[chunks, ..out]`, summed by a reduction after it (set by
    /// lowering, see [`Conv2dKernel::passes`]).
    pub c_chunk: Option<usize>,
    /// A max pool over `out` (after the epilogue) whose result the kernel writes instead
    /// (set by fusion on cpu:0 only, see [`KernelDef::absorb`]): its `x` is `out`.
    pub pool: Option<Box<PoolKernel>>,
}

/// Loop iterations one invocation may run before a kernel is split: half of
/// [`super::LOOP_LIMIT`], the count after which llvmpipe/lavapipe silently end its loops.
pub const LOOP_BUDGET: u64 = 32768;

impl Conv2dKernel {
    /// Loop iterations per input channel: every `ki` and `kj` iteration counts, skipped
    /// (padding) ones too.
    fn per_channel(&self) -> u64 {
        let [_, _, kh, kw] = dims4(&self.w);
        1 + kh as u64 * (1 + kw as u64)
    }

    /// Upper bound on the loop iterations one invocation runs.
    pub fn loop_iterations(&self) -> u64 {
        let [_, cg, _, _] = dims4(&self.w);
        self.c_chunk.unwrap_or(cg).min(cg) as u64 * self.per_channel()
    }

    /// Number of channel chunks (1 unless split).
    pub fn chunks(&self) -> usize {
        let [_, cg, _, _] = dims4(&self.w);
        self.c_chunk.map_or(1, |c| cg.div_ceil(c.max(1)).max(1))
    }

    /// The shape the kernel writes: the output's, after the chunk axis when split.
    pub fn out_shape(&self) -> Shape {
        if let Some(p) = &self.pool {
            return p.out.clone();
        }
        match self.c_chunk {
            None => self.out.clone(),
            Some(_) => {
                let mut d = vec![self.chunks()];
                d.extend_from_slice(self.out.dims());
                Shape(d)
            }
        }
    }

    /// The kernel that runs first and, when one invocation would loop more than
    /// [`LOOP_BUDGET`] times over channels and the window, the reduction that sums partial
    /// convolutions over channel chunks (carrying the epilogue). A single channel's window
    /// past the budget cannot be split this way; software adapters reject it at compile time.
    pub fn passes(self) -> (Conv2dKernel, Option<ReduceKernel>) {
        let [_, cg, _, _] = dims4(&self.w);
        let chunk = (LOOP_BUDGET / self.per_channel()).max(1) as usize;
        if cg <= chunk || self.c_chunk.is_some() {
            return (self, None);
        }
        let partial = Conv2dKernel {
            c_chunk: Some(chunk),
            epilogue: None,
            ..self.clone()
        };
        let sum = ReduceKernel {
            op: ReduceOp::Sum,
            in_shape: partial.out_shape(),
            dtype: DType::F32,
            axes: vec![0],
            out_shape: self.out,
            epilogue: self.epilogue,
            prologue: None,
            pass: Pass::Whole,
        };
        (partial, Some(sum))
    }

    /// The scalar reference the fast kernel is tested against: one output at a time, in the
    /// WGSL kernel's order. `inputs`: x, w, then the epilogue's extra inputs.
    #[doc(hidden)]
    pub fn reference(&self, inputs: &[&[u32]]) -> Vec<u32> {
        let out = self.conv_cpu(inputs[0], inputs[1]);
        let out = match &self.epilogue {
            None => out,
            Some(e) => e.apply_cpu(&out, &inputs[2..], &self.out, DType::F32),
        };
        match &self.pool {
            None => out,
            Some(p) => p.reference(&out),
        }
    }

    fn conv_cpu(&self, x: &[u32], w: &[u32]) -> Vec<u32> {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [_, cg, kh, kw] = dims4(&self.w);
        let [_, o_all, oh, ow] = dims4(&self.out);
        let og = o_all / self.groups;
        let chunk = self.c_chunk.unwrap_or(cg);
        let outputs = self.out.numel();
        let f = f32::from_bits;
        (0..self.out_shape().numel())
            .map(|gi| {
                let (i, c_lo) = (gi % outputs, (gi / outputs) * chunk);
                let (ox, oy, o, n) = (
                    i % ow,
                    (i / ow) % oh,
                    (i / (ow * oh)) % o_all,
                    i / (ow * oh * o_all),
                );
                let g = o / og;
                let mut acc = 0f32;
                for c in c_lo..(c_lo + chunk).min(cg) {
                    for ki in 0..kh {
                        let Some(y) = self.window.at(0, oy, ki, h) else {
                            continue;
                        };
                        for kj in 0..kw {
                            let Some(xx) = self.window.at(1, ox, kj, wd) else {
                                continue;
                            };
                            let xv = x[((n * c_all + g * cg + c) * h + y) * wd + xx];
                            let wv = w[((o * cg + c) * kh + ki) * kw + kj];
                            acc += f(xv) * f(wv);
                        }
                    }
                }
                acc.to_bits()
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let [_, c_all, h, wd] = dims4(&self.x);
        let [_, cg, kh, kw] = dims4(&self.w);
        let [_, o_all, oh, ow] = dims4(&self.out);
        let og = o_all / self.groups;
        let mut bindings = Writer::new();
        wgsl::storage_binding(&mut bindings, 0, "in0", DType::F32);
        wgsl::storage_binding(&mut bindings, 1, "in1", DType::F32);
        let extra = self
            .epilogue
            .as_ref()
            .map_or(&[][..], |e| e.extra.as_slice());
        for (j, (_, d)) in extra.iter().enumerate() {
            wgsl::storage_binding(&mut bindings, 2 + j, &format!("in{}", 2 + j), *d);
        }
        wgsl::storage_binding(&mut bindings, 2 + extra.len(), "out", DType::F32);
        // The epilogue reads each extra input at its broadcast index of output `i`.
        let mut store = Writer::new();
        store.indent(1);
        let func = match &self.epilogue {
            None => {
                store.line("out[i] = acc;");
                String::new()
            }
            Some(e) => {
                let mut args = vec!["acc".to_string()];
                for (j, (s, d)) in e.extra.iter().enumerate() {
                    let idx = if s == &self.out {
                        "i".to_string()
                    } else if s.numel() == 1 {
                        "0u".to_string()
                    } else {
                        let strides = s.broadcast_strides(&self.out);
                        wgsl::strided_index(
                            &mut store,
                            &format!("e{j}"),
                            "i",
                            self.out.dims(),
                            &strides,
                        );
                        format!("e{j}")
                    };
                    args.push(wgsl::load(&format!("in{}", 2 + j), &idx, *d));
                }
                store.line(&format!("out[i] = wgf_epi({});", args.join(", ")));
                e.wgsl_function(DType::F32)
            }
        };
        let v = |s: usize| format!("{s}u");
        let chunk = self.c_chunk.unwrap_or(cg);
        let split = match self.c_chunk {
            None => format!("let i = gi;\n    let c_lo = 0u;\n    let c_hi = {cg}u;"),
            Some(c) => {
                store = Writer::new();
                store.indent(1);
                store.line("out[gi] = acc;");
                let outputs = self.out.numel();
                format!(
                    "let i = gi % {outputs}u;\n    let c_lo = (gi / {outputs}u) * {c}u;\n    let c_hi = min(c_lo + {chunk}u, {cg}u);"
                )
            }
        };
        wgsl::fill_template(
            include_str!("../../../shaders/conv2d.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("TOTAL", v(self.out_shape().numel())),
                ("SPLIT", split),
                ("OW", v(ow)),
                ("OH", v(oh)),
                ("O", v(o_all)),
                ("OG", v(og)),
                ("CG", v(cg)),
                ("C", v(c_all)),
                ("KH", v(kh)),
                ("KW", v(kw)),
                ("H", format!("{h}")),
                ("W", format!("{wd}")),
                ("IY", self.window.wgsl_coord(0, "oy", "ki")),
                ("IX", self.window.wgsl_coord(1, "ox", "kj")),
                ("FUNC", func),
                ("STORE", store.finish()),
            ],
        )
    }
}

/// How a pooling window folds its elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// Maximum of the window's in-bounds elements; NaN propagates.
    Max,
    /// Mean of the window's in-bounds elements: padding is excluded from the count
    /// (PyTorch's `count_include_pad=False`).
    Avg,
}

impl PoolKind {
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Max => "max_pool2d",
            PoolKind::Avg => "avg_pool2d",
        }
    }
}

/// 2-D pooling of `[N, C, H, W]` (f32) with a window whose padding is at most half the kernel,
/// so every window holds at least one in-bounds element.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolKernel {
    pub kind: PoolKind,
    pub x: Shape,
    pub window: Window,
    pub out: Shape,
}

impl PoolKernel {
    /// Upper bound on the loop iterations one invocation runs (skipped padding rows and
    /// columns count too).
    pub fn loop_iterations(&self) -> u64 {
        let [kh, kw] = self.window.kernel;
        kh as u64 * (1 + kw as u64)
    }

    /// The scalar reference the fast kernel is tested against.
    #[doc(hidden)]
    pub fn reference(&self, x: &[u32]) -> Vec<u32> {
        let [_, _, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.out);
        let [kh, kw] = self.window.kernel;
        (0..self.out.numel())
            .map(|i| {
                let (ox, oy, nc) = (i % ow, (i / ow) % oh, i / (ow * oh));
                let mut vals = Vec::with_capacity(kh * kw);
                for ki in 0..kh {
                    let Some(y) = self.window.at(0, oy, ki, h) else {
                        continue;
                    };
                    for kj in 0..kw {
                        let Some(xx) = self.window.at(1, ox, kj, wd) else {
                            continue;
                        };
                        vals.push(x[(nc * h + y) * wd + xx]);
                    }
                }
                match self.kind {
                    PoolKind::Max => vals.iter().skip(1).fold(vals[0], |a, &v| {
                        binary_cpu(BinaryOp::Maximum, DType::F32, a, v)
                    }),
                    PoolKind::Avg => {
                        let sum: f32 = vals.iter().map(|&v| f32::from_bits(v)).sum();
                        (sum / vals.len() as f32).to_bits()
                    }
                }
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let [_, _, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.out);
        let mut bindings = Writer::new();
        wgsl::storage_binding(&mut bindings, 0, "in0", DType::F32);
        wgsl::storage_binding(&mut bindings, 1, "out", DType::F32);
        let (init, combine, finish) = match self.kind {
            // -inf is replaced by the first in-bounds element, which every window has.
            PoolKind::Max => (
                // -inf from the prelude's private bits (Tint rejects a constant -inf).
                "-bitcast<f32>(wgf_inf_bits)",
                "select(wgf_max(acc, v), v, count == 0u)",
                "acc",
            ),
            PoolKind::Avg => ("0.0", "acc + v", "acc / f32(count)"),
        };
        let v = |s: usize| format!("{s}u");
        wgsl::fill_template(
            include_str!("../../../shaders/pool2d.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("TOTAL", v(self.out.numel())),
                ("OW", v(ow)),
                ("OH", v(oh)),
                ("KH", v(self.window.kernel[0])),
                ("KW", v(self.window.kernel[1])),
                ("HU", v(h)),
                ("WU", v(wd)),
                ("H", format!("{h}")),
                ("W", format!("{wd}")),
                ("IY", self.window.wgsl_coord(0, "oy", "ki")),
                ("IX", self.window.wgsl_coord(1, "ox", "kj")),
                ("INIT", init.to_string()),
                ("COMBINE", combine.to_string()),
                ("FINISH", finish.to_string()),
            ],
        )
    }
}

fn dims4(s: &Shape) -> [usize; 4] {
    let d = s.dims();
    [d[0], d[1], d[2], d[3]]
}

/// conv2d's shape rule: f32 `x` `[N, C, H, W]` and `w` `[O, C / groups, KH, KW]` give
/// `[N, O, OH, OW]`.
fn conv2d_shape(
    window: &Window,
    groups: usize,
    (xs, dx): (&Shape, DType),
    (ws, dw): (&Shape, DType),
) -> Result<(Shape, DType), Reject> {
    if xs.rank() != 4 || ws.rank() != 4 || dx != DType::F32 || dw != DType::F32 {
        return Err(Reject::from(format!(
            "needs f32 x [N, C, H, W] and w [O, C/groups, KH, KW], got {dx} {xs} and {dw} {ws}"
        )));
    }
    let (xd, wd, g) = (xs.dims(), ws.dims(), groups);
    if g == 0 || xd[1] % g != 0 || wd[0] % g != 0 || wd[1] * g != xd[1] {
        return Err(Reject::from(format!(
            "{g} groups do not fit input channels {} and weight {ws} (needs C = groups * w.shape[1] and O divisible by groups)",
            xd[1]
        )));
    }
    if window.kernel != [wd[2], wd[3]] {
        return Err(Reject::from(format!(
            "window {:?} does not match weight {ws}",
            window.kernel
        )));
    }
    let [oh, ow] = window.out_hw([xd[2], xd[3]])?;
    Ok((Shape(vec![xd[0], wd[0], oh, ow]), DType::F32))
}

// ---------------------------------------------------------------- the family

/// Convolution and pooling over NCHW tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nn {
    /// NCHW × OIHW convolution.
    Conv2d {
        window: Window,
        groups: usize,
    },
    Pool {
        kind: PoolKind,
        window: Window,
    },
    /// conv2d's gradient with respect to its input `[N, C, H, W]` (`input_hw = [H, W]`),
    /// from `(dy, w)`.
    Conv2dBackpropInput {
        window: Window,
        groups: usize,
        input_hw: [usize; 2],
    },
    /// conv2d's gradient with respect to its weights, from `(x, dy)`.
    Conv2dBackpropFilter {
        window: Window,
        groups: usize,
    },
    /// A pool's gradient with respect to its input (`input_hw = [H, W]`), from `(x, dy)`
    /// (max) or `dy` (avg).
    PoolGrad {
        kind: PoolKind,
        window: Window,
        input_hw: [usize; 2],
    },
}

impl Family for Nn {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        match self {
            Nn::Conv2d { .. } => "conv2d",
            Nn::Pool { kind, .. } => kind.name(),
            Nn::Conv2dBackpropInput { .. } => backward::op_name(NnGradOp::ConvInput),
            Nn::Conv2dBackpropFilter { .. } => backward::op_name(NnGradOp::ConvFilter),
            Nn::PoolGrad { kind, .. } => backward::op_name(grad_op(*kind)),
        }
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(match self {
            Nn::Conv2d { .. }
            | Nn::Conv2dBackpropInput { .. }
            | Nn::Conv2dBackpropFilter { .. } => 2,
            Nn::PoolGrad {
                kind: PoolKind::Max,
                ..
            } => 2,
            Nn::Pool { .. } | Nn::PoolGrad { .. } => 1,
        })
    }

    /// f32 NCHW in, f32 NCHW out; the window must fit the padded input.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        match (self, inputs) {
            (Nn::Conv2d { window, groups }, [(xs, dx), (ws, dw)]) => {
                conv2d_shape(window, *groups, (xs, *dx), (ws, *dw))
            }
            (Nn::Pool { window, .. }, [(xs, dx)]) => {
                if xs.rank() != 4 || *dx != DType::F32 {
                    return Err(Reject::from(format!(
                        "needs f32 [N, C, H, W], got {dx} {xs}"
                    )));
                }
                let (kernel, padding) = (window.kernel, window.padding);
                if (0..2).any(|k| 2 * padding[k] > kernel[k]) {
                    return Err(Reject::from(format!(
                        "padding {padding:?} must be at most half of kernel {kernel:?}"
                    )));
                }
                if window.dilation != [1, 1] {
                    return Err(Reject::from(format!(
                        "pooling has no dilation, got {:?}",
                        window.dilation
                    )));
                }
                let d = xs.dims();
                let [oh, ow] = window.out_hw([d[2], d[3]])?;
                Ok((Shape(vec![d[0], d[1], oh, ow]), DType::F32))
            }
            (
                Nn::Conv2dBackpropInput {
                    window,
                    groups,
                    input_hw,
                },
                [(ys, dy), (ws, dw)],
            ) => Ok((
                backward::backprop_input_shape(window, *groups, *input_hw, (ys, *dy), (ws, *dw))?,
                DType::F32,
            )),
            (Nn::Conv2dBackpropFilter { window, groups }, [(xs, dx), (ys, dy)]) => Ok((
                backward::backprop_filter_shape(window, *groups, (xs, *dx), (ys, *dy))?,
                DType::F32,
            )),
            (
                Nn::PoolGrad {
                    kind,
                    window,
                    input_hw,
                },
                ins,
            ) => {
                let (x, dy) = match ins {
                    [(xs, dx), (ys, dy)] => (Some((xs, *dx)), (ys, *dy)),
                    [(ys, dy)] => (None, (ys, *dy)),
                    _ => return Err(Reject::from(format!("takes {} input(s)", self.arity()))),
                };
                Ok((
                    backward::pool_grad_shape(*kind, window, *input_hw, x, dy)?,
                    DType::F32,
                ))
            }
            _ => Err(Reject::from(format!(
                "takes {} input(s), {} given",
                self.arity(),
                inputs.len()
            ))),
        }
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(self, g, x)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        match *self {
            Nn::Conv2d { window, groups } => {
                let (first, sum) = Conv2dKernel {
                    x: cx.in_shape(0).clone(),
                    w: cx.in_shape(1).clone(),
                    window,
                    groups,
                    out: cx.shape.clone(),
                    epilogue: None,
                    c_chunk: None,
                    pool: None,
                }
                .passes();
                Ok(match sum {
                    None => cx.dispatch(Kernel::Conv2d(first)),
                    // Input channels in chunks, then the sum of the partial convolutions.
                    Some(sum) => {
                        let shape = first.out_shape();
                        let partial = cx.partial(Kernel::Conv2d(first), shape, cx.args.to_vec());
                        Lowered::Dispatch {
                            kernel: Kernel::Reduce(sum),
                            inputs: vec![partial],
                        }
                    }
                })
            }
            Nn::Pool { kind, window } => Ok(cx.dispatch(Kernel::Pool(PoolKernel {
                kind,
                x: cx.in_shape(0).clone(),
                window,
                out: cx.shape.clone(),
            }))),
            Nn::Conv2dBackpropInput { window, groups, .. } => {
                let k = NnGradKernel {
                    op: NnGradOp::ConvInput,
                    x: cx.shape.clone(),
                    w: cx.in_shape(1).clone(),
                    y: cx.in_shape(0).clone(),
                    window,
                    groups,
                    chunk: None,
                };
                Ok(lower_grad(cx, k))
            }
            Nn::Conv2dBackpropFilter { window, groups } => {
                let k = NnGradKernel {
                    op: NnGradOp::ConvFilter,
                    x: cx.in_shape(0).clone(),
                    w: cx.shape.clone(),
                    y: cx.in_shape(1).clone(),
                    window,
                    groups,
                    chunk: None,
                };
                Ok(lower_grad(cx, k))
            }
            Nn::PoolGrad { kind, window, .. } => {
                let y = cx.in_shape(cx.args.len() - 1).clone();
                let c = y.dims()[1];
                let [kh, kw] = window.kernel;
                Ok(cx.dispatch(Kernel::NnGrad(NnGradKernel {
                    op: grad_op(kind),
                    x: cx.shape.clone(),
                    w: Shape(vec![c, 1, kh, kw]),
                    y,
                    window,
                    groups: c.max(1),
                    chunk: None,
                })))
            }
        }
    }

    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        match self {
            // Zero input channels (or no batch, for the gradients): a sum over nothing.
            Nn::Conv2d { .. }
            | Nn::Conv2dBackpropInput { .. }
            | Nn::Conv2dBackpropFilter { .. } => EmptyInput::Fill(0),
            Nn::Pool { .. } | Nn::PoolGrad { .. } => EmptyInput::Impossible,
        }
    }

    /// conv2d: a transposed convolution for the input, a correlation of the input with `dy`
    /// for the weights; pooling: `dy` spread over each window (avg) or routed to its first
    /// maximum (max). See `nn/grad.rs`.
    /// The window tables of the backward ops hold the spatial sizes: those must be known
    /// when the graph is built (a run-time batch is fine).
    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        for &t in cx.inputs.iter().chain([&cx.dy]) {
            let dims = g.dims(t)?;
            if dims.iter().skip(2).any(|d| d.known().is_none()) {
                return Err(crate::Error::NotDifferentiable {
                    op: self.name().to_string(),
                    node: cx.name.to_string(),
                    message: format!(
                        "the gradient needs known spatial sizes, got {}",
                        crate::graph::dims_text(&dims)
                    ),
                });
            }
        }
        self.vjp(g, cx)
    }
}

/// The backward kernel of `k` and, when split, the reduction adding its chunks.
fn lower_grad(cx: &mut LowerCx<'_>, k: NnGradKernel) -> Lowered {
    match k.passes() {
        (first, None) => cx.dispatch(Kernel::NnGrad(first)),
        (first, Some(sum)) => {
            let shape = first.out_shape();
            let partial = cx.partial(Kernel::NnGrad(first), shape, cx.args.to_vec());
            Lowered::Dispatch {
                kernel: Kernel::Reduce(sum),
                inputs: vec![partial],
            }
        }
    }
}

fn grad_op(kind: PoolKind) -> NnGradOp {
    match kind {
        PoolKind::Max => NnGradOp::MaxPool,
        PoolKind::Avg => NnGradOp::AvgPool,
    }
}

impl KernelDef for Conv2dKernel {
    fn kind(&self) -> &'static str {
        "conv2d"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Nn
    }

    fn flops(&self, _out_elements: u64) -> Option<u64> {
        let per = self
            .w
            .dims()
            .get(1..4)?
            .iter()
            .map(|&d| d as u64)
            .product::<u64>();
        Some(2 * self.out.numel() as u64 * per)
    }

    fn epilogue_host(&self, _extra: &[&Shape]) -> Option<(&Shape, DType, bool)> {
        Some((
            &self.out,
            DType::F32,
            self.epilogue.is_none() && self.pool.is_none(),
        ))
    }

    fn set_epilogue(&mut self, epilogue: Option<Epilogue>) {
        self.epilogue = epilogue;
    }

    /// A max pool over this convolution's whole output, where the CPU runs the convolution
    /// by a direct kernel (which computes it by bands of rows).
    fn absorb(&mut self, consumer: &Kernel) -> bool {
        let Kernel::Pool(p) = consumer else {
            return false;
        };
        let fits = p.kind == PoolKind::Max
            && p.x == self.out
            && p.window.dilation == [1, 1]
            && self.pool.is_none()
            && self.pools_by_bands();
        if fits {
            self.pool = Some(Box::new(p.clone()));
        }
        fits
    }

    fn describe(&self) -> String {
        let mut text = format!("conv2d {} * {}", self.x, self.w);
        if let Some(e) = &self.epilogue {
            text = format!("{text} then {}", e.expr.describe());
        }
        if let Some(p) = &self.pool {
            text = format!("{text} then {}", p.describe());
        }
        text
    }

    fn wgsl(&self) -> String {
        Conv2dKernel::wgsl(self)
    }

    /// Convolutions are f32; a fused epilogue may still read f16.
    fn uses_f16(&self) -> bool {
        self.epilogue.as_ref().is_some_and(Epilogue::uses_f16)
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        Conv2dKernel::run_reference(self, inputs)
    }

    fn run_cpu_into(
        &self,
        inputs: &[crate::ops::family::CpuIn<'_>],
        out: &mut [u32],
    ) -> crate::Result<()> {
        Conv2dKernel::run_cpu_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out_shape().numel() as u64
    }

    fn loop_iterations(&self) -> Option<u64> {
        Some(Conv2dKernel::loop_iterations(self))
    }
}

impl KernelDef for PoolKernel {
    fn kind(&self) -> &'static str {
        "pool"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Nn
    }

    fn describe(&self) -> String {
        format!(
            "{} {:?} of {}",
            self.kind.name(),
            self.window.kernel,
            self.x
        )
    }

    fn wgsl(&self) -> String {
        PoolKernel::wgsl(self)
    }

    /// Pooling is f32 only.
    fn uses_f16(&self) -> bool {
        false
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let mut out = vec![0; self.out.numel()];
        let ins = [crate::ops::family::CpuIn::Words(
            inputs.first().copied().unwrap_or_default(),
        )];
        PoolKernel::run_cpu_into(self, &ins, &mut out)?;
        Ok(out)
    }

    fn run_cpu_into(
        &self,
        inputs: &[crate::ops::family::CpuIn<'_>],
        out: &mut [u32],
    ) -> crate::Result<()> {
        PoolKernel::run_cpu_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out.numel() as u64
    }

    fn loop_iterations(&self) -> Option<u64> {
        Some(PoolKernel::loop_iterations(self))
    }
}
