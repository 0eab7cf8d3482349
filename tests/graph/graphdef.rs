//! GraphDef files: save/load round trips give the same plan and results, the committed
//! example graphs match the builder API, and hostile files are errors naming the place.

use crate::common;
use crate::common::Rng;
#[path = "../graphdef/every_new_op.rs"]
mod every_new_op;
#[path = "../example_graphs/mod.rs"]
mod example_graphs;
#[path = "../graphdef/state.rs"]
mod state;

use every_new_op::every_new_op;
use std::time::{Duration, Instant};
use wgflow::graph::def::{def_from_json, def_to_json};
use wgflow::ops::Leaf;
use wgflow::{DType, Device, Error, Graph, HostTensor, Session, SessionOptions, Tensor};

/// A graph that uses every op, every dtype, scopes, non-finite and base64 constants.
fn every_op() -> (Graph, Vec<(Tensor, HostTensor)>, Vec<Tensor>) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3], DType::F32).unwrap();
    let pos = g.constant([[0.5f32, 1.0, 2.0], [4.0, 0.1, 3.0]]).unwrap();
    let odd = g
        .constant([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e-45,
            3.4e38,
        ])
        .unwrap();
    let big: Vec<f32> = (0..2000).map(|i| (i as f32 * 0.37).sin()).collect();
    let big = g.constant(big).unwrap();
    let ints = g.constant([-3i32, 7, i32::MIN]).unwrap();
    let uints = g.constant([1u32, u32::MAX, 5]).unwrap();
    let bools = g.constant([true, false, true]).unwrap();
    let mut fetches = vec![odd, ints, uints, bools];
    let y = g
        .name_scope("unary", |g| {
            let mut y = g.neg(x)?;
            y = g.abs(y)?;
            y = g.exp(y)?;
            y = g.log(y)?;
            y = g.sqrt(y)?;
            y = g.tanh(y)?;
            y = g.sigmoid(y)?;
            g.relu(y)
        })
        .unwrap();
    fetches.push(y);
    let b = g
        .device("gpu:0", |g| {
            let mut v = vec![g.add(x, pos)?, g.sub(x, pos)?, g.mul(x, pos)?];
            v.push(g.div(x, pos)?);
            v.push(g.maximum(x, pos)?);
            v.push(g.minimum(x, pos)?);
            v.push(g.pow(pos, x)?);
            Ok(v)
        })
        .unwrap();
    fetches.extend(&b);
    let eq = g.equal(x, pos).unwrap();
    let lt = g.less(x, pos).unwrap();
    let gt = g.greater(x, pos).unwrap();
    let sel = g.select(lt, x, pos).unwrap();
    let cast = g.cast(x, DType::I32).unwrap();
    let ucast = g.cast(ints, DType::U32).unwrap();
    fetches.extend([eq, gt, sel, cast, ucast]);
    let s = g.device("cpu:0", |g| g.sum(x, [1], false)).unwrap();
    let m = g.mean(x, [0], true).unwrap();
    let mx = g.max(x, wgflow::Axes::All, false).unwrap();
    let mn = g.min(ints, [0], true).unwrap();
    let big_sum = g.sum(big, [0], false).unwrap();
    let xt = g.transpose(x, &[1, 0]).unwrap();
    let mm = g.matmul(x, xt).unwrap();
    let id = g.transpose(x, &[0, 1]).unwrap();
    let r = g.reshape(id, &[3, -1]).unwrap();
    let sm = g.softmax(r, -1).unwrap();
    fetches.extend([s, m, mx, mn, big_sum, mm, sm]);
    let feed = HostTensor::new([2, 3], vec![-1.5f32, 0.0, 2.25, 3.0, -0.5, 1.0]).unwrap();
    (g, vec![(x, feed)], fetches)
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

fn session(g: &Graph, device: Device) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(device),
            soft_placement: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// The same tensors by name in a reloaded graph.
fn rename(from: &Graph, to: &Graph, ts: &[Tensor]) -> Vec<Tensor> {
    ts.iter()
        .map(|&t| to.tensor(from.name(t).unwrap()).expect("same names"))
        .collect()
}

#[test]
fn every_new_op_round_trips_with_identical_plan_and_results() {
    let (g, feeds, fetches) = every_new_op();
    let text = g.to_json().unwrap();
    for op in [
        "slice",
        "flip",
        "broadcast_to",
        "concat",
        "pad",
        "take",
        "conv2d",
        "max_pool2d",
        "avg_pool2d",
        "random_uniform",
        "random_normal",
        "prod",
        "all",
        "any",
        "argmax",
        "argmin",
        "floor_divide",
        "remainder",
        "logical_xor",
        "erf",
    ] {
        assert!(
            text.contains(&format!("\"op\": \"{op}\"")),
            "no {op} node in\n{text}"
        );
    }
    assert!(text.contains("\"strides\": [-"), "a negative stride");
    assert!(text.contains("\"groups\": 2"), "grouped conv2d");
    assert!(text.contains("\"dilation\": [2, 1]"), "dilated conv2d");
    assert!(text.contains("\"seed\": 18446744073709551615"), "u64 seed");
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    assert_eq!(h.to_json().unwrap(), text);
    assert_same_plan_and_results(&g, &h, &feeds, &fetches);
}

#[test]
fn saved_and_loaded_graph_gives_identical_plan_and_results() {
    let (g, feeds, fetches) = every_op();
    let path = std::env::temp_dir().join(format!("wgflow-every-op-{}.json", std::process::id()));
    g.save(&path).unwrap();
    let h = Graph::load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    assert_eq!(h.to_json().unwrap(), g.to_json().unwrap());
    let text = g.to_json().unwrap();
    assert!(
        text.contains("\"data_base64\": \""),
        "large constant is base64"
    );
    assert!(
        text.contains("[\"nan\", \"inf\", \"-inf\", -0.0, 1e-45, 3.4e38]"),
        "{text}"
    );
    assert!(text.contains("\"device\": \"gpu:0\""));
    assert_eq!(h.node(h.tensor("unary/neg").unwrap()).unwrap().device, None);

    assert_same_plan_and_results(&g, &h, &feeds, &fetches);
}

/// `h` (a reloaded `g`) plans and computes bit-identically on cpu:0 and every GPU.
fn assert_same_plan_and_results(
    g: &Graph,
    h: &Graph,
    feeds: &[(Tensor, HostTensor)],
    fetches: &[Tensor],
) {
    let h_feeds: Vec<(Tensor, HostTensor)> = feeds
        .iter()
        .map(|(t, v)| (h.tensor(g.name(*t).unwrap()).unwrap(), v.clone()))
        .collect();
    let h_fetches = rename(g, h, fetches);
    for dev in devices() {
        let (mut a, mut b) = (session(g, dev), session(h, dev));
        let (pa, pb) = (a.plan(fetches).unwrap(), b.plan(&h_fetches).unwrap());
        assert_eq!(pa.describe(), pb.describe(), "plan on {dev}");
        let (ra, rb) = (
            a.run(feeds, fetches).unwrap(),
            b.run(&h_feeds, &h_fetches).unwrap(),
        );
        for (k, (x, y)) in ra.iter().zip(&rb).enumerate() {
            assert_eq!(x.shape(), y.shape());
            assert_eq!(
                x.words(),
                y.words(),
                "fetch {k} ({}) on {dev}",
                g.name(fetches[k]).unwrap()
            );
        }
    }
}

