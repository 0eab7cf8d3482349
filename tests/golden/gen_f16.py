#!/usr/bin/env python3
"""Generate tests/golden/f16.json: golden cases for wgflow's f16 dtype.

Run from the repository root:

    python3 tests/golden/gen_f16.py

wgflow's f16 rule: every primitive is computed in f32 and its result rounded once to f16
(NumPy's float16 loops do the same); reductions and matmul accumulate in f32 and round once.
So each reference here is the f32 computation of the primitive on the f16 inputs, cast to
float16. Composites (softmax, layer_norm, gelu) round after each of their primitives in
wgflow but once here, so they get a tolerance of a few f16 ulps (f16 epsilon is 2^-10).
Deterministic: np.random.default_rng(16), fixed case order.
"""

import json
import math
import os

import numpy as np

rng = np.random.default_rng(16)
OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "f16.json")
f16, f32 = np.float16, np.float32
cases = []


from golden_json import enc  # noqa: E402


def add(name, op, attrs, inputs, output, rtol=0.0, atol=0.0):
    cases.append({"name": name, "op": op, "attrs": attrs,
                  "inputs": [enc(x) for x in inputs], "output": enc(np.asarray(output)),
                  "rtol": rtol, "atol": atol})


def h(shape, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, size=shape).astype(f16)


def w(x):
    return np.asarray(x).astype(f32)


# Edge values: NaN, ±inf, ±0, the largest finite (65504), the smallest subnormal (2^-24),
# a normal near 1, and values whose products overflow or underflow.
EDGE = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, -65504.0, 2.0 ** -24,
                 -(2.0 ** -24), 6.1035e-05, 1.0009765625, -2.5, 300.0, 0.1], dtype=f16)

UNARY = {
    "neg": lambda x: -x, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.where(np.isnan(x), x, np.maximum(x, 0)),
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "square": np.square,
    "reciprocal": lambda x: 1 / x, "sin": np.sin, "cos": np.cos,
    "rsqrt": lambda x: 1 / np.sqrt(x), "log1p": np.log1p, "expm1": np.expm1,
    "erf": np.vectorize(math.erf, otypes=[f32]), "sign": np.sign,
    "softplus": lambda x: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))),
}
# Transcendentals differ between drivers by an f32 ulp or so, which can flip an f16 rounding.
LOOSE = {"exp", "log", "tanh", "sigmoid", "sin", "cos", "rsqrt", "log1p", "expm1", "erf",
         "softplus"}

