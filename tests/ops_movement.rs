//! Movement ops (squeeze, expand_dims, broadcast_to, slice, flip, concat, stack, split, pad,
//! tile, take, one_hot) against NumPy goldens (`tests/golden/movement.json`, from
//! `tests/golden/gen_nn.py`) on `cpu:0`, then every GPU against `cpu:0`.

mod common;
mod nn_common;

use nn_common::{ints, Case};
use serde_json::Value as Json;
use wgflow::{Axes, Graph, PadMode, SliceArg, Tensor};

const GOLDEN: &str = include_str!("golden/movement.json");

fn opt(v: &Json) -> Option<isize> {
    v.as_i64().map(|v| v as isize)
}

fn build(g: &mut Graph, c: &Case, x: &[Tensor]) -> wgflow::Result<Tensor> {
    let a = &c.attrs;
    let int = |k: &str| a[k].as_i64().unwrap() as isize;
    match c.op.as_str() {
        "squeeze" => match &a["axes"] {
            Json::Null => g.squeeze(x[0], None),
            v => g.squeeze(x[0], Some(&ints(v))),
        },
        "expand_dims" => g.expand_dims(x[0], int("axis")),
        "broadcast_to" => {
            let s: Vec<usize> = ints(&a["shape"]).iter().map(|&d| d as usize).collect();
            g.broadcast_to(x[0], &s)
        }
        "slice" => {
            let args: Vec<SliceArg> = a["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| SliceArg::new(opt(&s[0]), opt(&s[1]), s[2].as_i64().unwrap() as isize))
                .collect();
            g.slice(x[0], &args)
        }
        "flip" => match &a["axes"] {
            Json::Null => g.flip(x[0], Axes::All),
            v => g.flip(x[0], ints(v)),
        },
        "concat" => g.concat(x, int("axis")),
        "stack" => g.stack(x, int("axis")),
        "split" => {
            let parts = g.split(x[0], a["sections"].as_u64().unwrap() as usize, int("axis"))?;
            Ok(parts[a["part"].as_u64().unwrap() as usize])
        }
        "pad" => {
            let pads: Vec<(usize, usize)> = a["pads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p[0].as_u64().unwrap() as usize,
                        p[1].as_u64().unwrap() as usize,
                    )
                })
                .collect();
            let mode = match a["mode"].as_str().unwrap() {
                "constant" => PadMode::Constant(a["value"].as_f64().unwrap()),
                _ => PadMode::Reflect,
            };
            g.pad(x[0], &pads, mode)
        }
        "tile" => {
            let reps: Vec<usize> = ints(&a["reps"]).iter().map(|&d| d as usize).collect();
            g.tile(x[0], &reps)
        }
        "take" => g.take(x[0], x[1], int("axis")),
        "one_hot" => g.one_hot(x[0], a["depth"].as_u64().unwrap() as usize),
        other => panic!("golden op {other} has no builder"),
    }
}

const OPS: &[&str] = &[
    "squeeze",
    "expand_dims",
    "broadcast_to",
    "slice",
    "flip",
    "concat",
    "stack",
    "split",
    "pad",
    "tile",
    "take",
    "one_hot",
];

#[test]
fn movement_ops_on_cpu_match_numpy() {
    let b = nn_common::build_all(GOLDEN, build);
    assert!(b.cases.len() > 50, "golden file looks truncated");
    nn_common::check_cpu(&b, OPS);
}

#[test]
fn movement_ops_on_every_gpu_match_cpu() {
    let b = nn_common::build_all(GOLDEN, build);
    nn_common::check_gpus(&b);
}
