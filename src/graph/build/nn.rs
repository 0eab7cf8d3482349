//! Reduction and NN builders: prod/all/any/argmax/argmin primitives, and the composites
//! var, std, logsumexp, log_softmax, layer_norm, linear, batch_norm (built from primitives so
//! fusion sees through them), plus the conv2d and pooling primitives.

use super::Axes;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::{reduce, BinaryOp, Op, PoolKind, ReduceOp, UnaryOp, Window};
use crate::ops::{Declared, Elementwise, Nn, Scan, ScanOp};
use crate::{DType, Error, HostTensor, Result, Shape};
use std::panic::Location;

type Loc = &'static Location<'static>;

/// conv2d geometry: per spatial axis `[h, w]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dOptions {
    pub stride: [usize; 2],
    /// Zero padding on both sides.
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    /// Input and output channels are split into this many independent groups.
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

impl Graph {
    /// Product over `axes` (integers wrap).
    #[track_caller]
    pub fn prod(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, x, axes.into(), keepdims, Location::caller())
    }

    /// Whether every element over `axes` is true (non-bool input is tested `!= 0` in the
    /// kernel, not through a cast; NaN is true).
    #[track_caller]
    pub fn all(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::All, x, axes.into(), keepdims, Location::caller())
    }

    /// Whether any element over `axes` is true.
    #[track_caller]
    pub fn any(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Any, x, axes.into(), keepdims, Location::caller())
    }

    /// i32 index of the first maximum along `axis`, or of the flattened tensor with `None`.
    /// NaN counts as the maximum (the first NaN's index is returned), as in NumPy.
    #[track_caller]
    pub fn argmax(&mut self, x: Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        self.arg_reduce(ReduceOp::ArgMax, x, axis, keepdims, Location::caller())
    }

    /// i32 index of the first minimum; NaN counts as the minimum, as in NumPy.
    #[track_caller]
    pub fn argmin(&mut self, x: Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        self.arg_reduce(ReduceOp::ArgMin, x, axis, keepdims, Location::caller())
    }

    /// Cumulative sum along `axis` (NumPy's `cumsum`; f32, i32, u32; integers wrap).
    #[track_caller]
    pub fn cumsum(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        self.cumulative(ScanOp::Sum, x, axis, false, false)
    }

    /// Cumulative product along `axis` (NumPy's `cumprod`).
    #[track_caller]
    pub fn cumprod(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        self.cumulative(ScanOp::Prod, x, axis, false, false)
    }

    /// A cumulative sum or product along `axis` with TensorFlow's options: `exclusive` leaves
    /// each element out of its own output (the first output is 0 or 1), `reverse` scans from
    /// the end of the axis.
    #[track_caller]
    pub fn cumulative(
        &mut self,
        op: ScanOp,
        x: Tensor,
        axis: isize,
        exclusive: bool,
        reverse: bool,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let shape = &self.arg(x, op.name(), loc)?.shape;
        let axis = shape.axis(axis).ok_or_else(|| {
            Error::build(
                op.name(),
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
        })?;
        let scan = Scan {
            op,
            axis,
            exclusive,
            reverse,
        };
        self.add_op(
            Op::Scan(scan),
            &[x],
            Declared::none(),
            Site::new(op.name(), loc),
        )
    }

    /// Variance over `axes` with `ddof` delta degrees of freedom (f32): `Σ(x - mean)² / (N - ddof)`,
    /// two-pass for accuracy. `N <= ddof` divides by zero (inf or NaN), like NumPy.
    #[track_caller]
    pub fn var(
        &mut self,
        x: Tensor,
        axes: impl Into<Axes>,
        ddof: usize,
        keepdims: bool,
    ) -> Result<Tensor> {
        self.var_at(x, axes.into(), ddof, keepdims, "var", Location::caller())
    }

    /// Standard deviation: `sqrt(var(x, axes, ddof))`.
    #[track_caller]
    pub fn std(
        &mut self,
        x: Tensor,
        axes: impl Into<Axes>,
        ddof: usize,
        keepdims: bool,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let v = self.var_at(x, axes.into(), ddof, keepdims, "std", loc)?;
        self.name_scope("std", |g| g.unary(UnaryOp::Sqrt, v, loc))
    }

    /// `log(Σ exp(x))` over `axes`, stable: the max is subtracted first (and replaced by 0 where
    /// it is infinite, so all `-inf` gives `-inf` and `+inf` gives `+inf`, like SciPy).
    #[track_caller]
    pub fn logsumexp(
        &mut self,
        x: Tensor,
        axes: impl Into<Axes>,
        keepdims: bool,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let axes = axes.into();
        let (_, out) = self.float_reduce_shape("logsumexp", x, &axes, keepdims, loc)?;
        self.name_scope("logsumexp", |g| {
            let m = g.reduce(ReduceOp::Max, x, axes.clone(), true, loc)?;
            let shift = g.finite_or_zero(m, loc)?;
            let d = g.binary(BinaryOp::Sub, x, shift, loc)?;
            let e = g.unary(UnaryOp::Exp, d, loc)?;
            let s = g.reduce(ReduceOp::Sum, e, axes.clone(), true, loc)?;
            let l = g.unary(UnaryOp::Log, s, loc)?;
            let y = g.binary(BinaryOp::Add, l, shift, loc)?;
            g.view(y, out, "reshape", loc)
        })
    }

    /// `x - logsumexp(x, axis)`, stable for large inputs.
    #[track_caller]
    pub fn log_softmax(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        self.float_reduce_shape("log_softmax", x, &Axes::List(vec![axis]), true, loc)?;
        self.name_scope("log_softmax", |g| {
            let m = g.reduce(ReduceOp::Max, x, Axes::List(vec![axis]), true, loc)?;
            let shift = g.finite_or_zero(m, loc)?;
            let d = g.binary(BinaryOp::Sub, x, shift, loc)?;
            let e = g.unary(UnaryOp::Exp, d, loc)?;
            let s = g.reduce(ReduceOp::Sum, e, Axes::List(vec![axis]), true, loc)?;
            let l = g.unary(UnaryOp::Log, s, loc)?;
            g.binary(BinaryOp::Sub, d, l, loc)
        })
    }

    /// Layer normalisation over `axis`: `(x - mean) / sqrt(var + eps) * gamma + beta`, biased
    /// variance; `gamma`/`beta` broadcast against `x` (usually shape `[D]` for the last axis).
    #[track_caller]
    pub fn layer_norm(
        &mut self,
        x: Tensor,
        gamma: Option<Tensor>,
        beta: Option<Tensor>,
        axis: isize,
        eps: f32,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let axes = Axes::List(vec![axis]);
        self.float_reduce_shape("layer_norm", x, &axes, true, loc)?;
        self.name_scope("layer_norm", |g| {
            let m = g.reduce(ReduceOp::Mean, x, axes.clone(), true, loc)?;
            let d = g.binary(BinaryOp::Sub, x, m, loc)?;
            let sq = g.binary(BinaryOp::Mul, d, d, loc)?;
            let v = g.reduce(ReduceOp::Mean, sq, axes.clone(), true, loc)?;
            let e = g.scalar_as(x, eps, loc)?;
            let ve = g.binary(BinaryOp::Add, v, e, loc)?;
            let sd = g.unary(UnaryOp::Sqrt, ve, loc)?;
            let mut y = g.binary(BinaryOp::Div, d, sd, loc)?;
            if let Some(s) = gamma {
                y = g.binary(BinaryOp::Mul, y, s, loc)?;
            }
            if let Some(b) = beta {
                y = g.binary(BinaryOp::Add, y, b, loc)?;
            }
            Ok(y)
        })
    }

    /// `x @ w + b` with `w` of shape `[in, out]` (not PyTorch's `[out, in]`) and `b` of `[out]`.
    #[track_caller]
    pub fn linear(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>) -> Result<Tensor> {
        let loc = Location::caller();
        self.name_scope("linear", |g| {
            let y = g.matmul_at(x, w, "linear", loc)?;
            match b {
                Some(b) => g.binary(BinaryOp::Add, y, b, loc),
                None => Ok(y),
            }
        })
    }

    /// Inference batch norm over channel axis 1 of `[N, C, ...]`: each of `mean`, `var`,
    /// `gamma`, `beta` has shape `[C]`; `(x - mean) / sqrt(var + eps) * gamma + beta`.
    #[track_caller]
    pub fn batch_norm(
        &mut self,
        x: Tensor,
        mean: Tensor,
        var: Tensor,
        gamma: Tensor,
        beta: Tensor,
        eps: f32,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let node = self.arg(x, "batch_norm", loc)?;
        let (shape, dtype) = (node.shape.clone(), node.dtype);
        if shape.rank() < 2 || !dtype.is_float() {
            return Err(Error::build(
                "batch_norm",
                loc,
                format!("needs f32 or f16 [N, C, ...], got {dtype} {shape}"),
            ));
        }
        let c = shape.dims()[1];
        let mut pshape = vec![1; shape.rank()];
        pshape[1] = c;
        for p in [mean, var, gamma, beta] {
            let ps = &self.arg(p, "batch_norm", loc)?.shape;
            if ps.dims() != [c] {
                return Err(Error::build(
                    "batch_norm",
                    loc,
                    format!("parameters must have shape [{c}], got {ps}"),
                ));
            }
        }
        self.name_scope("batch_norm", |g| {
            let [m, v, s, b] =
                [mean, var, gamma, beta].map(|p| g.view(p, Shape(pshape.clone()), "reshape", loc));
            let e = g.scalar_as(x, eps, loc)?;
            let ve = g.binary(BinaryOp::Add, v?, e, loc)?;
            let sd = g.unary(UnaryOp::Sqrt, ve, loc)?;
            let d = g.binary(BinaryOp::Sub, x, m?, loc)?;
            let n = g.binary(BinaryOp::Div, d, sd, loc)?;
            let y = g.binary(BinaryOp::Mul, n, s?, loc)?;
            g.binary(BinaryOp::Add, y, b?, loc)
        })
    }

    /// 2-D convolution (cross-correlation, like PyTorch): `x` `[N, C, H, W]`, `w`
    /// `[O, C / groups, KH, KW]`, optional `bias` `[O]`; f32. Zero padding.
    #[track_caller]
    pub fn conv2d(
        &mut self,
        x: Tensor,
        w: Tensor,
        bias: Option<Tensor>,
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let window = Window {
            kernel: [0, 0],
            stride: opts.stride,
            padding: opts.padding,
            dilation: opts.dilation,
        };
        // The kernel size is the weight's; the family's rule checks the rest.
        let ws = self.arg(w, "conv2d", loc)?.shape.clone();
        let window = match ws.dims() {
            [_, _, kh, kw] => Window {
                kernel: [*kh, *kw],
                ..window
            },
            _ => window,
        };
        let op = Op::Nn(Nn::Conv2d {
            window,
            groups: opts.groups,
        });
        let y = self.add_op(op, &[x, w], Declared::none(), Site::new("conv2d", loc))?;
        match bias {
            None => Ok(y),
            Some(b) => {
                let o = self.arg(y, "conv2d", loc)?.shape.dims()[1];
                let bs = &self.arg(b, "conv2d", loc)?.shape;
                if bs.dims() != [o] {
                    return Err(Error::build(
                        "conv2d",
                        loc,
                        format!("bias must have shape [{o}], got {bs}"),
                    ));
                }
                let b4 = self.view(b, Shape(vec![1, o, 1, 1]), "reshape", loc)?;
                self.binary(BinaryOp::Add, y, b4, loc)
            }
        }
    }

    /// 2-D max pooling over `[N, C, H, W]` (f32); padding (at most half the kernel) never wins.
    /// NaN propagates.
    #[track_caller]
    pub fn max_pool2d(
        &mut self,
        x: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        self.pool(
            PoolKind::Max,
            x,
            kernel,
            stride,
            padding,
            Location::caller(),
        )
    }

    /// 2-D average pooling; padded positions are excluded from each window's count
    /// (PyTorch's `count_include_pad=False`).
    #[track_caller]
    pub fn avg_pool2d(
        &mut self,
        x: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        self.pool(
            PoolKind::Avg,
            x,
            kernel,
            stride,
            padding,
            Location::caller(),
        )
    }

    fn pool(
        &mut self,
        kind: PoolKind,
        x: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        loc: Loc,
    ) -> Result<Tensor> {
        let window = Window {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
        };
        let op = Op::Nn(Nn::Pool { kind, window });
        self.add_op(op, &[x], Declared::none(), Site::new(kind.name(), loc))
    }

    /// The gradient of [`Graph::conv2d`] (without bias) with respect to its input, from the
    /// output's gradient `dy` `[N, O, OH, OW]` and the weights `w` `[O, C / groups, KH, KW]`:
    /// `[N, C, H, W]` with `[H, W] = input_hw`, the forward input's size (several sizes give
    /// the same output size when the stride is above 1). TensorFlow's
    /// `conv2d_backprop_input`; one kernel on every device.
    #[track_caller]
    pub fn conv2d_backprop_input(
        &mut self,
        dy: Tensor,
        w: Tensor,
        input_hw: [usize; 2],
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let ws = self.arg(w, "conv2d_backprop_input", loc)?.shape.clone();
        let kernel = match ws.dims() {
            [_, _, kh, kw] => [*kh, *kw],
            _ => [0, 0],
        };
        let op = Op::Nn(Nn::Conv2dBackpropInput {
            window: Window::conv(kernel, &opts),
            groups: opts.groups,
            input_hw,
        });
        self.add_op(
            op,
            &[dy, w],
            Declared::none(),
            Site::new("conv2d_backprop_input", loc),
        )
    }

    /// The gradient of [`Graph::conv2d`] with respect to its weights (`[O, C / groups, KH,
    /// KW]` with `[KH, KW] = kernel`), from its input `x` `[N, C, H, W]` and the output's
    /// gradient `dy` `[N, O, OH, OW]`. TensorFlow's `conv2d_backprop_filter`.
    #[track_caller]
    pub fn conv2d_backprop_filter(
        &mut self,
        x: Tensor,
        dy: Tensor,
        kernel: [usize; 2],
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let op = Op::Nn(Nn::Conv2dBackpropFilter {
            window: Window::conv(kernel, &opts),
            groups: opts.groups,
        });
        let site = Site::new("conv2d_backprop_filter", Location::caller());
        self.add_op(op, &[x, dy], Declared::none(), site)
    }

    /// The gradient of [`Graph::max_pool2d`] with respect to its input `x`: each window's
    /// `dy` goes to its first maximum (row-major window order; the first NaN when the
    /// maximum is NaN); ties give nothing to the later cells (TensorFlow's and PyTorch's
    /// rule).
    #[track_caller]
    pub fn max_pool2d_grad(
        &mut self,
        x: Tensor,
        dy: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let xs = self.arg(x, "max_pool2d_grad", loc)?.shape.clone();
        let input_hw = match xs.dims() {
            [_, _, h, w] => [*h, *w],
            _ => [0, 0],
        };
        let op = Op::Nn(Nn::PoolGrad {
            kind: PoolKind::Max,
            window: Window::pool(kernel, stride, padding),
            input_hw,
        });
        self.add_op(
            op,
            &[x, dy],
            Declared::none(),
            Site::new("max_pool2d_grad", loc),
        )
    }

    /// The gradient of [`Graph::avg_pool2d`] with respect to its input (`[N, C, H, W]` with
    /// `[H, W] = input_hw`): each window's `dy / count` spread over its in-bounds cells.
    #[track_caller]
    pub fn avg_pool2d_grad(
        &mut self,
        dy: Tensor,
        input_hw: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        let op = Op::Nn(Nn::PoolGrad {
            kind: PoolKind::Avg,
            window: Window::pool(kernel, stride, padding),
            input_hw,
        });
        let site = Site::new("avg_pool2d_grad", Location::caller());
        self.add_op(op, &[dy], Declared::none(), site)
    }

    fn arg_reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axis: Option<isize>,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let axes = axis.map_or(Axes::All, |a| Axes::List(vec![a]));
        self.reduce(op, x, axes, keepdims, loc)
    }

    fn var_at(
        &mut self,
        x: Tensor,
        axes: Axes,
        ddof: usize,
        keepdims: bool,
        name: &str,
        loc: Loc,
    ) -> Result<Tensor> {
        let (count, out) = self.float_reduce_shape(name, x, &axes, keepdims, loc)?;
        self.name_scope("var", |g| {
            let m = g.reduce(ReduceOp::Mean, x, axes.clone(), true, loc)?;
            let d = g.binary(BinaryOp::Sub, x, m, loc)?;
            let sq = g.binary(BinaryOp::Mul, d, d, loc)?;
            let s = g.reduce(ReduceOp::Sum, sq, axes.clone(), keepdims, loc)?;
            let n = g.scalar_as(x, count.saturating_sub(ddof) as f32, loc)?;
            let v = g.binary(BinaryOp::Div, s, n, loc)?;
            debug_assert!(g.arg(v, name, loc).is_ok_and(|n| n.shape == out));
            Ok(v)
        })
    }

    /// Check an f32 reduction; returns the reduced element count and the output shape.
    fn float_reduce_shape(
        &mut self,
        op: &str,
        x: Tensor,
        axes: &Axes,
        keepdims: bool,
        loc: Loc,
    ) -> Result<(usize, Shape)> {
        let node = self.arg(x, op, loc)?;
        if !node.dtype.is_float() {
            return Err(Error::build(
                op,
                loc,
                format!("needs f32 or f16, got {}", node.dtype),
            ));
        }
        let list = match axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let shape = node.shape.clone();
        let (resolved, out) =
            reduce::reduce_shape(&shape, list, keepdims).map_err(|m| Error::build(op, loc, m))?;
        Ok((resolved.iter().map(|&a| shape.dims()[a]).product(), out))
    }

    /// `where(|m| < inf, m, 0)`: a max that is safe to subtract (NaN stays NaN via the input).
    fn finite_or_zero(&mut self, m: Tensor, loc: Loc) -> Result<Tensor> {
        let a = self.unary(UnaryOp::Abs, m, loc)?;
        let inf = self.scalar_as(m, f32::INFINITY, loc)?;
        let finite = self.binary(BinaryOp::Less, a, inf, loc)?;
        let zero = self.scalar_as(m, 0.0, loc)?;
        let op = Op::Elementwise(Elementwise::Select);
        self.add_op(
            op,
            &[finite, m, zero],
            Declared::none(),
            Site::new("where", loc),
        )
    }

    /// A scalar constant of `like`'s float dtype.
    fn scalar_as(&mut self, like: Tensor, v: f32, loc: Loc) -> Result<Tensor> {
        let t = match self.arg(like, "constant", loc)?.dtype {
            DType::F16 => HostTensor::scalar(crate::f16::from_f32(v)),
            _ => HostTensor::scalar(v),
        };
        self.push_constant(t, loc)
    }
}
