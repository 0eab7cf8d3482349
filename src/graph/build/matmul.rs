//! The matmul builder (NumPy `matmul`'s rules); `linear` is a composite over it.

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::{Declared, MatMul, Op};
use crate::Result;
use std::panic::Location;

impl Graph {
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
}
