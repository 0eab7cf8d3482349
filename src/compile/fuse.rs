//! Fusion: elementwise producers with a single consumer are inlined into that consumer's
//! expression (a DAG: a value used twice is computed once), and one-element constants become
//! literals, so a chain or tree of elementwise ops runs as one kernel with no intermediate
//! buffers.
//!
//! Rule: a producer is inlined when its value is not fetched, is not read through a view, sits
//! on the same device as its consumer, and either has exactly one consumer step (no work is
//! duplicated) or is cheap to recompute: every consumer is an elementwise kernel or a
//! reduction, it reads at most one tensor of its own size (the rest are broadcast rows,
//! columns or scalars, so each consumer reads no more bytes than it would reading the
//! result), and it has at most [`RECOMPUTE_MAX_OPS`] ops. Then every consumer recomputes it
//! and its output buffer disappears: softmax's `exp(x - max)` feeds both the sum and the
//! division without ever being stored. A merge that would need more storage bindings than the
//! device allows (`max_storage_buffers_per_shader_stage`) is skipped.
//!
//! Then elementwise work that feeds a reduction becomes its prologue (`sum(x * x)`,
//! `sum(exp(x - max))` with `max` broadcast; on cpu:0 not where the work could be the
//! epilogue of the convolution or matmul that produces its input: a global average pool of
//! `relu(conv + bias)` took 0.11 ms recomputing the bias and ReLU in SqueezeNet's mean,
//! 0.035 ms folding plain values after the convolution applied them in cache), and elementwise work after a matmul or a
//! reduction becomes its epilogue (bias, activation, scaling, residual; `sqrt(mean(..) + eps)`,
//! `log(sum(..)) + max`), under the same single-consumer rule: the intermediate result never
//! reaches memory.
//!
//! Last, on cpu:0, a kernel may take the single reader of its output as a final stage
//! ([`crate::ops::family::KernelDef::absorb`]): a convolution (with its epilogue) computes
//! its rows band by band and max-pools each band while it is in cache.
//!
//! First of all, a transpose of the last two axes that feeds a matmul is read in place by the
//! matmul (see `fuse/transpose.rs`).

use super::{Plan, Source, StepId, StepKind, Target, ValueId};
use crate::id::IdVec;
use crate::ops::elementwise::InputView;
use crate::ops::family::CpuIn;
use crate::ops::{ElementwiseKernel, Epilogue, Expr, Kernel, Node, Prologue};
use crate::HostTensor;
use crate::Shape;
use std::collections::{BTreeMap, HashMap, HashSet};

mod transpose;
mod work;

use work::Work;

/// The most ops an elementwise kernel with several consumers may have and still be
/// recomputed in each of them.
pub const RECOMPUTE_MAX_OPS: usize = 8;

pub fn fuse(plan: Plan, target: &Target) -> Plan {
    let plan = transpose::fuse_matmul_transposes(plan);
    let plan = fuse_elementwise(plan, target);
    let plan = fuse_prologues(plan, target);
    let plan = drop_unused(plan);
    let plan = fuse_epilogues(plan, target);
    fuse_consumers(plan)
}

/// An elementwise kernel cheap enough to recompute in each consumer (see the module docs).
/// Checked when inlining, on the producer as fused so far.
fn cheap(k: &ElementwiseKernel) -> bool {
    let full = k.inputs.iter().filter(|(s, _)| s == &k.out_shape).count();
    full <= 1 && k.expr.op_count() <= RECOMPUTE_MAX_OPS
}

/// Values every consumer of which may recompute them: produced by an elementwise kernel, not
/// fetched or viewed, and consumed only by elementwise kernels and reductions on the
/// producer's device. (Whether the producer is [`cheap`] is checked when inlining.)
fn recomputable(plan: &Plan) -> HashSet<ValueId> {
    let pinned = pinned(plan);
    let mut ok = HashSet::new();
    for s in &plan.steps {
        let elementwise = matches!(
            &s.kind,
            StepKind::Dispatch {
                kernel: Kernel::Elementwise(_),
                ..
            }
        );
        if elementwise && !pinned.contains(&s.output) {
            ok.insert(s.output);
        }
    }
    for s in &plan.steps {
        let absorbs = matches!(
            &s.kind,
            StepKind::Dispatch {
                kernel: Kernel::Elementwise(_) | Kernel::Reduce(_),
                ..
            }
        );
        for v in s.inputs() {
            let same_device = plan.values[v].device == s.device;
            if !absorbs || !same_device {
                ok.remove(&v);
            }
        }
    }
    ok
}

