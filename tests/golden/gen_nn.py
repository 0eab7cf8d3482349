#!/usr/bin/env python3
"""Generate tests/golden/nn.json (reductions + NN ops) and tests/golden/movement.json.

Run from the repository root:  python3 tests/golden/gen_nn.py
Deterministic (np.random.default_rng(4321), fixed case order). Same format as ops.json
(see README.md). References are computed independently of wgflow's algorithms where it
matters: float64 for sums/convolutions, plain loops for conv2d and pooling.

Attributes understood by the Rust harness (tests/nn_common/mod.rs):
  pre_perm: transpose input 0 by this permutation first (a non-contiguous view input)
  pre_flip: flip input 0 along this axis first (a negative-stride view input)
"""

import json
import math
import os
from collections import Counter

import numpy as np

rng = np.random.default_rng(4321)
HERE = os.path.dirname(os.path.abspath(__file__))
F = np.float32


from golden_json import enc  # noqa: E402


class Book:
    def __init__(self):
        self.cases, self.names = [], set()

    def add(self, name, op, attrs, inputs, output, rtol=0.0, atol=0.0):
        assert name not in self.names, name
        self.names.add(name)
        output = np.asarray(output)
        if output.dtype != np.float32:
            assert rtol == 0 and atol == 0, name
        self.cases.append({"name": name, "op": op, "attrs": attrs,
                           "inputs": [enc(x) for x in inputs], "output": enc(output),
                           "rtol": float(rtol), "atol": float(atol)})

    def dump(self, fname):
        text = '{"version": 1, "cases": [\n' + ",\n".join(
            json.dumps(c, allow_nan=False) for c in self.cases) + "\n]}\n"
        with open(os.path.join(HERE, fname), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        counts = Counter(c["op"] for c in self.cases)
        for op in sorted(counts):
            print(f"{fname:14s} {op:12s} {counts[op]}")


def f32u(shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(F)


def pre(x, attrs):
    if "pre_perm" in attrs:
        x = np.transpose(x, attrs["pre_perm"])
    if "pre_flip" in attrs:
        x = np.flip(x, attrs["pre_flip"])
    return x


def axes_t(axes):
    return None if axes is None else tuple(axes)


# ---------------------------------------------------------------- reductions
nn = Book()
RED_SHAPES = [
    ("s", (), None),
    ("all", (2, 3, 4), None),
    ("ax1", (2, 3, 4), [1]),
    ("neg", (2, 3, 4), [-1, 0]),
    ("size1", (3, 1, 2), [1]),
    ("vec", (7,), [0]),
]
for tag, shape, axes in RED_SHAPES:
    for keep in (False, True):
        k = "k" if keep else "n"
        x = f32u(shape, 0.5, 1.5)
        a = {"axes": axes, "keepdims": keep}
        nn.add(f"prod_{tag}_{k}", "prod", a, [x],
               np.prod(x.astype(np.float64), axis=axes_t(axes), keepdims=keep).astype(F), 1e-5, 1e-6)
        x = f32u(shape)
        for ddof in (0, 1):
            n = int(np.prod([shape[i] for i in (axes if axes is not None else range(len(shape)))]))
            if n <= ddof:
                continue
            a2 = dict(a, ddof=ddof)
            x64 = x.astype(np.float64)
            nn.add(f"var_{tag}_{k}_d{ddof}", "var", a2, [x],
                   np.var(x64, axis=axes_t(axes), ddof=ddof, keepdims=keep).astype(F), 1e-5, 1e-6)
            nn.add(f"std_{tag}_{k}_d{ddof}", "std", a2, [x],
                   np.std(x64, axis=axes_t(axes), ddof=ddof, keepdims=keep).astype(F), 1e-5, 1e-6)
        x = f32u(shape, -5, 5)
        x64 = x.astype(np.float64)
        m = np.max(x64, axis=axes_t(axes), keepdims=True)
        lse = np.log(np.sum(np.exp(x64 - m), axis=axes_t(axes), keepdims=True)) + m
        if not keep:
            lse = lse.reshape(np.sum(x64, axis=axes_t(axes)).shape)
        nn.add(f"logsumexp_{tag}_{k}", "logsumexp", a, [x], lse.astype(F), 1e-5, 1e-5)
        b = rng.integers(0, 2, size=shape).astype(np.bool_)
        nn.add(f"all_{tag}_{k}", "all", a, [b], np.all(b, axis=axes_t(axes), keepdims=keep))
        nn.add(f"any_{tag}_{k}", "any", a, [b], np.any(b, axis=axes_t(axes), keepdims=keep))
# all/any on ones and f32 input (x != 0, NaN is true)
ones = np.ones((2, 3), np.bool_)
nn.add("all_true", "all", {"axes": None, "keepdims": False}, [ones], np.all(ones))
xf = np.array([[0.0, np.nan, 2.0], [0.0, 0.0, 0.0], [np.nan, np.nan, np.nan], [-0.0, -0.0, 1.0]], F)
nn.add("any_f32", "any", {"axes": [1], "keepdims": False}, [xf], np.any(xf, axis=1))
nn.add("all_f32", "all", {"axes": [1], "keepdims": False}, [xf], np.all(xf, axis=1))
xi = np.array([[0, -1], [3, 3]], np.int32)
nn.add("all_i32", "all", {"axes": [1], "keepdims": False}, [xi], np.all(xi, axis=1))
nn.add("any_i32", "any", {"axes": [0], "keepdims": True}, [xi], np.any(xi, axis=0, keepdims=True))
# logsumexp edge values: large, all -inf, +inf, NaN rows
xe = np.array([[1e4, 1e4 - 1, 0], [-np.inf, -np.inf, -np.inf], [np.inf, 0, 1], [np.nan, 0, 1]], F)
want = np.array([1e4 + math.log(1 + math.exp(-1)), -np.inf, np.inf, np.nan], F)
nn.add("logsumexp_edges", "logsumexp", {"axes": [1], "keepdims": False}, [xe], want, 1e-6, 1e-6)

# argmax / argmin: ties (first wins), NaN (first NaN), inf, ints, flattened, keepdims
ARG_CASES = [
    ("ties", np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, 5, 5, 5]], F), 1),
    ("nan", np.array([[1, np.nan, 3, np.nan], [np.inf, 0, -np.inf, 1], [-np.inf, -np.inf, -np.inf, -np.inf]], F), 1),
    ("nan_first", np.array([[np.nan, 7, -7]], F), 1),
    ("axis0", f32u((4, 3)), 0),
    ("neg", f32u((2, 3, 4)), -2),
    ("flat", f32u((3, 4)), None),
    ("i32", rng.integers(-3, 3, size=(3, 5)).astype(np.int32), 1),
    ("u32", rng.integers(0, 4, size=(5, 3)).astype(np.uint32), 0),
    ("scalar", np.array(2.5, F), None),
    ("size1", f32u((3, 1)), 1),
]
for tag, x, axis in ARG_CASES:
    for keep in (False, True):
        k = "k" if keep else "n"
        a = {"axis": axis, "keepdims": keep}
        nn.add(f"argmax_{tag}_{k}", "argmax", a, [x], np.asarray(np.argmax(x, axis=axis, keepdims=keep), np.int32))
        nn.add(f"argmin_{tag}_{k}", "argmin", a, [x], np.asarray(np.argmin(x, axis=axis, keepdims=keep), np.int32))

