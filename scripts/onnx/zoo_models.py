"""Export the model zoo that `cargo bench --bench onnx_zoo` measures: models as users export
them today (torchvision, Hugging Face `transformers`, torch recurrent layers), random weights
at the libraries' own initialisation scales, each with a symbolic batch (and, for text, a
symbolic sequence), and their feeds at batch 1 and batch 8 as `.npy` files.

Usage (the pinned venv is `scripts/onnx/zoo-requirements.txt`; see benches/onnx_zoo.rs):

    python scripts/onnx/zoo_models.py OUT_DIR [NAME...]

Writes `OUT_DIR/NAME.onnx`, `OUT_DIR/NAME_b{1,8}_{input}.npy` and `OUT_DIR/manifest.json`
(each model's inputs and how it was made). Every model is run once by onnxruntime at both
batch sizes, and one whose output does not vary is an error: a zoo of models that output
constants would measure nothing. Keras applications (through tf2onnx) are not here: that
needs TensorFlow and tf2onnx in the venv as well (see the closing notes of issue 46).
"""

import json
import os
import sys
import warnings

import numpy as np
import onnxruntime as ort
import torch
import torchvision
from torch import nn

warnings.filterwarnings("ignore")
torch.manual_seed(0)
SEQ = 64
VOCAB = 8000


def calibrate(model, shape):
    """Batch-norm statistics from a few random batches (as training would leave them), so
    that activations stay O(1) through the depth of a randomly initialised network: with
    the initial statistics (mean 0, variance 1) MobileNetV2's ReLU6 outputs all became 0."""
    # Layers a library zero-initialises (torchvision's ViT head) would output constants.
    for m in model.modules():
        if isinstance(m, nn.Linear) and not m.weight.detach().any():
            nn.init.normal_(m.weight, std=m.in_features**-0.5)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for i in range(4):
            g = torch.Generator().manual_seed(100 + i)
            model(torch.randn([8] + shape, generator=g))
    return model.eval()


def vision(name, build, size=224):
    def make():
        torch.manual_seed(0)
        shape = [3, size, size]
        return calibrate(build(), shape), [("input", "image", shape)]

    return name, make


def small_vit():
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(
        image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384, mlp_dim=1536
    )


class TextRnn(nn.Module):
    """Embedding, a two-layer bidirectional LSTM and a GRU, and a classifier: the
    recurrent text model users export from torch."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 128)
        self.lstm = nn.LSTM(128, 128, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(256, 128, batch_first=True)
        self.head = nn.Linear(128, 4)

    def forward(self, ids):
        y, _ = self.lstm(self.emb(ids))
        y, h = self.gru(y)
        return self.head(h[-1])


class SpeechGru(nn.Module):
    """A GRU over 40 filterbank features (keyword spotting)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(40, 192, num_layers=2, batch_first=True)
        self.head = nn.Linear(192, 12)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.head(y[:, -1])