/// The largest output constant folding computes on the host (TensorFlow's Grappler uses the
/// same 10 MiB): a broadcast of a small constant to a huge shape would otherwise be
/// materialised, infallibly, while planning.
pub const FOLD_MAX_BYTES: u64 = 10 << 20;

/// Elementwise and transpose steps whose inputs are all constants run once, on the host,
/// when the plan is compiled (TensorFlow's constant folding), with the CPU kernels'
/// semantics; their outputs become constants. Casting stored f32 weights to f16, scaling a
/// constant or laying weights out for a product (which cpu:0 then packs once) costs nothing
/// per run. Outputs over [`FOLD_MAX_BYTES`] are left to run as kernels.
pub fn fold_constants(mut plan: Plan) -> Plan {
    let steps = std::mem::take(&mut plan.steps);
    for step in steps {
        let folded = match &step.kind {
            StepKind::Dispatch {
                kernel: kernel @ (Kernel::Elementwise(_) | Kernel::Permute(_)),
                inputs,
            } => {
                let words: Option<Vec<&[u32]>> = inputs
                    .iter()
                    .map(|&v| match &plan.values[plan.root(v)].source {
                        Source::Constant(t) => Some(t.words()),
                        _ => None,
                    })
                    .collect();
                let v = &plan.values[step.output];
                let run = |w: &[&[u32]]| match kernel {
                    Kernel::Elementwise(k) => Some(k.run_fast(w)),
                    _ => {
                        let n = v.shape.numel();
                        let mut out = crate::host::fresh_vec(n)?;
                        out.resize(n, 0);
                        let ins: Vec<CpuIn<'_>> = w.iter().map(|&x| CpuIn::Words(x)).collect();
                        kernel.run_cpu_into(&ins, &mut out).ok().map(|_| out)
                    }
                };
                words
                    .filter(|_| v.bytes() <= FOLD_MAX_BYTES)
                    .and_then(|w| run(&w))
                    .and_then(|out| HostTensor::from_words(v.shape.clone(), v.dtype, out).ok())
            }
            _ => None,
        };
        match folded {
            Some(t) => plan.values[step.output].source = Source::Constant(t),
            None => {
                plan.steps.push(step);
            }
        }
    }
    plan
}

/// Values that must stay in memory: fetched, or read through a view.
fn pinned(plan: &Plan) -> HashSet<ValueId> {
    let mut pinned: HashSet<ValueId> = plan.outputs().iter().copied().collect();
    for v in &plan.values {
        if let Source::View(of) = v.source {
            pinned.insert(of);
        }
    }
    pinned
}

/// Drop steps whose output nothing reads any more (producers every consumer recomputed).
fn drop_unused(mut plan: Plan) -> Plan {
    // A worklist, not repeated sweeps: dropping a step can orphan its producers in turn, and
    // a sweep per level would be quadratic in a long chain of them.
    let (producer, mut consumers) = usage(&plan);
    let mut dead = IdVec::filled(false, plan.steps.len());
    let mut work: Vec<StepId> = plan
        .steps
        .iter_enumerated()
        .filter(|(_, s)| consumers.get(&s.output).copied().unwrap_or(0) == 0)
        .map(|(i, _)| i)
        .collect();
    while let Some(i) = work.pop() {
        if std::mem::replace(&mut dead[i], true) {
            continue;
        }
        let mut ins = plan.steps[i].inputs();
        ins.sort_unstable();
        ins.dedup();
        for v in ins {
            let Some(c) = consumers.get_mut(&v) else {
                continue;
            };
            *c = c.saturating_sub(1);
            if *c == 0 {
                if let Some(&p) = producer.get(&v) {
                    work.push(p);
                }
            }
        }
    }
    drop_dead(&mut plan, &dead);
    plan
}

