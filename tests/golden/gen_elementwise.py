#!/usr/bin/env python3
"""Generate tests/golden/elementwise.json: goldens for wgflow's elementwise family
(math, comparisons, logic, integer arithmetic, composites, creation ops).

Run from the repository root:

    python3 tests/golden/gen_elementwise.py

Same JSON format as ops.json (see README.md); outputs may contain NaN here. Deterministic
(np.random.default_rng(4321)). References are NumPy, except erf (Python's math.erf) and the
cases where wgflow defines a result NumPy does not (negative integer exponents), which are
computed by the rule stated next to them.
"""

import json
import math
import os
from collections import Counter

import numpy as np

rng = np.random.default_rng(4321)
OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elementwise.json")
cases = []
_names = set()
F = np.float32


from golden_json import enc  # noqa: E402


def add_case(name, op, attrs, inputs, output, rtol=0.0, atol=0.0):
    assert name not in _names, name
    _names.add(name)
    output = np.asarray(output)
    if output.dtype != np.float32:
        assert rtol == 0 and atol == 0, name
    cases.append({"name": name, "op": op, "attrs": attrs,
                  "inputs": [enc(np.asarray(x)) for x in inputs],
                  "output": enc(output), "rtol": float(rtol), "atol": float(atol)})


DENORM = float(np.float32(1e-40))
# Edge values every f32 unary op sees: NaN, ±inf, ±0, denormals, large magnitudes, halves.
EDGE = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, DENORM, -DENORM, 1e30, -1e30,
                 0.5, 1.5, 2.5, -0.5, -2.5, 3.7, -3.7, 1e-7, -1e-7, 8388609.0, -1.0], dtype=F)


def f64(fn):
    """Evaluate in float64 and round once to f32 (the correctly rounded reference)."""
    def g(x):
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float64)).astype(F)
    return g


def erf_ref(x):
    return np.array([math.erf(v) if not math.isnan(v) else math.nan for v in x.reshape(-1)],
                    dtype=np.float64).reshape(x.shape)


def softplus_ref(x):
    return np.logaddexp(0.0, x)


UNARY_F32 = {
    # op: (reference, extra inputs, rtol, atol)
    "floor": (f64(np.floor), rng.uniform(-100, 100, 12), 0, 0),
    "ceil": (f64(np.ceil), rng.uniform(-100, 100, 12), 0, 0),
    "round": (f64(np.round), np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 4.4999998, 1e7 + 1]), 0, 0),
    "sign": (f64(np.sign), rng.uniform(-5, 5, 6), 0, 0),
    "reciprocal": (f64(lambda x: 1.0 / x), rng.uniform(-5, 5, 8), 1e-6, 0),
    "rsqrt": (f64(lambda x: 1.0 / np.sqrt(x)), rng.uniform(0, 100, 8), 2e-6, 0),
    "log1p": (f64(np.log1p), np.array([-1.0, -0.999, -0.5, -1e-5, 1e-10, 1e-5, 0.1, 1, 10, 1e4, -2]), 2e-6, 0),
    "expm1": (f64(np.expm1), np.array([-100, -10, -1, -1e-5, -1e-10, 1e-10, 1e-5, 0.3, 1, 10, 88, 89]), 2e-6, 0),
    "sin": (f64(np.sin), rng.uniform(-10, 10, 12), 0, 2e-6),
    "cos": (f64(np.cos), rng.uniform(-10, 10, 12), 0, 2e-6),
    "erf": (f64(erf_ref), np.concatenate([rng.uniform(-4, 4, 16), [5, -5, 1e-8, -1e-30, 3.3159, 0.8]]), 1e-6, 1e-7),
    "softplus": (f64(softplus_ref), np.array([-100, -20, -1, -1e-4, 1e-4, 1, 20, 100, 88.8, -88.8]), 2e-6, 1e-37),
    "isnan": (np.isnan, rng.uniform(-5, 5, 4), 0, 0),
    "isinf": (np.isinf, rng.uniform(-5, 5, 4), 0, 0),
    "isfinite": (np.isfinite, rng.uniform(-5, 5, 4), 0, 0),
}
# Inputs where the GPU contract is looser than NumPy's (documented in docs/ops_elementwise.md):
# sin/cos of ±inf and ±1e30 (argument reduction is driver-defined), log1p/expm1/softplus of
# denormals are compared on cpu:0 only through the "_edges" cases below.
TRIG_SKIP = {float("inf"), float("-inf"), 1e30, -1e30}

