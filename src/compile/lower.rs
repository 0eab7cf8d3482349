//! Placed graph nodes → values and steps: one kernel per op node, views for reshapes,
//! feeds for placeholders, constants copied to each device that reads them, and a Transfer
//! step wherever an edge crosses devices.

use super::place::Placed;
use super::{Plan, Source, Step, StepId, StepKind, Value, ValueId};
use crate::device::Device;
use crate::graph::NodeId;
use crate::graph::{Graph, Node, Tensor};
use crate::id::IdVec;
use crate::ops::family::{Arg, Emit, EmptyInput, LowerCx, Lowered};
use crate::ops::{ElementwiseKernel, Expr, Kernel};
use crate::{DType, HostTensor, Shape};
use crate::{Error, HostKind, Result};
use std::collections::{BTreeMap, HashMap};

struct Lowering {
    values: IdVec<ValueId, Value>,
    steps: IdVec<StepId, Step>,
    on_device: HashMap<(ValueId, Device), ValueId>,
}

impl Lowering {
    fn value(&mut self, v: Value) -> ValueId {
        self.values.push(v)
    }

    /// `v` as seen from `device`: itself, a copy of a constant, or a transferred copy.
    fn on(&mut self, v: ValueId, device: Device) -> ValueId {
        if self.values[v].device == device {
            return v;
        }
        if let Some(&c) = self.on_device.get(&(v, device)) {
            return c;
        }
        let src = &self.values[v];
        let mut copy = src.clone();
        copy.device = device;
        let id = if matches!(src.source, Source::Constant(_)) {
            self.value(copy)
        } else if src.shape.numel() == 0 {
            // Nothing to move: an empty constant on the other side.
            copy.source = Source::Constant(HostTensor::zeros(src.shape.clone(), src.dtype));
            self.value(copy)
        } else {
            copy.source = Source::Step;
            let name = copy.name.clone();
            let id = self.value(copy);
            self.steps.push(Step {
                kind: StepKind::Transfer { src: v },
                output: id,
                device,
                nodes: vec![format!("{name} (transfer)")],
            });
            id
        };
        self.on_device.insert((v, device), id);
        id
    }

    /// Dispatch `kernel`, the first pass of `node` (split-K partial products, partial
    /// convolutions over channel chunks), into a new `shape` value that the node's last pass
    /// reads.
    fn partial(
        &mut self,
        kernel: Kernel,
        shape: crate::Shape,
        dtype: crate::DType,
        node: &crate::graph::Node,
        device: Device,
        inputs: Vec<ValueId>,
    ) -> ValueId {
        let v = self.value(Value {
            shape,
            dtype,
            device,
            source: Source::Step,
            name: format!("{}/partial", node.name),
        });
        self.steps.push(Step {
            kind: StepKind::Dispatch { kernel, inputs },
            output: v,
            device,
            nodes: vec![node.name.clone()],
        });
        v
    }
}

/// The value behind a lowering's opaque handle.
fn id(a: Arg) -> ValueId {
    a.0
}

/// The compiler's side of [`LowerCx`]: partial passes become steps of the node.
struct Emitter<'l, 'a> {
    l: &'l mut Lowering,
    node: &'a Node,
    device: Device,
}

impl Emit for Emitter<'_, '_> {
    fn partial(
        &mut self,
        kernel: Kernel,
        shape: Shape,
        dtype: crate::DType,
        inputs: Vec<Arg>,
    ) -> Arg {
        let inputs = inputs.into_iter().map(id).collect();
        let v = self
            .l
            .partial(kernel, shape, dtype, self.node, self.device, inputs);
        Arg(v)
    }
}