#[test]
fn constants_round_trip_bit_exactly() {
    let mut g = Graph::new();
    let odd: Vec<f32> = vec![
        0.1,
        1.0 / 3.0,
        f32::MIN_POSITIVE,
        f32::MAX,
        -f32::MAX,
        16777217.0,
    ];
    let a = g.constant(odd.clone()).unwrap();
    let b = g.constant(vec![true; 1500]).unwrap();
    let h = Graph::from_json(&g.to_json().unwrap()).unwrap();
    let Op::Leaf(Leaf::Constant(va)) = &h.node(h.tensor(g.name(a).unwrap()).unwrap()).unwrap().op
    else {
        panic!("not a constant")
    };
    assert_eq!(va.to_vec::<f32>().unwrap(), odd);
    let Op::Leaf(Leaf::Constant(vb)) = &h.node(h.tensor(g.name(b).unwrap()).unwrap()).unwrap().op
    else {
        panic!("not a constant")
    };
    assert_eq!(vb.to_vec::<bool>().unwrap(), vec![true; 1500]);
    assert!(g.to_json().unwrap().contains("0.1, 0.33333334"));
}

use wgflow::ops::Op;

#[test]
fn committed_example_graphs_match_the_builder_api() {
    let regen = std::env::var("WGFLOW_REGEN").is_ok_and(|v| v == "1");
    for ex in example_graphs::all() {
        let path = example_graphs::dir().join(format!("{}.json", ex.stem));
        let want = ex.graph.to_json().unwrap();
        let feed_dir = example_graphs::dir().join(format!("{}.feeds", ex.stem));
        if regen {
            std::fs::write(&path, &want).unwrap();
            if !ex.feeds.is_empty() {
                std::fs::create_dir_all(&feed_dir).unwrap();
            }
            for (name, v) in &ex.feeds {
                wgflow::npy::write(feed_dir.join(format!("{name}.npy")), v).unwrap();
            }
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            got,
            want,
            "{} is stale: rerun with WGFLOW_REGEN=1",
            path.display()
        );
        for (name, v) in &ex.feeds {
            let f = wgflow::npy::read(feed_dir.join(format!("{name}.npy"))).unwrap();
            assert_eq!(&f, v, "feed {name} of {}", ex.stem);
        }
        // Loading reproduces the graph exactly.
        let loaded = Graph::load(&path).unwrap();
        assert_eq!(loaded.to_def().unwrap(), ex.graph.to_def().unwrap());
    }
}

/// Every committed graph file (the examples; `tests/graphdef/v1`: every op as written by
/// the first version-1 writer; `tests/graphdef/v2`: state, as written by the first version-2
/// writer) loads and saves again byte for byte.
#[test]
fn committed_graph_files_load_and_save_byte_identically() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["graph-examples", "tests/graphdef/v1", "tests/graphdef/v2"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let g = Graph::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            g.to_json().unwrap() == text,
            "{} changes when re-saved",
            path.display()
        );
    }
}

