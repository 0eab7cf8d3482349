//! Fusion: elementwise producers with a single consumer are inlined into that consumer's
//! expression tree, and one-element constants become literals, so a chain or tree of
//! elementwise ops runs as one kernel with no intermediate buffers.
//!
//! Rule: a producer is inlined only when its value has exactly one consumer step, is not
//! fetched, is not read through a view, and sits on the same device as its consumer; so no
//! work is ever duplicated. A merge that would need more storage bindings than the device
//! allows (`max_storage_buffers_per_shader_stage`) is skipped.
//!
//! Then elementwise work after a matmul or a reduction becomes its epilogue (bias, activation,
//! scaling, residual; `sqrt(mean(..) + eps)`, `log(sum(..)) + max`) under the same
//! single-consumer rule: the intermediate result never reaches memory.

use super::{Plan, Source, StepKind, Target, ValueId};
use crate::ops::{ElementwiseKernel, Epilogue, EpilogueInput, Expr, Kernel};
use std::collections::HashMap;

pub fn fuse(plan: Plan, target: &Target) -> Plan {
    let plan = fuse_elementwise(plan, target);
    fuse_epilogues(plan, target)
}

/// Which step produces each value, and how many consumers each value has (a fetch or a view
/// counts as two, so such values are never fused away).
fn usage(plan: &Plan) -> (HashMap<ValueId, usize>, HashMap<ValueId, usize>) {
    let producer = plan
        .steps
        .iter()
        .enumerate()
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
    for &f in &plan.fetches {
        *consumers.entry(f).or_default() += 2;
    }
    (producer, consumers)
}

fn fuse_elementwise(mut plan: Plan, target: &Target) -> Plan {
    let (producer, consumers) = usage(&plan);

    let mut dead = vec![false; plan.steps.len()];
    for c in 0..plan.steps.len() {
        let device = plan.steps[c].device;
        let max_bindings = max_bindings(target, device);
        let StepKind::Dispatch {
            kernel: Kernel::Elementwise(k),
            inputs,
        } = &plan.steps[c].kind
        else {
            continue;
        };
        // Compacted first, so each value is one input and inlining replaces every use of it.
        let (mut expr, mut ins) = compact(&k.expr, inputs);
        let mut nodes = Vec::new();
        // Inline producers until nothing changes; each pass looks at the current inputs.
        loop {
            let mut changed = false;
            for j in 0..ins.len() {
                let v = ins[j];
                if let Source::Constant(t) = &plan.values[v].source {
                    if t.len() == 1 {
                        let lit = Expr::Lit(t.dtype(), t.words()[0]);
                        expr = expr.substitute(&mut |i| {
                            if i == j {
                                lit.clone()
                            } else {
                                Expr::Input(i)
                            }
                        });
                        changed = true;
                        break;
                    }
                }
                let Some(&p) = producer.get(&v) else { continue };
                if dead[p]
                    || consumers.get(&v).copied().unwrap_or(0) != 1
                    || plan.steps[p].device != device
                {
                    continue;
                }
                let StepKind::Dispatch {
                    kernel: Kernel::Elementwise(pk),
                    inputs: pins,
                } = &plan.steps[p].kind
                else {
                    continue;
                };
                let base = ins.len();
                let inner = pk.expr.substitute(&mut |i| Expr::Input(base + i));
                let candidate = expr.substitute(&mut |i| {
                    if i == j {
                        inner.clone()
                    } else {
                        Expr::Input(i)
                    }
                });
                let mut cand_ins = ins.clone();
                cand_ins.extend(pins.iter().copied());
                let (candidate, cand_ins) = compact(&candidate, &cand_ins);
                if cand_ins.len() + 1 > max_bindings {
                    continue;
                }
                expr = candidate;
                ins = cand_ins;
                dead[p] = true;
                nodes.extend(plan.steps[p].nodes.iter().cloned());
                changed = true;
                break;
            }
            if !changed {
                break;
            }
            let (e, i) = compact(&expr, &ins);
            expr = e;
            ins = i;
        }
        let (expr, ins) = compact(&expr, &ins);
        let kernel = ElementwiseKernel {
            expr,
            inputs: ins
                .iter()
                .map(|&v| (plan.values[v].shape.clone(), plan.values[v].dtype))
                .collect(),
            out_shape: k.out_shape.clone(),
            out_dtype: k.out_dtype,
        };
        let step = &mut plan.steps[c];
        nodes.append(&mut step.nodes);
        step.nodes = nodes;
        step.kind = StepKind::Dispatch {
            kernel: Kernel::Elementwise(kernel),
            inputs: ins,
        };
    }
    drop_dead(&mut plan, &dead);
    plan
}

