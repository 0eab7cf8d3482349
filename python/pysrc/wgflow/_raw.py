"""``RawKernel``, CuPy's way: a WGSL compute shader, validated by naga, run on a GPU over
NumPy arrays or as a node of a graph."""

import numpy as np

from . import _devices
from ._graph import Graph, Tensor
from ._util import as_feed, dtype_name


class RawKernel:
    """A raw WGSL compute kernel (``cupy.RawKernel``), GPU only.

    Binding convention: everything is in ``@group(0)``; input ``i`` is ``@binding(i)`` and
    the one output ``@binding(n)`` for ``n`` inputs, each ``var<storage, read_write>`` as a
    runtime-sized ``array<T>`` (``f32``, ``i32``, ``u32``; bool is ``u32``). The entry
    point's ``@workgroup_size`` is one-dimensional; with more workgroups than the adapter's
    per-dimension limit the grid is folded into two dimensions, so recover the index as
    ``gid.x + gid.y * nwg.x * X`` and guard it against the count.

    * ``output``: an input index (the output has that input's shape and dtype) or a
      ``(shape, dtype)`` pair.
    * ``invocations``: how many invocations run (default: one per output element).
    * ``with_gradient(i, kernel)`` makes it differentiable with respect to input ``i``: the
      gradient kernel reads the inputs, then ``dy`` at ``@binding(n)``, and writes ``dx`` at
      ``@binding(n + 1)``.

    Calling it on NumPy arrays runs it on the first visible GPU (``device=`` picks another)
    and returns an array (float64 arrays are computed in float32, int64 in int32 with a
    range check: wgflow has neither); calling it on graph tensors adds a node. The shader is checked
    when the node is built: a syntax or binding error is a ``ValueError`` with its line.
    """

    def __init__(self, source, entry_point="main", name=None, output=0, invocations=None):
        if not isinstance(source, str):
            raise TypeError(f"RawKernel: source is WGSL text, not {type(source).__name__}")
        self.source = source
        self.entry_point = entry_point
        self.name = name or entry_point
        if isinstance(output, (tuple, list)):
            if len(output) != 2:
                raise TypeError("RawKernel: output is an input index or a (shape, dtype) pair")
            output = ([int(d) for d in output[0]], dtype_name(output[1]))
        elif not isinstance(output, int) or isinstance(output, bool):
            raise TypeError("RawKernel: output is an input index or a (shape, dtype) pair")
        self.output = output
        if invocations is not None and (not isinstance(invocations, int) or invocations < 0):
            raise TypeError("RawKernel: invocations is a non-negative int or None")
        self.invocations = invocations
        self.gradients = {}
        self._cache = {}

    def __repr__(self):
        return f"<wgflow.RawKernel '{self.name}'>"

    def with_gradient(self, input, kernel):
        """A copy of this kernel whose gradient with respect to input ``input`` is computed
        by ``kernel`` (a ``RawKernel``)."""
        if not isinstance(kernel, RawKernel):
            raise TypeError("with_gradient takes a wgflow.RawKernel")
        k = RawKernel(self.source, self.entry_point, self.name, self.output, self.invocations)
        k.gradients = dict(self.gradients)
        k.gradients[int(input)] = kernel
        return k

    def _spec(self, depth=0):
        spec = {
            "name": self.name,
            "source": self.source,
            "entry_point": self.entry_point,
            "output": tuple(self.output) if isinstance(self.output, list) else self.output,
            "invocations": self.invocations,
        }
        if self.gradients:
            spec["gradients"] = [(i, k._spec(depth + 1)) for i, k in sorted(self.gradients.items())]
        return spec

    @staticmethod
    def _device(device):
        if device is not None:
            return device
        gpus = _devices.list_physical_devices("GPU")
        if not gpus:
            raise RuntimeError(
                "RawKernel: raw WGSL kernels run on a GPU, and no GPU adapter is visible "
                "(wgflow.list_physical_devices() shows what there is)"
            )
        return gpus[0].device

    def __call__(self, *args, device=None):
        tensors = [a for a in args if isinstance(a, Tensor)]
        if tensors:
            g = tensors[0].graph
            ins = [a if isinstance(a, Tensor) else g.constant(a) for a in args]
            return g.raw_kernel(self, ins)
        arrays = [as_feed(a, None, f"argument {i} of raw kernel '{self.name}'") for i, a in enumerate(args)]
        arrays = [a.astype(np.float32) if a.dtype == np.float64 else a for a in arrays]
        dev = self._device(device)
        # Raw kernels see their sizes only through arrayLength, so one graph per exact
        # shape (the source may have sizes written into it).
        key = (tuple((a.shape, a.dtype.name) for a in arrays), dev)
        entry = self._cache.get(key)
        if entry is None:
            from ._session import Session

            g = Graph()
            # int64 is narrowed to int32 with a range check as it is fed.
            xs = [
                g.placeholder(f"x{i}", list(a.shape), "int32" if a.dtype == np.int64 else a.dtype.name)
                for i, a in enumerate(arrays)
            ]
            y = g.raw_kernel(self, xs)
            entry = (Session(g, device=dev), xs, y)
            self._cache[key] = entry
        sess, xs, y = entry
        return sess.run(y, feed_dict=dict(zip(xs, arrays)))