for op, (ref, extra, rtol, atol) in UNARY_F32.items():
    edge = EDGE
    if op in ("sin", "cos"):
        edge = np.array([v for v in EDGE if float(v) not in TRIG_SKIP and abs(float(v)) < 1e29], dtype=F)
    x = np.concatenate([edge, np.asarray(extra, dtype=F)]).astype(F)
    add_case(f"{op}_f32_edges", op, {}, [x], ref(x), rtol, atol)
    s = np.asarray(F(extra[0]))
    add_case(f"{op}_f32_scalar", op, {}, [s], ref(s.reshape(1)).reshape(()), rtol, atol)
    m = np.asarray(extra[:4], dtype=F).reshape(1, 4, 1)
    add_case(f"{op}_f32_size1_axes", op, {}, [m], ref(m), rtol, atol)

# log near 1, where GPU drivers only promise absolute accuracy (wgflow routes it via log1p).
x = np.array([0.99999, 1.00001, 0.9, 1.1, 0.75, 1.25, 0.7499, 1.2501, 1.0, 0.5, 2.0, 1e-30, 1e30,
              0.0, -0.0, -1.0, np.inf, np.nan], dtype=F)
add_case("log_f32_near_one", "log", {}, [x], f64(np.log)(x), 2e-6, 0)
# Existing ops whose GPU builtins fail at edges: log of subnormals, tanh of tiny/NaN/huge x.
x = np.array([DENORM, 1e-45, 1.1754942e-38, 1.1754944e-38], dtype=F)
add_case("log_f32_subnormal", "log", {}, [x], f64(np.log)(x), 2e-6, 0)
x = np.array([np.nan, np.inf, -np.inf, -0.0, DENORM, 1e-10, -1e-5, 1e-3, 0.1, -0.3, 0.5, 1.0,
              -3.0, 9.0, 15.5, -44.0, 100.0, 1e30], dtype=F)
add_case("tanh_f32_edges", "tanh", {}, [x], f64(np.tanh)(x), 2e-6, 0)

INT_VALUES = {"i32": np.array([-2147483648, -7, -1, 0, 1, 5, 2147483647], dtype=np.int32),
              "u32": np.array([0, 1, 7, 2147483648, 4294967295], dtype=np.uint32)}
for op, ref in [("floor", lambda x: x), ("ceil", lambda x: x), ("round", lambda x: x),
                ("sign", np.sign), ("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)]:
    for dt, x in INT_VALUES.items():
        add_case(f"{op}_{dt}", op, {}, [x], np.asarray(ref(x)).astype(np.bool_ if op.startswith("is") else x.dtype))

b = np.array([[True, False, True]])
add_case("logical_not_bool", "logical_not", {}, [b], np.logical_not(b))

# ---------------------------------------------------------------- binary
BIN_SHAPES = [("same", (2, 3), (2, 3)), ("bcast", (2, 1, 3), (4, 1)), ("scalar", (), (3,)),
              ("size1", (1, 3, 1), (1, 1, 1))]
FEDGE = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, DENORM, -1e30], dtype=F)


def rand_of(dt, shape):
    if dt == "f32":
        return rng.integers(-3, 4, size=shape).astype(F)  # small ints so ties happen
    if dt == "i32":
        return rng.integers(-3, 4, size=shape).astype(np.int32)
    if dt == "u32":
        return rng.integers(0, 4, size=shape).astype(np.uint32)
    return rng.integers(0, 2, size=shape).astype(np.bool_)


