//! Symbolic reverse mode over an [`Expr`]: the derivative of an elementwise expression with
//! respect to each of its inputs, as expressions again. Both the built-in elementwise ops
//! (each one a one-node expression) and users' elementwise functions take their gradients
//! from here, so every derivative is written once, in [`Grad::node`].
//!
//! The rules, with their conventions, are documented on [`Expr::vjp`].

use super::{Expr, Node};
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::DType;

/// The adjoint of a node while the reverse sweep runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Adj {
    /// No gradient reaches it (yet).
    None,
    /// A gradient that is identically zero (through `floor`, `sign`…).
    Zero,
    /// The node holding it.
    At(usize),
}

impl Expr {
    /// The vector-Jacobian product of this expression over inputs of dtypes `ins`: for each
    /// input `i` with `wanted[i]`, an expression for `dy · ∂self/∂in_i`, or `None` where no
    /// gradient flows (the input is not a float, or reaches the result only through ops that
    /// stop gradients). The derivatives are expressions over the same inputs `0..n`, plus
    /// input `n`, the expression's value (so a rule such as `exp`'s reuses it rather than
    /// computing it again), and input `n + 1`, `dy`, of the result's dtype. They are not
    /// summed over broadcast axes: each has the shape of the result.
    ///
    /// The smooth rules are the textbook ones, written to reuse the result where that is
    /// cheaper (`exp`: `dy·y`; `sqrt`: `dy·0.5/y`; `tanh`: `dy·(1 - y²)`; `sigmoid`:
    /// `dy·y·(1 - y)`; `reciprocal`: `-dy·y²`; `rsqrt`: `-0.5·dy·y³`; `div`: `dy/b` and
    /// `-(dy/b)·y`; `erf`: `dy·2/√π·e^(-x²)`; `softplus`: `dy·sigmoid(x)`; `softsign`: `dy/(1+|x|)²`). Where the
    /// derivative is not defined everywhere (TensorFlow's conventions unless said otherwise):
    /// - `abs`: `sign(x)·dy`, so 0 at 0; `relu`: `dy` where `x > 0`, so 0 at 0.
    /// - `floor`, `ceil`, `round`, `sign`, float `floor_divide`: zero, their derivative almost
    ///   everywhere (as JAX and PyTorch). TensorFlow agrees for `sign` (`zeros_like`) but
    ///   registers `None` for `floor`, `ceil` and `round` (and `FloorDiv`); here the gradient
    ///   is a zero tensor, so a sum through them still has one.
    /// - `maximum`/`minimum`: the input equal to the result gets `dy`; at a tie each gets
    ///   `dy/2`, as JAX and PyTorch (TensorFlow gives the whole `dy` to the first input).
    ///   So `clip(x, lo, hi)`, built as `minimum(maximum(x, lo), hi)`, passes `dy` strictly
    ///   inside the bounds, nothing outside, and `dy/2` at a value exactly equal to a bound
    ///   (TensorFlow's fused `ClipByValue` passes all of it there).
    /// - `pow(a, b)`: `∂/∂a = b·a^(b-1)` (so a negative base with an integral exponent is
    ///   fine), but 0 where `b == 0` (`a^0` is 1 for every `a`; JAX's rule, where TensorFlow
    ///   gives `0·0^-1 = NaN` at `a = 0`); `∂/∂b = log(a)·a^b` where `a > 0` and 0 elsewhere
    ///   (TensorFlow: no real logarithm for `a ≤ 0`, and 0 rather than NaN).
    /// - `remainder(a, b)` on floats: `∂/∂a = 1`, `∂/∂b = -floor(a / b)` (TensorFlow's
    ///   `FloorMod`).
    /// - `where(c, a, b)`: `dy` to `a` where `c`, to `b` elsewhere; `c` gets nothing.
    /// - `cast` between float dtypes passes `dy` back, cast to the input's dtype; a cast from
    ///   or to an integer or bool stops the gradient (`None`), as do comparisons, logical ops,
    ///   `isnan`, `isinf`, `isfinite` and all integer arithmetic.
    pub fn vjp(&self, ins: &[DType], wanted: &[bool]) -> Vec<Option<Expr>> {
        let n = ins.len();
        let dtypes = self.dtypes(ins);
        let root = self.root();
        let mut t = Grad {
            nodes: self.nodes.clone(),
            dtypes: dtypes.clone(),
        };
        let y = t.push(Node::Input(n), dtypes[root]);
        let dy = t.push(Node::Input(n + 1), dtypes[root]);
        let value = |k: usize| if k == root { y } else { k };
        let mut adj = vec![Adj::None; self.nodes.len()];
        adj[root] = Adj::At(dy);
        let mut per_input = vec![Adj::None; n];
        for k in (0..=root).rev() {
            let g = match adj[k] {
                Adj::None => continue,
                // A zero adjoint flows where a non-zero one would; the nodes the rule builds
                // from this placeholder are unreachable and dropped.
                Adj::Zero => t.lit(dtypes[k], 0.0),
                Adj::At(g) => g,
            };
            if let Node::Input(i) = self.nodes[k] {
                if i < n {
                    per_input[i] = t.accumulate(per_input[i], adj[k]);
                }
                continue;
            }
            if !dtypes[k].is_float() {
                continue;
            }
            let node = self.nodes[k].map_operands(value);
            let parts = t.node(node, value(k), g);
            for (o, part) in self.nodes[k].operands().zip(parts) {
                let part = match (adj[k], part) {
                    (_, Adj::None) => continue,
                    (Adj::Zero, _) => Adj::Zero,
                    (_, p) => p,
                };
                if dtypes[o].is_float() {
                    adj[o] = t.accumulate(adj[o], part);
                }
            }
        }
        per_input
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                if !wanted.get(i).copied().unwrap_or(false) || !ins[i].is_float() {
                    return None;
                }
                match a {
                    Adj::None => None,
                    Adj::Zero => Some(Expr::lit(ins[i], lit_word(ins[i], 0.0))),
                    Adj::At(k) => Some(t.expr_at(k)),
                }
            })
            .collect()
    }
}

