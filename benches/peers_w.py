"""TensorFlow's and JAX's times for issue 21's workloads W1-W7 on the CPU, run by
`cargo bench --bench table` (WGFLOW_BENCH_ONLY=cpu) when present, so wgflow and its peers
are measured in one run on the same cores.

Prints `key=value` lines: `W1_tf_ms=`, `W1_tfxla_ms=` (tf.function with jit_compile=True),
`W1_jax_ms=` (jax.jit), ... `W7_jax_ms=`, and the versions (`tensorflow=`, `jax=`). Each
time is the median of 7 batches (3 with WGFLOW_BENCH_QUICK=1), after two warm-up calls that
also compile. A framework that does not import is skipped with a `note=` line.

The shapes, dtypes and algorithms are the bench's:
  W1 a+b, 16M f32;  W2 maximum(a*b+c, 0)*0.5 + exp(-a), 4M f32;  W3 1024^3 f32 matmul;
  W4 MLP forward, batch 256, 784-512-512-10, bias+relu, softmax;  W5 row sums of 4096^2;
  W6 the W4 MLP's train step: softmax cross-entropy against one-hot labels, gradients of
     all 6 parameters, Adam (lr 1e-3, betas 0.9/0.999, eps 1e-8, PyTorch's formula, written
     out here so that every framework runs the same update);
  W7 a CNN's train step, batch 64 of 1x8x8: conv3x3x16 pad 1 + bias, relu, maxpool 2,
     conv3x3x32 pad 1 + bias, relu, maxpool 2, flatten, linear 128->10, softmax
     cross-entropy, the same Adam.
TensorFlow's CPU convolutions and pooling take NHWC only, so its W7 runs NHWC (filters
HWIO); JAX runs NCHW/OIHW like wgflow. Inputs are resident (no host copy per call) and
results are not copied back, as in the bench.
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np

REPS = 3 if os.environ.get("WGFLOW_BENCH_QUICK") == "1" else 7
ITERS = {1: 5, 2: 5, 3: 5, 4: 20, 5: 10, 6: 10, 7: 20}
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def median_ms(f, iters):
    f()
    f()
    samples = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        samples.append((time.perf_counter() - t0) / iters)
    samples.sort()
    return samples[len(samples) // 2] * 1e3


def data():
    """The workloads' host arrays (values do not matter for timing, only shapes)."""
    r = np.random.default_rng(0)
    f32 = np.float32

    def u(*shape, scale=1.0):
        return (r.uniform(-1, 1, shape) * scale).astype(f32)

    d = {
        "w1": (u(1 << 24), u(1 << 24)),
        "w2": (u(1 << 22), u(1 << 22), u(1 << 22)),
        "w3": (u(1024, 1024), u(1024, 1024)),
        "w5": u(4096, 4096),
        "x": u(256, 784),
        "mlp": [u(784, 512, scale=0.08), u(512), u(512, 512, scale=0.1), u(512), u(512, 10, scale=0.1), u(10)],
        "img": u(64, 1, 8, 8),
        # OIHW like wgflow; TensorFlow transposes them to HWIO.
        "cnn": [u(16, 1, 3, 3, scale=0.5), u(16), u(32, 16, 3, 3, scale=0.1), u(32), u(128, 10, scale=0.1), u(10)],
    }
    d["y"] = np.eye(10, dtype=f32)[np.arange(256) % 10]
    d["y7"] = np.eye(10, dtype=f32)[np.arange(64) % 10]
    return d


def run_tf(d):
    import tensorflow as tf

    print(f"tensorflow={tf.__version__}")
    c = tf.constant

    def mlp_logits(x, p):
        h = x
        for i in range(3):
            h = tf.matmul(h, p[2 * i]) + p[2 * i + 1]
            if i < 2:
                h = tf.nn.relu(h)
        return h

    def cnn_logits(x, p):
        h = tf.nn.relu(tf.nn.conv2d(x, p[0], 1, "SAME") + p[1])
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.nn.relu(tf.nn.conv2d(h, p[2], 1, "SAME") + p[3])
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reshape(h, [x.shape[0], -1])
        return tf.matmul(h, p[4]) + p[5]

    def train_step(logits_fn, params, x, y):
        """Variables, Adam slots and a step function for `logits_fn`."""
        ws = [tf.Variable(p) for p in params]
        ms = [tf.Variable(tf.zeros_like(p)) for p in params]
        vs = [tf.Variable(tf.zeros_like(p)) for p in params]
        t = tf.Variable(0.0)
        n = float(x.shape[0])

        def step():
            with tf.GradientTape() as tape:
                logp = tf.nn.log_softmax(logits_fn(x, ws), -1)
                loss = -tf.reduce_sum(logp * y) / n
            grads = tape.gradient(loss, ws)
            t_new = t + 1.0
            t.assign(t_new)
            bc1 = 1.0 - tf.pow(B1, t_new)
            bc2 = 1.0 - tf.pow(B2, t_new)
            for w, m, v, g in zip(ws, ms, vs, grads):
                m_new = B1 * m + (1.0 - B1) * g
                v_new = B2 * v + (1.0 - B2) * g * g
                m.assign(m_new)
                v.assign(v_new)
                w.assign_sub(LR * (m_new / bc1) / (tf.sqrt(v_new / bc2) + EPS))
            return loss

        return step

    a1, b1 = map(c, d["w1"])
    a2, b2, c2 = map(c, d["w2"])
    m1, m2 = map(c, d["w3"])
    q = c(d["w5"])
    x, y = c(d["x"]), c(d["y"])
    mlp = [c(p) for p in d["mlp"]]
    img = c(np.transpose(d["img"], (0, 2, 3, 1)))
    cnn = [c(p) for p in d["cnn"]]
    cnn[0] = tf.transpose(cnn[0], (2, 3, 1, 0))
    cnn[2] = tf.transpose(cnn[2], (2, 3, 1, 0))
    y7 = c(d["y7"])

    def fwd(x):
        return tf.nn.softmax(mlp_logits(x, mlp), -1)

    bodies = {
        1: lambda: a1 + b1,
        2: lambda: tf.maximum(a2 * b2 + c2, 0.0) * 0.5 + tf.exp(-a2),
        3: lambda: tf.matmul(m1, m2),
        4: lambda: fwd(x),
        5: lambda: tf.reduce_sum(q, -1),
    }
    for xla, key in [(False, "tf"), (True, "tfxla")]:
        for w in range(1, 8):
            if w == 6:
                body = train_step(mlp_logits, mlp, x, y)
            elif w == 7:
                body = train_step(cnn_logits, cnn, img, y7)
            else:
                body = bodies[w]
            f = tf.function(body, jit_compile=xla)
            try:
                print(f"W{w}_{key}_ms={median_ms(f, ITERS[w])}", flush=True)
            except Exception as e:  # an XLA build without a CPU JIT, say
                print(f"note=W{w} {key} failed: {type(e).__name__}: {str(e)[:200]}")


