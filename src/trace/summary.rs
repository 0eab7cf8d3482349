//! A per-op summary over several traced runs, like PyTorch's `key_averages()`: time per
//! graph node (fused step) and per kernel kind, achieved bandwidth and FLOP rate.

use super::run::{RunMetadata, TraceEvent};
use crate::backend::timing::SpanKind;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// One line of a [`Profile`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    /// The fused nodes (`a+b`), `upload x`, ..., or the kernel kind.
    pub name: String,
    /// The kernel's description, or its kind for the per-kind table.
    pub kernel: String,
    /// The devices it ran on, comma-separated.
    pub device: String,
    /// How many times it ran over all runs.
    pub calls: u64,
    pub total: Duration,
    pub min: Duration,
    /// Bytes read and written over all calls.
    pub bytes: u64,
    /// FLOPs over all calls, where the kernel has a count.
    pub flops: Option<u64>,
    /// `gpu-timestamp`, `host`, or `mixed`.
    pub timing: &'static str,
}

impl ProfileRow {
    pub fn mean(&self) -> Duration {
        self.total / self.calls.max(1) as u32
    }

    /// Achieved bandwidth: bytes moved / time, in GB/s.
    pub fn gb_per_s(&self) -> f64 {
        let s = self.total.as_secs_f64();
        if s > 0.0 {
            self.bytes as f64 / s / 1e9
        } else {
            0.0
        }
    }

    /// Achieved GFLOP/s, where the kernel has a FLOP count.
    pub fn gflop_per_s(&self) -> Option<f64> {
        let s = self.total.as_secs_f64();
        self.flops.filter(|_| s > 0.0).map(|f| f as f64 / s / 1e9)
    }

    fn add(&mut self, e: &TraceEvent) {
        self.calls += 1;
        self.total += e.duration;
        self.min = self.min.min(e.duration);
        self.bytes += e.bytes_read + e.bytes_written;
        self.flops = match (self.flops, e.flops) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        if self.timing != e.clock.label() {
            self.timing = "mixed";
        }
        let d = e.device.to_string();
        if !self.device.split(',').any(|x| x == d) {
            self.device = format!("{},{d}", self.device);
        }
    }

    fn first(name: String, kernel: String, e: &TraceEvent) -> ProfileRow {
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
        }
    }

    fn json(&self) -> Value {
        json!({
            "name": self.name,
            "kernel": self.kernel,
            "device": self.device,
            "calls": self.calls,
            "total_ms": self.total.as_secs_f64() * 1e3,
            "mean_ms": self.mean().as_secs_f64() * 1e3,
            "min_ms": self.min.as_secs_f64() * 1e3,
            "bytes": self.bytes,
            "gb_per_s": self.gb_per_s(),
            "flops": self.flops,
            "gflop_per_s": self.gflop_per_s(),
            "timing": self.timing,
        })
    }
}

/// Time per graph node and per kernel kind over several traced runs, slowest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Traced runs summed.
    pub runs: usize,
    /// One row per step (its fused nodes) and per upload, transfer and read-back.
    pub by_node: Vec<ProfileRow>,
    /// One row per kernel kind (dispatches only).
    pub by_kind: Vec<ProfileRow>,
    /// Host wall time of each run, in run order.
    pub walls: Vec<Duration>,
}

