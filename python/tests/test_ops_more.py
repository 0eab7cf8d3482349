"""The indexing, attention, creation, bitwise and rounding builders against NumPy (or
hand-computed values), on every device."""

import numpy as np
import pytest

import wgflow

RNG = np.random.default_rng(7)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_top_k_gather_and_scatter(device):
    a = RNG.standard_normal((3, 6)).astype(np.float32)
    g = wgflow.Graph()
    x = g.placeholder("x", [3, 6], "float32")
    vals, idx = g.top_k(x, 2)
    small, _ = g.top_k(x, 1, axis=0, largest=False)
    nd_idx = np.array([[0, 1], [2, 5], [1, 0]], np.int32)
    gathered = g.gather_nd(x, g.constant(nd_idx))
    upd = np.array([10.0, 20.0, 30.0], np.float32)
    scattered = g.scatter_nd(x, g.constant(nd_idx), g.constant(upd), reduction="add")
    rows = np.array([[0, 1, 0, 2, 1, 0]] * 3, np.int32)
    elems = g.scatter_elements(g.zeros([3, 3]), g.constant(rows), x, axis=1, reduction="add")
    added = g.scatter_add(g.zeros([3, 3]), g.constant(rows), x, axis=1)
    seg = g.segment_sum(x, g.constant(np.array([0, 2, 0], np.int32)), num_segments=3)
    got = wgflow.Session(g, device=device).run(
        [vals, idx, small, gathered, scattered, elems, added, seg], feed_dict={x: a}
    )
    order = np.argsort(-a, axis=1, kind="stable")[:, :2]
    np.testing.assert_allclose(got[0], np.take_along_axis(a, order, 1), rtol=1e-6)
    np.testing.assert_array_equal(got[1], order)
    np.testing.assert_allclose(got[2], a.min(axis=0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(got[3], a[nd_idx[:, 0], nd_idx[:, 1]], rtol=1e-6)
    want = a.copy()
    np.add.at(want, (nd_idx[:, 0], nd_idx[:, 1]), upd)
    np.testing.assert_allclose(got[4], want, rtol=1e-6)
    want = np.zeros((3, 3), np.float32)
    for i in range(3):
        np.add.at(want[i], rows[i], a[i])
    np.testing.assert_allclose(got[5], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[6], want, rtol=1e-5, atol=1e-6)
    want = np.zeros((3, 6), np.float32)
    np.add.at(want, [0, 2, 0], a)
    np.testing.assert_allclose(got[7], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_numpy(device, causal):
    q, k, v = (RNG.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(3))
    g = wgflow.Graph()
    y = g.attention(g.constant(q), g.constant(k), g.constant(v), causal=causal)
    got = wgflow.Session(g, device=device).run(y)
    s = q.astype(np.float64) @ k.transpose(0, 2, 1) / np.sqrt(8)
    if causal:
        s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
    np.testing.assert_allclose(got, softmax(s) @ v, rtol=1e-4, atol=1e-5)


def test_creation_bitwise_and_rounding(device):
    g = wgflow.Graph()
    a = np.array([12, -1, 5, np.iinfo(np.int32).min], np.int32)
    b = np.array([10, 255, -6, -1], np.int32)
    ta, tb = g.constant(a), g.constant(b)
    f = g.constant(np.array([1.0 + 1 / 256, 3.14159, 464.0, 470.0, 1e-3, np.nan], np.float32))
    outs = [
        g.eye(3, 4, k=1), g.linspace(0, 1, 5), g.bitwise_and(ta, tb), g.bitwise_or(ta, tb),
        g.bitwise_xor(ta, tb), g.bitwise_not(ta), g.round_bf16(f),
        g.round_to(f, "float8_e4m3fn"), g.round_to(f, "float4_e2m1fn"),
    ]
    got = wgflow.Session(g, device=device).run(outs)
    np.testing.assert_array_equal(got[0], np.eye(3, 4, k=1, dtype=np.float32))
    np.testing.assert_allclose(got[1], np.linspace(0, 1, 5), rtol=1e-6)
    np.testing.assert_array_equal(got[2], a & b)
    np.testing.assert_array_equal(got[3], a | b)
    np.testing.assert_array_equal(got[4], a ^ b)
    np.testing.assert_array_equal(got[5], ~a)
    # bfloat16: a tie to even (1.0); pi and 1e-3 (1.024 · 2^-10) to 8 significant bits.
    np.testing.assert_array_equal(got[6][:5], np.array([1.0, 3.140625, 464.0, 470.0, 131 / 128 * 2.0**-10], np.float32))
    # e4m3fn: 464 is the tie between 448 and 480 (not a value: NaN), 470 overflows to NaN,
    # 1e-3 is subnormal there (steps of 2^-9, and 1e-3 is 0.512 of one): 2^-9.
    np.testing.assert_array_equal(got[7][:3], np.array([1.0, 3.25, 448.0], np.float32))
    assert np.isnan(got[7][3]) and got[7][4] == 2.0**-9 and np.isnan(got[7][5])
    # e2m1: {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating; NaN gives -0 (ml_dtypes).
    np.testing.assert_array_equal(got[8], np.array([1.0, 3.0, 6.0, 6.0, 0.0, -0.0], np.float32))
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        g.round_to(f, "float8")


def test_every_unary_primitive_is_a_method_and_a_function(device):
    # The package's list comes from the library's elementwise table: a primitive added
    # there (tan was) is a method, a function and an array op with no Python change.
    assert {"tan", "softsign", "erf", "bitwise_not"} <= set(wgflow.UNARY)
    a = np.linspace(-1.4, 1.4, 29, dtype=np.float32)
    g = wgflow.Graph()
    x = g.placeholder("x", [29], "float32")
    y = g.tan(x)
    z = wgflow.tan(x)
    got, got2 = wgflow.Session(g, device=device).run([y, z], feed_dict={x: a})
    want = np.tan(a.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=4e-6)
    np.testing.assert_array_equal(got, got2)
    with pytest.raises(TypeError, match="f32"):
        g.tan(g.constant(np.arange(3, dtype=np.int32)))


def _windows(h, w, k, s, p):
    """(output row, output col, input row, input col, in bounds) of every window cell."""
    oh, ow = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    for y in range(oh):
        for z in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    i, j = y * s[0] + a - p[0], z * s[1] + b - p[1]
                    yield y, z, a, b, i, j, 0 <= i < h and 0 <= j < w


def test_backward_kernels_against_loops(device):
    # TensorFlow's conv2d_backprop_input/filter and the pools' gradients, against the
    # scatter-add definitions written as loops here (stride 2, padding 1, a 3x3 kernel).
    n, c, o, h, w, k, s, p = 2, 3, 4, 7, 6, (3, 3), (2, 2), (1, 1)
    xv = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    wv = RNG.standard_normal((o, c, 3, 3)).astype(np.float32)
    oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
    dyv = RNG.standard_normal((n, o, oh, ow)).astype(np.float32)
    dx = np.zeros((n, c, h, w))
    dw = np.zeros((o, c, 3, 3))
    for y, z, a, b, i, j, inside in _windows(h, w, k, s, p):
        if inside:
            dx[:, :, i, j] += np.einsum("no,oc->nc", dyv[:, :, y, z], wv[:, :, a, b])
            dw[:, :, a, b] += np.einsum("no,nc->oc", dyv[:, :, y, z], xv[:, :, i, j])
    # Pools: 2x2 windows, stride 2, no padding for max; padding 1 for the average.
    ph, pw = h // 2, w // 2
    pdy = RNG.standard_normal((n, c, ph, pw)).astype(np.float32)
    dmax = np.zeros((n, c, h, w))
    for ni in range(n):
        for ci in range(c):
            for y in range(ph):
                for z in range(pw):
                    win = xv[ni, ci, 2 * y:2 * y + 2, 2 * z:2 * z + 2]
                    a, b = np.unravel_index(np.argmax(win), win.shape)
                    dmax[ni, ci, 2 * y + a, 2 * z + b] += pdy[ni, ci, y, z]
    ah, aw = (h + 2 - 2) // 2 + 1, (w + 2 - 2) // 2 + 1
    ady = RNG.standard_normal((n, c, ah, aw)).astype(np.float32)
    davg = np.zeros((n, c, h, w))
    cells = {}
    for y, z, a, b, i, j, inside in _windows(h, w, (2, 2), (2, 2), (1, 1)):
        if inside:
            cells.setdefault((y, z), []).append((i, j))
    for (y, z), ij in cells.items():
        for i, j in ij:
            davg[:, :, i, j] += ady[:, :, y, z] / len(ij)

    g = wgflow.Graph()
    x, wt = g.constant(xv), g.constant(wv)
    dy, pd, ad = g.constant(dyv), g.constant(pdy), g.constant(ady)
    outs = [
        g.conv2d_backprop_input(dy, wt, (h, w), stride=2, padding=1),
        g.conv2d_backprop_filter(x, dy, 3, stride=2, padding=1),
        g.max_pool2d_grad(x, pd, 2),
        g.avg_pool2d_grad(ad, (h, w), 2, stride=2, padding=1),
    ]
    got = wgflow.Session(g, device=device).run(outs)
    for name, gv, want in zip(["backprop_input", "backprop_filter", "max_pool_grad", "avg_pool_grad"], got, [dx, dw, dmax, davg]):
        assert gv.shape == want.shape, name
        np.testing.assert_allclose(gv, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_and_cumprod_take_tensorflows_options(device, exclusive, reverse):
    x = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, -3.0]], np.float32)

    def scan(a, f, unit):
        a = a[:, ::-1] if reverse else a
        out = f(a, axis=1)
        if exclusive:
            out = np.concatenate([np.full((a.shape[0], 1), unit), out[:, :-1]], axis=1)
        return out[:, ::-1] if reverse else out

    g = wgflow.Graph()
    t = g.constant(x)
    s = g.cumsum(t, axis=1, exclusive=exclusive, reverse=reverse)
    p = g.cumprod(t, 1, exclusive, reverse)
    got_s, got_p = wgflow.Session(g, device=device).run([s, p])
    np.testing.assert_allclose(got_s, scan(x.astype(np.float64), np.cumsum, 0.0), rtol=1e-6)
    np.testing.assert_allclose(got_p, scan(x.astype(np.float64), np.cumprod, 1.0), rtol=1e-6)
