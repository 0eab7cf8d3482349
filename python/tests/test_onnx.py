"""InferenceSession against onnxruntime's own outputs."""

import os

import numpy as np
import pytest

import wgflow

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "onnx-patterns")


def mlp_model(path):
    """x[batch, 8] -> MatMul, Add, Relu, MatMul -> logits[batch, 3], and argmax (int64)."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((16, 3)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["logits"]),
        helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"])],
        [w1, b1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_metadata_like_onnxruntime(tmp_path):
    path = mlp_model(str(tmp_path / "mlp.onnx"))
    ours = wgflow.InferenceSession(path, device="cpu:0")
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for a, b in zip(ours.get_inputs() + ours.get_outputs(), ref.get_inputs() + ref.get_outputs()):
        assert (a.name, a.shape, a.type) == (b.name, b.shape, b.type)


def test_mlp_matches_onnxruntime(tmp_path, device):
    path = mlp_model(str(tmp_path / "mlp.onnx"))
    ours = wgflow.InferenceSession(path, device=device)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        want = ref.run(None, {"x": x})
        got = ours.run(None, {"x": x})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
        assert got[1].dtype == np.int64
        np.testing.assert_array_equal(got[1], want[1])
        (only,) = ours.run(["label"], {"x": x})
        np.testing.assert_array_equal(only, want[1])


def test_encoder_with_int64_feeds_matches_onnxruntime():
    path = os.path.join(DATA, "encoder.onnx")
    ours = wgflow.InferenceSession(path, device="cpu:0")
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(os.path.join(DATA, f"encoder.1x7.{i.name}.npy")) for i in ref.get_inputs()}
    assert any(v.dtype == np.int64 for v in feeds.values())
    want = ref.run(None, feeds)
    got = ours.run(None, feeds)
    for o, gv, wv in zip(ref.get_outputs(), got, want):
        assert gv.dtype == wv.dtype, o.name
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=o.name)


def test_time_runs_times_rust_runs_of_the_model(tmp_path):
    # benches/python_overhead.py's baseline for InferenceSession: Rust's run, timed in Rust.
    s = wgflow.InferenceSession(mlp_model(str(tmp_path / "mlp.onnx")), device="cpu:0")
    times = s._s._time_runs([("x", np.ones((1, 8), np.float32))], 3)
    assert len(times) == 3 and all(0.0 < t < 10.0 for t in times)
    with pytest.raises(ValueError):
        s._s._time_runs([("x", np.ones((1, 9), np.float32))], 1)


def test_errors(tmp_path):
    path = mlp_model(str(tmp_path / "mlp.onnx"))
    s = wgflow.InferenceSession(path, device="cpu:0")
    with pytest.raises(TypeError, match=r"input 'x': got an array of dtype float64, but the tensor is float32"):
        s.run(None, {"x": np.zeros((1, 8))})
    with pytest.raises(ValueError):
        s.run(None, {"x": np.zeros((1, 9), np.float32)})
    with pytest.raises(ValueError):
        s.run(["nope"], {"x": np.zeros((1, 8), np.float32)})
    with pytest.raises(ValueError):
        wgflow.InferenceSession(str(tmp_path / "missing.onnx"))


def test_import_trainable_fine_tunes(tmp_path):
    path = mlp_model(str(tmp_path / "mlp.onnx"))
    g = wgflow.onnx.import_trainable(path)
    x, logits = g.inputs["x"], g.outputs["logits"]
    assert {v.name for v in g.variables()} >= {"w1", "w2"}
    loss = g.mean(logits * logits)
    train = wgflow.train.SGD(0.01).minimize(g, loss)
    s = wgflow.Session(g, device="cpu:0")
    feed = {x: np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    before = s.run(loss, feed)
    for _ in range(20):
        s.run(train, feed)
    assert s.run(loss, feed) < before


LIGHT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "onnx-light")
LIGHT_MODELS = sorted(f for f in os.listdir(LIGHT) if f.endswith(".onnx")) if os.path.isdir(LIGHT) else []


@pytest.mark.parametrize("model", LIGHT_MODELS)
def test_light_models_match_onnxruntime(model):
    # The onnx package's light models (real architectures, light weights) at batch 1 on
    # cpu:0, against onnxruntime's own outputs for the runner's input arange(n)/n.
    path = os.path.join(LIGHT, model)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (inp,) = ref.get_inputs()
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    n = int(np.prod(shape))
    x = (np.arange(n, dtype=np.float32) / n).reshape(shape)
    (want,) = ref.run(None, {inp.name: x})
    (got,) = wgflow.InferenceSession(path, device="cpu:0").run(None, {inp.name: x})
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
