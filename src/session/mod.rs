//! Sessions: compile a graph for a set of fetches (cached per signature), then run it.

use crate::backend::timing::Recorder;
use crate::backend::{self, Created, Prepared, VarStore};
use crate::compile::{self, Plan, Target};
use crate::device::{Device, DeviceLimits};
use crate::graph::{Binding, Graph, NodeId, Tensor};
use crate::id::IdVec;
use crate::ops::random::RUN_COUNTER;
use crate::ops::Leaf;
use crate::ops::Op;
use crate::trace::{RunMetadata, RunOptions};

mod checkpoint;
use crate::{Error, HostTensor, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// How a session places and compiles.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// When a scope names a device that is not visible, place the node on the default device
    /// (and log a warning) instead of failing.
    pub soft_placement: bool,
    /// Log every node's device at `info` level when a plan is compiled (target `wgflow::placement`).
    pub log_device_placement: bool,
    /// GPU indices this session may use; `None` reads `WGFLOW_VISIBLE_DEVICES`, and if that
    /// is unset every GPU is visible. `cpu:0` is always visible.
    pub visible_devices: Option<Vec<usize>>,
    /// Where unscoped nodes go; `None` means [`Device::best`] among the visible devices.
    pub default_device: Option<Device>,
    /// Fuse elementwise chains into single kernels (on by default).
    pub fuse: bool,
    /// Evaluate elementwise work whose inputs are all constants once, when a plan is
    /// compiled, instead of on every run (on by default; off to benchmark or test kernels on
    /// constant inputs).
    pub fold_constants: bool,
    /// How many bindings of run-time dimensions (distinct sets of sizes, such as batch sizes)
    /// keep their bound graph and compiled plans; when one more is run, the least recently
    /// run binding is dropped with its plans (and compiles again if it comes back). At least 1.
    pub max_bindings: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            soft_placement: false,
            log_device_placement: false,
            visible_devices: None,
            default_device: None,
            fuse: true,
            fold_constants: true,
            max_bindings: 8,
        }
    }
}

/// What a session has created so far; a second run of a cached plan leaves these unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub plans_compiled: u64,
    pub pipelines_created: u64,
    pub bind_groups_created: u64,
    pub buffers_created: u64,
    pub runs: u64,
    /// Host bytes cpu:0's kernels keep per plan, made once from its constants: quantized
    /// weights packed for the integer product's micro-kernel. Not part of a plan's memory
    /// figures, which count the arena and the constants as given.
    pub cpu_prepared_bytes: u64,
}

impl Counters {
    /// Count what the backends created for a plan.
    fn add(&mut self, created: Created) {
        self.pipelines_created += created.pipelines;
        self.bind_groups_created += created.bind_groups;
        self.buffers_created += created.buffers;
        self.cpu_prepared_bytes += created.prepared_bytes;
    }
}

/// Given the sizes of the run-time dimensions, a plan depends only on what is fetched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Signature {
    fetches: Vec<NodeId>,
}

struct Entry {
    plan: Arc<Plan>,
    prepared: Prepared,
}

/// The graph with one binding's sizes, and the plans compiled for it.
struct Bound {
    /// `None` for a graph without run-time dimensions: the session's own graph.
    graph: Option<Graph>,
    /// Nodes that need a size this binding lacks (no feed gave it).
    unbound: IdVec<NodeId, bool>,
    plans: HashMap<Signature, Entry>,
    /// The session's run count when it was last used (least recently used is dropped first).
    used: u64,
}

