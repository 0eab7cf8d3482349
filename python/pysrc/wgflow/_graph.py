"""Graphs, TensorFlow-1 style: ``Graph``, ``Tensor`` (with Python operators) and scopes."""

import contextlib
import numbers

import numpy as np

from . import _wgflow
from ._util import as_feed, dtype_name

# The library's unary primitives (its elementwise table), then composites.
UNARY = list(_wgflow.unary_primitives()) + "square silu zeros_like ones_like".split()
BINARY = list(_wgflow.binary_primitives()) + (
    "matmul assign assign_add assign_sub sparse_softmax_cross_entropy take gather_elements gather_nd"
).split()
# Builders with keyword attributes: name -> attribute names in positional order.
WITH_ATTRS = {
    "cast": ("dtype",),
    "gelu": ("approximate",),
    "leaky_relu": ("alpha",),
    "elu": ("alpha",),
    "clip": ("min", "max"),
    "sum": ("axis", "keepdims"),
    "mean": ("axis", "keepdims"),
    "max": ("axis", "keepdims"),
    "min": ("axis", "keepdims"),
    "prod": ("axis", "keepdims"),
    "all": ("axis", "keepdims"),
    "any": ("axis", "keepdims"),
    "logsumexp": ("axis", "keepdims"),
    "var": ("axis", "ddof", "keepdims"),
    "std": ("axis", "ddof", "keepdims"),
    "argmax": ("axis", "keepdims"),
    "argmin": ("axis", "keepdims"),
    "softmax": ("axis",),
    "log_softmax": ("axis",),
    "cumsum": ("axis", "exclusive", "reverse"),
    "cumprod": ("axis", "exclusive", "reverse"),
    "expand_dims": ("axis",),
    "one_hot": ("depth",),
    "dropout": ("rate", "seed"),
    "reshape": ("shape",),
    "transpose": ("perm",),
    "squeeze": ("axis",),
    "broadcast_to": ("shape",),
    "flip": ("axis",),
    "tile": ("reps",),
    "pad": ("pads", "mode", "value"),
    "max_pool2d": ("kernel", "stride", "padding"),
    "avg_pool2d": ("kernel", "stride", "padding"),
}


