//! The memory plan as a picture: an SVG with the schedule on the x axis and arena offsets on
//! the y axis, one box per arena value, one panel per device.
//!
//! The SVG is written by hand with `write!`: it is rectangles, lines and text, and the only
//! subtle part is escaping, which is one function here. An XML crate would be a dependency
//! for no gain. The output depends only on the plan (maps are ordered, numbers are printed
//! with fixed precision), so the same plan always gives the same bytes.

use crate::compile::{MemoryPlan, Plan, Source, StepId, StepKind, ValueId};
use crate::device::Device;
use crate::ops::{Kernel, KernelClass};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Total picture width in pixels.
const WIDTH: f64 = 960.0;
/// Room left of the plot for the byte ticks and the axis title.
const LEFT: f64 = 84.0;
/// Room right of the plot for the peak and lower-bound labels.
const RIGHT: f64 = 150.0;
/// Height of one panel's plot area.
const PLOT_H: f64 = 300.0;
/// Above a plot: the device title and its numbers.
const PANEL_TOP: f64 = 46.0;
/// Below a plot: step ticks and the axis title.
const PANEL_BOTTOM: f64 = 44.0;
/// Font size of value labels; their width is estimated at 0.6 em (monospace).
const LABEL_PX: f64 = 11.0;

/// What kind of work produced a value: the colour of its box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Feed,
    Elementwise,
    Reduce,
    MatMul,
    Movement,
    Nn,
    Random,
    Custom,
    Transfer,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Feed => "feed",
            Kind::Elementwise => "elementwise",
            Kind::Reduce => "reduce",
            Kind::MatMul => "matmul",
            Kind::Movement => "movement",
            Kind::Nn => "nn (conv, pool)",
            Kind::Random => "random",
            Kind::Custom => "custom WGSL",
            Kind::Transfer => "transfer",
        }
    }

    /// Light fills, so that black labels stay readable on every one.
    fn colour(self) -> &'static str {
        match self {
            Kind::Feed => "#c7c7c7",
            Kind::Elementwise => "#9ecae1",
            Kind::Reduce => "#fdae6b",
            Kind::MatMul => "#a1d99b",
            Kind::Movement => "#fde68a",
            Kind::Nn => "#f4a6c8",
            Kind::Random => "#c6b3e6",
            Kind::Custom => "#f08c7a",
            Kind::Transfer => "#80cbc4",
        }
    }

    fn of_kernel(k: &Kernel) -> Kind {
        match k.as_dyn().class() {
            KernelClass::Elementwise => Kind::Elementwise,
            KernelClass::Reduce => Kind::Reduce,
            KernelClass::MatMul => Kind::MatMul,
            KernelClass::Movement => Kind::Movement,
            KernelClass::Nn => Kind::Nn,
            KernelClass::Random => Kind::Random,
            KernelClass::Custom => Kind::Custom,
        }
    }
}

/// The step that writes each value.
fn producers(plan: &Plan) -> BTreeMap<ValueId, StepId> {
    let mut p = BTreeMap::new();
    for (i, s) in plan.steps.iter_enumerated() {
        p.entry(s.output).or_insert(i);
    }
    p
}

fn kind_of(plan: &Plan, producer: &BTreeMap<ValueId, StepId>, v: ValueId) -> Kind {
    if let Some(&i) = producer.get(&v) {
        return match &plan.steps[i].kind {
            StepKind::Dispatch { kernel, .. } => Kind::of_kernel(kernel),
            StepKind::Transfer { .. } => Kind::Transfer,
        };
    }
    // Arena values are feeds or step outputs; anything else is drawn as a feed.
    Kind::Feed
}

