//! The memory plan as a picture (`Plan::memory_svg`): the SVG is well-formed XML, draws
//! exactly one box per arena value per device at its planned offset and lifetime, no two
//! boxes cover each other, the peak and lower-bound lines sit at their byte counts, and
//! user-chosen names are escaped. Plans are compiled only: no device is needed.
//!
//! `docs/memory_mlp.svg` is the picture of `graph-examples/mlp.json` on `cpu:0`; the test
//! below fails when it is stale. Regenerate it with
//! `WGFLOW_REGEN=1 cargo test --release --test memory_svg`.

use crate::common;

use roxmltree::{Document, Node};
use std::collections::{BTreeMap, BTreeSet};
use wgflow::compile::{Plan, ValueId};
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

/// A session whose unscoped nodes go to `cpu:0`.
fn cpu_session(g: &Graph, fuse: bool) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            visible_devices: Some(common::gpu_indices()),
            fuse,
            ..Default::default()
        },
    )
    .unwrap()
}

fn attr(n: Node, name: &str) -> f64 {
    n.attribute(name)
        .unwrap_or_else(|| panic!("<{}> has no {name}", n.tag_name().name()))
        .parse()
        .unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.02
}

/// A value's box as drawn.
#[derive(Debug)]
struct DrawnBox {
    value: ValueId,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    title: String,
}

/// Parse `svg` and check it against `plan`; returns the boxes by device name. With
/// `WGFLOW_SVG_DIR` set, each picture is also written there (as `<what>.svg`) to look at.
fn check(what: &str, plan: &Plan, svg: &str) -> BTreeMap<String, Vec<DrawnBox>> {
    if let Ok(dir) = std::env::var("WGFLOW_SVG_DIR") {
        std::fs::write(std::path::Path::new(&dir).join(format!("{what}.svg")), svg).unwrap();
    }
    let doc = Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let panels: Vec<Node> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .collect();
    assert_eq!(panels.len(), plan.memory.len(), "one panel per device");
    let mut out = BTreeMap::new();
    for (panel, (device, mp)) in panels.iter().zip(&plan.memory) {
        let name = device.to_string();
        assert_eq!(panel.attribute("data-device"), Some(name.as_str()));
        let plot = panel
            .descendants()
            .find(|n| n.attribute("class") == Some("plot"))
            .expect("plot area");
        let (px, py, pw, ph) = (
            attr(plot, "x"),
            attr(plot, "y"),
            attr(plot, "width"),
            attr(plot, "height"),
        );
        let top = attr(plot, "data-bytes-top");
        assert!(
            top >= mp.peak_bytes as f64,
            "{name}: the plot holds the peak"
        );
        let y_of = |b: u64| py + ph - b as f64 * ph / top;
        let col = pw / (plan.steps.len() + 1) as f64;

        // One box per arena value, at its offset, size and lifetime.
        let mut boxes = Vec::new();
        for r in panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("value"))
        {
            assert_eq!(r.tag_name().name(), "rect");
            let v = ValueId::new(r.attribute("data-value").unwrap().parse().unwrap());
            let size = plan.values[v].bytes().next_multiple_of(mp.alignment);
            let offset = mp.offsets[&v];
            let (first, last) = mp.lifetimes[&v];
            let (first, last) = (first.index(), last.index());
            let b = DrawnBox {
                value: v,
                x0: attr(r, "x"),
                x1: attr(r, "x") + attr(r, "width"),
                y0: attr(r, "y"),
                y1: attr(r, "y") + attr(r, "height"),
                title: r
                    .children()
                    .find(|c| c.has_tag_name("title"))
                    .and_then(|t| t.text())
                    .unwrap_or_default()
                    .to_string(),
            };
            assert!(close(b.y0, y_of(offset + size)), "{name} value {v}: top");
            assert!(close(b.y1, y_of(offset)), "{name} value {v}: bottom");
            let half = if mp.in_place.contains_key(&v) {
                0.5
            } else {
                0.0
            };
            assert!(
                close(b.x0, px + (first as f64 + half) * col),
                "{name} value {v}: start"
            );
            let replaced = mp.in_place.values().any(|&i| i == v);
            let end = if replaced {
                last as f64 + 0.5
            } else {
                last as f64 + 1.0
            };
            assert!(close(b.x1, px + end * col), "{name} value {v}: end");
            assert!(b.x1 > b.x0, "{name} value {v}: empty box");
            assert!(
                b.title.starts_with(&plan.values[v].name),
                "{name} value {v}: hover names it: {:?}",
                b.title
            );
            assert!(b.title.contains(&format!("{} B", plan.values[v].bytes())));
            boxes.push(b);
        }
        let drawn: Vec<ValueId> = boxes.iter().map(|b| b.value).collect();
        let unique: BTreeSet<ValueId> = drawn.iter().copied().collect();
        assert_eq!(drawn.len(), unique.len(), "{name}: a value drawn twice");
        assert_eq!(
            unique,
            mp.offsets.keys().copied().collect::<BTreeSet<_>>(),
            "{name}: one box per arena value"
        );

        // Values alive together never overlap; an in-place pair shares its handoff step, but
        // the picture splits that step between them, so no two boxes cover each other at all.
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                // Coordinates are printed to 0.01 px: edges that touch may cross by that.
                let across = a.x1.min(b.x1) - a.x0.max(b.x0);
                let down = a.y1.min(b.y1) - a.y0.max(b.y0);
                assert!(
                    across <= 0.02 || down <= 0.02,
                    "{name}: boxes of values {} and {} overlap:\n{a:?}\n{b:?}\n{}",
                    a.value,
                    b.value,
                    plan.describe()
                );
            }
        }

        // The peak and lower-bound lines at their byte counts on the plot's scale.
        for (class, bytes) in [
            ("peak", mp.peak_bytes),
            ("lower-bound", mp.lower_bound_bytes),
        ] {
            let line = panel
                .descendants()
                .find(|n| n.attribute("class") == Some(class))
                .unwrap_or_else(|| panic!("{name}: no {class} line"));
            assert!(close(attr(line, "y1"), y_of(bytes)), "{name}: {class} line");
            assert_eq!(
                attr(line, "y1"),
                attr(line, "y2"),
                "{name}: {class} is level"
            );
        }
        // The peak is the top of the highest box.
        if let Some(top_box) = boxes.iter().map(|b| b.y0).reduce(f64::min) {
            assert!(close(top_box, y_of(mp.peak_bytes)), "{name}: peak vs boxes");
        }
        let handoffs = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("handoff"))
            .count();
        assert_eq!(
            handoffs,
            mp.in_place.len(),
            "{name}: one mark per in-place value"
        );
        out.insert(name, boxes);
    }
    assert_eq!(plan.memory_svg(), svg, "the same plan draws the same bytes");
    out
}