CMP = {"not_equal": np.not_equal, "less_equal": np.less_equal, "greater_equal": np.greater_equal}
for op, fn in CMP.items():
    dts = ["f32", "i32", "u32"] + (["bool"] if op == "not_equal" else [])
    for dt in dts:
        for tag, sa, sb in BIN_SHAPES:
            a, b = rand_of(dt, sa), rand_of(dt, sb)
            add_case(f"{op}_{dt}_{tag}", op, {}, [a, b], fn(a, b))
    a = np.repeat(FEDGE, len(FEDGE))
    b = np.tile(FEDGE, len(FEDGE))
    add_case(f"{op}_f32_edges", op, {}, [a, b], fn(a, b))

for op, fn in {"logical_and": np.logical_and, "logical_or": np.logical_or,
               "logical_xor": np.logical_xor}.items():
    for tag, sa, sb in BIN_SHAPES:
        a, b = rand_of("bool", sa), rand_of("bool", sb)
        add_case(f"{op}_bool_{tag}", op, {}, [a, b], fn(a, b))

# floor_divide / remainder: every sign combination, zero divisors, i32::MIN // -1.
I32_A = np.array([7, -7, 7, -7, 6, -6, 0, 5, -5, 0, -2147483648, -2147483648, 2147483647, 1, -1], dtype=np.int32)
I32_B = np.array([2, 2, -2, -2, 3, -3, 3, 0, 0, 0, -1, 7, -2, 2147483647, -2147483648], dtype=np.int32)
U32_A = np.array([7, 0, 5, 4294967295, 4294967295, 3], dtype=np.uint32)
U32_B = np.array([2, 3, 0, 7, 4294967295, 4294967295], dtype=np.uint32)
with np.errstate(all="ignore"):
    for op, fn in {"floor_divide": np.floor_divide, "remainder": np.remainder}.items():
        for dt, a, b in [("i32", I32_A, I32_B), ("u32", U32_A, U32_B)]:
            out = fn(a, b)
            # NumPy's zero-divisor result is 0, the one wgflow defines.
            assert np.all(out[b == 0] == 0), (op, dt)
            add_case(f"{op}_{dt}_edges", op, {}, [a, b], out)
            for tag, sa, sb in BIN_SHAPES[:3]:
                x = rng.integers(-20 if dt == "i32" else 0, 21, size=sa).astype(a.dtype)
                y = rng.integers(-5 if dt == "i32" else 0, 6, size=sb).astype(a.dtype)
                add_case(f"{op}_{dt}_{tag}", op, {}, [x, y], fn(x, y))


def ipow_rule(a, e, dtype):
    """wgflow's integer pow: wrapping products; negative exponent -> truncated real result."""
    out = []
    for x, k in zip(a.reshape(-1).tolist(), e.reshape(-1).tolist()):
        if k < 0:
            out.append(1 if x == 1 else ((-1 if k % 2 else 1) if x == -1 else 0))
        else:
            out.append(pow(int(x), int(k), 2 ** 32))
    return np.array(out, dtype=np.uint64).astype(np.uint32).view(np.uint32).astype(np.int64) \
        .astype(np.uint32).view(dtype).reshape(a.shape) if dtype == np.uint32 else \
        np.array([v if v < 2 ** 31 else v - 2 ** 32 for v in [o % 2 ** 32 for o in out]],
                 dtype=np.int64).astype(np.int32).reshape(a.shape)


a = np.array([2, -2, 3, -3, 0, 1, -1, 7, 2, -1, 1, 0, 5, 2, -1], dtype=np.int32)
e = np.array([10, 3, 0, 5, 0, 1000, 1001, 11, 31, -3, -7, -1, -2, 40, -4], dtype=np.int32)
nonneg = e >= 0
with np.errstate(all="ignore"):
    assert np.array_equal(np.power(a[nonneg], e[nonneg]), ipow_rule(a, e, np.int32)[nonneg])