# non-contiguous inputs: transposed and flipped views feed reductions
x = f32u((3, 4, 2))
a = {"axes": [0, 2], "keepdims": False, "pre_perm": [2, 0, 1], "ddof": 1}
nn.add("var_transposed", "var", a, [x], np.var(pre(x, a).astype(np.float64), axis=(0, 2), ddof=1).astype(F), 1e-5, 1e-6)
a = {"axis": 1, "keepdims": False, "pre_flip": 1}
nn.add("argmax_flipped", "argmax", a, [x[:, :, 0]], np.argmax(pre(x[:, :, 0], a), axis=1).astype(np.int32))
a = {"axes": [1], "keepdims": True, "pre_perm": [1, 0, 2]}
xp = f32u((3, 4, 2), 0.5, 1.5)
nn.add("prod_transposed", "prod", a, [xp], np.prod(pre(xp, a).astype(np.float64), axis=1, keepdims=True).astype(F), 1e-5, 1e-6)


# ---------------------------------------------------------------- NN
def log_softmax(x, axis):
    x64 = x.astype(np.float64)
    m = np.max(x64, axis=axis, keepdims=True)
    return (x64 - m - np.log(np.sum(np.exp(x64 - m), axis=axis, keepdims=True))).astype(F)


for tag, x, axis in [("row", f32u((2, 5)), -1), ("col", f32u((4, 3)), 0),
                     ("big", np.array([[1e4, 1e4 + 1, 1e4 - 2], [-1e4, 0, 1e4]], F), 1),
                     ("3d", f32u((2, 3, 4)), 1), ("size1", f32u((3, 1)), 1)]:
    nn.add(f"log_softmax_{tag}", "log_softmax", {"axis": axis}, [x], log_softmax(x, axis), 1e-5, 1e-5)

