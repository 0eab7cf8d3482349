//! Memory planning: value lifetimes over the schedule → offsets in one arena per device,
//! greedy by size with best fit (TFLite's arena planner), honouring the device's storage
//! offset alignment and binding-size limits.

use super::{Plan, Source, Target, ValueId};
use crate::device::Device;
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
    /// Lifetime `[first, last]` step of each arena value (for reports and tests).
    pub lifetimes: BTreeMap<ValueId, (usize, usize)>,
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

pub fn plan_memory(mut plan: Plan, target: &Target) -> Result<Plan> {
    let n = plan.steps.len();
    // Lifetimes of storage roots, in step indices; fetched values live to the end.
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
    for &f in &plan.fetches {
        let r = plan.root(f);
        if first.contains_key(&r) {
            last.insert(r, n);
        }
    }

    for device in plan.devices() {
        let limits = target
            .limits(device)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("no limits for {device}")))?;
        let alignment = (limits.min_storage_buffer_offset_alignment as u64).max(4);
        let mut mp = MemoryPlan {
            alignment,
            ..Default::default()
        };
        let check = |id: ValueId, what: &str| -> Result<()> {
            let v = &plan.values[id];
            if v.bytes() > limits.max_storage_buffer_binding_size {
                return Err(Error::Limit {
                    node: v.name.clone(),
                    device: device.to_string(),
                    what: format!("{what} {} {}", v.dtype, v.shape),
                    bytes: v.bytes(),
                    limit_name: "max_storage_buffer_binding_size",
                    limit: limits.max_storage_buffer_binding_size,
                });
            }
            Ok(())
        };
        // Constants: packed once, for the plan's life.
        for (id, v) in plan.values.iter().enumerate() {
            if v.device == device && matches!(v.source, Source::Constant(_)) {
                check(id, "constant")?;
                mp.constant_offsets.insert(id, mp.constant_bytes);
                mp.constant_bytes += align(v.bytes(), alignment);
            }
        }
        let mut roots: Vec<ValueId> = first
            .keys()
            .copied()
            .filter(|&v| plan.values[v].device == device)
            .collect();
        for &r in &roots {
            check(r, "tensor")?;
        }
        for (id, v) in plan.values.iter().enumerate() {
            if v.device == device && matches!(v.source, Source::View(_)) {
                check(id, "view")?;
            }
        }
        let size = |v: ValueId| align(plan.values[v].bytes(), alignment);
        roots.sort_by_key(|&v| (std::cmp::Reverse(size(v)), first[&v], v));
        // Greedy by size, best fit among the gaps left by values alive at the same time.
        let mut placed: Vec<(u64, u64, usize, usize)> = Vec::new(); // (offset, size, first, last)
        for &v in &roots {
            let (f, l, sz) = (first[&v], last[&v], size(v));
            let mut busy: Vec<(u64, u64)> = placed
                .iter()
                .filter(|p| p.2 <= l && f <= p.3)
                .map(|p| (p.0, p.0 + p.1))
                .collect();
            busy.sort_unstable();
            let mut best: Option<(u64, u64)> = None; // (gap size, offset)
            let mut cursor = 0u64;
            for (start, end) in busy {
                if start > cursor
                    && start - cursor >= sz
                    && best.is_none_or(|b| start - cursor < b.0)
                {
                    best = Some((start - cursor, cursor));
                }
                cursor = cursor.max(end);
            }
            let offset = best.map(|b| b.1).unwrap_or(cursor);
            placed.push((offset, sz, f, l));
            mp.offsets.insert(v, offset);
            mp.lifetimes.insert(v, (f, l));
            mp.peak_bytes = mp.peak_bytes.max(offset + sz);
            mp.no_reuse_bytes += sz;
        }
        for t in 0..=n {
            let live: u64 = placed
                .iter()
                .filter(|p| p.2 <= t && t <= p.3)
                .map(|p| p.1)
                .sum();
            mp.lower_bound_bytes = mp.lower_bound_bytes.max(live);
        }
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
        plan.memory.insert(device, mp);
    }
    Ok(plan)
}

/// Check that no two arena values alive at the same step overlap (used by tests).
pub fn overlaps(mp: &MemoryPlan, sizes: &dyn Fn(ValueId) -> u64) -> Vec<(ValueId, ValueId)> {
    let items: Vec<(ValueId, u64, u64, usize, usize)> = mp
        .offsets
        .iter()
        .map(|(&v, &o)| {
            let (f, l) = mp.lifetimes[&v];
            (v, o, o + sizes(v), f, l)
        })
        .collect();
    let mut bad = Vec::new();
    for (i, a) in items.iter().enumerate() {
        for b in &items[i + 1..] {
            let time = a.3 <= b.4 && b.3 <= a.4;
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
