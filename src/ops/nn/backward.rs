//! The backward primitives of conv2d and pooling: `conv2d_backprop_input`,
//! `conv2d_backprop_filter`, `max_pool2d_grad` and `avg_pool2d_grad` (TensorFlow's names),
//! their shape rules and their one kernel type, [`NnGradKernel`] (WGSL here, CPU in
//! `backward_cpu.rs`).
//!
//! The gradient rules of conv2d and the pools (`grad.rs`) build these, so a training step
//! runs one kernel per gradient instead of the pad/stack/cumsum/transposed-convolution
//! chains of the composite rules, which stay in `grad.rs` as the reference the tests check
//! these kernels against.
//!
//! GPU kernels gather (one invocation per result element, no atomics), so every run gives
//! the same bits. A kernel whose loop would pass [`LOOP_BUDGET`] sums a chunk of it and
//! writes `[chunks, ..out]`; a reduction adds the chunks (as conv2d splits its channels).

use super::{dims4, PoolKind, Window, LOOP_BUDGET};
use crate::ops::family::{KernelClass, KernelDef};
use crate::ops::wgsl::{self, Writer};
use crate::ops::{Pass, ReduceKernel, ReduceOp};
use crate::{DType, Shape};

/// Which gradient an [`NnGradKernel`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NnGradOp {
    /// Inputs `(dy, w)`, result `dx` `[N, C, H, W]`.
    ConvInput,
    /// Inputs `(x, dy)`, result `dw` `[O, C / groups, KH, KW]`.
    ConvFilter,
    /// Inputs `(x, dy)`, result `dx`: each window's `dy` routed to its first maximum.
    MaxPool,
    /// Input `dy`, result `dx`: each window's `dy / count` spread over its in-bounds cells.
    AvgPool,
}

/// The gradient of a forward conv2d or pool with input `x`, weight `w` (conv only) and
/// output `y`.
#[derive(Debug, Clone, PartialEq)]
pub struct NnGradKernel {
    pub op: NnGradOp,
    /// The forward input's shape `[N, C, H, W]`.
    pub x: Shape,
    /// The forward weight's shape `[O, C / groups, KH, KW]` (pools: `[C, 1, KH, KW]`).
    pub w: Shape,
    /// The forward output's shape `[N, O, OH, OW]`.
    pub y: Shape,
    pub window: Window,
    pub groups: usize,
    /// When set, the kernel sums this many iterations of its outer loop (output channels
    /// for the input gradient, `(n, oy, ox)` positions for the filter gradient) and writes
    /// `[chunks, ..out]` (set by [`NnGradKernel::passes`]).
    pub chunk: Option<usize>,
}

impl NnGradKernel {
    /// The result's shape (without the chunk axis).
    pub fn out(&self) -> &Shape {
        match self.op {
            NnGradOp::ConvFilter => &self.w,
            NnGradOp::ConvInput | NnGradOp::MaxPool | NnGradOp::AvgPool => &self.x,
        }
    }

    /// Length of the loop a split cuts: output channels per group (input gradient) or
    /// `N·OH·OW` (filter gradient); 1 for the pools, which are not split.
    pub(super) fn loop_len(&self) -> usize {
        let [n, o, oh, ow] = dims4(&self.y);
        match self.op {
            NnGradOp::ConvInput => o / self.groups.max(1),
            NnGradOp::ConvFilter => n * oh * ow,
            NnGradOp::MaxPool | NnGradOp::AvgPool => 1,
        }
    }

    /// Iterations per step of the split loop.
    fn per_step(&self) -> u64 {
        let [kh, kw] = self.window.kernel.map(|k| k as u64);
        match self.op {
            NnGradOp::ConvInput => 1 + kh * (1 + kw),
            NnGradOp::ConvFilter => 1,
            NnGradOp::MaxPool | NnGradOp::AvgPool => 1,
        }
    }

    /// Windows that can cover one input element, per axis.
    fn covering(&self) -> [u64; 2] {
        let [_, _, oh, ow] = dims4(&self.y);
        let w = &self.window;
        [
            w.kernel[0].div_ceil(w.stride[0].max(1)).min(oh) as u64,
            w.kernel[1].div_ceil(w.stride[1].max(1)).min(ow) as u64,
        ]
    }

