//! Graph files: `matmul` (2 inputs) has no attributes.

use super::MatMul;
use crate::graph::def::{NoAttrs, NodeIn};
use crate::graph::{Graph, Tensor};
use crate::ops::Family;
use crate::Result;

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<MatMul>> {
    (node.op == MatMul.name()).then(|| node.attrs::<NoAttrs>().map(|_| MatMul))
}

pub(super) fn rebuild(g: &mut Graph, x: &[Tensor]) -> Result<Tensor> {
    g.matmul(x[0], x[1])
}
