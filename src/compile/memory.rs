//! Memory planning: value lifetimes over the schedule → offsets in one arena per device,
//! greedy by size with best fit (TFLite's arena planner), honouring the device's storage
//! offset alignment and binding-size limits.

use super::{Plan, Source, StepId, StepKind, Target, ValueId};
use crate::device::{Device, DeviceLimits};
use crate::{Error, Result};
use std::collections::{BTreeMap, HashMap};

/// Where a device's values live, and what that costs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryPlan {
    /// Arena byte offset of every value that owns storage on this device (feeds and step
    /// outputs; views share their root's offset).
    pub offsets: BTreeMap<ValueId, u64>,
    /// Byte offset of every constant in the device's constant buffer.
    pub constant_offsets: BTreeMap<ValueId, u64>,
    /// Arena size: the planned peak of live intermediates.
    pub peak_bytes: u64,
    /// The most bytes live at any one step: no plan can do better with this schedule.
    pub lower_bound_bytes: u64,
    /// What the arena would need if no storage were ever reused.
    pub no_reuse_bytes: u64,
    /// Size of the constant buffer (lives as long as the plan).
    pub constant_bytes: u64,
    /// Alignment every offset honours.
    pub alignment: u64,
    /// Lifetime `[first, last]` step of each arena value (for reports and tests); a fetched
    /// value's last is one past the last step (`StepId::new(plan.steps.len())`).
    pub lifetimes: BTreeMap<ValueId, (StepId, StepId)>,
    /// Values written in place over the input whose slot they take (output → input).
    pub in_place: BTreeMap<ValueId, ValueId>,
    /// Values whose producers write straight into their run of a concatenation's output
    /// (input → that output, which holds it at its offset): the concatenation copies only
    /// its other inputs, if any. cpu:0 only.
    pub placed: BTreeMap<ValueId, ValueId>,
}

/// Elementwise outputs that can overwrite a dying input: the input is read at the very index
/// the output is written (same shape, no broadcasting through any view of it), it is last
/// used by this step, is not fetched, and sits in the same arena. Each invocation reads its
/// element before writing it, so sharing the slot is safe.
fn in_place_pairs(plan: &Plan, last: &HashMap<ValueId, usize>) -> HashMap<ValueId, ValueId> {
    let mut pairs = HashMap::new();
    let mut taken = std::collections::HashSet::new();
    for (i, s) in plan.steps.iter().enumerate() {
        let StepKind::Dispatch { kernel, inputs } = &s.kind else {
            continue;
        };
        let k = kernel.as_dyn();
        let out = &plan.values[s.output];
        // WebGPU in a browser (Dawn) refuses a dispatch whose writable binding overlaps
        // another binding, which an in-place pair is.
        if cfg!(target_arch = "wasm32") && matches!(out.device, crate::Device::Gpu(_)) {
            continue;
        }
        for &v in inputs {
            let r = plan.root(v);
            // Every read of the slot is at the output's own index (no broadcast, no view).
            let same_index = inputs
                .iter()
                .enumerate()
                .filter(|(_, &x)| plan.root(x) == r)
                .all(|(i, _)| k.reads_at_output_index(i, &out.shape));
            let ok = same_index
                && last.get(&r) == Some(&i)
                && plan.values[r].device == out.device
                && plan.values[r].bytes() == out.bytes()
                && matches!(plan.values[r].source, Source::Step | Source::Feed(_))
                && !taken.contains(&r);
            if ok {
                pairs.insert(s.output, r);
                taken.insert(r);
                break;
            }
        }
    }
    pairs
}

