//! The `cpu:0` backend: runs steps over an arena laid out by the memory plan, exactly as a GPU
//! would, each kernel writing straight into its output's slot (`KernelDef::run_cpu_into`).
//! The kernels are the CPU device's own fast paths (chunked, vectorized, parallel on rayon;
//! sgemm for matmul and convolution) with the semantics of the scalar reference functions,
//! which the tests keep as the oracle.

use super::vars::{Storage, VarStore};
use super::{Backend, Created};
use crate::compile::{Plan, Source, StepKind, ValueId};
use crate::device::Device;
use crate::ops::{CpuIn, Kernel};
use crate::{Error, Result};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

/// The CPU's arena for one plan. It is allocated on the first run, not when the plan is
/// prepared, so planning a graph too large for this machine costs nothing, and running it is
/// an [`Error::Alloc`] rather than an aborted process.
pub struct CpuState {
    arena: Vec<u32>,
    bytes: u64,
    /// The plan's variables on `cpu:0`, by value: the session's storage, shared.
    vars: HashMap<ValueId, Arc<RwLock<Vec<u32>>>>,
}

/// A value's words: a slice of the arena or a constant, or a locked variable.
pub enum Words<'a> {
    Slice(&'a [u32]),
    Variable(RwLockReadGuard<'a, Vec<u32>>),
}

impl std::ops::Deref for Words<'_> {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            Words::Slice(s) => s,
            Words::Variable(g) => g,
        }
    }
}

impl Backend for CpuState {
    /// Nothing is allocated yet (see [`CpuState`]), so nothing is counted.
    fn prepare(
        plan: &Plan,
        device: Device,
        store: &mut VarStore,
        created: &mut Created,
    ) -> Result<Self> {
        let mut vars = HashMap::new();
        for (id, v) in plan.values.iter().enumerate() {
            if let (Source::Variable { name, init }, true) = (&v.source, v.device == device) {
                let slot = store.get_or_init(name, device, &v.shape, v.dtype, init, created)?;
                let Storage::Cpu(words) = slot.storage else {
                    return Err(Error::Internal(format!(
                        "variable '{name}' is not on cpu:0"
                    )));
                };
                vars.insert(id, words);
            }
        }
        let state = CpuState {
            arena: Vec::new(),
            bytes: plan.memory(device).map_or(0, |m| m.peak_bytes),
            vars,
        };
        Ok(state)
    }

    fn begin_run(&mut self, plan: &Plan) -> Result<()> {
        self.allocate(plan)
    }

    fn upload(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<()> {
        self.write(plan, v, words)
    }

    fn dispatch(&mut self, plan: &Plan, steps: &[usize]) -> Result<()> {
        for &i in steps {
            let step = &plan.steps[i];
            let StepKind::Dispatch { kernel, inputs } = &step.kind else {
                return Err(Error::Internal(format!("step {i} is not a dispatch")));
            };
            self.run_kernel(plan, kernel, inputs, step.output)?;
        }
        Ok(())
    }

    fn dispatch_timed(
        &mut self,
        plan: &Plan,
        steps: &[usize],
        rec: &mut super::timing::Recorder,
    ) -> Result<()> {
        for &i in steps {
            let t0 = std::time::Instant::now();
            self.dispatch(plan, &[i])?;
            rec.host(
                super::timing::SpanKind::Dispatch,
                Some(i),
                Vec::new(),
                Device::Cpu,
                t0,
            );
        }
        Ok(())
    }

    fn download<'a>(
        &'a mut self,
        plan: &'a Plan,
        values: &'a [ValueId],
    ) -> BoxFuture<'a, Result<Vec<Vec<u32>>>> {
        let out = values
            .iter()
            .map(|&v| copy_words(plan, v, &self.read(plan, v)?))
            .collect();
        Box::pin(std::future::ready(out))
    }

    fn assign(&mut self, plan: &Plan, assigns: &[(ValueId, ValueId)]) -> Result<()> {
        for &(v, var) in assigns {
            let target = self.vars.get(&var).ok_or_else(|| {
                Error::Internal(format!("variable value {var} has no cpu storage"))
            })?;
            if let Some(source) = self.vars.get(&plan.root(v)) {
                if Arc::ptr_eq(source, target) {
                    continue;
                }
            }
            let words = self.read(plan, v)?;
            target
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .copy_from_slice(&words);
        }
        Ok(())
    }

    fn finish(&mut self, _wait: bool) -> Result<()> {
        Ok(())
    }
}

/// A copy of value `v`'s words (the fetch's one copy, see [`crate::host::fresh_vec`]),
/// reserved fallibly: a fetch or transfer can be as large as the arena itself, and failing to
/// allocate it is an error naming the node, not an abort.
fn copy_words(plan: &Plan, v: ValueId, words: &[u32]) -> Result<Vec<u32>> {
    crate::host::copy_of(words).ok_or_else(|| {
        let value = &plan.values[v];
        Error::Alloc {
            node: value.name.clone(),
            device: value.device.to_string(),
            what: format!("a host copy of {} {}", value.dtype, value.shape),
            bytes: words.len() as u64 * 4,
        }
    })
}

