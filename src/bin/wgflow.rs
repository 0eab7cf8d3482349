//! The wgflow command-line tool.

use clap::{Args, Parser, Subcommand};
use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wgflow::compile::{Plan, StepKind};
use wgflow::ops::Leaf;
use wgflow::ops::Op;
use wgflow::{Device, Error, Graph, HostTensor, Session, SessionOptions, Tensor};

#[derive(Parser)]
#[command(
    name = "wgflow",
    version,
    about = "Static dataflow graphs of tensor ops on WebGPU (wgpu) and the CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every physical device (each wgpu adapter as gpu:N, then cpu:0), best first.
    Devices {
        /// Show only the devices visible under WGFLOW_VISIBLE_DEVICES.
        #[arg(long)]
        visible: bool,
        /// Print a JSON array of objects instead of the table (limits a device does not
        /// have are null).
        #[arg(long)]
        json: bool,
    },
    /// Check a graph file (every builder check runs again) without touching any device;
    /// print a one-line summary, or the error and exit 1.
    Validate {
        /// The graph file (JSON written by Graph::save).
        #[arg(value_name = "GRAPH.json")]
        graph: PathBuf,
    },
    /// Run a saved graph: read feeds from .npy files, write fetches as .npy, print a summary.
    Run {
        #[command(flatten)]
        common: GraphArgs,
        /// Feed a placeholder from a NumPy file: NAME=FILE.npy (repeatable). Every
        /// placeholder the fetches need must be fed.
        #[arg(long = "feed", value_name = "NAME=FILE.npy")]
        feeds: Vec<String>,
        /// Restore the graph's variables from a checkpoint before running (a .safetensors
        /// file of Session::save or Python's safetensors: one tensor per variable, by name,
        /// of its dtype and shape; the file must hold exactly the graph's variables).
        #[arg(long, value_name = "FILE.safetensors")]
        weights: Option<PathBuf>,
        /// Directory for the fetched values, one NAME.npy per fetch (characters other than
        /// letters, digits, '-', '_' and '.' become '_'; a clash gets a numeric suffix).
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
        /// Overwrite .npy files that already exist in the output directory.
        #[arg(long)]
        force: bool,
        /// Timed runs after the first (compiling) one; prints their median and minimum.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
    },
    /// Print the compiled plan: placement, schedule (kernels after fusion) and memory
    /// (peak, lower bound, no-reuse).
    Plan {
        #[command(flatten)]
        common: GraphArgs,
        /// Print the plan as a JSON object (placement, feeds, steps, memory per device).
        #[arg(long)]
        json: bool,
        /// Also write the memory plan as an SVG picture to this file.
        #[arg(long, value_name = "OUT.svg")]
        memory: Option<PathBuf>,
        /// Overwrite the --memory file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Run a saved graph several times with tracing and print time per graph node and per
    /// kernel kind (slowest first), with achieved GB/s and GFLOP/s, and the run time's
    /// median and minimum.
    Profile {
        #[command(flatten)]
        common: GraphArgs,
        /// Feed a placeholder from a NumPy file: NAME=FILE.npy (repeatable).
        #[arg(long = "feed", value_name = "NAME=FILE.npy")]
        feeds: Vec<String>,
        /// Traced runs to summarise (and untraced runs to time).
        #[arg(long, value_name = "N", default_value_t = 10,
              value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
        /// Untraced runs before measuring (the first one compiles and prepares the plan).
        #[arg(long, value_name = "N", default_value_t = 1)]
        warmup: u32,
        /// Write the last traced run as Chrome trace-event JSON (open in ui.perfetto.dev).
        #[arg(long, value_name = "OUT.json")]
        trace: Option<PathBuf>,
        /// Write the memory plan as an SVG picture.
        #[arg(long, value_name = "OUT.svg")]
        memory: Option<PathBuf>,
        /// Overwrite the --trace and --memory files if they exist.
        #[arg(long)]
        force: bool,
        /// Print the profile as JSON instead of the tables.
        #[arg(long)]
        json: bool,
    },
    /// Print the graph as Graphviz DOT, one cluster per device of the plan's placement
    /// (render with `dot -Tsvg`).
    Dot {
        #[command(flatten)]
        common: GraphArgs,
    },
}