fn sorted(map: BTreeMap<String, ProfileRow>) -> Vec<ProfileRow> {
    let mut rows: Vec<ProfileRow> = map.into_values().collect();
    rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// A [`Profile`] built one traced run at a time, so a long profiling loop need not keep its
/// runs: add each run's events, then [`ProfileSum::finish`] with the run times to report.
#[derive(Debug, Clone, Default)]
pub struct ProfileSum {
    runs: usize,
    by_node: BTreeMap<String, ProfileRow>,
    by_kind: BTreeMap<String, ProfileRow>,
}

impl ProfileSum {
    /// Add one traced run's events.
    pub fn add(&mut self, run: &RunMetadata) {
        self.runs += 1;
        for e in &run.events {
            let key = match e.step {
                Some(i) => format!("{i:05} {}", e.name),
                None => e.name.clone(),
            };
            let kernel = e.kernel.clone().unwrap_or_else(|| e.kind_name.to_string());
            self.by_node
                .entry(key)
                .and_modify(|r| r.add(e))
                .or_insert_with(|| ProfileRow::first(e.name.clone(), kernel, e));
            if e.kind == SpanKind::Dispatch {
                self.by_kind
                    .entry(e.kind_name.to_string())
                    .and_modify(|r| r.add(e))
                    .or_insert_with(|| {
                        ProfileRow::first(e.kind_name.into(), e.kind_name.into(), e)
                    });
            }
        }
    }

    /// The profile of the runs added so far, with `walls` as their host wall times (all of
    /// them, or a sample: the profile reports their median and minimum).
    pub fn finish(&self, walls: Vec<Duration>) -> Profile {
        Profile {
            runs: self.runs,
            by_node: sorted(self.by_node.clone()),
            by_kind: sorted(self.by_kind.clone()),
            walls,
        }
    }
}

impl Profile {
    /// Sum the events of `runs` (traced runs of one plan).
    pub fn new(runs: &[RunMetadata]) -> Profile {
        let mut sum = ProfileSum::default();
        for run in runs {
            sum.add(run);
        }
        sum.finish(runs.iter().map(|r| r.wall).collect())
    }

    /// Median host wall time per run.
    pub fn median_wall(&self) -> Duration {
        let mut w = self.walls.clone();
        w.sort();
        match w.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => w[n / 2],
            n => (w[n / 2 - 1] + w[n / 2]) / 2,
        }
    }

    /// Fastest host wall time of a run.
    pub fn min_wall(&self) -> Duration {
        self.walls.iter().copied().min().unwrap_or_default()
    }

    /// The tables as text (what `Display` prints).
    pub fn to_table(&self) -> String {
        self.to_string()
    }

    /// The profile as JSON: `runs`, `wall_median_ms`, `wall_min_ms`, `by_node`, `by_kind`.
    pub fn to_json(&self) -> Value {
        json!({
            "runs": self.runs,
            "wall_median_ms": self.median_wall().as_secs_f64() * 1e3,
            "wall_min_ms": self.min_wall().as_secs_f64() * 1e3,
            "by_node": self.by_node.iter().map(ProfileRow::json).collect::<Vec<_>>(),
            "by_kind": self.by_kind.iter().map(ProfileRow::json).collect::<Vec<_>>(),
        })
    }
}

fn table(f: &mut fmt::Formatter<'_>, title: &str, rows: &[ProfileRow]) -> fmt::Result {
    let total: Duration = rows.iter().map(|r| r.total).sum();
    writeln!(
        f,
        "{:<36} {:<28} {:<6} {:>6} {:>10} {:>10} {:>7} {:>9} {:>9} {:<13}",
        title, "kernel", "device", "calls", "total ms", "mean ms", "%", "GB/s", "GFLOP/s", "timing"
    )?;
    for r in rows {
        let pct = if total.is_zero() {
            0.0
        } else {
            100.0 * r.total.as_secs_f64() / total.as_secs_f64()
        };
        writeln!(
            f,
            "{:<36} {:<28} {:<6} {:>6} {:>10.3} {:>10.3} {:>6.1}% {:>9.3} {:>9} {:<13}",
            clip(&r.name, 36),
            clip(&r.kernel, 28),
            r.device,
            r.calls,
            r.total.as_secs_f64() * 1e3,
            r.mean().as_secs_f64() * 1e3,
            pct,
            r.gb_per_s(),
            r.gflop_per_s().map_or("-".into(), |g| format!("{g:.3}")),
            r.timing,
        )?;
    }
    Ok(())
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        table(f, "node", &self.by_node)?;
        writeln!(f)?;
        table(f, "kernel kind", &self.by_kind)?;
        let timing: Vec<&str> = self
            .by_kind
            .iter()
            .map(|r| r.timing)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        writeln!(
            f,
            "\n{} run(s): wall median {:.3} ms, min {:.3} ms; kernel timing: {}",
            self.runs,
            self.median_wall().as_secs_f64() * 1e3,
            self.min_wall().as_secs_f64() * 1e3,
            if timing.is_empty() {
                "-".into()
            } else {
                timing.join(", ")
            }
        )
    }
}