/// cpu:0 concatenations whose inputs can be written straight into their run of the output
/// (see [`crate::ops::KernelDef::input_runs`]): input → (the concatenation's output, byte
/// offset in it). An input qualifies when a cpu:0 dispatch produces it (not a feed, constant,
/// variable or view), it holds 4-byte words, the concatenation reads it once, no other
/// concatenation took it, and neither it nor the output takes part in an in-place pair
/// (whose handover would write over the other's storage while it lives). The output's slot
/// then lives from its first input's step to the last read of any of them.
fn concat_places(
    plan: &Plan,
    device: Device,
    inplace: &HashMap<ValueId, ValueId>,
) -> HashMap<ValueId, (ValueId, u64)> {
    let mut places = HashMap::new();
    if device != Device::Cpu {
        return places;
    }
    let paired: std::collections::HashSet<ValueId> =
        inplace.iter().flat_map(|(&a, &b)| [a, b]).collect();
    let words = |v: ValueId| {
        let v = &plan.values[v];
        v.device == device && v.bytes() == 4 * v.shape.numel() as u64
    };
    let produced: std::collections::HashSet<ValueId> = plan
        .steps
        .iter()
        .filter(|s| s.device == device && matches!(s.kind, StepKind::Dispatch { .. }))
        .map(|s| s.output)
        .collect();
    for s in &plan.steps {
        let StepKind::Dispatch { kernel, inputs } = &s.kind else {
            continue;
        };
        let out = s.output;
        let Some(starts) = kernel.as_dyn().input_runs() else {
            continue;
        };
        if s.device != device
            || starts.len() != inputs.len()
            || paired.contains(&out)
            || !words(out)
            || !matches!(plan.values[out].source, Source::Step)
        {
            continue;
        }
        for (&v, &start) in inputs.iter().zip(&starts) {
            let ok = plan.root(v) == v
                && v != out
                && produced.contains(&v)
                && matches!(plan.values[v].source, Source::Step)
                && words(v)
                && !paired.contains(&v)
                && !places.contains_key(&v)
                && inputs.iter().filter(|&&x| plan.root(x) == v).count() == 1;
            if ok {
                places.insert(v, (out, 4 * start as u64));
            }
        }
    }
    places
}

/// `v`'s storage root and its byte offset in it, following concatenations that hold it.
fn placed_in(places: &HashMap<ValueId, (ValueId, u64)>, mut v: ValueId) -> (ValueId, u64) {
    let mut at = 0;
    while let Some(&(out, off)) = places.get(&v) {
        v = out;
        at += off;
    }
    (v, at)
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Lifetimes of storage roots, in step indices; fetched values live to the end.
struct Lifetimes {
    first: HashMap<ValueId, usize>,
    last: HashMap<ValueId, usize>,
}

fn lifetimes(plan: &Plan) -> Lifetimes {
    let mut first: HashMap<ValueId, usize> = HashMap::new();
    let mut last: HashMap<ValueId, usize> = HashMap::new();
    for (_, v) in &plan.feeds {
        first.insert(*v, 0);
        last.insert(*v, 0);
    }
    for (i, s) in plan.steps.iter().enumerate() {
        first.entry(s.output).or_insert(i);
        last.entry(s.output).or_insert(i);
        for v in s.inputs() {
            let r = plan.root(v);
            let e = last.entry(r).or_insert(i);
            *e = (*e).max(i);
        }
    }
    for &f in &plan.outputs() {
        let r = plan.root(f);
        if first.contains_key(&r) {
            last.insert(r, plan.steps.len());
        }
    }
    Lifetimes { first, last }
}

pub fn plan_memory(mut plan: Plan, target: &Target) -> Result<Plan> {
    let life = lifetimes(&plan);
    let inplace = in_place_pairs(&plan, &life.last);
    for device in plan.devices() {
        let limits = target
            .limits(device)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("no limits for {device}")))?;
        let mp = plan_device(&plan, device, &limits, &life, &inplace)?;
        plan.memory.insert(device, mp);
    }
    Ok(plan)
}

/// A value over one buffer of the device: no kernel can reach it. (Kernels bind a tensor
/// over `max_storage_buffer_binding_size` as several windows, backend/gpu/split.rs.)
fn check_fits(
    plan: &Plan,
    id: ValueId,
    what: &str,
    device: Device,
    limits: &DeviceLimits,
) -> Result<()> {
    let v = &plan.values[id];
    if v.bytes() > limits.max_buffer_size {
        return Err(Error::Limit {
            node: v.name.clone(),
            device: device.to_string(),
            what: format!("{what} {} {}", v.dtype, v.shape),
            bytes: v.bytes(),
            limit_name: "max_buffer_size",
            limit: limits.max_buffer_size,
        });
    }
    Ok(())
}