#[derive(Args)]
struct GraphArgs {
    /// The graph file (JSON written by Graph::save).
    #[arg(value_name = "GRAPH.json")]
    graph: PathBuf,
    /// A node to fetch (repeatable). Default: the graph's sinks (nodes no other node uses).
    #[arg(long = "fetch", value_name = "NAME")]
    fetches: Vec<String>,
    /// Device for nodes without a device scope: gpu:N or cpu:0. Default: the best GPU, else cpu:0.
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Place nodes whose scope names a missing device on the default device instead of failing.
    #[arg(long)]
    soft_placement: bool,
}

/// The CLI's own errors (an existing output file, ...) are plain messages; the library's
/// errors keep their text.
type CliResult = Result<(), Box<dyn std::error::Error>>;

/// Set once a write to stdout failed because its reader went away (`wgflow ... | head -1`).
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Write to stdout; every line the CLI prints goes through here (never `print!`, which
/// panics on a closed pipe). A closed stdout is what `head` does on purpose, so it is not an
/// error: the rest of the output is dropped, the command still finishes its work (the
/// files of `run`, `--trace` and `--memory` are written) and exits with its own status,
/// 0 on success, without a message. Any other write error (`> /dev/full`) fails the command.
fn write_stdout(args: fmt::Arguments<'_>) -> CliResult {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(format!("cannot write to standard output: {e}").into()),
    }
}

/// `println!` through [`write_stdout`]: evaluates to a [`CliResult`].
macro_rules! outln {
    ($($arg:tt)*) => {
        write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that cannot panic: a closed or full stderr loses the message (there is
/// nowhere left to report it), not the command's work.
macro_rules! errln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Error messages are one line of bounded length even when they quote a huge argument
/// (a 100 kB `--fetch`, a path of the maximum length): at most this many characters.
const MAX_MESSAGE_CHARS: usize = 2000;

/// Input quoted in a message (a device spec, a node name) is cut to this many characters.
const MAX_QUOTED_CHARS: usize = 100;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // `try_parse` rather than `parse`: the help, version and usage-error texts are printed
    // here with handled writes, so a closed stdout or stderr cannot panic.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `print` writes the help and version to stdout, errors to stderr, as `parse`
            // would, and returns the write error that `parse` would have ignored too.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let result: CliResult = match cli.command {
        Command::Devices { visible, json } => devices(visible, json),
        Command::Validate { graph } => validate(&graph),
        Command::Run {
            common,
            feeds,
            weights,
            out,
            force,
            runs,
        } => run(
            &common,
            &RunArgs {
                feeds,
                weights,
                out,
                force,
                runs,
            },
        ),
        Command::Plan {
            common,
            json,
            memory,
            force,
        } => print_plan(&common, json, memory.as_deref(), force),
        Command::Profile {
            common,
            feeds,
            runs,
            warmup,
            trace,
            memory,
            force,
            json,
        } => profile::profile(
            &common,
            &feeds,
            &profile::Outputs {
                runs,
                warmup,
                trace,
                memory,
                force,
                json,
            },
        ),
        Command::Dot { common } => print_dot(&common),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("wgflow: {}", truncate(&e.to_string(), MAX_MESSAGE_CHARS));
            ExitCode::FAILURE
        }
    }
}

fn devices(visible: bool, json: bool) -> CliResult {
    let list = if visible {
        wgflow::visible_devices()?
    } else {
        wgflow::devices()
    };
    let best = wgflow::Device::best();
    if json {
        // null where the table prints '-': the device has no such limit.
        let limited = |x: u64| (limit(x) != "-").then_some(x);
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|d| {
                let l = &d.limits;
                serde_json::json!({
                    "device": d.device.to_string(),
                    "name": d.name,
                    "backend": d.backend,
                    "type": d.device_type,
                    "driver": d.driver,
                    "max_buffer_size": limited(l.max_buffer_size),
                    "max_storage_buffer_binding_size": limited(l.max_storage_buffer_binding_size),
                    "min_storage_buffer_offset_alignment": l.min_storage_buffer_offset_alignment,
                    "max_storage_buffers_per_shader_stage":
                        limited(l.max_storage_buffers_per_shader_stage as u64),
                    "max_compute_workgroups_per_dimension":
                        limited(l.max_compute_workgroups_per_dimension as u64),
                    "shader_f16": l.shader_f16,
                    "best": d.device == best,
                })
            })
            .collect();
        outln!("{:#}", serde_json::Value::Array(rows))?;
        return Ok(());
    }
    outln!(
        "{:<7} {:<34} {:<7} {:<10} {:>14} {:>14} {:>6} {:>6} {:>4}",
        "device",
        "name",
        "backend",
        "type",
        "max_buffer",
        "max_binding",
        "align",
        "bufs",
        "f16"
    )?;
    for d in &list {
        outln!(
            "{:<7} {:<34} {:<7} {:<10} {:>14} {:>14} {:>6} {:>6} {:>4}",
            d.device.to_string(),
            truncate(&d.name, 34),
            d.backend,
            d.device_type,
            limit(d.limits.max_buffer_size),
            limit(d.limits.max_storage_buffer_binding_size),
            d.limits.min_storage_buffer_offset_alignment,
            limit(d.limits.max_storage_buffers_per_shader_stage as u64),
            if d.limits.shader_f16 { "yes" } else { "no" },
        )?;
    }
    outln!("best: {best}")?;
    Ok(())
}