impl Plan {
    /// The memory plan as an SVG picture: for each device (one panel each, stacked), the
    /// schedule's steps run left to right and arena offsets bottom to top; every arena value
    /// is a box from the step that writes it to its last reader, coloured by the kind of
    /// kernel that produced it, with its name when it fits and its details on hover. Lines
    /// mark the arena size (peak) and the live-bytes lower bound. Values written in place
    /// over a dying input take over its box half-way through the step that hands it over.
    ///
    /// ```
    /// # use wgflow::{Graph, Session, SessionOptions, DType, Device};
    /// # fn main() -> wgflow::Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.placeholder("x", [256], DType::F32)?;
    /// let y = g.exp(x)?;
    /// let options = SessionOptions { default_device: Some(Device::Cpu), ..Default::default() };
    /// let plan = Session::new(&g, options)?.compile_only(&[y])?;
    /// let svg = plan.memory_svg(); // write it to a file and open it in a browser
    /// assert!(svg.starts_with("<svg"));
    /// # Ok(()) }
    /// ```
    pub fn memory_svg(&self) -> String {
        let producer = producers(self);
        let kinds: BTreeSet<Kind> = self
            .memory
            .values()
            .flat_map(|m| m.offsets.keys())
            .map(|&v| kind_of(self, &producer, v))
            .collect();
        let mut body = String::new();
        let in_place = self.memory.values().any(|m| !m.in_place.is_empty());
        let mut y = header(&mut body, &kinds, in_place);
        for (&device, mp) in &self.memory {
            y = panel(&mut body, self, &producer, device, mp, y) + 16.0;
        }
        if self.memory.is_empty() {
            let _ = writeln!(
                body,
                r#"<text x="{}" y="{}">no memory plan</text>"#,
                num(LEFT),
                num(y + 16.0)
            );
            y += 32.0;
        }
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#,
            w = num(WIDTH),
            h = num(y)
        );
        s.push_str(
            "<style>.value:hover{stroke:#000;stroke-width:2}.label{pointer-events:none}</style>\n",
        );
        let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#fff"/>"##);
        s.push_str(&body);
        s.push_str("</svg>\n");
        s
    }
}

/// Title, how to read the picture, and the legend. Returns where the first panel starts.
fn header(s: &mut String, kinds: &BTreeSet<Kind>, in_place: bool) -> f64 {
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" font-weight="bold">wgflow memory plan</text>"#,
        num(LEFT)
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="42" fill="#444">Each box is one arena value: from the step that writes it to the step that last reads it (out: fetched), at its offset in the arena.</text>"##,
        num(LEFT)
    );
    // The legend flows left to right and wraps.
    let mut items: Vec<(String, String)> = kinds
        .iter()
        .map(|k| {
            (
                format!(
                    r##"<rect width="14" height="14" y="-11" fill="{}" stroke="#555" stroke-width="0.75"/>"##,
                    k.colour()
                ),
                k.name().to_string(),
            )
        })
        .collect();
    items.push((
        r##"<line x1="0" x2="14" y1="-4" y2="-4" stroke="#d62728" stroke-width="2"/>"##.into(),
        "peak (arena size)".into(),
    ));
    items.push((
        r##"<line x1="0" x2="14" y1="-4" y2="-4" stroke="#1f3b73" stroke-width="2" stroke-dasharray="4 3"/>"##.into(),
        "lower bound (most bytes live at once)".into(),
    ));
    if in_place {
        items.push((
            r##"<line x1="7" x2="7" y1="-12" y2="3" stroke="#222" stroke-width="1.5" stroke-dasharray="3 2"/>"##.into(),
            "written in place (takes over the slot mid-step)".into(),
        ));
    }
    items.push((
        r##"<rect width="14" height="14" y="-11" fill="#eef0f4"/>"##.into(),
        "step runs on this device".into(),
    ));
    let (mut x, mut y) = (LEFT, 66.0);
    s.push_str("<g class=\"legend\">\n");
    for (mark, text) in items {
        // DejaVu Sans at 12 px averages about 7 px a character.
        let w = 20.0 + text.chars().count() as f64 * 6.8 + 14.0;
        if x + w > WIDTH - 10.0 && x > LEFT {
            x = LEFT;
            y += 20.0;
        }
        let _ = writeln!(
            s,
            r#"<g transform="translate({},{})">{mark}<text x="20">{}</text></g>"#,
            num(x),
            num(y),
            escape(&text)
        );
        x += w;
    }
    s.push_str("</g>\n");
    y + 16.0
}

