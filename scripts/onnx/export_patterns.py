"""Models in the shapes PyTorch, Hugging Face and Keras exporters write them, for
tests/onnx/patterns.rs and tests/cli_onnx.rs: int64 ids with symbolic `batch` and
`sequence`, shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), position
ids from `Range(0, sequence)`, an attention mask turned into an additive bias, several named
outputs, and an int64 ArgMax. Writes tests/data/onnx-patterns/<name>.onnx and, per size,
<name>.<batch>x<seq>.<input>.npy and <name>.<batch>x<seq>.<output>.npy (onnxruntime's
outputs; the tests need no Python).

    python3 -m venv /tmp/ov && /tmp/ov/bin/pip install onnx==1.23.2 numpy==2.4.6 onnxruntime==1.32.0
    /tmp/ov/bin/python scripts/onnx/export_patterns.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "onnx-patterns")
VOCAB, D, HEADS, CLASSES = 40, 16, 2, 5
SIZES = [(1, 7), (8, 128), (29, 7)]


def init(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def encoder(position_ids):
    """A one-block encoder over token ids, as torch.onnx.export writes a BERT: the head
    split by Shape/Gather/Concat/Reshape, scores masked by (1 - mask) * -10000."""
    rng = np.random.default_rng(1 if position_ids else 2)
    n = []
    inits = [
        init(rng, "word_embeddings", [VOCAB, D], 1.0),
        init(rng, "w_qkv", [D, 3 * D]),
        init(rng, "w_out", [D, D]),
        init(rng, "w_cls", [D, CLASSES]),
        init(rng, "w_lm", [D, VOCAB]),
        i64("zero", [0]),
        i64("one", [1]),
        i64("heads", [HEADS]),
        i64("head_dim", [D // HEADS]),
        i64("hidden", [D]),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "f_one"),
        numpy_helper.from_array(np.array(-10000.0, dtype=np.float32), "f_neg"),
        numpy_helper.from_array(np.array(1.0 / np.sqrt(D // HEADS), dtype=np.float32), "scale"),
    ]
    n.append(helper.make_node("Gather", ["word_embeddings", "input_ids"], ["emb"]))
    n.append(helper.make_node("Shape", ["input_ids"], ["ids_shape"]))
    n.append(helper.make_node("Gather", ["ids_shape", "zero"], ["batch_1"], axis=0))
    n.append(helper.make_node("Gather", ["ids_shape", "one"], ["seq_1"], axis=0))
    if position_ids:
        inits.append(init(rng, "position_embeddings", [256, D], 1.0))
        n.append(helper.make_node("Squeeze", ["seq_1", "zero"], ["seq"]))
        n.append(helper.make_node("Constant", [], ["r0"], value=numpy_helper.from_array(np.array(0, dtype=np.int64))))
        n.append(helper.make_node("Constant", [], ["r1"], value=numpy_helper.from_array(np.array(1, dtype=np.int64))))
        n.append(helper.make_node("Range", ["r0", "seq", "r1"], ["pos_ids"]))
        n.append(helper.make_node("Gather", ["position_embeddings", "pos_ids"], ["pos"]))
        n.append(helper.make_node("Add", ["emb", "pos"], ["x"]))
    else:
        n.append(helper.make_node("Identity", ["emb"], ["x"]))
    n.append(helper.make_node("MatMul", ["x", "w_qkv"], ["qkv"]))
    n.append(helper.make_node("Split", ["qkv"], ["q", "k", "v"], axis=2, num_outputs=3))
    n.append(helper.make_node("Concat", ["batch_1", "seq_1", "heads", "head_dim"], ["split_shape"], axis=0))
    for t in "qkv":
        n.append(helper.make_node("Reshape", [t, "split_shape"], [f"{t}4"]))
    n.append(helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]))
    n.append(helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]))
    n.append(helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]))
    n.append(helper.make_node("MatMul", ["qt", "kt"], ["scores0"]))
    n.append(helper.make_node("Mul", ["scores0", "scale"], ["scores1"]))
    # The Hugging Face mask: [b, s] int64 -> [b, 1, 1, s] float, (1 - m) * -10000.
    n.append(helper.make_node("Unsqueeze", ["attention_mask", "one"], ["m3"]))
    n.append(helper.make_node("Unsqueeze", ["m3", "one"], ["m4"]))
    n.append(helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT))
    n.append(helper.make_node("Sub", ["f_one", "mf"], ["inv"]))
    n.append(helper.make_node("Mul", ["inv", "f_neg"], ["bias"]))
    n.append(helper.make_node("Add", ["scores1", "bias"], ["scores"]))
    n.append(helper.make_node("Softmax", ["scores"], ["probs"], axis=-1))
    n.append(helper.make_node("MatMul", ["probs", "vt"], ["ctx"]))
    n.append(helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]))
    n.append(helper.make_node("Concat", ["batch_1", "seq_1", "hidden"], ["merge_shape"], axis=0))
    n.append(helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["merged"]))
    n.append(helper.make_node("MatMul", ["merged", "w_out"], ["attn"]))
    n.append(helper.make_node("Add", ["x", "attn"], ["res"]))
    n.append(helper.make_node("LayerNormalization", ["res", "ln_g", "ln_b"], ["last_hidden_state"], axis=-1, epsilon=1e-5))
    inits += [numpy_helper.from_array(np.ones(D, np.float32), "ln_g"), numpy_helper.from_array(np.zeros(D, np.float32), "ln_b")]
    n.append(helper.make_node("MatMul", ["last_hidden_state", "w_lm"], ["logits"]))
    n.append(helper.make_node("ArgMax", ["logits"], ["predictions"], axis=-1, keepdims=0))
    n.append(helper.make_node("ReduceMean", ["last_hidden_state", "one"], ["pooled0"], keepdims=0))
    n.append(helper.make_node("MatMul", ["pooled0", "w_cls"], ["pooler_logits"]))
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])
    outs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", VOCAB]),
        helper.make_tensor_value_info("predictions", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("pooler_logits", TensorProto.FLOAT, ["batch", CLASSES]),
    ]
    g = helper.make_graph(n, "encoder", [ids, mask], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], producer_name="export_patterns")
    onnx.checker.check_model(m, full_check=True)
    return m


def save(name, model):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for b, s in SIZES:
        ids = rng.integers(0, VOCAB, size=(b, s), dtype=np.int64)
        mask = np.ones((b, s), dtype=np.int64)
        # Padding at the end of every other row, as a tokenizer writes it.
        for r in range(1, b, 2):
            mask[r, s - (r % s) :] = 0
        outs = sess.run(None, {"input_ids": ids, "attention_mask": mask})
        tag = f"{name}.{b}x{s}"
        np.save(os.path.join(OUT, f"{tag}.input_ids.npy"), ids)
        np.save(os.path.join(OUT, f"{tag}.attention_mask.npy"), mask)
        for o, v in zip(sess.get_outputs(), outs):
            np.save(os.path.join(OUT, f"{tag}.{o.name}.npy"), v)
            assert np.std(v) > 0, (name, o.name)
        print(tag, [(o.name, v.dtype.name, v.shape) for o, v in zip(sess.get_outputs(), outs)])


if __name__ == "__main__":
    save("encoder", encoder(position_ids=False))
    save("bert_positions", encoder(position_ids=True))