// Printing needs the compiled plan only: nothing is prepared on a device.
fn print_plan(args: &GraphArgs, json: bool, memory: Option<&Path>, force: bool) -> CliResult {
    if let Some(m) = memory {
        check_output(m, force)?;
    }
    let (session, fetches) = open(args)?;
    let plan = session.compile_only(&fetches)?;
    if let Some(m) = memory {
        write_output(m, plan.memory_svg().as_bytes(), force)?;
    }
    if json {
        outln!("{:#}", plan_json(&plan))?;
    } else {
        write_stdout(format_args!("{}", plan.describe()))?;
    }
    Ok(())
}

fn print_dot(args: &GraphArgs) -> CliResult {
    let (session, fetches) = open(args)?;
    let plan = session.compile_only(&fetches)?;
    write_stdout(format_args!(
        "{}",
        wgflow::trace::dot(session.graph(), &plan)
    ))?;
    Ok(())
}

/// Load the graph only: no adapter is enumerated and no session is made.
fn validate(path: &Path) -> CliResult {
    let graph = Graph::load(path)?;
    let placeholders = graph
        .nodes()
        .filter(|(_, n)| n.op == Op::Leaf(Leaf::Placeholder))
        .count();
    outln!(
        "{}: ok, nodes: {}, placeholders: {}, sinks: {}",
        path.display(),
        graph.len(),
        placeholders,
        sinks(&graph).len()
    )?;
    Ok(())
}

/// The plan as JSON for scripts: what [`Plan::describe`] prints, with numbers as numbers.
fn plan_json(plan: &Plan) -> serde_json::Value {
    use serde_json::json;
    let value = |v: usize| {
        let v = &plan.values[v];
        json!({
            "name": v.name,
            "dtype": v.dtype.to_string(),
            "shape": v.shape.dims(),
            "device": v.device.to_string(),
        })
    };
    let steps: Vec<serde_json::Value> = plan
        .steps
        .iter()
        .map(|st| {
            let (kind, kernel, inputs) = match &st.kind {
                StepKind::Dispatch { kernel, inputs } => {
                    ("dispatch", Some(kernel.describe()), inputs.clone())
                }
                StepKind::Transfer { src } => ("transfer", None, vec![*src]),
            };
            json!({
                "kind": kind,
                "device": st.device.to_string(),
                "kernel": kernel,
                "inputs": inputs.into_iter().map(value).collect::<Vec<_>>(),
                "output": value(st.output),
                "nodes": st.nodes,
            })
        })
        .collect();
    let memory: serde_json::Map<String, serde_json::Value> = plan
        .memory
        .iter()
        .map(|(d, m)| {
            (
                d.to_string(),
                json!({
                    "peak_bytes": m.peak_bytes,
                    "lower_bound_bytes": m.lower_bound_bytes,
                    "no_reuse_bytes": m.no_reuse_bytes,
                    "constant_bytes": m.constant_bytes,
                    "alignment": m.alignment,
                    "in_place_values": m.in_place.len(),
                }),
            )
        })
        .collect();
    let placement: Vec<serde_json::Value> = plan
        .placement
        .iter()
        .map(|(n, d)| json!({ "node": n, "device": d.to_string() }))
        .collect();
    json!({
        "devices": plan.devices().iter().map(Device::to_string).collect::<Vec<_>>(),
        "placement": placement,
        "feeds": plan.feeds.iter().map(|(_, v)| value(*v)).collect::<Vec<_>>(),
        "fetches": plan.fetches.iter().map(|&v| value(v)).collect::<Vec<_>>(),
        "dispatches": plan.dispatch_count(),
        "transfers": plan.transfer_count(),
        "steps": steps,
        "memory": memory,
    })
}

