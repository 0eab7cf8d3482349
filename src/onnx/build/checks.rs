//! What onnxruntime's checker refuses before running a graph, refused here too: a name
//! defined twice (two initializers, two node outputs, or a node output over an input), and
//! attributes whose declared type is not the one the op reads.

use super::{bad, Node};
use crate::onnx::proto::{attribute_proto::AttributeType, AttributeProto, GraphProto};
use crate::Result;
use std::collections::HashSet;

/// Every initializer and node output of `g` is defined once, and no node output redefines a
/// graph input or initializer (an initializer may repeat an input: its default, IR < 4).
pub(super) fn unique_names(g: &GraphProto) -> Result<()> {
    let mut seen: HashSet<&str> = HashSet::new();
    for t in &g.initializer {
        let name = t.name.as_deref().unwrap_or("");
        if !seen.insert(name) {
            return Err(bad(format!("initializer '{name}' is defined twice")));
        }
    }
    seen.extend(g.input.iter().filter_map(|v| v.name.as_deref()));
    for n in &g.node {
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            if !seen.insert(out) {
                return Err(bad(format!(
                    "'{out}' is defined twice (node '{}' writes a name already taken)",
                    n.name.as_deref().unwrap_or("")
                )));
            }
        }
    }
    Ok(())
}

/// Whether attribute `a`, read as `want`, is declared as something else (an `axis` given as
/// a float, which would otherwise be silently ignored).
fn mismatch(a: &AttributeProto, want: AttributeType) -> bool {
    match AttributeType::try_from(a.r#type.unwrap_or(0)) {
        // Untyped attributes (old exporters) are read by which field is set.
        Ok(AttributeType::Undefined) | Err(_) => false,
        Ok(t) => t != want,
    }
}

impl Node<'_> {
    /// Note that attribute `name`, if present, was read as `want`; a mismatch is reported
    /// after the node is translated ([`Node::attr_error`]).
    pub(super) fn expect(&self, name: &str, want: AttributeType) {
        if let Some(a) = self.attr(name) {
            if mismatch(a, want) && self.bad_attr.borrow().is_none() {
                let got = AttributeType::try_from(a.r#type.unwrap_or(0))
                    .map_or("an unknown type", |t| t.as_str_name());
                *self.bad_attr.borrow_mut() = Some(format!(
                    "attribute '{name}' is {got}, but {} is read as {}",
                    self.op,
                    want.as_str_name()
                ));
            }
        }
    }

    /// The first attribute read as a type other than its declared one.
    pub(super) fn attr_error(&self) -> Option<crate::Error> {
        self.bad_attr.borrow().clone().map(bad)
    }
}

/// Every dimension [`ImportOptions::dims`](crate::onnx::ImportOptions::dims) pins is one of
/// `g`'s inputs' (a `--dim typo=3` is an error, as it is for graph files, not ignored).
pub(super) fn pinned_dims_exist(g: &GraphProto, pinned: &[&String]) -> Result<()> {
    use crate::onnx::proto::{tensor_shape_proto::dimension::Value as D, type_proto::Value};
    let mut names: HashSet<String> = HashSet::new();
    for vi in &g.input {
        let name = vi.name.as_deref().unwrap_or("");
        let Some(Value::TensorType(tt)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            continue;
        };
        for (axis, d) in tt.shape.iter().flat_map(|s| s.dim.iter()).enumerate() {
            match &d.value {
                Some(D::DimValue(_)) => {}
                Some(D::DimParam(p)) if !p.is_empty() => drop(names.insert(p.clone())),
                _ => drop(names.insert(format!("{name}:{axis}"))),
            }
        }
    }
    let mut unknown: Vec<&str> = pinned
        .iter()
        .filter(|p| !names.contains(p.as_str()))
        .map(|p| p.as_str())
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort_unstable();
    let mut have: Vec<String> = names.into_iter().collect();
    have.sort_unstable();
    Err(bad(format!(
        "pinned dimension(s) {} name no input's dimension (the inputs' are: {})",
        unknown.join(", "),
        if have.is_empty() {
            "none".to_string()
        } else {
            have.join(", ")
        }
    )))
}

/// A node's translation error placed at the node (`at`): a translator's keeps its kind, a
/// builder's refusal of a dtype is the model's dtype, and any other builder error is the
/// model's shapes or values as the builders see them.
pub(super) fn placed(e: crate::Error, at: &str) -> crate::Error {
    use crate::onnx::{fail, wrong_dtype, Refused};
    match e {
        crate::Error::Onnx {
            at: a,
            message,
            kind,
        } if a.is_empty() => fail(at, Refused { message, kind }),
        other @ crate::Error::Build {
            kind: crate::BuildKind::DType { .. },
            ..
        } => fail(at, wrong_dtype(other.to_string())),
        other => fail(at, other.to_string()),
    }
}

/// A translator's error (`at` empty) placed at `at`.
pub(super) fn relabel(e: crate::Error, at: &str) -> crate::Error {
    match e {
        crate::Error::Onnx { message, kind, .. } => {
            crate::onnx::fail(at, crate::onnx::Refused { message, kind })
        }
        e => e,
    }
}
