//! The expression IR of elementwise work: a DAG of scalar operations over indexed kernel
//! inputs, stored as a flat list in which every operand precedes its user and the last node is
//! the result. A value used twice is one node used twice, so fusing `d = add(c, c)` costs
//! one node, not a copy of `c`'s whole tree; codegen binds each node to a WGSL `let` and the
//! CPU evaluator walks the list, so no pass recurses as deep as the expression is long.

use super::{BinaryOp, UnaryOp};
use crate::DType;
use std::collections::HashMap;

mod vjp;

/// One scalar operation of an [`Expr`]; operands are indices of earlier nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    /// Input `i` of the kernel, broadcast to the output shape.
    Input(usize),
    /// A literal, stored as its 32-bit word so that it is written bit-exactly.
    Lit(DType, u32),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    /// `where(cond, a, b)`.
    Select(usize, usize, usize),
    Cast(DType, usize),
}

impl Node {
    /// The operand node indices, in order.
    pub fn operands(&self) -> impl Iterator<Item = usize> {
        let (arr, n) = match *self {
            Node::Input(_) | Node::Lit(..) => ([0; 3], 0),
            Node::Unary(_, a) | Node::Cast(_, a) => ([a, 0, 0], 1),
            Node::Binary(_, a, b) => ([a, b, 0], 2),
            Node::Select(c, a, b) => ([c, a, b], 3),
        };
        arr.into_iter().take(n)
    }

    /// The same operation with operand `k` replaced by `f(k)`.
    pub fn map_operands(self, mut f: impl FnMut(usize) -> usize) -> Node {
        match self {
            Node::Input(_) | Node::Lit(..) => self,
            Node::Unary(op, a) => Node::Unary(op, f(a)),
            Node::Cast(d, a) => Node::Cast(d, f(a)),
            Node::Binary(op, a, b) => Node::Binary(op, f(a), f(b)),
            Node::Select(c, a, b) => Node::Select(f(c), f(a), f(b)),
        }
    }

    /// Whether it computes something (not an input or a literal).
    pub fn is_op(&self) -> bool {
        !matches!(self, Node::Input(_) | Node::Lit(..))
    }
}

/// An elementwise expression over a kernel's inputs (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    nodes: Vec<Node>,
}

impl Expr {
    /// Input `i` of the kernel.
    pub fn input(i: usize) -> Expr {
        Expr {
            nodes: vec![Node::Input(i)],
        }
    }

    /// A literal of dtype `d` with the bits `w`.
    pub fn lit(d: DType, w: u32) -> Expr {
        Expr {
            nodes: vec![Node::Lit(d, w)],
        }
    }

    pub fn unary(op: UnaryOp, a: Expr) -> Expr {
        Expr::join(vec![a], |r| Node::Unary(op, r[0]))
    }

    pub fn binary(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::join(vec![a, b], |r| Node::Binary(op, r[0], r[1]))
    }