fn drop_dead(plan: &mut Plan, dead: &[bool]) {
    let mut i = 0;
    plan.steps.retain(|_| {
        i += 1;
        !dead[i - 1]
    });
}

fn max_bindings(target: &Target, device: crate::device::Device) -> usize {
    target
        .limits(device)
        .map(|l| l.max_storage_buffers_per_shader_stage as usize)
        .unwrap_or(8)
}

/// An elementwise kernel that reads a matmul's single-use output becomes that matmul's
/// epilogue, when its other inputs are full-size, a bias row or scalars (see
/// [`EpilogueInput`]) and the dtype is unchanged: the product is never written to memory.
fn fuse_epilogues(mut plan: Plan, target: &Target) -> Plan {
    let (mut producer, consumers) = usage(&plan);
    let mut dead = vec![false; plan.steps.len()];
    for c in 0..plan.steps.len() {
        let device = plan.steps[c].device;
        let StepKind::Dispatch {
            kernel: Kernel::Elementwise(k),
            inputs,
        } = &plan.steps[c].kind
        else {
            continue;
        };
        let (k, inputs) = (k.clone(), inputs.clone());
        for (j, &v) in inputs.iter().enumerate() {
            let Some(&p) = producer.get(&v) else { continue };
            if dead[p]
                || consumers.get(&v).copied().unwrap_or(0) != 1
                || plan.steps[p].device != device
            {
                continue;
            }
            let StepKind::Dispatch {
                kernel: producer_kernel,
                inputs: pins,
            } = &plan.steps[p].kind
            else {
                continue;
            };
            let others: Vec<ValueId> = inputs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != j)
                .map(|(_, &x)| x)
                .collect();
            // Matmuls take full, bias-row and scalar extras; reductions full and scalar ones.
            let (out, dtype, fits_kind) = match producer_kernel {
                Kernel::MatMul(mk) => (
                    &mk.out,
                    mk.dtype,
                    mk.epilogue.is_none()
                        && others
                            .iter()
                            .all(|&x| EpilogueInput::of(&plan.values[x].shape, &mk.out).is_some()),
                ),
                Kernel::Reduce(rk) => (
                    &rk.out_shape,
                    rk.dtype,
                    rk.takes_epilogue()
                        && others.iter().all(|&x| {
                            let s = &plan.values[x].shape;
                            s == &rk.out_shape || s.numel() == 1
                        }),
                ),
                _ => continue,
            };
            let fits = fits_kind
                && out == &k.out_shape
                && dtype == k.out_dtype
                && pins.len() + others.len() < max_bindings(target, device);
            if !fits {
                continue;
            }
            let expr = k.expr.substitute(&mut |i| match i.cmp(&j) {
                std::cmp::Ordering::Equal => Expr::Input(0),
                std::cmp::Ordering::Less => Expr::Input(i + 1),
                std::cmp::Ordering::Greater => Expr::Input(i),
            });
            let epilogue = Some(Epilogue {
                expr,
                extra: others
                    .iter()
                    .map(|&x| (plan.values[x].shape.clone(), plan.values[x].dtype))
                    .collect(),
            });
            let fused = match producer_kernel.clone() {
                Kernel::MatMul(mut mk) => {
                    mk.epilogue = epilogue;
                    Kernel::MatMul(mk)
                }
                Kernel::Reduce(mut rk) => {
                    rk.epilogue = epilogue;
                    Kernel::Reduce(rk)
                }
                other => other,
            };
            let mut new_inputs = pins.clone();
            new_inputs.extend(others);
            let output = plan.steps[c].output;
            let mut nodes = plan.steps[c].nodes.clone();
            let step = &mut plan.steps[p];
            step.nodes.append(&mut nodes);
            step.kind = StepKind::Dispatch {
                kernel: fused,
                inputs: new_inputs,
            };
            step.output = output;
            producer.insert(output, p);
            dead[c] = true;
            break;
        }
    }
    drop_dead(&mut plan, &dead);
    plan
}

/// Drop unused inputs and merge repeated ones, renumbering `Input`s by first use.
fn compact(expr: &Expr, inputs: &[ValueId]) -> (Expr, Vec<ValueId>) {
    let mut out: Vec<ValueId> = Vec::new();
    let e = expr.substitute(&mut |i| {
        let v = inputs[i];
        let pos = out.iter().position(|&x| x == v).unwrap_or_else(|| {
            out.push(v);
            out.len() - 1
        });
        Expr::Input(pos)
    });
    (e, out)
}