add_case("pow_i32_edges", "pow", {}, [a, e], ipow_rule(a, e, np.int32))
au = np.array([2, 3, 0, 1, 7, 65536, 4294967295], dtype=np.uint32)
eu = np.array([31, 20, 0, 4000000000, 3, 2, 3], dtype=np.uint32)
with np.errstate(all="ignore"):
    add_case("pow_u32_edges", "pow", {}, [au, eu], np.power(au, eu))
x = rng.integers(-4, 5, size=(2, 1, 3)).astype(np.int32)
y = rng.integers(0, 6, size=(4, 1)).astype(np.int32)
add_case("pow_i32_bcast", "pow", {}, [x, y], np.power(x, y))

# ---------------------------------------------------------------- composites
X = np.concatenate([EDGE, rng.uniform(-6, 6, 12)]).astype(F)
XS = np.asarray(F(-1.25))
XM = rng.uniform(-3, 3, (1, 3, 1)).astype(F)


def gelu_exact(x):
    return 0.5 * x * (1.0 + erf_ref(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


COMPOSITES = [
    ("square", {}, f64(np.square), 1e-6, 0),
    ("silu", {}, f64(lambda x: x / (1.0 + np.exp(-x))), 2e-6, 1e-6),
    ("gelu", {"approximate": False}, f64(gelu_exact), 2e-6, 1e-6),
    ("gelu", {"approximate": True}, f64(gelu_tanh), 2e-6, 1e-6),
    ("leaky_relu", {"alpha": 0.1}, f64(lambda x: np.where(x >= 0, x, np.float64(F(0.1)) * x)), 1e-6, 0),
    ("elu", {"alpha": 1.5}, f64(lambda x: np.where(x > 0, x, 1.5 * np.expm1(x))), 2e-6, 1e-6),
    ("clip", {"min": -1.5, "max": 2.0}, lambda x: np.clip(x, F(-1.5), F(2.0)), 0, 0),
]
for op, attrs, ref, rtol, atol in COMPOSITES:
    tag = op + ("_tanh" if attrs.get("approximate") else "")
    x = X
    if op in ("silu", "gelu"):
        # x·sigmoid(x) and 0.5·x·(…) overflow differently at ±1e30 / ±inf; NumPy's own
        # formulas give NaN there (inf·0), so compare on finite moderate inputs.
        x = np.array([v for v in X if math.isnan(v) or abs(v) < 1e29], dtype=F)
    add_case(f"{tag}_f32_edges", op, attrs, [x], ref(x), rtol, atol)
    add_case(f"{tag}_f32_scalar", op, attrs, [XS], ref(XS.reshape(1)).reshape(()), rtol, atol)
    add_case(f"{tag}_f32_size1_axes", op, attrs, [XM], ref(XM), rtol, atol)
for dt, x in INT_VALUES.items():
    with np.errstate(all="ignore"):
        add_case(f"square_{dt}", "square", {}, [x], np.square(x))
add_case("clip_i32", "clip", {"min": -5, "max": 3}, [INT_VALUES["i32"]], np.clip(INT_VALUES["i32"], -5, 3))
add_case("clip_u32", "clip", {"min": 1, "max": 7}, [INT_VALUES["u32"]], np.clip(INT_VALUES["u32"], 1, 7).astype(np.uint32))

# ---------------------------------------------------------------- creation (no inputs)
add_case("zeros_f32", "zeros", {"shape": [2, 3], "dtype": "f32"}, [], np.zeros((2, 3), F))
add_case("zeros_scalar_i32", "zeros", {"shape": [], "dtype": "i32"}, [], np.zeros((), np.int32))
add_case("ones_u32", "ones", {"shape": [3, 1], "dtype": "u32"}, [], np.ones((3, 1), np.uint32))
add_case("ones_bool", "ones", {"shape": [2], "dtype": "bool"}, [], np.ones(2, np.bool_))
add_case("full_f32", "full", {"shape": [2, 2], "dtype": "f32", "value": -2.5}, [], np.full((2, 2), -2.5, F))
add_case("full_i32", "full", {"shape": [1, 3], "dtype": "i32", "value": -7}, [], np.full((1, 3), -7, np.int32))
for i, (a, b, s, dt) in enumerate([(0, 5, 1, "i32"), (-3, 10, 4, "i32"), (10, 0, -3, "i32"),
                                   (0, 1, 0.1, "f32"), (-1.5, 2.0, 0.5, "f32"), (2, 9, 3, "u32"),
                                   (1, 0, -0.25, "f32")]):
    np_dt = {"f32": F, "i32": np.int32, "u32": np.uint32}[dt]
    out = np.array([a + k * s for k in range(len(np.arange(a, b, s)))], dtype=np.float64).astype(np_dt)
    assert np.allclose(out, np.arange(a, b, s).astype(np_dt))
    add_case(f"arange_{i}_{dt}", "arange", {"start": a, "stop": b, "step": s, "dtype": dt}, [], out,
             1e-7 if dt == "f32" else 0, 0)
for i, (a, b, n, ep) in enumerate([(0, 1, 5, True), (0, 1, 5, False), (-2.5, 7.0, 11, True),
                                   (3, 3, 1, True), (1, -1, 4, True), (0, 10, 1, False)]):
    add_case(f"linspace_{i}", "linspace", {"start": a, "stop": b, "num": n, "endpoint": ep}, [],
             np.linspace(a, b, n, endpoint=ep).astype(F), 0, 0)
for i, (n, m, k, dt) in enumerate([(3, 3, 0, "f32"), (2, 4, 1, "i32"), (4, 2, -1, "u32"),
                                   (3, 3, 5, "f32"), (1, 1, 0, "bool")]):
    np_dt = {"f32": F, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}[dt]
    add_case(f"eye_{i}_{dt}", "eye", {"n": n, "m": m, "k": k, "dtype": dt}, [], np.eye(n, m, k, dtype=np_dt))


# ---------------------------------------------------------------- special values, every op
# Each elementwise op and dtype on NaN, ±inf, ±0, the smallest subnormal, the smallest normal,
# the largest finite value and integer extremes. New random data comes from its own generator
# so the cases above stay byte-identical.
srng = np.random.default_rng(4322)
TINY = float(np.float32(1e-45))       # smallest subnormal, 2^-149
NORM = float(np.float32(1.1754944e-38))  # smallest normal, 2^-126
FMAX = float(np.finfo(F).max)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, TINY, -TINY, NORM, FMAX, -FMAX,
                    1.0, -1.0, 0.5, -2.5, 3.0], dtype=F)
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
I32_SPECIAL = np.array([I32_MIN, I32_MIN + 1, -7, -1, 0, 1, 2, 7, I32_MAX], dtype=np.int32)
U32_SPECIAL = np.array([0, 1, 2, 7, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1], dtype=np.uint32)


