//! Keep only what the fetches need.

use crate::graph::NodeId;
use crate::graph::{Graph, Tensor};
use crate::id::IdVec;
use crate::{Error, Result};

/// The nodes the `fetches` depend on, in graph (= topological) order: the graph is
/// append-only, so every input has a smaller index than its consumer.
pub fn prune(graph: &Graph, fetches: &[Tensor]) -> Result<Vec<NodeId>> {
    let mut keep: IdVec<NodeId, bool> = IdVec::filled(false, graph.len());
    let mut stack = Vec::new();
    for &t in fetches {
        if !graph.owns(t) {
            return Err(Error::Fetch {
                name: format!("#{}", t.index()),
                message: "the tensor belongs to another graph".into(),
            });
        }
        stack.push(t.node());
    }
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut keep[n], true) {
            continue;
        }
        stack.extend(graph.input_nodes(n));
    }
    Ok(keep
        .iter_enumerated()
        .filter(|(_, &k)| k)
        .map(|(i, _)| i)
        .collect())
}
