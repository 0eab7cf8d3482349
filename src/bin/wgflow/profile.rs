//! `wgflow profile`: warm up, time untraced runs, then summarise traced runs.

use super::*;
use wgflow::trace::{ProfileSum, RunOptions};

pub struct Outputs {
    pub runs: u32,
    pub warmup: u32,
    pub trace: Option<PathBuf>,
    pub memory: Option<PathBuf>,
    pub force: bool,
    pub json: bool,
}

pub fn profile(args: &GraphArgs, feeds: &[String], o: &Outputs) -> CliResult {
    // Check the output files before any work, so a refused overwrite costs nothing.
    for p in o.trace.iter().chain(&o.memory) {
        check_output(p, o.force)?;
    }
    let (mut session, fetches) = match open(args) {
        Ok(opened) => opened,
        Err(e) if is_onnx(&args.graph) && args.dims.is_empty() && !feeds.is_empty() => {
            // A model whose symbolic sizes must be fixed at import (an unrolled sequence
            // length, a shape that becomes data): the feeds give them, as `wgflow run` does.
            let dims = onnx_dims_from_feeds(args, feeds)?;
            if dims.is_empty() {
                return Err(e.into());
            }
            errln!(
                "note: imported with the sizes the feeds give ({}), because {}",
                dims.join(", "),
                wgflow::onnx::without_pin_advice(&e.to_string())
            );
            open(&GraphArgs {
                dims,
                graph: args.graph.clone(),
                fetches: args.fetches.clone(),
                device: args.device.clone(),
                soft_placement: args.soft_placement,
            })?
        }
        Err(e) => return Err(e.into()),
    };
    let mut fed = read_feeds(&session, feeds)?;
    // Unfed placeholders get zeros of the plan's shapes. Run-time sizes come from the
    // feeds, as `wgflow run` binds them, or else from --dim.
    let plan = if session.graph().has_unknown_dims() && !fed.is_empty() {
        session.plan_for(&fed, &fetches)?
    } else {
        crate::needs_sizes(session.graph())?;
        session.plan(&fetches)?
    };
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
    // the traced runs folded into a `ProfileSum`, and only the last one kept for --trace.
    let mut plain = Times::default();
    for _ in 0..o.runs {
        let t = Instant::now();
        session.run(&fed, &fetches)?;
        plain.push(t.elapsed());
        bar.inc(1);
    }
    bar.set_message("tracing");
    let mut summary = ProfileSum::default();
    let mut traced = Times::default();
    let mut last = None;
    for _ in 0..o.runs {
        let (_, meta) = session.run_with(&fed, &fetches, &RunOptions { trace: true })?;
        summary.add(&meta);
        traced.push(meta.wall);
        last = Some(meta);
        bar.inc(1);
    }
    bar.finish_and_clear();
    // Run order is lost past `Times::KEEP` runs: a profile only takes the median and
    // minimum of its walls.
    let report = summary.finish(traced.sorted());
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
        j["cpu_prepared_bytes"] = serde_json::json!(session.counters().cpu_prepared_bytes);
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
    let packed = session.counters().cpu_prepared_bytes;
    if packed > 0 {
        outln!("cpu:0 also keeps {packed} B made once from constants (packed weights)")?;
    }
    if let Some(p) = &o.trace {
        outln!("trace: {}", p.display())?;
    }
    if let Some(p) = &o.memory {
        outln!("memory plan: {}", p.display())?;
    }
    Ok(())
}

/// `NAME=SIZE` for each symbolic input dimension of the ONNX model that `feeds` (the
/// `--feed NAME=FILE.npy` arguments) give a size.
fn onnx_dims_from_feeds(
    args: &GraphArgs,
    feeds: &[String],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let model = open_onnx(args)?;
    let (names, values): (Vec<String>, Vec<HostTensor>) =
        read_npy_feeds(feeds)?.into_iter().unzip();
    let fed: Vec<(&str, HostTensor)> = names.iter().map(String::as_str).zip(values).collect();
    Ok(model
        .sizes_from_feeds(&fed)?
        .into_iter()
        .map(|(name, size)| format!("{name}={size}"))
        .collect())
}