    /// Upper bound on the loop iterations one invocation runs.
    pub fn loop_iterations(&self) -> u64 {
        match self.op {
            NnGradOp::ConvInput | NnGradOp::ConvFilter => {
                self.chunk.unwrap_or(self.loop_len()).min(self.loop_len()) as u64 * self.per_step()
            }
            NnGradOp::MaxPool | NnGradOp::AvgPool => {
                let [cy, cx] = self.covering();
                let [kh, kw] = self.window.kernel.map(|k| k as u64);
                let inner = match self.op {
                    NnGradOp::MaxPool => 1 + kh * (1 + kw),
                    _ => 1,
                };
                cy * (1 + cx * inner)
            }
        }
    }

    /// Number of chunks (1 unless split).
    pub fn chunks(&self) -> usize {
        self.chunk
            .map_or(1, |c| self.loop_len().div_ceil(c.max(1)).max(1))
    }

    /// The shape the kernel writes: the result's, after the chunk axis when split.
    pub fn out_shape(&self) -> Shape {
        match self.chunk {
            None => self.out().clone(),
            Some(_) => {
                let mut d = vec![self.chunks()];
                d.extend_from_slice(self.out().dims());
                Shape(d)
            }
        }
    }

    /// The kernel and, when its loop would pass [`LOOP_BUDGET`] (or, for the filter
    /// gradient, when a few result elements would each loop over the whole batch), the
    /// reduction that adds its chunks.
    pub fn passes(self) -> (NnGradKernel, Option<ReduceKernel>) {
        let len = self.loop_len();
        let chunk = match self.op {
            NnGradOp::ConvInput => (LOOP_BUDGET / self.per_step()).max(1) as usize,
            // Enough chunks that a GPU has ~16k invocations, none shorter than 1024 steps.
            NnGradOp::ConvFilter => {
                let want = (1usize << 14).div_ceil(self.w.numel().max(1));
                len.div_ceil(want.max(1)).clamp(1024, LOOP_BUDGET as usize)
            }
            NnGradOp::MaxPool | NnGradOp::AvgPool => return (self, None),
        };
        if len <= chunk || self.chunk.is_some() {
            return (self, None);
        }
        let partial = NnGradKernel {
            chunk: Some(chunk),
            ..self.clone()
        };
        let sum = ReduceKernel {
            op: ReduceOp::Sum,
            in_shape: partial.out_shape(),
            dtype: DType::F32,
            axes: vec![0],
            out_shape: self.out().clone(),
            epilogue: None,
            prologue: None,
            pass: Pass::Whole,
        };
        (partial, Some(sum))
    }

