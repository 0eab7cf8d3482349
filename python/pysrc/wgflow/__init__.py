"""wgflow for Python: dataflow graphs of tensor ops on any GPU (through WebGPU/wgpu) or on
the built-in CPU device ``cpu:0``.

* Devices, TensorFlow/PyTorch style: ``list_physical_devices``, ``set_visible_devices``,
  ``best_device``.
* Graphs, TensorFlow 1 style: ``Graph``, ``Session``, ``train``.
* User kernels, the Numba way: ``@vectorize``; raw WGSL, CuPy's way: ``RawKernel``.
* Arrays, the CuPy way: ``array``.
* ONNX models, onnxruntime's way: ``InferenceSession`` (and ``onnx.import_trainable``).
"""

from . import onnx, train
from ._array import Array, array, asarray, asnumpy
from ._devices import (
    PhysicalDevice,
    best_device,
    get_visible_devices,
    is_gpu_available,
    list_physical_devices,
    set_visible_devices,
)
from ._graph import BINARY, UNARY, WITH_ATTRS, Graph, Tensor
from ._raw import RawKernel
from ._session import Session
from ._vectorize import vectorize
from ._wgflow import __version__
from .onnx import InferenceSession

__all__ = [
    "Array", "Graph", "InferenceSession", "PhysicalDevice", "RawKernel", "Session", "Tensor", "array",
    "asarray", "asnumpy", "best_device", "get_visible_devices", "is_gpu_available",
    "list_physical_devices", "onnx", "set_visible_devices", "train", "vectorize",
]


def _function(name):
    def f(x, *args, **kwargs):
        """``wgflow.NAME(x, ...)``: the graph builder for tensors, lazy for arrays."""
        if isinstance(x, Tensor):
            return getattr(x.graph, name)(x, *args, **kwargs)
        if isinstance(x, Array):
            if name in BINARY:
                return x._make(name, *args)
            return x._make(name, **kwargs)
        for a in args:
            if isinstance(a, Tensor):
                return getattr(a.graph, name)(x, *args, **kwargs)
        raise TypeError(f"wgflow.{name} takes a wgflow.Tensor or wgflow.Array, not {type(x).__name__}")

    f.__name__ = name
    f.__doc__ = (f.__doc__ or "").replace("NAME", name)
    return f


for _n in set(UNARY) | set(BINARY) | set(WITH_ATTRS):
    if _n not in ("max", "min", "all", "any", "abs", "round", "pow"):
        globals()[_n] = _function(_n)
for _n in ("abs", "pow", "round"):
    globals()[_n] = _function(_n)
reduce_max = _function("max")
reduce_min = _function("min")
reduce_sum = _function("sum")
reduce_mean = _function("mean")
del _n
