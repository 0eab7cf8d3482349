//! Backends: machinery only, no op knowledge. A backend prepares a plan's resources once
//! (arena, constants, pipelines, bind groups) and then executes its steps per run.
//!
//! Steps run in schedule order. Consecutive dispatches on one GPU are recorded into one
//! compute pass of one encoder; a transfer or a read-back submits what is pending on the
//! devices it touches.

pub mod cpu;
pub mod gpu;

use crate::compile::{Plan, Source, StepKind, ValueId};
use crate::device::Device;
use crate::session::Counters;
use crate::{Error, HostTensor, Result};
use cpu::CpuState;
use gpu::exec::GpuPlan;
use std::collections::{BTreeMap, HashMap};

/// A plan's resources on every device it uses.
pub struct Prepared {
    cpu: CpuState,
    gpus: BTreeMap<usize, GpuPlan>,
}

/// Allocate everything a plan needs; counts what it creates in `counters`.
pub fn prepare(plan: &Plan, counters: &mut Counters) -> Result<Prepared> {
    let mut gpus = BTreeMap::new();
    for d in plan.devices() {
        if let Device::Gpu(i) = d {
            gpus.insert(i, GpuPlan::prepare(plan, i, counters)?);
        }
    }
    Ok(Prepared {
        cpu: CpuState::new(plan.memory(Device::Cpu)),
        gpus,
    })
}

/// A copy of value `v`'s words, reserved fallibly: a fetch or transfer can be as large as
/// the arena itself, and failing to allocate it is an error naming the node, not an abort.
fn copy_words(plan: &Plan, v: ValueId, words: &[u32]) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    out.try_reserve_exact(words.len()).map_err(|_| {
        let value = &plan.values[v];
        Error::Alloc {
            node: value.name.clone(),
            device: value.device.to_string(),
            what: format!("a host copy of {} {}", value.dtype, value.shape),
            bytes: words.len() as u64 * 4,
        }
    })?;
    out.extend_from_slice(words);
    Ok(out)
}

fn gpu(p: &mut Prepared, i: usize) -> Result<&mut GpuPlan> {
    p.gpus
        .get_mut(&i)
        .ok_or_else(|| Error::Internal(format!("gpu:{i} was not prepared")))
}

async fn read_one(plan: &Plan, p: &mut Prepared, v: ValueId) -> Result<Vec<u32>> {
    match plan.values[v].device {
        Device::Cpu => copy_words(plan, v, p.cpu.read(plan, v)?),
        Device::Gpu(i) => {
            let mut out = gpu(p, i)?.read(plan, &[v]).await?;
            out.pop()
                .ok_or_else(|| Error::Internal("empty read-back".into()))
        }
    }
}

async fn write_one(plan: &Plan, p: &mut Prepared, v: ValueId, words: &[u32]) -> Result<()> {
    match plan.values[v].device {
        Device::Cpu => p.cpu.write(plan, v, words),
        Device::Gpu(i) => gpu(p, i)?.write(plan, v, words),
    }
}

/// Run a prepared plan. `feeds` maps placeholder names to checked host tensors. With
/// `read_back` false the fetches are computed, the devices waited on, and nothing is copied
/// back (TensorFlow's target nodes).
pub async fn execute(
    plan: &Plan,
    p: &mut Prepared,
    feeds: &HashMap<String, &HostTensor>,
    read_back: bool,
) -> Result<Vec<HostTensor>> {
    p.cpu.allocate(plan)?;
    for (name, v) in &plan.feeds {
        let t = feeds.get(name).ok_or_else(|| Error::Feed {
            name: name.clone(),
            message: "was not fed".into(),
        })?;
        write_one(plan, p, *v, t.words()).await?;
    }
    let mut i = 0;
    while i < plan.steps.len() {
        let step = &plan.steps[i];
        match (&step.kind, step.device) {
            (StepKind::Dispatch { kernel, inputs }, Device::Cpu) => {
                p.cpu.dispatch(plan, kernel, inputs, step.output)?;
                i += 1;
            }
            (StepKind::Dispatch { .. }, Device::Gpu(g)) => {
                let run: Vec<usize> = (i..plan.steps.len())
                    .take_while(|&j| {
                        plan.steps[j].device == step.device
                            && matches!(plan.steps[j].kind, StepKind::Dispatch { .. })
                    })
                    .collect();
                i += run.len();
                gpu(p, g)?.encode(&run)?;
            }
            (StepKind::Transfer { src }, _) => {
                let words = read_one(plan, p, *src).await?;
                write_one(plan, p, step.output, &words).await?;
                i += 1;
            }
        }
    }
    if !read_back {
        for g in p.gpus.values_mut() {
            g.flush();
            g.ctx.wait()?;
        }
        return Ok(Vec::new());
    }
    // Fetches: constants and feeds come straight from the host; device values are read back
    // with one copy batch per device.
    let mut results: Vec<Option<HostTensor>> = vec![None; plan.fetches.len()];
    let mut per_gpu: BTreeMap<usize, Vec<(usize, ValueId)>> = BTreeMap::new();
    for (k, &f) in plan.fetches.iter().enumerate() {
        let v = &plan.values[f];
        let host = match &plan.values[plan.root(f)].source {
            Source::Constant(t) => Some(t.words().to_vec()),
            Source::Feed(name) => feeds.get(name).map(|t| t.words().to_vec()),
            _ => None,
        };
        let words = match (host, v.device) {
            (Some(w), _) => w,
            (None, Device::Cpu) => copy_words(plan, f, p.cpu.read(plan, f)?)?,
            (None, Device::Gpu(g)) => {
                per_gpu.entry(g).or_default().push((k, f));
                continue;
            }
        };
        results[k] = Some(HostTensor::from_words(v.shape.clone(), v.dtype, words)?);
    }
    for (g, list) in per_gpu {
        let ids: Vec<ValueId> = list.iter().map(|&(_, f)| f).collect();
        let data = gpu(p, g)?.read(plan, &ids).await?;
        for ((k, f), words) in list.into_iter().zip(data) {
            let v = &plan.values[f];
            results[k] = Some(HostTensor::from_words(v.shape.clone(), v.dtype, words)?);
        }
    }
    for g in p.gpus.values_mut() {
        g.flush();
    }
    results
        .into_iter()
        .map(|r| r.ok_or_else(|| Error::Internal("a fetch produced no value".into())))
        .collect()
}
