"""The bench's small ONNX models, written to the folder given (not committed: the MLP's
weights are 2.7 MB). W1 `add` (two fed [16777216] arrays), W3 `matmul` (two fed
[1024, 1024] matrices) and W4 `mlp` (a fed [256, 784] batch through 784-512-512-10 with
bias and ReLU; weights N(0, 0.05) from a fixed seed), opset 17, IR 8 so that every runtime
here reads them.

    ~/.cache/wgflow-ci/onnx-venv-*/bin/python benches/web/models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main(out):
    os.makedirs(out, exist_ok=True)
    f = TensorProto.FLOAT
    n = 1 << 24
    save(helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "w1_add",
        [helper.make_tensor_value_info("a", f, [n]), helper.make_tensor_value_info("b", f, [n])],
        [helper.make_tensor_value_info("y", f, [n])]), os.path.join(out, "add.onnx"))
    save(helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "w3_matmul",
        [helper.make_tensor_value_info("a", f, [1024, 1024]),
         helper.make_tensor_value_info("b", f, [1024, 1024])],
        [helper.make_tensor_value_info("y", f, [1024, 1024])]), os.path.join(out, "matmul.onnx"))
    rng = np.random.default_rng(4)
    dims = [784, 512, 512, 10]
    nodes, inits, x = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((dims[i], dims[i + 1])) * 0.05).astype(np.float32)
        b = (rng.standard_normal(dims[i + 1]) * 0.05).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i}" if i < 2 else "y"])]
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"]))
            x = f"r{i}"
    save(helper.make_graph(nodes, "w4_mlp", [helper.make_tensor_value_info("x", f, [256, 784])],
                           [helper.make_tensor_value_info("y", f, [256, 10])], inits),
         os.path.join(out, "mlp.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
