"""Arrays the CuPy way: ``wgflow.array([1, 2, 3], device="gpu:0")``, NumPy arithmetic,
``.numpy()``, ``.to("cpu:0")``.

An array is lazy: arithmetic records an expression, and reading it (``.numpy()``,
``.shape``, ``repr``) runs the whole expression as one graph on the array's device, so an
elementwise chain is one fused kernel. Graphs are cached by the expression's shape (ops,
dtypes, ranks, device): ``a * b + c`` compiles once, whatever the values and sizes.
"""

import numpy as np

from . import _devices
from ._graph import Graph
from ._util import as_feed, dtype_name, placeholder_shapes

_cache = {}


def cache_size():
    """How many distinct expression graphs arrays have compiled."""
    return len(_cache)


class Array:
    """A lazily evaluated array on one device (see the module docs)."""

    __array_priority__ = 1000

    def __init__(self, value=None, op=None, inputs=(), attrs=(), device=None):
        self._value = value
        self._op = op
        self._inputs = tuple(inputs)
        self._attrs = tuple(attrs)
        self.device = device

    # ---- evaluation
    def _leaves(self, out, seen):
        if id(self) in seen:
            return
        seen.add(id(self))
        if self._value is not None:
            out.append(self)
        else:
            for x in self._inputs:
                x._leaves(out, seen)

    def _key(self, index):
        if self._value is not None:
            return ("in", index[id(self)], self._value.dtype.name, self._value.ndim)
        return (self._op, self._attrs) + tuple(x._key(index) for x in self._inputs)

    def _build(self, g, index, xs, memo):
        if id(self) in memo:
            return memo[id(self)]
        if self._value is not None:
            t = xs[index[id(self)]]
        else:
            ins = [x._build(g, index, xs, memo) for x in self._inputs]
            t = getattr(g, self._op)(*ins, **dict(self._attrs))
        memo[id(self)] = t
        return t

    def numpy(self):
        """The values, as a NumPy array (computing them on the device if needed)."""
        if self._value is None:
            from ._session import Session

            leaves = []
            self._leaves(leaves, set())
            index = {id(x): i for i, x in enumerate(leaves)}
            shapes, layout = placeholder_shapes([x._value for x in leaves])
            key = (self.device, layout, self._key(index))
            entry = _cache.get(key)
            if entry is None:
                g = Graph()
                xs = [g.placeholder(f"a{i}", s, x._value.dtype.name) for i, (s, x) in enumerate(zip(shapes, leaves))]
                y = self._build(g, index, xs, {})
                entry = (Session(g, device=self.device), xs, y)
                _cache[key] = entry
            sess, xs, y = entry
            self._value = sess.run(y, feed_dict={x: leaf._value for x, leaf in zip(xs, leaves)})
            self._op, self._inputs, self._attrs = None, (), ()
        return self._value

    def get(self):
        """``cupy.ndarray.get``: the values on the host."""
        return self.numpy()

    def __array__(self, dtype=None, copy=None):
        v = self.numpy()
        return v if dtype is None else v.astype(dtype)

    def to(self, device):
        """The same values on another device (``"cpu:0"``, ``"gpu:0"``)."""
        return Array(self.numpy(), device=_device(device))

    @property
    def shape(self):
        return self.numpy().shape

    @property
    def dtype(self):
        return self.numpy().dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return self.numpy().size

    def __len__(self):
        return len(self.numpy())

    def __repr__(self):
        return f"wgflow.array({np.array2string(self.numpy(), separator=', ')}, device='{self.device}')"

    def __float__(self):
        return float(self.numpy())

    # ---- ops
    def _lift(self, other):
        if isinstance(other, Array):
            return other
        return Array(as_feed(other, self._dtype_name()), device=self.device)

    def _dtype_name(self):
        """The dtype without computing anything (for lifting Python scalars)."""
        if self._value is not None:
            return self._value.dtype.name
        if self._op in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"):
            return "bool"
        if self._op == "cast":
            return dict(self._attrs)["dtype"]
        return self._inputs[0]._dtype_name()

    def _make(self, op, *others, **attrs):
        ins = (self,) + tuple(self._lift(o) for o in others)
        return Array(op=op, inputs=ins, attrs=sorted(attrs.items()), device=self.device)

    def __add__(self, o):
        return self._make("add", o)

    def __radd__(self, o):
        return self._lift(o)._make("add", self)

    def __sub__(self, o):
        return self._make("sub", o)

    def __rsub__(self, o):
        return self._lift(o)._make("sub", self)

    def __mul__(self, o):
        return self._make("mul", o)

    def __rmul__(self, o):
        return self._lift(o)._make("mul", self)

    def __truediv__(self, o):
        return self._make("div", o)

    def __rtruediv__(self, o):
        return self._lift(o)._make("div", self)

    def __pow__(self, o):
        return self._make("pow", o)

    def __matmul__(self, o):
        return self._make("matmul", o)

    def __neg__(self):
        return self._make("neg")

    def __abs__(self):
        return self._make("abs")

    def __lt__(self, o):
        return self._make("less", o)

    def __le__(self, o):
        return self._make("less_equal", o)

    def __gt__(self, o):
        return self._make("greater", o)

    def __ge__(self, o):
        return self._make("greater_equal", o)

    def __eq__(self, o):
        return self._make("equal", o)

    def __ne__(self, o):
        return self._make("not_equal", o)

    __hash__ = None

    def sum(self, axis=None, keepdims=False):
        return self._make("sum", axis=_axis(axis), keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return self._make("mean", axis=_axis(axis), keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return self._make("max", axis=_axis(axis), keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return self._make("min", axis=_axis(axis), keepdims=keepdims)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        return self._make("reshape", shape=tuple(shape))

    @property
    def T(self):
        return self._make("transpose")

    def astype(self, dtype):
        return self._make("cast", dtype=dtype_name(dtype))


def _axis(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def _device(device):
    if device is None:
        return _devices.best_device()
    from . import _wgflow

    return _wgflow.parse_device(device)


def array(obj, dtype=None, device=None):
    """An array on ``device`` (default: ``best_device()``) from a list, scalar or NumPy
    array. float64 becomes float32 and int64 int32 unless ``dtype`` says otherwise."""
    if isinstance(obj, Array):
        obj = obj.numpy()
    want = dtype_name(dtype)
    if isinstance(obj, np.ndarray):
        if want is not None:
            obj = obj.astype(want)
        elif obj.dtype == np.float64:
            obj = obj.astype(np.float32)
        elif obj.dtype == np.int64:
            obj = obj.astype(np.int32)
    return Array(as_feed(obj, want if not isinstance(obj, np.ndarray) else None, "array"), device=_device(device))


def asarray(obj, dtype=None, device=None):
    return obj if isinstance(obj, Array) and dtype is None and device is None else array(obj, dtype, device)


def asnumpy(a):
    """``cupy.asnumpy``."""
    return a.numpy() if isinstance(a, Array) else np.asarray(a)
