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
