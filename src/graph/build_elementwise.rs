//! Builders of the elementwise family: math, comparisons, logic and integer arithmetic;
//! composites (`square`, `silu`, `gelu`, `leaky_relu`, `elu`, `clip`) over those primitives;
//! creation ops (`zeros`, `ones`, `full`, `arange`, `linspace`, `eye`); seeded random tensors,
//! stateless and stateful, and `dropout`.
//!
//! # dtype policy
//! wgflow never promotes implicitly: both operands of a binary op must have the same dtype, or
//! the builder fails with an error naming both dtypes and asking for an explicit
//! [`cast`](Graph::cast). Each op then accepts the dtypes its docs list (f32, i32, u32, bool);
//! logical ops take bool only, comparisons return bool.
//!
//! # Creation ops are constants
//! `zeros`, `ones`, `full`, `arange`, `linspace` and `eye` are computed on the host at build
//! time and stored in the graph as constants (uploaded once per plan; one-element ones become
//! literals inside fused kernels). `random_uniform`/`random_normal` instead run a kernel on the
//! device; see [`crate::ops::random`] for the exact algorithm. Their stateful forms
//! (`stateful_random_uniform`, `stateful_random_normal`) draw new numbers on every run: they
//! read the graph's run counter, a placeholder the session feeds by itself.

use super::{check_size, Graph, Site, Tensor};
use crate::ops::random::RUN_COUNTER;
use crate::ops::{BinaryOp, Declared, Distribution, Leaf, Op, RandomSpec, UnaryOp};
use crate::{DType, Error, HostTensor, Result, Shape};
use std::panic::Location;

type Loc = &'static Location<'static>;

/// The word of `v` in `dtype`; integers must be integral and in range.
fn scalar_word(dtype: DType, v: f64) -> std::result::Result<u32, String> {
    let int = |lo: f64, hi: f64| {
        if v.fract() != 0.0 || !(lo..=hi).contains(&v) {
            Err(format!("{v} is not representable as {dtype}"))
        } else {
            Ok(())
        }
    };
    match dtype {
        DType::F32 => Ok((v as f32).to_bits()),
        DType::F16 => Ok(crate::dtype::f32_to_f16_word((v as f32).to_bits())),
        DType::I32 => int(i32::MIN as f64, i32::MAX as f64).map(|_| v as i32 as u32),
        DType::U32 => int(0.0, u32::MAX as f64).map(|_| v as u32),
        DType::Bool => Ok((v != 0.0) as u32),
    }
}

impl Graph {
    unary_builders! {
        /// Largest integer ≤ x (f32; identity on i32/u32).
        floor => Floor;
        /// Smallest integer ≥ x (f32; identity on i32/u32).
        ceil => Ceil;
        /// Round half to even, like NumPy's `round`/`rint` (f32; identity on i32/u32).
        round => Round;
        /// -1, 0 or 1 (f32, i32, u32); `sign(±0.0) == +0.0`, `sign(NaN)` is NaN.
        sign => Sign;
        /// `1 / x` (f32).
        reciprocal => Reciprocal;
        /// `1 / sqrt(x)` (f32).
        rsqrt => Rsqrt;
        /// `ln(1 + x)`, accurate for small x (f32).
        log1p => Log1p;
        /// `e^x - 1`, accurate for small x (f32).
        expm1 => Expm1;
        /// Sine (f32). GPUs may lose accuracy for |x| far beyond 2π.
        sin => Sin;
        /// Cosine (f32).
        cos => Cos;
        /// The error function (f32): a rational approximation with max error 4.2e-7
        /// (see `ops/elementwise/reference.rs`).
        erf => Erf;
        /// `ln(1 + e^x)`, computed without overflow (f32).
        softplus => Softplus;
        /// `x / (1 + |x|)` (f32); ±1 at ±inf.
        softsign => Softsign;
        /// NaN test → bool (f32; always false for integers).
        isnan => IsNan;
        /// ±inf test → bool (f32; always false for integers).
        isinf => IsInf;
        /// Neither NaN nor ±inf → bool (f32; always true for integers).
        isfinite => IsFinite;
        /// `!x` (bool).
        logical_not => LogicalNot;
    }