def grid(v):
    """Every ordered pair of v: (a, b) with a repeating, b cycling."""
    return np.repeat(v, len(v)), np.tile(v, len(v))


def exact_f32(fn):
    def g(*xs):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*xs)).astype(F)
    return g


# Unary ops not covered by the edge cases above. The elementary functions get the
# tolerances of ops.json; exactly rounded ones are exact.
SPECIAL_UNARY = {
    "neg": (np.negative, 0), "abs": (np.abs, 0), "relu": (lambda x: np.maximum(x, F(0)), 0),
    "sqrt": (np.sqrt, 0), "exp": (f64(np.exp), 1e-5), "log": (f64(np.log), 2e-6),
    "sigmoid": (f64(lambda x: 1.0 / (1.0 + np.exp(-x))), 1e-5), "tanh": (f64(np.tanh), 2e-6),
}
for op, (fn, rtol) in SPECIAL_UNARY.items():
    add_case(f"{op}_f32_special", op, {}, [SPECIAL], exact_f32(fn)(SPECIAL), rtol, 0)
for op, fn in {"neg": np.negative, "abs": np.abs, "relu": lambda x: np.maximum(x, 0),
               "sign": np.sign, "square": np.square}.items():
    with np.errstate(all="ignore"):
        add_case(f"{op}_i32_special", op, {}, [I32_SPECIAL], np.asarray(fn(I32_SPECIAL)).astype(np.int32))
