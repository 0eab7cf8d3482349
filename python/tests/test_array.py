"""CuPy-style arrays."""

import numpy as np

import wgflow


def test_arithmetic(device):
    a = wgflow.array([1, 2, 3], dtype="float32", device=device)
    b = wgflow.array(np.array([0.5, 0.25, 2.0], np.float32), device=device)
    c = (a * b + 1) / 2 - a
    np.testing.assert_allclose(c.numpy(), (np.array([1, 2, 3]) * [0.5, 0.25, 2] + 1) / 2 - [1, 2, 3])
    assert c.dtype == np.float32 and c.device == device
    np.testing.assert_allclose(wgflow.exp(a).numpy(), np.exp([1, 2, 3]), rtol=1e-6)
    assert float(a.sum()) == 6.0
    np.testing.assert_array_equal((a > 1.5).numpy(), [False, True, True])


def test_to_and_matmul():
    m = wgflow.array(np.arange(6, dtype=np.float32).reshape(2, 3), device="cpu:0")
    p = (m @ m.T).to(wgflow.best_device())
    np.testing.assert_array_equal(p.numpy(), np.arange(6).reshape(2, 3) @ np.arange(6).reshape(2, 3).T)
    assert p.device == wgflow.best_device()


def test_each_expression_shape_compiles_once():
    def f(x, y):
        return (x * y + x).numpy()

    x = wgflow.array([1.0, 2.0], device="cpu:0")
    f(x, wgflow.array([1.0, 1.0], device="cpu:0"))
    n = wgflow._array.cache_size()
    for k in range(5):
        f(wgflow.array(np.full(k + 1, k, np.float32), device="cpu:0"), wgflow.array(np.full(k + 1, 3.0), device="cpu:0"))
    assert wgflow._array.cache_size() == n
