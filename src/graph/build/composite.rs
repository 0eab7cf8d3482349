//! Composites over several families: softmax, log_softmax, logsumexp, var, std, layer_norm,
//! batch_norm, linear, one_hot and dropout. Each is built from the primitives' builders, so
//! fusion and reverse mode see through it.

use super::{Axes, Loc};
use crate::graph::{Graph, Site, Tensor};
use crate::ops::rows::RowPass;
use crate::ops::{reduce, BinaryOp, Declared, Distribution, Elementwise, Op, RandomSpec};
use crate::ops::{ReduceOp, UnaryOp};
use crate::{DType, Error, HostTensor, Result, Shape};
use std::panic::Location;

impl Graph {
    /// Softmax along `axis`, computed stably as `exp(x - max) / sum(exp(x - max))`.
    /// A composite: five primitives that fusion and later passes see individually.
    #[track_caller]
    pub fn softmax(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        let node = self.arg(x, "softmax", loc)?;
        if !node.dtype.is_float() {
            return Err(Error::build_dtype(
                "softmax",
                loc,
                format!("needs f32 or f16, got {}", node.dtype),
                &[node.dtype],
            ));
        }
        node.shape.axis(axis).ok_or_else(|| {
            Error::build(
                "softmax",
                loc,
                format!("axis {axis} is out of range for shape {}", node.shape),
            )
            .of_shapes(&[&node.shape])
        })?;
        self.name_scope("softmax", |g| {
            let m = g.reduce(ReduceOp::Max, x, Axes::List(vec![axis]), true, loc)?;
            let shifted = g.binary(BinaryOp::Sub, x, m, loc)?;
            let e = g.unary(UnaryOp::Exp, shifted, loc)?;
            let s = g.reduce(ReduceOp::Sum, e, Axes::List(vec![axis]), true, loc)?;
            g.binary(BinaryOp::Div, e, s, loc)
        })
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
    /// For f32 over the last axis with both `gamma` and `beta` of shape `[D]` (a transformer's
    /// case) it is one fused primitive with its own backward kernels (`ops::rows`), which
    /// stores nothing but `x` for the gradient; otherwise a composite of reductions and
    /// elementwise ops (which also has second derivatives).
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
        if let Some((s, b)) = self.fused_layer_norm_params(x, gamma, beta, axis) {
            return self.rows_at(RowPass::LayerNorm, &[x, s, b], eps, loc);
        }
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
        if !dtype.is_float() {
            return Err(Error::build_dtype(
                "batch_norm",
                loc,
                format!("needs f32 or f16 [N, C, ...], got {dtype} {shape}"),
                &[dtype],
            ));
        }
        if shape.rank() < 2 {
            return Err(Error::build(
                "batch_norm",
                loc,
                format!("needs f32 or f16 [N, C, ...], got {dtype} {shape}"),
            )
            .of_shapes(&[&shape]));
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
                )
                .of_shapes(&[&shape, ps]));
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