/// A value written in place over a dying input shares that input's slot: each root maps to
/// the first value of its in-place chain. Memoized: a chain of n in-place steps would
/// otherwise walk O(n) per value.
fn in_place_groups(
    roots: &[ValueId],
    inplace: &HashMap<ValueId, ValueId>,
) -> HashMap<ValueId, ValueId> {
    let mut groups: HashMap<ValueId, ValueId> = HashMap::new();
    for &v in roots {
        let mut path = vec![v];
        let mut g = v;
        while let Some(&prev) = inplace.get(&g) {
            if let Some(&known) = groups.get(&prev) {
                g = known;
                break;
            }
            path.push(prev);
            g = prev;
        }
        for p in path {
            groups.insert(p, g);
        }
    }
    groups
}

/// The memory plan of one device: constants packed once, then the arena.
fn plan_device(
    plan: &Plan,
    device: Device,
    limits: &DeviceLimits,
    life: &Lifetimes,
    inplace: &HashMap<ValueId, ValueId>,
) -> Result<MemoryPlan> {
    let alignment = (limits.min_storage_buffer_offset_alignment as u64).max(4);
    let mut mp = MemoryPlan {
        alignment,
        ..Default::default()
    };
    // Assignments copy their value on the device, so an assigned constant needs storage too.
    let read: std::collections::HashSet<ValueId> = plan
        .steps
        .iter()
        .flat_map(|s| s.inputs())
        .chain(plan.assigns.iter().map(|&(v, _)| v))
        .map(|v| plan.root(v))
        .collect();
    // Constants that steps read: packed once, for the plan's life. (Fetched constants come
    // straight from the host; folded-away and literal-inlined ones take no space.)
    for (id, v) in plan.values_by_id() {
        if v.device == device && matches!(v.source, Source::Constant(_)) && read.contains(&id) {
            check_fits(plan, id, "constant", device, limits)?;
            mp.constant_offsets.insert(id, mp.constant_bytes);
            mp.constant_bytes += align(v.bytes(), alignment);
        }
    }
    let roots: Vec<ValueId> = life
        .first
        .keys()
        .copied()
        .filter(|&v| plan.values[v].device == device)
        .collect();
    for &r in &roots {
        check_fits(plan, r, "tensor", device, limits)?;
    }
    for (id, v) in plan.values_by_id() {
        if v.device == device && matches!(v.source, Source::View(_)) {
            check_fits(plan, id, "view", device, limits)?;
        }
    }
    let size = |v: ValueId| align(plan.values[v].bytes(), alignment);
    let groups = in_place_groups(&roots, inplace);
    let places = concat_places(plan, device, inplace);
    // A value inside a concatenation's output goes with it; in-place pairs and placed
    // values are disjoint (see `concat_places`).
    let group = |v: ValueId| {
        let (top, at) = placed_in(&places, v);
        (groups.get(&top).copied().unwrap_or(top), at)
    };
    // An in-place pair (or chain), or a concatenation with the inputs written into it, is
    // placed as one item spanning every lifetime.
    let mut spans: BTreeMap<ValueId, (u64, usize, usize)> = BTreeMap::new();
    for &v in &roots {
        let (g, at) = group(v);
        let e = spans.entry(g).or_insert((0, usize::MAX, 0));
        e.0 = e.0.max(align(at + plan.values[v].bytes(), alignment));
        e.1 = e.1.min(life.first[&v]);
        e.2 = e.2.max(life.last[&v]);
    }
    let items: Vec<Item> = spans
        .iter()
        .map(|(&v, &(size, first, last))| Item {
            v,
            size,
            first,
            last,
        })
        .collect();
    let (offsets, peak) = best_assignment(&items);
    for &v in &roots {
        let (g, at) = group(v);
        mp.offsets.insert(v, offsets[&g] + at);
        if let Some(&(out, _)) = places.get(&v) {
            mp.placed.insert(v, out);
        }
        mp.lifetimes
            .insert(v, (StepId::new(life.first[&v]), StepId::new(life.last[&v])));
        mp.no_reuse_bytes += size(v);
        if let Some(&prev) = inplace.get(&v) {
            mp.in_place.insert(v, prev);
        }
    }
    mp.peak_bytes = peak;
    mp.lower_bound_bytes = live_peak(&items);
    if mp.peak_bytes > limits.max_buffer_size {
        return Err(Error::Limit {
            node: "(arena)".into(),
            device: device.to_string(),
            what: "the planned arena".into(),
            bytes: mp.peak_bytes,
            limit_name: "max_buffer_size",
            limit: limits.max_buffer_size,
        });
    }
    Ok(mp)
}

