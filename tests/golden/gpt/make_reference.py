"""JAX float64 reference for the tiny character-level GPT used by wgflow's Rust tests.

Writes tests/golden/gpt/reference.json:
    {"loss": float, "grads": {name: [flat row-major floats]}, "shapes": {name: [dims]}}
All floats are written with repr() (full float64 precision).

Run (from the repository root):
    python3 -m venv venv
    venv/bin/pip install -r tests/golden/gpt/requirements.txt
    venv/bin/python tests/golden/gpt/make_reference.py

The committed reference.json was produced with Python 3.11.7, jax==0.10.2,
jaxlib==0.10.2, numpy==2.4.6 on CPU.

Model (must match the Rust side):
  VOCAB=96, T=5, B=2, d=8, H=2 (hd=4), L=2, MLP hidden 4*d=32, GELU (tanh),
  pre-LN blocks without attention-projection biases, tied output embedding
  (logits = lnf(x) @ wte^T), causal mask -1e9, layer-norm eps 1e-5 (biased var).
  Parameter p (order below), flat index i:
      0.3 * sin(0.7*i + 1.3*p + 0.5)          (all params)
      1.0 + 0.1 * sin(0.7*i + 1.3*p + 0.5)    (names ending in ".g")
  computed in f64, rounded to f32, then used as f64.
  Tokens x[b][t] = (7b + 13t + 3) % 96, targets y[b][t] = (5b + 11t + 1) % 96.
  Loss = mean over B*T rows of cross-entropy.
"""
import json
import math
import os

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

VOCAB, T, B, D, H, L = 96, 5, 2, 8, 2, 2
HD = D // H
FF = 4 * D
EPS = 1e-5


def param_specs():
    specs = [("wte", (VOCAB, D)), ("wpe", (T, D))]
    for l in range(L):
        p = f"h{l}"
        specs += [
            (f"{p}.ln1.g", (D,)), (f"{p}.ln1.b", (D,)),
            (f"{p}.wq", (D, D)), (f"{p}.wk", (D, D)),
            (f"{p}.wv", (D, D)), (f"{p}.wo", (D, D)),
            (f"{p}.ln2.g", (D,)), (f"{p}.ln2.b", (D,)),
            (f"{p}.w1", (D, FF)), (f"{p}.b1", (FF,)),
            (f"{p}.w2", (FF, D)), (f"{p}.b2", (D,)),
        ]
    specs += [("lnf.g", (D,)), ("lnf.b", (D,))]
    return specs


def init_params():
    params = {}
    for p, (name, shape) in enumerate(param_specs()):
        n = int(np.prod(shape))
        i = np.arange(n, dtype=np.float64)
        s = np.sin(0.7 * i + 1.3 * p + 0.5)
        v = 1.0 + 0.1 * s if name.endswith(".g") else 0.3 * s
        v = v.astype(np.float32).astype(np.float64)  # match Rust f64 -> f32
        params[name] = jnp.asarray(v.reshape(shape))
    return params


def tokens():
    x = np.array([[(7 * b + 13 * t + 3) % VOCAB for t in range(T)] for b in range(B)], dtype=np.int64)
    y = np.array([[(5 * b + 11 * t + 1) % VOCAB for t in range(T)] for b in range(B)], dtype=np.int64)
    return x, y


def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + EPS) * g + b


def gelu_tanh(h):
    return 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))


def loss_fn(params, x, y):
    e = params["wte"][x] + params["wpe"][0:T][None, :, :]
    h_ = e.reshape(B * T, D)
    mask = jnp.where(jnp.arange(T)[None, :] > jnp.arange(T)[:, None], -1e9, 0.0)
    for l in range(L):
        p = f"h{l}"
        h = layer_norm(h_, params[f"{p}.ln1.g"], params[f"{p}.ln1.b"])

        def heads(m):
            return m.reshape(B, T, H, HD).transpose(0, 2, 1, 3)

        q, k, v = heads(h @ params[f"{p}.wq"]), heads(h @ params[f"{p}.wk"]), heads(h @ params[f"{p}.wv"])
        scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(HD)) + mask
        att = jax.nn.softmax(scores, axis=-1)
        yv = (att @ v).transpose(0, 2, 1, 3).reshape(B * T, D)
        h_ = h_ + yv @ params[f"{p}.wo"]
        h = layer_norm(h_, params[f"{p}.ln2.g"], params[f"{p}.ln2.b"])
        h = gelu_tanh(h @ params[f"{p}.w1"] + params[f"{p}.b1"])
        h_ = h_ + (h @ params[f"{p}.w2"] + params[f"{p}.b2"])
    h_ = layer_norm(h_, params["lnf.g"], params["lnf.b"])
    logits = h_ @ params["wte"].T
    logp = jax.nn.log_softmax(logits, axis=-1)
    yf = y.reshape(B * T)
    return -jnp.mean(logp[jnp.arange(B * T), yf])


def main():
    params = init_params()
    x, y = tokens()
    loss, grads = jax.value_and_grad(loss_fn)(params, jnp.asarray(x), jnp.asarray(y))
    assert grads["wte"].dtype == jnp.float64
    out = {
        "loss": float(loss),
        "grads": {n: [float(v) for v in np.asarray(grads[n]).reshape(-1)] for n, _ in param_specs()},
        "shapes": {n: list(s) for n, s in param_specs()},
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.json")
    # json.dumps uses float.__repr__, i.e. shortest round-trip (full precision) repr.
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"loss={float(loss)!r} -> {path}")


if __name__ == "__main__":
    main()
