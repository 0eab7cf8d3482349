#!/usr/bin/env python3
"""Generate tests/golden/ops.json: golden input/output cases for wgflow ops.

Run from the repository root:

    python3 tests/golden/gen_ops.py

The output is deterministic (np.random.default_rng(1234), fixed case order),
so re-running regenerates the same file byte-for-byte on the same machine /
NumPy build.
"""

import json
import os
from collections import Counter

import numpy as np

rng = np.random.default_rng(1234)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json")

NP_DTYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}

cases = []
_names = set()


# --------------------------------------------------------------------------
# Encoding helpers
# --------------------------------------------------------------------------

from golden_json import enc  # noqa: E402


def add_case(name, op, attrs, inputs, output, rtol, atol):
    assert name not in _names, f"duplicate case name {name}"
    _names.add(name)
    output = np.asarray(output)
    if output.dtype in (np.int32, np.uint32, np.bool_):
        assert rtol == 0 and atol == 0, name
    cases.append({
        "name": name,
        "op": op,
        "attrs": attrs,
        "inputs": [enc(np.asarray(x)) for x in inputs],
        "output": enc(output),
        "rtol": float(rtol),
        "atol": float(atol),
    })


# --------------------------------------------------------------------------
# Data helpers
# --------------------------------------------------------------------------

