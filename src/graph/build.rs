//! The public builder methods. Primitives check their shape/dtype rule (from `ops/`) and add
//! one node; composites (softmax) are built from primitives so later passes see through them.

use super::{Graph, Tensor};
use crate::ops::matmul::matmul_shape;
use crate::ops::{movement, reduce, BinaryOp, Op, ReduceOp, UnaryOp};
use crate::ops::{Elementwise, MatMul, Movement, Reduce};
use crate::{DType, Error, Result, Shape};
use std::panic::Location;

type Loc = &'static Location<'static>;

/// Which axes a reduction folds: all of them, or a list (negative axes count from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Axes {
    All,
    List(Vec<isize>),
}

impl From<isize> for Axes {
    fn from(a: isize) -> Self {
        Axes::List(vec![a])
    }
}

impl From<&[isize]> for Axes {
    fn from(a: &[isize]) -> Self {
        Axes::List(a.to_vec())
    }
}

impl From<Vec<isize>> for Axes {
    fn from(a: Vec<isize>) -> Self {
        Axes::List(a)
    }
}

impl<const N: usize> From<[isize; N]> for Axes {
    fn from(a: [isize; N]) -> Self {
        Axes::List(a.to_vec())
    }
}

macro_rules! reduce_builders {
    ($($(#[$doc:meta])* $fn:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $fn(&mut self, x: Tensor, axes: impl Into<Axes>, keepdims: bool) -> Result<Tensor> {
            self.reduce(ReduceOp::$op, x, axes.into(), keepdims, Location::caller())
        }
    )*};
}

impl Graph {
    unary_builders! {
        /// `-x` (f32, i32).
        neg => Neg;
        /// `|x|`.
        abs => Abs;
        /// `e^x` (f32).
        exp => Exp;
        /// Natural logarithm (f32).
        log => Log;
        /// Square root (f32).
        sqrt => Sqrt;
        /// Hyperbolic tangent (f32).
        tanh => Tanh;
        /// `1 / (1 + e^-x)` (f32).
        sigmoid => Sigmoid;
        /// `max(x, 0)`; NaN stays NaN.
        relu => Relu;
    }

    binary_builders! {
        /// `a + b` with NumPy broadcasting. Integer arithmetic wraps.
        add => Add;
        /// `a - b`.
        sub => Sub;
        /// `a * b`.
        mul => Mul;
        /// `a / b`. Integer division truncates toward zero; `x / 0 == x` for integers
        /// (WGSL's defined result, reproduced on `cpu:0`).
        div => Div;
        /// Elementwise maximum; NaN propagates like NumPy's `maximum`.
        maximum => Maximum;
        /// Elementwise minimum; NaN propagates.
        minimum => Minimum;
        /// `a ^ b` (f32, i32, u32). f32 follows C99/NumPy on every device: `(-2)^3 == -8`,
        /// `(-2)^0.5` is NaN, `x^0 == 1` and `1^y == 1` even for NaN, `pow(x, 2) == x*x`.
        /// Integers wrap; a negative i32 exponent gives the truncated real result
        /// (1 for base 1, ±1 for base -1, else 0) where NumPy raises.
        pow => Pow;
        /// `a == b` → bool.
        equal => Equal;
        /// `a < b` → bool.
        less => Less;
        /// `a > b` → bool.
        greater => Greater;
    }

    reduce_builders! {
        /// Sum over `axes`.
        sum => Sum;
        /// Mean over `axes`. For integers the sum is divided with truncation (TensorFlow's rule).
        mean => Mean;
        /// Maximum over `axes`; NaN propagates.
        max => Max;
        /// Minimum over `axes`; NaN propagates.
        min => Min;
    }