/// Lower the placed nodes: each node's family turns it into kernels (or a feed, constant
/// or view).
pub fn lower(graph: &Graph, placed: &Placed, fetches: &[Tensor]) -> Result<Plan> {
    let mut l = Lowering {
        values: IdVec::new(),
        steps: IdVec::new(),
        on_device: HashMap::new(),
    };
    let mut of_node: HashMap<NodeId, ValueId> = HashMap::new();
    let mut feeds = Vec::new();
    let mut placement = Vec::new();
    let mut assigns = Vec::new();
    let mut assigned: Vec<(ValueId, &str)> = Vec::new();
    for &n in &placed.nodes {
        let node = &graph.g[n];
        let device = placed.device[&n];
        placement.push((node.name.clone(), device));
        let inputs: Vec<ValueId> = graph
            .input_nodes(n)
            .iter()
            .map(|i| l.on(of_node[i], device))
            .collect();
        let descs: Vec<(Shape, DType)> = inputs
            .iter()
            .map(|&v| (l.values[v].shape.clone(), l.values[v].dtype))
            .collect();
        let mut value = Value {
            shape: node.shape.clone(),
            dtype: node.dtype,
            device,
            source: Source::Step,
            name: node.name.clone(),
        };
        if let Some(t) = empty_result(node, &descs)? {
            value.source = Source::Constant(t);
            of_node.insert(n, l.value(value));
            continue;
        }
        let args: Vec<Arg> = inputs.iter().map(|&v| Arg(v)).collect();
        let lowered = {
            let mut emit = Emitter {
                l: &mut l,
                node,
                device,
            };
            let mut cx = LowerCx {
                name: &node.name,
                shape: &node.shape,
                dtype: node.dtype,
                inputs: &descs,
                args: &args,
                device,
                emit: &mut emit,
            };
            node.op.family().lower(&mut cx)?
        };
        let (kernel, inputs) = match lowered {
            Lowered::Feed => {
                value.source = Source::Feed(node.name.clone());
                let id = l.value(value);
                feeds.push((node.name.clone(), id));
                of_node.insert(n, id);
                continue;
            }
            Lowered::Constant(t) => {
                value.source = Source::Constant(t);
                of_node.insert(n, l.value(value));
                continue;
            }
            Lowered::View(a) => {
                value.source = Source::View(id(a));
                of_node.insert(n, l.value(value));
                continue;
            }
            Lowered::Variable(init) => {
                value.source = Source::Variable {
                    name: node.name.clone(),
                    init,
                };
                of_node.insert(n, l.value(value));
                continue;
            }
            Lowered::Assign {
                variable,
                value: new,
            } => {
                let var = l.values.get(id(variable)).map(|v| &v.source);
                let Some(Source::Variable { name: var_name, .. }) = var else {
                    return Err(Error::Build {
                        op: node.op.name().to_string(),
                        location: node.location,
                        message: format!("'{}' does not assign to a variable", node.name),
                        kind: crate::BuildKind::Other,
                    });
                };
                if let Some(&(_, first)) = assigned.iter().find(|(v, _)| *v == id(variable)) {
                    return Err(Error::Assign {
                        variable: var_name.clone(),
                        first: first.to_string(),
                        second: node.name.clone(),
                    });
                }
                assigned.push((id(variable), node.name.as_str()));
                // Assigning a variable's value copies it first: the copies land in order at
                // the end of the run, and that variable may itself be assigned in this run
                // (a swap), so its start-of-run value must be kept.
                let mut root = id(new);
                while let Source::View(of) = l.values[root].source {
                    root = of;
                }
                let new = match l.values[root].source {
                    Source::Variable { .. } => {
                        let copy = Kernel::Elementwise(ElementwiseKernel {
                            expr: Expr::input(0),
                            inputs: vec![(node.shape.clone(), node.dtype)],
                            out_shape: node.shape.clone(),
                            out_dtype: node.dtype,
                            views: Vec::new(),
                        });
                        l.partial(
                            copy,
                            node.shape.clone(),
                            node.dtype,
                            node,
                            device,
                            vec![id(new)],
                        )
                    }
                    _ => id(new),
                };
                value.source = Source::View(new);
                let out = l.value(value);
                assigns.push((out, id(variable)));
                of_node.insert(n, out);
                continue;
            }
            Lowered::Dispatch { kernel, inputs } => (kernel, inputs.into_iter().map(id).collect()),
        };
        let id = l.value(value);
        l.steps.push(Step {
            kind: StepKind::Dispatch { kernel, inputs },
            output: id,
            device,
            nodes: vec![node.name.clone()],
        });
        of_node.insert(n, id);
    }
    let fetches = fetches.iter().map(|t| of_node[&t.node()]).collect();
    Ok(Plan {
        values: l.values,
        steps: l.steps,
        feeds,
        fetches,
        assigns,
        placement,
        memory: BTreeMap::new(),
    })
}

/// Empty tensors never reach a kernel (wgpu cannot bind an empty buffer, and no work is
/// needed): an empty result is an empty constant, and a result computed from an empty input
/// depends on shapes only, by the family's [`EmptyInput`] rule (a sum over nothing is 0, a
/// mean NaN, `[m, 0] @ [0, n]` is zeros, padding nothing gives the pad value). `None` when
/// the node runs as usual.
fn empty_result(node: &Node, inputs: &[(Shape, DType)]) -> Result<Option<HostTensor>> {
    let numel = node.shape.numel();
    let family = node.op.family();
    if family.is_leaf() || family.is_view() {
        return Ok(None);
    }
    // The shape comes from the user's data (a fed `[2e9, 0]`): the memory may not be there.
    let filled = |word: u32| {
        let mut words = crate::host::fresh_vec(numel).ok_or_else(|| {
            Error::host(
                HostKind::Alloc,
                format!(
                    "cannot allocate {numel} elements for '{}' ({})",
                    node.name, node.shape
                ),
            )
        })?;
        words.resize(numel, word);
        HostTensor::from_words(node.shape.clone(), node.dtype, words).map(Some)
    };
    if numel == 0 {
        return filled(0);
    }
    if inputs.iter().all(|(s, _)| s.numel() > 0) {
        return Ok(None);
    }
    match family.on_empty_input(node.dtype) {
        EmptyInput::Fill(word) => filled(word),
        EmptyInput::Lower => Ok(None),
        EmptyInput::Impossible => Err(Error::Build {
            op: node.op.name().to_string(),
            location: node.location,
            message: format!(
                "'{}' reads an empty input ({}) but its output {} is not empty",
                node.name,
                inputs
                    .iter()
                    .map(|(s, _)| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                node.shape
            ),
            kind: crate::BuildKind::Other,
        }),
    }
}
