//! The wgflow command-line tool.

use clap::{Args, Parser, Subcommand};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wgflow::compile::{Plan, StepKind, ValueId};
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
    /// Check a graph file or an ONNX model (every builder check runs again; a model is
    /// imported) without touching any GPU; print a one-line summary, or the error and exit 1.
    Validate {
        /// The graph file (JSON written by Graph::save), or an ONNX model (`.onnx`).
        #[arg(value_name = "GRAPH.json", required_unless_present = "list_onnx_ops")]
        graph: Option<PathBuf>,
        /// A size for an ONNX model's symbolic input dimension or a graph file's run-time
        /// dimension (repeatable), e.g. `--dim N=1`.
        #[arg(long = "dim", value_name = "NAME=SIZE")]
        dims: Vec<String>,
        /// Print the ONNX op types the importer translates (domain, opsets, arity) instead.
        #[arg(long, conflicts_with = "graph")]
        list_onnx_ops: bool,
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
    /// The graph file (JSON written by Graph::save), or an ONNX model (`.onnx`).
    #[arg(value_name = "GRAPH.json")]
    graph: PathBuf,
    /// A size for an ONNX model's symbolic input dimension or a graph file's run-time
    /// dimension (repeatable), e.g. `--dim batch=64`.
    #[arg(long = "dim", value_name = "NAME=SIZE")]
    dims: Vec<String>,
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

/// `println!` through [`write_stdout`]: evaluates to a [`CliResult`].
macro_rules! outln {
    ($($arg:tt)*) => {
        crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
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

// After the macros above, which the modules use.
mod output;
mod profile;
mod run;

use output::*;
use run::*;

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
        Command::Validate {
            list_onnx_ops: true,
            ..
        } => list_onnx_ops(),
        Command::Validate {
            graph: Some(graph),
            dims,
            ..
        } => validate(&graph, &dims),
        Command::Validate { graph: None, .. } => {
            Err("a graph file or --list-onnx-ops is needed".into())
        }
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
    needs_sizes(session.graph())?;
    let plan = session.compile_only(&fetches)?;
    if let Some(m) = memory {
        write_output(m, plan.memory_svg().as_bytes(), force)?;
    }
    if json {
        outln!("{:#}", plan_json(&plan))?;
    } else {
        crate::output::write_stdout(format_args!("{}", plan.describe()))?;
    }
    Ok(())
}

/// A plan has static shapes: a graph with run-time dimensions needs `--dim` for each.
pub(crate) fn needs_sizes(graph: &Graph) -> Result<(), String> {
    if !graph.has_unknown_dims() {
        return Ok(());
    }
    let dims: Vec<String> = graph
        .dim_names()
        .iter()
        .map(|n| format!("--dim {}=SIZE", truncate(n, MAX_QUOTED_CHARS)))
        .collect();
    Err(format!(
        "the graph has dimensions known only at run time; give each a size: {}",
        dims.join(" ")
    ))
}

fn print_dot(args: &GraphArgs) -> CliResult {
    let (session, fetches) = open(args)?;
    needs_sizes(session.graph())?;
    let plan = session.compile_only(&fetches)?;
    write_stdout(format_args!(
        "{}",
        wgflow::trace::dot(session.graph(), &plan)
    ))?;
    Ok(())
}

/// The importer's op table, one op per line.
fn list_onnx_ops() -> CliResult {
    let ops = wgflow::onnx::supported_ops();
    let count = |(a, b): (usize, usize)| match (a, b) {
        (a, b) if a == b => a.to_string(),
        (a, usize::MAX) => format!("{a}+"),
        (a, b) => format!("{a}-{b}"),
    };
    outln!(
        "{:<28} {:<16} {:<8} {:<8} {:<8} family",
        "op",
        "domain",
        "opsets",
        "inputs",
        "outputs"
    )?;
    for d in &ops {
        let opsets = match d.until {
            Some(u) => format!("{}-{u}", d.since),
            None => format!("{}+", d.since),
        };
        let domain = if d.domain.is_empty() {
            "ai.onnx"
        } else {
            d.domain
        };
        outln!(
            "{:<28} {:<16} {:<8} {:<8} {:<8} {}",
            d.op,
            domain,
            opsets,
            count(d.inputs),
            count(d.outputs),
            d.family
        )?;
    }
    outln!("{} op types", ops.len())?;
    Ok(())
}

/// Load the graph only: no adapter is enumerated and no session is made.
fn validate(path: &Path, dims: &[String]) -> CliResult {
    let (graph, _, _) = load_path(path, dims)?;
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
    let value = |v: ValueId| {
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
/// The graph of a graph file or an ONNX model, and the model's outputs (none for a graph
/// file: its sinks are the default fetches).
/// The graph, its default fetches, and (for an ONNX model) its values by ONNX name.
type Loaded = (Graph, Vec<Tensor>, HashMap<String, Tensor>);

fn load(args: &GraphArgs) -> wgflow::Result<Loaded> {
    load_path(&args.graph, &args.dims)
}

pub(crate) fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// `--dim NAME=SIZE` arguments for an ONNX import.
fn onnx_options(dims: &[String]) -> wgflow::Result<wgflow::onnx::ImportOptions> {
    let mut opts = wgflow::onnx::ImportOptions::default();
    for d in dims {
        let bad = || Error::Onnx {
            at: format!("--dim {}", truncate(d, MAX_QUOTED_CHARS)),
            message: "expected NAME=SIZE".into(),
            kind: wgflow::OnnxKind::Invalid,
        };
        let (name, size) = d.split_once('=').ok_or_else(bad)?;
        let size: usize = size.parse().map_err(|_| bad())?;
        if opts.dims.insert(name.to_string(), size).is_some() {
            return Err(Error::Onnx {
                at: format!("--dim {}", truncate(d, MAX_QUOTED_CHARS)),
                message: format!("'{}' is given twice", truncate(name, MAX_QUOTED_CHARS)),
                kind: wgflow::OnnxKind::Invalid,
            });
        }
    }
    Ok(opts)
}

/// An ONNX model to run by its names, on the requested device.
pub(crate) fn open_onnx(args: &GraphArgs) -> wgflow::Result<wgflow::onnx::InferenceSession> {
    let opts = onnx_options(&args.dims)?;
    wgflow::onnx::InferenceSession::new(&args.graph, opts, session_options(args)?)
}

fn load_path(path: &Path, dims: &[String]) -> wgflow::Result<Loaded> {
    if !is_onnx(path) {
        let graph = Graph::load(path)?;
        if dims.is_empty() {
            return Ok((graph, Vec::new(), HashMap::new()));
        }
        // A graph file's run-time dimensions, given sizes: the static graph they make.
        let mut sizes = Vec::with_capacity(dims.len());
        for d in dims {
            let bad = || Error::GraphDef {
                at: format!("--dim {}", truncate(d, MAX_QUOTED_CHARS)),
                message: format!(
                    "expected NAME=SIZE with NAME one of the graph's run-time dimensions ({})",
                    graph.dim_names().join(", ")
                ),
            };
            let (name, size) = d.split_once('=').ok_or_else(bad)?;
            sizes.push((name, size.parse::<usize>().map_err(|_| bad())?));
        }
        return Ok((graph.with_dims(&sizes)?, Vec::new(), HashMap::new()));
    }
    let model = wgflow::onnx::import(path, &onnx_options(dims)?)?;
    let outputs = model.output_tensors();
    let mut names = model.values.clone();
    for v in model.inputs.iter().chain(&model.outputs) {
        names.insert(v.name.clone(), v.tensor);
    }
    Ok((model.graph, outputs, names))
}

fn session_options(args: &GraphArgs) -> wgflow::Result<SessionOptions> {
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
    Ok(SessionOptions {
        default_device,
        soft_placement: args.soft_placement,
        ..Default::default()
    })
}

fn open(args: &GraphArgs) -> wgflow::Result<(Session, Vec<Tensor>)> {
    let (graph, outputs, names) = load(args)?;
    let options = session_options(args)?;
    let fetches = if args.fetches.is_empty() && !outputs.is_empty() {
        outputs
    } else if args.fetches.is_empty() {
        sinks(&graph)
    } else {
        args.fetches
            .iter()
            .map(|n| {
                names
                    .get(n)
                    .copied()
                    .or_else(|| graph.tensor(n))
                    .ok_or_else(|| Error::Fetch {
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