/// Every file in tests/graphdef/bad and the fragment its error must contain.
const BAD: &[(&str, &str)] = &[
    (
        "syntax.json",
        ": line 3, column 14: invalid JSON: expected value",
    ),
    ("truncated.json", "invalid JSON: EOF while parsing"),
    ("not_object.json", ": top level: expected a JSON object"),
    (
        "wrong_format.json",
        ": format: expected \"wgflow.graph\", found \"tensorflow.GraphDef\"",
    ),
    (
        "wrong_version.json",
        ": version: unsupported version 4; this build of wgflow reads versions 1 to 3",
    ),
    (
        "variable_in_v1.json",
        ": nodes[0] 'w'.op: 'variable' nodes need \"version\": 2 (the file says 1)",
    ),
    (
        "group_in_v1.json",
        ": nodes[2] 'g'.op: 'group' nodes need \"version\": 2 (the file says 1)",
    ),
    ("variable_no_init.json", ": nodes[0] 'w'.init: missing"),
    (
        "variable_unknown_init.json",
        ": nodes[0] 'w'.init: unknown variant `xavier`, expected one of `value`, `zeros`, `ones`, `uniform`, `normal`, `glorot_uniform`, `he_normal`",
    ),
    (
        "variable_stray_field.json",
        ": nodes[0] 'w': unknown field `seed`",
    ),
    (
        "variable_missing_seed.json",
        ": nodes[0] 'w'.seed: missing",
    ),
    (
        "variable_value_count.json",
        ": nodes[0] 'w'.data: 3 values but shape [2, 2] holds 4",
    ),
    (
        "variable_ones_bool.json",
        ": nodes[0] 'w': variable: ones needs a numeric dtype, not bool",
    ),
    (
        "variable_random_int.json",
        ": nodes[0] 'w': variable: a random initializer needs f32 or f16, not i32",
    ),
    (
        "variable_nan_std.json",
        ": nodes[0] 'w': variable: normal needs a finite mean and std >= 0, got mean 0, std NaN",
    ),
    (
        "assign_shape.json",
        ": nodes[2] 'a': assign: the value is f32 [3], but the variable is f32 [2]",
    ),
    (
        "assign_constant.json",
        ": nodes[2] 'a': assign: 'c' is a constant, not a variable; only variables can be assigned",
    ),
    (
        "group_empty.json",
        ": nodes[0] 'g'.inputs: 'group' takes 1 or more inputs, 0 given",
    ),
    (
        "assign_extra_field.json",
        ": nodes[2] 'a'.mode: unknown field",
    ),
    ("missing_nodes.json", ": nodes: missing"),
    ("unknown_op.json", ": nodes[1] 'y'.op: unknown op 'conv9d'"),
    (
        "dangling_input.json",
        ": nodes[1] 'y'.inputs[1]: input 'nope' names no node",
    ),
    (
        "cycle.json",
        ": nodes[0] 'a'.inputs[0]: input 'b' is nodes[1], which comes later",
    ),
    (
        "self_cycle.json",
        ": nodes[1] 'b'.inputs[0]: input 'b' is the node itself",
    ),
    (
        "duplicate_name.json",
        ": nodes[1] 'a'.name: duplicate node name 'a'",
    ),
    (
        "huge_placeholder.json",
        ": nodes[0] 'x'.shape[0]: expected an integer in 0..=2147483648, found 1000000000000",
    ),
    (
        "huge_constant.json",
        ": nodes[0] 'c'.shape: shape [65536, 65536] has more than 2^31 elements",
    ),
    (
        "float_dim.json",
        ": nodes[0] 'x'.shape[0]: expected an integer in 0..=2147483648, found 3.5",
    ),
    (
        "deep_rank.json",
        ": nodes[0] 'x'.shape: 40 entries; at most 32 are allowed",
    ),
    (
        "constant_count.json",
        ": nodes[0] 'c'.data: 2 values but shape [3] holds 3",
    ),
    (
        "constant_value.json",
        ": nodes[0] 'c'.data[1]: \"one\" is not a valid f32 value",
    ),
    (
        "i32_range.json",
        ": nodes[0] 'c'.data[0]: 3000000000 is not a valid i32 value",
    ),
    (
        "f32_range.json",
        ": nodes[0] 'c'.data[0]: 1e+39 is not a valid f32 value",
    ),
    (
        "base64_char.json",
        ": nodes[0] 'c'.data_base64: invalid base64 character at offset 3",
    ),
    (
        "base64_length.json",
        ": nodes[0] 'c'.data_base64: 4 characters but shape [2] needs 12",
    ),
    (
        "bool_word.json",
        ": nodes[0] 'c'.data_base64: element 0 is 2 but a bool word must be 0 or 1",
    ),
    (
        "attr_type.json",
        ": nodes[1] 's'.axes: invalid type: string \"0\", expected an array",
    ),
    (
        "unknown_dtype.json",
        ": nodes[0] 'x'.dtype: unknown dtype 'f64'",
    ),
    ("unknown_field.json", ": nodes[0] 'x'.shaep: unknown field"),
    (
        "bad_device.json",
        ": nodes[1] 'y'.device: device 'tpu:0': expected gpu:N",
    ),
    (
        "arity.json",
        ": nodes[1] 'y'.inputs: 'add' takes 2 input(s), 1 given",
    ),
    (
        "declared_shape.json",
        ": nodes[2] 'y'.shape: declared [4] but the op's shape rule gives [3]",
    ),
    (
        "declared_dtype.json",
        ": nodes[1] 'y'.dtype: declared f32 but the op's dtype rule gives bool",
    ),
    (
        "broadcast.json",
        ": nodes[2] 'y': add: shapes [3] and [4] cannot broadcast",
    ),
    (
        "deep_nesting.json",
        "invalid JSON: recursion limit exceeded",
    ),
    (
        "just_over.json",
        ": nodes[0] 'x'.shape: shape [2, 1073741825] has more than 2^31 elements",
    ),
    ("long_name.json", "aaaa…'.op: unknown op 'conv9d'"),
    ("empty_name.json", ": nodes[0].name: is empty"),
    (
        "slice_out_of_bounds.json",
        ": nodes[1] 's': slice reads index 5 of axis 0 (start 1, step 2, 3 elements), outside input [4, 3]",
    ),
    (
        "negative_stride.json",
        ": nodes[1] 's': slice reads index -2 of axis 0 (start 2, step -2, 3 elements), outside input [5]",
    ),
    (
        "flip_stride.json",
        r#": nodes[1] 'f': the file's flip attributes ("offset": 2, "strides": [-5]) are not what the op's rules give (flip "offset": 2, "strides": [-1])"#,
    ),
    (
        "slice_offset.json",
        ": nodes[1] 's': slice offset 3 is outside input [3] (3 elements)",
    ),
    (
        "huge_stride.json",
        ": nodes[1] 's'.strides[0]: expected an integer in -9007199254740992..=9007199254740992, found -9223372036854775808",
    ),
    (
        "broadcast_stride.json",
        r#": nodes[1] 'b': the file's broadcast_to attributes ("offset": 0, "strides": [3, 1]) are not what the op's rules give (broadcast_to "offset": 0, "strides": [0, 1])"#,
    ),
    (
        "conv_kernel.json",
        ": nodes[2] 'y': conv2d: window [5, 5] (dilation [1, 1]) does not fit input [3, 3] padded by [0, 0]",
    ),
    (
        "conv_huge_dilation.json",
        ": nodes[2] 'y'.dilation[1]: expected an integer in 0..=1048576, found 4294967296",
    ),
    (
        "pool_stride.json",
        ": nodes[1] 'y': max_pool2d: kernel [2, 2], stride [0, 2] and dilation [1, 1] must be positive",
    ),
    (
        "pool_dilation.json",
        r#": nodes[1] 'y': the file's avg_pool2d attributes ("kernel": [2, 2], "stride": [1, 1], "padding": [0, 0], "dilation": [2, 2]) are not what the op's rules give (avg_pool2d "kernel": [2, 2], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1])"#,
    ),
    (
        "window_rank.json",
        ": nodes[1] 'y'.kernel: expected 2 entries ([h, w]), found 3",
    ),
    (
        "random_nan.json",
        ": nodes[0] 'r': random_uniform: needs finite low <= high, got [NaN, 1)",
    ),
    (
        "random_params.json",
        ": nodes[0] 'r'.params[1]: \"wide\" is not a valid f32 value",
    ),
    (
        "random_seed.json",
        ": nodes[0] 'r'.seed: expected an integer in 0..=18446744073709551615, found -1",
    ),
    (
        "strides_type.json",
        ": nodes[1] 's'.strides: invalid type: string \"1\", expected an array",
    ),
    (
        "axis_type.json",
        ": nodes[1] 'c'.axis: expected an integer in 0..=32, found 0.5",
    ),
    (
        "concat_arity.json",
        ": nodes[1] 'c'.inputs: 'concat' takes 2 or more inputs, 1 given",
    ),
    (
        "pad_shape.json",
        ": nodes[1] 'p': pad of axis 0 (size 3) by 2 before cannot give size 4",
    ),
    (
        "pad_bits.json",
        r#": nodes[1] 'p': the file's pad attributes ("before": [1], "value_bits": 2) are not what the op's rules give (pad "before": [1], "value_bits": 1)"#,
    ),
    ("take_field.json", ": nodes[2] 't'.mode: unknown field"),
    (
        "concat_wide.json",
        ": nodes[1] 'c': concat rebuilds as 3 nodes; a graph file holds one primitive op per node",
    ),
];

