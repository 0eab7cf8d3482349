//! Rebuilding a file's node through the public builders: the op's family derives the
//! builder's arguments from the file's attributes ([`Family::rebuild`]), the builder runs
//! every shape and dtype rule again, and the op it produces must equal the file's. So a file
//! can only describe a node the API could have built (in particular a strided read can never
//! leave its input).

use super::json::attrs_text;
use super::{err, NodeDef};
use crate::graph::{Graph, Tensor};
use crate::ops::{Arity, Family, Op};
use crate::Result;

/// One node through the builder an API user would call, inside the node's device scope.
pub(super) fn build_node(g: &mut Graph, nd: &NodeDef, x: &[Tensor]) -> Result<Tensor> {
    let family: &dyn Family = nd.op.family();
    let arity = family.arity();
    if !arity.admits(x.len()) {
        let takes = match arity {
            Arity::AtLeast(k) => format!("{k} or more"),
            other => other.to_string(),
        };
        return Err(err(
            "",
            format!(
                "{} takes {takes} input(s), {} given",
                family.name(),
                x.len()
            ),
        ));
    }
    g.device_scopes.extend(nd.device);
    let before = g.len();
    let r = family.rebuild(g, nd, x);
    if nd.device.is_some() {
        g.device_scopes.pop();
    }
    let t = r?;
    // A file holds primitive nodes: one node in, one node out. A builder that made more (a
    // wide concat becomes a tree) or a different op (a view) means the file cannot be exact.
    if g.len() != before + 1 {
        return Err(err(
            "",
            format!(
                "{} rebuilds as {} nodes; a graph file holds one primitive op per node",
                family.name(),
                g.len() - before
            ),
        ));
    }
    check_same_op(&nd.op, &g.g[t.node()].op)?;
    Ok(t)
}

/// The op the builder produced must be the file's: otherwise the file describes a node no
/// builder call makes (a flip with a stray stride, a pool with a dilation, ...).
fn check_same_op(file: &Op, built: &Op) -> Result<()> {
    if file == built {
        return Ok(());
    }
    Err(err(
        "",
        format!(
            "the file's {} attributes ({}) are not what the op's rules give ({} {})",
            file.name(),
            attrs_text(file),
            built.name(),
            attrs_text(built)
        ),
    ))
}