    pub fn wgsl(&self) -> String {
        let [_, c, h, wd] = dims4(&self.x);
        let [_, cg, kh, kw] = dims4(&self.w);
        let [_, o, oh, ow] = dims4(&self.y);
        let og = o / self.groups.max(1);
        let win = &self.window;
        let u = |v: usize| format!("{v}u");
        let i = |v: usize| format!("{v}");
        let mut bindings = Writer::new();
        let mut body = Writer::new();
        body.indent(1);
        let (in_names, template): (&[&str], &str) = match self.op {
            NnGradOp::ConvInput => (
                &["dy", "w"],
                include_str!("../../../shaders/conv2d_grad.wgsl"),
            ),
            NnGradOp::ConvFilter => (
                &["x", "dy"],
                include_str!("../../../shaders/conv2d_grad.wgsl"),
            ),
            NnGradOp::MaxPool => (
                &["x", "dy"],
                include_str!("../../../shaders/pool2d_grad.wgsl"),
            ),
            NnGradOp::AvgPool => (&["dy"], include_str!("../../../shaders/pool2d_grad.wgsl")),
        };
        for (j, name) in in_names.iter().enumerate() {
            wgsl::storage_binding(&mut bindings, j, name, DType::F32);
        }
        wgsl::storage_binding(&mut bindings, in_names.len(), "out", DType::F32);
        let (sh, sw) = (win.stride[0], win.stride[1]);
        let (ph, pw) = (win.padding[0], win.padding[1]);
        let (dh, dw) = (win.dilation[0], win.dilation[1]);
        match self.op {
            NnGradOp::ConvInput => {
                body.line(&format!("let ix = i32(i % {wd}u);"));
                body.line(&format!("let iy = i32((i / {wd}u) % {h}u);"));
                body.line(&format!("let c = (i / {}u) % {c}u;", h * wd));
                body.line(&format!("let n = i / {}u;", c * h * wd));
                body.line(&format!("let ob = (c / {cg}u) * {og}u;"));
                body.line(&format!("let cl = c % {cg}u;"));
                body.line("for (var oo = lo; oo < hi; oo = oo + 1u) {");
                body.line("    let oc = ob + oo;");
                body.line(&format!(
                    "    for (var ki = 0u; ki < {kh}u; ki = ki + 1u) {{"
                ));
                body.line(&format!("        let ty = iy + {ph} - i32(ki * {dh}u);"));
                body.line(&format!(
                    "        if (ty < 0 || ty % {sh} != 0 || ty / {sh} >= {oh}) {{ continue; }}"
                ));
                body.line(&format!("        let oy = u32(ty / {sh});"));
                body.line(&format!(
                    "        for (var kj = 0u; kj < {kw}u; kj = kj + 1u) {{"
                ));
                body.line(&format!(
                    "            let tx = ix + {pw} - i32(kj * {dw}u);"
                ));
                body.line(&format!(
                    "            if (tx < 0 || tx % {sw} != 0 || tx / {sw} >= {ow}) {{ continue; }}"
                ));
                body.line(&format!("            let ox = u32(tx / {sw});"));
                body.line(&format!(
                    "            acc = acc + dy[((n * {o}u + oc) * {oh}u + oy) * {ow}u + ox] * w[((oc * {cg}u + cl) * {kh}u + ki) * {kw}u + kj];"
                ));
                body.line("        }");
                body.line("    }");
                body.line("}");
            }
            NnGradOp::ConvFilter => {
                let p = oh * ow;
                body.line(&format!("let kj = i % {kw}u;"));
                body.line(&format!("let ki = (i / {kw}u) % {kh}u;"));
                body.line(&format!("let cl = (i / {}u) % {cg}u;", kh * kw));
                body.line(&format!("let o = i / {}u;", cg * kh * kw));
                body.line(&format!("let c = (o / {og}u) * {cg}u + cl;"));
                body.line("for (var q = lo; q < hi; q = q + 1u) {");
                body.line(&format!("    let nn = q / {p}u;"));
                body.line(&format!("    let pp = q % {p}u;"));
                body.line(&format!(
                    "    let iy = i32((pp / {ow}u) * {sh}u + ki * {dh}u) - {ph};"
                ));
                body.line(&format!(
                    "    let ix = i32((pp % {ow}u) * {sw}u + kj * {dw}u) - {pw};"
                ));
                body.line(&format!(
                    "    if (iy < 0 || iy >= {h} || ix < 0 || ix >= {wd}) {{ continue; }}"
                ));
                body.line(&format!(
                    "    acc = acc + dy[(nn * {o}u + o) * {p}u + pp] * x[((nn * {c}u + c) * {h}u + u32(iy)) * {wd}u + u32(ix)];"
                ));
                body.line("}");
            }
            NnGradOp::MaxPool => {
                body.indent(2);
                body.line("var best = 0.0;");
                body.line("var at = -1;");
                body.line(&format!("for (var ki = 0; ki < {kh}; ki = ki + 1) {{"));
                body.line("    let yy = y0 + ki;");
                body.line(&format!("    if (yy < 0 || yy >= {h}) {{ continue; }}"));
                body.line(&format!("    for (var kj = 0; kj < {kw}; kj = kj + 1) {{"));
                body.line("        let xx = x0 + kj;");
                body.line(&format!(
                    "        if (xx < 0 || xx >= {wd}) {{ continue; }}"
                ));
                body.line(&format!(
                    "        let v = x[(nc * {h}u + u32(yy)) * {wd}u + u32(xx)];"
                ));
                // The first cell, then a later one only if strictly greater or the first NaN.
                body.line(
                    "        if (at < 0 || (!wgf_isnan(best) && (wgf_isnan(v) || v > best))) {",
                );
                body.line("            best = v;");
                body.line(&format!("            at = yy * {wd} + xx;"));
                body.line("        }");
                body.line("    }");
                body.line("}");
                body.line(&format!("if (at == iy * {wd} + ix) {{"));
                body.line("    acc = acc + g;");
                body.line("}");
            }
            NnGradOp::AvgPool => {
                body.indent(2);
                body.line(&format!("let rows = min(y0 + {kh}, {h}) - max(y0, 0);"));
                body.line(&format!("let cols = min(x0 + {kw}, {wd}) - max(x0, 0);"));
                body.line("acc = acc + g / f32(rows * cols);");
            }
        }
        let mut values = vec![
            ("BINDINGS", bindings.finish()),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("TOTAL", u(self.out_shape().numel())),
            ("BODY", body.finish()),
        ];
        match self.op {
            NnGradOp::ConvInput | NnGradOp::ConvFilter => {
                let len = self.loop_len();
                values.push(("OUTPUTS", u(self.out().numel().max(1))));
                values.push(("CHUNK", u(self.chunk.unwrap_or(len).max(1))));
                values.push(("LOOP", u(len)));
            }
            NnGradOp::MaxPool | NnGradOp::AvgPool => {
                values.extend([
                    ("WU", u(wd)),
                    ("HU", u(h)),
                    ("OHU", u(oh)),
                    ("OWU", u(ow)),
                    ("OH", i(oh)),
                    ("OW", i(ow)),
                    ("KH", i(kh)),
                    ("KW", i(kw)),
                    ("SH", i(sh)),
                    ("SW", i(sw)),
                    ("PH", i(ph)),
                    ("PW", i(pw)),
                ]);
            }
        }
        wgsl::fill_template(template, &values)
    }