#[test]
fn bad_files_are_errors_naming_the_place() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/graphdef/bad");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut listed: Vec<String> = BAD.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed, "every bad file has an expected message");
    // Check every file before failing, so one run shows every wrong message.
    let mut wrong = Vec::new();
    for (file, fragment) in BAD {
        let e = Graph::load(dir.join(file)).expect_err(file);
        let msg = e.to_string();
        // `load` prefixes the place with the file's path.
        let ok = matches!(e, Error::GraphDef { .. })
            && msg.starts_with(&format!("graph file at {}: ", dir.join(file).display()))
            && msg.contains(fragment);
        if !ok {
            wrong.push(format!("{file}: {msg}\n    expected: {fragment}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_largest_declarable_placeholder_loads_without_allocating_for_it() {
    let text = r#"{"format": "wgflow.graph", "version": 1, "nodes": [
        {"name": "x", "op": "placeholder", "shape": [65536, 32768], "dtype": "f32"},
        {"name": "y", "op": "relu", "inputs": ["x"], "shape": [65536, 32768], "dtype": "f32"}]}"#;
    let start = Instant::now();
    let g = Graph::from_json(text).unwrap();
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(g.shape(g.tensor("y").unwrap()).unwrap().numel(), 1 << 31);
}

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        match rng.below(6) {
            0 => b.truncate(rng.below(len)),
            1 => {
                let i = rng.below(len);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.below(8);
                }
            }
            2 => {
                // Replace a run of digits with a hostile number.
                const NUMS: [&str; 8] = [
                    "1000000000000",
                    "18446744073709551616",
                    "-1",
                    "1e308",
                    "4294967296",
                    "0",
                    "2147483648",
                    "65536",
                ];
                let i = rng.below(len);
                if let Some(p) = b[i..].iter().position(u8::is_ascii_digit) {
                    let s = i + p;
                    let e = s + b[s..].iter().take_while(|c| c.is_ascii_digit()).count();
                    let n = NUMS[rng.below(NUMS.len())].as_bytes();
                    b.splice(s..e, n.iter().copied());
                }
            }
            3 => {
                let (i, j) = (rng.below(len), rng.below(len));
                let (i, j) = (i.min(j), i.max(j));
                b.drain(i..j.min(i + 64));
            }
            4 => {
                // Copy a span elsewhere (duplicates names, nodes, brackets).
                let i = rng.below(len);
                let span: Vec<u8> = b[i..(i + rng.below(80)).min(len)].to_vec();
                let at = rng.below(b.len());
                b.splice(at..at, span);
            }
            _ => {
                let i = rng.below(len);
                let c = *b"\"[]{},:0-e".get(rng.below(10)).unwrap_or(&b'0');
                b.insert(i.min(b.len()), c);
            }
        }
    }
    b
}

#[test]
fn arbitrary_mutations_never_panic() {
    let mut seeds: Vec<String> = example_graphs::all()
        .iter()
        .map(|e| e.graph.to_json().unwrap())
        .collect();
    seeds.push(every_op().0.to_json().unwrap());
    seeds.push(every_new_op().0.to_json().unwrap());
    seeds.push(state::every_initializer().0.to_json().unwrap());
    seeds.push(state::train().graph.to_json().unwrap());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let start = Instant::now();
    let (mut ok, mut rejected) = (0, 0);
    for i in 0..2000 {
        let src = &seeds[i % seeds.len()];
        let bytes = mutate(&mut rng, src.as_bytes());
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let r = std::panic::catch_unwind(|| Graph::from_json(&text).map(|g| g.len()));
        match r {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(Error::GraphDef { at, .. })) => {
                assert!(!at.is_empty(), "iteration {i}: an error names a place");
                rejected += 1
            }
            Ok(Err(e)) => panic!("iteration {i}: not a GraphDef error: {e}\n{text}"),
            Err(_) => panic!("iteration {i}: the loader panicked on:\n{text}"),
        }
    }
    assert!(
        rejected > 1000,
        "most mutations are rejected ({ok} accepted)"
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "2000 loads took {:?}",
        start.elapsed()
    );
}

#[test]
fn json_text_and_def_agree() {
    let ex = example_graphs::mlp();
    let def = ex.graph.to_def().unwrap();
    assert_eq!(def_from_json(&def_to_json(&def).unwrap()).unwrap(), def);
    let text = ex.graph.to_json().unwrap();
    assert!(text.starts_with("{\n  \"format\": \"wgflow.graph\",\n  \"version\": 1,"));
    assert!(text.contains(
        "{\"name\": \"layer1/matmul\", \"op\": \"matmul\", \"inputs\": [\"x\", \"layer1/constant\"], \"shape\": [4, 8], \"dtype\": \"f32\"}"
    ), "{text}");
}

/// Hostile `slice`/`flip`/`broadcast_to` attributes: a file either is rejected or loads a node
/// whose every read lies inside its input and whose values match the strided formula.
#[test]
fn random_strided_attributes_never_read_outside_the_input() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let input: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let feed = HostTensor::new([3, 4], input.clone()).unwrap();
    let (mut loaded, mut rejected) = (0, 0);
    for i in 0..3000 {
        let kind = ["slice", "flip", "broadcast_to"][rng.below(3)];
        // Mostly rank 2 with multiples of the input's element strides, so that many load.
        let rank = if rng.below(6) == 0 {
            1 + 2 * rng.below(2)
        } else {
            2
        };
        let out: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        let strides: Vec<i64> = (0..rank)
            .map(|k| match rng.below(4) {
                0 => rng.below(19) as i64 - 9,
                _ => (rng.below(9) as i64 - 4) * [4, 1, 1][k],
            })
            .collect();
        let offset = rng.below(14);
        let (in_shape, numel) = if kind == "broadcast_to" && rng.below(2) == 0 {
            ("[1, 4]", 4)
        } else {
            ("[3, 4]", 12)
        };
        let text = format!(
            r#"{{"format": "wgflow.graph", "version": 1, "nodes": [
            {{"name": "x", "op": "placeholder", "shape": {in_shape}, "dtype": "f32"}},
            {{"name": "y", "op": "{kind}", "inputs": ["x"], "shape": {out:?}, "dtype": "f32", "offset": {offset}, "strides": {strides:?}}}]}}"#
        );
        let g = match Graph::from_json(&text) {
            Ok(g) => g,
            Err(Error::GraphDef { .. }) => {
                rejected += 1;
                continue;
            }
            Err(e) => panic!("iteration {i}: not a GraphDef error: {e}"),
        };
        loaded += 1;
        let feed = if numel == 4 {
            HostTensor::new([1, 4], input[..4].to_vec()).unwrap()
        } else {
            feed.clone()
        };
        let (xt, yt) = (g.tensor("x").unwrap(), g.tensor("y").unwrap());
        let got = session(&g, Device::Cpu)
            .run(&[(xt, feed)], &[yt])
            .unwrap()
            .remove(0)
            .to_vec::<f32>()
            .unwrap();
        let total: usize = out.iter().product();
        assert_eq!(got.len(), total);
        for (lin, v) in got.iter().enumerate() {
            let (mut rem, mut at) = (lin, offset as i64);
            for k in (0..rank).rev() {
                at += (rem % out[k]) as i64 * strides[k];
                rem /= out[k];
            }
            assert!(
                (0..numel as i64).contains(&at),
                "iteration {i}: {kind} reads {at} of {numel}:\n{text}"
            );
            assert_eq!(*v, input[at as usize], "iteration {i}:\n{text}");
        }
    }
    assert!(
        loaded > 25 && rejected > 1000,
        "{loaded} loaded, {rejected} rejected"
    );
}