def f32u(shape, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def i32u(shape, lo=-100, hi=100):
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(np.int32)


def u32u(shape, lo=0, hi=100):
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(np.uint32)


def nonzero_f32(shape, lo=0.5, hi=4.0):
    mag = rng.uniform(lo, hi, size=shape)
    sign = np.where(rng.integers(0, 2, size=shape) == 0, -1.0, 1.0)
    return (mag * sign).astype(np.float32)


def nonzero_i32(shape, lo=1, hi=10):
    mag = rng.integers(lo, hi, size=shape, endpoint=True)
    sign = np.where(rng.integers(0, 2, size=shape) == 0, -1, 1)
    return (mag * sign).astype(np.int32)


def shape_tag(shape):
    return "x".join(str(d) for d in shape) if len(shape) else "s"


# --------------------------------------------------------------------------
# Binary elementwise ops
# --------------------------------------------------------------------------

# (tag, shape_a, shape_b)
F32_BIN_SHAPES = [
    ("same", (2, 3), (2, 3)),
    ("broadcast_row", (2, 3), (3,)),
    ("broadcast_outer", (2, 1), (1, 3)),
    ("broadcast_3d", (4, 1, 3), (2, 1)),
    ("scalar_lhs", (), (2, 3)),
    ("scalar_only", (), ()),
]
# int dtypes: a smaller selection
INT_BIN_SHAPES = [
    ("same", (2, 3), (2, 3)),
    ("broadcast_outer", (2, 1), (1, 3)),
    ("scalar_rhs", (2, 3), ()),
]
# extra size-1-axes case for f32
F32_SIZE1 = ("size1_axes", (1, 4, 1), (1, 1, 1))


def int_trunc_div(a, b, out_dtype):
    q = np.trunc(a.astype(np.float64) / b.astype(np.float64))
    return q.astype(out_dtype)


BIN_NP = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def gen_binary_inputs(op, dt, sa, sb):
    if dt == "f32":
        a = f32u(sa)
        b = nonzero_f32(sb) if op == "div" else f32u(sb)
    elif dt == "i32":
        if op == "div":
            a = i32u(sa)
            b = nonzero_i32(sb)
        else:
            a = i32u(sa)
            b = i32u(sb)
    else:  # u32
        if op == "sub":
            a = u32u(sa, 50, 100)
            b = u32u(sb, 0, 50)
        elif op == "div":
            a = u32u(sa, 0, 100)
            b = u32u(sb, 1, 12)
        else:
            a = u32u(sa)
            b = u32u(sb)
    return a, b


def compute_binary(op, a, b):
    if op == "div":
        if a.dtype == np.float32:
            return np.divide(a, b)
        return int_trunc_div(a, b, a.dtype)
    return BIN_NP[op](a, b)


for op in ["add", "sub", "mul", "div", "maximum", "minimum"]:
    for dt in ["f32", "i32", "u32"]:
        shapes = F32_BIN_SHAPES if dt == "f32" else INT_BIN_SHAPES
        if dt == "f32" and op in ("add", "mul"):
            shapes = shapes + [F32_SIZE1]
        for tag, sa, sb in shapes:
            a, b = gen_binary_inputs(op, dt, sa, sb)
            if op in ("maximum", "minimum") and dt == "f32" and tag == "same":
                # force a couple of ties
                b.reshape(-1)[0] = a.reshape(-1)[0]
                b.reshape(-1)[4] = a.reshape(-1)[4]
            if op == "div" and dt == "i32" and tag == "same":
                # make sure truncation vs floor is exercised explicitly
                a = np.array([[-7, 7, -7], [9, -1, 100]], dtype=np.int32)
                b = np.array([[2, -2, -2], [-4, 3, 7]], dtype=np.int32)
            out = compute_binary(op, a, b)
            assert out.dtype == a.dtype
            if dt == "f32":
                rtol, atol = 1e-6, 1e-6
            else:
                rtol, atol = 0, 0
            add_case(f"{op}_{dt}_{tag}", op, {}, [a, b], out, rtol, atol)

# pow: f32 only
POW_SHAPES = [
    ("same", (2, 3), (2, 3)),
    ("broadcast_row", (2, 3), (3,)),
    ("broadcast_outer", (2, 1), (1, 3)),
    ("broadcast_3d", (4, 1, 3), (2, 1)),
    ("scalar_base", (), (2, 3)),
    ("scalar_only", (), ()),
]
for tag, sa, sb in POW_SHAPES:
    a = f32u(sa, 0.1, 3.0)
    b = f32u(sb, -2.0, 2.0)
    add_case(f"pow_f32_{tag}", "pow", {}, [a, b], np.power(a, b), 1e-5, 1e-6)
# pow with "nice" exponents
a = np.array([0.5, 2.0, 3.0, 1.5, 0.25, 2.5], dtype=np.float32)
b = np.array([0.0, 1.0, 2.0, -1.0, 0.5, -2.0], dtype=np.float32)
add_case("pow_f32_special_exponents", "pow", {}, [a, b], np.power(a, b), 1e-5, 1e-6)


# --------------------------------------------------------------------------
# Unary ops
# --------------------------------------------------------------------------

def sigmoid_f32(x):
    x64 = x.astype(np.float64)
    return (1.0 / (1.0 + np.exp(-x64))).astype(np.float32)


UNARY_SHAPES = [("2x3", (2, 3)), ("size1", (1, 5, 1)), ("scalar", ())]

UNARY_F32 = {
    "neg": (lambda x: np.negative(x), (-4, 4), 0, 0),
    "abs": (lambda x: np.abs(x), (-4, 4), 0, 0),
    "relu": (lambda x: np.maximum(x, np.float32(0)), (-4, 4), 0, 0),
    "exp": (lambda x: np.exp(x), (-4, 4), 1e-5, 1e-6),
    "log": (lambda x: np.log(x), (0.05, 4), 1e-5, 1e-6),
    "sqrt": (lambda x: np.sqrt(x), (0, 4), 1e-5, 1e-6),
    "tanh": (lambda x: np.tanh(x), (-4, 4), 1e-5, 1e-6),
    "sigmoid": (sigmoid_f32, (-4, 4), 1e-5, 1e-6),
}

for op, (fn, (lo, hi), rtol, atol) in UNARY_F32.items():
    for tag, shape in UNARY_SHAPES:
        x = f32u(shape, lo, hi)
        if op == "relu" and tag == "2x3":
            x.reshape(-1)[2] = np.float32(0.0)  # exact zero input
        out = fn(x)
        assert out.dtype == np.float32, op
        add_case(f"{op}_f32_{tag}", op, {}, [x], out, rtol, atol)

# special values
x = np.array([0.0, 1.0, np.e, 1e-30, 1e30, np.inf], dtype=np.float32)
with np.errstate(divide="ignore"):
    y = np.log(x)
add_case("log_f32_special", "log", {}, [x], y, 1e-5, 1e-6)
x = np.array([0.0, 1.0, 4.0, 1e-30, 1e30, np.inf], dtype=np.float32)
add_case("sqrt_f32_special", "sqrt", {}, [x], np.sqrt(x), 1e-5, 1e-6)
x = np.array([-20.0, -10.0, 0.0, 10.0, 20.0, 50.0], dtype=np.float32)
add_case("sigmoid_f32_wide", "sigmoid", {}, [x], sigmoid_f32(x), 1e-5, 1e-6)
x = np.array([-20.0, -1e-3, 0.0, 1e-3, 9.0, 20.0], dtype=np.float32)
add_case("tanh_f32_wide", "tanh", {}, [x], np.tanh(x), 1e-5, 1e-6)

# i32 unary
UNARY_I32 = {
    "neg": lambda x: np.negative(x),
    "abs": lambda x: np.abs(x),
    "relu": lambda x: np.maximum(x, np.int32(0)),
}
for op, fn in UNARY_I32.items():
    x = i32u((2, 3))
    x.reshape(-1)[0] = 0
    add_case(f"{op}_i32_2x3", op, {}, [x], fn(x), 0, 0)
    x = i32u(())
    add_case(f"{op}_i32_scalar", op, {}, [x], fn(x), 0, 0)


# --------------------------------------------------------------------------
# Comparisons -> bool
# --------------------------------------------------------------------------

CMP_NP = {"equal": np.equal, "less": np.less, "greater": np.greater}


def tie_heavy(dt, shape):
    """Small-valued data so ties are frequent."""
    vals = rng.integers(0, 4, size=shape)
    if dt == "f32":
        return (vals.astype(np.float32) * np.float32(0.5) - np.float32(0.5)).astype(np.float32)
    if dt == "i32":
        return (vals - 1).astype(np.int32)
    return vals.astype(np.uint32)


CMP_SHAPES = [
    ("f32", "same", (2, 3), (2, 3)),
    ("f32", "broadcast_row", (2, 3), (3,)),
    ("i32", "broadcast_outer", (2, 1), (1, 3)),
    ("u32", "same", (2, 3), (2, 3)),
    ("f32", "scalar_lhs", (), (2, 3)),
    ("i32", "broadcast_3d", (4, 1, 3), (2, 1)),
]
for op, fn in CMP_NP.items():
    for dt, tag, sa, sb in CMP_SHAPES:
        a = tie_heavy(dt, sa)
        b = tie_heavy(dt, sb)
        if tag == "same":
            b.reshape(-1)[0] = a.reshape(-1)[0]  # guaranteed tie
        out = fn(a, b)
        assert out.dtype == np.bool_
        add_case(f"{op}_{dt}_{tag}", op, {}, [a, b], out, 0, 0)


# --------------------------------------------------------------------------
# select
# --------------------------------------------------------------------------

def rand_bool(shape):
    return rng.integers(0, 2, size=shape).astype(np.bool_)


SELECT_CASES = [
    ("f32", "same", (2, 3), (2, 3), (2, 3)),
    ("f32", "broadcast_a_row_b_scalar", (2, 3), (3,), ()),
    ("i32", "broadcast_outer", (2, 1), (1, 3), (2, 3)),
    ("f32", "scalar_cond", (), (2, 3), (2, 3)),
    ("i32", "broadcast_3d", (4, 1, 3), (2, 1), (3,)),
]
for dt, tag, sc, sa, sb in SELECT_CASES:
    c = rand_bool(sc)
    if tag == "scalar_cond":
        c = np.array(False)
    a = f32u(sa) if dt == "f32" else i32u(sa)
    b = f32u(sb) if dt == "f32" else i32u(sb)
    out = np.where(c, a, b)
    assert out.dtype == a.dtype
    rt = 0
    add_case(f"select_{dt}_{tag}", "select", {}, [c, a, b], out, rt, rt)


# --------------------------------------------------------------------------
# cast
# --------------------------------------------------------------------------

# f32 -> i32 (truncate toward zero)
x = np.concatenate([
    np.array([-2.7, 2.7, -0.5, 0.5, -50.0, 50.0, -0.0, 3.0, -1.0, 49.99], dtype=np.float32),
    f32u((6,), -50, 50),
]).reshape(4, 4)
add_case("cast_f32_to_i32", "cast", {"dtype": "i32"}, [x], np.trunc(x).astype(np.int32), 0, 0)
x = np.array(-7.9, dtype=np.float32)
add_case("cast_f32_to_i32_scalar", "cast", {"dtype": "i32"}, [x], np.trunc(x).astype(np.int32), 0, 0)

# i32 -> f32
x = i32u((2, 3), -1000, 1000)
add_case("cast_i32_to_f32", "cast", {"dtype": "f32"}, [x], x.astype(np.float32), 0, 0)

# f32 -> u32 (non-negative inputs only)
x = np.concatenate([
    np.array([0.0, 0.5, 0.99, 1.0, 2.7, 99.9], dtype=np.float32),
    f32u((6,), 0, 100),
]).reshape(3, 4)
add_case("cast_f32_to_u32", "cast", {"dtype": "u32"}, [x], np.trunc(x).astype(np.uint32), 0, 0)

# u32 -> f32
x = u32u((2, 3), 0, 100000)
add_case("cast_u32_to_f32", "cast", {"dtype": "f32"}, [x], x.astype(np.float32), 0, 0)

# bool -> f32
x = np.array([[True, False, True], [False, False, True]])
add_case("cast_bool_to_f32", "cast", {"dtype": "f32"}, [x], x.astype(np.float32), 0, 0)

# f32 -> bool (nonzero -> true; 0.0 and -0.0 -> false)
x = np.array([0.0, -0.0, 1.0, -1.0, 1e-3, -2.5, np.inf, 0.0], dtype=np.float32).reshape(2, 4)
add_case("cast_f32_to_bool", "cast", {"dtype": "bool"}, [x], x != 0, 0, 0)

# i32 -> bool
x = np.array([[0, 1, -1], [0, 100, -100]], dtype=np.int32)
add_case("cast_i32_to_bool", "cast", {"dtype": "bool"}, [x], x != 0, 0, 0)


# --------------------------------------------------------------------------
# matmul
# --------------------------------------------------------------------------

def matmul_f32(a, b):
    # Pure float32 NumPy (no BLAS): broadcasted elementwise product, then a
    # float32 reduction over K. Avoids BLAS-dependent rounding so the file is
    # reproducible across machines.
    prod = a[..., :, :, None] * b[..., None, :, :]
    assert prod.dtype == np.float32
    return prod.sum(axis=-2, dtype=np.float32)


MATMUL_CASES = [
    ("3x4_4x5", (3, 4), (4, 5)),
    ("1x7_7x1", (1, 7), (7, 1)),
    ("5x1_1x6", (5, 1), (1, 6)),
    ("batched_2x3x4_2x4x5", (2, 3, 4), (2, 4, 5)),
    ("bcast_rhs_2x3x4_4x5", (2, 3, 4), (4, 5)),
    ("bcast_lhs_3x4_2x4x5", (3, 4), (2, 4, 5)),
    ("bcast_batch_2x1x3x4_3x4x2", (2, 1, 3, 4), (3, 4, 2)),
]
for tag, sa, sb in MATMUL_CASES:
    a = f32u(sa, -1, 1)
    b = f32u(sb, -1, 1)
    out = matmul_f32(a, b)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert out.shape == ref.shape, (tag, out.shape, ref.shape)
    assert np.all(np.abs(out - ref) <= 1e-5 + 1e-5 * np.abs(ref)), tag
    add_case(f"matmul_f32_{tag}", "matmul", {}, [a, b], out, 1e-5, 1e-5)


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------

def norm_axes(axes, ndim):
    if axes is None:
        return tuple(range(ndim))
    return tuple(sorted(a % ndim for a in axes)) if ndim else ()


def reduce_f32(op, x, axes, keepdims):
    ax = norm_axes(axes, x.ndim)
    if op == "sum":
        return np.sum(x, axis=ax, keepdims=keepdims, dtype=np.float32)
    if op == "mean":
        return np.mean(x, axis=ax, keepdims=keepdims, dtype=np.float32)
    if op == "max":
        return np.max(x, axis=ax, keepdims=keepdims)
    if op == "min":
        return np.min(x, axis=ax, keepdims=keepdims)
    raise ValueError(op)


def reduce_i32(op, x, axes, keepdims):
    ax = norm_axes(axes, x.ndim)
    if op == "sum":
        return np.sum(x, axis=ax, keepdims=keepdims, dtype=np.int32)
    if op == "mean":
        s = np.sum(x, axis=ax, keepdims=keepdims, dtype=np.int32)
        count = 1
        for a in ax:
            count *= x.shape[a]
        return np.trunc(s.astype(np.float64) / count).astype(np.int32)
    if op == "max":
        return np.max(x, axis=ax, keepdims=keepdims)
    if op == "min":
        return np.min(x, axis=ax, keepdims=keepdims)
    raise ValueError(op)


def check_sum_robust(op, x, axes, keepdims, out, rtol, atol):
    """Check that exact (f64) and naive sequential f32 accumulation both fall
    within tolerance of the golden value, so the case is not order-fragile."""
    if op not in ("sum", "mean"):
        return
    ax = norm_axes(axes, x.ndim)
    x64 = x.astype(np.float64)
    exact = (np.sum if op == "sum" else np.mean)(x64, axis=ax, keepdims=keepdims)
    assert np.all(np.abs(out - exact) <= atol + rtol * np.abs(exact)), (op, axes)
    # naive sequential f32 accumulation
    moved = np.moveaxis(x, ax, tuple(range(x.ndim - len(ax), x.ndim))) if ax else x
    flat = moved.reshape(moved.shape[: x.ndim - len(ax)] + (-1,))
    acc = np.zeros(flat.shape[:-1], dtype=np.float32)
    for k in range(flat.shape[-1]):
        acc = (acc + flat[..., k]).astype(np.float32)
    if op == "mean":
        acc = (acc / np.float32(flat.shape[-1])).astype(np.float32)
    exp = out.reshape(acc.shape)
    assert np.all(np.abs(acc - exp) <= atol + rtol * np.abs(exp)), (op, axes, "naive")


def axes_tag(axes):
    if axes is None:
        return "all"
    return "ax" + "_".join(("m" + str(-a)) if a < 0 else str(a) for a in axes)


# f32 reduction cases: (shape, axes, keepdims, lo, hi)
RED_F32_FULL = [
    ((2, 3, 4), [0], False),
    ((2, 3, 4), [1], True),
    ((2, 3, 4), [-1], False),
    ((2, 3, 4), [-1], True),
    ((2, 3, 4), [0, 2], False),
    ((2, 3, 4), [0, 2], True),
    ((2, 3, 4), None, False),
    ((2, 3, 4), None, True),
    ((5,), [0], False),
    ((), None, False),
    ((1, 3), [0], True),
    ((7, 40), [1], False),
]
RED_F32_SHORT = [
    ((2, 3, 4), [0], True),
    ((2, 3, 4), [1], False),
    ((2, 3, 4), [-1], False),
    ((2, 3, 4), [0, 2], True),
    ((2, 3, 4), None, False),
    ((5,), [0], False),
    ((), None, False),
    ((1, 3), [0], False),
    ((7, 40), [1], False),
]
for op in ["sum", "mean", "max", "min"]:
    table = RED_F32_FULL if op in ("sum", "mean") else RED_F32_SHORT
    for shape, axes, keepdims in table:
        lo, hi = (-1.0, 1.0) if shape == (7, 40) else (-4.0, 4.0)
        x = f32u(shape, lo, hi)
        out = np.asarray(reduce_f32(op, x, axes, keepdims), dtype=np.float32)
        rtol, atol = (1e-5, 1e-5) if op in ("sum", "mean") else (0, 0)
        check_sum_robust(op, x, axes, keepdims, out, rtol, atol)
        name = f"{op}_f32_{shape_tag(shape)}_{axes_tag(axes)}" + ("_keep" if keepdims else "")
        add_case(name, op, {"axes": axes, "keepdims": keepdims}, [x], out, rtol, atol)

RED_I32 = [
    ((2, 3, 4), [0, -1], True),
    ((2, 3, 4), None, False),
    ((5,), [0], True),
]
for op in ["sum", "mean", "max", "min"]:
    for shape, axes, keepdims in RED_I32:
        x = i32u(shape)
        out = np.asarray(reduce_i32(op, x, axes, keepdims), dtype=np.int32)
        name = f"{op}_i32_{shape_tag(shape)}_{axes_tag(axes)}" + ("_keep" if keepdims else "")
        add_case(name, op, {"axes": axes, "keepdims": keepdims}, [x], out, 0, 0)
# explicit truncation-toward-zero check for i32 mean: sums -7 and 7 over 2 elems
x = np.array([[-3, -4], [3, 4], [-1, 0]], dtype=np.int32)
add_case("mean_i32_3x2_ax1_trunc", "mean", {"axes": [1], "keepdims": False}, [x],
         reduce_i32("mean", x, [1], False), 0, 0)


# --------------------------------------------------------------------------
# reshape
# --------------------------------------------------------------------------

RESHAPE_CASES = [
    ("f32", (2, 3, 4), [6, 4]),
    ("f32", (2, 3, 4), [-1]),
    ("f32", (6,), [2, -1]),
    ("f32", (), [1, 1]),
    ("f32", (1, 3), [3]),
    ("f32", (1, 1), []),
    ("i32", (2, 3, 4), [4, -1, 2]),
    ("i32", (6,), [3, 2]),
]
for dt, shape, target in RESHAPE_CASES:
    x = f32u(shape) if dt == "f32" else i32u(shape)
    out = x.reshape(target)
    tgt = "x".join("m1" if d == -1 else str(d) for d in target) if target else "s"
    add_case(f"reshape_{dt}_{shape_tag(shape)}_to_{tgt}", "reshape", {"shape": target}, [x], out, 0, 0)


# --------------------------------------------------------------------------
# transpose
# --------------------------------------------------------------------------

TRANSPOSE_CASES = [
    ("f32", (2, 3), [1, 0]),
    ("f32", (2, 3, 4), [2, 0, 1]),
    ("f32", (2, 3, 4), [1, 0, 2]),
    ("f32", (2, 3, 4), [0, 2, 1]),
    ("f32", (4, 1, 3, 2), [3, 1, 0, 2]),
    ("i32", (2, 3, 4), [2, 1, 0]),
]
for dt, shape, perm in TRANSPOSE_CASES:
    x = f32u(shape) if dt == "f32" else i32u(shape)
    out = np.ascontiguousarray(np.transpose(x, perm))
    add_case(f"transpose_{dt}_{shape_tag(shape)}_perm{''.join(map(str, perm))}",
             "transpose", {"perm": perm}, [x], out, 0, 0)


# --------------------------------------------------------------------------
# softmax
# --------------------------------------------------------------------------

def softmax_f32(x, axis):
    x64 = x.astype(np.float64)
    m = np.max(x64, axis=axis, keepdims=True)
    e = np.exp(x64 - m)
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(np.float32)


SOFTMAX_CASES = [
    ("2x5_axm1", (2, 5), -1),
    ("3x4_ax0", (3, 4), 0),
    ("2x3x4_ax1", (2, 3, 4), 1),
]
for tag, shape, axis in SOFTMAX_CASES:
    x = f32u(shape)
    add_case(f"softmax_f32_{tag}", "softmax", {"axis": axis}, [x], softmax_f32(x, axis), 1e-5, 1e-6)
x = np.array([[1000.0, 1001.0, 1002.0]], dtype=np.float32)
out = softmax_f32(x, -1)
assert np.all(np.isfinite(out))
add_case("softmax_f32_large_values", "softmax", {"axis": -1}, [x], out, 1e-5, 1e-6)
x = np.array([[-1000.0, 0.0, 1000.0, 5.0], [3.0, 3.0, 3.0, 3.0]], dtype=np.float32)
add_case("softmax_f32_extreme_and_uniform", "softmax", {"axis": 1}, [x], softmax_f32(x, 1), 1e-5, 1e-6)


# --------------------------------------------------------------------------
# Write + sanity check
# --------------------------------------------------------------------------

def dump():
    lines = [json.dumps(c, allow_nan=False) for c in cases]
    text = '{"version": 1, "cases": [\n' + ",\n".join(lines) + "\n]}\n"
    with open(OUT_PATH, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return text


def sanity_check(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["version"] == 1
    names = [c["name"] for c in doc["cases"]]
    assert len(names) == len(set(names)), "duplicate names"
    for c in doc["cases"]:
        for t in c["inputs"] + [c["output"]]:
            n = int(np.prod(t["shape"], dtype=np.int64)) if t["shape"] else 1
            assert len(t["data"]) == n, (c["name"], t["shape"], len(t["data"]))
            assert t["dtype"] in NP_DTYPES
            for v in t["data"]:
                if t["dtype"] == "f32":
                    assert isinstance(v, float) or v in ("nan", "inf", "-inf"), (c["name"], v)
                    if isinstance(v, float):
                        assert float(np.float32(v)) == v, (c["name"], v)
                else:
                    assert isinstance(v, int), (c["name"], v)
                    if t["dtype"] == "bool":
                        assert v in (0, 1)
        for t in [c["output"]]:
            assert not any(v == "nan" for v in t["data"]), c["name"]
    return doc


if __name__ == "__main__":
    dump()
    doc = sanity_check(OUT_PATH)
    counts = Counter(c["op"] for c in doc["cases"])
    for op in sorted(counts):
        print(f"{op:10s} {counts[op]}")
    print(f"total      {len(doc['cases'])}")
    print(f"size       {os.path.getsize(OUT_PATH)} bytes -> {os.path.relpath(OUT_PATH)}")
