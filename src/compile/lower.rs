//! Placed graph nodes → values and steps: one kernel per op node, views for reshapes,
//! feeds for placeholders, constants copied to each device that reads them, and a Transfer
//! step wherever an edge crosses devices.

use super::place::Placed;
use super::{Plan, Source, Step, StepKind, Value, ValueId};
use crate::device::Device;
use crate::graph::{Graph, Node, Tensor};
use crate::ops::custom::{Invocations, RawKernel};
use crate::ops::{
    ConcatKernel, Conv2dKernel, ElementwiseKernel, Expr, GatherKernel, Kernel, MatMulKernel, Op,
    PadKernel, Pass, PermuteKernel, PoolKernel, RandomKernel, ReduceKernel, ReduceOp,
    StridedKernel,
};
use crate::{DType, HostTensor, Shape};
use crate::{Error, Result};
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};

struct Lowering<'a> {
    graph: &'a Graph,
    values: Vec<Value>,
    steps: Vec<Step>,
    on_device: HashMap<(ValueId, Device), ValueId>,
}

impl Lowering<'_> {
    fn value(&mut self, v: Value) -> ValueId {
        self.values.push(v);
        self.values.len() - 1
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
        node: &crate::graph::Node,
        device: Device,
        inputs: Vec<ValueId>,
    ) -> ValueId {
        let v = self.value(Value {
            shape,
            dtype: node.dtype,
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

/// Lower the placed nodes.
pub fn lower(graph: &Graph, placed: &Placed, fetches: &[Tensor]) -> Result<Plan> {
    let mut l = Lowering {
        graph,
        values: Vec::new(),
        steps: Vec::new(),
        on_device: HashMap::new(),
    };
    let mut of_node: HashMap<NodeIndex, ValueId> = HashMap::new();
    let mut feeds = Vec::new();
    let mut placement = Vec::new();
    for &n in &placed.nodes {
        let node = &l.graph.g[n];
        let device = placed.device[&n];
        placement.push((node.name.clone(), device));
        let inputs: Vec<ValueId> = l
            .graph
            .input_nodes(n)
            .iter()
            .map(|i| of_node[i])
            .collect::<Vec<_>>()
            .into_iter()
            .map(|v| l.on(v, device))
            .collect();
        let mut value = Value {
            shape: node.shape.clone(),
            dtype: node.dtype,
            device,
            source: Source::Step,
            name: node.name.clone(),
        };
        let in_desc = |l: &Lowering, i: usize| {
            let v = &l.values[inputs[i]];
            (v.shape.clone(), v.dtype)
        };
        let descs: Vec<(Shape, DType)> = inputs
            .iter()
            .map(|&v| (l.values[v].shape.clone(), l.values[v].dtype))
            .collect();
        if let Some(t) = empty_result(node, &descs)? {
            value.source = Source::Constant(t);
            of_node.insert(n, l.value(value));
            continue;
        }
        let mut step_inputs = None;
        let kernel = match &node.op {
            Op::Placeholder => {
                value.source = Source::Feed(node.name.clone());
                let id = l.value(value);
                feeds.push((node.name.clone(), id));
                of_node.insert(n, id);
                continue;
            }
            Op::Constant(t) => {
                value.source = Source::Constant(t.clone());
                of_node.insert(n, l.value(value));
                continue;
            }
            Op::Reshape => {
                value.source = Source::View(inputs[0]);
                of_node.insert(n, l.value(value));
                continue;
            }
            op if op.is_elementwise() => {
                let args = || (0..inputs.len()).map(Expr::input);
                let expr = match op {
                    Op::Unary(u) => Expr::unary(*u, Expr::input(0)),
                    Op::Binary(b) => {
                        let mut a = args();
                        match (a.next(), a.next()) {
                            (Some(x), Some(y)) => Expr::binary(*b, x, y),
                            _ => {
                                return Err(Error::Internal(format!(
                                    "{} needs 2 inputs",
                                    node.name
                                )))
                            }
                        }
                    }
                    Op::Select => {
                        let mut a = args();
                        match (a.next(), a.next(), a.next()) {
                            (Some(c), Some(x), Some(y)) => Expr::select(c, x, y),
                            _ => {
                                return Err(Error::Internal(format!(
                                    "{} needs 3 inputs",
                                    node.name
                                )))
                            }
                        }
                    }
                    Op::Cast(d) => Expr::cast(*d, Expr::input(0)),
                    Op::Custom(c) => c.expr.clone(),
                    _ => return Err(Error::Internal(format!("{} is not elementwise", node.name))),
                };
                Kernel::Elementwise(ElementwiseKernel {
                    expr,
                    inputs: (0..inputs.len()).map(|i| in_desc(&l, i)).collect(),
                    out_shape: node.shape.clone(),
                    out_dtype: node.dtype,
                    views: Vec::new(),
                })
            }
            Op::Reduce { op, axes } => {
                let whole = ReduceKernel {
                    prologue: None,
                    epilogue: None,
                    op: *op,
                    in_shape: in_desc(&l, 0).0,
                    dtype: in_desc(&l, 0).1,
                    axes: axes.clone(),
                    out_shape: node.shape.clone(),
                    pass: Pass::Whole,
                };
                let mut passes = whole.passes();
                let last = passes.pop().ok_or_else(|| {
                    Error::Internal(format!("reduction '{}' lowered to no kernel", node.name))
                })?;
                // Partial passes: each reads the previous one's output.
                let mut prev = inputs[0];
                for p in passes {
                    // A partial pass's dtype is the node's (arg ops: i32 indices).
                    let shape = p.out_shape.clone();
                    prev = l.partial(Kernel::Reduce(p), shape, node, device, vec![prev]);
                }
                step_inputs = Some(match last.pass {
                    Pass::ArgOfPartials { .. } => vec![inputs[0], prev],
                    _ => vec![prev],
                });
                Kernel::Reduce(last)
            }
            Op::MatMul => {
                let (first, sum) = MatMulKernel {
                    a: in_desc(&l, 0).0,
                    b: in_desc(&l, 1).0,
                    out: node.shape.clone(),
                    dtype: node.dtype,
                    block: None,
                    tiled: false,
                    epilogue: None,
                    k_chunk: None,
                }
                .passes();
                match sum {
                    None => Kernel::MatMul(first),
                    Some(sum) => {
                        let shape = first.out_shape();
                        let partial =
                            l.partial(Kernel::MatMul(first), shape, node, device, inputs.clone());
                        step_inputs = Some(vec![partial]);
                        Kernel::Reduce(sum)
                    }
                }
            }
            Op::Permute(perm) => Kernel::Permute(PermuteKernel {
                in_shape: in_desc(&l, 0).0,
                perm: perm.clone(),
                out_shape: node.shape.clone(),
                dtype: node.dtype,
            }),
            Op::Strided {
                kind,
                offset,
                strides,
            } => Kernel::Strided(StridedKernel {
                kind: *kind,
                out_shape: node.shape.clone(),
                offset: *offset,
                strides: strides.clone(),
                dtype: node.dtype,
            }),
            Op::Concat(axis) => {
                // Empty pieces add nothing (and could not be bound).
                let kept: Vec<usize> = (0..inputs.len())
                    .filter(|&i| descs[i].0.numel() > 0)
                    .collect();
                step_inputs = Some(kept.iter().map(|&i| inputs[i]).collect());
                Kernel::Concat(ConcatKernel {
                    in_shapes: kept.iter().map(|&i| descs[i].0.clone()).collect(),
                    axis: *axis,
                    out_shape: node.shape.clone(),
                    dtype: node.dtype,
                })
            }
            Op::Pad { before, value } => Kernel::Pad(PadKernel {
                in_shape: in_desc(&l, 0).0,
                before: before.clone(),
                value: *value,
                out_shape: node.shape.clone(),
                dtype: node.dtype,
            }),
            Op::Gather(axis) => Kernel::Gather(GatherKernel {
                x_shape: in_desc(&l, 0).0,
                indices: in_desc(&l, 1).0.numel(),
                axis: *axis,
                out_shape: node.shape.clone(),
                dtype: node.dtype,
            }),
            Op::Conv2d { window, groups } => {
                let (first, sum) = Conv2dKernel {
                    x: in_desc(&l, 0).0,
                    w: in_desc(&l, 1).0,
                    window: *window,
                    groups: *groups,
                    out: node.shape.clone(),
                    epilogue: None,
                    c_chunk: None,
                }
                .passes();
                match sum {
                    None => Kernel::Conv2d(first),
                    Some(sum) => {
                        let shape = first.out_shape();
                        let partial =
                            l.partial(Kernel::Conv2d(first), shape, node, device, inputs.clone());
                        step_inputs = Some(vec![partial]);
                        Kernel::Reduce(sum)
                    }
                }
            }
            Op::Pool { kind, window } => Kernel::Pool(PoolKernel {
                kind: *kind,
                x: in_desc(&l, 0).0,
                window: *window,
                out: node.shape.clone(),
            }),
            Op::Random(spec) => Kernel::Random(RandomKernel {
                spec: *spec,
                out_shape: node.shape.clone(),
            }),
            Op::RawWgsl(r) => {
                let workgroup_size = r.check(inputs.len())?;
                Kernel::RawWgsl(RawKernel {
                    name: r.name.clone(),
                    source: r.source.clone(),
                    entry_point: r.entry_point.clone(),
                    workgroup_size,
                    invocations: match r.invocations {
                        Invocations::PerOutputElement => node.shape.numel() as u64,
                        Invocations::Fixed(n) => n,
                    },
                })
            }
            other => {
                return Err(Error::Internal(format!(
                    "op {} of node '{}' has no lowering",
                    other.name(),
                    node.name
                )))
            }
        };
        let id = l.value(value);
        let inputs = step_inputs.unwrap_or(inputs);
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
        placement,
        memory: BTreeMap::new(),
    })
}

/// Empty tensors never reach a kernel (wgpu cannot bind an empty buffer, and no work is
/// needed): an empty result is an empty constant, and a result computed from an empty input
/// depends on shapes only: a sum over nothing is 0 (a mean NaN), `[m, 0] @ [0, n]` is zeros,
/// padding nothing gives the pad value. `None` when the node runs as usual.
fn empty_result(node: &Node, inputs: &[(Shape, DType)]) -> Result<Option<HostTensor>> {
    let numel = node.shape.numel();
    let leaf = matches!(node.op, Op::Placeholder | Op::Constant(_) | Op::Reshape);
    if leaf {
        return Ok(None);
    }
    let filled = |word: u32| {
        HostTensor::from_words(node.shape.clone(), node.dtype, vec![word; numel]).map(Some)
    };
    if numel == 0 {
        return filled(0);
    }
    if inputs.iter().all(|(s, _)| s.numel() > 0) {
        return Ok(None);
    }
    let d = node.dtype;
    let one = match d {
        DType::F32 => 1.0f32.to_bits(),
        DType::F16 => 0x3c00,
        _ => 1,
    };
    match &node.op {
        Op::Reduce { op, .. } => match op {
            ReduceOp::Sum | ReduceOp::Any => filled(0),
            ReduceOp::Prod | ReduceOp::All => filled(one),
            // NumPy: the mean of nothing is NaN (with a warning); integer means give 0.
            ReduceOp::Mean => filled(match d {
                DType::F32 => f32::NAN.to_bits(),
                DType::F16 => 0x7e00,
                _ => 0,
            }),
            other => Err(Error::Internal(format!(
                "{} of '{}' reduces an empty axis (rejected when built)",
                other.name(),
                node.name
            ))),
        },
        Op::MatMul | Op::Conv2d { .. } => filled(0),
        Op::Pad { value, .. } => filled(*value),
        Op::Concat(_) => Ok(None),
        _ => Err(Error::Build {
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
        }),
    }
}