/// Runs a graph. Holds a snapshot of the graph taken at creation; tensors of the original
/// graph remain valid handles into it.
///
/// # Plans and run-time dimensions
///
/// A plan (placement, kernels, memory plan) is compiled the first time a list of fetches is
/// run and cached. A graph with dimensions known only at run time
/// ([`Graph::placeholder_dyn`]) is first **bound**: the sizes are read from the feeds (a
/// name shared by several placeholders must get one size), the graph is rebuilt with them
/// (every shape rule runs again, so a size that breaks a rule is an error then, naming the
/// op and the sizes), and plans are compiled and cached per binding and fetch list. A run
/// with sizes seen before reuses its plan and creates nothing ([`Session::counters`]); at
/// most [`SessionOptions::max_bindings`] bindings are kept, the least recently run dropped
/// first. Variables are shared by every binding.
pub struct Session {
    graph: Graph,
    target: Target,
    options: SessionOptions,
    cache: HashMap<Binding, Bound>,
    /// The binding of the latest run (what [`Session::plan`] reports on).
    last_binding: Binding,
    counters: Counters,
    /// The variables, shared by every plan.
    vars: VarStore,
    /// Runs so far that read the graph's run counter (stateful random ops), fed to the next.
    run_counter: u64,
}

impl Session {
    /// A session over `graph`'s current nodes.
    pub fn new(graph: &Graph, options: SessionOptions) -> Result<Session> {
        let visible = match &options.visible_devices {
            Some(v) => {
                backend::devices::check_visible(
                    v,
                    &format!("SessionOptions::visible_devices {v:?}"),
                )?;
                Some(v.clone())
            }
            None => backend::visible_gpus_from_env()?,
        };
        let all = backend::devices();
        let devices: Vec<(Device, DeviceLimits)> = all
            .into_iter()
            .filter(|d| match (d.device, &visible) {
                (Device::Gpu(i), Some(v)) => v.contains(&i),
                _ => true,
            })
            .map(|d| (d.device, d.limits))
            .collect();
        let default_device = match options.default_device {
            Some(d) if devices.iter().any(|(x, _)| *x == d) => d,
            Some(d) => {
                return Err(Error::Device {
                    spec: d.to_string(),
                    message: "the default device is not visible to this session".into(),
                })
            }
            None => backend::devices::best_of(visible.as_deref()),
        };
        let gpu_only_default = match options.default_device {
            None => devices.iter().map(|(d, _)| *d).find(|d| d.is_gpu()),
            Some(_) => None,
        };
        log::info!("wgflow session: default device {default_device}");
        Ok(Session {
            graph: graph.clone(),
            target: Target {
                devices,
                default_device,
                gpu_only_default,
                soft_placement: options.soft_placement,
                fuse: options.fuse,
                fold_constants: options.fold_constants,
            },
            options,
            cache: HashMap::new(),
            last_binding: Binding::default(),
            counters: Counters::default(),
            vars: VarStore::default(),
            run_counter: 0,
        })
    }

    /// The device unscoped nodes run on.
    pub fn default_device(&self) -> Device {
        self.target.default_device
    }

    /// What this session has created so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The graph snapshot this session runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Run: write `feeds` into their placeholders, compute only what `fetches` need, and
    /// return the fetched values in order.
    pub fn run(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        fetches: &[Tensor],
    ) -> Result<Vec<HostTensor>> {
        futures::executor::block_on(self.run_async(feeds, fetches))
    }

    /// [`Session::run`] with placeholders and fetches named by node name.
    pub fn run_named(
        &mut self,
        feeds: &[(&str, HostTensor)],
        fetches: &[&str],
    ) -> Result<Vec<HostTensor>> {
        let feeds = feeds
            .iter()
            .map(|(n, t)| Ok((self.lookup(n, true)?, t.clone())))
            .collect::<Result<Vec<_>>>()?;
        let fetches = fetches
            .iter()
            .map(|n| self.lookup(n, false))
            .collect::<Result<Vec<_>>>()?;
        self.run(&feeds, &fetches)
    }

    fn lookup(&self, name: &str, feed: bool) -> Result<Tensor> {
        self.graph.tensor(name).ok_or_else(|| {
            let message = "no node has this name".to_string();
            if feed {
                Error::Feed {
                    kind: crate::FeedKind::Name,
                    name: name.into(),
                    message,
                }
            } else {
                Error::Fetch {
                    name: name.into(),
                    message,
                }
            }
        })
    }