/// The node list being extended with adjoints (forward nodes first).
struct Grad {
    nodes: Vec<Node>,
    dtypes: Vec<DType>,
}

impl Grad {
    fn push(&mut self, node: Node, d: DType) -> usize {
        self.nodes.push(node);
        self.dtypes.push(d);
        self.nodes.len() - 1
    }

    fn lit(&mut self, d: DType, v: f64) -> usize {
        self.push(Node::Lit(d, lit_word(d, v)), d)
    }

    fn un(&mut self, op: UnaryOp, a: usize) -> usize {
        let d = self.dtypes[a];
        self.push(Node::Unary(op, a), d)
    }

    fn bin(&mut self, op: BinaryOp, a: usize, b: usize) -> usize {
        let d = if op.is_comparison() {
            DType::Bool
        } else {
            self.dtypes[a]
        };
        self.push(Node::Binary(op, a, b), d)
    }

    fn mul(&mut self, a: usize, b: usize) -> usize {
        self.bin(BinaryOp::Mul, a, b)
    }

    /// `x · v` for a literal `v`.
    fn scale(&mut self, x: usize, v: f64) -> usize {
        let c = self.lit(self.dtypes[x], v);
        self.mul(x, c)
    }

    /// `where(c, a, 0)` (or `where(c, 0, a)` with `flip`).
    fn keep(&mut self, c: usize, a: usize, flip: bool) -> usize {
        let zero = self.lit(self.dtypes[a], 0.0);
        let (x, y) = if flip { (zero, a) } else { (a, zero) };
        let d = self.dtypes[a];
        self.push(Node::Select(c, x, y), d)
    }

    fn accumulate(&mut self, acc: Adj, part: Adj) -> Adj {
        match (acc, part) {
            (Adj::None | Adj::Zero, p) => p,
            (a, Adj::None | Adj::Zero) => a,
            (Adj::At(a), Adj::At(b)) => Adj::At(self.bin(BinaryOp::Add, a, b)),
        }
    }

    /// The expression whose result is node `k`.
    fn expr_at(&self, k: usize) -> Expr {
        // Every operand precedes its user, so the prefix ending at `k` holds all it needs.
        Expr {
            nodes: self.nodes[..=k].to_vec(),
        }
        .canonical()
    }