    /// `where(cond, a, b)`: elementwise choice with broadcasting over all three.
    #[track_caller]
    pub fn select(&mut self, cond: Tensor, a: Tensor, b: Tensor) -> Result<Tensor> {
        let loc = Location::caller();
        let (nc, na, nb) = (
            self.check(cond, "where", loc)?,
            self.check(a, "where", loc)?,
            self.check(b, "where", loc)?,
        );
        if self.dtype(cond) != DType::Bool {
            return Err(Error::build(
                "where",
                loc,
                format!("condition must be bool, got {}", self.dtype(cond)),
            ));
        }
        if self.dtype(a) != self.dtype(b) {
            return Err(Error::build(
                "where",
                loc,
                format!(
                    "branches have dtypes {} and {}; cast one explicitly",
                    self.dtype(a),
                    self.dtype(b)
                ),
            ));
        }
        let (sc, sa, sb) = (
            self.shape(cond).clone(),
            self.shape(a).clone(),
            self.shape(b).clone(),
        );
        let shape = Shape::broadcast(&sa, &sb)
            .and_then(|s| Shape::broadcast(&sc, &s))
            .ok_or_else(|| {
                Error::build(
                    "where",
                    loc,
                    format!("shapes {sc}, {sa} and {sb} cannot broadcast"),
                )
            })?;
        let dtype = self.dtype(a);
        Ok(self.push(
            Op::Elementwise(Elementwise::Select),
            &[nc, na, nb],
            shape,
            dtype,
            "where",
            loc,
        ))
    }

    /// Convert to `dtype`. Float→int truncates toward zero and saturates (NaN → 0);
    /// anything→bool is `x != 0`; i32↔u32 reinterpret the bits.
    #[track_caller]
    pub fn cast(&mut self, x: Tensor, dtype: DType) -> Result<Tensor> {
        let loc = Location::caller();
        let n = self.check(x, "cast", loc)?;
        let shape = self.shape(x).clone();
        Ok(self.push(
            Op::Elementwise(Elementwise::Cast(dtype)),
            &[n],
            shape,
            dtype,
            "cast",
            loc,
        ))
    }

    /// Matrix product `[..., M, K] @ [..., K, N]` with NumPy `matmul`'s rules: batch dims
    /// broadcast, a 1-D left operand is a row and a 1-D right operand a column whose 1 is
    /// dropped from the result (`[K] @ [K, N] -> [N]`, `[K] @ [K] -> []`).
    #[track_caller]
    pub fn matmul(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.matmul_at(a, b, "matmul", Location::caller())
    }

    /// The matmul rule, with errors named `op` and located at `loc` (composites such as
    /// `linear` pass their own name and their caller's location).
    pub(crate) fn matmul_at(&mut self, a: Tensor, b: Tensor, op: &str, loc: Loc) -> Result<Tensor> {
        let (na, nb) = (self.check(a, op, loc)?, self.check(b, op, loc)?);
        let (da, db) = (self.dtype(a), self.dtype(b));
        if da != db || !da.is_numeric() {
            return Err(Error::build(
                op,
                loc,
                format!("operands must share a numeric dtype, got {da} and {db}"),
            ));
        }
        let shape =
            matmul_shape(self.shape(a), self.shape(b)).map_err(|m| Error::build(op, loc, m))?;
        Ok(self.push(Op::MatMul(MatMul), &[na, nb], shape, da, "matmul", loc))
    }

    /// A view with a new shape of the same element count; one dimension may be -1.
    /// No data is copied.
    #[track_caller]
    pub fn reshape(&mut self, x: Tensor, shape: &[isize]) -> Result<Tensor> {
        let loc = Location::caller();
        let n = self.check(x, "reshape", loc)?;
        let out = movement::reshape_shape(self.shape(x), shape)
            .map_err(|m| Error::build("reshape", loc, m))?;
        let dtype = self.dtype(x);
        Ok(self.push(
            Op::Movement(Movement::Reshape),
            &[n],
            out,
            dtype,
            "reshape",
            loc,
        ))
    }

