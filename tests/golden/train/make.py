"""Reference losses and gradients of the train_digits models (graph-examples/digits_model.rs)
computed by JAX in float64 on the CPU, for tests/grad/train_digits.rs (which never needs Python).

    pip install "jax[cpu]" numpy && python3 tests/golden/train/make.py

Weights are deterministic: element i of parameter number k is sin(0.1 * i + k) * scale
(computed in float64, rounded to float32, as det_param in the test), with scale 0.2 for
weights and 0.05 for biases. The batch is training images 0..32, pixels scaled by 1/16.
Writes {mlp,cnn}_loss.npy and {mlp,cnn}_grad_<param>.npy (float32) next to this script.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)
here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "..", "..", "graph-examples", "data")
images = np.load(os.path.join(data, "digits_images.npy")).astype(np.float64)
labels = np.load(os.path.join(data, "digits_labels.npy"))
BATCH = 32
x = images[:BATCH] * np.float32(1.0 / 16.0).astype(np.float64)
y = labels[:BATCH]

MODELS = {
    "mlp": [("w1", (64, 128)), ("b1", (128,)), ("w2", (128, 10)), ("b2", (10,))],
    "cnn": [
        ("c1", (16, 1, 3, 3)),
        ("cb1", (16,)),
        ("c2", (32, 16, 3, 3)),
        ("cb2", (32,)),
        ("w", (128, 10)),
        ("b", (10,)),
    ],
}


def det_param(shape, k):
    n = int(np.prod(shape))
    scale = 0.05 if len(shape) == 1 else 0.2
    v = (np.sin(0.1 * np.arange(n, dtype=np.float64) + k) * scale).astype(np.float32)
    return v.reshape(shape).astype(np.float64)


def conv(x, w, b):
    out = lax.conv_general_dilated(
        x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")
    )
    return out + b[None, :, None, None]


def pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def logits(model, p, x):
    if model == "mlp":
        h = jax.nn.relu(x @ p[0] + p[1])
        return h @ p[2] + p[3]
    img = x.reshape(-1, 1, 8, 8)
    c = pool(jax.nn.relu(conv(img, p[0], p[1])))
    c = pool(jax.nn.relu(conv(c, p[2], p[3])))
    return c.reshape(c.shape[0], -1) @ p[4] + p[5]


def loss(model, p):
    logp = jax.nn.log_softmax(logits(model, p, x), axis=-1)
    return -jnp.mean(logp[jnp.arange(BATCH), y])


for model, spec in MODELS.items():
    params = [det_param(shape, k) for k, (_, shape) in enumerate(spec)]
    value, grads = jax.value_and_grad(lambda p: loss(model, p))(params)
    np.save(os.path.join(here, f"{model}_loss.npy"), np.array(value, dtype=np.float32))
    for (name, _), g in zip(spec, grads):
        np.save(os.path.join(here, f"{model}_grad_{name}.npy"), np.asarray(g, dtype=np.float32))
    print(model, "loss", float(value), "grad norms", [float(jnp.linalg.norm(g)) for g in grads])