/// Run-time errors about a loaded graph's nodes name the file and the node, not wgflow's
/// loader code.
#[test]
fn errors_about_loaded_nodes_name_the_file_and_node() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2], DType::F32).unwrap();
    g.device("gpu:9", |g| g.exp(x)).unwrap();
    let path = std::env::temp_dir().join(format!("wgflow-origin-{}.json", std::process::id()));
    g.save(&path).unwrap();
    let loaded = Graph::load(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let y = loaded.tensor("exp").unwrap();
    let lx = loaded.tensor("x").unwrap();
    let node = loaded.node(y).unwrap();
    assert!(
        node.built_at().contains("nodes[1] 'exp'"),
        "{}",
        node.built_at()
    );
    let err = Session::new(&loaded, SessionOptions::default())
        .unwrap()
        .run(
            &[(lx, HostTensor::new([2], vec![0.0f32, 1.0]).unwrap())],
            &[y],
        )
        .expect_err("gpu:9 does not exist");
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("nodes[1] 'exp'"),
        "{msg}"
    );
    assert!(!msg.contains("src/graph/def"), "{msg}");
    // Nodes built by code still name the caller's line.
    assert!(g.node(x).unwrap().built_at().contains("graphdef.rs"));
}

// ---------------------------------------------------------------- state (version 2)

fn words_of(s: &mut Session, v: Tensor) -> Vec<u32> {
    s.read_variable(v).unwrap().words().to_vec()
}

#[test]
fn variables_of_every_initializer_round_trip_as_version_2() {
    let (g, vars) = state::every_initializer();
    let text = g.to_json().unwrap();
    assert!(
        text.starts_with("{\n  \"format\": \"wgflow.graph\",\n  \"version\": 2,"),
        "{text}"
    );
    for fragment in [
        r#""name": "v/value", "op": "variable", "shape": [2, 3], "dtype": "f32", "init": "value", "data": ["nan", -0.0, "inf", 0.1, -3.5, 1e-45]"#,
        r#""name": "v/big", "op": "variable", "shape": [1500], "dtype": "f32", "init": "value", "data_base64": ""#,
        r#""dtype": "bool", "init": "value", "data": [true, false, true]"#,
        r#""dtype": "f16", "init": "value", "data": [0.5, -65504.0]"#,
        r#""name": "v/count", "op": "variable", "shape": [], "dtype": "u32", "init": "zeros"}"#,
        r#""dtype": "i32", "init": "ones"}"#,
        r#""init": "uniform", "low": -2.0, "high": 3.0, "seed": 5}"#,
        r#""dtype": "f16", "init": "normal", "mean": 1.0, "std": 0.5, "seed": 18446744073709551615}"#,
        r#""init": "glorot_uniform", "seed": 11}"#,
        r#""shape": [2, 3, 3, 3], "dtype": "f32", "init": "he_normal", "seed": 0}"#,
        r#""op": "assign", "inputs": ["v/value", "constant_1"], "shape": [2, 3], "dtype": "f32"}"#,
        r#""op": "group", "inputs": ["#,
    ] {
        assert!(text.contains(fragment), "no {fragment} in\n{text}");
    }
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    assert_eq!(h.to_json().unwrap(), text);
    assert_eq!(h.variables().len(), vars.len());
    let group = g.tensors().last().unwrap();
    let h_group = h.tensor(g.name(group).unwrap()).unwrap();
    for dev in devices() {
        let (mut a, mut b) = (session(&g, dev), session(&h, dev));
        for &v in &vars {
            let name = g.name(v).unwrap();
            let hv = h.tensor(name).unwrap();
            assert_eq!(
                words_of(&mut a, v),
                words_of(&mut b, hv),
                "{name} starts the same on {dev}"
            );
        }
        a.run_targets(&[], &[group]).unwrap();
        b.run_targets(&[], &[h_group]).unwrap();
        let hv = |n: &str| h.tensor(n).unwrap();
        assert_eq!(
            b.read_variable(hv("v/count"))
                .unwrap()
                .item::<u32>()
                .unwrap(),
            1
        );
        assert_eq!(
            b.read_variable(hv("v/value"))
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "{dev}"
        );
    }
    // The loaded values are the given ones, bit for bit (NaN, -0.0 and the subnormal too).
    let mut s = session(&h, Device::Cpu);
    let value = s.read_variable(h.tensor("v/value").unwrap()).unwrap();
    let want = HostTensor::from([[f32::NAN, -0.0, f32::INFINITY], [0.1, -3.5, 1e-45]]);
    assert_eq!(value.words(), want.words());
    let big = s.read_variable(h.tensor("v/big").unwrap()).unwrap();
    let want: Vec<f32> = (0..1500).map(|i| (i as f32 * 0.11).cos()).collect();
    assert_eq!(big.to_vec::<f32>().unwrap(), want);
    let ints = s.read_variable(h.tensor("v/ints").unwrap()).unwrap();
    assert_eq!(ints.to_vec::<i32>().unwrap(), [i32::MIN, -1, 7]);
}

/// Initial `(w, b)` of a training session, as f64.
fn start_of(s: &mut Session, t: &state::Train) -> ([f64; 2], f64) {
    let w = s.read_variable(t.w).unwrap().to_vec::<f32>().unwrap();
    let b = s.read_variable(t.b).unwrap().item::<f32>().unwrap();
    ([w[0].into(), w[1].into()], b.into())
}

/// Three steps of `t` on `dev` match the f64 descent; returns `(w, b)` as trained.
fn train_three_steps(t: &state::Train, dev: Device) -> Vec<u32> {
    let (x, y) = state::batch();
    let mut s = session(&t.graph, dev);
    let (w0, b0) = start_of(&mut s, t);
    // Glorot for [2]: fan_in = fan_out = 2, so |w| < sqrt(6 / 4).
    assert!(
        w0.iter().all(|w| w.abs() < 1.5f64.sqrt() && *w != 0.0),
        "{w0:?}"
    );
    let feeds = [(t.x, x), (t.y, y)];
    let first = s.run(&feeds, &[t.loss]).unwrap()[0].item::<f32>().unwrap();
    for _ in 0..3 {
        s.run_targets(&feeds, &[t.train]).unwrap();
    }
    let last = s.run(&feeds, &[t.loss]).unwrap()[0].item::<f32>().unwrap();
    assert!(last < first, "{dev}: the loss falls ({first} -> {last})");
    let (w, b) = state::descend_f64(w0, b0, 3);
    let got_w = s.read_variable(t.w).unwrap().to_vec::<f32>().unwrap();
    let got_b = s.read_variable(t.b).unwrap().item::<f32>().unwrap();
    for (g, w) in got_w.iter().zip(w).chain([(&got_b, b)]) {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{dev}: {got_w:?} {got_b} vs f64 {w:?}"
        );
    }
    assert_eq!(s.read_variable(t.step).unwrap().item::<i32>().unwrap(), 3);
    let mut words = s.read_variable(t.w).unwrap().words().to_vec();
    words.extend(s.read_variable(t.b).unwrap().words());
    words
}

