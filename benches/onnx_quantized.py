"""Quantized ONNX models as users make them, wgflow against onnxruntime on the same cores:
float32 models quantized by `onnxruntime.quantization.quantize_dynamic` (int8 weights,
DynamicQuantizeLinear + MatMulInteger), each beside its float32 original, run through
wgflow's Python `InferenceSession` and onnxruntime's (CPUExecutionProvider, default
threads), taking turns in blocks of calls with a pause between (each one's idle
threads spin for a while and would slow the other); each keeps its median. Prints a Markdown table
and each model's largest difference from onnxruntime. None of these shapes is tuned for.

* `ffn_base`: four BERT-base feed-forward blocks (768 -> 3072 -> 768, ReLU, residual,
  LayerNorm), [1, 128, 768];
* `mlp_wide`: 784 -> 1024 -> 1024 -> 10 with ReLU, batch 64;
* `ffn_small`: two 256 -> 1024 -> 256 blocks at [8, 32, 256];
* `cnn`: a ResNet-style CNN (stem, four residual blocks at 32 and 64 channels) at
  [8, 3, 64, 64], quantized dynamically (`ConvInteger`) and, as `cnn qlinear`, statically
  in onnxruntime's QOperator format (`QLinearConv`, calibrated on random batches).

    pip install ./python onnx onnxruntime
    python benches/onnx_quantized.py --device cpu:0
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

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

import wgflow


def ffn(d, f, layers, seed):
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"
    arr = numpy_helper.from_array
    for l in range(layers):
        p = f"l{l}_"
        inits += [
            arr((rng.standard_normal([d, f]) / np.sqrt(d)).astype(np.float32), p + "w1"),
            arr((rng.standard_normal([f]) * 0.02).astype(np.float32), p + "b1"),
            arr((rng.standard_normal([f, d]) / np.sqrt(f)).astype(np.float32), p + "w2"),
            arr((rng.standard_normal([d]) * 0.02).astype(np.float32), p + "b2"),
            arr(np.ones(d, np.float32), p + "g"),
            arr(np.zeros(d, np.float32), p + "be"),
        ]
        nodes += [
            helper.make_node("MatMul", [x, p + "w1"], [p + "a"]),
            helper.make_node("Add", [p + "a", p + "b1"], [p + "b"]),
            helper.make_node("Relu", [p + "b"], [p + "c"]),
            helper.make_node("MatMul", [p + "c", p + "w2"], [p + "d"]),
            helper.make_node("Add", [p + "d", p + "b2"], [p + "e"]),
            helper.make_node("Add", [p + "e", x], [p + "r"]),
            helper.make_node("LayerNormalization", [p + "r", p + "g", p + "be"], [p + "y"], axis=-1),
        ]
        x = p + "y"
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])
    yo = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "seq", d])
    graph = helper.make_graph(nodes, "ffn", [xi], [yo], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mlp(dims, seed):
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"
    for i, (k, n) in enumerate(zip(dims, dims[1:])):
        inits += [
            numpy_helper.from_array((rng.standard_normal([k, n]) / np.sqrt(k)).astype(np.float32), f"w{i}"),
            numpy_helper.from_array((rng.standard_normal([n]) * 0.1).astype(np.float32), f"b{i}"),
        ]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]), helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        x = f"a{i}"
        if i + 2 < len(dims):
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", dims[0]])
    yo = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", dims[-1]])
    graph = helper.make_graph(nodes, "mlp", [xi], [yo], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def cnn(seed):
    """A ResNet-style CNN: a 3x3 stride-2 stem to 32 channels, two residual blocks of two
    3x3 convolutions (BatchNorm folded into the weights, as exporters do) at 32 channels,
    a stride-2 step to 64 with a 1x1 shortcut, two blocks at 64, global average pool and a
    linear layer to 10, over [batch, 3, 64, 64]."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    count = [0]

    def conv(x, cin, cout, k, stride, relu=True):
        i = count[0] = count[0] + 1
        w = (rng.standard_normal([cout, cin, k, k]) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"cw{i}"),
                      numpy_helper.from_array((rng.standard_normal([cout]) * 0.1).astype(np.float32), f"cb{i}")])
        p = k // 2
        nodes.append(helper.make_node("Conv", [x, f"cw{i}", f"cb{i}"], [f"c{i}"], pads=[p] * 4, strides=[stride] * 2))
        if not relu:
            return f"c{i}"
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        return f"r{i}"

    def block(x, cin, cout, stride):
        y = conv(conv(x, cin, cout, 3, stride), cout, cout, 3, 1, relu=False)
        skip = x if (cin == cout and stride == 1) else conv(x, cin, cout, 1, stride, relu=False)
        i = count[0]
        nodes.extend([helper.make_node("Add", [y, skip], [f"s{i}"]), helper.make_node("Relu", [f"s{i}"], [f"o{i}"])])
        return f"o{i}"

    x = conv("x", 3, 32, 3, 2)
    for cin, cout, stride in [(32, 32, 1), (32, 32, 1), (32, 64, 2), (64, 64, 1)]:
        x = block(x, cin, cout, stride)
    inits += [numpy_helper.from_array((rng.standard_normal([64, 10]) / 8).astype(np.float32), "fw"),
              numpy_helper.from_array(np.zeros(10, np.float32), "fb")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fw", "fb"], ["logits"])]
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 64, 64])
    yo = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    graph = helper.make_graph(nodes, "cnn", [xi], [yo], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class Calibration(CalibrationDataReader):
    """Eight random batches of the model's input shape, for `quantize_static`."""

    def __init__(self, shape):
        rng = np.random.default_rng(11)
        self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def dynamic(f32, q8, shape):
    quantize_dynamic(f32, q8, weight_type=QuantType.QInt8)


def static_qoperator(f32, q8, shape):
    quantize_static(f32, q8, Calibration(shape), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


# (name, float32 model, input shape, quantizer): the CNN's convolutions become
# ConvInteger (dynamic) and QLinearConv (static, onnxruntime's QOperator format).
MODELS = [
    ("ffn_base", lambda: ffn(768, 3072, 4, 0), [1, 128, 768], dynamic),
    ("mlp_wide", lambda: mlp([784, 1024, 1024, 10], 1), [64, 784], dynamic),
    ("ffn_small", lambda: ffn(256, 1024, 2, 2), [8, 32, 256], dynamic),
    ("cnn", lambda: cnn(3), [8, 3, 64, 64], dynamic),
    ("cnn qlinear", lambda: cnn(3), [8, 3, 64, 64], static_qoperator),
]


def timed(run, calls):
    t = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - t) / calls * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu:0")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--models", help="comma-separated model names (default: all)")
    ap.add_argument("--keep", help="a folder to copy the generated models into")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        only = set(args.models.split(",")) if args.models else None
        for name, build, shape, quantize in MODELS:
            if only is not None and name.split()[0] not in only:
                continue
            stem = name.replace(" ", "_")
            f32 = os.path.join(tmp, f"{stem}.onnx")
            q8 = os.path.join(tmp, f"{stem}_int8.onnx")
            onnx.save(build(), f32)
            quantize(f32, q8, shape)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for path in (f32, q8):
                    shutil.copy(path, args.keep)
            x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
            # The float32 CNN appears once, with its dynamic row.
            pairs = [(name, f32), (name + " int8", q8)] if " " not in name else [(name + " int8", q8)]
            for label, path in pairs:
                o = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                w = wgflow.InferenceSession(path, device=args.device)
                want = o.run(None, {"x": x})[0]
                got = w.run(None, {"x": x})[0]
                assert np.std(want) > 0.1, f"{label}: constant output"
                diff = float(np.abs(want - got).max())
                runs = {"ort": lambda: o.run(None, {"x": x}), "wgflow": lambda: w.run(None, {"x": x})}
                for r in runs.values():
                    r()
                    r()
                times = {k: [] for k in runs}
                for _ in range(args.rounds):
                    for k, r in runs.items():
                        # Let the other's idle threads (onnxruntime's spin, rayon's) park.
                        time.sleep(0.05)
                        times[k].append(timed(r, args.calls))
                med = {k: statistics.median(v) for k, v in times.items()}
                rows.append((label, med["wgflow"], med["ort"], diff))
                print(f"{label}: wgflow {med['wgflow']:.2f} ms, onnxruntime {med['ort']:.2f} ms, max |diff| {diff:.3g}", flush=True)
    print()
    print(f"wgflow {args.device} against onnxruntime {ort.__version__} CPUExecutionProvider (medians of {args.rounds} rounds of {args.calls} calls)")
    print()
    print("| model | wgflow ms | onnxruntime ms | wgflow / onnxruntime | max abs diff |")
    print("|---|---|---|---|---|")
    for label, w, o, d in rows:
        print(f"| {label} | {w:.2f} | {o:.2f} | {w / o:.2f} | {d:.3g} |")


if __name__ == "__main__":
    main()