for tag, shape, axis in [("last", (2, 3, 8), -1), ("mid", (2, 5, 3), 1), ("vec", (6,), 0)]:
    x = f32u(shape)
    d = shape[axis]
    gshape = [1] * len(shape)
    gshape[axis] = d
    gamma = f32u(tuple(gshape), 0.5, 1.5)
    beta = f32u(tuple(gshape))
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=axis, keepdims=True)
    var = x64.var(axis=axis, keepdims=True)
    y = (x64 - mu) / np.sqrt(var + 1e-5) * gamma + beta
    nn.add(f"layer_norm_{tag}", "layer_norm", {"axis": axis, "eps": 1e-5}, [x, gamma, beta], y.astype(F), 1e-4, 1e-5)

for tag, xs, ws in [("2d", (3, 4), (4, 5)), ("3d", (2, 3, 4), (4, 2)), ("vecbias", (1, 6), (6, 1))]:
    x, w, b = f32u(xs), f32u(ws), f32u((ws[1],))
    nn.add(f"linear_{tag}", "linear", {}, [x, w, b],
           (x.astype(np.float64) @ w.astype(np.float64) + b).astype(F), 1e-5, 1e-5)


def conv2d_ref(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * padding[0], wd + 2 * padding[1]))
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd] = x
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for ni in range(n):
        for oi in range(o):
            g = oi // og
            for y in range(oh):
                for xx in range(ow):
                    acc = 0.0
                    for ci in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                acc += xp[ni, g * cg + ci, y * stride[0] + i * dilation[0],
                                          xx * stride[1] + j * dilation[1]] * w[oi, ci, i, j]
                    out[ni, oi, y, xx] = acc + (0.0 if b is None else b[oi])
    return out.astype(F)


CONV = [
    ("basic", (1, 1, 5, 5), (1, 1, 3, 3), [1, 1], [0, 0], [1, 1], 1, True),
    ("stride_pad", (2, 3, 7, 6), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1, True),
    ("dilation", (1, 2, 8, 8), (3, 2, 3, 2), [1, 2], [2, 0], [2, 1], 1, False),
    ("groups", (2, 4, 5, 5), (6, 2, 2, 2), [1, 1], [1, 1], [1, 1], 2, True),
    ("depthwise", (1, 3, 4, 4), (3, 1, 3, 3), [1, 1], [1, 1], [1, 1], 3, False),
    ("1x1", (1, 1, 1, 1), (2, 1, 1, 1), [1, 1], [0, 0], [1, 1], 1, True),
]
for tag, xs, ws, s, p, d, g, bias in CONV:
    x, w = f32u(xs), f32u(ws)
    b = f32u((ws[0],)) if bias else None
    attrs = {"stride": s, "padding": p, "dilation": d, "groups": g}
    nn.add(f"conv2d_{tag}", "conv2d", attrs, [x, w] + ([b] if bias else []),
           conv2d_ref(x.astype(np.float64), w.astype(np.float64), b, s, p, d, g), 1e-5, 1e-5)