    /// One-hot f32 encoding along a new last axis of size `depth`; an index outside
    /// `0..depth` gives an all-zero row (TensorFlow's rule). A composite: `equal` + `cast`.
    #[track_caller]
    pub fn one_hot(&mut self, indices: Tensor, depth: usize) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.arg(indices, "one_hot", loc)?.dtype;
        if d != DType::I32 {
            return Err(Error::build_dtype(
                "one_hot",
                loc,
                format!("needs i32 indices and a depth in 1..2^31, got {d} and {depth}"),
                &[d],
            ));
        }
        if depth == 0 || depth > i32::MAX as usize {
            return Err(Error::build(
                "one_hot",
                loc,
                format!("needs i32 indices and a depth in 1..2^31, got {d} and {depth}"),
            )
            .of_value());
        }
        self.name_scope("one_hot", |g| {
            let e = g.expand_dims(indices, -1)?;
            let range = HostTensor::new([depth], (0..depth as i32).collect::<Vec<_>>())?;
            let r = g.push_constant(range, loc)?;
            let hit = g.binary(BinaryOp::Equal, e, r, loc)?;
            g.cast(hit, DType::F32)
        })
    }

    /// Inverted dropout (`tf.nn.dropout`): each element of `x` is kept with probability
    /// `1 - rate` and scaled by `1 / (1 - rate)`, else zeroed, with a new mask on every run:
    /// `x * where(u >= rate, s, 0)` with `u` a [`Graph::stateful_random_uniform`] of `x`'s
    /// shape in `[0, 1)` from `seed` and `s = 1 / (1 - rate)` rounded to `x`'s dtype. `rate`
    /// lies in `[0, 1)`; 0 returns `x` itself. The gradient with respect to `x` is the same
    /// scaled mask times the incoming gradient (the mask is a constant of the run).
    #[track_caller]
    pub fn dropout(&mut self, x: Tensor, rate: f32, seed: u64) -> Result<Tensor> {
        let loc = Location::caller();
        let dtype = self.float_only("dropout", x, loc)?;
        if !(0.0..1.0).contains(&rate) {
            return Err(Error::build(
                "dropout",
                loc,
                format!("rate must lie in [0, 1), got {rate}"),
            )
            .of_value());
        }
        if rate == 0.0 {
            return Ok(x);
        }
        let shape = self.arg(x, "dropout", loc)?.shape.clone();
        self.name_scope("dropout", |g| {
            let dist = Distribution::StatefulUniform {
                low: 0.0,
                high: 1.0,
            };
            let u = g.random(RandomSpec { dist, seed }, shape, loc)?;
            let r = g.lit(DType::F32, f64::from(rate), loc)?;
            let keep = g.binary(BinaryOp::GreaterEqual, u, r, loc)?;
            let scale = g.lit(dtype, 1.0 / (1.0 - f64::from(rate)), loc)?;
            let zero = g.lit(dtype, 0.0, loc)?;
            let mask = g.add_op(
                Op::Elementwise(crate::ops::Elementwise::Select),
                &[keep, scale, zero],
                Declared::none(),
                Site::new("dropout", loc).named("mask"),
            )?;
            g.binary(BinaryOp::Mul, x, mask, loc)
        })
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
        let resolved = match &axes {
            Axes::All => Vec::new(),
            Axes::List(l) => {
                let shape = &self.arg(x, name, loc)?.shape;
                reduce::reduce_shape(shape, Some(l), keepdims)
                    .map_err(|m| Error::build(name, loc, m).of_shapes(&[shape]))?
                    .0
            }
        };
        self.name_scope("var", |g| {
            let m = g.reduce(ReduceOp::Mean, x, axes.clone(), true, loc)?;
            let d = g.binary(BinaryOp::Sub, x, m, loc)?;
            let sq = g.binary(BinaryOp::Mul, d, d, loc)?;
            let s = g.reduce(ReduceOp::Sum, sq, axes.clone(), keepdims, loc)?;
            let n = if g.is_dynamic(x) {
                // A count of run-time size is a value the binding fills in.
                let dtype = g.arg(x, name, loc)?.dtype;
                let c = g.size_of_at(x, &resolved, dtype, loc)?;
                let ddof = g.scalar_as(x, ddof as f32, loc)?;
                let n = g.binary(BinaryOp::Sub, c, ddof, loc)?;
                let zero = g.scalar_as(x, 0.0, loc)?;
                g.binary(BinaryOp::Maximum, n, zero, loc)?
            } else {
                g.scalar_as(x, count.saturating_sub(ddof) as f32, loc)?
            };
            let v = g.binary(BinaryOp::Div, s, n, loc)?;
            debug_assert!(g
                .arg(v, name, loc)
                .is_ok_and(|n| n.shape == out || n.dynamic));
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
            return Err(Error::build_dtype(
                op,
                loc,
                format!("needs f32 or f16, got {}", node.dtype),
                &[node.dtype],
            ));
        }
        let list = match axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let shape = node.shape.clone();
        let (resolved, out) = reduce::reduce_shape(&shape, list, keepdims)
            .map_err(|m| Error::build(op, loc, m).of_shapes(&[&shape]))?;
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