    binary_builders! {
        /// `a != b` → bool (any dtype); NaN != anything.
        not_equal => NotEqual;
        /// `a <= b` → bool (f32, i32, u32); false if either is NaN.
        less_equal => LessEqual;
        /// `a >= b` → bool (f32, i32, u32); false if either is NaN.
        greater_equal => GreaterEqual;
        /// `a && b` (bool).
        logical_and => LogicalAnd;
        /// `a || b` (bool).
        logical_or => LogicalOr;
        /// `a != b` on bools (bool).
        logical_xor => LogicalXor;
        /// `⌊a / b⌋` (f32, i32, u32), NumPy's `//`. Integers: `x // 0 == 0` (NumPy's result,
        /// without its warning); `i32::MIN // -1 == i32::MIN` (wraps). Floats: NumPy's
        /// `npy_divmod` on an exact `fmod` (`-7 // 2 == -4`, `x // 0 == ±inf`, `0 // 0` NaN).
        floor_divide => FloorDiv;
        /// `a - b·⌊a / b⌋` (f32, i32, u32) with the sign of the divisor, like NumPy's `%`.
        /// Integers: `x % 0 == 0`. Floats: exact (`fmod`, then `+ b` if the signs differ):
        /// `7 % -2 == -1`, `x % 0` is NaN, `5 % inf == 5`, `-5 % inf == inf` as in NumPy.
        remainder => Remainder;
    }

