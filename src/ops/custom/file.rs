//! Graph files: users' kernels.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `custom` | any | `kernel` (name), `expr`: the typed expression (below) |
//! | `raw_wgsl` | any | `kernel` (name), `entry_point`, `source`; optional `output_like_input` (input index; absent: the node's `shape`/`dtype` are fixed) and `invocations` (absent: one per output element) |
//!
//! A `custom` node's `expr` is a JSON tree of arrays: `["in", i]`, `["lit", dtype, word]`
//! (the literal's 32-bit pattern as an unsigned integer), `["unary", op, e]`,
//! `["binary", op, a, b]`, `["where", c, a, b]`, `["cast", dtype, e]`, with the names of the
//! elementwise ops (a subexpression used twice is written twice). It is type-checked against
//! the inputs on load. A raw kernel's shader is validated on load like one built with the API.

use super::{Custom, CustomElementwise, Invocations, OutputRule, RawWgsl};
use crate::graph::def::{quote, NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::ops::{BinaryOp, Expr, Family, Node, UnaryOp};
use crate::{DType, Error, Result};
use serde::de::{self, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// The deepest expression a graph file holds: JSON readers stop at 128 levels of nesting,
/// four of which are the file's own.
const MAX_DEPTH: usize = 120;

/// The family's attributes; each variant is named like its op.
#[derive(Serialize, Deserialize)]
#[serde(
    tag = "op",
    content = "attrs",
    rename_all = "snake_case",
    deny_unknown_fields
)]
enum CustomAttrs {
    Custom {
        kernel: String,
        expr: ExprTree,
    },
    RawWgsl {
        kernel: String,
        entry_point: String,
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_like_input: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        invocations: Option<u64>,
    },
}

/// An expression as a tree of JSON arrays (the module docs); a shared node is written at
/// each of its uses.
struct ExprTree(Expr);

/// Node `k` of an expression and everything below it.
struct Sub<'a>(&'a Expr, usize);

impl Serialize for Sub<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let sub = |k| Sub(self.0, k);
        match self.0.nodes()[self.1] {
            Node::Input(i) => ("in", i).serialize(s),
            Node::Lit(d, w) => ("lit", d.to_string(), w).serialize(s),
            Node::Unary(op, a) => ("unary", op.name(), sub(a)).serialize(s),
            Node::Binary(op, a, b) => ("binary", op.name(), sub(a), sub(b)).serialize(s),
            Node::Select(c, a, b) => ("where", sub(c), sub(a), sub(b)).serialize(s),
            Node::Cast(d, a) => ("cast", d.to_string(), sub(a)).serialize(s),
        }
    }
}

impl Serialize for ExprTree {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        Sub(&self.0, self.0.root()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ExprTree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_seq(ExprVisitor)
    }
}

struct ExprVisitor;

/// The next entry of an expression array, or an error naming what is missing.
fn next<'de, T: Deserialize<'de>, A: SeqAccess<'de>>(
    seq: &mut A,
    what: &str,
) -> std::result::Result<T, A::Error> {
    seq.next_element()?
        .ok_or_else(|| de::Error::custom(format!("missing {what}")))
}

fn dtype<E: de::Error>(name: &str) -> std::result::Result<DType, E> {
    DType::parse(name).ok_or_else(|| E::custom(format!("unknown dtype {}", quote(name))))
}