/// A value to place: its aligned size and inclusive lifetime in steps.
#[derive(Debug, Clone, Copy)]
struct Item {
    v: ValueId,
    size: u64,
    first: usize,
    last: usize,
}

/// Greedy placement in several orders; the one with the lowest peak wins. Each pass puts a
/// value at the best-fitting gap among the values already placed that are alive at the same
/// time (TFLite's greedy-by-size is the first order; the others fix cases where a big
/// short-lived value placed first fragments the arena).
fn best_assignment(items: &[Item]) -> (BTreeMap<ValueId, u64>, u64) {
    type Key = fn(&Item) -> (u64, u64, u64);
    let orders: [Key; 4] = [
        |i| (u64::MAX - i.size, i.first as u64, i.v.index() as u64),
        |i| (i.first as u64, u64::MAX - i.size, i.v.index() as u64),
        |i| {
            (
                u64::MAX - (i.last - i.first) as u64,
                u64::MAX - i.size,
                i.v.index() as u64,
            )
        },
        |i| {
            (
                u64::MAX - i.size.saturating_mul((i.last - i.first + 1) as u64),
                i.first as u64,
                i.v.index() as u64,
            )
        },
    ];
    // Each greedy pass costs the sum over items of the items alive with each, quadratic
    // when thousands of feeds are alive together; big plans take the first order only.
    let tried = if items.len() <= 2048 { orders.len() } else { 1 };
    let mut candidates: Vec<Vec<Item>> = orders[..tried]
        .iter()
        .map(|key| {
            let mut order = items.to_vec();
            order.sort_by_key(key);
            order
        })
        .collect();
    // Small plans also try seeded perturbations of the size order (a swap of neighbours
    // often removes a fragmenting choice); bounded so big graphs stay fast.
    if items.len() <= 256 {
        let mut rng = 0x2545F4914F6CDD1Du64;
        for _ in 0..48 {
            let mut order = candidates[0].clone();
            for _ in 0..order.len().div_ceil(2) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = (rng % order.len() as u64) as usize;
                if i + 1 < order.len() {
                    order.swap(i, i + 1);
                }
            }
            candidates.push(order);
        }
    }
    let mut best: Option<(BTreeMap<ValueId, u64>, u64)> = None;
    for order in candidates {
        let (offsets, peak) = greedy(&order);
        if best.as_ref().is_none_or(|b| peak < b.1) {
            best = Some((offsets, peak));
        }
    }
    best.unwrap_or_default()
}

/// The most bytes alive at one step (a sweep over lifetime ends).
fn live_peak(items: &[Item]) -> u64 {
    let mut events: Vec<(usize, i128)> = Vec::with_capacity(2 * items.len());
    for it in items {
        events.push((it.first, it.size as i128));
        events.push((it.last + 1, -(it.size as i128)));
    }
    // Ends before starts at the same step: `last` is inclusive, so `last + 1` is free.
    events.sort_unstable_by_key(|&(t, d)| (t, d));
    let (mut live, mut peak) = (0i128, 0i128);
    for (_, d) in events {
        live += d;
        peak = peak.max(live);
    }
    peak as u64
}

/// Placed items by lifetime: those alive at a step (a segment tree over steps) and those
/// starting in a range (a sorted map), so finding the items alive together with a new one
/// costs its answer, not a scan of everything placed.
struct Placed {
    leaves: usize,
    cover: Vec<Vec<usize>>,
    by_first: BTreeMap<usize, Vec<usize>>,
    items: Vec<(u64, Item)>,
}