def pool_ref(x, kind, k, s, p):
    n, c, h, w = x.shape
    oh = (h + 2 * p[0] - k[0]) // s[0] + 1
    ow = (w + 2 * p[1] - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = y * s[0] - p[0], xx * s[1] - p[1]
            win = x[:, :, max(y0, 0):min(y0 + k[0], h), max(x0, 0):min(x0 + k[1], w)].astype(np.float64)
            if kind == "max":
                out[:, :, y, xx] = np.max(win, axis=(2, 3))
            else:
                out[:, :, y, xx] = np.mean(win, axis=(2, 3))
    return out.astype(F)


POOL = [
    ("2x2", (1, 2, 4, 4), [2, 2], [2, 2], [0, 0]),
    ("3x3_s1_p1", (2, 1, 5, 4), [3, 3], [1, 1], [1, 1]),
    ("rect", (1, 3, 6, 5), [2, 3], [2, 1], [1, 1]),
    ("overlap", (1, 1, 5, 5), [3, 3], [2, 2], [0, 0]),
]
for tag, xs, k, s, p in POOL:
    x = f32u(xs)
    attrs = {"kernel": k, "stride": s, "padding": p}
    nn.add(f"max_pool2d_{tag}", "max_pool2d", attrs, [x], pool_ref(x, "max", k, s, p))
    nn.add(f"avg_pool2d_{tag}", "avg_pool2d", attrs, [x], pool_ref(x, "avg", k, s, p), 1e-6, 1e-6)
x = np.array([[[[1, np.nan], [3, 4]], [[-np.inf, -np.inf], [-np.inf, -np.inf]]]], F)
attrs = {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0]}
nn.add("max_pool2d_nan_inf", "max_pool2d", attrs, [x], np.array([[[[np.nan]], [[-np.inf]]]], F))

for tag, xs in [("4d", (2, 3, 2, 2)), ("2d", (4, 3))]:
    x = f32u(xs)
    c = xs[1]
    mean, var = f32u((c,)), f32u((c,), 0.5, 2.0)
    gamma, beta = f32u((c,)), f32u((c,))
    sh = [1] * len(xs)
    sh[1] = c
    r = lambda v: v.astype(np.float64).reshape(sh)
    y = (x - r(mean)) / np.sqrt(r(var) + 1e-3) * r(gamma) + r(beta)
    nn.add(f"batch_norm_{tag}", "batch_norm", {"eps": 1e-3}, [x, mean, var, gamma, beta], y.astype(F), 1e-5, 1e-5)

nn.dump("nn.json")

# ---------------------------------------------------------------- movement
mv = Book()
x = f32u((2, 1, 3, 1))
mv.add("squeeze_all", "squeeze", {"axes": None}, [x], np.squeeze(x))
mv.add("squeeze_one", "squeeze", {"axes": [-1]}, [x], np.squeeze(x, -1))
mv.add("squeeze_scalar", "squeeze", {"axes": None}, [np.ones((1, 1), F)], np.squeeze(np.ones((1, 1), F)))
for ax in (0, 2, -1):
    y = f32u((2, 3))
    mv.add(f"expand_dims_{ax}", "expand_dims", {"axis": ax}, [y], np.expand_dims(y, ax))
mv.add("expand_dims_scalar", "expand_dims", {"axis": 0}, [np.array(3.0, F)], np.array([3.0], F))
for tag, shape, to in [("row", (3,), (2, 3)), ("col", (2, 1), (2, 4)), ("scalar", (), (2, 2)),
                       ("3d", (1, 3, 1), (2, 3, 4)), ("i32", (1, 2), (3, 2))]:
    y = f32u(shape) if tag != "i32" else np.array([[7, -8]], np.int32)
    mv.add(f"broadcast_to_{tag}", "broadcast_to", {"shape": list(to)}, [y], np.broadcast_to(y, to))

