//! The session side of checkpoints: which variables a save writes and a restore reads, and
//! how their values move in and out of the session (the file format is [`crate::checkpoint`]).

use crate::checkpoint::{err, host_tensor, parse, read_bytes, safetensors_dtype, write};
use crate::graph::Tensor;
use crate::session::Session;
use crate::{HostTensor, Result, Shape};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `v`'s node name, if it is a variable of the session's graph.
fn variable_name(session: &Session, v: Tensor, at: &str) -> Result<String> {
    let node = session.graph().node(v)?;
    if !node.op.is_variable() {
        return Err(err(
            at,
            format!("'{}' is a {}, not a variable", node.name, node.op.name()),
        ));
    }
    Ok(node.name.clone())
}

/// [`Session::save`]: `variables`, or every variable of the graph, to `path`.
pub(crate) fn save(session: &mut Session, path: &Path, variables: Option<&[Tensor]>) -> Result<()> {
    let at = path.display().to_string();
    let tensors: Vec<Tensor> = match variables {
        Some(vs) => vs.to_vec(),
        None => session.graph().variables(),
    };
    if tensors.is_empty() {
        // An empty file would replace a good checkpoint with one no restore accepts.
        return Err(err(
            &at,
            match variables {
                Some(_) => "no variables were given to save; nothing was written",
                None => "the graph has no variables to save; nothing was written",
            },
        ));
    }
    // By name, so a variable listed twice is written once.
    let mut values = BTreeMap::new();
    for v in tensors {
        let name = variable_name(session, v, &at)?;
        if let std::collections::btree_map::Entry::Vacant(slot) = values.entry(name) {
            slot.insert(session.read_variable(v)?);
        }
    }
    let list: Vec<(&str, &HostTensor)> = values.iter().map(|(n, t)| (n.as_str(), t)).collect();
    write(path, &list)
}

/// [`Session::restore`] (`only` is `None`) and [`Session::restore_only`].
pub(crate) fn restore(session: &mut Session, path: &Path, only: Option<&[Tensor]>) -> Result<()> {
    let at = path.display().to_string();
    let bytes = read_bytes(path, &at)?;
    let st = parse(&bytes, &at)?;
    let wanted: Vec<Tensor> = match only {
        Some(vs) => vs.to_vec(),
        None => session.graph().variables(),
    };
    let mut values: Vec<(Tensor, HostTensor)> = Vec::with_capacity(wanted.len());
    let mut missing = Vec::new();
    let mut seen = BTreeSet::new();
    for v in wanted {
        let name = variable_name(session, v, &at)?;
        if !seen.insert(name.clone()) {
            continue;
        }
        let view = match st.tensor(&name) {
            Ok(view) => view,
            Err(_) => {
                missing.push(name);
                continue;
            }
        };
        let node = session.graph().node(v)?;
        let file_shape = Shape::new(view.shape().to_vec());
        let expected = safetensors_dtype(node.dtype);
        if view.dtype() != expected || file_shape != node.shape {
            return Err(err(
                &at,
                format!(
                    "tensor '{name}' is {} {file_shape} in the file, but the variable is {} {} ({expected} {})",
                    view.dtype(),
                    node.dtype,
                    node.shape,
                    node.shape
                ),
            ));
        }
        values.push((v, host_tensor(&view, &name, &at)?));
    }
    if !missing.is_empty() {
        return Err(err(
            &at,
            format!(
                "no tensor for variable(s) {}; the file holds {}",
                quoted(missing.iter().map(String::as_str)),
                listing(st.names())
            ),
        ));
    }
    if only.is_none() {
        let mut unknown: Vec<&str> = st
            .names()
            .into_iter()
            .filter(|n| !seen.contains(*n))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(err(
                &at,
                format!(
                    "tensor(s) {} name no variable of the graph (the checkpoint is of another graph, or of another version of it)",
                    quoted(unknown.into_iter())
                ),
            ));
        }
    }
    let list: Vec<(Tensor, &HostTensor)> = values.iter().map(|(v, t)| (*v, t)).collect();
    session.write_variables(&list)
}

/// `'a', 'b', 'c'`, cut after 10 names.
fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let mut s = names
        .iter()
        .take(10)
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 10 {
        s.push_str(&format!(" and {} more", names.len() - 10));
    }
    s
}

/// The file's tensor names for a message, sorted.
fn listing(mut names: Vec<&str>) -> String {
    if names.is_empty() {
        return "no tensors".into();
    }
    names.sort_unstable();
    quoted(names.into_iter())
}
