"""TF-1 style training, gradients and checkpoints."""

import numpy as np
import pytest

import wgflow


def test_training_loop_loss_falls(device):
    # Logistic regression on two separable blobs: the loss must fall below 0.1.
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.normal(-2, 1, (64, 2)), rng.normal(2, 1, (64, 2))]).astype(np.float32)
    ys = np.concatenate([np.zeros(64), np.ones(64)]).astype(np.float32)[:, None]
    g = wgflow.Graph()
    # "batch" names the run-time dimension x and y share (a bare None is independent).
    x = g.placeholder("x", ["batch", 2])
    y = g.placeholder("y", ["batch", 1])
    w = g.variable("w", shape=[2, 1], initializer="zeros")
    b = g.variable("b", np.zeros([1], np.float32))
    logits = x @ w + b
    p = g.sigmoid(logits)
    loss = g.mean(-(y * g.log(p + 1e-7) + (1.0 - y) * g.log(1.0 - p + 1e-7)))
    train = wgflow.train.Adam(0.1).minimize(g, loss)
    sess = wgflow.Session(g, device=device)
    first = sess.run(loss, {x: xs, y: ys})
    for _ in range(150):
        _, last = sess.run([train, loss], {x: xs, y: ys})
    assert first == pytest.approx(np.log(2), rel=1e-5)
    assert last < 0.1, last


def test_gradients_match_numpy(device):
    a = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    g = wgflow.Graph()
    w = g.variable("w", a)
    y = g.sum(w * w * w)
    (dw,) = g.gradients(y, [w])
    np.testing.assert_allclose(wgflow.Session(g, device=device).run(dw), 3 * a**2, rtol=1e-6)
    assert g.gradients(y, g.constant(np.ones(1, np.float32))) is None


def test_save_restore(tmp_path):
    g = wgflow.Graph()
    w = g.variable("w", np.array([1.0, 2.0], np.float32))
    step = g.assign_add(w, np.array([1.0, 1.0], np.float32))
    s = wgflow.Session(g, device="cpu:0")
    s.run(step)
    path = tmp_path / "ck.safetensors"
    s.save(path)
    fresh = wgflow.Session(g, device="cpu:0")
    np.testing.assert_array_equal(fresh.run(w), [1.0, 2.0])
    fresh.restore(path)
    np.testing.assert_array_equal(fresh.run(w), [2.0, 3.0])
    with pytest.raises(ValueError):
        fresh.restore(tmp_path / "missing.safetensors")