impl Placed {
    fn new(steps: usize) -> Placed {
        let leaves = (steps + 2).next_power_of_two();
        Placed {
            leaves,
            cover: vec![Vec::new(); 2 * leaves],
            by_first: BTreeMap::new(),
            items: Vec::new(),
        }
    }

    fn insert(&mut self, offset: u64, it: Item) {
        let k = self.items.len();
        self.items.push((offset, it));
        self.by_first.entry(it.first).or_default().push(k);
        let (mut l, mut r) = (it.first + self.leaves, it.last + 1 + self.leaves);
        while l < r {
            if l & 1 == 1 {
                self.cover[l].push(k);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.cover[r].push(k);
            }
            l /= 2;
            r /= 2;
        }
    }

    /// `(offset, end)` of every placed item alive during `it`'s lifetime.
    fn busy(&self, it: &Item) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut node = it.first + self.leaves;
        while node >= 1 {
            out.extend(self.cover[node].iter().copied());
            node /= 2;
        }
        let later = (it.last > it.first).then(|| self.by_first.range(it.first + 1..=it.last));
        for ks in later.into_iter().flatten().map(|(_, ks)| ks) {
            out.extend(ks.iter().copied());
        }
        out.iter()
            .map(|&k| {
                let (o, p) = &self.items[k];
                (*o, o + p.size)
            })
            .collect()
    }
}

fn greedy(order: &[Item]) -> (BTreeMap<ValueId, u64>, u64) {
    let steps = order.iter().map(|i| i.last).max().unwrap_or(0);
    let mut placed = Placed::new(steps);
    let mut offsets = BTreeMap::new();
    let mut peak = 0;
    for &it in order {
        let mut busy = placed.busy(&it);
        busy.sort_unstable();
        let mut best: Option<(u64, u64)> = None; // (gap size, offset)
        let mut cursor = 0u64;
        for (start, end) in busy {
            if start > cursor
                && start - cursor >= it.size
                && best.is_none_or(|b| start - cursor < b.0)
            {
                best = Some((start - cursor, cursor));
            }
            cursor = cursor.max(end);
        }
        let offset = best.map(|b| b.1).unwrap_or(cursor);
        placed.insert(offset, it);
        offsets.insert(it.v, offset);
        peak = peak.max(offset + it.size);
    }
    (offsets, peak)
}

/// Check that no two arena values alive at the same step overlap (used by tests).
pub fn overlaps(mp: &MemoryPlan, sizes: &dyn Fn(ValueId) -> u64) -> Vec<(ValueId, ValueId)> {
    let items: Vec<(ValueId, u64, u64, usize, usize)> = mp
        .offsets
        .iter()
        .map(|(&v, &o)| {
            let (f, l) = mp.lifetimes[&v];
            (v, o, o + sizes(v), f.index(), l.index())
        })
        .collect();
    let mut bad = Vec::new();
    for (i, a) in items.iter().enumerate() {
        for b in &items[i + 1..] {
            // An in-place pair shares its slot by design at the step that hands it over.
            let handover = mp.in_place.get(&a.0) == Some(&b.0) && b.4 == a.3
                || mp.in_place.get(&b.0) == Some(&a.0) && a.4 == b.3;
            // A concatenation's input written into its output lies inside it by design.
            let inside = |x: ValueId, y: ValueId| {
                let mut x = x;
                while let Some(&o) = mp.placed.get(&x) {
                    if o == y {
                        return true;
                    }
                    x = o;
                }
                false
            };
            let nested = inside(a.0, b.0) || inside(b.0, a.0);
            let time = a.3 <= b.4 && b.3 <= a.4 && !handover && !nested;
            let space = a.1 < b.2 && b.1 < a.2;
            if time && space {
                bad.push((a.0, b.0));
            }
        }
    }
    bad
}

impl Plan {
    /// Total bytes of memory this plan holds on `device` (arena + constants).
    pub fn device_bytes(&self, device: Device) -> u64 {
        self.memory
            .get(&device)
            .map(|m| m.peak_bytes + m.constant_bytes)
            .unwrap_or(0)
    }
}