#[test]
fn a_saved_training_graph_trains_like_the_original() {
    let t = state::train();
    let text = t.graph.to_json().unwrap();
    assert!(text.contains("\"version\": 2,"));
    for op in ["variable", "assign", "group", "sub", "mul", "sum"] {
        assert!(text.contains(&format!("\"op\": \"{op}\"")), "no {op}");
    }
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_def().unwrap(), t.graph.to_def().unwrap());
    assert_eq!(h.to_json().unwrap(), text);
    let loaded = state::Train {
        x: h.tensor("x").unwrap(),
        y: h.tensor("y").unwrap(),
        w: h.tensor("w").unwrap(),
        b: h.tensor("b").unwrap(),
        step: h.tensor("step").unwrap(),
        loss: h.tensor(t.graph.name(t.loss).unwrap()).unwrap(),
        train: h.tensor(t.graph.name(t.train).unwrap()).unwrap(),
        graph: h,
    };
    for dev in devices() {
        assert_eq!(
            train_three_steps(&t, dev),
            train_three_steps(&loaded, dev),
            "{dev}: the loaded graph trains bit for bit like the original"
        );
    }
}

/// The committed version-2 files: `every_initializer.json` is what the builders write today
/// (rerun with `WGFLOW_REGEN=1` after a deliberate format change); `train.json`, frozen as the
/// first version-2 writer wrote it, still loads and trains as the f64 descent says.
#[test]
fn committed_version_2_files_load_and_train() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/graphdef/v2");
    let init = dir.join("every_initializer.json");
    let train = dir.join("train.json");
    if std::env::var("WGFLOW_REGEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).unwrap();
        state::every_initializer().0.save(&init).unwrap();
        state::train().graph.save(&train).unwrap();
    }
    let want = state::every_initializer().0.to_json().unwrap();
    assert_eq!(std::fs::read_to_string(&init).unwrap(), want);
    let h = Graph::load(&train).unwrap();
    let last = h.tensors().last().unwrap();
    let loss = h
        .nodes()
        .find(|(_, n)| n.op.name() == "sum" && n.shape.rank() == 0)
        .map(|(t, _)| t)
        .unwrap();
    let t = state::Train {
        x: h.tensor("x").unwrap(),
        y: h.tensor("y").unwrap(),
        w: h.tensor("w").unwrap(),
        b: h.tensor("b").unwrap(),
        step: h.tensor("step").unwrap(),
        loss,
        train: last,
        graph: h,
    };
    for dev in devices() {
        train_three_steps(&t, dev);
    }
}

#[test]
fn stateless_graphs_are_still_written_as_version_1() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2], DType::F32).unwrap();
    g.relu(x).unwrap();
    assert!(g.to_json().unwrap().contains("\"version\": 1,"));
    assert_eq!(g.to_def().unwrap().version(), 1);
    let w = g.variable("w", [1.0f32, 2.0]).unwrap();
    assert_eq!(g.to_def().unwrap().version(), 2);
    let text = g.to_json().unwrap();
    assert!(text.contains("\"version\": 2,"));
    // The same file with version 1 is refused at the variable.
    let v1 = text.replace("\"version\": 2,", "\"version\": 1,");
    let e = Graph::from_json(&v1).unwrap_err().to_string();
    assert!(e.contains("nodes[2] 'w'.op: 'variable' nodes need"), "{e}");
    let _ = w;
}

/// An optimizer's graph (Adam: its moment slots and step counter are variables, its update
/// assignments grouped) saves as version 2 and trains bit for bit like the original.
#[test]
fn an_adam_training_graph_round_trips() {
    use wgflow::train::{Adam, Optimizer};
    let t = state::train();
    let mut g = t.graph.clone();
    let step = Adam::new(0.1)
        .minimize(&mut g, t.loss, &[t.w, t.b])
        .unwrap();
    let text = g.to_json().unwrap();
    assert!(text.contains("\"version\": 2,"));
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    assert_eq!(h.to_json().unwrap(), text);
    let vars = g.variables();
    assert!(vars.len() >= 5, "w, b, step and Adam's slots");
    let (x, y) = state::batch();
    for dev in devices() {
        let (mut a, mut b) = (session(&g, dev), session(&h, dev));
        let fa = [(t.x, x.clone()), (t.y, y.clone())];
        let fb = [
            (h.tensor("x").unwrap(), x.clone()),
            (h.tensor("y").unwrap(), y.clone()),
        ];
        let hstep = h.tensor(g.name(step).unwrap()).unwrap();
        for _ in 0..3 {
            a.run_targets(&fa, &[step]).unwrap();
            b.run_targets(&fb, &[hstep]).unwrap();
        }
        for &v in &vars {
            let name = g.name(v).unwrap();
            assert_eq!(
                words_of(&mut a, v),
                words_of(&mut b, h.tensor(name).unwrap()),
                "{name} on {dev}"
            );
        }
        let w0 = state::train();
        let mut fresh = session(&w0.graph, dev);
        assert_ne!(
            words_of(&mut a, t.w),
            words_of(&mut fresh, w0.w),
            "{dev}: Adam moved w"
        );
    }
}

// ---------------------------------------------------------------- hostile text, repeated keys

use wgflow::Initializer;

/// A 10 MB string of one letter.
fn huge(c: char) -> String {
    c.to_string().repeat(10 << 20)
}

/// The error of loading `text`, checked to be a short [`Error::GraphDef`].
fn short_error(text: &str) -> String {
    let e = Graph::from_json(text).expect_err("a bad file");
    let msg = e.to_string();
    assert!(matches!(e, Error::GraphDef { .. }), "{msg:.2000}");
    assert!(msg.len() < 1000, "{} bytes: {msg:.2000}", msg.len());
    msg
}

