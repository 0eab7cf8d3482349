"""Golden outputs for tests/onnx/light.rs's random-weight variant of the light models.

The `onnx` package's light models compute every weight with `ConstantOfShape` (one value per
tensor), so their stored outputs are a uniform softmax that any model of the right shape
matches. This script gives each such weight deterministic pseudo-random values instead (the
generator and scaling rules below are repeated exactly in tests/onnx/light.rs), runs the
model with onnxruntime's CPU provider on the runner's input `arange(n).reshape(shape) / n`,
and writes the outputs (the model's output, then the final Softmax's input where the model
ends in one) to tests/data/onnx-light/random/<name>.f32 (raw little-endian float32, concatenated).

    python3 -m venv /tmp/v && /tmp/v/bin/pip install onnx==1.23.2 onnxruntime==1.32.0 numpy
    /tmp/v/bin/python scripts/onnx/light_golden.py
"""
import collections
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "tests", "data", "onnx-light")
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def uniform(n, seed):
    """n float32 values in [-0.5, 0.5): splitmix64 of (seed, index), top 24 bits."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed << 32) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(40)).astype(np.float32) / np.float32(1 << 24)) - np.float32(0.5)


def role(graph, name):
    """The (op, input position, node) that finally consumes `name`, through Unsqueeze/Reshape."""
    consumers = collections.defaultdict(list)
    for n in graph.node:
        for i, x in enumerate(n.input):
            consumers[x].append((n, i))
    n, i = consumers[name][0]
    while n.op_type in ("Unsqueeze", "Reshape") and i == 0:
        n, i = consumers[n.output[0]][0]
    return n, i


def scale_and_offset(node, pos, dims):
    """How a weight's uniform values are scaled: value = offset + scale * u (float32)."""
    op = node.op_type
    if op == "Conv" and pos == 1:
        return 0.0, (24.0 / int(np.prod(dims[1:]))) ** 0.5
    if op == "Gemm" and pos == 1:
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        fan_in = dims[1] if trans_b else dims[0]
        return 0.0, (12.0 / fan_in) ** 0.5
    if op == "BatchNormalization":
        return {1: (1.0, 0.2), 2: (0.0, 0.2), 3: (0.0, 0.2), 4: (1.0, 0.4)}[pos]
    if op == "Mul":
        return 1.0, 0.2
    return 0.0, 0.2


def randomized(model):
    """The model with each ConstantOfShape weight replaced by an initializer."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    keep, k = [], 0
    for n in list(g.node):
        if n.op_type != "ConstantOfShape":
            keep.append(n)
            continue
        k += 1
        dims = [int(d) for d in numpy_helper.to_array(inits[n.input[0]])]
        node, pos = role(g, n.output[0])
        offset, scale = scale_and_offset(node, pos, dims)
        u = uniform(int(np.prod(dims)), k)
        v = (np.float32(offset) + np.float32(scale) * u).astype(np.float32).reshape(dims)
        g.initializer.append(numpy_helper.from_array(v, n.output[0]))
    del g.node[:]
    g.node.extend(keep)
    return model


def main():
    out_dir = os.path.join(DATA, "random")
    os.makedirs(out_dir, exist_ok=True)
    names = sys.argv[1:] or MODELS
    for name in names:
        model = randomized(onnx.load(os.path.join(DATA, f"light_{name}.onnx")))
        # A final Softmax saturates: compare its input (the logits) too.
        last = model.graph.node[-1]
        if last.op_type == "Softmax":
            model.graph.output.append(helper.make_empty_tensor_value_info(last.input[0]))
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        n = int(np.prod(shape))
        x = (np.arange(n).reshape(shape) / n).astype(np.float32)
        outs = sess.run(None, {inp.name: x})
        np.concatenate([o.ravel() for o in outs]).astype("<f4").tofile(
            os.path.join(out_dir, f"{name}.f32"))
        for o in outs:
            print(f"{name}: output {list(o.shape)}, min {o.min():.4g} max {o.max():.4g} std {o.std():.4g}")
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}")


if __name__ == "__main__":
    main()