/// One device's panel, starting at `top`. Returns its bottom.
fn panel(
    s: &mut String,
    plan: &Plan,
    producer: &BTreeMap<ValueId, StepId>,
    device: Device,
    mp: &MemoryPlan,
    top: f64,
) -> f64 {
    let plot_x = LEFT;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_y = top + PANEL_TOP;
    // Columns: one per step, then `out` (fetched values live past the last step).
    let cols = plan.steps.len() + 1;
    let col_w = plot_w / cols as f64;
    let left = |c: usize| plot_x + c as f64 * col_w;
    let size = |v: ValueId| plan.values[v].bytes().next_multiple_of(mp.alignment.max(1));
    let ticks = ByteTicks::new(mp.peak_bytes.max(mp.lower_bound_bytes));
    let y_of = |bytes: u64| plot_y + PLOT_H - bytes as f64 * PLOT_H / ticks.top as f64;

    let _ = writeln!(
        s,
        r#"<g class="panel" data-device="{d}" data-peak-bytes="{}" data-lower-bound-bytes="{}">"#,
        mp.peak_bytes,
        mp.lower_bound_bytes,
        d = escape(&device.to_string())
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        num(plot_x),
        num(top + 18.0),
        escape(&device.to_string())
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" fill="#444">arena (peak) {}, lower bound {}, without reuse {}, constants {} (outside the arena), offsets aligned to {}</text>"##,
        num(plot_x),
        num(top + 36.0),
        bytes_text(mp.peak_bytes),
        bytes_text(mp.lower_bound_bytes),
        bytes_text(mp.no_reuse_bytes),
        bytes_text(mp.constant_bytes),
        bytes_text(mp.alignment)
    );
    // The plot area carries its scale, so that tests and tools can read positions back.
    let _ = writeln!(
        s,
        r##"<rect class="plot" x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#888" data-bytes-top="{}"/>"##,
        num(plot_x),
        num(plot_y),
        num(plot_w),
        num(PLOT_H),
        ticks.top
    );
    // Steps that run on this device, shaded in runs.
    let steps = plan.steps.as_slice();
    let mut c = 0;
    while c < steps.len() {
        if steps[c].device != device {
            c += 1;
            continue;
        }
        let start = c;
        while c < steps.len() && steps[c].device == device {
            c += 1;
        }
        let _ = writeln!(
            s,
            r##"<rect class="device-steps" x="{}" y="{}" width="{}" height="{}" fill="#eef0f4"/>"##,
            num(left(start)),
            num(plot_y),
            num(left(c) - left(start)),
            num(PLOT_H)
        );
    }
    // Grid: byte ticks across, step boundaries down (when columns are wide enough to see).
    for (b, label) in ticks.ticks() {
        let y = y_of(b);
        let _ = writeln!(
            s,
            r##"<line x1="{}" x2="{}" y1="{y}" y2="{y}" stroke="#d0d0d0" stroke-width="0.5"/><text x="{}" y="{}" text-anchor="end" font-size="11">{}</text>"##,
            num(plot_x - 4.0),
            num(plot_x + plot_w),
            num(plot_x - 7.0),
            num(y + 4.0),
            escape(&label),
            y = num(y)
        );
    }
    if col_w >= 6.0 {
        for c in 1..cols {
            let _ = writeln!(
                s,
                r##"<line x1="{x}" x2="{x}" y1="{}" y2="{}" stroke="#d0d0d0" stroke-width="0.5"/>"##,
                num(plot_y),
                num(plot_y + PLOT_H),
                x = num(left(c))
            );
        }
    }
    step_ticks(s, cols, col_w, plot_x, plot_y + PLOT_H);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#444">schedule step</text>"##,
        num(plot_x + plot_w / 2.0),
        num(plot_y + PLOT_H + 34.0)
    );
    let _ = writeln!(
        s,
        r##"<text transform="translate({},{}) rotate(-90)" text-anchor="middle" fill="#444">arena offset</text>"##,
        num(16.0),
        num(plot_y + PLOT_H / 2.0)
    );

    // The values. An in-place pair shares the handoff step: the input's box ends and the
    // output's begins at the middle of its column, so the two never cover each other.
    let replaced: BTreeMap<ValueId, ValueId> = mp.in_place.iter().map(|(&o, &i)| (i, o)).collect();
    let mut labels = String::new();
    let mut handoffs = String::new();
    for (&v, &offset) in &mp.offsets {
        let Some((first, last)) = mp.lifetimes.get(&v).map(|(f, l)| (f.index(), l.index())) else {
            continue;
        };
        let value = &plan.values[v];
        let kind = kind_of(plan, producer, v);
        let x0 = if mp.in_place.contains_key(&v) {
            left(first) + col_w / 2.0
        } else {
            left(first)
        };
        let x1 = if replaced.contains_key(&v) {
            left(last) + col_w / 2.0
        } else {
            left(last + 1)
        };
        // Round the edges, not the sizes, so that boxes that touch share an edge exactly.
        let (x0, x1) = (round(x0), round(x1));
        let (y0, y1) = (round(y_of(offset + size(v))), round(y_of(offset)));
        let title = hover(plan, producer, mp, v, offset, size(v));
        let _ = writeln!(
            s,
            r##"<rect class="value" data-value="{v}" data-offset="{offset}" data-bytes="{}" data-first="{first}" data-last="{last}" x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="#555" stroke-width="0.75"><title>{}</title></rect>"##,
            size(v),
            num(x0),
            num(y0),
            num(x1 - x0),
            num(y1 - y0),
            kind.colour(),
            escape(&title)
        );
        if let Some(&input) = mp.in_place.get(&v) {
            let _ = writeln!(
                handoffs,
                r##"<line class="handoff" data-value="{v}" data-input="{input}" x1="{x}" x2="{x}" y1="{}" y2="{}" stroke="#222" stroke-width="1.5" stroke-dasharray="3 2"/>"##,
                num(y0),
                num(y1),
                x = num(x0)
            );
        }
        label(&mut labels, value, x0, x1, y0, y1);
    }
    s.push_str(&handoffs);
    s.push_str(&labels);

    // Peak and lower bound: lines across the plot, labelled in the right margin (the peak's
    // label above its line, the bound's below, so they never collide: the bound is lower).
    for (class, bytes, text, colour, dash, dy) in [
        ("peak", mp.peak_bytes, "peak", "#d62728", "", -4.0),
        (
            "lower-bound",
            mp.lower_bound_bytes,
            "lower bound",
            "#1f3b73",
            r#" stroke-dasharray="6 4""#,
            13.0,
        ),
    ] {
        let y = y_of(bytes);
        let _ = writeln!(
            s,
            r#"<line class="{class}" data-bytes="{bytes}" x1="{}" x2="{}" y1="{y}" y2="{y}" stroke="{colour}" stroke-width="1.5"{dash}/><text x="{}" y="{}" fill="{colour}">{text} {}</text>"#,
            num(plot_x),
            num(plot_x + plot_w + 6.0),
            num(plot_x + plot_w + 8.0),
            num(y + dy),
            bytes_text(bytes),
            y = num(y)
        );
    }
    s.push_str("</g>\n");
    plot_y + PLOT_H + PANEL_BOTTOM
}

