//! `wgflow run`: feeds from `.npy` files, timed runs, fetches written as `.npy`.

use super::*;

/// What `run` takes beside the graph.
pub(crate) struct RunArgs {
    pub(crate) feeds: Vec<String>,
    pub(crate) weights: Option<PathBuf>,
    pub(crate) out: PathBuf,
    pub(crate) force: bool,
    pub(crate) runs: u32,
}

pub(crate) fn run(args: &GraphArgs, r: &RunArgs) -> CliResult {
    if is_onnx(&args.graph) && r.weights.is_none() {
        return run_onnx(args, r);
    }
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
    let plan = session.plan_for(&fed, &fetches)?;
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
    print_summary(&plan, first, &times, runs)
}

/// `run` on an ONNX model, as onnxruntime runs it: feeds by input name (int64 `.npy` files
/// as NumPy writes them), the symbolic dimensions sized by the feeds, and the outputs by
/// their ONNX names (`--fetch` takes any value name), written as `NAME.npy` in the dtype the
/// model declares (int64 outputs as int64).
fn run_onnx(args: &GraphArgs, r: &RunArgs) -> CliResult {
    let (out, force, runs) = (r.out.as_path(), r.force, r.runs);
    let mut model = open_onnx(args)?;
    let fetch_names: Vec<String> = if args.fetches.is_empty() {
        model.outputs().iter().map(|o| o.name.clone()).collect()
    } else {
        args.fetches.clone()
    };
    let names: Vec<&str> = fetch_names.iter().map(String::as_str).collect();
    let paths: Vec<PathBuf> = file_names(&names)
        .into_iter()
        .map(|f| out.join(f))
        .collect();
    for p in &paths {
        check_target(p, force)?;
    }
    // Owned names apart, so the feeds borrow them without a copy of any tensor.
    let (names_fed, values): (Vec<String>, Vec<HostTensor>) =
        read_npy_feeds(&r.feeds)?.into_iter().unzip();
    let feeds: Vec<(&str, HostTensor)> = names_fed.iter().map(String::as_str).zip(values).collect();
    let start = Instant::now();
    let plan = model.plan_for(Some(&names), &feeds)?;
    let values = model.run(Some(&names), &feeds)?;
    let first = start.elapsed();
    let mut times = Times::default();
    for _ in 0..runs {
        let again = Instant::now();
        model.run(Some(&names), &feeds)?;
        times.push(again.elapsed());
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for ((name, v), path) in names.iter().zip(&values).zip(&paths) {
        // Integers in the type the model declares, as onnxruntime gives them.
        let declared = model
            .outputs()
            .iter()
            .chain(model.inputs())
            .find(|o| o.name == *name)
            .map(|o| o.onnx_type.as_str());
        let as_int = match declared {
            Some("UINT64") if v.dtype() == wgflow::DType::U32 => Some(("<u8", "uint64")),
            _ if v.dtype() != wgflow::DType::I32 => None,
            Some("INT64") => Some(("<i8", "int64")),
            Some("UINT8") => Some(("|u1", "uint8")),
            Some("INT8") => Some(("|i1", "int8")),
            Some("UINT16") => Some(("<u2", "uint16")),
            Some("INT16") => Some(("<i2", "int16")),
            _ => None,
        };
        let (bytes, dtype) = match as_int {
            Some((descr, name)) => (wgflow::npy::to_bytes_int(v, descr)?, name.to_string()),
            None => (wgflow::npy::to_bytes(v), v.dtype().to_string()),
        };
        write_output(path, &bytes, force)?;
        outln!("{name} {dtype} {} -> {}", v.shape(), path.display())?;
    }
    if let Some(why) = model.per_binding() {
        errln!("note: imported again for each new set of sizes, because {why}");
    }
    print_summary(&plan, first, &times, runs)
}

/// The devices, times and memory lines that end `run`'s output.
fn print_summary(plan: &Plan, first: Duration, times: &Times, runs: u32) -> CliResult {
    let devices: Vec<String> = plan.devices().iter().map(Device::to_string).collect();
    outln!("devices: {}", devices.join(", "))?;
    outln!(
        "time: compile+run {:.3} ms, run median {:.3} ms, min {:.3} ms over {runs} {} \
         ({} dispatches, {} transfers)",
        first.as_secs_f64() * 1e3,
        ms(times.median()),
        ms(times.min()),
        if runs == 1 { "run" } else { "runs" },
        plan.dispatch_count(),
        plan.transfer_count()
    )?;
    print_memory(plan)
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Run times for a median and minimum in bounded memory, whatever the number of runs: every
/// time while there are at most [`Times::KEEP`], then an evenly spaced sample of them
/// (every 2nd, 4th, ... run), so the median is exact up to `KEEP` runs and an estimate past
/// that; the minimum is always exact.
pub(crate) struct Times {
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
    pub(crate) const KEEP: usize = 1 << 20;

    pub(crate) fn push(&mut self, t: Duration) {
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
    pub(crate) fn sorted(&self) -> Vec<Duration> {
        let mut v = self.kept.clone();
        v.sort();
        // The sample may have skipped the fastest run: its smallest element stands for it
        // (the median, from the middle of the sample, does not move).
        if let Some(first) = v.first_mut() {
            *first = self.min;
        }
        v
    }

    pub(crate) fn median(&self) -> Duration {
        let v = self.sorted();
        match v.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        }
    }

    pub(crate) fn min(&self) -> Duration {
        if self.seen == 0 {
            Duration::ZERO
        } else {
            self.min
        }
    }
}

/// One line per device: the arena's peak against its lower bound and no-reuse size.
pub(crate) fn print_memory(plan: &Plan) -> CliResult {
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
pub(crate) fn read_feeds(
    session: &Session,
    feeds: &[String],
) -> wgflow::Result<Vec<(Tensor, HostTensor)>> {
    let mut fed: Vec<(Tensor, HostTensor)> = Vec::new();
    for f in feeds {
        let (name, file) = f.split_once('=').ok_or_else(|| Error::Feed {
            kind: wgflow::FeedKind::Value,
            name: truncate(f, MAX_QUOTED_CHARS),
            message: "expected NAME=FILE.npy".into(),
        })?;
        let t = session.graph().tensor(name).ok_or_else(|| Error::Feed {
            kind: wgflow::FeedKind::Name,
            name: truncate(name, MAX_QUOTED_CHARS),
            message: "no node has this name".into(),
        })?;
        let value = wgflow::npy::read(file).map_err(|e| Error::Feed {
            kind: wgflow::FeedKind::Value,
            name: name.into(),
            message: naming(file, e.to_string()),
        })?;
        fed.push((t, value));
    }
    Ok(fed)
}

/// `message` about the file `path`, naming it if the library's text does not already.
/// The `--feed NAME=FILE.npy` arguments read by name, as an ONNX model takes them.
pub(crate) fn read_npy_feeds(feeds: &[String]) -> wgflow::Result<Vec<(String, HostTensor)>> {
    let mut fed = Vec::with_capacity(feeds.len());
    for f in feeds {
        let (name, file) = f.split_once('=').ok_or_else(|| Error::Feed {
            kind: wgflow::FeedKind::Value,
            name: truncate(f, MAX_QUOTED_CHARS),
            message: "expected NAME=FILE.npy".into(),
        })?;
        let value = wgflow::npy::read(file).map_err(|e| Error::Feed {
            kind: wgflow::FeedKind::Value,
            name: truncate(name, MAX_QUOTED_CHARS),
            message: naming(file, e.to_string()),
        })?;
        fed.push((name.to_string(), value));
    }
    Ok(fed)
}

pub(crate) fn naming(path: &str, message: String) -> String {
    if message.contains(path) {
        message
    } else {
        format!("{path}: {message}")
    }
}

/// Timings do not depend on the values: a placeholder `--feed` does not give is profiled
/// with zeros of its shape and dtype (said on stderr), so `profile GRAPH.json` just works.
pub(crate) fn zeros_for_unfed(
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
pub(crate) fn check_fed(
    session: &Session,
    plan: &Plan,
    fed: &[(Tensor, HostTensor)],
) -> wgflow::Result<()> {
    let fed_names = fed
        .iter()
        .map(|(t, _)| session.graph().name(*t))
        .collect::<wgflow::Result<HashSet<&str>>>()?;
    let missing: Vec<String> = plan
        .feeds
        .iter()
        .filter(|(n, _)| !fed_names.contains(n.as_str()) && n != wgflow::ops::random::RUN_COUNTER)
        .map(|(n, _)| {
            let g = session.graph();
            let t = g.tensor(n);
            // The dimensions as declared (`batch`), not the probe sizes that stand in for them.
            let dims = t.and_then(|t| g.dims(t).ok());
            match (t.and_then(|t| g.dtype(t).ok()), dims) {
                (Some(dtype), Some(dims)) => {
                    let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
                    format!("{n} ({dtype} [{}])", dims.join(", "))
                }
                _ => n.clone(),
            }
        })
        .collect();
    if !missing.is_empty() {
        return Err(Error::Feed {
            kind: wgflow::FeedKind::Missing,
            name: missing.join(", "),
            message: "needed by the fetches but not fed; pass --feed NAME=FILE.npy for each".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