/// Which step produces each value, and how many consumers each value has (a fetch or a view
/// counts as two, so such values are never fused away).
fn usage(plan: &Plan) -> (HashMap<ValueId, StepId>, HashMap<ValueId, usize>) {
    let producer = plan
        .steps
        .iter_enumerated()
        .map(|(i, s)| (s.output, i))
        .collect();
    let mut consumers: HashMap<ValueId, usize> = HashMap::new();
    for s in &plan.steps {
        let mut ins = s.inputs();
        ins.sort_unstable();
        ins.dedup();
        for v in ins {
            *consumers.entry(v).or_default() += 1;
        }
    }
    for v in &plan.values {
        if let Source::View(of) = v.source {
            *consumers.entry(of).or_default() += 2;
        }
    }
    for &f in &plan.outputs() {
        *consumers.entry(f).or_default() += 2;
    }
    (producer, consumers)
}

/// The state of elementwise fusion over a plan's steps.
struct Fuser<'p> {
    plan: &'p Plan,
    producer: HashMap<ValueId, StepId>,
    consumers: HashMap<ValueId, usize>,
    shared: HashSet<ValueId>,
    pinned: HashSet<ValueId>,
    /// Steps inlined into all their consumers.
    dead: IdVec<StepId, bool>,
    /// Each elementwise step's kernel as fused so far.
    work: IdVec<StepId, Option<Work>>,
}

fn fuse_elementwise(mut plan: Plan, target: &Target) -> Plan {
    let (producer, consumers) = usage(&plan);
    let mut f = Fuser {
        plan: &plan,
        producer,
        consumers,
        shared: recomputable(&plan),
        pinned: pinned(&plan),
        dead: IdVec::filled(false, plan.steps.len()),
        work: IdVec::filled(None, plan.steps.len()),
    };
    for (c, step) in plan.steps.iter_enumerated() {
        let StepKind::Dispatch {
            kernel: Kernel::Elementwise(k),
            inputs,
        } = &step.kind
        else {
            continue;
        };
        let mut w = Work::new(k, inputs, (c, step.output), step.nodes.clone());
        let max_bindings = max_bindings(target, step.device);
        // Inline producers until nothing changes; each pass looks at the current inputs.
        while f.inline_one(&mut w, step.device, max_bindings) {}
        f.work[c] = Some(w);
    }
    let (work, dead) = (f.work, f.dead);
    write_back(&mut plan, work, &dead);
    drop_dead(&mut plan, &dead);
    plan
}

/// A slice, flip, broadcast or transpose step read as a view of its input: `(input, view)`.
fn as_view(kind: &StepKind) -> Option<(ValueId, InputView)> {
    match kind {
        StepKind::Dispatch {
            kernel: Kernel::Strided(sk),
            inputs,
        } => Some((
            inputs[0],
            InputView {
                offset: sk.offset,
                strides: sk.strides.clone(),
            },
        )),
        StepKind::Dispatch {
            kernel: Kernel::Permute(pk),
            inputs,
        } => Some((
            inputs[0],
            InputView {
                offset: 0,
                strides: pk.src_strides().iter().map(|&s| s as i64).collect(),
            },
        )),
        _ => None,
    }
}