    /// Permute axes: output axis `i` is input axis `perm[i]` (NumPy `transpose(x, perm)`).
    #[track_caller]
    pub fn transpose(&mut self, x: Tensor, perm: &[isize]) -> Result<Tensor> {
        let loc = Location::caller();
        let n = self.check(x, "transpose", loc)?;
        let (perm, out) = movement::permute_shape(self.shape(x), perm)
            .map_err(|m| Error::build("transpose", loc, m))?;
        let dtype = self.dtype(x);
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            // The identity permutation moves nothing: a view.
            return Ok(self.push(
                Op::Movement(Movement::Reshape),
                &[n],
                out,
                dtype,
                "transpose",
                loc,
            ));
        }
        Ok(self.push(
            Op::Movement(Movement::Permute(perm)),
            &[n],
            out,
            dtype,
            "transpose",
            loc,
        ))
    }

    /// Softmax along `axis`, computed stably as `exp(x - max) / sum(exp(x - max))`.
    /// A composite: five primitives that fusion and later passes see individually.
    #[track_caller]
    pub fn softmax(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        self.check(x, "softmax", loc)?;
        if !self.dtype(x).is_float() {
            return Err(Error::build(
                "softmax",
                loc,
                format!("needs f32 or f16, got {}", self.dtype(x)),
            ));
        }
        self.shape(x).axis(axis).ok_or_else(|| {
            Error::build(
                "softmax",
                loc,
                format!("axis {axis} is out of range for shape {}", self.shape(x)),
            )
        })?;
        self.name_scope("softmax", |g| {
            let m = g.reduce(ReduceOp::Max, x, Axes::List(vec![axis]), true, loc)?;
            let shifted = g.binary(BinaryOp::Sub, x, m, loc)?;
            let e = g.unary(UnaryOp::Exp, shifted, loc)?;
            let s = g.reduce(ReduceOp::Sum, e, Axes::List(vec![axis]), true, loc)?;
            g.binary(BinaryOp::Div, e, s, loc)
        })
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, x: Tensor, loc: Loc) -> Result<Tensor> {
        let n = self.check(x, op.name(), loc)?;
        let dtype = op.result_dtype(self.dtype(x)).map_err(|ok| {
            Error::build(
                op.name(),
                loc,
                format!("dtype {} is not supported (expects {ok})", self.dtype(x)),
            )
        })?;
        let shape = self.shape(x).clone();
        Ok(self.push(
            Op::Elementwise(Elementwise::Unary(op)),
            &[n],
            shape,
            dtype,
            op.name(),
            loc,
        ))
    }

    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        a: Tensor,
        b: Tensor,
        loc: Loc,
    ) -> Result<Tensor> {
        let (na, nb) = (
            self.check(a, op.name(), loc)?,
            self.check(b, op.name(), loc)?,
        );
        let (sa, sb) = (self.shape(a), self.shape(b));
        let shape = Shape::broadcast(sa, sb).ok_or_else(|| {
            Error::build(
                op.name(),
                loc,
                format!("shapes {sa} and {sb} cannot broadcast"),
            )
        })?;
        let (da, db) = (self.dtype(a), self.dtype(b));
        if da != db {
            return Err(Error::build(
                op.name(),
                loc,
                format!("dtypes {da} and {db} differ; wgflow does not promote implicitly, cast one operand"),
            ));
        }
        let dtype = op.result_dtype(da).map_err(|ok| {
            Error::build(
                op.name(),
                loc,
                format!("dtype {da} is not supported (expects {ok})"),
            )
        })?;
        Ok(self.push(
            Op::Elementwise(Elementwise::Binary(op)),
            &[na, nb],
            shape,
            dtype,
            op.name(),
            loc,
        ))
    }

    pub(crate) fn reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axes: Axes,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let n = self.check(x, op.name(), loc)?;
        let dtype = self.dtype(x);
        if !dtype.is_numeric() {
            return Err(Error::build(
                op.name(),
                loc,
                format!("dtype {dtype} is not supported (expects f32, i32 or u32)"),
            ));
        }
        let list = match &axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let (axes, shape) = reduce::reduce_shape(self.shape(x), list, keepdims)
            .map_err(|m| Error::build(op.name(), loc, m))?;
        reduce::check_empty(op, self.shape(x), &axes, &shape)
            .map_err(|m| Error::build(op.name(), loc, m))?;
        Ok(self.push(
            Op::Reduce(Reduce { op, axes }),
            &[n],
            shape,
            dtype,
            op.name(),
            loc,
        ))
    }
}