    /// `x * x` (f32, i32, u32; integers wrap).
    #[track_caller]
    pub fn square(&mut self, x: Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, x, x, Location::caller())
    }

    /// `x · sigmoid(x)` (f32).
    #[track_caller]
    pub fn silu(&mut self, x: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        self.float_only("silu", x, loc)?;
        self.name_scope("silu", |g| {
            let s = g.unary(UnaryOp::Sigmoid, x, loc)?;
            g.binary(BinaryOp::Mul, x, s, loc)
        })
    }

    /// GELU (f32): `0.5·x·(1 + erf(x/√2))`, or with `approximate` the tanh form
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    #[track_caller]
    pub fn gelu(&mut self, x: Tensor, approximate: bool) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.float_only("gelu", x, loc)?;
        self.name_scope("gelu", |g| {
            let inner = if approximate {
                let x3 = g.binary(BinaryOp::Mul, x, x, loc)?;
                let x3 = g.binary(BinaryOp::Mul, x3, x, loc)?;
                let c = g.lit(d, 0.044715, loc)?;
                let t = g.binary(BinaryOp::Mul, x3, c, loc)?;
                let t = g.binary(BinaryOp::Add, x, t, loc)?;
                let k = g.lit(d, (2.0 / std::f64::consts::PI).sqrt(), loc)?;
                let t = g.binary(BinaryOp::Mul, t, k, loc)?;
                g.unary(UnaryOp::Tanh, t, loc)?
            } else {
                let k = g.lit(d, std::f64::consts::FRAC_1_SQRT_2, loc)?;
                let t = g.binary(BinaryOp::Mul, x, k, loc)?;
                g.unary(UnaryOp::Erf, t, loc)?
            };
            let one = g.lit(d, 1.0, loc)?;
            let half = g.lit(d, 0.5, loc)?;
            let t = g.binary(BinaryOp::Add, inner, one, loc)?;
            let hx = g.binary(BinaryOp::Mul, x, half, loc)?;
            g.binary(BinaryOp::Mul, hx, t, loc)
        })
    }

    /// `x` where `x >= 0`, else `alpha·x` (f32); NaN stays NaN.
    #[track_caller]
    pub fn leaky_relu(&mut self, x: Tensor, alpha: f32) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.float_only("leaky_relu", x, loc)?;
        self.name_scope("leaky_relu", |g| {
            let zero = g.lit(d, 0.0, loc)?;
            let a = g.lit(d, alpha as f64, loc)?;
            let neg = g.binary(BinaryOp::Less, x, zero, loc)?;
            let ax = g.binary(BinaryOp::Mul, x, a, loc)?;
            g.select(neg, ax, x)
        })
    }

    /// `x` where `x > 0`, else `alpha·(e^x - 1)` (f32); NaN stays NaN.
    #[track_caller]
    pub fn elu(&mut self, x: Tensor, alpha: f32) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.float_only("elu", x, loc)?;
        self.name_scope("elu", |g| {
            let zero = g.lit(d, 0.0, loc)?;
            let a = g.lit(d, alpha as f64, loc)?;
            let pos = g.binary(BinaryOp::Greater, x, zero, loc)?;
            let e = g.unary(UnaryOp::Expm1, x, loc)?;
            let ae = g.binary(BinaryOp::Mul, e, a, loc)?;
            g.select(pos, x, ae)
        })
    }

    /// `minimum(maximum(x, min), max)` like NumPy's `clip` (f32, i32, u32); NaN propagates.
    /// The bounds must be representable in `x`'s dtype.
    #[track_caller]
    pub fn clip(&mut self, x: Tensor, min: f64, max: f64) -> Result<Tensor> {
        let loc = Location::caller();
        let d = self.arg(x, "clip", loc)?.dtype;
        if !d.is_numeric() {
            return Err(Error::build(
                "clip",
                loc,
                format!("dtype {d} is not supported (expects f32, i32 or u32)"),
            ));
        }
        self.name_scope("clip", |g| {
            let lo = g.lit(d, min, loc)?;
            let hi = g.lit(d, max, loc)?;
            let t = g.binary(BinaryOp::Maximum, x, lo, loc)?;
            g.binary(BinaryOp::Minimum, t, hi, loc)
        })
    }

    /// A constant of `shape` filled with 0.
    #[track_caller]
    pub fn zeros(&mut self, shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        self.filled("zeros", shape.into(), dtype, 0.0, Location::caller())
    }

    /// A constant of `shape` filled with 1.
    #[track_caller]
    pub fn ones(&mut self, shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        self.filled("ones", shape.into(), dtype, 1.0, Location::caller())
    }

    /// A constant of `shape` filled with `value` (which must be representable in `dtype`).
    #[track_caller]
    pub fn full(&mut self, shape: impl Into<Shape>, dtype: DType, value: f64) -> Result<Tensor> {
        self.filled("full", shape.into(), dtype, value, Location::caller())
    }

    /// `[start, start + step, …]` up to but excluding `stop` (NumPy `arange`: length
    /// `ceil((stop - start) / step)`, element `i` is `start + i·step` computed in f64 and then
    /// converted). f32, i32 or u32; integer dtypes need integral arguments.
    #[track_caller]
    pub fn arange(&mut self, start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        let loc = Location::caller();
        let err = |m: String| Error::build("arange", loc, m);
        if !dtype.is_numeric() {
            return Err(err(format!(
                "dtype {dtype} is not supported (expects f32, i32 or u32)"
            )));
        }
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            return Err(err(format!(
                "start {start}, stop {stop} and step {step} must be finite with a nonzero step"
            )));
        }
        let n = ((stop - start) / step).ceil();
        // A range that runs the wrong way is empty, as in NumPy.
        let n = n.max(0.0);
        if n > u32::MAX as f64 {
            return Err(err(format!(
                "arange({start}, {stop}, {step}) has {n} elements, more than 2^32 - 1"
            )));
        }
        let words = (0..n as usize)
            .map(|i| scalar_word(dtype, start + i as f64 * step))
            .collect::<std::result::Result<Vec<u32>, String>>()
            .map_err(err)?;
        self.host_constant("arange", Shape::from([n as usize]), dtype, words, loc)
    }

    /// `num` evenly spaced f32 values from `start` to `stop` (inclusive when `endpoint`),
    /// computed in f64 like NumPy's `linspace` and rounded once to f32.
    #[track_caller]
    pub fn linspace(
        &mut self,
        start: f64,
        stop: f64,
        num: usize,
        endpoint: bool,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let div = if endpoint { num.saturating_sub(1) } else { num } as f64;
        let step = (stop - start) / div;
        let words = (0..num)
            .map(|i| {
                let v = if endpoint && num > 1 && i == num - 1 {
                    stop
                } else if div > 0.0 {
                    start + i as f64 * step
                } else {
                    start
                };
                (v as f32).to_bits()
            })
            .collect();
        self.host_constant("linspace", Shape::from([num]), DType::F32, words, loc)
    }

    /// An `n × m` matrix with ones on diagonal `k` (0 main, > 0 above, < 0 below) and zeros
    /// elsewhere, like NumPy's `eye(n, m, k)`.
    #[track_caller]
    pub fn eye(&mut self, n: usize, m: usize, k: isize, dtype: DType) -> Result<Tensor> {
        let loc = Location::caller();
        let one = scalar_word(dtype, 1.0).map_err(|e| Error::build("eye", loc, e))?;
        check_size("eye", &Shape::from([n, m]), loc)?;
        let words = (0..n * m)
            .map(|i| {
                let (r, c) = ((i / m) as isize, (i % m) as isize);
                if c - r == k {
                    one
                } else {
                    0
                }
            })
            .collect();
        self.host_constant("eye", Shape::from([n, m]), dtype, words, loc)
    }

    /// f32 values uniform in `[low, high)` from `seed`; the same seed gives bit-identical
    /// values on every device (Philox4x32-10, see [`crate::ops::random`]) and on every run.
    #[track_caller]
    pub fn random_uniform(
        &mut self,
        shape: impl Into<Shape>,
        low: f32,
        high: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_uniform("random_uniform", low, high, loc)?;
        let dist = Distribution::Uniform { low, high };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    /// f32 values from the normal distribution `N(mean, std²)` by Box-Muller from `seed`;
    /// devices agree within 1e-6·std (their `log1p`/`sqrt` may differ in the last bit).
    #[track_caller]
    pub fn random_normal(
        &mut self,
        shape: impl Into<Shape>,
        mean: f32,
        std: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_normal("random_normal", mean, std, loc)?;
        let dist = Distribution::Normal { mean, std };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    /// Like [`Graph::random_uniform`], with new numbers on every run (`tf.random.uniform`,
    /// a stateful op): run `k` of a session (counting the runs that read any stateful random
    /// op) draws from Philox's counter `[i, k_lo, k_hi, 1]`, so a session's sequence of runs is
    /// reproducible and bit-identical on every device. Two stateful ops with the same seed
    /// and shape draw the same numbers in a run: give each its own seed.
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{Graph, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let u = g.stateful_random_uniform([4], 0.0, 1.0, 7)?;
    /// let mut s = Session::new(&g, SessionOptions::default())?;
    /// let a = s.run(&[], &[u])?; // the session feeds the run counter
    /// let b = s.run(&[], &[u])?;
    /// assert_ne!(a[0].words(), b[0].words());
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn stateful_random_uniform(
        &mut self,
        shape: impl Into<Shape>,
        low: f32,
        high: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_uniform("stateful_random_uniform", low, high, loc)?;
        let dist = Distribution::StatefulUniform { low, high };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    /// Like [`Graph::random_normal`], with new numbers on every run (see
    /// [`Graph::stateful_random_uniform`]).
    #[track_caller]
    pub fn stateful_random_normal(
        &mut self,
        shape: impl Into<Shape>,
        mean: f32,
        std: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_normal("stateful_random_normal", mean, std, loc)?;
        let dist = Distribution::StatefulNormal { mean, std };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
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
            ));
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

    fn random(&mut self, spec: RandomSpec, shape: Shape, loc: Loc) -> Result<Tensor> {
        let site = Site::new(spec.name(), loc);
        let inputs = if spec.dist.is_stateful() {
            vec![self.run_counter(spec.name(), loc)?]
        } else {
            Vec::new()
        };
        self.add_op(Op::Random(spec), &inputs, Declared::shape(&shape), site)
    }

    /// The graph's run counter (see [`crate::ops::random::RUN_COUNTER`]), made on first use
    /// outside every name and device scope, so that one node serves the whole graph and is
    /// placed with its first consumer.
    fn run_counter(&mut self, op: &str, loc: Loc) -> Result<Tensor> {
        if let Some(t) = self.tensor(RUN_COUNTER) {
            let n = &self.g[t.node];
            if n.op != Op::Leaf(Leaf::Placeholder)
                || n.dtype != DType::U32
                || n.shape != Shape::from([2])
            {
                return Err(Error::build(
                    op,
                    loc,
                    format!(
                        "the name '{RUN_COUNTER}' is reserved for the session's run counter, \
                         a u32 [2] placeholder; this graph has a {} {} {} of that name",
                        n.dtype,
                        n.shape,
                        n.op.name()
                    ),
                ));
            }
            return Ok(t);
        }
        let names = std::mem::take(&mut self.name_scopes);
        let devices = std::mem::take(&mut self.device_scopes);
        let shape = Shape::from([2]);
        let declared = Declared {
            shape: Some(&shape),
            dtype: Some(DType::U32),
        };
        let site = Site::new("placeholder", loc).named(RUN_COUNTER);
        let r = self.add_op(Op::Leaf(Leaf::Placeholder), &[], declared, site);
        self.name_scopes = names;
        self.device_scopes = devices;
        r
    }

    fn filled(&mut self, op: &str, shape: Shape, dtype: DType, v: f64, loc: Loc) -> Result<Tensor> {
        let w = scalar_word(dtype, v).map_err(|e| Error::build(op, loc, e))?;
        // Before the values are made: a shape no kernel can index could not be allocated.
        check_size(op, &shape, loc)?;
        let words = vec![w; shape.numel()];
        self.host_constant(op, shape, dtype, words, loc)
    }

    fn host_constant(
        &mut self,
        op: &str,
        shape: Shape,
        dtype: DType,
        words: Vec<u32>,
        loc: Loc,
    ) -> Result<Tensor> {
        let t = HostTensor::from_words(shape, dtype, words)
            .map_err(|e| Error::build(op, loc, e.to_string()))?;
        self.add_op(
            Op::Leaf(Leaf::Constant(t)),
            &[],
            Declared::none(),
            Site::new(op, loc),
        )
    }

    /// A scalar constant (fusion turns it into a literal).
    fn lit(&mut self, dtype: DType, v: f64, loc: Loc) -> Result<Tensor> {
        let w = scalar_word(dtype, v).map_err(|e| Error::build("literal", loc, e))?;
        self.host_constant("literal", Shape::from([]), dtype, vec![w], loc)
    }

    /// `x`'s dtype, which must be a float.
    fn float_only(&self, op: &str, x: Tensor, loc: Loc) -> Result<DType> {
        let d = self.arg(x, op, loc)?.dtype;
        if d.is_float() {
            Ok(d)
        } else {
            Err(Error::build(
                op,
                loc,
                format!("dtype {d} is not supported (expects f32 or f16)"),
            ))
        }
    }
}

fn check_uniform(op: &str, low: f32, high: f32, loc: Loc) -> Result<()> {
    if low.is_finite() && high.is_finite() && low <= high {
        return Ok(());
    }
    Err(Error::build(
        op,
        loc,
        format!("needs finite low <= high, got [{low}, {high})"),
    ))
}

fn check_normal(op: &str, mean: f32, std: f32, loc: Loc) -> Result<()> {
    if mean.is_finite() && std.is_finite() && std >= 0.0 {
        return Ok(());
    }
    Err(Error::build(
        op,
        loc,
        format!("needs a finite mean and std >= 0, got mean {mean}, std {std}"),
    ))
}