def run_jax(d):
    import jax
    import jax.numpy as jnp

    print(f"jax={jax.__version__}")
    put = jax.device_put

    def mlp_logits(p, x):
        h = x
        for i in range(3):
            h = h @ p[2 * i] + p[2 * i + 1]
            if i < 2:
                h = jax.nn.relu(h)
        return h

    def pool(h):
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def conv(h, w, b):
        y = jax.lax.conv_general_dilated(
            h, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return y + b[None, :, None, None]

    def cnn_logits(p, x):
        h = pool(jax.nn.relu(conv(x, p[0], p[1])))
        h = pool(jax.nn.relu(conv(h, p[2], p[3])))
        h = h.reshape(x.shape[0], -1)
        return h @ p[4] + p[5]

    def make_step(logits_fn):
        def loss_fn(p, x, y):
            logp = jax.nn.log_softmax(logits_fn(p, x), -1)
            return -jnp.sum(logp * y) / x.shape[0]

        def step(p, m, v, t, x, y):
            loss, g = jax.value_and_grad(loss_fn)(p, x, y)
            t = t + 1.0
            bc1 = 1.0 - B1**t
            bc2 = 1.0 - B2**t
            m = [B1 * mi + (1.0 - B1) * gi for mi, gi in zip(m, g)]
            v = [B2 * vi + (1.0 - B2) * gi * gi for vi, gi in zip(v, g)]
            p = [pi - LR * (mi / bc1) / (jnp.sqrt(vi / bc2) + EPS) for pi, mi, vi in zip(p, m, v)]
            return p, m, v, t, loss

        # Donating the state lets XLA update parameters and slots in place, as wgflow does.
        return jax.jit(step, donate_argnums=(0, 1, 2, 3))

    def trainer(logits_fn, params, x, y):
        step = make_step(logits_fn)
        state = [
            [put(p) for p in params],
            [put(np.zeros_like(p)) for p in params],
            [put(np.zeros_like(p)) for p in params],
            put(np.float32(0.0)),
        ]
        x, y = put(x), put(y)

        def run():
            p, m, v, t, loss = step(*state, x, y)
            state[:] = [p, m, v, t]
            loss.block_until_ready()

        return run

    a1, b1 = map(put, d["w1"])
    a2, b2, c2 = map(put, d["w2"])
    m1, m2 = map(put, d["w3"])
    q = put(d["w5"])
    x = put(d["x"])
    mlp = [put(p) for p in d["mlp"]]
    f1 = jax.jit(lambda a, b: a + b)
    f2 = jax.jit(lambda a, b, c: jnp.maximum(a * b + c, 0.0) * 0.5 + jnp.exp(-a))
    f3 = jax.jit(lambda a, b: a @ b)
    f4 = jax.jit(lambda p, x: jax.nn.softmax(mlp_logits(p, x), -1))
    f5 = jax.jit(lambda a: jnp.sum(a, -1))
    runs = {
        1: lambda: f1(a1, b1).block_until_ready(),
        2: lambda: f2(a2, b2, c2).block_until_ready(),
        3: lambda: f3(m1, m2).block_until_ready(),
        4: lambda: f4(mlp, x).block_until_ready(),
        5: lambda: f5(q).block_until_ready(),
        6: trainer(mlp_logits, d["mlp"], d["x"], d["y"]),
        7: trainer(cnn_logits, d["cnn"], d["img"], d["y7"]),
    }
    for w in range(1, 8):
        print(f"W{w}_jax_ms={median_ms(runs[w], ITERS[w])}", flush=True)


def main():
    d = data()
    only = sys.argv[1:] or ["tf", "jax"]
    for name, run in [("tf", run_tf), ("jax", run_jax)]:
        if name not in only:
            continue
        try:
            run(d)
        except ImportError as e:
            print(f"note={name} not importable ({e}); skipped")


if __name__ == "__main__":
    main()
