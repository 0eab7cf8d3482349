"""Hostile inputs raise ValueError or TypeError; none crashes the interpreter."""

import numpy as np
import pytest

import wgflow


@pytest.fixture
def graph():
    g = wgflow.Graph()
    x = g.placeholder("x", [2, 3], "float32")
    y = x * 2.0
    return g, x, wgflow.Session(g, device="cpu:0"), y


def test_non_contiguous_and_big_endian_are_accepted(graph):
    g, x, s, y = graph
    a = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    assert not a.flags.c_contiguous
    np.testing.assert_array_equal(s.run(y, {x: a}), a * 2)
    be = np.arange(6, dtype=">f4").reshape(2, 3)
    np.testing.assert_array_equal(s.run(y, {x: be}), np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(s.run(y, {x: np.asfortranarray(be)}), np.arange(6).reshape(2, 3) * 2)


@pytest.mark.parametrize(
    "value, exc",
    [
        (np.array([[1, 2, 3], [4, 5, 6]], dtype=object), TypeError),
        (np.zeros((2, 3), np.float64), TypeError),
        (np.zeros((2, 3), np.complex64), TypeError),
        (np.zeros((2, 3), "U3"), TypeError),
        (np.zeros((2, 3), np.int32), TypeError),
        (np.float32(1.0), ValueError),
        (np.array(1.0, np.float32), ValueError),
        (np.zeros((3, 2), np.float32), ValueError),
        (np.zeros((2, 3, 1), np.float32), ValueError),
        (np.zeros((0, 3), np.float32), ValueError),
        ("text", TypeError),
        ([[1, 2], [3]], TypeError),
        (None, TypeError),
    ],
)
def test_bad_feeds(graph, value, exc):
    g, x, s, y = graph
    with pytest.raises(exc):
        s.run(y, {x: value})


def test_bad_fetches_and_foreign_tensors(graph):
    g, x, s, y = graph
    other = wgflow.Graph()
    z = other.constant(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        s.run(42)
    with pytest.raises(KeyError):
        s.run("nope")
    with pytest.raises(ValueError):
        g.add(x, z)
    with pytest.raises(ValueError):
        s.run(z)
    with pytest.raises(TypeError):
        g.placeholder("p", [2], "float64")
    with pytest.raises(TypeError):
        g.placeholder("q", [-1], "float32")
    with pytest.raises(ValueError):
        g.reshape(x, [7])
    with pytest.raises(TypeError):
        wgflow.Session("not a graph")
    with pytest.raises(ValueError):
        g.constant(np.array([2**40], np.int64))


def test_feed_errors_name_the_feed_and_both_dtypes():
    # A feed's dtype is looked up once per session and tensor: each placeholder keeps its own.
    g = wgflow.Graph()
    x = g.placeholder("x", [2], "float32")
    n = g.placeholder("n", [2], "int32")
    y = x + g.cast(n, "float32")
    s = wgflow.Session(g, device="cpu:0")
    ok = {x: np.ones(2, np.float32), n: np.ones(2, np.int32)}
    np.testing.assert_array_equal(s.run(y, ok), [2.0, 2.0])
    with pytest.raises(TypeError, match=r"feed 'n': got an array of dtype float32, but the tensor is int32"):
        s.run(y, {x: np.ones(2, np.float32), n: np.ones(2, np.float32)})
    with pytest.raises(TypeError, match=r"feed 'x': got an array of dtype int32, but the tensor is float32"):
        s.run(y, {x: np.ones(2, np.int32), n: np.ones(2, np.int32)})
    with pytest.raises(TypeError, match=r"feed 'x': None is not a value"):
        s.run(y, {x: None, n: np.ones(2, np.int32)})
    np.testing.assert_array_equal(s.run(y, {x: np.ones(2, ">f4"), n: np.ones(2, np.int64)}), [2.0, 2.0])


def test_zero_d_values(graph):
    g = wgflow.Graph()
    s0 = g.placeholder("s", [], "float32")
    y, z = s0 + 1.0, s0 * 2.0
    out = wgflow.Session(g, device="cpu:0").run(y, {s0: np.float32(2.0)})
    assert out.shape == () and out == 3.0
    assert wgflow.Session(g, device="cpu:0").run(z, {s0: 4.0}) == 8.0


def test_missing_feed_names_the_placeholder_not_the_bindings():
    g = wgflow.Graph()
    x = g.placeholder("x", [None])
    y = x + 1.0
    with pytest.raises(ValueError) as e:
        wgflow.Session(g, device="cpu:0").run(y)
    assert "x.0" in str(e.value) and "python/src" not in str(e.value)


def test_feeds_read_in_place_or_copied_give_the_values_of_the_run(graph):
    # float32 feeds that are C-contiguous, aligned and native-order are read in place; others
    # are copied. Either way a run sees the array as it is at that run, and nothing returned
    # or kept aliases it.
    g, x, s, y = graph
    buf = bytearray(6 * 4 + 1)
    unaligned = np.frombuffer(buf, dtype=np.float32, count=6, offset=1).reshape(2, 3)
    unaligned[...] = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert not unaligned.flags.aligned
    np.testing.assert_array_equal(s.run(y, {x: unaligned}), np.arange(6).reshape(2, 3) * 2)
    readonly = np.arange(6, dtype=np.float32).reshape(2, 3)
    readonly.flags.writeable = False
    np.testing.assert_array_equal(s.run(y, {x: readonly}), readonly * 2)
    b = np.ones((2, 3), np.float32)
    first, fed = s.run([y, x], {x: b})
    b[:] = 5
    np.testing.assert_array_equal(first, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(fed, np.ones((2, 3)))
    np.testing.assert_array_equal(s.run(y, {x: b}), np.full((2, 3), 10.0))
    del b
    np.testing.assert_array_equal(s.run(y, {x: np.full((2, 3), -1, np.float32)}), np.full((2, 3), -2.0))
