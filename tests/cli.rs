//! The `wgflow` binary on the committed graphs: outputs compared with hand-computed values and
//! with a `cpu:0` session on the graph built through the API; errors exit non-zero with the
//! message on stderr.

mod common;
mod example_graphs;

use std::path::PathBuf;
use std::process::{Command, Output};
use wgflow::ops::Leaf;
use wgflow::{Device, HostTensor};

fn wgflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env_remove("WGFLOW_VISIBLE_DEVICES")
        .output()
        .expect("run wgflow")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn graph(stem: &str) -> String {
    example_graphs::dir()
        .join(format!("{stem}.json"))
        .display()
        .to_string()
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgflow-cli-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The devices to run the CLI on: cpu:0 and every GPU.
fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(common::gpus());
    d
}

fn run_ok(args: &[&str]) -> String {
    let out = wgflow(args);
    assert!(
        out.status.success(),
        "wgflow {args:?} failed:\n{}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn run_add_writes_the_sum() {
    for dev in devices() {
        let dir = scratch(&format!("add-{dev}").replace(':', "_"));
        let d = dev.to_string();
        let stdout = run_ok(&[
            "run",
            &graph("add"),
            "--device",
            &d,
            "--out",
            dir.to_str().unwrap(),
        ]);
        let got = wgflow::npy::read(dir.join("add.npy")).unwrap();
        assert_eq!(got.dims(), &[3]);
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 9.0]);
        assert!(stdout.contains(&format!("devices: {d}")), "{stdout}");
        assert!(stdout.contains("time: compile+run"), "{stdout}");
        assert!(stdout.contains(&format!("memory {d}: peak")), "{stdout}");
    }
}

#[test]
fn run_mlp_with_a_fed_npy_matches_a_cpu_session_and_numpy_math() {
    let ex = example_graphs::mlp();
    let (name, x) = &ex.feeds[0];
    // The expected output computed independently, in plain Rust: relu(x @ w1 + b1) @ w2 + b2.
    let want = {
        let mut s = common::session_on(&ex.graph, Device::Cpu);
        let out = ex.graph.tensor("layer2/add").unwrap();
        s.run(&[(ex.graph.tensor(name).unwrap(), x.clone())], &[out])
            .unwrap()
            .remove(0)
    };
    let by_hand = hand_mlp(&ex);
    common::assert_close("cpu session vs hand", &want, &by_hand, 1e-5, 1e-6);
    for dev in devices() {
        let dir = scratch(&format!("mlp-{dev}").replace(':', "_"));
        let feed = dir.join("x.npy");
        wgflow::npy::write(&feed, x).unwrap();
        let d = dev.to_string();
        run_ok(&[
            "run",
            &graph("mlp"),
            "--feed",
            &format!("x={}", feed.display()),
            "--fetch",
            "layer2/add",
            "--fetch",
            "layer1/relu",
            "--device",
            &d,
            "--out",
            dir.to_str().unwrap(),
        ]);
        let got = wgflow::npy::read(dir.join("layer2_add.npy")).unwrap();
        common::assert_close(&format!("mlp on {dev}"), &got, &by_hand, 1e-5, 1e-5);
        let hidden = wgflow::npy::read(dir.join("layer1_relu.npy")).unwrap();
        assert_eq!(hidden.dims(), &[4, 8]);
        assert!(hidden.to_vec::<f32>().unwrap().iter().all(|&v| v >= 0.0));
    }
}

/// The MLP's output computed from the graph's own constants with loops.
fn hand_mlp(ex: &example_graphs::Example) -> HostTensor {
    let g = &ex.graph;
    let c = |n: &str| match &g.node(g.tensor(n).unwrap()).unwrap().op {
        wgflow::ops::Op::Leaf(Leaf::Constant(v)) => v.to_vec::<f32>().unwrap(),
        other => panic!("{n} is {other:?}"),
    };
    let (w1, b1, w2, b2) = (
        c("layer1/constant"),
        c("layer1/constant_1"),
        c("layer2/constant"),
        c("layer2/constant_1"),
    );
    let x = ex.feeds[0].1.to_vec::<f32>().unwrap();
    let mut out = vec![0.0f32; 8];
    for r in 0..4 {
        let h: Vec<f32> = (0..8)
            .map(|j| {
                let s: f32 = (0..3).map(|k| x[r * 3 + k] * w1[k * 8 + j]).sum::<f32>() + b1[j];
                s.max(0.0)
            })
            .collect();
        for j in 0..2 {
            out[r * 2 + j] = (0..8).map(|k| h[k] * w2[k * 2 + j]).sum::<f32>() + b2[j];
        }
    }
    HostTensor::new([4, 2], out).unwrap()
}

