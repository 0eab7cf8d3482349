//! The public builder methods. Primitives translate the user's arguments into an op and add
//! it through `Graph::add_op`, which runs the op's shape/dtype rule (in its `ops/` family
//! file); composites (softmax) are built from primitives so later passes see through them.

mod custom;
mod elementwise;
mod movement;
mod nn;
mod state;

pub use movement::PadMode;
pub use nn::Conv2dOptions;
pub use state::RESERVED_VARIABLE_NAME;

use super::{Graph, Site, Tensor};
use crate::ops::{movement as movement_ops, reduce as reduce_ops};
use crate::ops::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::ops::{Declared, Elementwise, MatMul, Movement, Reduce};
use crate::{DType, Error, Result};
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
        let op = Op::Elementwise(Elementwise::Select);
        let site = Site::new("where", Location::caller());
        self.add_op(op, &[cond, a, b], Declared::none(), site)
    }

    /// Convert to `dtype`. Float→int truncates toward zero and saturates (NaN → 0);
    /// anything→bool is `x != 0`; i32↔u32 reinterpret the bits.
    #[track_caller]
    pub fn cast(&mut self, x: Tensor, dtype: DType) -> Result<Tensor> {
        let op = Op::Elementwise(Elementwise::Cast(dtype));
        let site = Site::new("cast", Location::caller());
        self.add_op(op, &[x], Declared::none(), site)
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
        let site = Site::new(op, loc).named("matmul");
        self.add_op(Op::MatMul(MatMul), &[a, b], Declared::none(), site)
    }

    /// A view with a new shape of the same element count; one dimension may be -1.
    /// No data is copied.
    #[track_caller]
    pub fn reshape(&mut self, x: Tensor, shape: &[isize]) -> Result<Tensor> {
        let loc = Location::caller();
        let from = &self.arg(x, "reshape", loc)?.shape;
        let out = movement_ops::reshape_shape(from, shape)
            .map_err(|m| Error::build("reshape", loc, m))?;
        self.view(x, out, "reshape", loc)
    }

    /// Permute axes: output axis `i` is input axis `perm[i]` (NumPy `transpose(x, perm)`).
    #[track_caller]
    pub fn transpose(&mut self, x: Tensor, perm: &[isize]) -> Result<Tensor> {
        let loc = Location::caller();
        let from = &self.arg(x, "transpose", loc)?.shape;
        let (perm, out) = movement_ops::permute_shape(from, perm)
            .map_err(|m| Error::build("transpose", loc, m))?;
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            // The identity permutation moves nothing: a view.
            return self.view(x, out, "transpose", loc);
        }
        let site = Site::new("transpose", loc);
        self.add_op(
            Op::Movement(Movement::Permute(perm)),
            &[x],
            Declared::none(),
            site,
        )
    }

    /// Softmax along `axis`, computed stably as `exp(x - max) / sum(exp(x - max))`.
    /// A composite: five primitives that fusion and later passes see individually.
    #[track_caller]
    pub fn softmax(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        let node = self.arg(x, "softmax", loc)?;
        if !node.dtype.is_float() {
            return Err(Error::build(
                "softmax",
                loc,
                format!("needs f32 or f16, got {}", node.dtype),
            ));
        }
        node.shape.axis(axis).ok_or_else(|| {
            Error::build(
                "softmax",
                loc,
                format!("axis {axis} is out of range for shape {}", node.shape),
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
        let site = Site::new(op.name(), loc);
        self.add_op(
            Op::Elementwise(Elementwise::Unary(op)),
            &[x],
            Declared::none(),
            site,
        )
    }

    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        a: Tensor,
        b: Tensor,
        loc: Loc,
    ) -> Result<Tensor> {
        let site = Site::new(op.name(), loc);
        self.add_op(
            Op::Elementwise(Elementwise::Binary(op)),
            &[a, b],
            Declared::none(),
            site,
        )
    }

    /// A reduction over `axes` (negative ones count from the end); all/any and the arg ops
    /// are reductions too (see `build/nn.rs`).
    pub(crate) fn reduce(
        &mut self,
        op: ReduceOp,
        x: Tensor,
        axes: Axes,
        keepdims: bool,
        loc: Loc,
    ) -> Result<Tensor> {
        let from = &self.arg(x, op.name(), loc)?.shape;
        let list = match &axes {
            Axes::All => None,
            Axes::List(l) => Some(l.as_slice()),
        };
        let (axes, out) = reduce_ops::reduce_shape(from, list, keepdims)
            .map_err(|m| Error::build(op.name(), loc, m))?;
        let site = Site::new(op.name(), loc);
        self.add_op(
            Op::Reduce(Reduce { op, axes }),
            &[x],
            Declared::shape(&out),
            site,
        )
    }
}
