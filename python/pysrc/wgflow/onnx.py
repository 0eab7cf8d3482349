"""ONNX models with onnxruntime's interface: ``InferenceSession(path).run(None, feeds)``,
and ``import_trainable`` for fine-tuning."""

from . import _wgflow
from ._graph import Graph
from ._util import as_feed

_NUMPY = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(bool)": "bool",
    "tensor(uint32)": "uint32",
}


class NodeArg:
    """An input or output as the model declares it: ``name``, ``shape`` (ints, and the
    symbolic dimensions' names as strings) and ``type`` (``"tensor(float)"``)."""

    def __init__(self, d):
        self.name = d["name"]
        self.shape = list(d["shape"])
        self.type = d["type"]

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class InferenceSession:
    """``onnxruntime.InferenceSession``'s interface over wgflow: ``device`` is where the
    model runs (default: ``best_device()``); ``providers`` and ``sess_options`` are
    accepted and ignored, so switching from onnxruntime is a one-line change."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, device=None, **kwargs):
        if isinstance(path_or_bytes, (bytes, bytearray)):
            import os
            import tempfile

            fd, tmp = tempfile.mkstemp(suffix=".onnx")
            with os.fdopen(fd, "wb") as f:
                f.write(path_or_bytes)
            try:
                self._s = _wgflow.NativeInferenceSession(tmp, device)
            finally:
                os.unlink(tmp)
        else:
            self._s = _wgflow.NativeInferenceSession(str(path_or_bytes), device)
        self._inputs = [NodeArg(d) for d in self._s.inputs()]
        self._outputs = [NodeArg(d) for d in self._s.outputs()]
        # The dtype each input is fed as (int64 ids are narrowed with a range check).
        self._want = {}
        for i in self._inputs:
            want = _NUMPY.get(i.type)
            self._want[i.name] = "int32" if want == "int64" else want

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return ["WgflowExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        """Outputs named by ``output_names`` (``None``: all, in order) for the feeds
        ``input_feed`` (``{name: array}``), as a list of NumPy arrays."""
        if not isinstance(input_feed, dict):
            raise TypeError("input_feed must be a dict of {input name: array}")
        wants = self._want
        feeds = []
        for name, value in input_feed.items():
            feeds.append((name, as_feed(value, wants.get(name), lambda: f"input '{name}'")))
        names = None if output_names is None else list(output_names)
        return self._s.run(names, feeds)


def import_trainable(path):
    """The model at ``path`` as a ``Graph`` whose floating-point initializers are
    variables (named as in the model), with ``g.inputs`` and ``g.outputs`` mapping ONNX
    names to tensors."""
    native, ins, outs = _wgflow.import_trainable(str(path))
    g = Graph(native)
    g.inputs = {n: g._wrap(t) for n, t in ins}
    g.outputs = {n: g._wrap(t) for n, t in outs}
    return g