#[test]
fn run_softmax_defaults_to_the_sink() {
    for dev in devices() {
        let dir = scratch(&format!("softmax-{dev}").replace(':', "_"));
        let stdout = run_ok(&[
            "run",
            &graph("softmax"),
            "--device",
            &dev.to_string(),
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(stdout.contains("softmax/div f32 [2, 4]"), "{stdout}");
        let got = wgflow::npy::read(dir.join("softmax_div.npy")).unwrap();
        let rows = [[1.0f32, 2.0, 3.0, 4.0], [-1.0, 0.0, 100.0, 0.5]];
        let mut want = Vec::new();
        for r in rows {
            let m = r.iter().cloned().fold(f32::MIN, f32::max);
            let e: Vec<f32> = r.iter().map(|v| (v - m).exp()).collect();
            let s: f32 = e.iter().sum();
            want.extend(e.iter().map(|v| v / s));
        }
        let want = HostTensor::new([2, 4], want).unwrap();
        common::assert_close(&format!("softmax on {dev}"), &got, &want, 1e-5, 1e-7);
    }
}

#[test]
fn plan_and_dot_describe_the_graph() {
    let stdout = run_ok(&["plan", &graph("mlp"), "--device", "cpu:0"]);
    for part in [
        "placement:",
        "layer1/matmul",
        "schedule (",
        "matmul [4, 3] @ [3, 8]",
        "memory cpu:0: peak",
    ] {
        assert!(stdout.contains(part), "{part}: {stdout}");
    }
    assert!(
        stdout.contains("lower bound") && stdout.contains("no reuse"),
        "{stdout}"
    );
    let dot = run_ok(&["dot", &graph("softmax"), "--device", "cpu:0"]);
    assert!(dot.starts_with("digraph wgflow {"), "{dot}");
    assert!(dot.contains("subgraph cluster_cpu_0 {"), "{dot}");
    assert!(dot.contains("softmax/div\\ndiv f32 [2, 4]"), "{dot}");
    assert!(dot.contains("n0 -> n1"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn errors_exit_non_zero_with_the_message_on_stderr() {
    let dir = scratch("errors");
    let fail = |args: &[&str], fragment: &str| {
        let out = wgflow(args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = text(&out.stderr);
        assert!(err.contains(fragment), "{args:?}: stderr was {err}");
        assert!(
            err.starts_with("wgflow: ") || err.contains("error:"),
            "{err}"
        );
    };
    fail(
        &["run", &graph("mlp"), "--out", dir.to_str().unwrap()],
        "feed 'x (f32 [4, 3])': needed by the fetches but not fed",
    );
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        "{\"format\": \"wgflow.graph\", \"version\": 1, \"nodes\": [",
    )
    .unwrap();
    fail(&["run", bad.to_str().unwrap()], "EOF while parsing");
    fail(&["plan", "/nonexistent/graph.json"], "cannot read");
    fail(
        &["run", &graph("add"), "--device", "gpu:99"],
        "device 'gpu:99'",
    );
    fail(&["run", &graph("add"), "--device", "tpu"], "device 'tpu'");
    fail(&["run", &graph("add"), "--fetch", "nope"], "fetch 'nope'");
    fail(
        &["run", &graph("mlp"), "--feed", "x"],
        "expected NAME=FILE.npy",
    );
    let wrong = dir.join("wrong.npy");
    wgflow::npy::write(&wrong, &HostTensor::from(vec![1.0f32, 2.0])).unwrap();
    fail(
        &[
            "run",
            &graph("mlp"),
            "--feed",
            &format!("x={}", wrong.display()),
        ],
        "expected f32 [4, 3], got f32 [2]",
    );
    std::fs::write(dir.join("junk.npy"), b"not numpy").unwrap();
    fail(
        &[
            "run",
            &graph("mlp"),
            "--feed",
            &format!("x={}", dir.join("junk.npy").display()),
        ],
        "missing the \\x93NUMPY magic",
    );
    fail(&["frobnicate"], "unrecognized subcommand");
}

#[test]
fn help_covers_every_subcommand() {
    let top = run_ok(&["--help"]);
    for sub in ["devices", "validate", "run", "plan", "dot"] {
        assert!(top.contains(sub), "{top}");
    }
    let run = run_ok(&["run", "--help"]);
    for flag in [
        "--feed <NAME=FILE.npy>",
        "--fetch <NAME>",
        "--device <DEVICE>",
        "--out <DIR>",
        "--force",
        "--runs <N>",
        "--weights <FILE.safetensors>",
        "GRAPH.json",
    ] {
        assert!(run.contains(flag), "{flag}: {run}");
    }
    for sub in ["plan", "dot"] {
        let h = run_ok(&[sub, "--help"]);
        assert!(
            h.contains("--fetch <NAME>") && h.contains("--device <DEVICE>"),
            "{h}"
        );
    }
    assert!(run_ok(&["plan", "--help"]).contains("--json"));
    assert!(run_ok(&["devices", "--help"]).contains("--json"));
    assert!(run_ok(&["validate", "--help"]).contains("GRAPH.json"));
}

#[test]
fn dot_has_one_cluster_per_device_and_escapes_names() {
    let mut g = wgflow::Graph::new();
    let x = g.placeholder("in\"put", [2], wgflow::DType::F32).unwrap();
    let y = g.device("cpu:0", |g| g.exp(x)).unwrap();
    let z = g.relu(y).unwrap();
    let unused = g.neg(x).unwrap();
    let default = common::gpus().first().copied().unwrap_or(Device::Cpu);
    let mut s = common::session_on(&g, default);
    let plan = s.plan(&[z]).unwrap();
    let dot = wgflow::trace::dot(&g, &plan);
    assert!(
        dot.contains("label=\"in\\\"put\\nplaceholder f32 [2]\""),
        "{dot}"
    );
    assert!(dot.contains("subgraph cluster_cpu_0 {"), "{dot}");
    let expected_clusters = if default == Device::Cpu { 1 } else { 2 };
    assert_eq!(
        dot.matches("subgraph cluster_").count(),
        expected_clusters,
        "{dot}"
    );
    // The cpu:0 cluster holds exactly the scoped node.
    let cpu = dot.split("subgraph cluster_cpu_0 {").nth(1).unwrap();
    let cpu = &cpu[..cpu.find("  }").unwrap()];
    assert!(cpu.contains(&format!("n{} [", y.index())), "{dot}");
    if default != Device::Cpu {
        assert!(!cpu.contains(&format!("n{} [", z.index())), "{dot}");
    }
    // A pruned node is drawn dashed, outside every cluster.
    assert!(
        dot.contains(&format!(
            "n{} [label=\"neg\\nneg f32 [2]\", style=dashed];",
            unused.index()
        )),
        "{dot}"
    );
    assert!(dot.contains(&format!("n{} -> n{} [label=\"0\"];", y.index(), z.index())));
}

/// `WGFLOW_VISIBLE_DEVICES` is checked the same way by `devices --visible` and by a run: a
/// malformed value or a GPU that does not exist fails both, naming the variable and the valid
/// indices; a valid value passes both.
#[test]
fn visible_devices_variable_is_checked_consistently_and_named() {
    let gpus = common::gpus();
    let valid: Vec<String> = (0..gpus.len()).map(|i| i.to_string()).collect();
    let with = |value: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wgflow"))
            .args(args)
            .env("WGFLOW_VISIBLE_DEVICES", value)
            .output()
            .expect("run wgflow")
    };
    let add = graph("add");
    let out = scratch("visible");
    let commands: [&[&str]; 3] = [
        &["devices", "--visible"],
        &["plan", &add],
        // Each good value runs again into the same directory.
        &["run", &add, "--out", out.to_str().unwrap(), "--force"],
    ];
    let bad = gpus.len() + 5;
    for (value, problem) in [
        ("abc".to_string(), "'abc' is not a GPU index".to_string()),
        ("0,x".to_string(), "'x' is not a GPU index".to_string()),
        (bad.to_string(), format!("gpu:{bad} does not exist")),
    ] {
        for args in commands {
            let out = with(&value, args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{value} {args:?}: {err}");
            assert!(
                err.contains(&format!("WGFLOW_VISIBLE_DEVICES={value}"))
                    && err.contains(&problem)
                    && err.contains("valid GPU indices"),
                "{value} {args:?}: {err}"
            );
            if !gpus.is_empty() {
                assert!(err.contains(&valid.join(", ")), "{value} {args:?}: {err}");
            }
        }
    }
    let mut good = vec![String::new()];
    good.extend(valid.iter().cloned());
    for value in &good {
        for args in commands {
            let out = with(value, args);
            assert!(
                out.status.success(),
                "{value:?} {args:?}: {}",
                text(&out.stderr)
            );
        }
    }
}

/// `wgflow` with extra environment variables.
fn wgflow_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env_remove("WGFLOW_VISIBLE_DEVICES")
        .envs(env.iter().copied())
        .output()
        .expect("run wgflow")
}

#[test]
fn validate_checks_a_graph_file_without_a_device() {
    // A malformed WGFLOW_VISIBLE_DEVICES fails anything that looks at devices (see
    // visible_devices_variable_is_checked_consistently_and_named): validate must not.
    let env = [("WGFLOW_VISIBLE_DEVICES", "not-a-list")];
    let good = wgflow_env(&["validate", &graph("mlp")], &env);
    assert!(good.status.success(), "{}", text(&good.stderr));
    let stdout = text(&good.stdout);
    assert!(
        stdout.contains("ok, nodes: 10, placeholders: 1, sinks: 1"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");

    let dir = scratch("validate");
    let truncated = dir.join("truncated.json");
    std::fs::write(
        &truncated,
        "{\"format\": \"wgflow.graph\", \"version\": 1, \"nodes\": [",
    )
    .unwrap();
    // Parses, but a builder check fails: shapes that cannot broadcast.
    let unbroadcastable = dir.join("shapes.json");
    std::fs::write(
        &unbroadcastable,
        r#"{"format": "wgflow.graph", "version": 1, "nodes": [
            {"name": "p", "op": "constant", "shape": [3], "dtype": "f32", "data": [1.0, 2.0, 3.0]},
            {"name": "q", "op": "constant", "shape": [2], "dtype": "f32", "data": [3.0, 4.0]},
            {"name": "s", "op": "add", "inputs": ["p", "q"], "shape": [3], "dtype": "f32"}
        ]}"#,
    )
    .unwrap();
    let missing = dir.join("missing.json");
    for (file, fragment) in [
        (&truncated, "EOF while parsing"),
        (
            &unbroadcastable,
            "'s': add: shapes [3] and [2] cannot broadcast",
        ),
        (&missing, "cannot read"),
    ] {
        let out = wgflow_env(&["validate", file.to_str().unwrap()], &env);
        assert_eq!(out.status.code(), Some(1), "{file:?}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with("wgflow: ") && err.contains(fragment),
            "{err}"
        );
        assert!(err.contains(file.to_str().unwrap()), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn run_refuses_to_overwrite_unless_forced() {
    let dir = scratch("force");
    let out = dir.to_str().unwrap();
    let args = ["run", &graph("add"), "--device", "cpu:0", "--out", out];
    run_ok(&args);
    let file = dir.join("add.npy");
    std::fs::write(&file, b"keep me").unwrap();
    let again = wgflow(&args);
    assert_eq!(again.status.code(), Some(1));
    let err = text(&again.stderr);
    assert!(
        err.contains(&format!("{}: already exists; pass --force", file.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    run_ok(&[&args[..], &["--force"]].concat());
    let got = wgflow::npy::read(&file).unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 9.0]);
}

#[test]
fn run_file_names_stay_inside_out_and_are_distinct() {
    let dir = scratch("names");
    let g = dir.join("names.json");
    std::fs::write(
        &g,
        r#"{"format": "wgflow.graph", "version": 1, "nodes": [
            {"name": "../../x", "op": "constant", "shape": [2], "dtype": "f32", "data": [1.0, 2.0]},
            {"name": "a/b", "op": "constant", "shape": [2], "dtype": "f32", "data": [3.0, 4.0]},
            {"name": "a_b", "op": "add", "inputs": ["../../x", "a/b"], "shape": [2], "dtype": "f32"},
            {"name": "A_B", "op": "neg", "inputs": ["a_b"], "shape": [2], "dtype": "f32"}
        ]}"#,
    )
    .unwrap();
    let out = dir.join("out").join("deep");
    let mut args = vec!["run", g.to_str().unwrap(), "--device", "cpu:0"];
    for f in ["../../x", "a/b", "a_b", "A_B"] {
        args.extend(["--fetch", f]);
    }
    args.extend(["--out", out.to_str().unwrap()]);
    run_ok(&args);
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["A_B_3.npy", "_._.._x.npy", "a_b.npy", "a_b_2.npy"]);
    let value = |f: &str| {
        wgflow::npy::read(out.join(f))
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(value("_._.._x.npy"), [1.0, 2.0]);
    assert_eq!(value("a_b.npy"), [3.0, 4.0]);
    assert_eq!(value("a_b_2.npy"), [4.0, 6.0]);
    assert_eq!(value("A_B_3.npy"), [-4.0, -6.0]);
    // Nothing escaped: the output tree holds exactly the four files, and no `x.npy` appeared
    // two levels up.
    assert_eq!(std::fs::read_dir(dir.join("out")).unwrap().count(), 1);
    assert!(!dir.join("x.npy").exists() && !dir.join("out").join("x.npy").exists());
}

#[test]
fn run_times_several_runs() {
    let dir = scratch("runs");
    let stdout = run_ok(&[
        "run",
        &graph("softmax"),
        "--device",
        "cpu:0",
        "--runs",
        "4",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let line = stdout.lines().find(|l| l.starts_with("time:")).unwrap();
    let ms = |key: &str| -> f64 {
        let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key}: {line}")) + key.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(line.contains("over 4 runs"), "{line}");
    assert!(ms("min ") <= ms("median "), "{line}");
    let zero = wgflow(&["run", &graph("softmax"), "--runs", "0"]);
    assert!(!zero.status.success());
    let err = text(&zero.stderr);
    assert!(err.contains("invalid value '0' for '--runs <N>'"), "{err}");
}

#[test]
fn devices_json_lists_what_the_table_shows() {
    let table = run_ok(&["devices"]);
    let json: serde_json::Value = serde_json::from_str(&run_ok(&["devices", "--json"])).unwrap();
    let list = json.as_array().expect("an array");
    assert_eq!(list.len(), common::gpus().len() + 1, "{json:#}");
    for d in list {
        let device = d["device"].as_str().unwrap();
        assert!(table.contains(device), "{device}: {table}");
        for key in ["name", "backend", "type", "driver"] {
            assert!(d[key].is_string(), "{key}: {d}");
        }
        assert!(
            d["shader_f16"].is_boolean() && d["best"].is_boolean(),
            "{d}"
        );
        assert!(d["min_storage_buffer_offset_alignment"].as_u64().unwrap() >= 4);
        if device.starts_with("gpu:") {
            assert!(
                d["max_storage_buffer_binding_size"].as_u64().unwrap() > 0,
                "{d}"
            );
            assert!(
                d["max_storage_buffers_per_shader_stage"].as_u64().unwrap() >= 4,
                "{d}"
            );
        }
    }
    let last = list.last().unwrap();
    assert_eq!(last["device"], "cpu:0");
    assert!(
        last["max_buffer_size"].is_null(),
        "cpu:0 has no buffer limit: {last}"
    );
    let best: Vec<&str> = list
        .iter()
        .filter(|d| d["best"] == true)
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert_eq!(best.len(), 1);
    assert!(table.contains(&format!("best: {}", best[0])), "{table}");
}

#[test]
fn plan_json_has_placement_steps_and_memory() {
    let json: serde_json::Value = serde_json::from_str(&run_ok(&[
        "plan",
        &graph("mlp"),
        "--device",
        "cpu:0",
        "--json",
    ]))
    .unwrap();
    assert_eq!(json["devices"], serde_json::json!(["cpu:0"]));
    let placement = json["placement"].as_array().unwrap();
    assert!(placement
        .iter()
        .any(|p| p["node"] == "layer1/matmul" && p["device"] == "cpu:0"));
    assert_eq!(json["feeds"][0]["name"], "x");
    assert_eq!(json["feeds"][0]["shape"], serde_json::json!([4, 3]));
    assert_eq!(json["fetches"][0]["name"], "layer2/add");
    assert_eq!(json["fetches"][0]["dtype"], "f32");
    let steps = json["steps"].as_array().unwrap();
    let dispatches = steps.iter().filter(|s| s["kind"] == "dispatch").count();
    assert_eq!(json["dispatches"].as_u64(), Some(dispatches as u64));
    assert_eq!(json["transfers"].as_u64(), Some(0));
    let matmul = steps
        .iter()
        .find(|s| {
            s["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n == "layer1/matmul")
        })
        .expect("a step computes layer1/matmul");
    assert!(
        matmul["kernel"]
            .as_str()
            .unwrap()
            .contains("matmul [4, 3] @ [3, 8]"),
        "{matmul}"
    );
    assert_eq!(matmul["device"], "cpu:0");
    assert_eq!(matmul["inputs"][0]["name"], "x");
    let m = &json["memory"]["cpu:0"];
    let bytes = |k: &str| m[k].as_u64().unwrap_or_else(|| panic!("{k}: {m}"));
    assert!(bytes("peak_bytes") > 0);
    assert!(bytes("lower_bound_bytes") <= bytes("peak_bytes"));
    assert!(bytes("peak_bytes") <= bytes("no_reuse_bytes"));
    assert_eq!(bytes("constant_bytes"), 200);
}

/// `wgflow plan` and `wgflow dot` print through `Session::compile_only`: the same plan as
/// `Session::plan`, with nothing created on the device.
#[test]
fn compile_only_prepares_nothing() {
    let ex = example_graphs::mlp();
    let out = ex.graph.tensor("layer2/add").unwrap();
    for dev in devices() {
        let mut s = common::session_on(&ex.graph, dev);
        let printed = s.compile_only(&[out]).unwrap();
        let c = s.counters();
        assert_eq!(
            (
                c.plans_compiled,
                c.pipelines_created,
                c.buffers_created,
                c.bind_groups_created
            ),
            (0, 0, 0, 0),
            "{dev}"
        );
        let prepared = s.plan(&[out]).unwrap();
        assert_eq!(printed.describe(), prepared.describe(), "{dev}");
        if dev.is_gpu() {
            assert!(
                s.counters().pipelines_created > 0,
                "{dev}: the counters count"
            );
        }
    }
}

/// A graph file with variables: `pred = x @ w + b` (w Glorot, b zeros) and `step += 1`.
fn variable_graph(dir: &std::path::Path) -> String {
    use wgflow::{DType, Graph, Initializer};
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3], DType::F32).unwrap();
    let w = g
        .variable_with(
            "w",
            [3, 2],
            DType::F32,
            Initializer::GlorotUniform { seed: 4 },
        )
        .unwrap();
    let b = g
        .variable_with("b", [2], DType::F32, Initializer::Zeros)
        .unwrap();
    let step = g.variable("step", 0i32).unwrap();
    let xw = g.matmul(x, w).unwrap();
    let pred = g.add(xw, b).unwrap();
    let one = g.constant(1i32).unwrap();
    let next = g.assign_add(step, one).unwrap();
    assert_eq!(g.name(pred).unwrap(), "add");
    assert_eq!(g.name(next).unwrap(), "assign_add");
    let path = dir.join("linear.json");
    g.save(&path).unwrap();
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("\"version\": 2,"));
    path.display().to_string()
}

#[test]
fn run_with_weights_computes_from_the_restored_variables() {
    let dir = scratch("weights");
    let graph = variable_graph(&dir);
    let x = dir.join("x.npy");
    wgflow::npy::write(
        &x,
        &HostTensor::from([[1.0f32, 0.0, -1.0], [2.0, 1.0, 0.0]]),
    )
    .unwrap();
    let weights = dir.join("weights.safetensors");
    let w = HostTensor::from([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]);
    let b = HostTensor::from([0.5f32, -1.0]);
    let step = HostTensor::scalar(41i32);
    wgflow::checkpoint::write(&weights, &[("w", &w), ("b", &b), ("step", &step)]).unwrap();
    let feed = format!("x={}", x.display());
    for dev in devices() {
        let d = dev.to_string();
        let out = dir.join(d.replace(':', "_"));
        let stdout = run_ok(&[
            "run",
            &graph,
            "--device",
            &d,
            "--feed",
            &feed,
            "--weights",
            weights.to_str().unwrap(),
            "--fetch",
            "add",
            "--fetch",
            "assign_add",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            stdout.contains(&format!("weights: 3 variables from {}", weights.display())),
            "{stdout}"
        );
        assert!(stdout.contains("add f32 [2, 2] -> "), "{stdout}");
        // x @ w + b by hand: [[1 - 5, 2 - 6], [2 + 3, 4 + 4]] + [0.5, -1].
        let pred = wgflow::npy::read(out.join("add.npy")).unwrap();
        assert_eq!(pred.to_vec::<f32>().unwrap(), [-3.5, -5.0, 5.5, 7.0], "{d}");
        let next = wgflow::npy::read(out.join("assign_add.npy")).unwrap();
        assert_eq!(
            next.item::<i32>().unwrap(),
            42,
            "{d}: the restored step + 1"
        );
        // Without --weights the variables start from their initializers.
        let fresh = dir.join(format!("fresh-{}", d.replace(':', "_")));
        run_ok(&[
            "run",
            &graph,
            "--device",
            &d,
            "--feed",
            &feed,
            "--fetch",
            "add",
            "--fetch",
            "assign_add",
            "--out",
            fresh.to_str().unwrap(),
        ]);
        let pred = wgflow::npy::read(fresh.join("add.npy")).unwrap();
        assert_ne!(pred.to_vec::<f32>().unwrap(), [-3.5, -5.0, 5.5, 7.0]);
        let next = wgflow::npy::read(fresh.join("assign_add.npy")).unwrap();
        assert_eq!(next.item::<i32>().unwrap(), 1, "{d}");
    }
    // A checkpoint that does not fit the graph: exit 1 naming the tensor, nothing written.
    let wrong = dir.join("wrong.safetensors");
    let w2 = HostTensor::from([[1.0f32, 2.0], [3.0, 4.0]]);
    wgflow::checkpoint::write(&wrong, &[("w", &w2), ("b", &b), ("step", &step)]).unwrap();
    let out = dir.join("wrong-out");
    let o = wgflow(&[
        "run",
        &graph,
        "--device",
        "cpu:0",
        "--feed",
        &feed,
        "--weights",
        wrong.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("tensor 'w' is F32 [2, 2] in the file, but the variable is f32 [3, 2]"),
        "{err}"
    );
    assert!(!out.exists(), "no output for a failed restore");
    let o = wgflow(&["run", &graph, "--weights", "/nonexistent/w.safetensors"]);
    assert!(
        text(&o.stderr).contains("cannot read"),
        "{}",
        text(&o.stderr)
    );
}

/// The session feeds the stateful random ops' run counter itself: `run` must not ask for it,
/// and `profile` must not feed it zeros (the session refuses user feeds of it).
#[test]
fn run_and_profile_a_graph_with_dropout() {
    let dir = scratch("dropout");
    let mut g = wgflow::Graph::new();
    let x = g.placeholder("x", [1000], wgflow::DType::F32).unwrap();
    let y = g.dropout(x, 0.5, 7).unwrap();
    assert_eq!(g.name(y).unwrap(), "dropout/mul");
    let path = dir.join("dropout.json");
    g.save(&path).unwrap();
    let xs = dir.join("x.npy");
    wgflow::npy::write(&xs, &HostTensor::new([1000], vec![1.0f32; 1000]).unwrap()).unwrap();
    let feed = format!("x={}", xs.display());
    let graph = path.to_str().unwrap();
    for dev in devices() {
        let d = dev.to_string();
        let out = dir.join(d.replace(':', "_"));
        run_ok(&[
            "run",
            graph,
            "--device",
            &d,
            "--feed",
            &feed,
            "--out",
            out.to_str().unwrap(),
        ]);
        let v = wgflow::npy::read(out.join("dropout_mul.npy"))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let kept = v.iter().filter(|&&e| e == 2.0).count();
        assert!(v.iter().all(|&e| e == 0.0 || e == 2.0), "{d}");
        assert!((350..650).contains(&kept), "{d}: kept {kept} of 1000");
        run_ok(&["profile", graph, "--device", &d, "--runs", "2"]);
    }
}

// ---------------------------------------------------------------------------------------
// Issue 22: the CLI never panics (exit 101) or aborts (134), whatever its input and however
// its output is closed.
// ---------------------------------------------------------------------------------------

use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The address space each process below may use: a bug that reads /dev/zero to the end or
/// sizes a buffer by a count fails fast at this limit instead of taking the machine's memory
/// (the tests start several processes at once). Far above what the small graphs need.
const MEMORY_LIMIT_KIB: u64 = 4 << 20;

/// Start wgflow under [`MEMORY_LIMIT_KIB`], its stdout and stderr going to files in `dir`
/// named after `tag` (a pipe nobody reads could fill and block it).
fn spawn_limited(dir: &std::path::Path, tag: &str, args: &[&str]) -> Child {
    let file = |ext: &str| std::fs::File::create(dir.join(format!("{tag}.{ext}"))).unwrap();
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {MEMORY_LIMIT_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env_remove("WGFLOW_VISIBLE_DEVICES")
        .stdin(Stdio::null())
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .spawn()
        .expect("run wgflow")
}

/// How a process started by [`spawn_limited`] ended: `None` if it was still running at
/// `deadline` (then it is killed).
fn finish(
    dir: &std::path::Path,
    tag: &str,
    mut child: Child,
    deadline: Instant,
) -> (Option<ExitStatus>, String, String) {
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() >= deadline {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read =
        |ext: &str| text(&std::fs::read(dir.join(format!("{tag}.{ext}"))).unwrap_or_default());
    (status, read("stdout"), read("stderr"))
}

fn mkfifo(path: &std::path::Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

/// Issue 22 (7): `wgflow devices --json | true`, `wgflow plan BIG.json | head -1`: a closed
/// stdout ends the output quietly (status 0, nothing on stderr, `run`'s files still
/// written); a closed stderr loses only the messages. Before, every subcommand panicked.
#[test]
fn closed_stdout_or_stderr_is_not_a_panic() {
    let dir = scratch("epipe");
    let mlp = graph("mlp");
    let x = example_graphs::dir().join("mlp.feeds").join("x.npy");
    let feed = format!("x={}", x.display());
    let out = |n: &str| dir.join(n).display().to_string();
    let (run_a, run_b) = (out("run-a"), out("run-b"));
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["devices"], 0),
        (vec!["devices", "--json"], 0),
        (vec!["validate", &mlp], 0),
        (vec!["plan", &mlp, "--device", "cpu:0"], 0),
        (vec!["plan", &mlp, "--device", "cpu:0", "--json"], 0),
        (vec!["dot", &mlp, "--device", "cpu:0"], 0),
        // mlp's placeholder is profiled with zeros: a note on stderr.
        (vec!["profile", &mlp, "--device", "cpu:0", "--runs", "1"], 0),
        (
            vec![
                "profile", &mlp, "--device", "cpu:0", "--runs", "1", "--json",
            ],
            0,
        ),
        (vec!["--help"], 0),
        (vec!["--version"], 0),
        (vec!["frobnicate"], 2),
        (vec!["plan", "/nonexistent/graph.json"], 1),
    ];
    let run_case = |args: &[&str], close_stdout: bool| {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wgflow"));
        cmd.args(args).env_remove("WGFLOW_VISIBLE_DEVICES");
        if close_stdout {
            cmd.stdout(writer).stderr(Stdio::piped());
        } else {
            cmd.stdout(Stdio::piped()).stderr(writer);
        }
        cmd.spawn().unwrap()
    };
    let mut children = Vec::new();
    for (args, code) in &cases {
        for close_stdout in [true, false] {
            children.push((
                args.clone(),
                *code,
                close_stdout,
                run_case(args, close_stdout),
            ));
        }
    }
    for (d, close_stdout) in [(&run_a, true), (&run_b, false)] {
        let args = vec![
            "run", &mlp, "--device", "cpu:0", "--feed", &feed, "--out", d,
        ];
        children.push((args.clone(), 0, close_stdout, run_case(&args, close_stdout)));
    }
    for (args, code, close_stdout, child) in children {
        let o = child.wait_with_output().unwrap();
        let which = if close_stdout { "stdout" } else { "stderr" };
        assert_eq!(
            o.status.code(),
            Some(code),
            "wgflow {args:?} with a closed {which}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        if close_stdout && code == 0 {
            // Quiet: no error for the closed pipe (`profile`'s note on zeros may remain).
            let err = text(&o.stderr);
            assert!(
                !err.contains("wgflow:") && !err.contains("panicked"),
                "{args:?}: {err}"
            );
        }
    }
    // The work is done whatever happened to the summary.
    for d in [&run_a, &run_b] {
        let out = std::path::Path::new(d).join("layer2_add.npy");
        assert!(out.is_file(), "{}", out.display());
    }
}

/// Issue 22 (8): `--runs 4294967295` aborted on a 34 GB `Vec::with_capacity`. Every count
/// flag at its maximum now starts working in bounded memory: still running after a few
/// seconds (or stopped with a clear error), never killed by an allocation.
#[test]
fn maximal_counts_do_not_abort() {
    let dir = scratch("counts");
    let mlp = graph("mlp");
    let x = example_graphs::dir().join("mlp.feeds").join("x.npy");
    let feed = format!("x={}", x.display());
    let out = dir.join("out").display().to_string();
    let max = u32::MAX.to_string();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "run-runs",
            vec![
                "run", &mlp, "--device", "cpu:0", "--feed", &feed, "--out", &out, "--runs", &max,
            ],
        ),
        (
            "profile-runs",
            vec!["profile", &mlp, "--device", "cpu:0", "--runs", &max],
        ),
        (
            "profile-warmup",
            vec![
                "profile", &mlp, "--device", "cpu:0", "--runs", "1", "--warmup", &max,
            ],
        ),
    ];
    let children: Vec<_> = cases
        .iter()
        .map(|(tag, args)| (tag, args, spawn_limited(&dir, tag, args)))
        .collect();
    // Long enough for each to pass its first (compiling) run, where the buffers were sized.
    std::thread::sleep(Duration::from_secs(5));
    for (tag, args, child) in children {
        let (status, _, stderr) = finish(&dir, tag, child, Instant::now());
        if let Some(s) = status {
            assert_eq!(s.code(), Some(1), "wgflow {args:?}: {s:?} {stderr}");
            assert!(
                stderr.starts_with("wgflow: ") && stderr.lines().count() == 1,
                "{stderr}"
            );
        }
    }
}

/// Issue 22 (10): every file the CLI reads (the graph of each subcommand, `--feed`,
/// `--weights`) given /dev/zero, a FIFO or a directory fails at once with exit 1 and one line
/// naming the path, instead of reading until memory runs out or blocking on the FIFO; a link
/// to a good file is read through.
#[test]
fn unreadable_input_files_are_one_line_errors() {
    let dir = scratch("inputs");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let subdir = dir.join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    let bad: Vec<String> = [
        "/dev/zero".into(),
        fifo.display().to_string(),
        subdir.display().to_string(),
    ]
    .into();
    let mlp = graph("mlp");
    let x = example_graphs::dir().join("mlp.feeds").join("x.npy");
    let linear = variable_graph(&dir);
    let weights = dir.join("weights.safetensors");
    let w = HostTensor::from([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]);
    let b = HostTensor::from([0.5f32, -1.0]);
    let step = HostTensor::scalar(41i32);
    wgflow::checkpoint::write(&weights, &[("w", &w), ("b", &b), ("step", &step)]).unwrap();
    let x23 = dir.join("x23.npy");
    wgflow::npy::write(
        &x23,
        &HostTensor::from([[1.0f32, 0.0, -1.0], [2.0, 1.0, 0.0]]),
    )
    .unwrap();
    let link = |name: &str, to: &std::path::Path| {
        let l = dir.join(name);
        std::os::unix::fs::symlink(to, &l).unwrap();
        l.display().to_string()
    };
    let good_graph = link("graph-link.json", std::path::Path::new(&mlp));
    let good_x = link("x-link.npy", &x);
    let good_weights = link("weights-link.safetensors", &weights);
    let out = dir.join("out").display().to_string();
    let cpu = ["--device", "cpu:0"];
    // (entry point, the arguments with the file to read in place of "FILE", a good file)
    let entry_points: Vec<(&str, Vec<String>, &str)> = {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let x_feed = format!("x={}", x.display());
        let x23_feed = format!("x={}", x23.display());
        vec![
            ("validate", v(&["validate", "FILE"]), &good_graph),
            (
                "run",
                v(&[
                    "run", "FILE", cpu[0], cpu[1], "--feed", &x_feed, "--out", &out, "--force",
                ]),
                &good_graph,
            ),
            ("plan", v(&["plan", "FILE", cpu[0], cpu[1]]), &good_graph),
            (
                "profile",
                v(&["profile", "FILE", cpu[0], cpu[1], "--runs", "1"]),
                &good_graph,
            ),
            ("dot", v(&["dot", "FILE", cpu[0], cpu[1]]), &good_graph),
            (
                "run-feed",
                v(&[
                    "run", &mlp, cpu[0], cpu[1], "--feed", "x=FILE", "--out", &out, "--force",
                ]),
                &good_x,
            ),
            (
                "profile-feed",
                v(&[
                    "profile", &mlp, cpu[0], cpu[1], "--feed", "x=FILE", "--runs", "1",
                ]),
                &good_x,
            ),
            (
                "run-weights",
                v(&[
                    "run",
                    &linear,
                    cpu[0],
                    cpu[1],
                    "--feed",
                    &x23_feed,
                    "--weights",
                    "FILE",
                    "--out",
                    &out,
                    "--force",
                ]),
                &good_weights,
            ),
        ]
    };
    let with = |args: &[String], file: &str| -> Vec<String> {
        args.iter().map(|a| a.replace("FILE", file)).collect()
    };
    // (tag, arguments, the file, whether it is a good one)
    let mut cases = Vec::new();
    for (name, args, good) in &entry_points {
        for (i, file) in bad.iter().enumerate() {
            cases.push((format!("{name}-{i}"), with(args, file), file.clone(), false));
        }
        cases.push((
            format!("{name}-link"),
            with(args, good),
            good.to_string(),
            true,
        ));
    }
    // A few at a time: the memory limit times the processes stays well inside the machine.
    for batch in cases.chunks(6) {
        let children: Vec<_> = batch
            .iter()
            .map(|(tag, args, _, _)| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                spawn_limited(&dir, tag, &args)
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(20);
        for ((tag, args, file, good), child) in batch.iter().zip(children) {
            let (status, _, stderr) = finish(&dir, tag, child, deadline);
            let Some(status) = status else {
                panic!("wgflow {args:?} still running after 20 s (reading {file})");
            };
            if *good {
                assert_eq!(status.code(), Some(0), "wgflow {args:?}: {stderr}");
                continue;
            }
            assert_eq!(
                status.code(),
                Some(1),
                "wgflow {args:?}: {status:?} {stderr}"
            );
            assert!(
                stderr.starts_with("wgflow: ") && stderr.lines().count() == 1,
                "wgflow {args:?}: one line: {stderr}"
            );
            // Refused for what the file is, not after reading it to the memory limit.
            assert!(
                !stderr.contains("out of memory") && !stderr.contains("allocat"),
                "wgflow {args:?}: {stderr}"
            );
            assert!(
                stderr.contains(file.as_str()),
                "wgflow {args:?}: names {file}: {stderr}"
            );
        }
    }
}

/// Issue 22 (13): nothing is written through a link at an output path (`run`'s fetches,
/// `profile --trace`/`--memory`, `plan --memory`), dangling or not, with or without
/// --force; nothing is written into a FIFO (which would block); --force replaces a regular
/// file whole and leaves no temporary file.
#[test]
fn outputs_never_follow_links_or_open_fifos() {
    let dir = scratch("links");
    let out = dir.join("out");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("target.txt");
    let add = graph("add");
    let mlp = graph("mlp");
    let out_s = out.display().to_string();
    let symlink = |at: &std::path::Path, to: &std::path::Path| {
        std::fs::remove_file(at).ok();
        std::os::unix::fs::symlink(to, at).unwrap();
    };
    // (tag, the output file, the arguments that write it)
    let svg = out.join("memory.svg");
    let trace = out.join("trace.json");
    let npy = out.join("add.npy");
    let (svg_s, trace_s) = (svg.display().to_string(), trace.display().to_string());
    let writers: Vec<(&str, &std::path::Path, Vec<&str>)> = vec![
        (
            "run",
            &npy,
            vec!["run", &add, "--device", "cpu:0", "--out", &out_s],
        ),
        (
            "plan-memory",
            &svg,
            vec!["plan", &add, "--device", "cpu:0", "--memory", &svg_s],
        ),
        (
            "profile-trace",
            &trace,
            vec![
                "profile", &mlp, "--device", "cpu:0", "--runs", "1", "--trace", &trace_s,
            ],
        ),
        (
            "profile-memory",
            &svg,
            vec![
                "profile", &mlp, "--device", "cpu:0", "--runs", "1", "--memory", &svg_s,
            ],
        ),
    ];
    let deadline = || Instant::now() + Duration::from_secs(20);
    for (tag, file, args) in &writers {
        for force in [false, true] {
            let mut args = args.clone();
            if force {
                args.push("--force");
            }
            let refused = |what: &str, tag: &str| {
                let (status, _, stderr) =
                    finish(&dir, tag, spawn_limited(&dir, tag, &args), deadline());
                let status = status.unwrap_or_else(|| panic!("wgflow {args:?} hangs on {what}"));
                assert_eq!(
                    status.code(),
                    Some(1),
                    "wgflow {args:?} on {what}: {stderr}"
                );
                assert!(
                    stderr.starts_with("wgflow: ") && stderr.contains(&file.display().to_string()),
                    "{stderr}"
                );
            };
            // A link to a file outside: refused, the file untouched.
            std::fs::write(&target, b"keep me").unwrap();
            symlink(file, &target);
            refused("a link", &format!("{tag}-{force}-link"));
            assert_eq!(std::fs::read(&target).unwrap(), b"keep me", "{args:?}");
            // A dangling link: refused, nothing created where it points.
            let nowhere = outside.join("nowhere");
            symlink(file, &nowhere);
            refused("a dangling link", &format!("{tag}-{force}-dangling"));
            assert!(
                std::fs::symlink_metadata(&nowhere).is_err(),
                "{args:?} created {}",
                nowhere.display()
            );
            std::fs::remove_file(file).unwrap();
            // A FIFO: refused without blocking.
            mkfifo(file);
            refused("a FIFO", &format!("{tag}-{force}-fifo"));
            std::fs::remove_file(file).unwrap();
        }
        // --force over a regular file replaces it, leaving no temporary file behind.
        std::fs::write(file, b"old").unwrap();
        let mut args = args.clone();
        args.push("--force");
        let tag = format!("{tag}-replace");
        let (status, _, stderr) = finish(&dir, &tag, spawn_limited(&dir, &tag, &args), deadline());
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "wgflow {args:?}: {stderr}"
        );
        assert_ne!(std::fs::read(file).unwrap(), b"old");
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("wgflow-tmp")), "{names:?}");
        std::fs::remove_file(file).unwrap();
    }
}

/// Issue 22: a huge argument quoted in an error (`--device`, `--fetch`, a feed's NAME, a
/// graph path) does not make a huge error line.
#[test]
fn huge_arguments_make_short_errors() {
    let long = "y".repeat(100_000);
    let x = example_graphs::dir().join("mlp.feeds").join("x.npy");
    let mlp = graph("mlp");
    let named_feed = format!("{long}={}", x.display());
    let cases: Vec<Vec<&str>> = vec![
        vec!["plan", &mlp, "--device", &long],
        vec!["plan", &mlp, "--device", "cpu:0", "--fetch", &long],
        vec!["run", &mlp, "--device", "cpu:0", "--feed", &long],
        vec!["run", &mlp, "--device", "cpu:0", "--feed", &named_feed],
        vec!["plan", &long],
        vec!["validate", &long],
    ];
    for args in cases {
        let o = wgflow(&args);
        let err = text(&o.stderr);
        let head: String = err.chars().take(300).collect();
        assert_eq!(o.status.code(), Some(1), "{head}");
        assert!(
            err.starts_with("wgflow: ") && err.lines().count() == 1,
            "{head}"
        );
        assert!(err.len() < 2500, "{} bytes: {head}", err.len());
    }
}

/// Issue 22: `profile` feeds zeros to placeholders it is not given; one of 2^31 elements
/// (the most a graph file declares) that does not fit in memory (here: the 4 GiB limit) is
/// an error naming it, not an abort.
#[test]
fn profile_zeros_that_do_not_fit_are_an_error() {
    let dir = scratch("zeros");
    let g = dir.join("huge.json");
    std::fs::write(
        &g,
        r#"{"format": "wgflow.graph", "version": 1, "nodes": [
            {"name": "x", "op": "placeholder", "shape": [2147483648], "dtype": "f32"},
            {"name": "y", "op": "neg", "inputs": ["x"], "shape": [2147483648], "dtype": "f32"}
        ]}"#,
    )
    .unwrap();
    let args = ["profile", g.to_str().unwrap(), "--device", "cpu:0"];
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, _, stderr) = finish(&dir, "huge", spawn_limited(&dir, "huge", &args), deadline);
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{stderr}");
    assert!(
        stderr.contains("wgflow: node 'x' on host: cannot allocate 8589934592 bytes"),
        "{stderr}"
    );
}

/// A graph file with a run-time batch: `plan` asks for its size, `--dim` gives it, and
/// `run` binds it from the feed.
#[test]
fn run_time_dimensions_take_dim_or_a_feed() {
    let dir = scratch("dims");
    let mut g = wgflow::Graph::new();
    let x = g
        .placeholder_dyn(
            "x",
            [wgflow::Dim::named("batch"), 3.into()],
            wgflow::DType::F32,
        )
        .unwrap();
    let y = g.sum(x, [1], false).unwrap();
    g.relu(y).unwrap();
    let file = dir.join("dyn.json");
    g.save(&file).unwrap();
    let file = file.to_str().unwrap();
    let out = wgflow(&["plan", file, "--device", "cpu:0"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--dim batch=SIZE"),
        "{}",
        text(&out.stderr)
    );
    let plan = run_ok(&["plan", file, "--device", "cpu:0", "--dim", "batch=5"]);
    assert!(plan.contains("[5, 3]") || plan.contains("[5]"), "{plan}");
    let out = wgflow(&["plan", file, "--dim", "rows=5"]);
    assert!(text(&out.stderr).contains("batch"), "{}", text(&out.stderr));
    let feed = dir.join("x.npy");
    wgflow::npy::write(
        &feed,
        &wgflow::HostTensor::new([2, 3], vec![1.0f32, 2.0, 3.0, -4.0, -5.0, -6.0]).unwrap(),
    )
    .unwrap();
    let out_dir = dir.join("out");
    run_ok(&[
        "run",
        file,
        "--device",
        "cpu:0",
        "--feed",
        &format!("x={}", feed.display()),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let got: Vec<std::path::PathBuf> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    let v = wgflow::npy::read(&got[0]).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), [6.0, 0.0]);
}
