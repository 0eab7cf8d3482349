//! The `cpu:0` backend: runs steps over an arena laid out by the memory plan, exactly as a GPU
//! would, each kernel writing straight into its output's slot (`KernelDef::run_cpu_into`).
//! The kernels are the CPU device's own fast paths (chunked, vectorized, parallel on rayon;
//! sgemm for matmul and convolution) with the semantics of the scalar reference functions,
//! which the tests keep as the oracle.

use super::{Backend, Created};
use super::{Storage, VariableStorage};
use crate::compile::{Plan, Source, StepId, StepKind, ValueId};
use crate::device::Device;
use crate::ops::{CpuIn, CpuPrepared, Kernel};
use crate::{Error, Result};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use web_time::Instant;

/// The CPU's arena for one plan. It is allocated on the first run, not when the plan is
/// prepared, so planning a graph too large for this machine costs nothing, and running it is
/// an [`Error::Alloc`] rather than an aborted process.
pub struct CpuPlan {
    arena: Vec<u32>,
    bytes: u64,
    /// The plan's variables on `cpu:0`, by value: the session's storage, shared.
    vars: HashMap<ValueId, Arc<RwLock<Vec<u32>>>>,
    /// Each cpu dispatch step's operands, resolved at prepare (by step index), so a run does
    /// no lookups per kernel; `None` for other steps and for a step that cannot run here,
    /// which resolves again when it runs and reports why.
    steps: Vec<Option<StepAt>>,
    /// Every dispatch here reads and writes at most [`INLINE_WORDS`] per value: no kernel
    /// of the run goes parallel, so the run stays on the caller's thread (see [`in_pool`]).
    inline: bool,
}

/// The most words any input or output of a dispatch may have for a plan to run on the
/// caller's thread: no kernel's parallel loop starts below it, so handing the run to the
/// pool would only cost its wake-up (docs/performance.md, "Small graphs").
const INLINE_WORDS: usize = 4096;

/// Where one dispatch's output and inputs lie, checked against the arena once.
struct StepAt {
    out_off: usize,
    out_len: usize,
    inputs: Vec<InAt>,
    /// Reserve the output's size before running (see [`RESERVE_FROM`]).
    reserve: bool,
    /// A concatenation some of whose inputs the memory plan placed in their run of its
    /// output (`MemoryPlan::placed`): the others' (input, first word in the output, words)
    /// to copy instead of running the kernel.
    copies: Option<Vec<(usize, usize, usize)>>,
    /// What the kernel made once from its constant inputs (`KernelDef::prepare_cpu`).
    prepared: Option<CpuPrepared>,
}

/// Where one input of a dispatch lies.
enum InAt {
    /// A plan constant: the root value holding it.
    Constant(ValueId),
    Variable(Arc<RwLock<Vec<u32>>>),
    /// An arena range (offset, words) disjoint from the output.
    Arena(usize, usize),
    /// The output's own slot (written in place over this input).
    Output,
    /// Already in its run of a concatenation's output.
    Placed,
}

/// Outputs of at least this many bytes are reserved on the heap before their kernel runs: a
/// kernel without a fast path allocates its result infallibly, and a failure must be an
/// error naming the node. Below it a failed allocation means the process is out of memory
/// anyway, and a malloc/free per kernel is measurable executor overhead on small graphs.
const RESERVE_FROM: u64 = 1 << 20;

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

impl Backend for CpuPlan {
    /// Nothing is allocated yet (see [`CpuPlan`]); what kernels prepared from constants
    /// (packed weights) is counted.
    fn prepare(
        plan: &Plan,
        device: Device,
        storage: &VariableStorage,
        created: &mut Created,
    ) -> Result<Self> {
        let mut vars = HashMap::new();
        for (&id, s) in storage {
            let Storage::Cpu(words) = s else {
                let name = &plan.values[id].name;
                return Err(Error::Internal(format!(
                    "variable '{name}' is not on cpu:0"
                )));
            };
            vars.insert(id, words.clone());
        }
        let bytes = plan.memory(device).map_or(0, |m| m.peak_bytes);
        let arena_words = usize::try_from(bytes.div_ceil(4)).unwrap_or(usize::MAX);
        let steps = plan
            .steps
            .iter()
            .map(|step| match &step.kind {
                StepKind::Dispatch { kernel, inputs } if step.device == device => {
                    resolve(plan, &vars, arena_words, kernel, inputs, step.output).ok()
                }
                _ => None,
            })
            .collect::<Vec<Option<StepAt>>>();
        let small = |v: ValueId| plan.values[v].shape.numel() <= INLINE_WORDS;
        let inline = plan.steps.iter().all(|step| match &step.kind {
            StepKind::Dispatch { inputs, .. } if step.device == device => {
                small(step.output) && inputs.iter().all(|&v| small(v))
            }
            _ => true,
        });
        created.prepared_bytes += steps
            .iter()
            .flatten()
            .filter_map(|s| s.prepared.as_ref())
            .map(CpuPrepared::bytes)
            .sum::<u64>();
        let state = CpuPlan {
            arena: Vec::new(),
            bytes,
            vars,
            steps,
            inline,
        };
        Ok(state)
    }