impl Fuser<'_> {
    /// Absorb one input of `w` (a scalar constant, a view, or a producer's expression);
    /// whether anything changed.
    fn inline_one(&mut self, w: &mut Work, device: crate::device::Device, max: usize) -> bool {
        let plan = self.plan;
        let ids: Vec<usize> = w.ins.keys().copied().collect();
        for j in ids {
            let Some((src, _)) = w.ins.get(&j).cloned() else {
                continue;
            };
            let v = src.0;
            if let Source::Constant(t) = &plan.values[v].source {
                if t.len() == 1 {
                    w.replace_input(j, Node::Lit(t.dtype(), t.words()[0]));
                    return true;
                }
            }
            let Some(&p) = self.producer.get(&v) else {
                continue;
            };
            let single = self.consumers.get(&v).copied().unwrap_or(0) == 1;
            // A slice, flip, broadcast or transpose feeding elementwise work is read through
            // a view of its input instead of being copied (one level: a view of a view's
            // output is not affine in general).
            if let Some((from, view)) = as_view(&plan.steps[p].kind) {
                let has_view = src.1.is_some();
                if has_view
                    || self.dead[p]
                    || plan.steps[p].device != device
                    || self.pinned.contains(&v)
                {
                    continue;
                }
                w.rebind(j, (from, Some((view, plan.values[v].shape.clone()))));
                if single {
                    self.dead[p] = true;
                } else {
                    *self.consumers.entry(from).or_default() += 1;
                }
                w.names
                    .extend(plan.steps[p].nodes.iter().map(|n| (p, n.clone())));
                return true;
            }
            // A value read through a view (a transpose of a cast) keeps its buffer: its
            // producer's expression would be evaluated at the view's output indices.
            if self.dead[p]
                || src.1.is_some()
                || (!single && !self.shared.contains(&v))
                || plan.steps[p].device != device
            {
                continue;
            }
            let Some(pw) = self.work[p].as_ref() else {
                continue;
            };
            if (!single && !pw.cheap(plan)) || w.bindings_after(j, pw) + 1 > max {
                continue;
            }
            let pw = if single {
                self.dead[p] = true;
                self.work[p].take()
            } else {
                // The consumer now reads the producer's inputs too.
                for (src, _) in pw.ins.values() {
                    *self.consumers.entry(src.0).or_default() += 1;
                }
                self.work[p].clone()
            };
            if let Some(pw) = pw {
                *w = std::mem::take(w).inline(j, pw);
            }
            return true;
        }
        false
    }
}

/// Replace each surviving elementwise step's kernel by its fused one.
fn write_back(plan: &mut Plan, work: IdVec<StepId, Option<Work>>, dead: &IdVec<StepId, bool>) {
    for (c, w) in work.into_iter_enumerated() {
        let Some(w) = w else { continue };
        if dead[c] {
            continue;
        }
        let StepKind::Dispatch {
            kernel: Kernel::Elementwise(k),
            ..
        } = &plan.steps[c].kind
        else {
            continue;
        };
        let (out_shape, out_dtype) = (k.out_shape.clone(), k.out_dtype);
        let (expr, srcs, mut names) = w.finish();
        let ins: Vec<ValueId> = srcs.iter().map(|s| s.0).collect();
        let kernel = ElementwiseKernel {
            expr,
            inputs: srcs
                .iter()
                .map(|(v, view)| {
                    let shape = match view {
                        Some((_, apparent)) => apparent.clone(),
                        None => plan.values[*v].shape.clone(),
                    };
                    (shape, plan.values[*v].dtype)
                })
                .collect(),
            out_shape,
            out_dtype,
            views: srcs
                .iter()
                .map(|s| s.1.as_ref().map(|(w, _)| w.clone()))
                .collect(),
        };
        // Producers before consumers, as the graph computes them.
        names.sort_by_key(|(step, _)| *step);
        let step = &mut plan.steps[c];
        step.nodes = names.into_iter().map(|(_, n)| n).collect();
        step.kind = StepKind::Dispatch {
            kernel: Kernel::Elementwise(kernel),
            inputs: ins,
        };
    }
}

fn drop_dead(plan: &mut Plan, dead: &IdVec<StepId, bool>) {
    plan.steps.retain(|i, _| !dead[i]);
}

fn max_bindings(target: &Target, device: crate::device::Device) -> usize {
    target
        .limits(device)
        .map(|l| l.max_storage_buffers_per_shader_stage as usize)
        .unwrap_or(8)
}

