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
* `ffn_small`: two 256 -> 1024 -> 256 blocks at [8, 32, 256].

    pip install ./python onnx onnxruntime
    python benches/onnx_quantized.py --device cpu:0
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

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


MODELS = [
    ("ffn_base", lambda: ffn(768, 3072, 4, 0), [1, 128, 768]),
    ("mlp_wide", lambda: mlp([784, 1024, 1024, 10], 1), [64, 784]),
    ("ffn_small", lambda: ffn(256, 1024, 2, 2), [8, 32, 256]),
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
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build, shape in MODELS:
            f32 = os.path.join(tmp, f"{name}.onnx")
            q8 = os.path.join(tmp, f"{name}_int8.onnx")
            onnx.save(build(), f32)
            quantize_dynamic(f32, q8, weight_type=QuantType.QInt8)
            x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
            for label, path in [(name, f32), (name + " int8", q8)]:
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
