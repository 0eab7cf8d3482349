"""Models quantized the way users quantize them, for tests/onnx/quantized.rs: an MLP and a
small encoder layer through onnxruntime.quantization.quantize_dynamic (DynamicQuantizeLinear
+ MatMulInteger), a small CNN through quantize_static in both formats (QDQ:
QuantizeLinear/DequantizeLinear pairs; QOperator: QLinearConv/QLinearMatMul), and a CNN whose
convolutions sum more than 258 products per output (strided, grouped, dilated, a residual
Add) both dynamically (ConvInteger) and statically per channel (QLinearConv, QLinearAdd). Writes
tests/data/onnx-quantized/<name>.onnx, <name>.input.npy and <name>.output.npy
(onnxruntime's output on that input).

    python3 -m venv /tmp/ov && /tmp/ov/bin/pip install onnx==1.23.2 numpy==2.4.6 onnxruntime==1.32.0
    /tmp/ov/bin/python scripts/onnx/quantized_models.py
"""
import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "onnx-quantized")


def w(rng, name, shape, scale):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def mlp():
    rng = np.random.default_rng(3)
    inits = [w(rng, "w1", [64, 128], 0.15), w(rng, "b1", [128], 0.1), w(rng, "w2", [128, 10], 0.1), w(rng, "b2", [10], 0.1)]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "b2"], ["logits"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    return helper.make_model(helper.make_graph(nodes, "mlp", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])


def encoder_ffn():
    """A transformer block's feed-forward half with layer norm and GELU, [batch, seq, 96]."""
    rng = np.random.default_rng(4)
    d, f = 96, 384
    inits = [
        w(rng, "w_in", [d, f], 0.1), w(rng, "b_in", [f], 0.05), w(rng, "w_out", [f, d], 0.05), w(rng, "b_out", [d], 0.05),
        numpy_helper.from_array(np.ones(d, np.float32), "g"), numpy_helper.from_array(np.zeros(d, np.float32), "beta"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w_in"], ["a0"]),
        helper.make_node("Add", ["a0", "b_in"], ["a1"]),
        helper.make_node("Gelu", ["a1"], ["a2"]),
        helper.make_node("MatMul", ["a2", "w_out"], ["a3"]),
        helper.make_node("Add", ["a3", "b_out"], ["a4"]),
        helper.make_node("Add", ["x", "a4"], ["a5"]),
        helper.make_node("LayerNormalization", ["a5", "g", "beta"], ["y"], axis=-1, epsilon=1e-5),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", d])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", d])
    return helper.make_model(helper.make_graph(nodes, "ffn", [x], [y], inits), opset_imports=[helper.make_opsetid("", 20)])


def cnn():
    rng = np.random.default_rng(5)
    inits = [
        w(rng, "c1", [16, 3, 3, 3], 0.3), w(rng, "cb1", [16], 0.1),
        w(rng, "c2", [32, 16, 3, 3], 0.1), w(rng, "cb2", [32], 0.1),
        w(rng, "fc", [32, 10], 0.2), w(rng, "fcb", [10], 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1", "cb1"], ["a1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2", "cb2"], ["a2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    return helper.make_model(helper.make_graph(nodes, "cnn", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])


def wide_cnn():
    """Convolutions past f32's exact range for 8-bit sums (more than 258 products per output:
    wgflow's integer matrix product of gathered windows): 32 -> 32 channels 3x3 with a
    residual Add, a stride-2 3x3 to 64, a 3x3 in two groups of 32, a dilated 3x3."""
    rng = np.random.default_rng(6)
    inits = [
        w(rng, "c1", [32, 3, 3, 3], 0.3), w(rng, "cb1", [32], 0.1),
        w(rng, "c2", [32, 32, 3, 3], 0.08), w(rng, "cb2", [32], 0.1),
        w(rng, "c3", [64, 32, 3, 3], 0.08), w(rng, "cb3", [64], 0.1),
        w(rng, "c4", [64, 32, 3, 3], 0.08), w(rng, "cb4", [64], 0.1),
        w(rng, "c5", [64, 64, 3, 3], 0.06), w(rng, "cb5", [64], 0.1),
        w(rng, "fc", [64, 10], 0.2), w(rng, "fcb", [10], 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1", "cb1"], ["a1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("Conv", ["r1", "c2", "cb2"], ["a2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Add", ["r1", "r2"], ["s2"]),
        helper.make_node("Conv", ["s2", "c3", "cb3"], ["a3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["a3"], ["r3"]),
        helper.make_node("Conv", ["r3", "c4", "cb4"], ["a4"], pads=[1, 1, 1, 1], group=2),
        helper.make_node("Relu", ["a4"], ["r4"]),
        helper.make_node("Conv", ["r4", "c5", "cb5"], ["a5"], pads=[2, 2, 2, 2], dilations=[2, 2]),
        helper.make_node("Relu", ["a5"], ["r5"]),
        helper.make_node("GlobalAveragePool", ["r5"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    return helper.make_model(helper.make_graph(nodes, "wide_cnn", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])


class Reader(CalibrationDataReader):
    def __init__(self, shape):
        rng = np.random.default_rng(11)
        self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def save(name, path, x):
    os.makedirs(OUT, exist_ok=True)
    m = onnx.load(path)
    dst = os.path.join(OUT, f"{name}.onnx")
    onnx.save(m, dst)
    sess = ort.InferenceSession(dst, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    # onnxruntime's graph optimizer fuses QDQ pairs into integer kernels, which round
    # differently from the model's own semantics: the unoptimized run is the exact reference.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (exact,) = ort.InferenceSession(dst, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.save(os.path.join(OUT, f"{name}.input.npy"), x)
    np.save(os.path.join(OUT, f"{name}.output.npy"), y)
    np.save(os.path.join(OUT, f"{name}.unoptimized.npy"), exact)
    print(f"  optimized vs unoptimized: {float(np.abs(y - exact).max()):.3g}")
    assert np.std(y) > 0
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{name}: {len(m.graph.node)} nodes {ops}, output {list(y.shape)}")


def main():
    tmp = tempfile.mkdtemp()
    rng = np.random.default_rng(9)
    for name, model, shape in [("mlp", mlp(), (8, 64)), ("encoder_ffn", encoder_ffn(), (2, 12, 96))]:
        src = os.path.join(tmp, f"{name}.onnx")
        onnx.save(model, src)
        dst = os.path.join(tmp, f"{name}_dyn.onnx")
        quantize_dynamic(src, dst, weight_type=QuantType.QUInt8)
        save(f"{name}_dynamic", dst, rng.standard_normal(shape).astype(np.float32))
    src = os.path.join(tmp, "cnn.onnx")
    onnx.save(cnn(), src)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    for fmt, tag in [(QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qoperator")]:
        dst = os.path.join(tmp, f"cnn_{tag}.onnx")
        quantize_static(src, dst, Reader((2, 3, 16, 16)), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=(tag == "qdq"))
        save(f"cnn_static_{tag}", dst, x)
    src = os.path.join(tmp, "wide_cnn.onnx")
    onnx.save(wide_cnn(), src)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    dst = os.path.join(tmp, "wide_cnn_dyn.onnx")
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
    save("wide_cnn_dynamic", dst, x)
    # 7-bit weights (reduce_range), as onnxruntime advises without VNNI: its AVX2 kernel
    # multiplies u8 by s8 with vpmaddubsw, whose i16 pair sums saturate with full 8-bit
    # weights (2 * 255 * 127 > 32767), so its output is then not the model's arithmetic (on
    # this model 256 values of the first convolution, off by up to 71). wgflow's sums are
    # exact either way.
    dst = os.path.join(tmp, "wide_cnn_qoperator.onnx")
    quantize_static(src, dst, Reader((2, 3, 16, 16)), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                    reduce_range=True)
    save("wide_cnn_static_qoperator", dst, x)


if __name__ == "__main__":
    main()
