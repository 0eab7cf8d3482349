"""Throughput benchmark: same GPT architecture as make_reference.py, trained with a
hand-written AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, decoupled weight decay 0.01 on
all params) in float32 under jax.jit on CPU. Random int tokens (vocab 96).

Run:  python benches/gpt_jax.py [--batch 16 --context 64
      --width 128 --heads 4 --layers 2 --steps 50 --warmup 5]
Prints exactly one JSON line. Only the steps after warmup are timed.
"""
import argparse
import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

VOCAB = 96
EPS = 1e-5


def init_params(key, T, D, L):
    ks = iter(jax.random.split(key, 2 + 6 * L))
    n = lambda shape: 0.02 * jax.random.normal(next(ks), shape, jnp.float32)  # noqa: E731
    p = {"wte": n((VOCAB, D)), "wpe": n((T, D))}
    for l in range(L):
        h = f"h{l}"
        p.update({
            f"{h}.ln1.g": jnp.ones(D, jnp.float32), f"{h}.ln1.b": jnp.zeros(D, jnp.float32),
            f"{h}.wq": n((D, D)), f"{h}.wk": n((D, D)), f"{h}.wv": n((D, D)), f"{h}.wo": n((D, D)),
            f"{h}.ln2.g": jnp.ones(D, jnp.float32), f"{h}.ln2.b": jnp.zeros(D, jnp.float32),
            f"{h}.w1": n((D, 4 * D)), f"{h}.b1": jnp.zeros(4 * D, jnp.float32),
            f"{h}.w2": n((4 * D, D)), f"{h}.b2": jnp.zeros(D, jnp.float32),
        })
    p["lnf.g"] = jnp.ones(D, jnp.float32)
    p["lnf.b"] = jnp.zeros(D, jnp.float32)
    return p


def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + EPS) * g + b


def gelu_tanh(h):
    return 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))


def make_loss(B, T, D, H, L):
    HD = D // H
    mask = jnp.where(jnp.arange(T)[None, :] > jnp.arange(T)[:, None], -1e9, 0.0).astype(jnp.float32)

    def heads(m):
        return m.reshape(B, T, H, HD).transpose(0, 2, 1, 3)

    def loss_fn(p, x, y):
        h_ = (p["wte"][x] + p["wpe"][None, :T]).reshape(B * T, D)
        for l in range(L):
            pre = f"h{l}"
            h = layer_norm(h_, p[f"{pre}.ln1.g"], p[f"{pre}.ln1.b"])
            q, k, v = heads(h @ p[f"{pre}.wq"]), heads(h @ p[f"{pre}.wk"]), heads(h @ p[f"{pre}.wv"])
            att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(HD)) + mask, axis=-1)
            h_ = h_ + (att @ v).transpose(0, 2, 1, 3).reshape(B * T, D) @ p[f"{pre}.wo"]
            h = layer_norm(h_, p[f"{pre}.ln2.g"], p[f"{pre}.ln2.b"])
            h = gelu_tanh(h @ p[f"{pre}.w1"] + p[f"{pre}.b1"])
            h_ = h_ + h @ p[f"{pre}.w2"] + p[f"{pre}.b2"]
        h_ = layer_norm(h_, p["lnf.g"], p["lnf.b"])
        logp = jax.nn.log_softmax(h_ @ p["wte"].T, axis=-1)
        return -jnp.mean(logp[jnp.arange(B * T), y.reshape(B * T)])

    return loss_fn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    B, T, D, H, L = a.batch, a.context, a.width, a.heads, a.layers
    assert D % H == 0

    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    loss_fn = make_loss(B, T, D, H, L)

    @jax.jit
    def step(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        c1 = 1 - b1 ** t.astype(jnp.float32)
        c2 = 1 - b2 ** t.astype(jnp.float32)
        p = jax.tree_util.tree_map(
            lambda p_, m_, v_: p_ - lr * wd * p_ - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), p, m, v)
        return p, m, v, t, loss

    p = init_params(jax.random.PRNGKey(0), T, D, L)
    m = jax.tree_util.tree_map(jnp.zeros_like, p)
    v = jax.tree_util.tree_map(jnp.zeros_like, p)
    t = jnp.array(0, jnp.int32)
    rng = np.random.default_rng(0)
    batches = [(jnp.asarray(rng.integers(0, VOCAB, (B, T)), jnp.int32),
                jnp.asarray(rng.integers(0, VOCAB, (B, T)), jnp.int32))
               for _ in range(a.warmup + a.steps)]

    for i in range(a.warmup):
        p, m, v, t, loss = step(p, m, v, t, *batches[i])
    jax.block_until_ready((p, m, v, loss))
    t0 = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.steps):
        p, m, v, t, loss = step(p, m, v, t, *batches[i])
    jax.block_until_ready((p, m, v, loss))
    dt = time.perf_counter() - t0
    print(json.dumps({
        "jax_version": jax.__version__,
        "tokens_per_s": a.steps * B * T / dt,
        "step_ms": 1000.0 * dt / a.steps,
        "batch": B, "context": T, "width": D, "layers": L,
    }))


if __name__ == "__main__":
    main()