    /// Floating-point operations: a multiply-add per (result, window tap, channel) pair, as
    /// the forward convolution; `None` for the pools.
    pub fn flops(&self) -> Option<u64> {
        match self.op {
            NnGradOp::ConvInput | NnGradOp::ConvFilter => {
                let [_, cg, kh, kw] = dims4(&self.w);
                Some(2 * self.y.numel() as u64 * (cg * kh * kw) as u64)
            }
            NnGradOp::MaxPool | NnGradOp::AvgPool => None,
        }
    }
}

/// The name of the op a kernel computes (messages and traces).
pub fn op_name(op: NnGradOp) -> &'static str {
    match op {
        NnGradOp::ConvInput => "conv2d_backprop_input",
        NnGradOp::ConvFilter => "conv2d_backprop_filter",
        NnGradOp::MaxPool => "max_pool2d_grad",
        NnGradOp::AvgPool => "avg_pool2d_grad",
    }
}

impl KernelDef for NnGradKernel {
    fn kind(&self) -> &'static str {
        "nn_grad"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Nn
    }

    fn flops(&self, _out_elements: u64) -> Option<u64> {
        NnGradKernel::flops(self)
    }

    fn describe(&self) -> String {
        match self.op {
            NnGradOp::ConvInput | NnGradOp::ConvFilter => {
                format!("{} of conv2d {} * {}", op_name(self.op), self.x, self.w)
            }
            NnGradOp::MaxPool | NnGradOp::AvgPool => format!(
                "{} {:?} of {}",
                op_name(self.op),
                self.window.kernel,
                self.x
            ),
        }
    }

    fn wgsl(&self) -> String {
        NnGradKernel::wgsl(self)
    }

    fn uses_f16(&self) -> bool {
        false
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let ins: Vec<_> = inputs
            .iter()
            .map(|w| crate::ops::family::CpuIn::Words(w))
            .collect();
        let mut out = vec![0; self.out_shape().numel()];
        self.run_cpu_into(&ins, &mut out)?;
        Ok(out)
    }

    fn run_cpu_into(
        &self,
        inputs: &[crate::ops::family::CpuIn<'_>],
        out: &mut [u32],
    ) -> crate::Result<()> {
        NnGradKernel::run_cpu_into(self, inputs, out)
    }

    fn invocations(&self) -> u64 {
        self.out_shape().numel() as u64
    }

    fn loop_iterations(&self) -> Option<u64> {
        Some(NnGradKernel::loop_iterations(self))
    }
}

/// The forward window op's output size must be exactly `y`'s.
fn check_window(window: &Window, hw: [usize; 2], y: &[usize]) -> Result<(), String> {
    let out = window.out_hw(hw)?;
    if out != [y[2], y[3]] {
        return Err(format!(
            "a window {:?} (stride {:?}, padding {:?}, dilation {:?}) over {hw:?} gives {out:?}, but dy is {}x{}",
            window.kernel, window.stride, window.padding, window.dilation, y[2], y[3]
        ));
    }
    Ok(())
}