SLICES = [
    ("basic", (5, 4), [[1, 4, 1], [None, None, 1]]),
    ("step2", (7,), [[None, None, 2]]),
    ("neg_step", (6, 3), [[None, None, -1], [2, 0, -1]]),
    ("neg_idx", (6, 5), [[-4, -1, 1], [-1, None, -2]]),
    ("neg_step3", (10,), [[8, 1, -3]]),
    ("clamped", (4,), [[-100, 100, 1]]),
    ("leading_only", (3, 4, 2), [[1, 2, 1]]),
    ("size1", (1, 3), [[None, None, -1], [1, 2, 1]]),
]


def pyslice(a):
    return slice(a[0], a[1], a[2])


for tag, shape, args in SLICES:
    y = f32u(shape)
    mv.add(f"slice_{tag}", "slice", {"args": args}, [y], y[tuple(pyslice(a) for a in args)])
yb = rng.integers(0, 2, size=(4, 3)).astype(np.bool_)
mv.add("slice_bool", "slice", {"args": [[None, None, -2]]}, [yb], yb[::-2])
yt = f32u((3, 4))
a = {"args": [[None, None, 2], [3, 0, -1]], "pre_perm": [1, 0]}
mv.add("slice_transposed", "slice", a, [yt], pre(yt, a)[::2, 3:0:-1])

for tag, shape, axes in [("all", (2, 3), None), ("ax0", (3, 2), [0]), ("neg", (2, 3, 4), [-1, 0]), ("scalar", (), None)]:
    y = f32u(shape)
    mv.add(f"flip_{tag}", "flip", {"axes": axes}, [y], np.flip(y, axis=axes_t(axes)))

for tag, shapes, axis in [("ax0", [(2, 3), (1, 3), (3, 3)], 0), ("ax1", [(2, 1), (2, 4)], 1),
                          ("neg", [(2, 2, 1), (2, 2, 3)], -1), ("many", [(1, 2)] * 9, 0)]:
    ys = [f32u(s) for s in shapes]
    mv.add(f"concat_{tag}", "concat", {"axis": axis}, ys, np.concatenate(ys, axis))
ys = [np.array([1, 2], np.int32), np.array([3], np.int32)]
mv.add("concat_i32", "concat", {"axis": 0}, ys, np.concatenate(ys))
for tag, shape, axis, n in [("ax0", (2, 3), 0, 3), ("ax1", (2, 3), 1, 2), ("last", (2,), -1, 2), ("scalars", (), 0, 3)]:
    ys = [f32u(shape) for _ in range(n)]
    mv.add(f"stack_{tag}", "stack", {"axis": axis}, ys, np.stack(ys, axis))
y = f32u((4, 6))
for i, part in enumerate(np.split(y, 3, axis=1)):
    mv.add(f"split_ax1_{i}", "split", {"sections": 3, "axis": 1, "part": i}, [y], part)
for i, part in enumerate(np.split(y, 2, axis=0)):
    mv.add(f"split_ax0_{i}", "split", {"sections": 2, "axis": 0, "part": i}, [y], part)

for tag, shape, pads, mode, val in [
    ("const2d", (2, 3), [[1, 2], [0, 1]], "constant", 0.0),
    ("const_val", (3,), [[2, 1]], "constant", -1.5),
    ("const_lead", (2, 2, 2), [[1, 0]], "constant", 7.0),
    ("reflect2d", (3, 4), [[2, 1], [1, 3]], "reflect", 0.0),
    ("reflect1d", (5,), [[4, 4]], "reflect", 0.0),
]:
    y = f32u(shape)
    full = pads + [[0, 0]] * (len(shape) - len(pads))
    want = np.pad(y, full, mode="constant", constant_values=val) if mode == "constant" else np.pad(y, full, mode="reflect")
    mv.add(f"pad_{tag}", "pad", {"pads": pads, "mode": mode, "value": val}, [y], want)
yi = np.array([[1, 2], [3, 4]], np.int32)
mv.add("pad_i32", "pad", {"pads": [[1, 1], [1, 0]], "mode": "constant", "value": 9.0}, [yi],
       np.pad(yi, [[1, 1], [1, 0]], constant_values=9))