impl<'de> Visitor<'de> for ExprVisitor {
    type Value = ExprTree;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"an expression array ["in"|"lit"|"unary"|"binary"|"where"|"cast", ...]"#)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<ExprTree, A::Error> {
        let tag: String = next(&mut seq, "tag")?;
        let sub = |seq: &mut A| next::<ExprTree, A>(seq, "operand").map(|e| e.0);
        let e = match tag.as_str() {
            "in" => Expr::input(next(&mut seq, "input index")?),
            "lit" => {
                let d = dtype(&next::<String, A>(&mut seq, "literal dtype")?)?;
                let w: u32 = next(&mut seq, "32-bit word")?;
                if d == DType::Bool && w > 1 {
                    return Err(de::Error::custom("a bool literal's word is 0 or 1"));
                }
                Expr::lit(d, w)
            }
            "unary" => {
                let name: String = next(&mut seq, "unary op")?;
                let op = UnaryOp::from_name(&name);
                let op = op.ok_or_else(|| {
                    de::Error::custom(format!("unknown unary op {}", quote(&name)))
                })?;
                Expr::unary(op, sub(&mut seq)?)
            }
            "binary" => {
                let name: String = next(&mut seq, "binary op")?;
                let op = BinaryOp::from_name(&name);
                let op = op.ok_or_else(|| {
                    de::Error::custom(format!("unknown binary op {}", quote(&name)))
                })?;
                Expr::binary(op, sub(&mut seq)?, sub(&mut seq)?)
            }
            "where" => Expr::select(sub(&mut seq)?, sub(&mut seq)?, sub(&mut seq)?),
            "cast" => {
                let d = dtype(&next::<String, A>(&mut seq, "cast dtype")?)?;
                Expr::cast(d, sub(&mut seq)?)
            }
            _ => return Err(de::Error::invalid_value(de::Unexpected::Str(&tag), &self)),
        };
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(format!(
                "too many entries for {}",
                quote(&tag)
            )));
        }
        Ok(ExprTree(e))
    }
}

/// How deep the tree form of `e` nests.
fn depth(e: &Expr) -> usize {
    let mut d: Vec<usize> = Vec::with_capacity(e.nodes().len());
    for n in e.nodes() {
        d.push(1 + n.operands().map(|o| d[o]).max().unwrap_or(0));
    }
    d.last().copied().unwrap_or(0)
}

pub(super) fn unsavable(c: &Custom) -> Option<String> {
    match c {
        Custom::Raw(r) if matches!(r.output, OutputRule::Fn(_)) => Some(format!(
            "raw kernel '{}' has a closure as its output rule, which cannot be saved; use OutputRule::Fixed or LikeInput",
            r.name
        )),
        _ => None,
    }
}

pub(super) fn write_attrs(c: &Custom, out: &mut NodeOut) -> Result<()> {
    if let Some(why) = unsavable(c) {
        return Err(Error::GraphDef {
            at: String::new(),
            message: why,
        });
    }
    let attrs = match c {
        Custom::Elementwise(c) => {
            let d = depth(&c.expr);
            if d > MAX_DEPTH {
                return Err(Error::GraphDef {
                    at: String::new(),
                    message: format!(
                        "the expression of '{}' nests {d} deep; a graph file holds at most {MAX_DEPTH} levels",
                        c.name
                    ),
                });
            }
            CustomAttrs::Custom {
                kernel: c.name.clone(),
                expr: ExprTree(c.expr.clone()),
            }
        }
        Custom::Raw(r) => CustomAttrs::RawWgsl {
            kernel: r.name.clone(),
            entry_point: r.entry_point.clone(),
            source: r.source.clone(),
            output_like_input: match r.output {
                OutputRule::LikeInput(k) => Some(k),
                _ => None,
            },
            invocations: match r.invocations {
                Invocations::Fixed(n) => Some(n),
                Invocations::PerOutputElement => None,
            },
        },
    };
    out.tagged(c.name(), &attrs)
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Custom>> {
    Some(node.tagged()?.map(|attrs| match attrs {
        CustomAttrs::Custom { kernel, expr } => Custom::Elementwise(Box::new(CustomElementwise {
            name: kernel,
            expr: expr.0,
        })),
        CustomAttrs::RawWgsl {
            kernel,
            entry_point,
            source,
            output_like_input,
            invocations,
        } => {
            let output = match output_like_input {
                Some(k) => OutputRule::LikeInput(k),
                None => OutputRule::Fixed(node.shape.clone(), node.dtype),
            };
            let invocations = invocations.map_or(Invocations::PerOutputElement, Invocations::Fixed);
            Custom::Raw(Arc::new(RawWgsl::new(
                &kernel,
                &source,
                &entry_point,
                output,
                invocations,
            )))
        }
    }))
}

pub(super) fn rebuild(c: &Custom, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> Result<Tensor> {
    match c {
        Custom::Elementwise(c) => g.apply_expr(&c.name, c.expr.clone(), x),
        Custom::Raw(r) => {
            let mut r = (**r).clone();
            if let OutputRule::Fixed(..) = r.output {
                r.output = OutputRule::Fixed(node.shape.clone(), node.dtype);
            }
            g.raw_kernel(&r, x)
        }
    }
}