#[test]
fn hostile_strings_are_quoted_short_in_errors() {
    let file =
        |nodes: &str| format!(r#"{{"format": "wgflow.graph", "version": 2, "nodes": [{nodes}]}}"#);
    let x = r#"{"name": "x", "op": "placeholder", "shape": [2], "dtype": "f32"}"#;
    let cases: Vec<(String, &str)> = vec![
        // A name: the duplicate-name message quotes it.
        (
            file(&format!(
                r#"{{"name": "{0}", "op": "placeholder", "shape": [2], "dtype": "f32"}},
                   {{"name": "{0}", "op": "placeholder", "shape": [2], "dtype": "f32"}}"#,
                huge('a')
            )),
            ".name: duplicate node name 'aaaa",
        ),
        // An input that names no node.
        (
            file(&format!(
                r#"{x}, {{"name": "y", "op": "add", "inputs": ["x", "{}"], "shape": [2], "dtype": "f32"}}"#,
                huge('b')
            )),
            "(10485680 more bytes) names no node",
        ),
        // A device.
        (
            file(&format!(
                r#"{x}, {{"name": "y", "op": "exp", "inputs": ["x"], "shape": [2], "dtype": "f32", "device": "{}"}}"#,
                huge('c')
            )),
            "'y'.device: device 'cccc",
        ),
        // An op.
        (
            file(&format!(
                r#"{{"name": "x", "op": "{}", "shape": [2], "dtype": "f32"}}"#,
                huge('d')
            )),
            "'x'.op: unknown op 'dddd",
        ),
        // A dtype.
        (
            file(&format!(
                r#"{{"name": "x", "op": "placeholder", "shape": [2], "dtype": "{}"}}"#,
                huge('e')
            )),
            "'x'.dtype: unknown dtype 'eeee",
        ),
        // An unknown attribute (serde's `unknown field`).
        (
            file(&format!(
                r#"{{"name": "x", "op": "placeholder", "shape": [2], "dtype": "f32", "{}": 1}}"#,
                huge('f')
            )),
            "unknown field `ffff",
        ),
        // An unknown top-level field.
        (
            format!(
                r#"{{"format": "wgflow.graph", "version": 1, "nodes": [], "{}": 1}}"#,
                huge('g')
            ),
            "gggg…: unknown field `gggg",
        ),
        // A string where a list belongs (serde's `invalid type: string "…"`).
        (
            file(&format!(
                r#"{{"name": "x", "op": "placeholder", "shape": "{}", "dtype": "f32"}}"#,
                huge('h')
            )),
            "'x'.shape: invalid type: string \"hhhh",
        ),
        // An unknown initializer (serde's `unknown variant`).
        (
            file(&format!(
                r#"{{"name": "w", "op": "variable", "shape": [2], "dtype": "f32", "init": "{}"}}"#,
                huge('i')
            )),
            "unknown variant `iiii",
        ),
        // An op name inside a custom kernel's expression.
        (
            file(&format!(
                r#"{x}, {{"name": "k", "op": "custom", "inputs": ["x"], "shape": [2], "dtype": "f32", "kernel": "k", "expr": ["unary", "{}", ["in", 0]]}}"#,
                huge('j')
            )),
            "unknown unary op 'jjjj",
        ),
        // A constant's value.
        (
            file(&format!(
                r#"{{"name": "c", "op": "constant", "shape": [1], "dtype": "f32", "data": ["{}"]}}"#,
                huge('k')
            )),
            "'c'.data[0]: \"kkkk",
        ),
        // A repeated key.
        (
            file(&format!(
                r#"{{"name": "x", "op": "placeholder", "shape": [2], "dtype": "f32", "{0}": 1, "{0}": 2}}"#,
                huge('l')
            )),
            "duplicate key 'llll",
        ),
        // A repeated key below a long one.
        (
            file(&format!(
                r#"{{"name": "x", "op": "placeholder", "shape": [2], "dtype": "f32", "{}": {{"a": 1, "a": 2}}}}"#,
                huge('m')
            )),
            "duplicate key 'a' in nodes[0].mmmm",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, fragment) in &cases {
        let msg = short_error(text);
        if !msg.contains(fragment) {
            wrong.push(format!("{msg}\n    expected: {fragment}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The message says how much was cut.
    let msg = short_error(&cases[1].0);
    assert!(
        msg.contains(&format!("'{}…' (10485680 more bytes)", "b".repeat(80))),
        "{msg}"
    );
}

#[test]
fn a_hostile_name_in_a_file_is_quoted_short_by_load() {
    let text = format!(
        r#"{{"format": "wgflow.graph", "version": 1, "nodes": [
            {{"name": "x", "op": "placeholder", "shape": [2], "dtype": "f32"}},
            {{"name": "y", "op": "relu", "inputs": ["{}"], "shape": [2], "dtype": "f32"}}]}}"#,
        "é".repeat(5 << 20)
    );
    let path = std::env::temp_dir().join(format!("wgflow-hostile-{}.json", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let e = Graph::load(&path).expect_err("a dangling input");
    let _ = std::fs::remove_file(&path);
    let msg = e.to_string();
    // Cut on a character boundary: 80 characters of two bytes each.
    assert!(
        msg.len() < 1000 && msg.contains(&format!("'{}…' (10485600 more bytes)", "é".repeat(80))),
        "{msg:.2000}"
    );
}

#[test]
fn repeated_keys_are_errors_naming_the_key() {
    let placeholder = r#"{"name": "x", "op": "placeholder", "shape": [3], "dtype": "f32"}"#;
    let cases = [
        // The top level: without the check the second list silently won.
        (
            format!(
                r#"{{"format": "wgflow.graph", "version": 1, "nodes": [], "nodes": [{placeholder}]}}"#
            ),
            "line 1, column 61: duplicate key 'nodes' in the top-level object",
        ),
        (
            format!(
                r#"{{"format": "wgflow.graph", "format": "wgflow.graph", "version": 1, "nodes": [{placeholder}]}}"#
            ),
            "duplicate key 'format' in the top-level object",
        ),
        // A node's common field.
        (
            r#"{"format": "wgflow.graph", "version": 1, "nodes": [
                {"name": "x", "op": "placeholder", "shape": [3], "dtype": "f32", "dtype": "f16"}]}"#
                .to_string(),
            "line 2, column 88: duplicate key 'dtype' in nodes[0]",
        ),
        (
            format!(
                r#"{{"format": "wgflow.graph", "version": 1, "nodes": [{placeholder},
                {{"name": "y", "name": "z", "op": "relu", "inputs": ["x"], "shape": [3], "dtype": "f32"}}]}}"#
            ),
            "duplicate key 'name' in nodes[1]",
        ),
        // An attribute.
        (
            r#"{"format": "wgflow.graph", "version": 1, "nodes": [
                {"name": "c", "op": "constant", "shape": [1], "dtype": "f32", "data": [1.0], "data": [2.0]}]}"#
                .to_string(),
            "duplicate key 'data' in nodes[0]",
        ),
        (
            r#"{"format": "wgflow.graph", "version": 2, "nodes": [
                {"name": "w", "op": "variable", "shape": [1], "dtype": "f32", "init": "uniform",
                 "low": 0.0, "high": 1.0, "seed": 1, "low": -1.0}]}"#
                .to_string(),
            "duplicate key 'low' in nodes[0]",
        ),
        // A nested object (the error comes before the unknown field's).
        (
            format!(
                r#"{{"format": "wgflow.graph", "version": 1, "nodes": [{placeholder},
                {{"name": "y", "op": "relu", "inputs": ["x"], "shape": [3], "dtype": "f32", "extra": [{{"a": 1, "a": 2}}]}}]}}"#
            ),
            "duplicate key 'a' in nodes[1].extra[0]",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, fragment) in &cases {
        let msg = short_error(text);
        if !msg.contains(fragment) {
            wrong.push(format!("{msg}\n    expected: {fragment}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The same keys in different objects are fine.
    let text = format!(
        r#"{{"format": "wgflow.graph", "version": 1, "nodes": [{placeholder},
        {{"name": "y", "op": "relu", "inputs": ["x"], "shape": [3], "dtype": "f32"}}]}}"#
    );
    Graph::from_json(&text).unwrap();
}