with np.errstate(all="ignore"):
    for name, fn in UNARY.items():
        x = h((3, 5))
        tol = (2e-3, 1e-6) if name in LOOSE else (0.0, 0.0)
        add(f"{name}_rand", name, {}, [x], fn(w(x)).astype(f16), *tol)
        add(f"{name}_edge", name, {}, [EDGE], fn(w(EDGE)).astype(f16), *tol)
    for name, fn in {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}.items():
        add(f"{name}_edge", name, {}, [EDGE], fn(EDGE))

    BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "maximum": np.maximum, "minimum": np.minimum}
    for name, fn in BINARY.items():
        a, b = h((4, 1, 3)), h((5, 1))
        add(f"{name}_bcast", name, {}, [a, b], fn(w(a), w(b)).astype(f16))
        e2 = EDGE[::-1].copy()
        add(f"{name}_edge", name, {}, [EDGE, e2], fn(w(EDGE), w(e2)).astype(f16))
    a, b = h((3, 4), 0.1, 3.0), h((4,), -2.0, 2.0)
    add("pow_bcast", "pow", {}, [a, b], np.power(w(a), w(b)).astype(f16), 2e-3, 1e-6)
    for name, fn in {"equal": np.equal, "less": np.less, "greater": np.greater}.items():
        e2 = EDGE[::-1].copy()
        add(f"{name}_edge", name, {}, [EDGE, e2], fn(EDGE, e2))

    # Casts: f32 -> f16 rounds to nearest even and overflows to inf; f16 -> i32 truncates.
    x32 = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65519.0, 65520.0, -1e6, 1e-8,
                    3e-8, np.nan, -np.inf, -0.0, 2049.0, 0.3333333], dtype=f32)
    add("cast_f32_to_f16", "cast", {"dtype": "f16"}, [x32], x32.astype(f16))
    add("cast_f16_to_f32", "cast", {"dtype": "f32"}, [EDGE], w(EDGE))
    xi = h((7,), -300.0, 300.0)
    add("cast_f16_to_i32", "cast", {"dtype": "i32"}, [xi], w(xi).astype(np.int32))
    ii = np.array([0, -7, 2049, 65504, 65520, 100000, -100000], dtype=np.int32)
    add("cast_i32_to_f16", "cast", {"dtype": "f16"}, [ii], w(ii).astype(f16))

    # A fused chain (one kernel): ((a*b + c) max 0) * 0.5 + exp(-a), rounded after every op.
    a, b, c = h((64,)), h((64,)), h((64,))
    r = lambda v: np.asarray(v, dtype=f32).astype(f16).astype(f32)
    t = r(r(r(w(a) * w(b)) + w(c)).clip(0, None) * 0.5)
    want = r(t + r(np.exp(r(-w(a)))))
    add("chain_fused", "chain", {}, [a, b, c], want.astype(f16), 2e-3, 1e-6)

    c, a, b = (h((4, 6)) > 0), h((4, 6)), h((6,))
    add("where", "where", {}, [c, a, b], np.where(c, a, b))

    # Reductions accumulate in f32 and round once.
    x = h((3, 40, 8))
    for op, fn in {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}.items():
        for axes in ([1], [0, 2], [2], None):
            want = fn(w(x), axis=None if axes is None else tuple(axes))
            add(f"{op}_{axes}", op, {"axes": axes, "keepdims": False}, [x],
                np.asarray(want).astype(f16), 1e-3, 1e-3)
    long = h((2, 4096), 0.0, 1.0)
    add("sum_long_rows", "sum", {"axes": [1], "keepdims": False}, [long],
        w(long).sum(axis=1).astype(f16), 1e-3, 0.0)
    xa = h((4, 9))
    xa[1, 3] = np.nan
    add("argmax_nan", "argmax", {"axis": 1}, [xa], np.argmax(xa, axis=1).astype(np.int32))
    add("argmin_nan", "argmin", {"axis": 1}, [xa], np.argmin(xa, axis=1).astype(np.int32))
    xp = h((5, 6), 0.5, 1.5)
    add("prod", "prod", {"axes": [1], "keepdims": False}, [xp],
        w(xp).prod(axis=1).astype(f16), 2e-3, 1e-6)
    xv = h((6, 10))
    add("var_ddof1", "var", {"axes": [1], "keepdims": False, "ddof": 1}, [xv],
        w(xv).var(axis=1, ddof=1).astype(f16), 8e-3, 2e-3)
    add("logsumexp", "logsumexp", {"axes": [1], "keepdims": False}, [xv],
        np.log(np.exp(w(xv)).sum(axis=1)).astype(f16), 4e-3, 2e-3)
    ls = w(xv) - np.log(np.exp(w(xv)).sum(axis=1, keepdims=True))
    add("log_softmax", "log_softmax", {"axis": -1}, [xv], ls.astype(f16), 8e-3, 4e-3)

    # matmul: f32 accumulation, one rounding (both the plain and the blocked kernels).
    for (m, k, n) in [(3, 5, 7), (32, 16, 64), (2, 64, 8)]:
        a, b = h((m, k), -1, 1), h((k, n), -1, 1)
        add(f"matmul_{m}x{k}x{n}", "matmul", {}, [a, b], (w(a) @ w(b)).astype(f16), 2e-3, 2e-3)

    # Movement moves 2-byte elements, including odd counts.
    x = h((3, 5, 7))
    add("transpose", "transpose", {"perm": [2, 0, 1]}, [x], np.transpose(x, (2, 0, 1)))
    add("slice_neg_step", "slice", {}, [x], x[::-1, 1:4, ::-2])
    add("concat", "concat", {"axis": 1}, [x, x[:, :2]], np.concatenate([x, x[:, :2]], axis=1))
    add("pad", "pad", {"value": 1.5}, [x[0]], np.pad(x[0], ((1, 2), (0, 1)), constant_values=1.5))
    add("take", "take", {"indices": [4, 0, -1]}, [x], np.take(x, [4, 0, -1], axis=1))
    add("reshape_odd", "reshape", {"shape": [5, 21]}, [x], x.reshape(5, 21))
    add("flip", "flip", {"axes": [0, 2]}, [x], np.flip(x, (0, 2)))
    xb = h((3, 1))
    add("broadcast_to", "broadcast_to", {"shape": [2, 3, 5]}, [xb], np.broadcast_to(xb, (2, 3, 5)))

    # linear: matmul with the bias as an epilogue, then silu (also fused).
    xl, wl, bl = h((8, 12), -1, 1), h((12, 16), -1, 1), h((16,), -1, 1)
    y = (w(xl) @ w(wl)).astype(f16).astype(f32) + w(bl)
    y = y.astype(f16).astype(f32)
    add("linear_silu", "linear_silu", {}, [xl, wl, bl],
        (y / (1 + np.exp(-y))).astype(f16), 4e-3, 4e-3)

    # NN composites, rounded after each primitive in wgflow.
    x = h((4, 33), -6, 6)
    e = np.exp(w(x) - w(x).max(axis=-1, keepdims=True))
    add("softmax", "softmax", {"axis": -1}, [x], (e / e.sum(axis=-1, keepdims=True)).astype(f16),
        8e-3, 1e-3)
    big = np.array([[1e4, 0, -1e4], [60000, 60000, -60000]], dtype=f16)
    e = np.exp(w(big) - w(big).max(axis=-1, keepdims=True))
    add("softmax_large", "softmax", {"axis": -1}, [big],
        (e / e.sum(axis=-1, keepdims=True)).astype(f16), 8e-3, 1e-3)
    x = h((5, 16))
    xm = w(x) - w(x).mean(axis=-1, keepdims=True)
    ln = xm / np.sqrt((xm * xm).mean(axis=-1, keepdims=True) + 1e-5)
    add("layer_norm", "layer_norm", {"eps": 1e-5}, [x], ln.astype(f16), 8e-3, 8e-3)
    x = h((3, 11))
    erf = np.vectorize(math.erf)
    g = 0.5 * w(x) * (1 + erf(w(x) / math.sqrt(2)))
    add("gelu", "gelu", {}, [x], g.astype(f32).astype(f16), 8e-3, 2e-3)

    # Special values (after the cases above so their random data stays the same): pow's C99
    # cases, float floor_divide/remainder (NumPy's float16 loops compute them in f32 too),
    # and float -> int casts of ±inf/NaN, which saturate (NaN -> 0).
    sa, sb = np.repeat(EDGE, len(EDGE)), np.tile(EDGE, len(EDGE))
    out = np.power(w(sa), w(sb)).astype(f16)
    exact = (~np.isfinite(out) | (out == 0) | (np.abs(out) == 1) | ~np.isfinite(sa)
             | ~np.isfinite(sb) | np.isin(np.abs(sa), [0, 1]) | np.isin(sb, [0, 1, 2]))
    add("pow_edge_exact", "pow", {}, [sa[exact], sb[exact]], out[exact])
    add("pow_edge_rounded", "pow", {}, [sa[~exact], sb[~exact]], out[~exact], 2e-3, 0.0)
    nb = np.array([-2.0, -2.0, -3.0, -1.5, -0.5, -2.0], dtype=f16)
    ne = np.array([3.0, -3.0, 4.0, 0.5, 5.0, 2.0], dtype=f16)
    add("pow_negative_bases", "pow", {}, [nb, ne], np.power(w(nb), w(ne)).astype(f16), 2e-3, 0.0)
    for name, fn in {"floor_divide": np.floor_divide, "remainder": np.remainder}.items():
        assert np.array_equal(fn(sa, sb), fn(w(sa), w(sb)).astype(f16), equal_nan=True)
        add(f"{name}_edge", name, {}, [sa, sb], fn(w(sa), w(sb)).astype(f16))
        a, b = h((4, 1, 3), -20, 20), h((5, 1), -6, 6)
        add(f"{name}_bcast", name, {}, [a, b], fn(w(a), w(b)).astype(f16))
    add("cast_f16_to_i32_edge", "cast", {"dtype": "i32"}, [EDGE],
        np.array([0 if math.isnan(v) else int(min(max(v, -2.0 ** 31), 2.0 ** 31 - 1))
                  for v in w(EDGE).astype(float).tolist()], dtype=np.int32))
    add("cast_f16_to_u32_edge", "cast", {"dtype": "u32"}, [EDGE],
        np.array([0 if math.isnan(v) else int(min(max(v, 0.0), 2.0 ** 32 - 1))
                  for v in w(EDGE).astype(float).tolist()], dtype=np.uint32))

with open(OUT_PATH, "w") as f:
    json.dump({"version": 1, "cases": cases}, f, indent=None, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {OUT_PATH}")
