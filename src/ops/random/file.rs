//! Graph files: a random op's seed and distribution parameters.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `random_uniform` `random_normal` | 0 | `seed` (a u64); `params`: `[low, high]` or `[mean, std]` as f32 values |
//! | `stateful_random_uniform` `stateful_random_normal` | 1 (the `wgflow/run_counter` placeholder) | as above |

use super::{Distribution, RandomSpec, RUN_COUNTER};
use crate::graph::def::{NodeDef, NodeIn, NodeOut, Pair, UInt, F32};
use crate::graph::{Graph, Tensor};
use crate::{Error, Result};
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
    StatefulRandomUniform(Params),
    StatefulRandomNormal(Params),
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
        Distribution::StatefulUniform { low, high } => {
            RandomAttrs::StatefulRandomUniform(params(low, high))
        }
        Distribution::StatefulNormal { mean, std } => {
            RandomAttrs::StatefulRandomNormal(params(mean, std))
        }
    };
    out.tagged(spec.name(), &attrs)
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<RandomSpec>> {
    Some(node.tagged()?.map(|attrs| {
        let (p, make): (_, fn(f32, f32) -> Distribution) = match attrs {
            RandomAttrs::RandomUniform(p) => (p, |low, high| Distribution::Uniform { low, high }),
            RandomAttrs::RandomNormal(p) => (p, |mean, std| Distribution::Normal { mean, std }),
            RandomAttrs::StatefulRandomUniform(p) => {
                (p, |low, high| Distribution::StatefulUniform { low, high })
            }
            RandomAttrs::StatefulRandomNormal(p) => {
                (p, |mean, std| Distribution::StatefulNormal { mean, std })
            }
        };
        let [a, b] = p.params.0.map(|x| x.0);
        let dist = make(a, b);
        RandomSpec {
            dist,
            seed: p.seed.0,
        }
    }))
}

/// (Errors leave `at` empty: the caller adds the node's place.) A stateful op reads the graph's run counter, which the file holds as an earlier node: the
/// builder finds it by name, and it must be the node the file connects.
pub(super) fn rebuild(
    spec: &RandomSpec,
    g: &mut Graph,
    node: &NodeDef,
    inputs: &[Tensor],
) -> Result<Tensor> {
    let shape = node.shape.clone();
    let seed = spec.seed;
    let t = match spec.dist {
        Distribution::Uniform { low, high } => g.random_uniform(shape, low, high, seed)?,
        Distribution::Normal { mean, std } => g.random_normal(shape, mean, std, seed)?,
        Distribution::StatefulUniform { low, high } => {
            g.stateful_random_uniform(shape, low, high, seed)?
        }
        Distribution::StatefulNormal { mean, std } => {
            g.stateful_random_normal(shape, mean, std, seed)?
        }
    };
    if g.inputs(t)? != inputs {
        return Err(Error::GraphDef {
            at: String::new(),
            message: format!(
                "{} must read the placeholder '{RUN_COUNTER}', the graph's run counter",
                spec.name()
            ),
        });
    }
    Ok(t)
}
