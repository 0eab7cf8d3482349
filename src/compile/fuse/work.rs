//! The arena an elementwise kernel is fused in (see [`Work`]).

use super::*;

/// "Itself" in [`Work::fwd`].
const NO_FWD: usize = usize::MAX;

/// An elementwise kernel being fused: an arena of expression nodes in which an input's node,
/// once the input is inlined, is forwarded to the inlined expression's result. Inlining then
/// appends the smaller of the two arenas to the larger and rewrites nothing, so fusing a
/// chain of n ops costs O(n log n), not O(n²).
#[derive(Debug, Clone, Default)]
pub(super) struct Work {
    pub(super) nodes: Vec<Node>,
    /// The node each node stands for once forwarded ([`NO_FWD`]: itself).
    pub(super) fwd: Vec<usize>,
    pub(super) root: usize,
    /// Live inputs by id (the `Node::Input` index in the arena): source and reading node.
    pub(super) ins: BTreeMap<usize, (Src, usize)>,
    pub(super) by_src: HashMap<Src, usize>,
    pub(super) next_id: usize,
    /// Operations in the arena (a shared node counts once).
    pub(super) ops: usize,
    /// The graph nodes computed, with the step each came from (for ordering).
    pub(super) names: Vec<(StepId, String)>,
    /// The value this kernel writes.
    pub(super) out: ValueId,
}

impl Work {
    pub(super) fn new(
        k: &ElementwiseKernel,
        inputs: &[ValueId],
        step: (StepId, ValueId),
        names: Vec<String>,
    ) -> Work {
        let mut w = Work {
            nodes: k.expr.nodes().to_vec(),
            fwd: vec![NO_FWD; k.expr.nodes().len()],
            root: k.expr.root(),
            ins: BTreeMap::new(),
            by_src: HashMap::new(),
            next_id: 0,
            ops: k.expr.op_count(),
            names: names.into_iter().map(|n| (step.0, n)).collect(),
            out: step.1,
        };
        for a in 0..w.nodes.len() {
            if let Node::Input(i) = w.nodes[a] {
                w.add_input(a, (inputs[i], viewed(k, i)));
            }
        }
        w
    }

