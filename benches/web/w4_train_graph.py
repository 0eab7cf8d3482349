"""The browser bench's training workload: W4's MLP (batch 256, 784-512-512-10, Glorot
variables, ReLU) with softmax cross-entropy against fed soft labels and one Adam step
(lr 1e-3), as `benches/table.rs`'s `w4_training`, written as a wgflow graph file
(`w4_train.json`, the page's `GraphSession` loads it) with the loss of the first step for
the page's inputs (`w4_train.expected.json`), computed in float64 NumPy from the initial
weights that wgflow draws (the same on every device).

    pip install ./python && python benches/web/w4_train_graph.py
"""
import json
import os

import numpy as np

import wgflow

HERE = os.path.dirname(os.path.abspath(__file__))
DIMS = [784, 512, 512, 10]
BATCH = 256


def filled(n, seed):
    """bench.js's `filled`: an LCG's top 24 bits over [-0.5, 0.5), as float32."""
    out = np.empty(n, np.float32)
    s = seed & 0xFFFFFFFF
    for i in range(n):
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        out[i] = (s >> 8) / (1 << 24) - 0.5
    return out


def main():
    g = wgflow.Graph()
    x = g.placeholder("x", [BATCH, DIMS[0]], "float32")
    y = g.placeholder("y", [BATCH, DIMS[-1]], "float32")
    h, ws = x, []
    for i in range(3):
        w = g.variable(f"w{i}", shape=[DIMS[i], DIMS[i + 1]], initializer="glorot_uniform", seed=i)
        b = g.variable(f"b{i}", shape=[DIMS[i + 1]], initializer="zeros")
        ws += [w, b]
        a = h @ w + b
        h = g.relu(a) if i < 2 else a
    loss = g.sum(g.log_softmax(h, axis=-1) * y) * (-1.0 / BATCH)
    train = wgflow.train.Adam(1e-3).minimize(g, loss)
    g.save(os.path.join(HERE, "w4_train.json"))

    xs = filled(BATCH * DIMS[0], 7).reshape(BATCH, DIMS[0])
    ys = filled(BATCH * DIMS[-1], 8).reshape(BATCH, DIMS[-1])
    s = wgflow.Session(g, device="cpu:0")
    params = [s.run(v).astype(np.float64) for v in ws]
    a = xs.astype(np.float64)
    for i in range(3):
        a = a @ params[2 * i] + params[2 * i + 1]
        if i < 2:
            a = np.maximum(a, 0.0)
    logp = a - a.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    want = float(-(logp * ys).sum() / BATCH)
    _, got = s.run([train, loss], {x: xs, y: ys})
    assert abs(float(got) - want) <= 1e-5 * max(abs(want), 1.0), (got, want)
    with open(os.path.join(HERE, "w4_train.expected.json"), "w") as f:
        json.dump({"train": train.name, "loss": loss.name, "first_loss": want}, f, indent=1)
        f.write("\n")
    print(f"wrote w4_train.json; first loss {want:.6f} (wgflow cpu:0 {float(got):.6f})")


if __name__ == "__main__":
    main()
