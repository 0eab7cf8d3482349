"""Models exported by other frameworks' converters, for tests/onnx/peers.rs: a Keras
transformer encoder block (tf2onnx) and a scikit-learn MLP regressor (skl2onnx). Writes
tests/data/onnx-peers/<name>.onnx, <name>_input.npy and <name>_output.npy (onnxruntime's
output on that input; the test needs no Python).

    python3 -m venv /tmp/v && /tmp/v/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1 \\
        tf2onnx==1.17.0 scikit-learn==1.9.1 skl2onnx==1.20.0 onnxruntime==1.32.0 onnx==1.23.2
    /tmp/v/bin/python scripts/onnx/peer_models.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import onnx
import onnxruntime as ort

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "onnx-peers")


def save(name, proto, x):
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(proto, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.save(os.path.join(OUT, f"{name}_input.npy"), x)
    np.save(os.path.join(OUT, f"{name}_output.npy"), y)
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{name}: {len(proto.graph.node)} nodes {ops}, output {list(y.shape)}")
    return y


def keras_encoder():
    import keras
    import tensorflow as tf
    import tf2onnx

    keras.utils.set_random_seed(0)
    t, d, heads = 8, 32, 4
    inp = keras.Input((t, d), batch_size=2, name="x")
    a = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=d // heads)(inp, inp)
    x = keras.layers.LayerNormalization(epsilon=1e-5)(inp + a)
    # tf2onnx writes erf-GELU as an `Erfc` node ONNX does not have: the tanh form converts.
    gelu = lambda v: keras.activations.gelu(v, approximate=True)  # noqa: E731
    f = keras.layers.Dense(64, activation=gelu)(x)
    f = keras.layers.Dense(d)(f)
    y = keras.layers.LayerNormalization(epsilon=1e-5)(x + f)
    model = keras.Model(inp, y)
    spec = (tf.TensorSpec((2, t, d), tf.float32, name="x"),)

    @tf.function(input_signature=spec)
    def fn(x):
        return model(x, training=False)

    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17)
    x = np.random.default_rng(0).standard_normal((2, t, d)).astype(np.float32)
    y = save("keras_encoder", proto, x)
    print("  onnxruntime vs keras:", float(np.abs(y - model(x).numpy()).max()))


def sklearn_mlp():
    from skl2onnx import to_onnx
    from sklearn.datasets import load_diabetes
    from sklearn.neural_network import MLPRegressor

    x, y = load_diabetes(return_X_y=True)
    x = x.astype(np.float32)
    model = MLPRegressor(hidden_layer_sizes=(32, 16), max_iter=300, random_state=0).fit(x, y)
    proto = to_onnx(model, x[:16], target_opset=17)
    out = save("sklearn_mlp", proto, x[:16])
    print("  onnxruntime vs sklearn:", float(np.abs(out.ravel() - model.predict(x[:16])).max()))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    keras_encoder()
    sklearn_mlp()
