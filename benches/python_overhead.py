"""What Python costs on top of Rust: the W4 MLP (batch 256, 784 -> 512 -> 512 -> 10, relu,
softmax; benches/table.rs's `mlp_w4`) run through

* wgflow's Rust `Session::run` on the same session as Python's row, timed in Rust in this
  process (the baseline),
* wgflow's Python `Session.run` (NumPy in, NumPy out),
* the `wgflow` CLI's `run --runs N` (Rust's `Session::run` in a process of its own), on the
  graph file and on the same model as ONNX,
* wgflow's Python `InferenceSession.run` on the ONNX model,
* onnxruntime's Python `InferenceSession.run` (CPUExecutionProvider) on that ONNX file,

on one device, and prints a Markdown table (median and minimum); then the same for a call
with no work in it (`y = x + 1` over 4 floats), and for the onnx package's light models at
batch 1 (`--light`). The CLI rows time themselves; the
in-process rows take turns in blocks of 20 calls.

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


def tiny_model(path):
    """``y = x + 1`` over 4 floats as ONNX: a call whose work is nothing but the call."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def per_call(fn):
    """A path timed call by call in Python, as a block function (see `interleaved`)."""

    def block(n):
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return ts

    return block


def interleaved(paths, runs, rounds):
    """Best-of-rounds median and minimum (seconds) of each in-process path, taking turns in
    blocks of 20 calls (A B C A B C ...), so that a shared machine's slow spells fall on all
    of them alike while each block runs with warm caches. A path is a function of a call
    count giving that many call times."""
    best = {}
    for _ in range(rounds):
        for _, block in paths:
            block(5)
        times = {name: [] for name, _ in paths}
        n = 20
        for _ in range(max(1, runs // n)):
            for name, block in paths:
                block(1)  # the first call of a block refills the caches the others emptied
                times[name] += block(n)
        for name, ts in times.items():
            med, mn = statistics.median(ts), min(ts)
            old = best.get(name)
            best[name] = (min(med, old[0]), min(mn, old[1])) if old else (med, mn)
    return best


def light_table(args, tmp):
    """The onnx package's light models at batch 1 (issue 42: `InferenceSession` within 5%
    of the CLI's time): Rust in this process, Python's `InferenceSession.run`, the CLI, and
    onnxruntime, per model."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    print(f"\nLight models, batch 1, device {args.device}, best of {args.rounds} rounds of {args.light_runs} runs\n")
    print("| model | Rust in process ms | Python `InferenceSession.run` ms | vs Rust | CLI `run --runs` ms | onnxruntime ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.light.split(","):
        path = os.path.join(args.light_dir, f"light_{name}.onnx")
        ours = wgflow.InferenceSession(path, device=args.device)
        inp = ours.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        n = int(np.prod(shape))
        xl = (np.arange(n).reshape(shape) / n).astype(np.float32)
        xl_npy = os.path.join(tmp, f"light_{name}_x.npy")
        np.save(xl_npy, xl)
        theirs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(ours.run(None, {inp.name: xl})[0], theirs.run(None, {inp.name: xl})[0], rtol=1e-3, atol=1e-5)
        paths = [
            ("rust", lambda k: ours._s._time_runs([(inp.name, xl)], k)),
            ("python", per_call(lambda: ours.run(None, {inp.name: xl}))),
            ("ort", per_call(lambda: theirs.run(None, {inp.name: xl}))),
        ]
        got = interleaved(paths, args.light_runs, args.rounds)
        cli = "-"
        if os.path.exists(args.cli):
            meds = [rust_cli(args.cli, path, xl_npy, args.device, args.light_runs, feed=inp.name)[0] for _ in range(args.rounds)]
            cli = f"{min(meds):.2f}"
        r, p_, o = (got[k][0] * 1e3 for k in ("rust", "python", "ort"))
        print(f"| {name} | {r:.2f} | {p_:.2f} | {100 * (p_ / r - 1):+.1f}% | {cli} | {o:.2f} |", flush=True)


def rust_cli(cli, graph_json, x_npy, device, runs, feed="x"):
    out = tempfile.mkdtemp()
    cmd = [cli, "run", graph_json, "--device", device, "--feed", f"{feed}={x_npy}", "--out", out, "--force", "--runs", str(runs)]
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
    p.add_argument("--light", default="squeezenet,shufflenet,inception_v1", help="light models (comma-separated) for the third table; empty: none")
    p.add_argument("--light-dir", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "onnx-light"))
    p.add_argument("--light-runs", type=int, default=40)
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
    # Rust's `Session::run` on the very session Python's row uses, timed in Rust (feeds
    # converted once): the baseline, interleaved with Python's calls in this process. The
    # CLI rows run the same in a process of their own, where a different heap and thread
    # start-up alone move the median by a few percent.
    rust = "wgflow Rust `Session::run` (same session, in this process)"
    paths.append((rust, lambda n: sess._s._time_runs([(x._t, xs)], [y._t], n)))
    paths.append(("wgflow Python `Session.run`", per_call(lambda: sess.run(y, {x: xs}))))
    cli_rows = {"wgflow Rust `Session::run` (CLI `run --runs`)", "wgflow Rust ONNX (CLI `run w4.onnx --runs`)"}
    if os.path.exists(args.cli):
        paths.append(("wgflow Rust `Session::run` (CLI `run --runs`)", lambda: rust_cli(args.cli, graph_json, x_npy, args.device, args.runs)))
    else:
        print(f"(no {args.cli}: build it with `cargo build --release --features cli --bin wgflow`)", file=sys.stderr)
    try:
        import onnxruntime as ort

        onnx_model(ws, model)
        ours = wgflow.InferenceSession(model, device=args.device)
        np.testing.assert_allclose(ours.run(None, {"x": xs})[0], ref, rtol=1e-4, atol=1e-6)
        if os.path.exists(args.cli):
            paths.append(("wgflow Rust ONNX (CLI `run w4.onnx --runs`)", lambda: rust_cli(args.cli, model, x_npy, args.device, args.runs)))
        paths.append(("wgflow Python `InferenceSession.run` (ONNX)", per_call(lambda: ours.run(None, {"x": xs}))))
        so = ort.SessionOptions()
        # onnxruntime's pool spins between runs by default, taking the cores the other
        # paths (timed in the same process) need.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        theirs = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(theirs.run(None, {"x": xs})[0], ref, rtol=1e-4, atol=1e-6)
        paths.append((f"onnxruntime {ort.__version__} Python `InferenceSession.run` (CPU EP)", per_call(lambda: theirs.run(None, {"x": xs}))))
    except ImportError:
        print("(onnx/onnxruntime not installed: ONNX rows skipped)", file=sys.stderr)
    paths.append(("Python call overhead alone (feed-only graph: sum of the same x)", per_call(lambda: sess0.run(y0, {x0: xs}))))
    best = {}

    def keep(name, med, mn):
        old = best.get(name)
        best[name] = (min(med, old[0]) if old else med, min(mn, old[1]) if old else mn)

    for _ in range(args.rounds):
        # The CLI rows time themselves in their own process; the in-process paths take turns.
        for name, fn in paths:
            if name in cli_rows:
                keep(name, *fn())
        calls = [(name, fn) for name, fn in paths if name not in cli_rows]
        for name, (med, mn) in interleaved(calls, args.runs, 1).items():
            keep(name, med * 1e3, mn * 1e3)
    rows = [(name, *best[name]) for name, _ in paths]

    base = rows[0][1]
    print(f"W4 MLP, batch 256, device {args.device}, best of {args.rounds} rounds of {args.runs} runs, {os.cpu_count()} CPUs\n")
    print("| path | median ms | min ms | median vs first row |")
    print("|---|---:|---:|---:|")
    for name, med, mn in rows:
        print(f"| {name} | {med:.3f} | {mn:.3f} | {100 * (med / base - 1):+.1f}% |")

    # What a call costs with no work in it: `y = x + 1` over 4 floats, through each API.
    gt = wgflow.Graph()
    xt = gt.placeholder("x", [4], "float32")
    yt = xt + 1.0
    st = wgflow.Session(gt, device=args.device)
    x4 = np.arange(4, dtype=np.float32)
    tiny = [
        ("wgflow Rust `Session::run` (same session, in this process)", lambda n: st._s._time_runs([(xt._t, x4)], [yt._t], n)),
        ("wgflow Python `Session.run`", per_call(lambda: st.run(yt, {xt: x4}))),
    ]
    try:
        import onnxruntime as ort

        tiny_path = os.path.join(tmp, "tiny.onnx")
        tiny_model(tiny_path)
        ours_t = wgflow.InferenceSession(tiny_path, device=args.device)
        so = ort.SessionOptions()
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        theirs_t = ort.InferenceSession(tiny_path, so, providers=["CPUExecutionProvider"])
        for f in (ours_t, theirs_t):
            np.testing.assert_array_equal(f.run(None, {"x": x4})[0], x4 + 1)
        tiny += [
            ("wgflow Python `InferenceSession.run` (ONNX)", per_call(lambda: ours_t.run(None, {"x": x4}))),
            (f"onnxruntime {ort.__version__} Python `InferenceSession.run` (CPU EP)", per_call(lambda: theirs_t.run(None, {"x": x4}))),
        ]
    except ImportError:
        pass
    np.testing.assert_array_equal(st.run(yt, {xt: x4}), x4 + 1)
    got = interleaved(tiny, max(args.runs, 2000), args.rounds)
    print(f"\nA call with no work in it (`y = x + 1` over 4 floats), device {args.device}, best of {args.rounds} rounds\n")
    print("| path | median µs | min µs |")
    print("|---|---:|---:|")
    for name, _ in tiny:
        med, mn = got[name]
        print(f"| {name} | {med * 1e6:.1f} | {mn * 1e6:.1f} |")
    if args.light:
        try:
            light_table(args, tmp)
        except ImportError:
            print("(onnxruntime not installed: light models skipped)", file=sys.stderr)


if __name__ == "__main__":
    main()