for op, fn in {"abs": lambda x: x, "relu": lambda x: x, "square": np.square}.items():
    with np.errstate(all="ignore"):
        add_case(f"{op}_u32_special", op, {}, [U32_SPECIAL], np.asarray(fn(U32_SPECIAL)).astype(np.uint32))

# Binary f32 ops on every pair of special values. IEEE arithmetic on these is exact.
a, b = grid(SPECIAL)
for op, fn in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
               "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal,
               "less": np.less, "greater": np.greater, "not_equal": np.not_equal,
               "less_equal": np.less_equal, "greater_equal": np.greater_equal,
               "floor_divide": np.floor_divide, "remainder": np.remainder}.items():
    with np.errstate(all="ignore"):
        add_case(f"{op}_f32_special", op, {}, [a, b], fn(a, b))


def int_div_rule(a, b):
    """wgflow's integer div: truncates, x / 0 == x, i32::MIN / -1 == i32::MIN (wraps)."""
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if y == 0:
            out.append(x)
        else:
            q = abs(x) // abs(y)
            out.append(q if (x < 0) == (y < 0) else -q)
    return np.array([v - 2 ** 32 if v > I32_MAX and a.dtype == np.int32 else v for v in out],
                    dtype=np.int64).astype(a.dtype)


# Integer ops on every pair of extremes: wrapping arithmetic (NumPy's array behaviour),
# truncating div, floor_divide/remainder (NumPy, whose x // 0 and x % 0 are 0), pow by rule.
for dt, v in [("i32", I32_SPECIAL), ("u32", U32_SPECIAL)]:
    a, b = grid(v)
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": int_div_rule,
           "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal, "less": np.less,
           "greater": np.greater, "not_equal": np.not_equal, "less_equal": np.less_equal,
           "greater_equal": np.greater_equal, "floor_divide": np.floor_divide,
           "remainder": np.remainder, "pow": lambda x, e: ipow_rule(x, e, x.dtype.type)}
    for op, fn in ops.items():
        with np.errstate(all="ignore"):
            out = np.asarray(fn(a, b))
        if not out.dtype == np.bool_:
            out = out.astype(a.dtype)
        add_case(f"{op}_{dt}_special", op, {}, [a, b], out)

# ---------------------------------------------------------------- pow on f32, C99 / NumPy
# Every pair of bases and exponents that select a C99 special case: x**±0 == 1 even for NaN,
# 1**y == 1 even for NaN, signed zeros and infinities by the parity of integral exponents
# (|y| >= 2^24 is always even), (-1)**±inf == 1, negative base with a non-integral exponent
# is NaN. Results there are exact (0, ±inf, NaN, ±1, x*x); the rest within rtol. (wgflow's
# pow(x, 0.5) is the correctly rounded sqrt(x); glibc's powf, NumPy's here, is one ulp off
# for pow(3, 0.5), so exponent 0.5 is compared within rtol.)
POW_BASES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
                      3.0, -3.0, 1.5, -1.5, TINY, -TINY, FMAX, -FMAX, 0.999, -1.001], dtype=F)
POW_EXPS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0,
                     0.5, -0.5, 2.5, -2.5, 16777216.0, 16777218.0, 33554432.0, -16777216.0,
                     1e30, -1e30, 11.0, -11.0], dtype=F)
