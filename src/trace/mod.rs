//! Pictures of graphs, plans and runs: Graphviz DOT with one cluster per device, the memory
//! plan as SVG ([`Plan::memory_svg`], in `memory.rs`), and what a traced run did
//! ([`RunMetadata`]) as Chrome trace-event JSON and a per-op summary table ([`Profile`]).

mod chrome;
mod memory;
mod run;
mod summary;

pub use crate::backend::timing::{Clock, SpanKind};
pub use chrome::arena_bytes_at;
pub use run::{kernel_flops, kernel_kind, RunMetadata, RunOptions, TraceEvent};
pub use summary::{Profile, ProfileRow, ProfileSum};

use crate::compile::Plan;
use crate::device::Device;
use crate::Graph;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Graphviz DOT of `graph`, grouped into one `subgraph cluster_<device>` per device of
/// `plan`'s placement. Nodes the plan pruned are drawn dashed, outside every cluster. Each node
/// is labelled with its name, op, shape and dtype; edges follow the graph's inputs.
pub fn dot(graph: &Graph, plan: &Plan) -> String {
    let placed: BTreeMap<&str, Device> = plan
        .placement
        .iter()
        .map(|(n, d)| (n.as_str(), *d))
        .collect();
    let mut clusters: BTreeMap<Device, Vec<String>> = BTreeMap::new();
    let mut outside = Vec::new();
    for (t, node) in graph.nodes() {
        let label = format!(
            "{}\\n{} {} {}",
            escape(&node.name),
            node.op.name(),
            node.dtype,
            node.shape
        );
        match placed.get(node.name.as_str()) {
            Some(d) => clusters
                .entry(*d)
                .or_default()
                .push(format!("    n{} [label=\"{label}\"];", t.index())),
            None => outside.push(format!(
                "  n{} [label=\"{label}\", style=dashed];",
                t.index()
            )),
        }
    }
    let mut s = String::from(
        "digraph wgflow {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for (d, lines) in &clusters {
        let id = d.to_string().replace(':', "_");
        let _ = writeln!(s, "  subgraph cluster_{id} {{\n    label=\"{d}\";");
        for l in lines {
            let _ = writeln!(s, "{l}");
        }
        s.push_str("  }\n");
    }
    for l in &outside {
        let _ = writeln!(s, "{l}");
    }
    for (t, inputs) in graph.edges() {
        for (slot, i) in inputs.into_iter().enumerate() {
            let _ = writeln!(s, "  n{} -> n{} [label=\"{slot}\"];", i.index(), t.index());
        }
    }
    s.push_str("}\n");
    s
}

/// Escape a name for a double-quoted DOT string.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