impl CpuState {
    /// Allocate the arena if this is the first run; the error names the largest value.
    pub fn allocate(&mut self, plan: &Plan) -> Result<()> {
        let words = self.bytes.div_ceil(4);
        if self.arena.len() as u64 == words {
            return Ok(());
        }
        let largest = plan
            .memory(Device::Cpu)
            .and_then(|m| m.offsets.keys().max_by_key(|&&v| plan.values[v].bytes()))
            .map(|&v| &plan.values[v]);
        let fail = || Error::Alloc {
            node: largest.map_or_else(|| "(arena)".into(), |v| v.name.clone()),
            device: "cpu:0".into(),
            what: match largest {
                Some(v) => format!(
                    "the plan's arena (its largest value is {} {} of {} bytes)",
                    v.dtype,
                    v.shape,
                    v.bytes()
                ),
                None => "the plan's arena".into(),
            },
            bytes: self.bytes,
        };
        let words = usize::try_from(words).map_err(|_| fail())?;
        // `try_reserve_exact` counts from the length, which is 0 until the first success.
        self.arena.try_reserve_exact(words).map_err(|_| fail())?;
        self.arena.resize(words, 0);
        Ok(())
    }

    /// The words of value `v` (which must live on `cpu:0`).
    pub fn read<'a>(&'a self, plan: &'a Plan, v: ValueId) -> Result<Words<'a>> {
        let root = plan.root(v);
        let n = plan.values[v].shape.numel();
        match &plan.values[root].source {
            Source::Constant(t) => Ok(Words::Slice(t.words())),
            Source::Variable { name, .. } => {
                let words = self.vars.get(&root).ok_or_else(|| {
                    Error::Internal(format!("variable '{name}' has no cpu storage"))
                })?;
                Ok(Words::Variable(
                    words.read().unwrap_or_else(PoisonError::into_inner),
                ))
            }
            _ => {
                let off = self.offset(plan, root)?;
                self.arena
                    .get(off..off + n)
                    .map(Words::Slice)
                    .ok_or_else(|| Error::Internal(format!("value {v} lies outside the cpu arena")))
            }
        }
    }

    /// Overwrite value `v`'s storage.
    pub fn write(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<()> {
        let off = self.offset(plan, plan.root(v))?;
        let dst = self
            .arena
            .get_mut(off..off + words.len())
            .ok_or_else(|| Error::Internal(format!("value {v} lies outside the cpu arena")))?;
        dst.copy_from_slice(words);
        Ok(())
    }

    fn offset(&self, plan: &Plan, root: ValueId) -> Result<usize> {
        plan.memory(Device::Cpu)
            .and_then(|m| m.offsets.get(&root))
            .map(|&o| (o / 4) as usize)
            .ok_or_else(|| Error::Internal(format!("value {root} has no cpu arena slot")))
    }

    /// Run one kernel: it reads its inputs where they lie (arena, constants, variables) and
    /// writes straight into the output's arena slot, which the memory plan keeps disjoint
    /// from every input except one it is written in place over.
    pub fn run_kernel(
        &mut self,
        plan: &Plan,
        kernel: &Kernel,
        inputs: &[ValueId],
        output: ValueId,
    ) -> Result<()> {
        if !kernel.has_cpu() {
            return Err(Error::Placement {
                node: plan.values[output].name.clone(),
                op: kernel.describe(),
                requested: "cpu:0".into(),
                message: "this kernel has no CPU implementation; place it on a GPU".into(),
            });
        }
        // A kernel without a fast path returns its output as a fresh vector, allocated
        // infallibly inside the op; reserving the same size first turns a failure into an
        // error naming the node.
        let v = &plan.values[output];
        Vec::<u32>::new()
            .try_reserve_exact(v.shape.numel())
            .map_err(|_| Error::Alloc {
                node: v.name.clone(),
                device: "cpu:0".into(),
                what: format!(
                    "the output {} {} of {}",
                    v.dtype,
                    v.shape,
                    kernel.describe()
                ),
                bytes: v.bytes(),
            })?;
        let out_off = self.offset(plan, plan.root(output))?;
        let out_len = plan.values[output].shape.numel();
        let out_end = out_off + out_len;
        let outside = |v: ValueId| Error::Internal(format!("value {v} lies outside the cpu arena"));
        if out_end > self.arena.len() {
            return Err(outside(output));
        }
        // Where each input lies: outside the arena, or an arena range.
        enum At<'a> {
            Held(Words<'a>),
            Arena(usize, usize),
            Output,
        }
        let mut at = Vec::with_capacity(inputs.len());
        for &v in inputs {
            let root = plan.root(v);
            let n = plan.values[v].shape.numel();
            at.push(match &plan.values[root].source {
                Source::Constant(t) => At::Held(Words::Slice(t.words())),
                Source::Variable { name, .. } => {
                    let words = self.vars.get(&root).ok_or_else(|| {
                        Error::Internal(format!("variable '{name}' has no cpu storage"))
                    })?;
                    At::Held(Words::Variable(
                        words.read().unwrap_or_else(PoisonError::into_inner),
                    ))
                }
                _ => {
                    let off = self.offset(plan, root)?;
                    if off + n > self.arena.len() {
                        return Err(outside(v));
                    }
                    if off == out_off && n == out_len {
                        At::Output
                    } else if off + n <= out_off || off >= out_end {
                        At::Arena(off, n)
                    } else {
                        return Err(Error::Internal(format!(
                            "input value {v} overlaps the output {output} of {} in the cpu arena",
                            kernel.describe()
                        )));
                    }
                }
            });
        }
        let (below, rest) = self.arena.split_at_mut(out_off);
        let (out, above) = rest.split_at_mut(out_len);
        let ins: Vec<CpuIn<'_>> = at
            .iter()
            .map(|a| match a {
                At::Held(w) => CpuIn::Words(w),
                At::Arena(off, n) if *off < out_off => CpuIn::Words(&below[*off..*off + n]),
                At::Arena(off, n) => CpuIn::Words(&above[off - out_end..off - out_end + n]),
                At::Output => CpuIn::Output,
            })
            .collect();
        kernel.run_cpu_into(&ins, out)
    }
}
