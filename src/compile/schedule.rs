//! Topological orders of the steps. Each order is deterministic (explicit tie-breaks, never
//! hash order), so plans are reproducible and testable. Several orders are offered because
//! the order decides which values are alive together, and so the memory peak; `compile`
//! plans memory for each and keeps the lowest peak.

use super::{Plan, Source, ValueId};
use crate::{Error, Result};
use std::collections::HashMap;

/// The dependency structure of a plan's steps.
struct Deps {
    /// Steps each step waits for.
    deps: Vec<Vec<usize>>,
    /// Steps waiting for each step.
    users: Vec<Vec<usize>>,
}

fn deps(plan: &Plan) -> Deps {
    let n = plan.steps.len();
    let producer: HashMap<ValueId, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.output, i))
        .collect();
    let mut deps = vec![Vec::new(); n];
    let mut users = vec![Vec::new(); n];
    for (i, s) in plan.steps.iter().enumerate() {
        let mut d: Vec<usize> = s
            .inputs()
            .into_iter()
            .filter_map(|v| producer.get(&plan.root(v)).copied())
            .collect();
        d.sort_unstable();
        d.dedup();
        for &x in &d {
            users[x].push(i);
        }
        deps[i] = d;
    }
    Deps { deps, users }
}

/// Kahn's algorithm; among ready steps the one `pick` ranks lowest goes first.
fn kahn(
    plan: &Plan,
    d: &Deps,
    mut pick: impl FnMut(&[usize], &[bool]) -> usize,
) -> Result<Vec<usize>> {
    let n = plan.steps.len();
    let mut indegree: Vec<usize> = d.deps.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let k = pick(&ready, &done);
        let i = ready.swap_remove(k);
        done[i] = true;
        order.push(i);
        for &u in &d.users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(u);
            }
        }
    }
    if order.len() != n {
        return Err(Error::Internal("the step graph has a cycle".into()));
    }
    Ok(order)
}

fn reorder(mut plan: Plan, order: &[usize]) -> Plan {
    let mut old: Vec<Option<super::Step>> = plan.steps.drain(..).map(Some).collect();
    plan.steps = order.iter().filter_map(|&i| old[i].take()).collect();
    plan
}

fn earliest_first(plan: &Plan, d: &Deps) -> Result<Vec<usize>> {
    kahn(plan, d, |ready, _| {
        ready
            .iter()
            .enumerate()
            .min_by_key(|(_, &r)| r)
            .map_or(0, |(k, _)| k)
    })
}

/// The default order: Kahn's algorithm with ties to the earliest step (graph order).
pub fn schedule(plan: Plan) -> Result<Plan> {
    let order = earliest_first(&plan, &deps(&plan))?;
    Ok(reorder(plan, &order))
}

/// Candidate orders for the memory planner: the default, depth-first from the fetches (one
/// branch finished before the next starts; inputs visited first-to-last and last-to-first),
/// and a memory-greedy list order (the ready step that frees the most bytes net goes first).
/// Duplicates are dropped.
pub fn candidates(plan: Plan) -> Result<Vec<Plan>> {
    let d = deps(&plan);
    let orders = [
        earliest_first(&plan, &d)?,
        depth_first(&plan, &d, false),
        depth_first(&plan, &d, true),
        memory_greedy(&plan, &d)?,
    ];
    let mut unique: Vec<Vec<usize>> = Vec::new();
    for o in orders {
        if o.len() == plan.steps.len() && !unique.contains(&o) {
            unique.push(o);
        }
    }
    Ok(unique.iter().map(|o| reorder(plan.clone(), o)).collect())
}

fn depth_first(plan: &Plan, d: &Deps, reversed: bool) -> Vec<usize> {
    let n = plan.steps.len();
    let producer: HashMap<ValueId, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.output, i))
        .collect();
    let mut state = vec![0u8; n]; // 0 new, 1 open, 2 done
    let mut order = Vec::with_capacity(n);
    let mut roots: Vec<usize> = plan
        .fetches
        .iter()
        .filter_map(|&f| producer.get(&plan.root(f)).copied())
        .collect();
    roots.extend(0..n); // anything not reached from a fetch (e.g. transfers) still runs
    for r in roots {
        let mut stack = vec![(r, 0usize)];
        while let Some((s, k)) = stack.pop() {
            if k == 0 && state[s] != 0 {
                continue;
            }
            state[s] = 1;
            let deps = &d.deps[s];
            let next = if reversed {
                deps.len().checked_sub(k + 1).map(|i| deps[i])
            } else {
                deps.get(k).copied()
            };
            if let Some(dep) = next {
                stack.push((s, k + 1));
                if state[dep] == 0 {
                    stack.push((dep, 0));
                }
            } else {
                state[s] = 2;
                order.push(s);
            }
        }
    }
    order
}

fn memory_greedy(plan: &Plan, d: &Deps) -> Result<Vec<usize>> {
    let bytes = |v: ValueId| plan.values[v].bytes() as i64;
    // Remaining reads of each storage root (fetched roots are never freed).
    let mut remaining: HashMap<ValueId, usize> = HashMap::new();
    for s in &plan.steps {
        for v in s.inputs() {
            *remaining.entry(plan.root(v)).or_default() += 1;
        }
    }
    let fetched: Vec<ValueId> = plan.fetches.iter().map(|&f| plan.root(f)).collect();
    let net = |i: usize, remaining: &HashMap<ValueId, usize>| -> i64 {
        let s = &plan.steps[i];
        let mut freed = 0;
        let mut seen = Vec::new();
        for v in s.inputs() {
            let r = plan.root(v);
            if seen.contains(&r) {
                continue;
            }
            seen.push(r);
            let uses = s.inputs().iter().filter(|&&x| plan.root(x) == r).count();
            let persistent =
                matches!(plan.values[r].source, Source::Constant(_)) || fetched.contains(&r);
            if !persistent && remaining.get(&r).copied().unwrap_or(0) == uses {
                freed += bytes(r);
            }
        }
        bytes(s.output) - freed
    };
    let mut rem = remaining.clone();
    kahn(plan, d, |ready, _| {
        let best = ready
            .iter()
            .enumerate()
            .min_by_key(|(_, &i)| (net(i, &rem), i))
            .map(|(k, _)| k)
            .unwrap_or(0);
        for v in plan.steps[ready[best]].inputs() {
            if let Some(c) = rem.get_mut(&plan.root(v)) {
                *c = c.saturating_sub(1);
            }
        }
        best
    })
}