    /// `where(c, a, b)`.
    pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
        Expr::join(vec![c, a, b], |r| Node::Select(r[0], r[1], r[2]))
    }

    pub fn cast(d: DType, a: Expr) -> Expr {
        Expr::join(vec![a], |r| Node::Cast(d, r[0]))
    }

    /// An expression from nodes in operand-first order (the last is the result); `None`
    /// when empty or when a node refers to itself or a later node.
    pub fn from_nodes(nodes: Vec<Node>) -> Option<Expr> {
        let ok = !nodes.is_empty()
            && nodes
                .iter()
                .enumerate()
                .all(|(k, n)| n.operands().all(|o| o < k));
        ok.then_some(Expr { nodes })
    }

    /// The nodes, operands first; the last one is the result.
    /// Whether a literal or cast of the expression has dtype `d` (inputs are not looked at).
    pub fn mentions(&self, d: DType) -> bool {
        self.nodes().iter().any(|n| match *n {
            Node::Lit(t, _) | Node::Cast(t, _) => t == d,
            Node::Input(_) | Node::Unary(..) | Node::Binary(..) | Node::Select(..) => false,
        })
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Index of the result node.
    pub fn root(&self) -> usize {
        self.nodes.len() - 1
    }

    /// `make(roots)` over the parts, appended into the largest one so that building a long
    /// expression one operation at a time costs linear time, whichever side grows.
    fn join(mut parts: Vec<Expr>, make: impl FnOnce(&[usize]) -> Node) -> Expr {
        let big = (0..parts.len())
            .max_by_key(|&i| parts[i].nodes.len())
            .unwrap_or(0);
        let mut nodes = std::mem::take(&mut parts[big].nodes);
        let mut roots = vec![0; parts.len()];
        roots[big] = nodes.len() - 1;
        for (i, p) in parts.iter().enumerate() {
            if i == big {
                continue;
            }
            let base = nodes.len();
            nodes.extend(p.nodes.iter().map(|n| n.map_operands(|o| o + base)));
            roots[i] = nodes.len() - 1;
        }
        nodes.push(make(&roots));
        Expr { nodes }
    }

    /// The dtype of every node given the dtypes of the kernel inputs.
    pub fn dtypes(&self, inputs: &[DType]) -> Vec<DType> {
        let mut out: Vec<DType> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let d = match *n {
                Node::Input(i) => inputs.get(i).copied().unwrap_or(DType::F32),
                Node::Lit(d, _) => d,
                Node::Unary(op, _) if op.is_predicate() => DType::Bool,
                Node::Unary(_, a) => out[a],
                Node::Binary(op, _, _) if op.is_comparison() => DType::Bool,
                Node::Binary(_, a, _) => out[a],
                Node::Select(_, a, _) => out[a],
                Node::Cast(d, _) => d,
            };
            out.push(d);
        }
        out
    }

    /// The dtype this expression produces given the dtypes of the kernel inputs.
    pub fn dtype(&self, inputs: &[DType]) -> DType {
        self.dtypes(inputs)[self.root()]
    }

    /// Number of operations (each shared node counted once: what a kernel computes).
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_op()).count()
    }

    /// Replace every `Input(i)` with `f(i)` (called once per input node), then share equal
    /// subexpressions and drop unreachable nodes.
    pub fn substitute(&self, f: &mut impl FnMut(usize) -> Expr) -> Expr {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut map = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            if let Node::Input(i) = *n {
                let sub = f(i);
                let base = nodes.len();
                nodes.extend(sub.nodes.iter().map(|s| s.map_operands(|o| o + base)));
            } else {
                nodes.push(n.map_operands(|o| map[o]));
            }
            map.push(nodes.len() - 1);
        }
        Expr { nodes }.canonical()
    }

    /// The same value with equal nodes merged (common subexpressions computed once) and
    /// unreachable nodes dropped.
    pub fn canonical(&self) -> Expr {
        let n = self.nodes.len();
        let mut live = vec![false; n];
        live[n - 1] = true;
        for k in (0..n).rev() {
            if live[k] {
                for o in self.nodes[k].operands() {
                    live[o] = true;
                }
            }
        }
        let mut seen: HashMap<Node, usize> = HashMap::new();
        let mut map = vec![0; n];
        let mut nodes = Vec::new();
        for k in (0..n).filter(|&k| live[k]) {
            let node = self.nodes[k].map_operands(|o| map[o]);
            map[k] = *seen.entry(node).or_insert_with(|| {
                nodes.push(node);
                nodes.len() - 1
            });
        }
        // Only ancestors of the result are live and none equals it, so it stays last.
        Expr { nodes }
    }

    /// How many times each node is used as an operand.
    pub fn uses(&self) -> Vec<usize> {
        let mut uses = vec![0; self.nodes.len()];
        for n in &self.nodes {
            for o in n.operands() {
                uses[o] += 1;
            }
        }
        uses
    }

    /// Short description, e.g. `add(mul(in0, in1), in2)`; shared operations are named
    /// (`t1 = add(in0, in0); mul(t1, t1)`), and long expressions are summarized.
    pub fn describe(&self) -> String {
        const LONG: usize = 48;
        if self.op_count() > LONG {
            let inputs = self
                .nodes
                .iter()
                .filter(|n| matches!(n, Node::Input(_)))
                .count();
            return format!(
                "<{} ops over {inputs} inputs, ending in {}>",
                self.op_count(),
                node_name(&self.nodes[self.root()])
            );
        }
        let uses = self.uses();
        let mut text: Vec<String> = Vec::with_capacity(self.nodes.len());
        let mut lets = String::new();
        for (k, n) in self.nodes.iter().enumerate() {
            let t = |o: usize| text[o].as_str();
            let s = match *n {
                Node::Input(i) => format!("in{i}"),
                Node::Lit(d, w) => lit_text(d, w),
                Node::Unary(op, a) => format!("{}({})", op.name(), t(a)),
                Node::Binary(op, a, b) => format!("{}({}, {})", op.name(), t(a), t(b)),
                Node::Select(c, a, b) => format!("where({}, {}, {})", t(c), t(a), t(b)),
                Node::Cast(d, a) => format!("cast<{d}>({})", t(a)),
            };
            if n.is_op() && uses[k] > 1 {
                lets.push_str(&format!("t{k} = {s}; "));
                text.push(format!("t{k}"));
            } else {
                text.push(s);
            }
        }
        format!("{lets}{}", text[self.root()])
    }
}

fn node_name(n: &Node) -> String {
    match n {
        Node::Input(i) => format!("in{i}"),
        Node::Lit(d, w) => lit_text(*d, *w),
        Node::Unary(op, _) => op.name().to_string(),
        Node::Binary(op, _, _) => op.name().to_string(),
        Node::Select(..) => "where".to_string(),
        Node::Cast(d, _) => format!("cast<{d}>"),
    }
}

fn lit_text(d: DType, w: u32) -> String {
    match d {
        DType::F32 => format!("{}", f32::from_bits(w)),
        DType::F16 => format!("{}", half::f16::from_bits(w as u16)),
        DType::I32 => format!("{}", w as i32),
        DType::U32 => format!("{w}"),
        DType::Bool => format!("{}", w != 0),
    }
}