fn mlp(g: &mut Graph) -> Tensor {
    let x = g.placeholder("x", [16, 32], DType::F32).unwrap();
    let mut h = x;
    for (i, (k, n)) in [(32, 64), (64, 64), (64, 10)].into_iter().enumerate() {
        h = g
            .name_scope(&format!("layer{i}"), |g| {
                let w = g.constant(HostTensor::new([k, n], vec![0.01f32; k * n])?)?;
                let b = g.constant(HostTensor::new([n], vec![0.1f32; n])?)?;
                let m = g.matmul(h, w)?;
                let a = g.add(m, b)?;
                if i < 2 {
                    g.relu(a)
                } else {
                    g.softmax(a, -1)
                }
            })
            .unwrap();
    }
    h
}

#[test]
fn an_mlp_draws_one_box_per_arena_value() {
    let mut g = Graph::new();
    let y = mlp(&mut g);
    for fuse in [true, false] {
        let plan = cpu_session(&g, fuse).compile_only(&[y]).unwrap();
        let boxes = check(&format!("mlp_fuse_{fuse}"), &plan, &plan.memory_svg());
        assert_eq!(boxes.keys().collect::<Vec<_>>(), ["cpu:0"]);
        assert!(!boxes["cpu:0"].is_empty());
    }
}