fn limit(x: u64) -> String {
    if x >= u32::MAX as u64 * 2 || x == u32::MAX as u64 {
        "-".into()
    } else {
        x.to_string()
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// Load the graph, make a session on the requested default device, resolve the fetches.
fn open(args: &GraphArgs) -> wgflow::Result<(Session, Vec<Tensor>)> {
    let graph = Graph::load(&args.graph)?;
    let default_device = args
        .device
        .as_deref()
        .map(|spec| {
            // The library's message quotes the whole spec: quote a bounded prefix.
            Device::parse(spec).map_err(|e| match e {
                Error::Device { spec, message } => Error::Device {
                    spec: truncate(&spec, MAX_QUOTED_CHARS),
                    message,
                },
                e => e,
            })
        })
        .transpose()?;
    let options = SessionOptions {
        default_device,
        soft_placement: args.soft_placement,
        ..Default::default()
    };
    let fetches = if args.fetches.is_empty() {
        sinks(&graph)
    } else {
        args.fetches
            .iter()
            .map(|n| {
                graph.tensor(n).ok_or_else(|| Error::Fetch {
                    name: truncate(n, MAX_QUOTED_CHARS),
                    message: format!("no node has this name in {}", args.graph.display()),
                })
            })
            .collect::<wgflow::Result<Vec<_>>>()?
    };
    Ok((Session::new(&graph, options)?, fetches))
}

/// Nodes no other node consumes, in graph order.
fn sinks(g: &Graph) -> Vec<Tensor> {
    let used: HashSet<Tensor> = g.edges().flat_map(|(_, inputs)| inputs).collect();
    g.tensors().filter(|t| !used.contains(t)).collect()
}

/// What `run` takes beside the graph.
struct RunArgs {
    feeds: Vec<String>,
    weights: Option<PathBuf>,
    out: PathBuf,
    force: bool,
    runs: u32,
}

fn run(args: &GraphArgs, r: &RunArgs) -> CliResult {
    let (feeds, out, force, runs) = (&r.feeds, r.out.as_path(), r.force, r.runs);
    let (mut session, fetches) = open(args)?;
    // Check the output files before any work, so a refused overwrite costs nothing.
    let names = fetches
        .iter()
        .map(|&t| session.graph().name(t))
        .collect::<wgflow::Result<Vec<&str>>>()?;
    let paths: Vec<PathBuf> = file_names(&names)
        .into_iter()
        .map(|f| out.join(f))
        .collect();
    for p in &paths {
        check_target(p, force)?;
    }
    let fed = read_feeds(&session, feeds)?;
    if let Some(w) = &r.weights {
        session
            .restore(w)
            .map_err(|e| naming(&w.display().to_string(), e.to_string()))?;
        outln!(
            "weights: {} variables from {}",
            session.graph().variables().len(),
            w.display()
        )?;
    }
    let start = Instant::now();
    let plan = session.plan(&fetches)?;
    check_fed(&session, &plan, &fed)?;
    let values = session.run(&fed, &fetches)?;
    let first = start.elapsed();
    // Nothing is sized by the requested count: `--runs 4294967295` runs until interrupted
    // in bounded memory.
    let mut times = Times::default();
    for _ in 0..runs {
        let again = Instant::now();
        session.run(&fed, &fetches)?;
        times.push(again.elapsed());
    }
    let median = ms(times.median());
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for ((t, v), path) in fetches.iter().zip(&values).zip(&paths) {
        write_npy(path, v, force)?;
        outln!(
            "{} {} {} -> {}",
            session.graph().name(*t)?,
            v.dtype(),
            v.shape(),
            path.display()
        )?;
    }
    let devices: Vec<String> = plan.devices().iter().map(Device::to_string).collect();
    outln!("devices: {}", devices.join(", "))?;
    outln!(
        "time: compile+run {:.3} ms, run median {median:.3} ms, min {:.3} ms over {runs} {} \
         ({} dispatches, {} transfers)",
        first.as_secs_f64() * 1e3,
        ms(times.min()),
        if runs == 1 { "run" } else { "runs" },
        plan.dispatch_count(),
        plan.transfer_count()
    )?;
    print_memory(&plan)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Run times for a median and minimum in bounded memory, whatever the number of runs: every
/// time while there are at most [`Times::KEEP`], then an evenly spaced sample of them
/// (every 2nd, 4th, ... run), so the median is exact up to `KEEP` runs and an estimate past
/// that; the minimum is always exact.
struct Times {
    kept: Vec<Duration>,
    /// Keep one run in `stride`.
    stride: u64,
    seen: u64,
    min: Duration,
}

impl Default for Times {
    fn default() -> Self {
        Times {
            kept: Vec::new(),
            stride: 1,
            seen: 0,
            min: Duration::MAX,
        }
    }
}

impl Times {
    /// 2^20 times: 16 MiB.
    const KEEP: usize = 1 << 20;

    fn push(&mut self, t: Duration) {
        self.min = self.min.min(t);
        if self.seen.is_multiple_of(self.stride) {
            if self.kept.len() == Self::KEEP {
                // Keep the runs whose index is a multiple of the doubled stride.
                let mut i = 0;
                self.kept.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
            if self.seen.is_multiple_of(self.stride) {
                self.kept.push(t);
            }
        }
        self.seen += 1;
    }

    /// The kept times in increasing order, the exact minimum first.
    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.kept.clone();
        v.sort();
        // The sample may have skipped the fastest run: its smallest element stands for it
        // (the median, from the middle of the sample, does not move).
        if let Some(first) = v.first_mut() {
            *first = self.min;
        }
        v
    }

    fn median(&self) -> Duration {
        let v = self.sorted();
        match v.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        }
    }

    fn min(&self) -> Duration {
        if self.seen == 0 {
            Duration::ZERO
        } else {
            self.min
        }
    }
}

/// One line per device: the arena's peak against its lower bound and no-reuse size.
fn print_memory(plan: &Plan) -> CliResult {
    for (d, m) in &plan.memory {
        outln!(
            "memory {d}: peak {} B (lower bound {} B, no reuse {} B), constants {} B",
            m.peak_bytes,
            m.lower_bound_bytes,
            m.no_reuse_bytes,
            m.constant_bytes
        )?;
    }
    Ok(())
}

/// Read `--feed NAME=FILE.npy` arguments.
fn read_feeds(session: &Session, feeds: &[String]) -> wgflow::Result<Vec<(Tensor, HostTensor)>> {
    let mut fed: Vec<(Tensor, HostTensor)> = Vec::new();
    for f in feeds {
        let (name, file) = f.split_once('=').ok_or_else(|| Error::Feed {
            name: truncate(f, MAX_QUOTED_CHARS),
            message: "expected NAME=FILE.npy".into(),
        })?;
        let t = session.graph().tensor(name).ok_or_else(|| Error::Feed {
            name: truncate(name, MAX_QUOTED_CHARS),
            message: "no node has this name".into(),
        })?;
        let value = wgflow::npy::read(file).map_err(|e| Error::Feed {
            name: name.into(),
            message: naming(file, e.to_string()),
        })?;
        fed.push((t, value));
    }
    Ok(fed)
}

/// `message` about the file `path`, naming it if the library's text does not already.
fn naming(path: &str, message: String) -> String {
    if message.contains(path) {
        message
    } else {
        format!("{path}: {message}")
    }
}

/// Timings do not depend on the values: a placeholder `--feed` does not give is profiled
/// with zeros of its shape and dtype (said on stderr), so `profile GRAPH.json` just works.
fn zeros_for_unfed(
    session: &Session,
    plan: &Plan,
    fed: &mut Vec<(Tensor, HostTensor)>,
) -> wgflow::Result<()> {
    let g = session.graph();
    let given = fed
        .iter()
        .map(|(t, _)| g.name(*t).map(str::to_string))
        .collect::<wgflow::Result<HashSet<String>>>()?;
    for (name, _) in &plan.feeds {
        // The session feeds the stateful random ops' run counter itself.
        if given.contains(name) || name == wgflow::ops::random::RUN_COUNTER {
            continue;
        }
        let Some(t) = g.tensor(name) else { continue };
        let node = g.node(t)?;
        errln!(
            "note: profiling with zeros for '{name}' ({} {}); pass --feed {name}=FILE.npy for real data",
            node.dtype, node.shape
        );
        // Allocated fallibly: a placeholder of 2^31 elements on a machine (or under a memory
        // limit) without room for it is an error, not an abort.
        let n = node.shape.numel();
        let mut words: Vec<u32> = Vec::new();
        words.try_reserve_exact(n).map_err(|_| Error::Alloc {
            node: name.clone(),
            device: "host".into(),
            what: "the zeros it is profiled with".into(),
            bytes: (n as u64).saturating_mul(4),
        })?;
        words.resize(n, 0);
        fed.push((
            t,
            HostTensor::from_words(node.shape.clone(), node.dtype, words)?,
        ));
    }
    Ok(())
}

/// Every placeholder `plan` reads must be fed: name the missing ones with their types.
fn check_fed(session: &Session, plan: &Plan, fed: &[(Tensor, HostTensor)]) -> wgflow::Result<()> {
    let fed_names = fed
        .iter()
        .map(|(t, _)| session.graph().name(*t))
        .collect::<wgflow::Result<HashSet<&str>>>()?;
    let missing: Vec<String> = plan
        .feeds
        .iter()
        .filter(|(n, _)| !fed_names.contains(n.as_str()) && n != wgflow::ops::random::RUN_COUNTER)
        .map(|(n, _)| {
            let node = session.graph().tensor(n);
            let node = node.and_then(|t| session.graph().node(t).ok());
            match node {
                Some(node) => format!("{n} ({} {})", node.dtype, node.shape),
                None => n.clone(),
            }
        })
        .collect();
    if !missing.is_empty() {
        return Err(Error::Feed {
            name: missing.join(", "),
            message: "needed by the fetches but not fed; pass --feed NAME=FILE.npy for each".into(),
        });
    }
    Ok(())
}

/// Before any work: refuse an existing output file without `force`, anything at the path
/// that is not a regular file (see [`check_target`]), and a file whose directory does not
/// exist.
fn check_output(path: &Path, force: bool) -> CliResult {
    check_target(path, force)?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if parent.is_some_and(|p| !p.is_dir()) {
        return Err(format!("{}: cannot write: no such directory", path.display()).into());
    }
    Ok(())
}

/// What is at an output path, without following a link there: nothing, or (with `force`) a
/// regular file to replace. A symbolic link is refused, dangling or not, with or without
/// `force`: writing through it would create or change a file outside the place the user
/// named. A directory, FIFO, socket or device is refused too (a FIFO would block the
/// write until a reader came).
fn check_target(path: &Path, force: bool) -> CliResult {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: cannot write: {e}", path.display()).into()),
    };
    let refuse =
        |why: &str| -> CliResult { Err(format!("{}: cannot write: {why}", path.display()).into()) };
    let kind = meta.file_type();
    if kind.is_symlink() {
        refuse("is a symbolic link; wgflow does not write through links (remove it or choose another path)")
    } else if kind.is_dir() {
        refuse("is a directory")
    } else if !kind.is_file() {
        refuse("not a regular file (a FIFO, socket or device)")
    } else if !force {
        Err(format!(
            "{}: already exists; pass --force to overwrite",
            path.display()
        )
        .into())
    } else {
        Ok(())
    }
}

/// One file name per fetch, inside the output directory whatever the node name: characters
/// other than ASCII letters, digits, '-', '_' and '.' become '_' (so '/' and '\\' cannot
/// leave it), a leading '.' becomes '_' (no hidden files, no '..'), and a name already
/// taken (compared without case, for case-insensitive file systems) gets `_2`, `_3`, ...
fn file_names(names: &[&str]) -> Vec<String> {
    let mut taken = HashSet::new();
    names
        .iter()
        .map(|name| {
            let mut stem: String = name
                .chars()
                .map(|c| match c {
                    'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
                    _ => '_',
                })
                .collect();
            if stem.is_empty() || stem.starts_with('.') {
                stem.replace_range(..stem.len().min(1), "_");
            }
            let mut file = format!("{stem}.npy");
            let mut n = 2;
            while !taken.insert(file.to_lowercase()) {
                file = format!("{stem}_{n}.npy");
                n += 1;
            }
            file
        })
        .collect()
}

/// Write `v` to `path`; without `force`, refuse a file that appeared since the check.
fn write_npy(path: &Path, v: &HostTensor, force: bool) -> CliResult {
    write_output(path, &wgflow::npy::to_bytes(v), force)
}

/// Write `bytes` to `path`, never through a link at `path` and never into anything but a
/// regular file ([`check_target`]), atomically: a crash leaves the old file (or none) or the
/// whole new one. Without `force` the file must not exist
/// ([`wgflow::files::create_atomic`], which also refuses a link or file that appeared since
/// the check); with `force` the new contents replace it ([`wgflow::files::write_atomic`]).
fn write_output(path: &Path, bytes: &[u8], force: bool) -> CliResult {
    check_target(path, force)?;
    let written = if force {
        wgflow::files::write_atomic(path, bytes)
    } else {
        wgflow::files::create_atomic(path, bytes)
    };
    written.map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists if !force => format!(
            "{}: already exists; pass --force to overwrite",
            path.display()
        )
        .into(),
        _ => cannot_write(path, &e).into(),
    })
}