/// f32 words that inline `data` once lost: NaNs other than 0x7fc00000 (a payload, the sign
/// bit, signalling).
const F32_NANS: [u32; 5] = [
    0x7fc0_0001,
    0xffff_ffff,
    0x7f80_0001,
    0xffc0_0000,
    0x7fbf_ffff,
];
/// f32 words inline `data` keeps: the canonical NaN, signed zeros, infinities, subnormals.
const F32_EDGES: [u32; 9] = [
    0x7fc0_0000,
    0x8000_0000,
    0x0000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x0000_0001,
    0x807f_ffff,
    0x3f80_0000,
    0x7f7f_ffff,
];
/// The same for f16: payload, sign and signalling NaNs ...
const F16_NANS: [u32; 4] = [0x7e01, 0xfc01, 0x7c01, 0xfe00];
/// ... and the canonical NaN, signed zeros, infinities, subnormals.
const F16_EDGES: [u32; 8] = [
    0x7e00, 0x8000, 0x0000, 0x7c00, 0xfc00, 0x0001, 0x83ff, 0x7bff,
];

/// A constant and a variable (`value` initializer) per word list, as (name, dtype, words).
fn leaves_of(g: &mut Graph) -> Vec<(String, bool, Vec<u32>)> {
    let mut out = Vec::new();
    let lists: [(DType, Vec<u32>); 4] = [
        (
            DType::F32,
            F32_NANS.iter().chain(&F32_EDGES).copied().collect(),
        ),
        (DType::F32, F32_EDGES.to_vec()),
        (
            DType::F16,
            F16_NANS.iter().chain(&F16_EDGES).copied().collect(),
        ),
        (DType::F16, F16_EDGES.to_vec()),
    ];
    for (k, (dtype, words)) in lists.into_iter().enumerate() {
        let value = HostTensor::from_words([words.len()].into(), dtype, words.clone()).unwrap();
        let c = g.constant(value.clone()).unwrap();
        let name = g.name(c).unwrap().to_string();
        out.push((name, true, words.clone()));
        let name = format!("v{k}");
        g.variable_with(&name, [words.len()], dtype, Initializer::Value(value))
            .unwrap();
        out.push((name, false, words));
    }
    out
}

fn leaf_words(g: &Graph, name: &str) -> Vec<u32> {
    match &g.node(g.tensor(name).unwrap()).unwrap().op {
        Op::Leaf(Leaf::Constant(v)) | Op::Leaf(Leaf::Variable(Initializer::Value(v))) => {
            v.words().to_vec()
        }
        other => panic!("{name} is {other:?}"),
    }
}

#[test]
fn inline_size_values_keep_every_nan_payload_and_edge_value() {
    let mut g = Graph::new();
    let leaves = leaves_of(&mut g);
    let text = g.to_json().unwrap();
    let path = std::env::temp_dir().join(format!("wgflow-nan-{}.json", std::process::id()));
    g.save(&path).unwrap();
    let loaded = Graph::load(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    for h in [Graph::from_json(&text).unwrap(), loaded] {
        for (name, _, words) in &leaves {
            let back = leaf_words(&h, name);
            assert!(
                back == *words,
                "{name}: {:08x?} came back as {:08x?}",
                words,
                back
            );
        }
        // And it saves again as the same text.
        assert!(h.to_json().unwrap() == text);
    }
    // Values with such NaNs are written as base64; the others stay inline, as before.
    let lines: Vec<&str> = text.lines().collect();
    for (name, _, words) in &leaves {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("\"name\": \"{name}\"")))
            .unwrap();
        let special = words
            .iter()
            .any(|w| F32_NANS.contains(w) || F16_NANS.contains(w));
        assert_eq!(line.contains("\"data_base64\": "), special, "{line}");
        assert_eq!(line.contains("\"data\": ["), !special, "{line}");
    }
    assert!(
        text.contains(
            r#""data": ["nan", -0.0, 0.0, "inf", "-inf", 1e-45, -1.1754942e-38, 1.0, 3.4028235e38]"#
        ),
        "{text}"
    );
}

/// The browser bench's training graph (`benches/web/w4_train.json`, written by
/// `w4_train_graph.py`) still loads, and its first Adam step's loss for the page's inputs is
/// the float64 value that script stored: a graph-file change that broke the bench fails here.
#[test]
fn browser_bench_training_graph_loads_and_gives_its_float64_loss() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/web");
    let text = std::fs::read_to_string(root.join("w4_train.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("w4_train.expected.json")).unwrap(),
    )
    .unwrap();
    let g = Graph::from_json(&text).unwrap();
    // bench.js's `filled`: an LCG's top 24 bits over [-0.5, 0.5).
    let filled = |n: usize, seed: u32| -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                ((s >> 8) as f64 / (1u64 << 24) as f64 - 0.5) as f32
            })
            .collect()
    };
    let t = |name: &str| g.tensor(name).unwrap();
    let (train, loss) = (
        t(expected["train"].as_str().unwrap()),
        t(expected["loss"].as_str().unwrap()),
    );
    let want = expected["first_loss"].as_f64().unwrap();
    let feeds = [
        (
            t("x"),
            HostTensor::new([256, 784], filled(256 * 784, 7)).unwrap(),
        ),
        (
            t("y"),
            HostTensor::new([256, 10], filled(256 * 10, 8)).unwrap(),
        ),
    ];
    let mut s = common::session_on(&g, wgflow::Device::Cpu);
    let out = s.run(&feeds, &[train, loss]).unwrap();
    let first = out[1].to_vec::<f32>().unwrap()[0] as f64;
    assert!(
        (first - want).abs() <= 1e-5 * want.abs().max(1.0),
        "{first} vs {want}"
    );
    let second = s.run(&feeds, &[loss]).unwrap()[0].to_vec::<f32>().unwrap()[0] as f64;
    assert!(
        second < first,
        "the step must lower the loss: {first} -> {second}"
    );
}