/// A reduction whose input is the single-use output of an elementwise kernel computes that
/// kernel's expression as it loads (its inputs broadcast to the reduced shape); the
/// elementwise kernel and its output buffer disappear.
fn fuse_prologues(mut plan: Plan, target: &Target) -> Plan {
    let (producer, consumers) = usage(&plan);
    let shared = recomputable(&plan);
    let mut dead = IdVec::filled(false, plan.steps.len());
    for r in plan.steps.ids() {
        let device = plan.steps[r].device;
        let StepKind::Dispatch {
            kernel: Kernel::Reduce(rk),
            inputs,
        } = &plan.steps[r].kind
        else {
            continue;
        };
        let v = inputs[0];
        let Some(&p) = producer.get(&v) else { continue };
        let single = consumers.get(&v).copied().unwrap_or(0) == 1;
        if rk.prologue.is_some()
            || dead[p]
            || (!single && !shared.contains(&v))
            || plan.steps[p].device != device
        {
            continue;
        }
        let StepKind::Dispatch {
            kernel: Kernel::Elementwise(ek),
            inputs: pins,
        } = &plan.steps[p].kind
        else {
            continue;
        };
        // Prologue inputs are read at broadcast indices only (no views).
        if (!single && !cheap(ek)) || ek.has_views() {
            continue;
        }
        if ek.out_shape != rk.in_shape || pins.len() + inputs.len() > max_bindings(target, device) {
            continue;
        }
        // On cpu:0 an epilogue runs over each piece of output while the producer has it in
        // cache, and the reduction then folds plain values.
        if single
            && device == crate::device::Device::Cpu
            && (0..pins.len()).any(|j| {
                epilogue_of(&plan, target, (ek, pins, device), j, &producer, &consumers).is_some()
            })
        {
            continue;
        }
        let mut fused = rk.clone();
        fused.prologue = Some(Box::new(Prologue {
            expr: ek.expr.clone(),
            inputs: ek.inputs.clone(),
        }));
        let mut new_inputs = pins.clone();
        new_inputs.extend(inputs[1..].iter().copied());
        let mut nodes = plan.steps[p].nodes.clone();
        let step = &mut plan.steps[r];
        nodes.append(&mut step.nodes);
        step.nodes = nodes;
        step.kind = StepKind::Dispatch {
            kernel: Kernel::Reduce(fused),
            inputs: new_inputs,
        };
        // A recomputed producer stays until `drop_unused` sees it has no readers left.
        dead[p] = single;
    }
    drop_dead(&mut plan, &dead);
    plan
}

/// An elementwise kernel that reads the single-use output of a matmul, a reduction or a
/// convolution becomes that kernel's epilogue when its other inputs fit (a matmul takes
/// full-size inputs, a bias row or scalars, see [`EpilogueInput`]; a reduction full-size
/// inputs or scalars; a convolution anything that broadcasts to its output) and the dtype is
/// unchanged: the result is never written to memory before it.
fn fuse_epilogues(mut plan: Plan, target: &Target) -> Plan {
    let (mut producer, consumers) = usage(&plan);
    let mut dead = IdVec::filled(false, plan.steps.len());
    for c in plan.steps.ids() {
        let device = plan.steps[c].device;
        let StepKind::Dispatch {
            kernel: Kernel::Elementwise(k),
            inputs,
        } = &plan.steps[c].kind
        else {
            continue;
        };
        let (k, inputs) = (k.clone(), inputs.clone());
        for j in 0..inputs.len() {
            let Some((p, others)) = epilogue_of(
                &plan,
                target,
                (&k, &inputs, device),
                j,
                &producer,
                &consumers,
            ) else {
                continue;
            };
            if dead[p] {
                continue;
            }
            let StepKind::Dispatch {
                kernel: producer_kernel,
                inputs: pins,
            } = &plan.steps[p].kind
            else {
                continue;
            };
            let expr = k.expr.substitute(&mut |i| match i.cmp(&j) {
                std::cmp::Ordering::Equal => Expr::input(0),
                std::cmp::Ordering::Less => Expr::input(i + 1),
                std::cmp::Ordering::Greater => Expr::input(i),
            });
            let rest = (0..inputs.len()).filter(|&i| i != j);
            let epilogue = Some(Epilogue {
                expr,
                extra: rest.clone().map(|i| k.inputs[i].clone()).collect(),
                views: if k.has_views() {
                    rest.map(|i| k.view(i).cloned()).collect()
                } else {
                    Vec::new()
                },
            });
            let fused = with_epilogue(producer_kernel.clone(), epilogue);
            let mut new_inputs = pins.clone();
            new_inputs.extend(others);
            merge_into(&mut plan, p, c, fused, new_inputs);
            producer.insert(plan.steps[c].output, p);
            dead[c] = true;
            break;
        }
    }
    drop_dead(&mut plan, &dead);
    plan
}