/// Step numbers under the plot: every k-th step, k chosen so that labels do not touch.
fn step_ticks(s: &mut String, cols: usize, col_w: f64, plot_x: f64, bottom: f64) {
    let steps = cols - 1;
    let every = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
        .into_iter()
        .find(|&k| k as f64 * col_w >= 30.0)
        .unwrap_or(10_000);
    let centre = |c: usize| plot_x + (c as f64 + 0.5) * col_w;
    for c in (0..steps).step_by(every) {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="11">{c}</text>"##,
            num(centre(c)),
            num(bottom + 15.0)
        );
    }
    if col_w >= 22.0 {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="11" fill="#444">out</text>"##,
            num(centre(steps)),
            num(bottom + 15.0)
        );
    }
}

/// The value's name inside its box when it fits (else the last part of a scoped name), and
/// its type on a second line when there is room.
fn label(s: &mut String, value: &crate::compile::Value, x0: f64, x1: f64, y0: f64, y1: f64) {
    let (w, h) = (x1 - x0, y1 - y0);
    let fits = |t: &str| t.chars().count() as f64 * LABEL_PX * 0.6 + 6.0 <= w;
    if h < LABEL_PX + 2.0 {
        return;
    }
    let short = value.name.rsplit('/').next().unwrap_or(&value.name);
    let Some(name) = [value.name.as_str(), short].into_iter().find(|t| fits(t)) else {
        return;
    };
    let ty = format!("{} {}", value.dtype, value.shape);
    let two = h >= 2.0 * LABEL_PX + 6.0 && fits(&ty);
    let cx = num((x0 + x1) / 2.0);
    let mid = (y0 + y1) / 2.0;
    let first = if two {
        mid - 2.0
    } else {
        mid + LABEL_PX * 0.35
    };
    let _ = writeln!(
        s,
        r#"<text class="label" x="{cx}" y="{}" text-anchor="middle" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{}">{}</text>"#,
        num(first),
        num(LABEL_PX),
        escape(name)
    );
    if two {
        let _ = writeln!(
            s,
            r##"<text class="label" x="{cx}" y="{}" text-anchor="middle" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{}" fill="#333">{}</text>"##,
            num(first + LABEL_PX + 2.0),
            num(LABEL_PX - 1.0),
            escape(&ty)
        );
    }
}