fn cannot_write(path: &Path, e: &std::io::Error) -> String {
    format!("{}: cannot write: {e}", path.display())
}

/// `wgflow profile`: warm up, time untraced runs, then summarise traced runs.
mod profile {
    use super::*;
    use std::collections::BTreeMap;
    use wgflow::trace::{Profile, ProfileRow, RunMetadata, RunOptions, SpanKind, TraceEvent};

    pub struct Outputs {
        pub runs: u32,
        pub warmup: u32,
        pub trace: Option<PathBuf>,
        pub memory: Option<PathBuf>,
        pub force: bool,
        pub json: bool,
    }

    /// [`Profile::new`] over runs folded in one at a time, so the traced runs need not be
    /// kept: `--runs 4294967295` profiles until interrupted in bounded memory. The same
    /// keys, row updates and order as `Profile::new` (a unit test compares the two).
    #[derive(Default)]
    pub(super) struct Summary {
        runs: usize,
        by_node: BTreeMap<String, ProfileRow>,
        by_kind: BTreeMap<String, ProfileRow>,
        walls: Times,
    }

    impl Summary {
        pub(super) fn add(&mut self, run: &RunMetadata) {
            self.runs += 1;
            self.walls.push(run.wall);
            for e in &run.events {
                let key = match e.step {
                    Some(i) => format!("{i:05} {}", e.name),
                    None => e.name.clone(),
                };
                let kernel = e.kernel.clone().unwrap_or_else(|| e.kind_name.to_string());
                fold(&mut self.by_node, key, || (e.name.clone(), kernel), e);
                if e.kind == SpanKind::Dispatch {
                    let kind = || (e.kind_name.to_string(), e.kind_name.to_string());
                    fold(&mut self.by_kind, e.kind_name.to_string(), kind, e);
                }
            }
        }