    /// The gradient each operand of `node` (operands already mapped to values; `y` is the
    /// node's own value) receives from the gradient `g` at its result, in operand order.
    /// Called only for float results.
    fn node(&mut self, node: Node, y: usize, g: usize) -> Vec<Adj> {
        use BinaryOp as B;
        use UnaryOp as U;
        let at = Adj::At;
        match node {
            Node::Input(_) | Node::Lit(..) => Vec::new(),
            Node::Unary(op, a) => vec![match op {
                U::Neg => at(self.un(U::Neg, g)),
                U::Abs => {
                    let s = self.un(U::Sign, a);
                    at(self.mul(g, s))
                }
                U::Exp => at(self.mul(g, y)),
                U::Log => at(self.bin(B::Div, g, a)),
                U::Sqrt => {
                    let h = self.scale(g, 0.5);
                    at(self.bin(B::Div, h, y))
                }
                U::Tanh => {
                    let one = self.lit(self.dtypes[y], 1.0);
                    let y2 = self.mul(y, y);
                    let d = self.bin(B::Sub, one, y2);
                    at(self.mul(g, d))
                }
                U::Sigmoid => {
                    let one = self.lit(self.dtypes[y], 1.0);
                    let c = self.bin(B::Sub, one, y);
                    let d = self.mul(y, c);
                    at(self.mul(g, d))
                }
                U::Relu => {
                    let zero = self.lit(self.dtypes[a], 0.0);
                    let pos = self.bin(B::Greater, a, zero);
                    at(self.keep(pos, g, false))
                }
                U::Floor | U::Ceil | U::Round | U::Sign => Adj::Zero,
                U::Reciprocal => {
                    let y2 = self.mul(y, y);
                    let d = self.mul(g, y2);
                    at(self.un(U::Neg, d))
                }
                U::Rsqrt => {
                    let y2 = self.mul(y, y);
                    let y3 = self.mul(y2, y);
                    let d = self.scale(y3, -0.5);
                    at(self.mul(g, d))
                }
                U::Log1p => {
                    let one = self.lit(self.dtypes[a], 1.0);
                    let d = self.bin(B::Add, a, one);
                    at(self.bin(B::Div, g, d))
                }
                U::Expm1 => {
                    let e = self.un(U::Exp, a);
                    at(self.mul(g, e))
                }
                // 1 + tan², from the value itself.
                U::Tan => {
                    let one = self.lit(self.dtypes[y], 1.0);
                    let y2 = self.mul(y, y);
                    let d = self.bin(B::Add, one, y2);
                    at(self.mul(g, d))
                }
                U::Sin => {
                    let c = self.un(U::Cos, a);
                    at(self.mul(g, c))
                }
                U::Cos => {
                    let s = self.un(U::Sin, a);
                    let s = self.un(U::Neg, s);
                    at(self.mul(g, s))
                }
                U::Erf => {
                    let a2 = self.mul(a, a);
                    let e = self.un(U::Neg, a2);
                    let e = self.un(U::Exp, e);
                    let d = self.scale(e, std::f64::consts::FRAC_2_SQRT_PI);
                    at(self.mul(g, d))
                }
                U::Softplus => {
                    let s = self.un(U::Sigmoid, a);
                    at(self.mul(g, s))
                }
                // 1/(1+|x|)², from x rather than 1-|y|, which cancels for large |x|.
                U::Softsign => {
                    let one = self.lit(self.dtypes[a], 1.0);
                    let m = self.un(U::Abs, a);
                    let d = self.bin(B::Add, m, one);
                    let r = self.bin(B::Div, g, d);
                    at(self.bin(B::Div, r, d))
                }
                // asin: 1/√(1-x²); acos: its negation; atan: 1/(1+x²); asinh: 1/√(x²+1);
                // acosh: 1/(√(x-1)·√(x+1)) (no cancellation in x²-1); atanh: 1/(1-x²).
                U::Asin | U::Acos => {
                    let one = self.lit(self.dtypes[a], 1.0);
                    let x2 = self.mul(a, a);
                    let d = self.bin(B::Sub, one, x2);
                    let d = self.un(U::Sqrt, d);
                    let r = self.bin(B::Div, g, d);
                    at(if op == U::Acos { self.un(U::Neg, r) } else { r })
                }
                U::Atan | U::Atanh => {
                    let one = self.lit(self.dtypes[a], 1.0);
                    let x2 = self.mul(a, a);
                    let d = if op == U::Atan {
                        self.bin(B::Add, one, x2)
                    } else {
                        self.bin(B::Sub, one, x2)
                    };
                    at(self.bin(B::Div, g, d))
                }
                U::Asinh => {
                    let one = self.lit(self.dtypes[a], 1.0);
                    let x2 = self.mul(a, a);
                    let d = self.bin(B::Add, x2, one);
                    let d = self.un(U::Sqrt, d);
                    at(self.bin(B::Div, g, d))
                }
                U::Acosh => {
                    let one = self.lit(self.dtypes[a], 1.0);
                    let m = self.bin(B::Sub, a, one);
                    let p = self.bin(B::Add, a, one);
                    let m = self.un(U::Sqrt, m);
                    let p = self.un(U::Sqrt, p);
                    let d = self.mul(m, p);
                    at(self.bin(B::Div, g, d))
                }
                U::IsNan | U::IsInf | U::IsFinite | U::LogicalNot | U::BitNot => Adj::None,
                // Straight-through: the rounding's derivative is 1 almost everywhere.
                U::RoundBf16 | U::RoundTo(_) => at(g),
            }],
            Node::Binary(op, a, b) => {
                let (ga, gb) = match op {
                    B::Add => (at(g), at(g)),
                    B::Sub => (at(g), at(self.un(U::Neg, g))),
                    B::Mul => (at(self.mul(g, b)), at(self.mul(g, a))),
                    B::Div => {
                        // ∂/∂b = -dy·a/b² = -(dy/b)·y, without squaring b.
                        let ga = self.bin(B::Div, g, b);
                        let gb = self.mul(ga, y);
                        (at(ga), at(self.un(U::Neg, gb)))
                    }
                    B::Maximum | B::Minimum => {
                        let ea = self.bin(B::Equal, a, y);
                        let eb = self.bin(B::Equal, b, y);
                        let half = self.scale(g, 0.5);
                        let d = self.dtypes[g];
                        let split = |t: &mut Grad, own: usize, other: usize| {
                            let share = t.push(Node::Select(other, half, g), d);
                            t.keep(own, share, false)
                        };
                        (at(split(self, ea, eb)), at(split(self, eb, ea)))
                    }
                    B::Pow => {
                        let d = self.dtypes[a];
                        let one = self.lit(d, 1.0);
                        let zero = self.lit(d, 0.0);
                        let bm1 = self.bin(B::Sub, b, one);
                        let p = self.bin(B::Pow, a, bm1);
                        let p = self.mul(b, p);
                        let ga = self.mul(g, p);
                        let b0 = self.bin(B::Equal, b, zero);
                        let ga = self.keep(b0, ga, true);
                        let pos = self.bin(B::Greater, a, zero);
                        // log of 1, not of a ≤ 0, in the branch `where` drops, so that a
                        // second derivative does not meet 0·inf.
                        let safe = self.push(Node::Select(pos, a, one), d);
                        let log = self.un(U::Log, safe);
                        let log = self.keep(pos, log, false);
                        let gb = self.mul(y, log);
                        (at(ga), at(self.mul(g, gb)))
                    }
                    B::Remainder => {
                        let q = self.bin(B::FloorDiv, a, b);
                        let gb = self.mul(g, q);
                        (at(g), at(self.un(U::Neg, gb)))
                    }
                    B::FloorDiv => (Adj::Zero, Adj::Zero),
                    B::Equal
                    | B::Less
                    | B::Greater
                    | B::NotEqual
                    | B::LessEqual
                    | B::GreaterEqual
                    | B::LogicalAnd
                    | B::LogicalOr
                    | B::LogicalXor
                    | B::BitAnd
                    | B::BitOr
                    | B::BitXor => (Adj::None, Adj::None),
                };
                vec![ga, gb]
            }
            Node::Select(c, _, _) => {
                let ga = self.keep(c, g, false);
                let gb = self.keep(c, g, true);
                vec![Adj::None, at(ga), at(gb)]
            }
            Node::Cast(_, a) => {
                let from = self.dtypes[a];
                vec![match (from.is_float(), from == self.dtypes[g]) {
                    (false, _) => Adj::None,
                    (true, true) => at(g),
                    (true, false) => at(self.push(Node::Cast(from, g), from)),
                }]
            }
        }
    }
}

/// The word of the float or integer `v` in dtype `d` (`v` is a small exact constant).
fn lit_word(d: DType, v: f64) -> u32 {
    match d {
        DType::F32 => (v as f32).to_bits(),
        DType::F16 => crate::dtype::f32_to_f16_word((v as f32).to_bits()),
        DType::I32 => v as i32 as u32,
        DType::U32 => v as u32,
        DType::Bool => (v != 0.0) as u32,
    }
}
