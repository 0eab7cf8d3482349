"""An LSTM+GRU text model, built as torch.onnx exports one (Gather embedding, Transpose to
time-major, LSTM, Squeeze, GRU with linear_before_reset, Squeeze, MatMul), with random
weights scaled to keep activations O(1) and `batch`/`seq` symbolic; then onnxruntime's CPU
provider and `wgflow profile --device cpu:0` on it, taking turns for two rounds.

    python benches/onnx_rnn.py [--wgflow target/release/wgflow] [--batch 8] [--seq 64]

Needs numpy, onnx and onnxruntime (`pip install numpy onnx onnxruntime`) and the CLI
(`cargo build --release --features cli`). Prints each round's medians and minima, and the
largest difference of wgflow's output (`wgflow run`) from onnxruntime's.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def model(path, vocab=5000, emb=128, hidden=256, seed=0):
    r = np.random.default_rng(seed)

    def u(*s, scale):
        return (r.uniform(-1, 1, s) * scale).astype(np.float32)

    H, E = hidden, emb
    inits = [
        nh.from_array(u(vocab, E, scale=1.0), "emb"),
        nh.from_array(u(1, 4 * H, E, scale=1 / np.sqrt(E)), "W1"),
        nh.from_array(u(1, 4 * H, H, scale=1 / np.sqrt(H)), "R1"),
        nh.from_array(u(1, 8 * H, scale=0.1), "B1"),
        nh.from_array(u(1, 3 * H, H, scale=1 / np.sqrt(H)), "W2"),
        nh.from_array(u(1, 3 * H, H, scale=1 / np.sqrt(H)), "R2"),
        nh.from_array(u(1, 6 * H, scale=0.1), "B2"),
        nh.from_array(u(H, 10, scale=1 / np.sqrt(H)), "Wo"),
        nh.from_array(np.array([1], np.int64), "ax1"),
        nh.from_array(np.array([0], np.int64), "ax0"),
    ]
    nodes = [
        h.make_node("Gather", ["emb", "ids"], ["e"], axis=0),
        h.make_node("Transpose", ["e"], ["x"], perm=[1, 0, 2]),
        h.make_node("LSTM", ["x", "W1", "R1", "B1"], ["y1", "", ""], hidden_size=H),
        h.make_node("Squeeze", ["y1", "ax1"], ["y1s"]),
        h.make_node("GRU", ["y1s", "W2", "R2", "B2"], ["y2", "h2"], hidden_size=H,
                    linear_before_reset=1),
        h.make_node("Squeeze", ["h2", "ax0"], ["h2s"]),
        h.make_node("MatMul", ["h2s", "Wo"], ["logits"]),
    ]
    g = h.make_graph(nodes, "rnn", [h.make_tensor_value_info("ids", T.INT64, ["batch", "seq"])],
                     [h.make_tensor_value_info("logits", T.FLOAT, ["batch", 10])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 14)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return vocab


def ort_times(path, feeds, runs=30):
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        out = s.run(None, feeds)[0]
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, feeds)
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3, ts[0] * 1e3, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wgflow", default="target/release/wgflow")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="wgflow-rnn-")
    path = os.path.join(d, "rnn.onnx")
    vocab = model(path)
    ids = np.random.default_rng(1).integers(0, vocab, (a.batch, a.seq)).astype(np.int64)
    np.save(os.path.join(d, "ids.npy"), ids)
    feed = f"ids={os.path.join(d, 'ids.npy')}"
    print(f"LSTM+GRU, hidden 256, batch {a.batch}, seq {a.seq}; onnxruntime {ort.__version__}")
    for rnd in (1, 2):
        med, mn, ref = ort_times(path, {"ids": ids})
        print(f"round {rnd}: onnxruntime median {med:.2f} ms, min {mn:.2f} ms")
        p = subprocess.run([a.wgflow, "profile", path, "--device", "cpu:0", "--feed", feed,
                            "--runs", "30"], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(p.stderr)
        line = [l for l in p.stdout.splitlines() if l.startswith("untraced")]
        print(f"round {rnd}: wgflow {line[0] if line else p.stdout[-300:]}")
    out = os.path.join(d, "out")
    p = subprocess.run([a.wgflow, "run", path, "--device", "cpu:0", "--feed", feed, "--out", out],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(p.stderr)
    got = np.load(os.path.join(out, "logits.npy"))
    print(f"max |wgflow - onnxruntime| = {np.abs(got - ref).max():.3g} (outputs' std {ref.std():.3g})")


if __name__ == "__main__":
    main()
