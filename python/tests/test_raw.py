"""Raw WGSL kernels (CuPy's ``RawKernel``) and the stateful random streams, from Python:
values against NumPy and float64 computed here, on every GPU adapter; the refusals."""

import numpy as np
import pytest

import wgflow

GPUS = [d.device for d in wgflow.list_physical_devices("GPU")]
needs_gpu = pytest.mark.skipif(not GPUS, reason="raw WGSL kernels run on a GPU; none is visible")

REVERSE_NEG = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    let n = arrayLength(&y);
    if (i < n) { y[i] = -x[n - 1u - i]; }
}
"""

# y[r] = sum of row r of a (rows x 3) int32 matrix, times k (a 1-element input).
ROW_SUM = """
@group(0) @binding(0) var<storage, read_write> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> k: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<i32>;
@compute @workgroup_size(32)
fn rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    if (r < arrayLength(&y)) { y[r] = (a[3u * r] + a[3u * r + 1u] + a[3u * r + 2u]) * k[0]; }
}
"""

CUBE = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < arrayLength(&y)) { y[gid.x] = x[gid.x] * x[gid.x] * x[gid.x]; }
}
"""

CUBE_GRAD = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < arrayLength(&dx)) { dx[i] = 3.0 * x[i] * x[i] * dy[i]; }
}
"""


@needs_gpu
@pytest.mark.parametrize("gpu", GPUS)
def test_raw_kernel_on_arrays_matches_numpy(gpu):
    k = wgflow.RawKernel(REVERSE_NEG)
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    y = k(x, device=gpu)
    assert y.dtype == np.float32 and y.shape == (1000,)
    np.testing.assert_array_equal(y, -x[::-1])
    # A second shape gets its own graph; the first is cached.
    x2 = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(k(x2, device=gpu), -x2[::-1])
    np.testing.assert_array_equal(k(x, device=gpu), -x[::-1])


@needs_gpu
@pytest.mark.parametrize("gpu", GPUS)
def test_raw_kernel_fixed_output_and_integers(gpu):
    rows = wgflow.RawKernel(ROW_SUM, entry_point="rows", name="row_sum", output=([5], "int32"))
    a = np.arange(15, dtype=np.int32).reshape(5, 3) - 7
    k = np.array([-3], dtype=np.int32)
    y = rows(a, k, device=gpu)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, a.sum(axis=1) * -3)
    # int64 arrays (NumPy's default) are narrowed with a range check.
    np.testing.assert_array_equal(rows(a.astype(np.int64), k.astype(np.int64), device=gpu), a.sum(axis=1) * -3)


@needs_gpu
@pytest.mark.parametrize("gpu", GPUS)
def test_raw_kernel_past_the_workgroup_count_limit(gpu):
    # 65535 workgroups of 64 is the per-dimension limit: one more row folds the grid.
    n = 65535 * 64 + 100
    x = np.arange(n, dtype=np.float32)
    y = wgflow.RawKernel(REVERSE_NEG)(x, device=gpu)
    np.testing.assert_array_equal(y[:3], -x[-1:-4:-1])
    np.testing.assert_array_equal(y[-3:], -x[2::-1])
    np.testing.assert_array_equal(y, -x[::-1])


@needs_gpu
@pytest.mark.parametrize("gpu", GPUS)
def test_raw_kernel_in_a_graph_with_gradient(gpu):
    cube = wgflow.RawKernel(CUBE, name="cube").with_gradient(0, wgflow.RawKernel(CUBE_GRAD, name="cube_grad"))
    g = wgflow.Graph()
    x = g.placeholder("x", [6], "float32")
    y = cube(x) * 2.0 + 1.0  # fuses with the elementwise ops around it
    loss = g.sum(y)
    (dx,) = g.gradients(loss, [x])
    sess = wgflow.Session(g, device=gpu)
    xv = np.array([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0], dtype=np.float32)
    yv, dxv = sess.run([y, dx], feed_dict={x: xv})
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(yv, 2 * x64**3 + 1, rtol=1e-6)
    np.testing.assert_allclose(dxv, 6 * x64**2, rtol=1e-6)


@needs_gpu
def test_raw_kernel_without_a_gradient_is_not_differentiable():
    g = wgflow.Graph()
    x = g.placeholder("x", [4], "float32")
    y = wgflow.RawKernel(CUBE)(x)
    with pytest.raises(TypeError, match="cube|main|differentiable"):
        g.gradients(g.sum(y), [x])


def test_invalid_shaders_are_refused_at_build_with_the_line():
    g = wgflow.Graph()
    x = g.placeholder("x", [4], "float32")
    bad = CUBE.replace("x[gid.x] * x[gid.x] * x[gid.x]", "x[gid.x] * undefined_name")
    with pytest.raises(ValueError, match="undefined_name|unknown|line"):
        g.raw_kernel(wgflow.RawKernel(bad), [x])
    # Two inputs given, one binding declared for inputs.
    with pytest.raises(ValueError, match=r"declares no @binding\(2\) for its output"):
        g.raw_kernel(wgflow.RawKernel(CUBE), [x, x])
    # An int32 tensor bound as array<f32>: a dtype error at the user's line.
    with pytest.raises(TypeError, match=r"test_raw.py:\d+: 'x' at @binding\(0\) must be array<i32>"):
        g.raw_kernel(wgflow.RawKernel(CUBE), [g.cast(x, "int32")])
    with pytest.raises(ValueError, match="entry point 'nope'"):
        g.raw_kernel(wgflow.RawKernel(CUBE, entry_point="nope"), [x])
    grad_for_missing_input = wgflow.RawKernel(CUBE).with_gradient(3, wgflow.RawKernel(CUBE_GRAD))
    with pytest.raises((ValueError, TypeError), match="input 3"):
        g.raw_kernel(grad_for_missing_input, [x])
    with pytest.raises(TypeError, match="source is WGSL text"):
        wgflow.RawKernel(b"bytes")
    with pytest.raises(TypeError, match="RawKernel"):
        g.raw_kernel("not a kernel", [x])


def test_raw_kernel_on_cpu_is_a_clear_error():
    g = wgflow.Graph()
    x = g.placeholder("x", [4], "float32")
    y = wgflow.RawKernel(CUBE)(x)
    with pytest.raises(RuntimeError, match="runs only on a GPU") as e:
        sess = wgflow.Session(g, device="cpu:0")
        sess.run(y, feed_dict={x: np.ones(4, np.float32)})
    # The node is named; the bindings' own source line is not (it tells a user nothing).
    assert "python/src" not in str(e.value)
    # Soft placement moves it to a GPU when there is one.
    if GPUS:
        sess = wgflow.Session(g, device="cpu:0", soft_placement=True)
        np.testing.assert_array_equal(sess.run(y, feed_dict={x: np.full(4, 2.0, np.float32)}), np.full(4, 8.0))
    if not GPUS:
        with pytest.raises(RuntimeError, match="no GPU adapter is visible"):
            wgflow.RawKernel(CUBE)(np.ones(4, np.float32))


def test_stateful_random_draws_anew_each_run_reproducibly(device):
    g = wgflow.Graph()
    u = g.stateful_random_uniform([4096], low=-1.0, high=3.0, seed=11)
    n = g.stateful_random_normal([4096], mean=2.0, std=0.5, seed=12)
    fixed = g.random_uniform([8], seed=11)
    sess = wgflow.Session(g, device=device)
    runs = [sess.run([u, n, fixed]) for _ in range(3)]
    (u0, n0, f0), (u1, n1, f1), (u2, _, f2) = runs
    assert not np.array_equal(u0, u1) and not np.array_equal(u1, u2)
    assert not np.array_equal(n0, n1)
    np.testing.assert_array_equal(f0, f1)  # the stateless op draws the same numbers
    for uu in (u0, u1, u2):
        assert uu.min() >= -1.0 and uu.max() < 3.0
        assert abs(uu.mean() - 1.0) < 0.1  # 4096 draws: std of the mean is 0.018
    assert abs(n0.mean() - 2.0) < 0.05 and abs(n0.std() - 0.5) < 0.05
    # A new session repeats the sequence, bit for bit, on every device.
    again = wgflow.Session(g, device=device)
    for want in runs:
        got = again.run([u, n])
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    on_cpu = wgflow.Session(g, device="cpu:0").run(u)
    np.testing.assert_array_equal(on_cpu, u0)


def test_stateful_random_refuses_bad_ranges():
    g = wgflow.Graph()
    with pytest.raises(ValueError):
        g.stateful_random_uniform([4], low=2.0, high=1.0)
    with pytest.raises(ValueError):
        g.stateful_random_normal([4], std=-1.0)