a, b = grid(POW_BASES)
with np.errstate(all="ignore"):
    out = np.power(a, b)
special_base = np.isin(np.abs(a), [0, 1]) | ~np.isfinite(a)
special_exp = np.isin(b, [0, 1, 2]) | ~np.isfinite(b)
exact = special_base | special_exp | ~np.isfinite(out) | (out == 0) | (np.abs(out) == 1)
add_case("pow_f32_special_exact", "pow", {}, [a[exact], b[exact]], out[exact])
add_case("pow_f32_special_rounded", "pow", {}, [a[~exact], b[~exact]], out[~exact], 1e-5, 0)
# Negative bases with integral exponents (real, sign by parity) and non-integral ones (NaN).
a = np.array([-2.0, -2.0, -3.0, -3.0, -1.1, -1.1, -0.7, -10.0, -10.0, -2.0, -1.5, -4.0, -8.0,
              -2.0, -5.0, -0.3], dtype=F)
b = np.array([3.0, -3.0, 4.0, -5.0, 11.0, 12.0, 7.0, 7.0, -8.0, 24.0, 0.3, 1.5, 1 / 3, -0.5,
              100.0, 21.0], dtype=F)
with np.errstate(all="ignore"):
    add_case("pow_f32_negative_bases", "pow", {}, [a, b], np.power(a, b), 1e-5, 0)
# pow(x, 2) is x*x exactly (the mean-squared-error pattern), including values whose square
# is a tie between two f32s.
x = np.concatenate([srng.uniform(-100, 100, 24), 1 + np.arange(1, 9) * 2.0 ** -12,
                    [3.4e19, -1.9e19, 1e-23, 1e-30, 1.8446743e19]]).astype(F)
with np.errstate(all="ignore"):
    sq = x * x
    assert np.array_equal(np.power(x, F(2)), sq)
add_case("pow_f32_square_exact", "pow", {}, [x, np.asarray(F(2))], sq)
# Results near 1 from bases near 1 (the log must keep relative accuracy there), large and
# tiny results, and the broadcast shapes.
a = np.array([1.0001, 0.9999, 1.000001, 0.99999, 10.0, 10.0, 2.0, 2.0, 2.0, 7.5, 0.01, 1e10],
             dtype=F)
b = np.array([10000.0, -10000.0, 3e5, 1e5, 30.0, -30.0, 100.0, -100.0, 127.5, 40.0, 15.0, 3.7],
             dtype=F)
with np.errstate(all="ignore"):
    add_case("pow_f32_accuracy", "pow", {}, [a, b], np.power(a, b), 1e-5, 0)
for tag, sa, sb in BIN_SHAPES:
    x = srng.uniform(-4, 4, sa).astype(F)
    y = srng.integers(-3, 4, size=sb).astype(F)
    with np.errstate(all="ignore"):
        add_case(f"pow_f32_neg_int_{tag}", "pow", {}, [x, y], np.power(x, y), 1e-5, 0)

# ---------------------------------------------------------------- float floor_divide / remainder
# NumPy's npy_divmod: an exact fmod first, then the quotient (a - mod) / b snapped to an
# integer. Exact on every device, including where the f32 quotient a / b is inexact.
a = np.array([-7, 7, -7, 7, 5, -5, 5, -5, 1e8, 16777217, 16777219, 0.1, 1.0, 0.3, -0.3, 1e30,
              -1e30, 3.4e38, 1e-45, -1e-45, 2.5, -2.5, 6, -6, 1e-38, 100.0, 0.7, 1e20, -0.0],
             dtype=F)
b = np.array([2, 2, -2, -2, np.inf, np.inf, -np.inf, -np.inf, 3, 3, -3, 0.01, 0.1, 0.1, 0.1,
              7, 7, 1e-3, 3e-45, 3e-45, 0.5, 0.5, -3, 3, 3e-39, 1e-40, -0.2, 3.0, 5.0], dtype=F)