    fn begin_run(&mut self, plan: &Plan) -> Result<()> {
        self.allocate(plan)
    }

    fn upload(&mut self, plan: &Plan, v: ValueId, words: &[u32]) -> Result<()> {
        self.write(plan, v, words)
    }

    fn dispatch(&mut self, plan: &Plan, steps: &[StepId]) -> Result<()> {
        if self.inline {
            return self.dispatch_here(plan, steps);
        }
        in_pool(|| self.dispatch_here(plan, steps))
    }

    fn dispatch_timed(
        &mut self,
        plan: &Plan,
        steps: &[StepId],
        rec: &mut super::timing::Recorder,
    ) -> Result<()> {
        let inline = self.inline;
        let mut run = || {
            for &i in steps {
                let t0 = web_time::Instant::now();
                self.dispatch_here(plan, &[i])?;
                rec.host(
                    super::timing::SpanKind::Dispatch,
                    Some(i),
                    Vec::new(),
                    Device::Cpu,
                    t0,
                );
            }
            Ok(())
        };
        if inline {
            run()
        } else {
            in_pool(run)
        }
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

/// Where a dispatch's operands lie (the output's arena slot, each input in the arena, a
/// constant or a variable, or placed in its run of the output), found once per plan: the
/// one place cpu:0 locates operands. An error names what the memory plan got wrong, or the
/// kernel that has no CPU implementation.
fn resolve(
    plan: &Plan,
    vars: &HashMap<ValueId, Arc<RwLock<Vec<u32>>>>,
    arena_words: usize,
    kernel: &Kernel,
    inputs: &[ValueId],
    output: ValueId,
) -> Result<StepAt> {
    if !kernel.has_cpu() {
        return Err(Error::Placement {
            node: plan.values[output].name.clone(),
            op: kernel.describe(),
            requested: "cpu:0".into(),
            message: "this kernel has no CPU implementation; place it on a GPU".into(),
        });
    }
    let outside = |v: ValueId| Error::Internal(format!("value {v} lies outside the cpu arena"));
    let offsets = plan
        .memory(Device::Cpu)
        .map(|m| &m.offsets)
        .ok_or_else(|| Error::Internal("the plan has no cpu memory plan".into()))?;
    let slot = |root: ValueId| {
        offsets
            .get(&root)
            .map(|&o| (o / 4) as usize)
            .ok_or_else(|| Error::Internal(format!("value {root} has no cpu arena slot")))
    };
    let out_off = slot(plan.root(output))?;
    let out_len = plan.values[output].shape.numel();
    let out_end = out_off
        .checked_add(out_len)
        .filter(|&e| e <= arena_words)
        .ok_or_else(|| outside(output))?;
    // Inputs planned into their runs of the output (a batch-1 concatenation's).
    let starts = kernel
        .as_dyn()
        .input_runs()
        .filter(|s| s.len() == inputs.len());
    let mut copies = Vec::new();
    let mut at = Vec::with_capacity(inputs.len());
    for (j, &v) in inputs.iter().enumerate() {
        let root = plan.root(v);
        let n = plan.values[v].shape.numel();
        if let Some(starts) = &starts {
            if starts[j].checked_add(n).is_none_or(|e| e > out_len) {
                return Err(Error::Internal(format!(
                    "input {j} of {} runs past its output",
                    kernel.describe()
                )));
            }
            if root == v && slot(root).ok() == out_off.checked_add(starts[j]) {
                at.push(InAt::Placed);
                continue;
            }
            copies.push((j, starts[j], n));
        }
        at.push(match &plan.values[root].source {
            Source::Constant(_) => InAt::Constant(root),
            Source::Variable { name, .. } => InAt::Variable(
                vars.get(&root)
                    .ok_or_else(|| {
                        Error::Internal(format!("variable '{name}' has no cpu storage"))
                    })?
                    .clone(),
            ),
            _ => {
                let off = slot(root)?;
                if off.checked_add(n).is_none_or(|e| e > arena_words) {
                    return Err(outside(v));
                }
                if off == out_off && n == out_len {
                    InAt::Output
                } else if off + n <= out_off || off >= out_end {
                    InAt::Arena(off, n)
                } else {
                    return Err(Error::Internal(format!(
                        "input value {v} overlaps the output {output} of {} in the cpu arena",
                        kernel.describe()
                    )));
                }
            }
        });
    }
    let placed = at.iter().any(|i| matches!(i, InAt::Placed));
    let constants: Vec<Option<&[u32]>> = at
        .iter()
        .map(|i| match i {
            InAt::Constant(root) => match &plan.values[*root].source {
                Source::Constant(t) => Some(t.words()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let prepared = if !placed && constants.iter().any(Option::is_some) {
        kernel.prepare_cpu(&constants)
    } else {
        None
    };
    Ok(StepAt {
        out_off,
        out_len,
        inputs: at,
        reserve: plan.values[output].bytes() >= RESERVE_FROM,
        copies: placed.then_some(copies),
        prepared,
    })
}

/// Run one dispatch whose operands [`resolve`] placed, writing straight into the output's
/// arena slot, which the memory plan keeps disjoint from every input except one it is
/// written in place over.
fn run_resolved(
    arena: &mut [u32],
    plan: &Plan,
    kernel: &Kernel,
    output: ValueId,
    at: &StepAt,
) -> Result<()> {
    if at.reserve {
        reserve_output(plan, kernel, output)?;
    }
    // The arena was allocated at its planned size before the first dispatch; a shorter one
    // means it was not, and slicing would panic.
    if at.out_off + at.out_len > arena.len() {
        return Err(Error::Internal(format!(
            "value {output} lies outside the cpu arena"
        )));
    }
    let guards: Vec<RwLockReadGuard<'_, Vec<u32>>> = at
        .inputs
        .iter()
        .filter_map(|i| match i {
            InAt::Variable(words) => Some(words.read().unwrap_or_else(PoisonError::into_inner)),
            _ => None,
        })
        .collect();
    let (below, rest) = arena.split_at_mut(at.out_off);
    let (out, above) = rest.split_at_mut(at.out_len);
    let out_end = at.out_off + at.out_len;
    let mut held = guards.iter();
    let ins = at
        .inputs
        .iter()
        .map(|i| match i {
            InAt::Constant(root) => match &plan.values[*root].source {
                Source::Constant(t) => Ok(CpuIn::Words(t.words())),
                _ => Err(Error::Internal(format!("value {root} is not a constant"))),
            },
            InAt::Variable(_) => held
                .next()
                .map(|g| CpuIn::Words(g))
                .ok_or_else(|| Error::Internal("a variable input lost its lock".into())),
            InAt::Arena(off, n) if *off < at.out_off => Ok(CpuIn::Words(&below[*off..*off + n])),
            InAt::Arena(off, n) => Ok(CpuIn::Words(&above[off - out_end..off - out_end + n])),
            InAt::Output | InAt::Placed => Ok(CpuIn::Output),
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(copies) = &at.copies {
        for &(j, start, n) in copies {
            let src = match ins.get(j) {
                Some(CpuIn::Words(w)) => w.get(..n),
                _ => None,
            };
            let (Some(src), Some(dst)) = (src, out.get_mut(start..start + n)) else {
                return Err(Error::Internal(format!(
                    "input {j} of {} is neither placed in its output nor apart from it",
                    kernel.describe()
                )));
            };
            dst.copy_from_slice(src);
        }
        return Ok(());
    }
    match &at.prepared {
        Some(p) => kernel.run_cpu_prepared(&ins, out, p),
        None => kernel.run_cpu_into(&ins, out),
    }
}

/// Reserve (and free) the output's size, so that a kernel without a fast path, which
/// allocates its result infallibly, fails here with an error naming the node instead.
fn reserve_output(plan: &Plan, kernel: &Kernel, output: ValueId) -> Result<()> {
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
        })
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

/// `f` on a worker of rayon's pool, so the kernels' parallel loops start on a running
/// thread instead of each injecting a job and blocking on a latch (docs/performance.md).
fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        f()
    } else {
        rayon::join(|| warm(f), || ()).0
    }
}

thread_local! {
    /// Whether this worker is running a run's steps (it never spins for another run).
    static OWNER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` with the pool's other workers spinning briefly, as onnxruntime's and OpenMP's pools
/// do, so a run's steps do not wake them one by one; bounded so that a shared machine loses
/// nothing ([`SPIN_IDLE`], [`CONTENDED`]; docs/performance.md, "Beside other work").
/// `WGFLOW_NO_SPIN` (set to anything, read at the first run) turns spinning off.
fn warm<R>(f: impl FnOnce() -> R) -> R {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // Read once: an environment lookup locks and allocates, and this runs per run.
    static NO_SPIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let no_spin = *NO_SPIN.get_or_init(|| std::env::var_os("WGFLOW_NO_SPIN").is_some());
    if rayon::current_num_threads() < 2 || no_spin || contended() {
        return f();
    }
    let done = Arc::new(AtomicBool::new(false));
    let me = rayon::current_thread_index();
    let flag = done.clone();
    rayon::spawn_broadcast(move |ctx| {
        if Some(ctx.index()) == me || OWNER.get() {
            return;
        }
        spin(&flag);
    });
    // A run started on a worker that is waiting inside another run's steps (it stole the
    // job) leaves that worker the owner it was.
    let was = OWNER.replace(true);
    struct Stop(Arc<AtomicBool>, bool);
    impl Drop for Stop {
        fn drop(&mut self) {
            OWNER.set(self.1);
            self.0.store(true, Ordering::Release);
        }
    }
    let _stop = Stop(done, was);
    f()
}

/// How long a spinning worker waits for work before it parks: longer than the gap between
/// two parallel kernels of a run (a few microseconds of scheduling, or a small serial
/// kernel), far shorter than a serial stretch it would only burn a core through.
const SPIN_IDLE: std::time::Duration = std::time::Duration::from_micros(250);

/// A gap this long between two checks of a spinning loop (a few microseconds apart when
/// the worker keeps its core) means the OS ran something else on the core: spinning there
/// only delays that program and, through it, this run.
const DESCHEDULED: std::time::Duration = std::time::Duration::from_micros(1000);

/// How long no worker spins after one was descheduled; the next run after that tries again,
/// so spinning comes back once the other program is done.
const CONTENDED: std::time::Duration = std::time::Duration::from_millis(100);

/// When a spinning worker was last descheduled, in microseconds since [`epoch`] (0: never).
static DESCHEDULED_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn since_epoch(t: Instant) -> u64 {
    (t.saturating_duration_since(epoch()).as_micros() as u64).max(1)
}

/// Whether a spinning worker was descheduled within the last [`CONTENDED`].
fn contended() -> bool {
    let at = DESCHEDULED_AT.load(std::sync::atomic::Ordering::Relaxed);
    within_window(at, since_epoch(Instant::now()))
}

/// Whether `now` is within [`CONTENDED`] of a descheduling at `at` (0: none), both in
/// microseconds since [`epoch`].
fn within_window(at: u64, now: u64) -> bool {
    at != 0 && now.saturating_sub(at) < CONTENDED.as_micros() as u64
}

/// Run the pool's jobs until `done`, [`SPIN_IDLE`] passes without one, or the worker finds
/// it was descheduled. Every 64 empty rounds it checks the clock and yields its core to any
/// other runnable thread (`sched_yield`, about a microsecond when there is none).
fn spin(done: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering;
    let mut worked = Instant::now();
    let mut checked = worked;
    let mut rounds = 0u32;
    while !done.load(Ordering::Acquire) {
        if rayon::yield_now() == Some(rayon::Yield::Executed) {
            worked = Instant::now();
            checked = worked;
            continue;
        }
        rounds = rounds.wrapping_add(1);
        if !rounds.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        if now - checked > DESCHEDULED {
            DESCHEDULED_AT.store(since_epoch(now), Ordering::Relaxed);
            return;
        }
        if now - worked > SPIN_IDLE {
            return;
        }
        // The yield is inside the next check's gap: a program that takes the core now
        // shows up as descheduling.
        checked = now;
        std::thread::yield_now();
    }
}

impl CpuPlan {
    fn dispatch_here(&mut self, plan: &Plan, steps: &[StepId]) -> Result<()> {
        for &i in steps {
            let step = &plan.steps[i];
            let StepKind::Dispatch { kernel, inputs } = &step.kind else {
                return Err(Error::Internal(format!("step {i} is not a dispatch")));
            };
            if let Some(Some(at)) = self.steps.get(i.index()) {
                run_resolved(&mut self.arena, plan, kernel, step.output, at)?;
            } else {
                // Not resolvable when the plan was prepared: resolving again gives the error.
                let words = self.arena.len();
                let at = resolve(plan, &self.vars, words, kernel, inputs, step.output)?;
                run_resolved(&mut self.arena, plan, kernel, step.output, &at)?;
            }
        }
        Ok(())
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A spinning worker parks on its own when no work comes, even if the run goes on: the
    /// pool never holds a core through a long serial stretch or an idle session.
    #[test]
    fn a_worker_without_work_stops_spinning() {
        let done = AtomicBool::new(false);
        let t = Instant::now();
        spin(&done);
        let took = t.elapsed();
        assert!(!done.load(Ordering::Relaxed));
        assert!(took >= SPIN_IDLE || contended(), "returned after {took:?}");
    }

    /// Being descheduled keeps every worker from spinning for a while, and only for a while.
    #[test]
    fn descheduling_pauses_spinning_for_a_window() {
        let window = CONTENDED.as_micros() as u64;
        let at = 5_000_000;
        assert!(within_window(at, at));
        assert!(within_window(at, at + window - 1));
        assert!(!within_window(at, at + window));
        assert!(!within_window(0, at));
        // A clock read before the descheduling was stored still counts as inside it.
        assert!(within_window(at, at - 10));
    }
}