/// The hover text of a value's box.
fn hover(
    plan: &Plan,
    producer: &BTreeMap<ValueId, StepId>,
    mp: &MemoryPlan,
    v: ValueId,
    offset: u64,
    slot: u64,
) -> String {
    let value = &plan.values[v];
    let (first, last) = mp.lifetimes[&v];
    let (first, last) = (first.index(), last.index());
    let end = if last >= plan.steps.len() {
        "out (fetched)".to_string()
    } else {
        last.to_string()
    };
    let mut t = format!(
        "{} (value {v})\n{} {}, {} B (slot {} B at offset {offset})\nalive: steps {first} to {end}",
        value.name,
        value.dtype,
        value.shape,
        value.bytes(),
        slot,
    );
    match (&value.source, producer.get(&v)) {
        (Source::Feed(name), _) => {
            let _ = write!(t, "\nfeed of placeholder {name}");
        }
        (_, Some(&i)) => {
            let step = &plan.steps[i];
            let what = match &step.kind {
                StepKind::Dispatch { kernel, .. } => kernel.describe(),
                StepKind::Transfer { src } => format!("transfer from {}", plan.values[*src].device),
            };
            let _ = write!(t, "\nwritten by step {i}: {what}");
            if step.nodes.len() > 1 {
                let _ = write!(t, "\nnodes: {}", step.nodes.join(", "));
            }
        }
        _ => {}
    }
    if let Some(&input) = mp.in_place.get(&v) {
        let _ = write!(t, "\nwritten in place over {}", plan.values[input].name);
    }
    let views: Vec<&str> = plan
        .values_by_id()
        .filter(|&(w, x)| matches!(x.source, Source::View(_)) && plan.root(w) == v)
        .map(|(_, x)| x.name.as_str())
        .collect();
    if !views.is_empty() {
        let _ = write!(t, "\nviews: {}", views.join(", "));
    }
    t
}

/// Byte ticks in one unit (B, KiB, MiB or GiB) at a round step; `top` is the byte count
/// at the top of the plot (a whole number of steps, a little above the largest value).
struct ByteTicks {
    unit: u64,
    step: f64,
    top: u64,
}

impl ByteTicks {
    fn new(max: u64) -> ByteTicks {
        let max = max.max(1);
        let unit = [1u64 << 30, 1 << 20, 1 << 10, 1]
            .into_iter()
            .find(|&u| max >= u)
            .unwrap_or(1);
        let raw = max as f64 / unit as f64 / 4.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .into_iter()
            .map(|m| m * mag)
            .find(|&st| st >= raw)
            .unwrap_or(10.0 * mag);
        // Whole bytes: a step under one byte only happens for tiny arenas.
        let step = if unit == 1 {
            step.max(1.0).ceil()
        } else {
            step
        };
        let step_bytes = step * unit as f64;
        let n = ((max as f64 * 1.06) / step_bytes).ceil().max(1.0);
        ByteTicks {
            unit,
            step,
            top: (n * step_bytes).round() as u64,
        }
    }

    /// `(bytes, label)` of each tick from 0 to the top.
    fn ticks(&self) -> Vec<(u64, String)> {
        let n = (self.top as f64 / (self.step * self.unit as f64)).round() as u64;
        (0..=n)
            .map(|i| {
                let units = i as f64 * self.step;
                let bytes = (units * self.unit as f64).round() as u64;
                let name = match self.unit {
                    1 => "B",
                    1024 => "KiB",
                    1048576 => "MiB",
                    _ => "GiB",
                };
                let label = if bytes == 0 {
                    "0".to_string()
                } else {
                    format!("{} {name}", trim(units))
                };
                (bytes, label)
            })
            .collect()
    }
}

/// `1536` → `1.5 KiB`; exact bytes below 1 KiB.
fn bytes_text(b: u64) -> String {
    match b {
        0..1024 => format!("{b} B"),
        1024..1048576 => format!("{} KiB", trim(b as f64 / 1024.0)),
        1048576..1073741824 => format!("{} MiB", trim(b as f64 / 1048576.0)),
        _ => format!("{} GiB", trim(b as f64 / 1073741824.0)),
    }
}

/// At most two decimals, no trailing zeros: `1.50` → `1.5`, `2.00` → `2`.
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// `x` to the 0.01 px that [`num`] prints.
fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A coordinate, at a fixed precision so output is reproducible.
fn num(x: f64) -> String {
    trim(x)
}

/// Escape text for XML content and double- or single-quoted attributes. Node names come
/// from users (and graph files), so every name goes through here.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab and newline are not allowed in XML 1.0.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape("<script>&\"'\u{1}"),
            "&lt;script&gt;&amp;&quot;&apos;\u{fffd}"
        );
    }

    #[test]
    fn byte_ticks_are_round_and_cover_the_peak() {
        let t = ByteTicks::new(176);
        assert_eq!(t.top, 200);
        assert_eq!(t.ticks().last().unwrap(), &(200, "200 B".to_string()));
        let t = ByteTicks::new(3 << 20);
        assert!(t.top >= 3 << 20);
        assert_eq!(t.ticks()[0], (0, "0".to_string()));
        assert!(t.ticks()[1..].iter().all(|(_, l)| l.ends_with("MiB")));
        assert!(ByteTicks::new(0).top >= 1);
        assert_eq!(bytes_text(1536), "1.5 KiB");
        assert_eq!(trim(2.0), "2");
    }
}