    /// Make arena node `a` read `src`, sharing an existing input of the same source.
    pub(super) fn add_input(&mut self, a: usize, src: Src) {
        if let Some(&id) = self.by_src.get(&src) {
            self.fwd[a] = self.ins[&id].1;
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.nodes[a] = Node::Input(id);
        self.by_src.insert(src.clone(), id);
        self.ins.insert(id, (src, a));
    }

    /// Drop input `id`, returning its arena node.
    pub(super) fn remove_input(&mut self, id: usize) -> Option<usize> {
        let (src, a) = self.ins.remove(&id)?;
        self.by_src.remove(&src);
        Some(a)
    }

    /// Replace input `id` by a leaf node (a literal).
    pub(super) fn replace_input(&mut self, id: usize, leaf: Node) {
        if let Some(a) = self.remove_input(id) {
            self.nodes.push(leaf);
            self.fwd.push(NO_FWD);
            self.fwd[a] = self.nodes.len() - 1;
        }
    }

    /// Read input `id` from another source (a view of the producer's input).
    pub(super) fn rebind(&mut self, id: usize, src: Src) {
        if let Some(a) = self.remove_input(id) {
            self.add_input(a, src);
        }
    }

    /// Storage bindings (inputs) after inlining `p` in place of input `id`.
    pub(super) fn bindings_after(&self, id: usize, p: &Work) -> usize {
        let new = p
            .ins
            .values()
            .filter(|(src, _)| !self.by_src.contains_key(src))
            .count();
        self.ins.len() - usize::from(self.ins.contains_key(&id)) + new
    }

    /// Cheap enough to recompute in each consumer (see the module docs): at most one input
    /// of the output's size, at most [`RECOMPUTE_MAX_OPS`] operations.
    pub(super) fn cheap(&self, plan: &Plan) -> bool {
        let out = &plan.values[self.out].shape;
        let full = self
            .ins
            .values()
            .filter(|((v, view), _)| match view {
                Some((_, apparent)) => apparent == out,
                None => &plan.values[*v].shape == out,
            })
            .count();
        full <= 1 && self.ops <= RECOMPUTE_MAX_OPS
    }

    /// Follow forwarding to the node that computes `a`'s value.
    pub(super) fn resolve(&self, mut a: usize) -> usize {
        while self.fwd[a] != NO_FWD {
            a = self.fwd[a];
        }
        a
    }

    /// This kernel with `p` computed in place of input `id`.
    pub(super) fn inline(mut self, id: usize, p: Work) -> Work {
        let Some(slot) = self.remove_input(id) else {
            return self;
        };
        let (p_root, out) = (p.root, self.out);
        let self_is_big = self.nodes.len() >= p.nodes.len();
        let (mut big, small) = if self_is_big { (self, p) } else { (p, self) };
        let off = big.nodes.len();
        big.nodes
            .extend(small.nodes.iter().map(|n| n.map_operands(|o| o + off)));
        big.fwd.extend(
            small
                .fwd
                .iter()
                .map(|&f| if f == NO_FWD { NO_FWD } else { f + off }),
        );
        for (src, a) in small.ins.into_values() {
            big.add_input(a + off, src);
        }
        big.ops += small.ops;
        let mut names = small.names;
        if names.len() > big.names.len() {
            std::mem::swap(&mut names, &mut big.names);
        }
        big.names.append(&mut names);
        let (slot, p_root, root) = if self_is_big {
            (slot, p_root + off, big.root)
        } else {
            (slot + off, p_root, small.root + off)
        };
        big.fwd[slot] = p_root;
        big.root = root;
        big.out = out;
        big
    }

    /// The finished expression (shared nodes merged, inputs numbered by first use), its
    /// inputs, and the graph nodes it computes.
    pub(super) fn finish(self) -> (Expr, Vec<Src>, Vec<(StepId, String)>) {
        const UNSEEN: usize = usize::MAX;
        let mut map = vec![UNSEEN; self.nodes.len()];
        let mut nodes: Vec<Node> = Vec::new();
        let mut seen: HashMap<Node, usize> = HashMap::new();
        let mut input_pos: HashMap<usize, usize> = HashMap::new();
        let mut srcs: Vec<Src> = Vec::new();
        // Post-order without recursion: chains are as deep as they are long.
        let mut stack = vec![(self.resolve(self.root), false)];
        while let Some((a, expanded)) = stack.pop() {
            if map[a] != UNSEEN {
                continue;
            }
            let node = self.nodes[a];
            if !expanded {
                stack.push((a, true));
                let ops: Vec<usize> = node.operands().collect();
                for &o in ops.iter().rev() {
                    let o = self.resolve(o);
                    if map[o] == UNSEEN {
                        stack.push((o, false));
                    }
                }
                continue;
            }
            let node = match node {
                Node::Input(id) => {
                    let pos = *input_pos.entry(id).or_insert_with(|| {
                        let src = self.ins.get(&id).map(|(s, _)| s.clone());
                        // One value read the same way through two inputs is one binding: two
                        // writable bindings of one range are an error in WebGPU (Dawn), and
                        // the shared operations on it then merge too.
                        if let Some(p) = src.as_ref().and_then(|s| srcs.iter().position(|t| t == s))
                        {
                            return p;
                        }
                        srcs.push(src.unwrap_or((ValueId::new(0), None)));
                        srcs.len() - 1
                    });
                    Node::Input(pos)
                }
                other => other.map_operands(|o| map[self.resolve(o)]),
            };
            map[a] = *seen.entry(node).or_insert_with(|| {
                nodes.push(node);
                nodes.len() - 1
            });
        }
        let expr = Expr::from_nodes(nodes).unwrap_or_else(|| Expr::input(0));
        (expr, srcs, self.names)
    }
}