class ByName(nn.Module):
    """Calls a `transformers` model with its inputs by name (their positions differ between
    models and versions) and returns its first output, as export scripts do."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out[0]


def hf(name, build):
    def make():
        torch.manual_seed(0)
        model = build().eval()
        return ByName(model), [("input_ids", "ids", [SEQ]), ("attention_mask", "mask", [SEQ])]

    return name, make


def bert():
    from transformers import BertConfig, BertModel

    c = BertConfig(
        vocab_size=VOCAB,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        attn_implementation="eager",
    )
    return BertModel(c)


def distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    c = DistilBertConfig(
        vocab_size=VOCAB, dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
        attn_implementation="eager",
    )
    return DistilBertModel(c)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    c = GPT2Config(
        vocab_size=VOCAB, n_positions=256, n_embd=256, n_layer=4, n_head=4,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )
    return GPT2LMHeadModel(c)


def t5_encoder():
    from transformers import T5Config, T5EncoderModel

    c = T5Config(
        vocab_size=VOCAB, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_heads=4,
        attn_implementation="eager",
    )
    return T5EncoderModel(c)


def roberta():
    from transformers import RobertaConfig, RobertaModel

    c = RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=SEQ + 4,
        attn_implementation="eager",
    )
    return RobertaModel(c)


tv = torchvision.models
MODELS = dict(
    [
        vision("resnet18", lambda: tv.resnet18()),
        vision("resnet50", lambda: tv.resnet50()),
        vision("mobilenet_v2", lambda: tv.mobilenet_v2()),
        vision("mobilenet_v3_small", lambda: tv.mobilenet_v3_small()),
        vision("mobilenet_v3_large", lambda: tv.mobilenet_v3_large()),
        vision("efficientnet_b0", lambda: tv.efficientnet_b0()),
        vision("regnet_y_400mf", lambda: tv.regnet_y_400mf()),
        vision("convnext_tiny", lambda: tv.convnext_tiny()),
        vision("vit_small", small_vit),
        vision("squeezenet1_1", lambda: tv.squeezenet1_1()),
        vision("shufflenet_v2", lambda: tv.shufflenet_v2_x1_0()),
        vision("densenet121", lambda: tv.densenet121()),
        vision("mnasnet0_5", lambda: tv.mnasnet0_5()),
        vision("googlenet", lambda: tv.googlenet(aux_logits=False, init_weights=True)),
        hf("bert", bert),
        hf("distilbert", distilbert),
        hf("gpt2", gpt2),
        hf("t5_encoder", t5_encoder),
        hf("roberta", roberta),
        ("lstm_gru_text", lambda: (TextRnn().eval(), [("ids", "ids", [SEQ])])),
        ("gru_speech", lambda: (SpeechGru().eval(), [("features", "audio", [98, 40])])),
    ]
)


def feed(kind, shape, batch, seed):
    rng = np.random.default_rng(seed)
    full = [batch] + shape
    if kind == "ids":
        return rng.integers(1, VOCAB, size=full, dtype=np.int64)
    if kind == "mask":
        m = np.ones(full, np.int64)
        # Padding at the end of every other row, as a tokenizer's batch has.
        m[1::2, shape[0] * 3 // 4 :] = 0
        return m
    return rng.standard_normal(full).astype(np.float32)


def export(name, out_dir):
    model, inputs = MODELS[name]()
    path = os.path.join(out_dir, f"{name}.onnx")
    example = tuple(torch.from_numpy(feed(k, s, 2, 1)) for _, k, s in inputs)
    names = [n for n, _, _ in inputs]
    text = inputs[0][1] in ("ids", "audio")
    axes = {n: {0: "batch", 1: "sequence"} if text else {0: "batch"} for n in names}
    # With gradients on: under no_grad, eval-mode attention takes torch's fused fast path
    # (`_native_multi_head_attention`), which the TorchScript exporter cannot write.
    torch.onnx.export(
        model,
        example,
        path,
        input_names=names,
        output_names=["output"],
        dynamic_axes=axes | {"output": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    entry = {"name": name, "inputs": names, "batches": {}}
    for batch in (1, 8):
        feeds = {n: feed(k, s, batch, 7 + batch) for n, k, s in inputs}
        out = sess.run(None, feeds)[0]
        spread = float(np.std(out))
        if not np.isfinite(out).all() or spread < 1e-6:
            raise SystemExit(f"{name}: batch {batch} output is constant or not finite")
        files = {}
        for n, v in feeds.items():
            f = f"{name}_b{batch}_{n}.npy"
            np.save(os.path.join(out_dir, f), v)
            files[n] = f
        entry["batches"][str(batch)] = {"feeds": files, "output_std": spread}
    print(f"{name}: {os.path.getsize(path) / 1e6:.1f} MB", flush=True)
    return entry


def main():
    out_dir = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out_dir, exist_ok=True)
    manifest_path = os.path.join(out_dir, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = {m["name"]: m for m in json.load(f)["models"]}
    failed = []
    for name in names:
        try:
            manifest[name] = export(name, out_dir)
        except Exception as e:  # noqa: BLE001 - one model's exporter error is reported
            msg = str(e).strip().splitlines()
            print(f"{name}: FAILED: {type(e).__name__}: {msg[-1] if msg else ''}", flush=True)
            failed.append(name)
    models = [manifest[n] for n in MODELS if n in manifest]
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(
            {
                "torch": torch.__version__,
                "torchvision": torchvision.__version__,
                "onnxruntime": ort.__version__,
                "models": models,
            },
            f,
            indent=1,
        )
    os.replace(tmp, manifest_path)
    if failed:
        raise SystemExit(f"not exported: {', '.join(failed)}")


if __name__ == "__main__":
    main()