class Tensor:
    """A symbolic value of a ``Graph``: one node's output. Python operators build ops
    (``+ - * / // % ** @``, ``< <= > >=``, unary ``-``, ``abs``, indexing as a slice).
    ``==`` compares identity, as in TensorFlow 1 (use ``wgflow.equal`` elementwise), so
    tensors can key a ``feed_dict``."""

    __slots__ = ("graph", "_t", "_target")
    __array_priority__ = 1000  # ndarray + Tensor -> Tensor.__radd__

    def __init__(self, graph, native, target=False):
        self.graph = graph
        self._t = native
        self._target = target

    @property
    def name(self):
        return self.graph._g.name(self._t)

    @property
    def shape(self):
        """Dimensions: ints, and names (strings) for those known only at run time."""
        return tuple(self.graph._g.shape(self._t))

    @property
    def dtype(self):
        return self.graph._g.dtype(self._t)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def device(self):
        """The device its scope asked for (``None``: the session's default)."""
        return self.graph._g.device(self._t)

    @property
    def op(self):
        return self.graph._g.op_name(self._t)

    def __repr__(self):
        return f"<wgflow.Tensor '{self.name}' shape={self.shape} dtype={self.dtype}>"

    def __hash__(self):
        return hash((id(self.graph), self._t.index))

    def __eq__(self, other):
        return isinstance(other, Tensor) and other.graph is self.graph and other._t.index == self._t.index

    def __ne__(self, other):
        return not self.__eq__(other)

    def __bool__(self):
        raise TypeError("a wgflow.Tensor has no truth value until a Session runs it")

    def _lift(self, other):
        return self.graph._lift(other, self.dtype)

    def __add__(self, o):
        return self.graph.add(self, self._lift(o))

    def __radd__(self, o):
        return self.graph.add(self._lift(o), self)

    def __sub__(self, o):
        return self.graph.sub(self, self._lift(o))

    def __rsub__(self, o):
        return self.graph.sub(self._lift(o), self)

    def __mul__(self, o):
        return self.graph.mul(self, self._lift(o))

    def __rmul__(self, o):
        return self.graph.mul(self._lift(o), self)

    def __truediv__(self, o):
        return self.graph.div(self, self._lift(o))

    def __rtruediv__(self, o):
        return self.graph.div(self._lift(o), self)

    def __floordiv__(self, o):
        return self.graph.floor_divide(self, self._lift(o))

    def __mod__(self, o):
        return self.graph.remainder(self, self._lift(o))

    def __pow__(self, o):
        return self.graph.pow(self, self._lift(o))

    def __rpow__(self, o):
        return self.graph.pow(self._lift(o), self)

    def __matmul__(self, o):
        return self.graph.matmul(self, self._lift(o))

    def __rmatmul__(self, o):
        return self.graph.matmul(self._lift(o), self)

    def __neg__(self):
        return self.graph.neg(self)

    def __abs__(self):
        return self.graph.abs(self)

    def __invert__(self):
        return self.graph.logical_not(self)

    def __and__(self, o):
        return self.graph.logical_and(self, self._lift(o))

    def __or__(self, o):
        return self.graph.logical_or(self, self._lift(o))

    def __xor__(self, o):
        return self.graph.logical_xor(self, self._lift(o))

    def __lt__(self, o):
        return self.graph.less(self, self._lift(o))

    def __le__(self, o):
        return self.graph.less_equal(self, self._lift(o))

    def __gt__(self, o):
        return self.graph.greater(self, self._lift(o))

    def __ge__(self, o):
        return self.graph.greater_equal(self, self._lift(o))

    @property
    def T(self):
        return self.graph.transpose(self)

    def __getitem__(self, key):
        """NumPy basic indexing: ints, slices, ``...`` and ``None`` (new axis)."""
        if not isinstance(key, tuple):
            key = (key,)
        rank = self.ndim
        n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
        if sum(1 for k in key if k is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_real > rank:
            raise IndexError(f"too many indices: {n_real} for a tensor of rank {rank}")
        args, squeeze, newaxes, axis, out_axis = [], [], [], 0, 0
        for k in key:
            if k is Ellipsis:
                for _ in range(rank - n_real):
                    args.append((None, None, 1))
                    axis += 1
                    out_axis += 1
            elif k is None:
                newaxes.append(out_axis)
                out_axis += 1
            elif isinstance(k, slice):
                args.append((k.start, k.stop, 1 if k.step is None else k.step))
                axis += 1
                out_axis += 1
            elif isinstance(k, numbers.Integral) and not isinstance(k, bool):
                k = int(k)
                args.append((k, None if k == -1 else k + 1, 1))
                squeeze.append(axis)
                axis += 1
            else:
                raise TypeError(
                    f"a tensor index is an int, slice, ... or None, not {type(k).__name__}"
                )
        while axis < rank:
            args.append((None, None, 1))
            axis += 1
        out = self.graph.slice(self, args)
        if squeeze:
            out = self.graph.squeeze(out, axis=squeeze)
        for a in newaxes:
            out = self.graph.expand_dims(out, axis=a)
        return out


def _literal(value, dtype, what):
    """A constant's or initial value's array: NumPy's float64 becomes float32 unless a
    dtype is asked for (wgflow has no float64)."""
    if isinstance(value, np.ndarray) and dtype is None and value.dtype == np.float64:
        value = value.astype(np.float32)
    if isinstance(value, np.ndarray) and dtype is not None:
        value = value.astype(dtype_name(dtype))
    return as_feed(value, None if isinstance(value, np.ndarray) else dtype_name(dtype), what)


def _ops(graph, inputs):
    out = []
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected a wgflow.Tensor, got {type(t).__name__}")
        if t.graph is not graph:
            raise ValueError("a tensor of another graph was given to this graph's builder")
        out.append(t._t)
    return out


class Graph:
    """A dataflow graph, built once and run by ``Session`` as often as you like.

    Every builder of the Rust library is a method (``g.exp(x)``, ``g.sum(x, axis=1)``,
    ``g.conv2d(x, w, stride=2)``); shapes and dtypes are checked as you build, and a
    mistake raises at your line.
    """

    def __init__(self, _native=None):
        self._g = _native if _native is not None else _wgflow.NativeGraph()
        self.inputs = {}
        self.outputs = {}

    def __len__(self):
        return len(self._g)

    def __repr__(self):
        return f"<wgflow.Graph with {len(self)} nodes>"

    def _wrap(self, native, target=False):
        return Tensor(self, native, target)

    def _op(self, name, inputs, **attrs):
        out = self._g.op(name, _ops(self, inputs), attrs or None)
        return [self._wrap(t) for t in out]

    def _lift(self, value, dtype):
        if isinstance(value, Tensor):
            return value
        return self.constant(as_feed(value, dtype, "operand"))

    # ---- leaves
    def placeholder(self, name, shape, dtype="float32"):
        """A value fed at run time; ``None`` (or a name, shared between placeholders) in
        ``shape`` is a dimension known only then."""
        return self._wrap(self._g.placeholder(name, list(shape), dtype_name(dtype)))

    def constant(self, value, dtype=None):
        """A constant from an array, list or scalar (float64 and int64 become float32 and
        int32 unless ``dtype`` says otherwise)."""
        return self._wrap(self._g.constant(_literal(value, dtype, "constant")))

    def variable(self, name, initial_value=None, shape=None, dtype=None, initializer="zeros", seed=0):
        """A variable the session owns: from ``initial_value``, or of ``shape`` and
        ``dtype`` with ``initializer`` (zeros, ones, glorot_uniform, he_normal)."""
        if initial_value is not None:
            return self._wrap(self._g.variable(name, _literal(initial_value, dtype, "variable")))
        if shape is None:
            raise TypeError("variable: give an initial_value or a shape")
        return self._wrap(self._g.variable_init(name, list(shape), dtype_name(dtype or "float32"), initializer, seed))

    def variables(self):
        return [self._wrap(t) for t in self._g.variables()]

    def tensor(self, name):
        """The tensor a node name names (KeyError if none)."""
        t = self._g.tensor(name)
        if t is None:
            raise KeyError(f"no node named {name!r}")
        return self._wrap(t)

    # ---- scopes
    @contextlib.contextmanager
    def device(self, spec):
        """``with g.device("gpu:0"):`` nodes built inside ask for that device (TensorFlow
        spellings such as ``"/GPU:0"`` work too)."""
        self._g.push_device(spec)
        try:
            yield
        finally:
            self._g.pop_scope()

    @contextlib.contextmanager
    def name_scope(self, name):
        """``with g.name_scope("layer1"):`` nodes built inside are named ``layer1/...``."""
        self._g.push_name_scope(name)
        try:
            yield
        finally:
            self._g.pop_scope()

    # ---- ops with several inputs or outputs
    def select(self, cond, a, b):
        """``where(cond, a, b)``: a Python number takes the other branch's dtype."""
        if not isinstance(a, Tensor) and isinstance(b, Tensor):
            a = self._lift(a, b.dtype)
        if not isinstance(b, Tensor):
            b = self._lift(b, a.dtype if isinstance(a, Tensor) else None)
        if not isinstance(a, Tensor):
            a = self._lift(a, b.dtype)
        return self._op("select", [cond, a, b])[0]

    where = select

    def concat(self, xs, axis=0):
        return self._op("concat", list(xs), axis=axis)[0]

    def stack(self, xs, axis=0):
        return self._op("stack", list(xs), axis=axis)[0]

    def split(self, x, sections, axis=0):
        return self._op("split", [x], sections=sections, axis=axis)

    def slice(self, x, args):
        """``args``: one ``(start, stop, step)`` per leading axis (``None`` for open ends)."""
        return self._op("slice", [x], args=[tuple(a) for a in args])[0]

    def layer_norm(self, x, gamma=None, beta=None, axis=-1, eps=1e-5):
        ins = [x] if gamma is None else [x, gamma, beta]
        return self._op("layer_norm", ins, axis=axis, eps=eps)[0]

    def batch_norm(self, x, mean, var, gamma, beta, eps=1e-5):
        return self._op("batch_norm", [x, mean, var, gamma, beta], eps=eps)[0]

    def linear(self, x, w, b=None):
        return self._op("linear", [x, w] if b is None else [x, w, b])[0]

    def conv2d(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """NCHW input, OIHW weights."""
        def two(v):
            return [v, v] if isinstance(v, int) else list(v)
        ins = [x, w] if bias is None else [x, w, bias]
        return self._op("conv2d", ins, stride=two(stride), padding=two(padding), dilation=two(dilation), groups=groups)[0]

    def conv2d_backprop_input(self, dy, w, input_hw, stride=1, padding=0, dilation=1, groups=1):
        """TensorFlow's ``conv2d_backprop_input``: the gradient of ``conv2d`` (no bias) with
        respect to its input, of spatial size ``input_hw``, from the output's gradient ``dy``
        and the weights ``w``."""
        def two(v):
            return [v, v] if isinstance(v, int) else list(v)
        return self._op("conv2d_backprop_input", [dy, w], input_hw=two(input_hw), stride=two(stride),
                        padding=two(padding), dilation=two(dilation), groups=groups)[0]

    def conv2d_backprop_filter(self, x, dy, kernel, stride=1, padding=0, dilation=1, groups=1):
        """TensorFlow's ``conv2d_backprop_filter``: the gradient of ``conv2d`` with respect to
        its ``kernel``-sized weights, from its input ``x`` and the output's gradient ``dy``."""
        def two(v):
            return [v, v] if isinstance(v, int) else list(v)
        return self._op("conv2d_backprop_filter", [x, dy], kernel=two(kernel), stride=two(stride),
                        padding=two(padding), dilation=two(dilation), groups=groups)[0]

    def max_pool2d_grad(self, x, dy, kernel, stride=None, padding=0):
        """The gradient of ``max_pool2d`` with respect to ``x``: each window's ``dy`` goes to
        its first maximum."""
        def two(v):
            return [v, v] if isinstance(v, int) else list(v)
        stride = kernel if stride is None else stride
        return self._op("max_pool2d_grad", [x, dy], kernel=two(kernel), stride=two(stride),
                        padding=two(padding))[0]

    def avg_pool2d_grad(self, dy, input_hw, kernel, stride=None, padding=0):
        """The gradient of ``avg_pool2d`` with respect to its ``input_hw``-sized input: each
        window's ``dy / count`` spread over its in-bounds cells."""
        def two(v):
            return [v, v] if isinstance(v, int) else list(v)
        stride = kernel if stride is None else stride
        return self._op("avg_pool2d_grad", [dy], input_hw=two(input_hw), kernel=two(kernel),
                        stride=two(stride), padding=two(padding))[0]

    def group(self, *targets):
        """One target that runs all of ``targets`` (train ops, assignments)."""
        if len(targets) == 1 and isinstance(targets[0], (list, tuple)):
            targets = targets[0]
        t = self._op("group", list(targets))[0]
        t._target = True
        return t

    def zeros(self, shape, dtype="float32"):
        return self._op("zeros", [], shape=list(shape), dtype=dtype_name(dtype))[0]

    def ones(self, shape, dtype="float32"):
        return self._op("ones", [], shape=list(shape), dtype=dtype_name(dtype))[0]

    def full(self, shape, value, dtype="float32"):
        return self._op("full", [], shape=list(shape), value=float(value), dtype=dtype_name(dtype))[0]

    def arange(self, start, stop=None, step=1, dtype="float32"):
        if stop is None:
            start, stop = 0, start
        return self._op("arange", [], start=float(start), stop=float(stop), step=float(step), dtype=dtype_name(dtype))[0]

    def random_uniform(self, shape, low=0.0, high=1.0, seed=0):
        return self._op("random_uniform", [], shape=list(shape), low=low, high=high, seed=seed)[0]

    def random_normal(self, shape, mean=0.0, std=1.0, seed=0):
        return self._op("random_normal", [], shape=list(shape), mean=mean, std=std, seed=seed)[0]

    def stateful_random_uniform(self, shape, low=0.0, high=1.0, seed=0):
        """Like ``random_uniform``, with new numbers on every run (``tf.random.uniform``): a
        session's sequence of runs is reproducible and the same on every device."""
        return self._op("stateful_random_uniform", [], shape=list(shape), low=low, high=high, seed=seed)[0]

    def stateful_random_normal(self, shape, mean=0.0, std=1.0, seed=0):
        """Like ``random_normal``, with new numbers on every run."""
        return self._op("stateful_random_normal", [], shape=list(shape), mean=mean, std=std, seed=seed)[0]

    def raw_kernel(self, kernel, inputs):
        """A node running ``kernel`` (a ``wgflow.RawKernel``) over ``inputs``; the shader is
        validated by naga here. It runs on a GPU only."""
        from ._raw import RawKernel

        if not isinstance(kernel, RawKernel):
            raise TypeError(f"raw_kernel takes a wgflow.RawKernel, not {type(kernel).__name__}")
        ins = _ops(self, list(inputs))
        return self._wrap(self._g.raw_kernel(kernel._spec(), ins))

    def eye(self, n, m=None, k=0, dtype="float32"):
        return self._op("eye", [], n=n, m=n if m is None else m, k=k, dtype=dtype_name(dtype))[0]

    def linspace(self, start, stop, num, endpoint=True):
        return self._op("linspace", [], start=float(start), stop=float(stop), num=num, endpoint=endpoint)[0]

    # ---- indexing, attention
    def top_k(self, x, k, axis=-1, largest=True):
        """The ``k`` largest (or smallest) values along ``axis``, sorted, and their indices."""
        v, i = self._op("top_k", [x], k=k, axis=axis, largest=largest)
        return v, i

    def scatter_nd(self, data, indices, updates, reduction="none"):
        return self._op("scatter_nd", [data, indices, updates], reduction=reduction)[0]

    def scatter_elements(self, data, indices, updates, axis=0, reduction="none"):
        return self._op("scatter_elements", [data, indices, updates], axis=axis, reduction=reduction)[0]

    def scatter_add(self, data, indices, updates, axis=0):
        return self._op("scatter_add", [data, indices, updates], axis=axis)[0]

    def segment_sum(self, data, segment_ids, num_segments, axis=0):
        return self._op("segment_sum", [data, segment_ids], num_segments=num_segments, axis=axis)[0]

    def attention(self, q, k, v, causal=False, scale=None):
        """``softmax(q kᵀ · scale) v`` over the last two axes (scale ``1/√d`` by default)."""
        attrs = {"causal": causal}
        if scale is not None:
            attrs["scale"] = float(scale)
        return self._op("attention", [q, k, v], **attrs)[0]

    def round_to(self, x, format):
        """``x`` rounded to a float8/float4 format (``float8_e4m3fn``, ``float8_e4m3fnuz``,
        ``float8_e5m2``, ``float8_e5m2fnuz``, ``float4_e2m1fn``; ml_dtypes' names), held in f32."""
        return self._op("round_to", [x], format=format)[0]

    # ---- autodiff, files
    def gradients(self, ys, xs, grad_ys=None):
        """Gradients of ``sum(ys)`` with respect to each of ``xs`` (a tensor or a list), as
        ``tf.gradients``: ``ys`` may be a list (their sums are added), and ``grad_ys``
        (one per ``ys``, same shapes) weights each elementwise, the incoming gradient.
        ``None`` where ``ys`` do not depend on one."""
        single = isinstance(xs, Tensor)
        xs = [xs] if single else list(xs)
        ys = [ys] if isinstance(ys, Tensor) else list(ys)
        if grad_ys is not None:
            grad_ys = [grad_ys] if isinstance(grad_ys, Tensor) else list(grad_ys)
            grad_ys = _ops(self, grad_ys)
        out = self._g.gradients(_ops(self, ys), _ops(self, xs), grad_ys)
        out = [None if t is None else self._wrap(t) for t in out]
        return out[0] if single else out

    def save(self, path):
        """Write the graph file (JSON) that ``Graph.load`` and the ``wgflow`` CLI read."""
        self._g.save(str(path))

    @staticmethod
    def load(path):
        return Graph(_wgflow.NativeGraph.load(str(path)))

    def to_json(self):
        return self._g.to_json()


def _unary(name):
    def f(self, x):
        return self._op(name, [x])[0]

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}``."
    return f


def _binary(name):
    def f(self, a, b, **attrs):
        if not isinstance(a, Tensor) and isinstance(b, Tensor):
            a = self._lift(a, b.dtype)
        if isinstance(a, Tensor) and not isinstance(b, Tensor):
            b = self._lift(b, a.dtype)
        t = self._op(name, [a, b], **attrs)[0]
        if name.startswith("assign"):
            t._target = True
        return t

    f.__name__ = name
    f.__doc__ = f"``{name}`` (NumPy broadcasting; both operands of one dtype)."
    return f


def _with_attrs(name, keys):
    def f(self, x, *args, **kwargs):
        if len(args) > len(keys):
            raise TypeError(f"{name} takes at most {len(keys)} arguments after the tensor")
        attrs = dict(zip(keys, args))
        for k, v in kwargs.items():
            if k == "keepdim":
                k = "keepdims"
            if k not in keys:
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
            attrs[k] = v
        if "dtype" in attrs:
            attrs["dtype"] = dtype_name(attrs["dtype"])
        for k in ("shape", "perm", "reps", "kernel", "stride", "padding", "pads"):
            if k in attrs and isinstance(attrs[k], tuple):
                attrs[k] = list(attrs[k])
        if isinstance(attrs.get("axis"), tuple):
            attrs["axis"] = list(attrs["axis"])
        return self._op(name, [x], **attrs)[0]

    f.__name__ = name
    f.__doc__ = f"``{name}({', '.join(keys)})``."
    return f


for _n in UNARY:
    setattr(Graph, _n, _unary(_n))
for _n in BINARY:
    setattr(Graph, _n, _binary(_n))
for _n, _k in WITH_ATTRS.items():
    setattr(Graph, _n, _with_attrs(_n, _k))
Graph.take = _binary("take")
Graph.gather_elements = _binary("gather_elements")