        pub(super) fn profile(&self) -> Profile {
            let sorted = |map: &BTreeMap<String, ProfileRow>| {
                let mut rows: Vec<ProfileRow> = map.values().cloned().collect();
                rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
                rows
            };
            Profile {
                runs: self.runs,
                by_node: sorted(&self.by_node),
                by_kind: sorted(&self.by_kind),
                // Run order is lost past `Times::KEEP` runs: `Profile` only takes the median
                // and minimum of its walls.
                walls: self.walls.sorted(),
            }
        }
    }

    /// What `ProfileRow::add` and `ProfileRow::first` do (private to the library).
    fn fold(
        rows: &mut BTreeMap<String, ProfileRow>,
        key: String,
        names: impl FnOnce() -> (String, String),
        e: &TraceEvent,
    ) {
        if let Some(r) = rows.get_mut(&key) {
            r.calls += 1;
            r.total += e.duration;
            r.min = r.min.min(e.duration);
            r.bytes += e.bytes_read + e.bytes_written;
            r.flops = match (r.flops, e.flops) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            if r.timing != e.clock.label() {
                r.timing = "mixed";
            }
            let d = e.device.to_string();
            if !r.device.split(',').any(|x| x == d) {
                r.device = format!("{},{d}", r.device);
            }
            return;
        }
        let (name, kernel) = names();
        rows.insert(
            key,
            ProfileRow {
                name,
                kernel,
                device: e.device.to_string(),
                calls: 1,
                total: e.duration,
                min: e.duration,
                bytes: e.bytes_read + e.bytes_written,
                flops: e.flops,
                timing: e.clock.label(),
            },
        );
    }

