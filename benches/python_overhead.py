"""What Python costs on top of Rust: the W4 MLP (batch 256, 784 -> 512 -> 512 -> 10, relu,
softmax; benches/table.rs's `mlp_w4`) run through

* wgflow's Rust `Session::run` (the `wgflow` CLI's `run --runs N`, which times exactly that),
* wgflow's Python `Session.run` (NumPy in, NumPy out),
* wgflow's Python `InferenceSession.run` on the same model as ONNX,
* onnxruntime's Python `InferenceSession.run` (CPUExecutionProvider) on that ONNX file,

in one process run, on one device, and prints a Markdown table (median and minimum). The
CLI rows time themselves; the in-process rows take turns in blocks of 20 calls.

    cargo build --release --features cli --bin wgflow
    pip install ./python onnx onnxruntime
    python benches/python_overhead.py --device cpu:0 --runs 200
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import wgflow

LAYERS = [(784, 512), (512, 512), (512, 10)]


def weights():
    rng = np.random.default_rng(42)
    return [
        ((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), (rng.standard_normal(n) * 0.1).astype(np.float32))
        for k, n in LAYERS
    ]


def wgflow_graph(ws):
    g = wgflow.Graph()
    x = g.placeholder("x", [256, 784], "float32")
    h = x
    for i, (w, b) in enumerate(ws):
        a = h @ g.constant(w) + g.constant(b)
        h = g.relu(a) if i < len(ws) - 1 else g.softmax(a, axis=-1)
    return g, x, h


def onnx_model(ws, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, h = [], [], "x"
    for i, (w, b) in enumerate(ws):
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"]), helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        h = f"h{i}" if i < len(ws) - 1 else "y"
        nodes.append(helper.make_node("Relu" if i < len(ws) - 1 else "Softmax", [f"a{i}"], [h], **({} if i < len(ws) - 1 else {"axis": -1})))
    graph = helper.make_graph(
        nodes, "w4",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 784])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 10])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def rust_cli(cli, graph_json, x_npy, device, runs):
    out = tempfile.mkdtemp()
    cmd = [cli, "run", graph_json, "--device", device, "--feed", f"x={x_npy}", "--out", out, "--force", "--runs", str(runs)]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"run median ([0-9.]+) ms, min ([0-9.]+) ms", text)
    if m is None:
        raise RuntimeError(f"unexpected CLI output:\n{text}")
    return float(m.group(1)), float(m.group(2))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu:0")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3, help="rounds of every path, interleaved; the best median counts (a shared machine's noise only adds)")
    p.add_argument("--cli", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "wgflow"))
    args = p.parse_args()

    ws = weights()
    xs = np.random.default_rng(0).standard_normal((256, 784)).astype(np.float32)
    tmp = tempfile.mkdtemp()
    g, x, y = wgflow_graph(ws)
    graph_json, x_npy, model = (os.path.join(tmp, n) for n in ("w4.json", "x.npy", "w4.onnx"))
    g.save(graph_json)
    np.save(x_npy, xs)

    sess = wgflow.Session(g, device=args.device)
    ref = sess.run(y, {x: xs})
    # The fixed cost of a call through Python (feed conversion and copy, result wrapping,
    # GIL release) on a graph whose own work is tiny: the same 784 KiB feed, summed.
    g0 = wgflow.Graph()
    x0 = g0.placeholder("x", [256, 784], "float32")
    y0 = g0.sum(x0)
    sess0 = wgflow.Session(g0, device=args.device)
    paths = []
    cli_rows = {"wgflow Rust `Session::run` (CLI `run --runs`)", "wgflow Rust ONNX (CLI `run w4.onnx --runs`)"}
    if os.path.exists(args.cli):
        paths.append(("wgflow Rust `Session::run` (CLI `run --runs`)", lambda: rust_cli(args.cli, graph_json, x_npy, args.device, args.runs)))
    else:
        print(f"(no {args.cli}: build it with `cargo build --release --features cli --bin wgflow`)", file=sys.stderr)
    paths.append(("wgflow Python `Session.run`", lambda: sess.run(y, {x: xs})))
    try:
        import onnxruntime as ort

        onnx_model(ws, model)
        ours = wgflow.InferenceSession(model, device=args.device)
        np.testing.assert_allclose(ours.run(None, {"x": xs})[0], ref, rtol=1e-4, atol=1e-6)
        if os.path.exists(args.cli):
            paths.append(("wgflow Rust ONNX (CLI `run w4.onnx --runs`)", lambda: rust_cli(args.cli, model, x_npy, args.device, args.runs)))
        paths.append(("wgflow Python `InferenceSession.run` (ONNX)", lambda: ours.run(None, {"x": xs})))
        so = ort.SessionOptions()
        # onnxruntime's pool spins between runs by default, taking the cores the other
        # paths (timed in the same process) need.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        theirs = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(theirs.run(None, {"x": xs})[0], ref, rtol=1e-4, atol=1e-6)
        paths.append((f"onnxruntime {ort.__version__} Python `InferenceSession.run` (CPU EP)", lambda: theirs.run(None, {"x": xs})))
    except ImportError:
        print("(onnx/onnxruntime not installed: ONNX rows skipped)", file=sys.stderr)
    paths.append(("Python call overhead alone (feed-only graph: sum of the same x)", lambda: sess0.run(y0, {x0: xs})))
    best = {}

    def keep(name, med, mn):
        old = best.get(name)
        best[name] = (min(med, old[0]) if old else med, min(mn, old[1]) if old else mn)

    for _ in range(args.rounds):
        # The CLI rows time themselves in their own process; the in-process paths take turns
        # in blocks of 20 calls (A B C A B C ...), so that a shared machine's slow spells fall
        # on all of them alike while each block runs with warm caches.
        for name, fn in paths:
            if name in cli_rows:
                keep(name, *fn())
        calls = [(name, fn) for name, fn in paths if name not in cli_rows]
        for _, fn in calls:
            for _ in range(5):
                fn()
        times = {name: [] for name, _ in calls}
        block = 20
        for _ in range(max(1, args.runs // block)):
            for name, fn in calls:
                fn()  # the first call of a block refills the caches the others emptied
                for _ in range(block):
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
        for name, ts in times.items():
            keep(name, statistics.median(ts) * 1e3, min(ts) * 1e3)
    rows = [(name, *best[name]) for name, _ in paths]

    base = rows[0][1]
    print(f"W4 MLP, batch 256, device {args.device}, best of {args.rounds} rounds of {args.runs} runs, {os.cpu_count()} CPUs\n")
    print("| path | median ms | min ms | median vs first row |")
    print("|---|---:|---:|---:|")
    for name, med, mn in rows:
        print(f"| {name} | {med:.3f} | {mn:.3f} | {100 * (med / base - 1):+.1f}% |")


if __name__ == "__main__":
    main()
