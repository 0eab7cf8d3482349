"""@vectorize: the AST compiler, calls on arrays, use inside graphs."""

import math

import numpy as np
import pytest

import wgflow


@wgflow.vectorize(["float32(float32, float32)"], target="gpu")
def add(a, b):
    return a + b


@wgflow.vectorize(["float32(float32, float32)", "int32(int32, int32)"])
def mixed(a, b):
    t = a * 2 - b
    return t if t > 0 else max(a, b) + abs(b)


@wgflow.vectorize(["float32(float32)"], target="cpu")
def smooth(x):
    return math.exp(-x * x / 2.0) / math.sqrt(2 * math.pi) + min(x, 0.5) * (1.0 if x < 1 else 2.0)


def test_add(device):
    a = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(add(a, a * 10, device=device), a * 11)


def test_signatures_and_control(device):
    a = np.array([1, -3, 4, 0], np.float32)
    b = np.array([5, 2, -1, 0], np.float32)
    t = a * 2 - b
    want = np.where(t > 0, t, np.maximum(a, b) + np.abs(b))
    np.testing.assert_array_equal(mixed(a, b, device=device), want)
    got = mixed(a.astype(np.int32), b.astype(np.int32), device=device)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_math_against_float64(device):
    x = np.linspace(-3, 3, 101).astype(np.float32)
    xd = x.astype(np.float64)
    want = np.exp(-xd * xd / 2) / np.sqrt(2 * np.pi) + np.minimum(xd, 0.5) * np.where(xd < 1, 1.0, 2.0)
    np.testing.assert_allclose(smooth(x, device=device), want, rtol=1e-5, atol=1e-6)


def test_ranks_and_cache():
    a2 = np.ones((2, 3), np.float32)
    add(a2, a2, device="cpu:0")
    add(a2 * 2, a2, device="cpu:0")
    n = len(add._cache)
    add(np.ones((7, 1), np.float32), np.ones((7, 1), np.float32), device="cpu:0")
    assert len(add._cache) == n  # same rank: same graph, one more binding
    np.testing.assert_array_equal(add(np.float32(2), np.float32(3), device="cpu:0"), 5.0)


def test_in_graph_fuses_and_differentiates(device):
    g = wgflow.Graph()
    x = g.placeholder("x", [3])
    y = add(x * x, x)
    (dx,) = g.gradients(y, [x])
    v = np.array([1.0, 2.0, -3.0], np.float32)
    out, d = wgflow.Session(g, device=device).run([y, dx], {x: v})
    np.testing.assert_allclose(out, v * v + v)
    np.testing.assert_allclose(d, 2 * v + 1)


def test_unsupported_constructs_name_construct_and_line():
    with pytest.raises(TypeError, match=r"statement For at .*test_vectorize.py:\d+"):
        @wgflow.vectorize(["float32(float32)"])
        def loop(a):
            for _ in range(3):
                a = a + 1
            return a

    with pytest.raises(TypeError, match="the call print"):
        @wgflow.vectorize(["float32(float32)"])
        def call(a):
            return print(a)

    with pytest.raises(TypeError, match="no signature"):
        add(np.ones(2, np.int32), np.ones(2, np.int32))
