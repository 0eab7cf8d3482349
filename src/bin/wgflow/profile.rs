//! `wgflow profile`: warm up, time untraced runs, then summarise traced runs.

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
pub(crate) fn fold(
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
        let mut summary = Summary::default();
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
}
