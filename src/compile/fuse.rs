//! Fusion: elementwise producers with a single consumer are inlined into that consumer's
//! expression tree, and one-element constants become literals, so a chain or tree of
//! elementwise ops runs as one kernel with no intermediate buffers.
//!
//! Rule: a producer is inlined only when its value has exactly one consumer step, is not
//! fetched, is not read through a view, and sits on the same device as its consumer; so no
//! work is ever duplicated. A merge that would need more storage bindings than the device
//! allows (`max_storage_buffers_per_shader_stage`) is skipped.

use super::{Plan, Source, StepKind, Target, ValueId};
use crate::ops::{ElementwiseKernel, Expr, Kernel};
use std::collections::HashMap;

pub fn fuse(mut plan: Plan, target: &Target) -> Plan {
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, s) in plan.steps.iter().enumerate() {
        producer.insert(s.output, i);
    }
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

    let mut dead = vec![false; plan.steps.len()];
    for c in 0..plan.steps.len() {
        let device = plan.steps[c].device;
        let max_bindings = target
            .limits(device)
            .map(|l| l.max_storage_buffers_per_shader_stage as usize)
            .unwrap_or(8);
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
    let mut i = 0;
    plan.steps.retain(|_| {
        i += 1;
        !dead[i - 1]
    });
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