with np.errstate(all="ignore"):
    for op, fn in {"floor_divide": np.floor_divide, "remainder": np.remainder}.items():
        add_case(f"{op}_f32_exact", op, {}, [a, b], fn(a, b))
        for tag, sa, sb in BIN_SHAPES[:3]:
            x = srng.integers(-20, 21, size=sa).astype(F)
            y = srng.integers(-5, 6, size=sb).astype(F)
            add_case(f"{op}_f32_{tag}", op, {}, [x, y], fn(x, y))
        x = (srng.uniform(-1e4, 1e4, 40) * srng.choice([1e-6, 1, 1e6], 40)).astype(F)
        y = (srng.uniform(-10, 10, 40) * srng.choice([1e-3, 1, 1e3], 40)).astype(F)
        add_case(f"{op}_f32_random", op, {}, [x, y], fn(x, y))

# ---------------------------------------------------------------- casts, saturating
# float -> int truncates toward zero and saturates; NaN -> 0 (Rust's `as`; NumPy leaves the
# out-of-range results undefined, so the reference is this rule).


def sat(x, lo, hi):
    return [0 if math.isnan(v) else int(min(max(math.trunc(v) if math.isfinite(v) else v, lo), hi))
            for v in x.astype(np.float64).tolist()]


CAST_F = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, TINY, -TINY, FMAX, -FMAX, 3e9, -3e9,
                   2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 4294967040.0,
                   4294967296.0, 5e9, -1.0, -0.5, 0.5, 1.9, -1.9, 16777217.0, 1e-7], dtype=F)
add_case("cast_f32_to_i32_saturates", "cast", {"dtype": "i32"}, [CAST_F],
         np.array(sat(CAST_F, I32_MIN, I32_MAX), dtype=np.int32))
add_case("cast_f32_to_u32_saturates", "cast", {"dtype": "u32"}, [CAST_F],
         np.array(sat(CAST_F, 0, 2 ** 32 - 1), dtype=np.uint32))
add_case("cast_f32_to_bool_special", "cast", {"dtype": "bool"}, [CAST_F],
         (CAST_F != 0) | np.isnan(CAST_F))
for dt, v in [("i32", I32_SPECIAL), ("u32", U32_SPECIAL)]:
    # int -> f32 rounds to nearest even; i32 <-> u32 reinterpret the bits; int -> bool is != 0.
    add_case(f"cast_{dt}_to_f32_special", "cast", {"dtype": "f32"}, [v], v.astype(F))
    other = {"i32": np.uint32, "u32": np.int32}[dt]
    add_case(f"cast_{dt}_to_{'u32' if dt == 'i32' else 'i32'}_special", "cast",
             {"dtype": "u32" if dt == "i32" else "i32"}, [v], v.view(other))
    add_case(f"cast_{dt}_to_bool_special", "cast", {"dtype": "bool"}, [v], v != 0)
bv = np.array([True, False])
for dt, npt in [("f32", F), ("i32", np.int32), ("u32", np.uint32)]:
    add_case(f"cast_bool_to_{dt}", "cast", {"dtype": dt}, [bv], bv.astype(npt))


def dump():
    lines = [json.dumps(c, allow_nan=False) for c in cases]
    with open(OUT_PATH, "w", encoding="utf-8", newline="\n") as f:
        f.write('{"version": 1, "cases": [\n' + ",\n".join(lines) + "\n]}\n")


if __name__ == "__main__":
    dump()
    with open(OUT_PATH, encoding="utf-8") as f:
        doc = json.load(f)
    for c in doc["cases"]:
        for t in c["inputs"] + [c["output"]]:
            n = int(np.prod(t["shape"], dtype=np.int64)) if t["shape"] else 1
            assert len(t["data"]) == n, c["name"]
    counts = Counter(c["op"] for c in doc["cases"])
    for op in sorted(counts):
        print(f"{op:14s} {counts[op]}")
    print(f"total          {len(doc['cases'])}")
