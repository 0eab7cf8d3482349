//! Topological orders of the steps. Each order is deterministic (explicit tie-breaks, never
//! hash order), so plans are reproducible and testable. Several orders are offered because
//! the order decides which values are alive together, and so the memory peak; `compile`
//! plans memory for each and keeps the lowest peak.

use super::{Plan, Source, Step, StepId, ValueId};
use crate::id::IdVec;
use crate::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// The dependency structure of a plan's steps.
struct Deps {
    /// Steps each step waits for.
    deps: IdVec<StepId, Vec<StepId>>,
    /// Steps waiting for each step.
    users: IdVec<StepId, Vec<StepId>>,
}

fn deps(plan: &Plan) -> Deps {
    let n = plan.steps.len();
    let producer = producers(plan);
    let mut deps = IdVec::filled(Vec::new(), n);
    let mut users = IdVec::filled(Vec::new(), n);
    for (i, s) in plan.steps.iter_enumerated() {
        let mut d: Vec<StepId> = s
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

fn producers(plan: &Plan) -> HashMap<ValueId, StepId> {
    plan.steps
        .iter_enumerated()
        .map(|(i, s)| (s.output, i))
        .collect()
}

fn reorder(mut plan: Plan, order: &[StepId]) -> Plan {
    let mut old: IdVec<StepId, Option<Step>> = std::mem::take(&mut plan.steps)
        .into_iter()
        .map(Some)
        .collect();
    plan.steps = order.iter().filter_map(|&i| old[i].take()).collect();
    plan
}

/// The default order: Kahn's algorithm with ties to the earliest step (graph order).
fn earliest_first(plan: &Plan, d: &Deps) -> Result<Vec<StepId>> {
    let n = plan.steps.len();
    let mut indegree: IdVec<StepId, usize> = d.deps.iter().map(Vec::len).collect();
    // A heap, not a scan of the ready list: a wide graph has thousands of ready steps.
    let mut ready: BinaryHeap<Reverse<StepId>> = plan
        .steps
        .ids()
        .filter(|&i| indegree[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &d.users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() != n {
        return Err(Error::Internal("the step graph has a cycle".into()));
    }
    Ok(order)
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
    let mut unique: Vec<Vec<StepId>> = Vec::new();
    for o in orders {
        if o.len() == plan.steps.len() && !unique.contains(&o) {
            unique.push(o);
        }
    }
    Ok(unique.iter().map(|o| reorder(plan.clone(), o)).collect())
}

fn depth_first(plan: &Plan, d: &Deps, reversed: bool) -> Vec<StepId> {
    let n = plan.steps.len();
    let producer = producers(plan);
    let mut state: IdVec<StepId, u8> = IdVec::filled(0, n); // 0 new, 1 open, 2 done
    let mut order = Vec::with_capacity(n);
    let mut roots: Vec<StepId> = plan
        .outputs()
        .iter()
        .filter_map(|&f| producer.get(&plan.root(f)).copied())
        .collect();
    roots.extend(plan.steps.ids()); // anything not reached from a fetch (e.g. transfers) still runs
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

/// Kahn's algorithm where the ready step that frees the most bytes net goes first (ties to
/// the lower index). A step's score changes only when one of its inputs is down to the reads
/// that step itself makes, so scores live in a heap and are pushed again just then.
fn memory_greedy(plan: &Plan, d: &Deps) -> Result<Vec<StepId>> {
    let n = plan.steps.len();
    let bytes = |v: ValueId| plan.values[v].bytes() as i64;
    let fetched: HashSet<ValueId> = plan.outputs().iter().map(|&f| plan.root(f)).collect();
    // Per step, each distinct storage root it reads and how many times.
    let reads: IdVec<StepId, Vec<(ValueId, usize)>> = plan
        .steps
        .iter()
        .map(|s| {
            let mut r: Vec<ValueId> = s.inputs().into_iter().map(|v| plan.root(v)).collect();
            r.sort_unstable();
            let mut out: Vec<(ValueId, usize)> = Vec::new();
            for v in r {
                match out.last_mut() {
                    Some((x, c)) if *x == v => *c += 1,
                    _ => out.push((v, 1)),
                }
            }
            out
        })
        .collect();
    // Remaining reads of each storage root (fetched roots are never freed), and its readers.
    let mut remaining: HashMap<ValueId, usize> = HashMap::new();
    let mut readers: HashMap<ValueId, Vec<StepId>> = HashMap::new();
    // The most reads of each root by one step: below that, no score can change.
    let mut most: HashMap<ValueId, usize> = HashMap::new();
    for (i, r) in reads.iter_enumerated() {
        for &(v, c) in r {
            *remaining.entry(v).or_default() += c;
            readers.entry(v).or_default().push(i);
            let m = most.entry(v).or_default();
            *m = (*m).max(c);
        }
    }
    let net = |i: StepId, remaining: &HashMap<ValueId, usize>| -> i64 {
        let mut freed = 0;
        for &(r, uses) in &reads[i] {
            let persistent =
                matches!(plan.values[r].source, Source::Constant(_)) || fetched.contains(&r);
            if !persistent && remaining.get(&r).copied().unwrap_or(0) == uses {
                freed += bytes(r);
            }
        }
        bytes(plan.steps[i].output) - freed
    };
    let mut indegree: IdVec<StepId, usize> = d.deps.iter().map(Vec::len).collect();
    let mut score: IdVec<StepId, i64> = IdVec::filled(0, n);
    let mut is_ready = IdVec::filled(false, n);
    let mut done = IdVec::filled(false, n);
    let mut heap: BinaryHeap<Reverse<(i64, StepId)>> = BinaryHeap::new();
    for i in plan.steps.ids().filter(|&i| indegree[i] == 0) {
        score[i] = net(i, &remaining);
        is_ready[i] = true;
        heap.push(Reverse((score[i], i)));
    }
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((sc, i))) = heap.pop() {
        if done[i] || sc != score[i] {
            continue; // stale entry
        }
        done[i] = true;
        order.push(i);
        for &(r, c) in &reads[i] {
            let Some(left) = remaining.get_mut(&r) else {
                continue;
            };
            *left = left.saturating_sub(c);
            let left = *left;
            // Only readers whose own reads are all that is left change score; there are at
            // most `left` of them.
            if left == 0 || left > most.get(&r).copied().unwrap_or(0) {
                continue;
            }
            if let Some(rs) = readers.get(&r) {
                for &u in rs.iter().filter(|&&u| is_ready[u] && !done[u]) {
                    if reads[u].iter().any(|&(x, k)| x == r && k == left) {
                        score[u] = net(u, &remaining);
                        heap.push(Reverse((score[u], u)));
                    }
                }
            }
        }
        for &u in &d.users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                score[u] = net(u, &remaining);
                is_ready[u] = true;
                heap.push(Reverse((score[u], u)));
            }
        }
    }
    if order.len() != n {
        return Err(Error::Internal("the step graph has a cycle".into()));
    }
    Ok(order)
}
