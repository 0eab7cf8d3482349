//! A transpose of the last two axes feeding a matmul is read in place: the matmul binds the
//! transpose's input with that operand's [`MatMulKernel::transposed`] flag set, and the
//! transpose kernel disappears once nothing else reads its output. This is how the matmul
//! gradient's `xᵀ · dy` and `dy · Wᵀ` run without materialising `xᵀ` or `Wᵀ`.
//!
//! [`MatMulKernel::transposed`]: crate::ops::MatMulKernel::transposed

use super::{drop_dead, usage};
use crate::compile::{Plan, StepKind, ValueId};
use crate::id::IdVec;
use crate::ops::{Kernel, PermuteKernel};

/// Whether `pk` swaps the last two axes and keeps the others in place.
fn swaps_last_two(pk: &PermuteKernel) -> bool {
    let r = pk.perm.len();
    r >= 2
        && pk.perm[..r - 2].iter().enumerate().all(|(i, &p)| p == i)
        && pk.perm[r - 2] == r - 1
        && pk.perm[r - 1] == r - 2
}

pub(super) fn fuse_matmul_transposes(mut plan: Plan) -> Plan {
    let (producer, mut consumers) = usage(&plan);
    let mut dead = IdVec::filled(false, plan.steps.len());
    for c in plan.steps.ids() {
        let device = plan.steps[c].device;
        let StepKind::Dispatch {
            kernel: Kernel::MatMul(mk),
            inputs,
        } = &plan.steps[c].kind
        else {
            continue;
        };
        let (mut mk, mut new_inputs) = (mk.clone(), inputs.clone());
        for (i, input) in new_inputs.iter_mut().enumerate().take(2) {
            let Some(&p) = producer.get(input) else {
                continue;
            };
            if mk.transposed[i] || dead[p] || plan.steps[p].device != device {
                continue;
            }
            let StepKind::Dispatch {
                kernel: Kernel::Permute(pk),
                inputs: pins,
            } = &plan.steps[p].kind
            else {
                continue;
            };
            if swaps_last_two(pk) {
                *input = pins[0];
                mk.transposed[i] = true;
            }
        }
        if !mk.transposed.contains(&true) {
            continue;
        }
        // The consumer counts `usage` made, per distinct value, follow the rewrite.
        let distinct = |v: &[ValueId]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (before, after) = (distinct(inputs), distinct(&new_inputs));
        for v in before.iter().filter(|v| !after.contains(v)) {
            let n = consumers.entry(*v).or_default();
            *n = n.saturating_sub(1);
            if *n == 0 {
                if let Some(&p) = producer.get(v) {
                    dead[p] = true;
                }
            }
        }
        for v in after.iter().filter(|v| !before.contains(v)) {
            *consumers.entry(*v).or_default() += 1;
        }
        plan.steps[c].kind = StepKind::Dispatch {
            kernel: Kernel::MatMul(mk),
            inputs: new_inputs,
        };
    }
    drop_dead(&mut plan, &dead);
    plan
}
