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


def test_gradients_of_several_ys_with_grad_ys_as_tf(device):
    # tf.gradients([y1, y2], [x], grad_ys=[g1, g2]): sum_k sum(g_k * dy_k/dx), by hand.
    xv = np.array([0.5, -1.5, 2.0], np.float32)
    g1v = np.array([1.0, 2.0, -3.0], np.float32)
    g = wgflow.Graph()
    x = g.placeholder("x", [3])
    gy1 = g.placeholder("gy1", [3])
    y1, y2 = x * x, g.sum(g.sin(x))
    dx, none = g.gradients([y1, y2], [x, gy1], grad_ys=[gy1, g.constant(np.float32(4.0))])
    assert none is None
    got = wgflow.Session(g, device=device).run(dx, {x: xv, gy1: g1v})
    want = g1v * 2 * xv.astype(np.float64) + 4.0 * np.cos(xv.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    (plain,) = g.gradients([y1, y2], [x])
    np.testing.assert_allclose(wgflow.Session(g, device=device).run(plain, {x: xv}), 2 * xv + np.cos(xv), rtol=1e-5)
    with pytest.raises(ValueError):
        g.gradients([y1], [x], grad_ys=[g.constant(np.ones(2, np.float32))])


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


def test_tensorflow_first_tutorial_with_two_none_placeholders(device):
    # TF 1's softmax-regression tutorial as written there: x and y_ both [None, ...], and
    # y_ * log(y) joins their run-time batch. Three separable classes; the loss must fall.
    rng = np.random.default_rng(3)
    centers = np.array([[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0]], np.float32)
    labels = rng.integers(0, 3, 96)
    xs = (centers[labels] + rng.normal(0, 0.5, (96, 4))).astype(np.float32)
    ys = np.eye(3, dtype=np.float32)[labels]
    g = wgflow.Graph()
    x = g.placeholder("x", [None, 4], "float32")
    W = g.variable("W", np.zeros((4, 3), np.float32))
    b = g.variable("b", np.zeros((3,), np.float32))
    y = g.softmax(x @ W + b, axis=-1)
    y_ = g.placeholder("y_", [None, 3], "float32")
    cross_entropy = g.mean(-g.sum(y_ * g.log(y), axis=1))
    train_step = wgflow.train.GradientDescentOptimizer(0.5).minimize(g, cross_entropy)
    sess = wgflow.Session(g, device=device)
    first = sess.run(cross_entropy, feed_dict={x: xs, y_: ys})
    assert first == pytest.approx(np.log(3), rel=1e-5)
    for i in range(0, 96 * 5, 32):
        j = i % 96
        sess.run(train_step, feed_dict={x: xs[j : j + 32], y_: ys[j : j + 32]})
    assert sess.run(cross_entropy, feed_dict={x: xs, y_: ys}) < 0.1
    with pytest.raises(ValueError, match="x.0"):
        sess.run(cross_entropy, feed_dict={x: xs[:5], y_: ys[:4]})


def test_train_op_and_loss_are_one_run_with_the_loss_before_the_step():
    # TensorFlow 1's `sess.run([train, loss])`: one run, whose loss is the one the step
    # descended (the variables change when the run ends).
    g = wgflow.Graph()
    x = g.placeholder("x", [4])
    w = g.variable("w", np.array([2.0], np.float32))
    loss = g.sum((x * w) ** 2)
    train = wgflow.train.SGD(0.01).minimize(g, loss)
    xs = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    s = wgflow.Session(g, device="cpu:0")
    before = s.counters()["runs"]
    out = s.run([train, loss, w], {x: xs})
    assert s.counters()["runs"] == before + 1
    assert out[0] is None
    ss = float((xs.astype(np.float64) ** 2).sum())
    assert out[1] == pytest.approx(4.0 * ss, rel=1e-6)
    np.testing.assert_allclose(out[2], [2.0])
    # d/dw sum((x w)^2) = 2 w sum(x^2): w <- 2 - 0.01 * 4 * ss
    np.testing.assert_allclose(s.run(w), [2.0 - 0.04 * ss], rtol=1e-6)
    assert s.run(train, {x: xs}) is None