    /// The asynchronous form of [`Session::run`]: the returned future resolves when the
    /// fetched values are on the host. (On native backends it drives the device while polled.)
    pub async fn run_async(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        fetches: &[Tensor],
    ) -> Result<Vec<HostTensor>> {
        self.execute(feeds, fetches, true).await
    }

    /// [`Session::run`], optionally traced: returns the fetched values and what the run did
    /// ([`RunMetadata`]: per step its kernel, fused nodes, device, dispatch size, bytes and
    /// duration). With `options.trace` off the run takes the untraced path and the metadata
    /// holds only the plan and the wall time.
    ///
    /// ```no_run
    /// use wgflow::{trace::RunOptions, DType, Graph, HostTensor, Session, SessionOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut g = Graph::new();
    /// let x = g.placeholder("x", [3], DType::F32)?;
    /// let y = g.relu(x)?;
    /// let mut s = Session::new(&g, SessionOptions::default())?;
    /// let feed = HostTensor::from([1.0f32, -9.0, 3.0]);
    /// let (out, meta) = s.run_with(&[(x, feed)], &[y], &RunOptions { trace: true })?;
    /// std::fs::write("trace.json", meta.chrome_trace_json())?;
    /// # Ok(()) }
    /// ```
    pub fn run_with(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        fetches: &[Tensor],
        options: &RunOptions,
    ) -> Result<(Vec<HostTensor>, RunMetadata)> {
        let start = web_time::Instant::now();
        let mut rec = options.trace.then(Recorder::default);
        let out =
            futures::executor::block_on(self.execute_traced(feeds, fetches, true, rec.as_mut()))?;
        let wall = start.elapsed();
        let plan = self.plan(fetches)?;
        Ok((out, RunMetadata::from_recorder(plan, wall, rec)))
    }

    /// Compute `targets` and wait for the devices, without copying anything back
    /// (TensorFlow's target nodes). Useful for timing, and when only side effects matter.
    pub fn run_targets(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        targets: &[Tensor],
    ) -> Result<()> {
        futures::executor::block_on(self.execute(feeds, targets, false)).map(|_| ())
    }

    async fn execute(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        fetches: &[Tensor],
        read_back: bool,
    ) -> Result<Vec<HostTensor>> {
        self.execute_traced(feeds, fetches, read_back, None).await
    }

    async fn execute_traced(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        fetches: &[Tensor],
        read_back: bool,
        trace: Option<&mut Recorder>,
    ) -> Result<Vec<HostTensor>> {
        let counter;
        let (mut fed, binding) = self.check_feeds(feeds)?;
        let sig = self.signature(fetches)?;
        self.ensure_compiled(&binding, &sig, fetches)?;
        let entry = self
            .cache
            .get_mut(&binding)
            .and_then(|b| b.plans.get_mut(&sig))
            .ok_or_else(|| Error::Internal("compiled plan missing from the cache".into()))?;
        let reads_counter = entry.plan.feeds.iter().any(|(n, _)| n == RUN_COUNTER);
        if reads_counter {
            counter = run_counter_value(&self.graph, self.run_counter)?;
            fed.insert(RUN_COUNTER.to_string(), &counter);
        }
        for (name, _) in &entry.plan.feeds {
            if !fed.contains_key(name) {
                let place = self
                    .graph
                    .tensor(name)
                    .and_then(|t| self.graph.node(t).ok())
                    .map(|n| format!(" (built at {})", n.built_at()))
                    .unwrap_or_default();
                return Err(Error::Feed {
                    kind: crate::FeedKind::Missing,
                    name: name.clone(),
                    message: format!("placeholder{place} is needed by the fetches but was not fed"),
                });
            }
        }
        let out = backend::execute_traced(&entry.plan, &mut entry.prepared, &fed, read_back, trace)
            .await?;
        // Only a run that executed advances the counter, so that the k-th run of every
        // session draws the same numbers however many runs failed before it.
        if reads_counter {
            self.run_counter += 1;
        }
        self.counters.runs += 1;
        Ok(out)
    }

