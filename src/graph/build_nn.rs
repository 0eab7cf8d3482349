//! Reduction and NN builders: prod/all/any/argmax/argmin primitives, and the composites
//! var, std, logsumexp, log_softmax, layer_norm, linear, batch_norm (built from primitives so
//! fusion sees through them), plus the conv2d and pooling primitives.

use super::{Axes, Graph, Tensor};
use crate::ops::{reduce, BinaryOp, Op, PoolKind, ReduceOp, UnaryOp, Window};
use crate::ops::{Elementwise, Nn, Reduce};
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

    /// Whether every element over `axes` is true (non-bool input is tested `!= 0`; NaN is true).
    #[track_caller]
    pub fn all(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.logic_reduce(ReduceOp::All, x, axes.into(), keepdims, Location::caller())
    }

    /// Whether any element over `axes` is true.
    #[track_caller]
    pub fn any(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
        self.logic_reduce(ReduceOp::Any, x, axes.into(), keepdims, Location::caller())
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
        self.check(x, "batch_norm", loc)?;
        let shape = self.shape(x).clone();
        if shape.rank() < 2 || !self.dtype(x).is_float() {
            return Err(Error::build(
                "batch_norm",
                loc,
                format!(
                    "needs f32 or f16 [N, C, ...], got {} {shape}",
                    self.dtype(x)
                ),
            ));
        }
        let c = shape.dims()[1];
        let mut pshape = vec![1; shape.rank()];
        pshape[1] = c;
        for p in [mean, var, gamma, beta] {
            self.check(p, "batch_norm", loc)?;
            if self.shape(p).dims() != [c] {
                return Err(Error::build(
                    "batch_norm",
                    loc,
                    format!("parameters must have shape [{c}], got {}", self.shape(p)),
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
        let (nx, nw) = (self.check(x, "conv2d", loc)?, self.check(w, "conv2d", loc)?);
        let (xs, ws) = (self.shape(x).clone(), self.shape(w).clone());
        let err = |m: String| Error::build("conv2d", loc, m);
        if xs.rank() != 4
            || ws.rank() != 4
            || self.dtype(x) != DType::F32
            || self.dtype(w) != DType::F32
        {
            return Err(err(format!(
                "needs f32 x [N, C, H, W] and w [O, C/groups, KH, KW], got {} {xs} and {} {ws}",
                self.dtype(x),
                self.dtype(w)
            )));
        }
        let (xd, wd, g) = (xs.dims(), ws.dims(), opts.groups);
        if g == 0 || xd[1] % g != 0 || wd[0] % g != 0 || wd[1] * g != xd[1] {
            return Err(err(format!(
                "{g} groups do not fit input channels {} and weight {ws} (needs C = groups * w.shape[1] and O divisible by groups)",
                xd[1]
            )));
        }
        let window = Window {
            kernel: [wd[2], wd[3]],
            stride: opts.stride,
            padding: opts.padding,
            dilation: opts.dilation,
        };
        let [oh, ow] = window.out_hw([xd[2], xd[3]]).map_err(err)?;
        let out = Shape(vec![xd[0], wd[0], oh, ow]);
        let y = self.push(
            Op::Nn(Nn::Conv2d { window, groups: g }),
            &[nx, nw],
            out,
            DType::F32,
            "conv2d",
            loc,
        );
        match bias {
            None => Ok(y),
            Some(b) => {
                self.check(b, "conv2d", loc)?;
                if self.shape(b).dims() != [wd[0]] {
                    return Err(err(format!(
                        "bias must have shape [{}], got {}",
                        wd[0],
                        self.shape(b)
                    )));
                }
                let b4 = self.view(b, Shape(vec![1, wd[0], 1, 1]), "reshape", loc)?;
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
        let n = self.check(x, kind.name(), loc)?;
        let xs = self.shape(x).clone();
        let err = |m: String| Error::build(kind.name(), loc, m);
        if xs.rank() != 4 || self.dtype(x) != DType::F32 {
            return Err(err(format!(
                "needs f32 [N, C, H, W], got {} {xs}",
                self.dtype(x)
            )));
        }
        if (0..2).any(|k| 2 * padding[k] > kernel[k]) {
            return Err(err(format!(
                "padding {padding:?} must be at most half of kernel {kernel:?}"
            )));
        }
        let window = Window {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
        };
        let [oh, ow] = window.out_hw([xs.dims()[2], xs.dims()[3]]).map_err(err)?;
        let out = Shape(vec![xs.dims()[0], xs.dims()[1], oh, ow]);
        Ok(self.push(
            Op::Nn(Nn::Pool { kind, window }),
            &[n],
            out,
            DType::F32,
            kind.name(),
            loc,
        ))
    }

    fn logic_reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axes: Axes,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        self.check(x, op.name(), loc)?;
        let list = match &axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let (axes, shape) = reduce::reduce_shape(self.shape(x), list, keepdims)
            .map_err(|m| Error::build(op.name(), loc, m))?;
        // Non-bool input is tested in the kernel (NaN-safe), not through a cast.
        let n = self.check(x, op.name(), loc)?;
        Ok(self.push(
            Op::Reduce(Reduce { op, axes }),
            &[n],
            shape,
            DType::Bool,
            op.name(),
            loc,
        ))
    }

    fn arg_reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axis: Option<isize>,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let n = self.check(x, op.name(), loc)?;
        if !self.dtype(x).is_numeric() {
            return Err(Error::build(
                op.name(),
                loc,
                format!(
                    "dtype {} is not supported (expects f32, i32 or u32)",
                    self.dtype(x)
                ),
            ));
        }
        let list = axis.map(|a| vec![a]);
        let (axes, shape) = reduce::reduce_shape(self.shape(x), list.as_deref(), keepdims)
            .map_err(|m| Error::build(op.name(), loc, m))?;
        reduce::check_empty(op, self.shape(x), &axes, &shape)
            .map_err(|m| Error::build(op.name(), loc, m))?;
        Ok(self.push(
            Op::Reduce(Reduce { op, axes }),
            &[n],
            shape,
            DType::I32,
            op.name(),
            loc,
        ))
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
            debug_assert_eq!(g.shape(v), &out);
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
        self.check(x, op, loc)?;
        if !self.dtype(x).is_float() {
            return Err(Error::build(
                op,
                loc,
                format!("needs f32 or f16, got {}", self.dtype(x)),
            ));
        }
        let list = match axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let shape = self.shape(x).clone();
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
        let ns = [finite, m, zero].map(|t| t.node());
        let shape = self.shape(m).clone();
        let dtype = self.dtype(m);
        Ok(self.push(
            Op::Elementwise(Elementwise::Select),
            &ns,
            shape,
            dtype,
            "where",
            loc,
        ))
    }

    /// A scalar constant of `like`'s float dtype.
    fn scalar_as(&mut self, like: Tensor, v: f32, loc: Loc) -> Result<Tensor> {
        let t = match self.dtype(like) {
            DType::F16 => HostTensor::scalar(crate::f16::from_f32(v)),
            _ => HostTensor::scalar(v),
        };
        self.push_constant(t, loc)
    }
}
