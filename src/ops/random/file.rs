//! Graph files: a random op's seed and distribution parameters.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `random_uniform` `random_normal` | 0 | `seed` (a u64); `params`: `[low, high]` or `[mean, std]` as f32 values |

use super::{Distribution, RandomSpec};
use crate::graph::def::{NodeDef, NodeIn, NodeOut, Pair, UInt, F32};
use crate::graph::{Graph, Tensor};
use crate::Result;
use serde::{Deserialize, Serialize};

/// The family's attributes; each variant is named like its op.
#[derive(Serialize, Deserialize)]
#[serde(
    tag = "op",
    content = "attrs",
    rename_all = "snake_case",
    deny_unknown_fields
)]
enum RandomAttrs {
    RandomUniform(Params),
    RandomNormal(Params),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    seed: UInt<{ u64::MAX }>,
    params: Pair<F32>,
}

pub(super) fn write_attrs(spec: &RandomSpec, out: &mut NodeOut) -> Result<()> {
    let params = |a, b| Params {
        seed: UInt(spec.seed),
        params: Pair([F32(a), F32(b)]),
    };
    let attrs = match spec.dist {
        Distribution::Uniform { low, high } => RandomAttrs::RandomUniform(params(low, high)),
        Distribution::Normal { mean, std } => RandomAttrs::RandomNormal(params(mean, std)),
    };
    out.tagged(spec.name(), &attrs)
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<RandomSpec>> {
    Some(node.tagged()?.map(|attrs| {
        let (p, uniform) = match attrs {
            RandomAttrs::RandomUniform(p) => (p, true),
            RandomAttrs::RandomNormal(p) => (p, false),
        };
        let [a, b] = p.params.0.map(|x| x.0);
        let dist = if uniform {
            Distribution::Uniform { low: a, high: b }
        } else {
            Distribution::Normal { mean: a, std: b }
        };
        RandomSpec {
            dist,
            seed: p.seed.0,
        }
    }))
}

pub(super) fn rebuild(spec: &RandomSpec, g: &mut Graph, node: &NodeDef) -> Result<Tensor> {
    let shape = node.shape.clone();
    match spec.dist {
        Distribution::Uniform { low, high } => g.random_uniform(shape, low, high, spec.seed),
        Distribution::Normal { mean, std } => g.random_normal(shape, mean, std, spec.seed),
    }
}