/// A cpu:0 kernel whose input is the single-use output of another cpu:0 kernel that takes it
/// as a final stage ([`crate::ops::family::KernelDef::absorb`]) disappears into that kernel,
/// and so does the output between them.
fn fuse_consumers(mut plan: Plan) -> Plan {
    let (mut producer, consumers) = usage(&plan);
    let mut dead = IdVec::filled(false, plan.steps.len());
    for c in plan.steps.ids() {
        let StepKind::Dispatch {
            kernel: consumer,
            inputs,
        } = &plan.steps[c].kind
        else {
            continue;
        };
        let (&[v], crate::device::Device::Cpu) = (inputs.as_slice(), plan.steps[c].device) else {
            continue;
        };
        let Some(&p) = producer.get(&v) else { continue };
        if dead[p]
            || consumers.get(&v).copied().unwrap_or(0) != 1
            || plan.steps[p].device != plan.steps[c].device
        {
            continue;
        }
        let StepKind::Dispatch { kernel, inputs } = &plan.steps[p].kind else {
            continue;
        };
        let mut fused = kernel.clone();
        if !fused.as_dyn_mut().absorb(consumer) {
            continue;
        }
        let inputs = inputs.clone();
        merge_into(&mut plan, p, c, fused, inputs);
        producer.insert(plan.steps[c].output, p);
        dead[c] = true;
    }
    drop_dead(&mut plan, &dead);
    plan
}

/// The step producing `inputs[j]` of the elementwise kernel `k` (on `device`) when `k` can
/// be that step's epilogue, with `k`'s other inputs: `k` reads `inputs[j]` without a view
/// (epilogue inputs are read at the output's indices), `inputs[j]` has no other reader and
/// sits on `device`, and the producer takes an epilogue of this shape, dtype and bindings.
/// Other inputs read through views (a time step's rows of a projection) are taken by cpu:0's
/// matmuls only, which apply the epilogue as an elementwise kernel.
fn epilogue_of(
    plan: &Plan,
    target: &Target,
    (k, inputs, device): (&ElementwiseKernel, &[ValueId], crate::device::Device),
    j: usize,
    producer: &HashMap<ValueId, StepId>,
    consumers: &HashMap<ValueId, usize>,
) -> Option<(StepId, Vec<ValueId>)> {
    let v = inputs[j];
    let &p = producer.get(&v)?;
    if k.view(j).is_some()
        || consumers.get(&v).copied().unwrap_or(0) != 1
        || plan.steps[p].device != device
    {
        return None;
    }
    let StepKind::Dispatch {
        kernel,
        inputs: pins,
    } = &plan.steps[p].kind
    else {
        return None;
    };
    if k.has_views()
        && (device != crate::device::Device::Cpu || !kernel.as_dyn().epilogue_views_on_cpu())
    {
        return None;
    }
    let others: Vec<ValueId> = inputs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != j)
        .map(|(_, &x)| x)
        .collect();
    // The shapes the kernel reads them as (a view's, not its buffer's).
    let extra: Vec<&Shape> = (0..inputs.len())
        .filter(|&i| i != j)
        .map(|i| &k.inputs[i].0)
        .collect();
    let (out, dtype, fits) = kernel.as_dyn().epilogue_host(&extra)?;
    (fits
        && out == &k.out_shape
        && dtype == k.out_dtype
        && pins.len() + others.len() < max_bindings(target, device))
    .then_some((p, others))
}

/// Step `p` becomes `kernel` over `inputs`, writing step `c`'s output and naming both
/// steps' nodes (`c` is then dropped by the caller).
fn merge_into(plan: &mut Plan, p: StepId, c: StepId, kernel: Kernel, inputs: Vec<ValueId>) {
    let output = plan.steps[c].output;
    let mut nodes = plan.steps[c].nodes.clone();
    let step = &mut plan.steps[p];
    step.nodes.append(&mut nodes);
    step.kind = StepKind::Dispatch { kernel, inputs };
    step.output = output;
}

/// `kernel` with `epilogue` applied to its output (kernels [`epilogue_host`] accepts).
fn with_epilogue(mut kernel: Kernel, epilogue: Option<Epilogue>) -> Kernel {
    kernel.as_dyn_mut().set_epilogue(epilogue);
    kernel
}

/// An elementwise kernel's input as fusion tracks it: the bound value, and the view (with the
/// shape it presents) when the value is read through one.
type Src = (ValueId, Option<(InputView, Shape)>);

fn viewed(k: &ElementwiseKernel, i: usize) -> Option<(InputView, Shape)> {
    k.view(i).map(|w| (w.clone(), k.inputs[i].0.clone()))
}
