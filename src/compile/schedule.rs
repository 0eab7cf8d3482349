//! A deterministic topological order of steps (Kahn's algorithm, ties to the earliest step),
//! so that plans are reproducible and testable.

use super::{Plan, ValueId};
use crate::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

pub fn schedule(mut plan: Plan) -> Result<Plan> {
    let n = plan.steps.len();
    let producer: HashMap<ValueId, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.output, i))
        .collect();
    let mut indegree = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in plan.steps.iter().enumerate() {
        let mut deps: Vec<usize> = s
            .inputs()
            .into_iter()
            .filter_map(|v| producer.get(&plan.root(v)).copied())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        indegree[i] = deps.len();
        for d in deps {
            users[d].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() != n {
        return Err(Error::Internal("the step graph has a cycle".into()));
    }
    let mut old: Vec<Option<super::Step>> = plan.steps.drain(..).map(Some).collect();
    plan.steps = order.into_iter().filter_map(|i| old[i].take()).collect();
    Ok(plan)
}