for tag, shape, reps in [("1d", (3,), [2]), ("2d", (2, 3), [2, 2]), ("more_reps", (2,), [2, 1, 3]), ("fewer_reps", (2, 1, 2), [3]), ("scalar", (), [4])]:
    y = f32u(shape)
    mv.add(f"tile_{tag}", "tile", {"reps": reps}, [y], np.tile(y, reps))

for tag, shape, idx, axis in [("ax0", (5, 3), [4, 0, 0, 2], 0), ("ax1", (2, 4, 3), [[3, -1], [0, 1]], 1),
                              ("neg", (3, 4), [-4, -1], -1), ("scalar_idx", (4, 2), 2, 0)]:
    y = f32u(shape)
    i = np.array(idx, np.int32)
    mv.add(f"take_{tag}", "take", {"axis": axis}, [y, i], np.take(y, i, axis=axis))
# fed out-of-range indices: negatives wrap once, then clamp (documented wgflow rule)
y = f32u((4, 2))
i = np.array([7, -9, -2, 4], np.int32)
clamped = np.clip(np.where(i < 0, i + 4, i), 0, 3)
mv.add("take_clamped", "take", {"axis": 0}, [y, i], np.take(y, clamped, axis=0))

for tag, idx, depth in [("vec", [0, 2, 1, 2], 3), ("2d", [[1, 0], [3, 3]], 4), ("out_of_range", [-1, 3, 5, 0], 4), ("scalar", 1, 2)]:
    i = np.array(idx, np.int32)
    want = (i[..., None] == np.arange(depth)).astype(F)
    mv.add(f"one_hot_{tag}", "one_hot", {"depth": depth}, [i], want)

mv.dump("movement.json")

# ---------------------------------------------------------------- models (graph-examples/models.rs)
def det(shape, k, scale):
    n = int(np.prod(shape))
    return (np.sin(0.1 * np.arange(n, dtype=np.float64) + k) * scale).astype(F).reshape(shape)


def softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm64(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps) * g + b


def d64(shape, k, scale):
    return det(shape, k, scale).astype(np.float64)


models = Book()
x = det((2, 1, 8, 8), 0, 1.0)
c = conv2d_ref(x.astype(np.float64), d64((4, 1, 3, 3), 1, 0.5), d64((4,), 2, 0.1), [1, 1], [1, 1], [1, 1], 1)
r = np.maximum(c.astype(np.float64), 0)
p = r.reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
logits = p.reshape(2, 64) @ d64((64, 10), 3, 0.3) + d64((10,), 4, 0.1)
models.add("cnn", "cnn", {}, [x], softmax64(logits, -1).astype(F), 1e-4, 1e-6)

x = det((2, 5, 8), 5, 1.0)
xd = x.astype(np.float64)
B, S, D, H = 2, 5, 8, 2
Dh = D // H
h = layer_norm64(xd, d64((D,), 10, 0.2) + 1, d64((D,), 11, 0.1))
qkv = []
for k in range(3):
    y = h @ d64((D, D), 12 + 2 * k, 0.4) + d64((D,), 13 + 2 * k, 0.1)
    qkv.append(y.reshape(B, S, H, Dh).transpose(0, 2, 1, 3))
att = softmax64(qkv[0] @ qkv[1].transpose(0, 1, 3, 2) / math.sqrt(Dh), -1)
ctx = (att @ qkv[2]).transpose(0, 2, 1, 3).reshape(B, S, D)
x1 = xd + ctx @ d64((D, D), 18, 0.4) + d64((D,), 19, 0.1)
h2 = layer_norm64(x1, d64((D,), 20, 0.2) + 1, d64((D,), 21, 0.1))
hid = h2 @ d64((D, 16), 22, 0.4) + d64((16,), 23, 0.1)
act = 0.5 * hid * (1 + np.tanh(math.sqrt(2 / math.pi) * (hid + 0.044715 * hid ** 3)))
out = x1 + act @ d64((16, D), 24, 0.4) + d64((D,), 25, 0.1)
models.add("transformer", "transformer", {}, [x], out.astype(F), 1e-4, 1e-5)
models.dump("models.json")