    pub fn profile(args: &GraphArgs, feeds: &[String], o: &Outputs) -> CliResult {
        // Check the output files before any work, so a refused overwrite costs nothing.
        for p in o.trace.iter().chain(&o.memory) {
            check_output(p, o.force)?;
        }
        let (mut session, fetches) = open(args)?;
        let mut fed = read_feeds(&session, feeds)?;
        let plan = session.plan(&fetches)?;
        zeros_for_unfed(&session, &plan, &mut fed)?;
        let total = u64::from(o.warmup) + 2 * u64::from(o.runs);
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:>9} [{bar:30}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message("warmup");
        for _ in 0..o.warmup {
            session.run(&fed, &fetches)?;
            bar.inc(1);
        }
        // Untraced runs: the steady-state time a user gets.
        bar.set_message("timing");
        // Nothing is sized by the requested counts: the plain times are sampled (`Times`),
        // the traced runs folded into `Summary`, and only the last one kept for --trace.
        let mut plain = Times::default();
        for _ in 0..o.runs {
            let t = Instant::now();
            session.run(&fed, &fetches)?;
            plain.push(t.elapsed());
            bar.inc(1);
        }
        bar.set_message("tracing");
        let mut summary = Summary::default();
        let mut last = None;
        for _ in 0..o.runs {
            let (_, meta) = session.run_with(&fed, &fetches, &RunOptions { trace: true })?;
            summary.add(&meta);
            last = Some(meta);
            bar.inc(1);
        }
        bar.finish_and_clear();
        let report = summary.profile();
        let devices: Vec<String> = plan.devices().iter().map(Device::to_string).collect();
        if let (Some(path), Some(last)) = (&o.trace, &last) {
            write_output(path, last.chrome_trace_json().as_bytes(), o.force)?;
        }
        if let Some(path) = &o.memory {
            write_output(path, plan.memory_svg().as_bytes(), o.force)?;
        }
        if o.json {
            let mut j = report.to_json();
            j["devices"] = serde_json::json!(devices);
            j["untraced_median_ms"] = serde_json::json!(ms(plain.median()));
            j["untraced_min_ms"] = serde_json::json!(ms(plain.min()));
            j["dispatches"] = serde_json::json!(plan.dispatch_count());
            j["transfers"] = serde_json::json!(plan.transfer_count());
            outln!("{j:#}")?;
            return Ok(());
        }
        write_stdout(format_args!("{report}"))?;
        outln!(
            "untraced: median {:.3} ms, min {:.3} ms over {} run(s) on {} ({} dispatches, {} transfers)",
            ms(plain.median()),
            ms(plain.min()),
            o.runs,
            devices.join(", "),
            plan.dispatch_count(),
            plan.transfer_count()
        )?;
        print_memory(&plan)?;
        if let Some(p) = &o.trace {
            outln!("trace: {}", p.display())?;
        }
        if let Some(p) = &o.memory {
            outln!("memory plan: {}", p.display())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgflow::trace::{Profile, RunOptions};

    /// `Summary` folds runs one at a time exactly as `Profile::new` sums a slice of them (its
    /// walls sorted: the CLI only reads their median and minimum).
    #[test]
    fn summary_matches_profile_new() {
        let mut g = Graph::new();
        let a = g.constant(vec![1.0f32, 2.0, 3.0]).unwrap();
        let b = g.constant(vec![4.0f32, 5.0, 6.0]).unwrap();
        let c = g.add(a, b).unwrap();
        let d = g.mul(c, c).unwrap();
        let e = g.sum(d, [0], false).unwrap();
        let options = SessionOptions {
            default_device: Some(Device::Cpu),
            ..Default::default()
        };
        let mut session = Session::new(&g, options).unwrap();
        let mut summary = profile::Summary::default();
        let mut runs = Vec::new();
        for _ in 0..4 {
            let (_, meta) = session
                .run_with(&[], &[e, c], &RunOptions { trace: true })
                .unwrap();
            summary.add(&meta);
            runs.push(meta);
        }
        let mut expected = Profile::new(&runs);
        expected.walls.sort();
        assert!(!expected.by_node.is_empty() && !expected.by_kind.is_empty());
        assert_eq!(summary.profile(), expected);
    }

    /// Past `Times::KEEP` runs the kept sample stays bounded, the minimum exact and the median
    /// near the true one.
    #[test]
    fn times_stay_bounded() {
        let mut t = Times::default();
        for i in 0..7u64 {
            t.push(Duration::from_nanos(10 - i));
        }
        assert_eq!(
            (t.min(), t.median()),
            (Duration::from_nanos(4), Duration::from_nanos(7))
        );
        let mut t = Times::default();
        let n = 4 * Times::KEEP as u64 + 3;
        for i in 0..n {
            // Any order: the slowest runs come first.
            t.push(Duration::from_nanos(n - i));
        }
        assert!(t.kept.len() <= Times::KEEP);
        assert_eq!(t.min(), Duration::from_nanos(1));
        let median = t.median().as_nanos() as i128;
        assert!((median - (n / 2) as i128).abs() <= 16, "{median}");
    }
}