fn f32_rank4(what: &str, (s, d): (&Shape, DType)) -> Result<[usize; 4], String> {
    if s.rank() != 4 || d != DType::F32 {
        return Err(format!("needs f32 {what} of rank 4, got {d} {s}"));
    }
    Ok(dims4(s))
}

/// `conv2d_backprop_input(dy, w)`: `[N, O, OH, OW]` and `[O, C / groups, KH, KW]` give
/// `[N, C, H, W]` with `[H, W] = hw`.
pub(super) fn backprop_input_shape(
    window: &Window,
    groups: usize,
    hw: [usize; 2],
    dy: (&Shape, DType),
    w: (&Shape, DType),
) -> Result<Shape, String> {
    let y = f32_rank4("dy [N, O, OH, OW]", dy)?;
    let wd = f32_rank4("w [O, C/groups, KH, KW]", w)?;
    if groups == 0 || wd[0] % groups != 0 || wd[0] != y[1] {
        return Err(format!(
            "{groups} groups do not fit weight {} and dy {} (needs O = w.shape[0] = dy.shape[1], divisible by groups)",
            w.0, dy.0
        ));
    }
    if window.kernel != [wd[2], wd[3]] {
        return Err(format!(
            "window {:?} does not match weight {}",
            window.kernel, w.0
        ));
    }
    check_window(window, hw, &y)?;
    Ok(Shape(vec![y[0], wd[1] * groups, hw[0], hw[1]]))
}

/// `conv2d_backprop_filter(x, dy)`: `[N, C, H, W]` and `[N, O, OH, OW]` give
/// `[O, C / groups, KH, KW]`.
pub(super) fn backprop_filter_shape(
    window: &Window,
    groups: usize,
    x: (&Shape, DType),
    dy: (&Shape, DType),
) -> Result<Shape, String> {
    let xd = f32_rank4("x [N, C, H, W]", x)?;
    let y = f32_rank4("dy [N, O, OH, OW]", dy)?;
    if groups == 0 || xd[1] % groups != 0 || y[1] % groups != 0 || xd[0] != y[0] {
        return Err(format!(
            "{groups} groups do not fit x {} and dy {} (needs the same batch, channels divisible by groups)",
            x.0, dy.0
        ));
    }
    check_window(window, [xd[2], xd[3]], &y)?;
    Ok(Shape(vec![
        y[1],
        xd[1] / groups,
        window.kernel[0],
        window.kernel[1],
    ]))
}

/// The pools' rules on a window (as the forward pool checks them).
pub(super) fn pool_window(window: &Window) -> Result<(), String> {
    let (kernel, padding) = (window.kernel, window.padding);
    if (0..2).any(|k| 2 * padding[k] > kernel[k]) {
        return Err(format!(
            "padding {padding:?} must be at most half of kernel {kernel:?}"
        ));
    }
    if window.dilation != [1, 1] {
        return Err(format!(
            "pooling has no dilation, got {:?}",
            window.dilation
        ));
    }
    Ok(())
}

/// `max_pool2d_grad(x, dy)` (`x` given) or `avg_pool2d_grad(dy)` (`hw` given): the shape
/// of the forward input.
pub(super) fn pool_grad_shape(
    kind: PoolKind,
    window: &Window,
    hw: [usize; 2],
    x: Option<(&Shape, DType)>,
    dy: (&Shape, DType),
) -> Result<Shape, String> {
    pool_window(window)?;
    let y = f32_rank4("dy [N, C, OH, OW]", dy)?;
    let xd = match (kind, x) {
        (PoolKind::Max, Some(x)) => {
            let xd = f32_rank4("x [N, C, H, W]", x)?;
            if [xd[0], xd[1]] != [y[0], y[1]] || [xd[2], xd[3]] != hw {
                return Err(format!(
                    "x {} and dy {} differ in batch or channels, or x is not {hw:?}",
                    x.0, dy.0
                ));
            }
            xd
        }
        _ => [y[0], y[1], hw[0], hw[1]],
    };
    check_window(window, [xd[2], xd[3]], &y)?;
    Ok(Shape(xd.to_vec()))
}