    /// The current value of variable `v`, copied to the host. A variable no run has used
    /// yet is initialized first (on the device it would run on).
    pub fn read_variable(&mut self, v: Tensor) -> Result<HostTensor> {
        let (name, _) = self.ensure_variable(v)?;
        self.vars.read(&name)?.ok_or_else(|| {
            Error::Internal(format!(
                "variable '{name}' has no storage after initialization"
            ))
        })
    }

    /// Overwrite variable `v` with `value` (same shape and dtype). Every plan of this session
    /// sees the new value from its next run on.
    pub fn write_variable(&mut self, v: Tensor, value: &HostTensor) -> Result<()> {
        self.write_variables(&[(v, value)])
    }

    /// Overwrite several variables, all or nothing: every name, shape, dtype and placement is
    /// checked, and the storage of every variable that has none is allocated, before any value
    /// is written. A variable without storage is created from its value: its initializer never
    /// runs.
    pub fn write_variables(&mut self, values: &[(Tensor, &HostTensor)]) -> Result<()> {
        let mut checked = Vec::with_capacity(values.len());
        for &(v, value) in values {
            let (name, device) = self.variable_device(v)?;
            let node = self.graph.node(v)?;
            if &node.shape != value.shape() || node.dtype != value.dtype() {
                return Err(Error::Feed {
                    kind: if node.dtype != value.dtype() {
                        crate::FeedKind::DType
                    } else {
                        crate::FeedKind::Shape
                    },
                    name,
                    message: format!(
                        "the variable is {} {}, the value {} {}",
                        node.dtype,
                        node.shape,
                        value.dtype(),
                        value.shape()
                    ),
                });
            }
            checked.push((name, device, value));
        }
        let list: Vec<(&str, Device, &HostTensor)> = checked
            .iter()
            .map(|(n, d, v)| (n.as_str(), *d, *v))
            .collect();
        let mut created = Created::default();
        let written = self.vars.write_all(&list, &mut created);
        self.counters.add(created);
        written
    }

    /// The names of the variables that have storage in this session (those a run, read or
    /// write has needed), sorted.
    pub fn initialized_variables(&self) -> Vec<String> {
        self.vars.names()
    }

