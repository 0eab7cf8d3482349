"""Reference counts and lifetimes: nothing a Python program can drop in any order crashes,
and runs from several threads go on together (the GIL is released during device work)."""

import gc
import threading
import time

import numpy as np
import pytest

import wgflow


def make(device):
    g = wgflow.Graph()
    x = g.placeholder("x", [None])
    y = g.sqrt(x * x + 1.0)
    return g, x, wgflow.Session(g, device=device), y


def test_session_outlives_graph(device):
    g, x, s, y = make(device)
    del g
    gc.collect()
    np.testing.assert_allclose(s.run(y, {x: np.zeros(3, np.float32)}), np.ones(3))


def test_arrays_outlive_session(device):
    g, x, s, y = make(device)
    out = s.run([y, y], {x: np.arange(4, dtype=np.float32)})
    del s, g, x, y
    gc.collect()
    np.testing.assert_allclose(out[0], np.sqrt(np.arange(4) ** 2 + 1), rtol=1e-6)
    out[0][0] = 42.0  # the caller owns (and may write) the result
    assert out[1][0] != 42.0


def test_feed_may_change_after_run(device):
    g, x, s, y = make(device)
    a = np.zeros(3, np.float32)
    r = s.run(y, {x: a})
    a[:] = 100.0
    np.testing.assert_allclose(r, np.ones(3))


def test_threads_run_concurrently():
    # A cpu:0 run of a large matmul: while one thread waits in it, others run Python.
    g = wgflow.Graph()
    x = g.placeholder("x", [None, 512])
    y = g.sum(x @ g.constant(np.ones((512, 512), np.float32)))
    sessions = [wgflow.Session(g, device="cpu:0") for _ in range(3)]
    feed = np.ones((512, 512), np.float32)
    results, errors = [], []

    def work(s):
        try:
            for _ in range(3):
                results.append(float(s.run(y, {x: feed})))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t0 = threading.Thread(target=ticker)
    t0.start()
    threads = [threading.Thread(target=work, args=(s,)) for s in sessions]
    threads += [threading.Thread(target=work, args=(sessions[0],))]  # one session, two threads
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    t0.join()
    assert not errors, errors
    assert results == [512.0 * 512 * 512] * 12
    assert len(ticks) > 5  # the ticker ran while the runs held no GIL


def test_nodes_built_after_the_session_before_its_first_run():
    g = wgflow.Graph()
    x = g.placeholder("x", [2])
    s = wgflow.Session(g, device="cpu:0")
    y = x + 1.0  # TensorFlow 1 allows this
    np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [2.0, 3.0])
    z = x * 3.0
    try:
        s.run(z, {x: [1.0, 2.0]})
    except ValueError as e:
        assert "after this session was created" in str(e)
    else:
        raise AssertionError("a node newer than a session that has run must be an error")


def test_time_runs_times_rust_runs_of_the_session():
    # benches/python_overhead.py's baseline: Rust's Session::run, timed in Rust.
    g = wgflow.Graph()
    x = g.placeholder("x", [3], "float32")
    y = x * 2.0
    s = wgflow.Session(g, device="cpu:0")
    before = s.counters()["runs"]
    times = s._s._time_runs([(x._t, np.ones(3, np.float32))], [y._t], 4)
    assert len(times) == 4 and all(0.0 < t < 10.0 for t in times)
    assert s.counters()["runs"] == before + 4
    with pytest.raises(ValueError):
        s._s._time_runs([(x._t, np.ones(4, np.float32))], [y._t], 1)
