"""Graphs and sessions against NumPy goldens, on every device."""

import os

import numpy as np
import pytest

import wgflow

RNG = np.random.default_rng(0)


def test_elementwise_and_operators(device):
    a = RNG.standard_normal((4, 5)).astype(np.float32)
    b = RNG.standard_normal((5,)).astype(np.float32) + 3.0
    g = wgflow.Graph()
    x = g.placeholder("x", [None, 5], "float32")
    y = g.constant(b)
    outs = {
        "add": x + y, "sub": x - y, "mul": x * 2.0, "div": 1.0 / y, "pow": y ** 2.0,
        "neg": -x, "abs": abs(x), "exp": g.exp(x), "tanh": wgflow.tanh(x), "gt": x > 0.0,
        "le": x <= y, "max": g.maximum(x, y),
    }
    got = wgflow.Session(g, device=device).run(outs, feed_dict={x: a})
    want = {
        "add": a + b, "sub": a - b, "mul": a * 2, "div": 1 / b, "pow": b ** 2, "neg": -a,
        "abs": np.abs(a), "exp": np.exp(a), "tanh": np.tanh(a), "gt": a > 0, "le": a <= b,
        "max": np.maximum(a, b),
    }
    for k, w in want.items():
        assert got[k].dtype == w.dtype, k
        np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6, err_msg=k)


def test_matmul_reductions_softmax(device):
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    g = wgflow.Graph()
    x = g.placeholder("x", [None, 4])
    y = x @ g.constant(w)
    fetches = [y, g.sum(y, axis=1), g.mean(y), g.max(y, 0, keepdims=True), g.softmax(y, axis=-1), g.argmax(y, axis=1)]
    got = wgflow.Session(g, device=device).run(fetches, feed_dict={x: a})
    yy = a.astype(np.float64) @ w
    e = np.exp(yy - yy.max(1, keepdims=True))
    want = [yy, yy.sum(1), yy.mean(), yy.max(0, keepdims=True), e / e.sum(1, keepdims=True), yy.argmax(1)]
    for gv, wv in zip(got, want):
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-5)
    assert got[-1].dtype == np.int32


def test_indexing_and_movement(device):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    g = wgflow.Graph()
    x = g.constant(a)
    fetches = [x[1], x[:, 1:3], x[..., ::2], x[0, -1], x[:, None, 0], x.T, g.reshape(x, [4, -1]),
               g.concat([x, x], axis=2), g.transpose(x, [1, 0, 2])]
    want = [a[1], a[:, 1:3], a[..., ::2], a[0, -1], a[:, None, 0], a.T, a.reshape(4, -1),
            np.concatenate([a, a], 2), a.transpose(1, 0, 2)]
    got = wgflow.Session(g, device=device).run(fetches)
    for i, (gv, wv) in enumerate(zip(got, want)):
        assert gv.shape == wv.shape, i
        np.testing.assert_array_equal(gv, wv)


def test_fetch_structures_and_names(device):
    g = wgflow.Graph()
    x = g.placeholder("x", [2], "int32")
    with g.name_scope("layer1"):
        y = x * 3
    assert y.name.startswith("layer1/")
    s = wgflow.Session(g, device=device)
    feed = {x: np.array([1, 2], np.int32)}
    assert isinstance(s.run(y, feed), np.ndarray)
    assert isinstance(s.run([y], feed), list)
    assert isinstance(s.run((y, y), feed), tuple)
    d = s.run({"out": y}, feed_dict={"x": [4, 5]})
    np.testing.assert_array_equal(d["out"], [12, 15])
    assert d["out"].dtype == np.int32


def test_device_scope_and_soft_placement():
    g = wgflow.Graph()
    x = g.constant(np.array([1.0, 2.0], np.float32))
    with g.device("/GPU:7"):
        y = x + x
    assert y.device == "gpu:7"
    with pytest.raises(RuntimeError, match="gpu:7"):
        wgflow.Session(g, device="cpu:0").run(y)
    out = wgflow.Session(g, soft_placement=True, device="cpu:0").run(y)
    np.testing.assert_array_equal(out, [2.0, 4.0])
    with pytest.raises(ValueError):
        with g.device("tpu:0"):
            pass


def test_build_error_points_at_python_caller():
    g = wgflow.Graph()
    a = g.constant(np.ones(3, np.float32))
    b = g.constant(np.ones(4, np.float32))
    with pytest.raises(ValueError) as e:
        a + b  # the line the message must name
    assert f"{os.path.basename(__file__)}:" in str(e.value)
    assert "cannot broadcast" in str(e.value)
    with pytest.raises(TypeError, match="dtypes"):
        a + g.constant(np.ones(3, np.int32))


def test_graph_save_load(tmp_path, device):
    g = wgflow.Graph()
    x = g.placeholder("x", [None], "float32")
    y = g.relu(x - 1.0)
    path = tmp_path / "g.json"
    g.save(path)
    g2 = wgflow.Graph.load(path)
    y2 = g2.tensor(y.name)
    out = wgflow.Session(g2, device=device).run(y2, feed_dict={"x": np.array([0.5, 3.0], np.float32)})
    np.testing.assert_array_equal(out, [0.0, 2.0])


def test_memory_plan_reports_peak():
    g = wgflow.Graph()
    x = g.placeholder("x", [None, 256])
    y = x
    for _ in range(4):
        y = g.relu(y @ g.constant(np.eye(256, dtype=np.float32)))
    s = wgflow.Session(g, device="cpu:0")
    m = s.memory(y, feed_dict={x: np.zeros((64, 256), np.float32)})["cpu:0"]
    assert 0 < m["lower_bound_bytes"] <= m["peak_bytes"] <= m["no_reuse_bytes"]


def test_counters_report_packed_integer_weights():
    """cpu:0 packs a constant int8-range weight once per plan and counts its bytes."""
    k, n = 200, 48
    g = wgflow.Graph()
    a = g.placeholder("a", [8, k], "int32")
    w = np.random.default_rng(0).integers(-128, 128, (k, n)).astype(np.int32)
    y = a @ g.constant(w)
    s = wgflow.Session(g, device="cpu:0")
    x = np.random.default_rng(1).integers(0, 256, (8, k)).astype(np.int32)
    np.testing.assert_array_equal(s.run(y, feed_dict={a: x}), x.astype(np.int64) @ w)
    packed = s.counters()["cpu_prepared_bytes"]
    assert k * n <= packed <= 4 * 256 * 64
    s.run(y, feed_dict={a: x})
    assert s.counters()["cpu_prepared_bytes"] == packed