/// Unfused, a chain of unary ops writes each value in place over the one before: every
/// value is its own box, handing the slot over half-way through the step.
#[test]
fn an_in_place_chain_shares_one_slot_without_overlapping_boxes() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [1024], DType::F32).unwrap();
    let mut t = x;
    for i in 0..12 {
        t = if i % 2 == 0 { g.neg(t) } else { g.exp(t) }.unwrap();
    }
    let plan = cpu_session(&g, false).compile_only(&[t]).unwrap();
    let mp = plan.memory(Device::Cpu).unwrap();
    assert_eq!(mp.in_place.len(), 12, "{}", plan.describe());
    let svg = plan.memory_svg();
    let boxes = check("in_place_chain", &plan, &svg);
    assert_eq!(boxes["cpu:0"].len(), 13);
    // All in one slot: every box spans the same bytes.
    let b0 = &boxes["cpu:0"][0];
    assert!(boxes["cpu:0"]
        .iter()
        .all(|b| close(b.y0, b0.y0) && close(b.y1, b0.y1)));
}

/// A branchy graph where some values outlive others: checks reuse of freed slots.
#[test]
fn values_alive_together_are_drawn_apart() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [64, 64], DType::F32).unwrap();
    let a = g.transpose(x, &[1, 0]).unwrap();
    let b = g.exp(a).unwrap();
    let c = g.matmul(b, x).unwrap();
    let d = g.sum(c, [1], false).unwrap();
    let e = g.transpose(c, &[1, 0]).unwrap();
    let f = g.matmul(e, a).unwrap();
    for fuse in [true, false] {
        let plan = cpu_session(&g, fuse).compile_only(&[d, f]).unwrap();
        check(&format!("branches_fuse_{fuse}"), &plan, &plan.memory_svg());
    }
}

#[test]
fn hostile_names_are_escaped() {
    let hostile = "<script>&\"'";
    let mut g = Graph::new();
    let x = g.placeholder(hostile, [8], DType::F32).unwrap();
    let y = g.name_scope(hostile, |g| g.exp(x)).unwrap();
    let plan = cpu_session(&g, true).compile_only(&[y]).unwrap();
    let svg = plan.memory_svg();
    assert!(!svg.contains("<script"), "{svg}");
    let boxes = check("hostile", &plan, &svg);
    // The parser gives the name back unharmed.
    assert!(
        boxes["cpu:0"].iter().any(|b| b.title.starts_with(hostile)),
        "{:?}",
        boxes["cpu:0"]
    );
}

/// Work split over `cpu:0` and `gpu:0`: two panels, each with its own arena.
#[test]
fn a_plan_over_two_devices_draws_two_panels() {
    let Some(gpu) = common::gpus().into_iter().next() else {
        return;
    };
    let mut g = Graph::new();
    let x = g.placeholder("x", [32, 32], DType::F32).unwrap();
    let h = g
        .device(&gpu.to_string(), |g| {
            let a = g.matmul(x, x)?;
            g.relu(a)
        })
        .unwrap();
    let y = g.sum(h, [0], false).unwrap();
    let z = g.exp(y).unwrap();
    let plan = cpu_session(&g, true).compile_only(&[z]).unwrap();
    assert_eq!(plan.memory.len(), 2, "{}", plan.describe());
    let boxes = check("two_devices", &plan, &plan.memory_svg());
    assert_eq!(boxes.len(), 2);
    assert!(boxes.contains_key("cpu:0") && boxes.contains_key(&gpu.to_string()));
}

/// The picture in docs/ is the one the code draws today (or, with `WGFLOW_REGEN=1`, becomes it).
#[test]
fn the_docs_picture_of_the_mlp_is_up_to_date() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let g = Graph::load(root.join("graph-examples/mlp.json")).unwrap();
    let out = g.tensor("layer2/add").unwrap();
    let s = Session::new(
        &g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            visible_devices: Some(vec![]),
            ..Default::default()
        },
    )
    .unwrap();
    let plan = s.compile_only(&[out]).unwrap();
    let svg = plan.memory_svg();
    check("docs_mlp", &plan, &svg);
    let path = root.join("docs/memory_mlp.svg");
    if std::env::var("WGFLOW_REGEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &svg).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == svg,
        "{} is stale: regenerate it with WGFLOW_REGEN=1 cargo test --release --test memory_svg",
        path.display()
    );
}