    /// Write `variables` (or, with `None`, every variable of the graph) to a `.safetensors`
    /// checkpoint at `path`, each named by its node name. A variable no run, read or write
    /// has used yet is initialized first (its initializer runs, as for
    /// [`Session::read_variable`]), so a fresh session saves the initial values and the file
    /// always restores the whole graph. Nothing to save (no variables) is an error, never an
    /// empty file.
    ///
    /// The file is replaced atomically: a reader, a crash or another save to the same path
    /// sees the old checkpoint or the whole new one, never a mix or nothing; when `save`
    /// returns `Ok` the file is on disk (fsynced, its directory too). A `path` that is a
    /// symbolic link, a directory or a special file is refused. See [`crate::checkpoint`].
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{Graph, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let w = g.variable("w", [1.0f32, 2.0])?;
    /// let mut s = Session::new(&g, SessionOptions::default())?;
    /// let path = std::env::temp_dir().join(format!("wgflow-doc-{}.safetensors", std::process::id()));
    /// s.save(&path, Some(&[w]))?;
    /// let mut fresh = Session::new(&g, SessionOptions::default())?;
    /// fresh.restore(&path)?;
    /// assert_eq!(fresh.read_variable(w)?.to_vec::<f32>()?, [1.0, 2.0]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok(()) }
    /// ```
    pub fn save(
        &mut self,
        path: impl AsRef<std::path::Path>,
        variables: Option<&[Tensor]>,
    ) -> Result<()> {
        checkpoint::save(self, path.as_ref(), variables)
    }

    /// Overwrite every variable of the graph with its tensor in the checkpoint at `path`.
    /// The file must hold exactly the graph's variables, with their dtypes and shapes; on any
    /// error no variable is changed. See [`crate::checkpoint`].
    pub fn restore(&mut self, path: impl AsRef<std::path::Path>) -> Result<()> {
        checkpoint::restore(self, path.as_ref(), None)
    }

    /// Overwrite `variables` with their tensors in the checkpoint at `path`, ignoring the
    /// file's other tensors (each listed variable must be in the file). On any error no
    /// variable is changed.
    pub fn restore_only(
        &mut self,
        path: impl AsRef<std::path::Path>,
        variables: &[Tensor],
    ) -> Result<()> {
        checkpoint::restore(self, path.as_ref(), Some(variables))
    }

    /// Variable `v`'s name and device, creating its storage if it has none.
    fn ensure_variable(&mut self, v: Tensor) -> Result<(String, Device)> {
        let (name, device) = self.variable_device(v)?;
        if !self.vars.contains(&name) {
            let node = self.graph.node(v)?;
            let crate::ops::Op::Leaf(Leaf::Variable(init)) = &node.op else {
                return Err(Error::Internal(format!("'{name}' is not a variable")));
            };
            let mut created = Created::default();
            self.vars
                .get_or_init(&name, device, &node.shape, node.dtype, init, &mut created)?;
            self.counters.add(created);
        }
        Ok((name, device))
    }

    /// Variable `v`'s name and the device its storage is (or would be) on.
    fn variable_device(&self, v: Tensor) -> Result<(String, Device)> {
        let what = |message: String| Error::Fetch {
            name: format!("#{}", v.index()),
            message,
        };
        if !self.graph.owns(v) {
            return Err(what(
                "the tensor belongs to another graph (or was built after this session was created)"
                    .into(),
            ));
        }
        let node = self.graph.node(v)?;
        if !node.op.is_variable() {
            return Err(Error::Fetch {
                name: node.name.clone(),
                message: format!("is a {}, not a variable", node.op.name()),
            });
        }
        if let Some(slot) = self.vars.slot(&node.name) {
            return Ok((node.name.clone(), slot.device));
        }
        let placed = compile::place::place(&self.graph, &[v.node()], &self.target)?;
        let device = placed
            .device
            .get(&v.node())
            .copied()
            .unwrap_or(self.target.default_device);
        Ok((node.name.clone(), device))
    }

    /// The compiled plan for `fetches` (compiling it if needed): placement, schedule, kernels
    /// and memory. `plan.feeds` lists the placeholders a run must feed.
    ///
    /// A graph with run-time dimensions is planned with the sizes of the latest run (an error
    /// before the first run; see [`Session::plan_with_dims`]).
    pub fn plan(&mut self, fetches: &[Tensor]) -> Result<Arc<Plan>> {
        let binding = self.last_binding.clone();
        let sig = self.signature(fetches)?;
        self.ensure_compiled(&binding, &sig, fetches)?;
        self.cache
            .get(&binding)
            .and_then(|b| b.plans.get(&sig))
            .map(|e| e.plan.clone())
            .ok_or_else(|| Error::Internal("compiled plan missing from the cache".into()))
    }

    /// [`Session::plan`] with the run-time dimensions read from `feeds`, as a run with them
    /// would bind them (the feeds are checked, not copied).
    pub fn plan_for(
        &mut self,
        feeds: &[(Tensor, HostTensor)],
        fetches: &[Tensor],
    ) -> Result<Arc<Plan>> {
        let (_, binding) = self.check_feeds(feeds)?;
        self.last_binding = binding;
        self.plan(fetches)
    }

    /// [`Session::plan`] with the run-time dimensions given by name (`[("batch", 64)]`), as
    /// [`Graph::dim_names`] lists them.
    pub fn plan_with_dims(
        &mut self,
        fetches: &[Tensor],
        dims: &[(&str, usize)],
    ) -> Result<Arc<Plan>> {
        self.last_binding = self.graph.binding_named(dims)?;
        self.plan(fetches)
    }

    /// The plan `fetches` would run, compiled but not prepared: no device buffers, pipelines
    /// or bind groups are created and nothing is cached, so tools that only print a plan
    /// (`wgflow plan`, `wgflow dot`) cost no device memory. Errors found only while
    /// preparing (shader validation, dispatch limits) show up at [`Session::plan`] or a run.
    ///
    /// A graph with run-time dimensions needs their sizes: [`Session::compile_only_with_dims`].
    pub fn compile_only(&self, fetches: &[Tensor]) -> Result<Plan> {
        self.compile_only_with_dims(fetches, &[])
    }

    /// [`Session::compile_only`] with the run-time dimensions given by name (`[("batch", 64)]`).
    pub fn compile_only_with_dims(
        &self,
        fetches: &[Tensor],
        dims: &[(&str, usize)],
    ) -> Result<Plan> {
        self.signature(fetches)?;
        if !self.graph.has_unknown_dims() {
            return compile::compile(&self.graph, fetches, &self.target);
        }
        let binding = self.graph.binding_named(dims)?;
        let (graph, unbound) = self.graph.bind(&binding)?;
        self.check_bound(&binding, &unbound, fetches)?;
        compile::compile(&graph, fetches, &self.target)
    }

    /// A fetch that needs a size no feed gave is an error naming the dimensions.
    fn check_bound(
        &self,
        binding: &Binding,
        unbound: &IdVec<NodeId, bool>,
        fetches: &[Tensor],
    ) -> Result<()> {
        let mut stack: Vec<NodeId> = fetches.iter().map(|t| t.node()).collect();
        let mut seen = IdVec::filled(false, unbound.len());
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut seen[n], true) {
                continue;
            }
            if unbound[n] {
                let missing: Vec<&str> = self
                    .graph
                    .dim_names()
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| binding.0.get(*k).copied().flatten().is_none())
                    .map(|(_, n)| n.as_str())
                    .collect();
                let node = &self.graph.g[n];
                return Err(Error::Feed {
                    kind: crate::FeedKind::Missing,
                    name: node.name.clone(),
                    message: format!(
                        "needs the size of run-time dimension(s) {} (built at {}): feed a placeholder that has them",
                        missing.join(", "),
                        node.built_at()
                    ),
                });
            }
            stack.extend(self.graph.g[n].inputs.iter().copied());
        }
        Ok(())
    }

    fn placeholder_node(&self, t: Tensor) -> Result<&crate::graph::Node> {
        if !self.graph.owns(t) {
            return Err(Error::Feed {
                kind: crate::FeedKind::Name,
                name: format!("#{}", t.index()),
                message: "the tensor belongs to another graph (or was built after this session was created)".into(),
            });
        }
        let node = self.graph.node(t)?;
        if node.op != Op::Leaf(Leaf::Placeholder) {
            return Err(Error::Feed {
                kind: crate::FeedKind::Name,
                name: node.name.clone(),
                message: format!(
                    "only placeholders can be fed; this node is a {}",
                    node.op.name()
                ),
            });
        }
        Ok(node)
    }

    /// The feeds by placeholder name, borrowed (a run copies feed data only into the device),
    /// and the sizes they give the run-time dimensions.
    fn check_feeds<'f>(
        &self,
        feeds: &'f [(Tensor, HostTensor)],
    ) -> Result<(HashMap<String, &'f HostTensor>, Binding)> {
        let mut fed = HashMap::new();
        let mut sized = Vec::new();
        for (t, value) in feeds {
            let node = self.placeholder_node(*t)?;
            if node.sym.is_some() && value.dtype() == node.dtype {
                sized.push((t.node(), value.shape()));
            } else if value.shape() != &node.shape || value.dtype() != node.dtype {
                return Err(Error::Feed {
                    kind: if value.dtype() != node.dtype {
                        crate::FeedKind::DType
                    } else {
                        crate::FeedKind::Shape
                    },
                    name: node.name.clone(),
                    message: format!(
                        "expected {} {}, got {} {}",
                        node.dtype,
                        crate::graph::dims_text(&self.graph.dims(*t)?),
                        value.dtype(),
                        value.shape()
                    ),
                });
            }
            if node.name == RUN_COUNTER {
                return Err(Error::Feed {
                    kind: crate::FeedKind::Value,
                    name: node.name.clone(),
                    message: "the session feeds the run counter of stateful random ops itself"
                        .into(),
                });
            }
            if fed.insert(node.name.clone(), value).is_some() {
                return Err(Error::Feed {
                    kind: crate::FeedKind::Value,
                    name: node.name.clone(),
                    message: "fed twice".into(),
                });
            }
        }
        let binding = self.graph.binding_of(&sized)?;
        Ok((fed, binding))
    }

    fn signature(&self, fetches: &[Tensor]) -> Result<Signature> {
        for &f in fetches {
            if !self.graph.owns(f) {
                return Err(Error::Fetch {
                    name: format!("#{}", f.index()),
                    message: "the tensor belongs to another graph (or was built after this session was created)".into(),
                });
            }
        }
        Ok(Signature {
            fetches: fetches.iter().map(|t| t.node()).collect(),
        })
    }

    fn ensure_compiled(
        &mut self,
        binding: &Binding,
        sig: &Signature,
        fetches: &[Tensor],
    ) -> Result<()> {
        let now = self.counters.runs;
        if !self.cache.contains_key(binding) {
            let (graph, unbound) = if self.graph.has_unknown_dims() {
                let (g, unbound) = self.graph.bind(binding)?;
                (Some(g), unbound)
            } else {
                (None, IdVec::filled(false, self.graph.len()))
            };
            while self.cache.len() >= self.options.max_bindings.max(1) {
                let oldest = self
                    .cache
                    .iter()
                    .min_by_key(|(_, b)| b.used)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => self.cache.remove(&k),
                    None => break,
                };
            }
            self.cache.insert(
                binding.clone(),
                Bound {
                    graph,
                    unbound,
                    plans: HashMap::new(),
                    used: now,
                },
            );
        }
        self.last_binding = binding.clone();
        let bound = self
            .cache
            .get_mut(binding)
            .ok_or_else(|| Error::Internal("bound graph missing from the cache".into()))?;
        bound.used = now;
        if bound.plans.contains_key(sig) {
            return Ok(());
        }
        let bound = self
            .cache
            .get(binding)
            .ok_or_else(|| Error::Internal("bound graph missing from the cache".into()))?;
        self.check_bound(binding, &bound.unbound, fetches)?;
        let graph = bound.graph.as_ref().unwrap_or(&self.graph);
        let plan = compile::compile(graph, fetches, &self.target)?;
        if self.options.log_device_placement {
            for (name, d) in &plan.placement {
                log::info!(target: "wgflow::placement", "{name}: {d}");
            }
        }
        self.counters.plans_compiled += 1;
        let mut created = Created::default();
        let prepared = backend::prepare(&plan, &mut self.vars, &mut created);
        // Counted also when preparing failed partway: what was created stays alive in the
        // shared variable store, or was dropped; either way the counters say it was made.
        self.counters.add(created);
        let prepared = prepared?;
        self.cache
            .get_mut(binding)
            .ok_or_else(|| Error::Internal("bound graph missing from the cache".into()))?
            .plans
            .insert(
                sig.clone(),
                Entry {
                    plan: Arc::new(plan),
                    prepared,
                },
            );
        Ok(())
    }
}

/// The run counter's feed for run `k`: `[k_lo, k_hi]`, checked against the graph's node of
/// that name (a user could have built one of another type).
fn run_counter_value(graph: &Graph, k: u64) -> Result<HostTensor> {
    let value = HostTensor::from([k as u32, (k >> 32) as u32]);
    match graph
        .tensor(RUN_COUNTER)
        .map(|t| graph.node(t))
        .transpose()?
    {
        Some(n) if n.shape == *value.shape() && n.dtype == value.dtype() => Ok(value),
        _ => Err(Error::Feed {
            kind: crate::FeedKind::Value,
            name: RUN_COUNTER.into(),
            message: format!(
                "is reserved for the run counter, a {} {} placeholder",
                value.dtype(),
                value.shape()
            ),
        }),
    }
}
