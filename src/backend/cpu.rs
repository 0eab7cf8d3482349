//! The `cpu:0` backend: runs steps by calling the ops' reference kernels over an arena laid
//! out by the memory plan, exactly as a GPU would. It is the oracle GPU results are tested
//! against, and it exercises the memory plan on machines with no GPU.

use crate::compile::{MemoryPlan, Plan, Source, ValueId};
use crate::ops::Kernel;
use crate::{Error, Result};

/// The CPU's arena for one plan.
pub struct CpuState {
    arena: Vec<u32>,
}

impl CpuState {
    pub fn new(mp: Option<&MemoryPlan>) -> Self {
        CpuState {
            arena: vec![0; mp.map(|m| (m.peak_bytes / 4) as usize).unwrap_or(0)],
        }
    }

    /// The words of value `v` (which must live on `cpu:0`).
    pub fn read<'a>(&'a self, plan: &'a Plan, v: ValueId) -> Result<&'a [u32]> {
        let root = plan.root(v);
        let n = plan.values[v].shape.numel();
        match &plan.values[root].source {
            Source::Constant(t) => Ok(t.words()),
            _ => {
                let off = self.offset(plan, root)?;
                self.arena
                    .get(off..off + n)
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
        plan.memory(crate::Device::Cpu)
            .and_then(|m| m.offsets.get(&root))
            .map(|&o| (o / 4) as usize)
            .ok_or_else(|| Error::Internal(format!("value {root} has no cpu arena slot")))
    }

    /// Run one kernel: read the inputs, compute, write the output.
    pub fn dispatch(
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
        let out = {
            let ins = inputs
                .iter()
                .map(|&v| self.read(plan, v))
                .collect::<Result<Vec<_>>>()?;
            kernel.run_cpu(&ins)
        };
        self.write(plan, output, &out)
    }
}
