"""``Session``: compile a graph for the fetches asked (cached) and run it."""

from . import _devices, _wgflow
from ._graph import Graph, Tensor
from ._util import as_feed


def _flatten(fetches):
    """The tensors of ``fetches`` (a tensor, name, list/tuple or dict) and a function
    that rebuilds that structure from their values."""
    if isinstance(fetches, (Tensor, str)):
        return [fetches], lambda v: v[0]
    if isinstance(fetches, dict):
        keys = list(fetches)
        return [fetches[k] for k in keys], lambda v: dict(zip(keys, v))
    if isinstance(fetches, (list, tuple)):
        kind = type(fetches)
        return list(fetches), lambda v: kind(v) if kind is not list else list(v)
    raise TypeError(f"fetches are a Tensor, a list, a tuple or a dict, not {type(fetches).__name__}")


class Session:
    """Runs a graph (a snapshot taken now: nodes built later are not in it), TensorFlow 1
    style: ``sess.run(fetches, feed_dict={x: array})`` returns NumPy arrays, shaped like
    ``fetches`` (one tensor -> an array, a list -> a list, a dict -> a dict).

    ``device`` is where unscoped nodes run (default: ``best_device()``);
    ``soft_placement`` moves nodes whose scope names a device that is not visible to the
    default device instead of failing. The session keeps its own copy of the graph, so it
    may outlive the ``Graph`` object.
    """

    def __init__(self, graph=None, soft_placement=False, device=None, log_device_placement=False, visible_devices=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"Session needs a wgflow.Graph, got {type(graph).__name__}")
        self.graph = graph
        if visible_devices is None:
            visible_devices = _devices._visible
        self._options = dict(
            soft_placement=soft_placement,
            visible_devices=None if visible_devices is None else list(visible_devices),
            default_device=device,
            log_device_placement=log_device_placement,
        )
        self._open()

    def _open(self):
        self._s = _wgflow.NativeSession(self.graph._g, **self._options)
        self._nodes = len(self.graph)
        self._dtypes = {}  # node index -> dtype name: a feed's is looked up once

    def _refresh(self, tensors):
        """TensorFlow 1 lets a program build more nodes after making its session: take a
        new snapshot while the session has not run yet (nothing is lost); after a run, the
        library's error says the tensor is newer than the session."""
        nodes = self._nodes
        if any(t._t.index >= nodes for t in tensors) and self._s.counters()["runs"] == 0:
            self._open()

    @property
    def device(self):
        """Where unscoped nodes run (``"gpu:0"``, ``"cpu:0"``)."""
        return self._s.default_device

    def __repr__(self):
        return f"<wgflow.Session on {self.device}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass

    def _tensor(self, t):
        if isinstance(t, str):
            return self.graph.tensor(t)
        if not isinstance(t, Tensor):
            raise TypeError(f"expected a wgflow.Tensor or a node name, got {type(t).__name__}")
        return t

    def _feeds(self, feed_dict):
        """The fed tensors and ``(native tensor, array)`` pairs for the native layer."""
        if not feed_dict:
            return [], []
        tensors, feeds = [], []
        dtypes = self._dtypes
        for k, v in feed_dict.items():
            t = self._tensor(k)
            i = t._t.index
            want = dtypes.get(i)
            if want is None:
                want = dtypes[i] = t.dtype
            tensors.append(t)
            feeds.append((t._t, as_feed(v, want, lambda: f"feed '{t.name}'")))
        return tensors, feeds

    def run(self, fetches, feed_dict=None):
        """Compute ``fetches``; train ops and assignments among them give ``None``."""
        flat, rebuild = _flatten(fetches)
        tensors = [self._tensor(t) for t in flat]
        fed, feeds = self._feeds(feed_dict)
        self._refresh(tensors + fed)
        # One run for targets and values together, as TensorFlow 1: a `[train, loss]` loop
        # computes the forward pass once, and the loss is the one the step descended.
        out = self._s.run(feeds, [t._t for t in tensors])
        if any(t._target for t in tensors):
            out = [None if t._target else v for t, v in zip(tensors, out)]
        return rebuild(out)

    def read_variable(self, v):
        return self._s.read_variable(self._tensor(v)._t)

    def assign(self, v, value):
        """Overwrite variable ``v`` with ``value``."""
        v = self._tensor(v)
        self._s.write_variable(v._t, as_feed(value, v.dtype, f"variable '{v.name}'"))

    def save(self, path, var_list=None):
        """Write the variables (all, or ``var_list``) to a ``.safetensors`` file."""
        vs = None if var_list is None else [self._tensor(v)._t for v in var_list]
        self._s.save(str(path), vs)

    def restore(self, path):
        """Read every variable of the graph back from a ``.safetensors`` file."""
        self._s.restore(str(path))

    def memory(self, fetches, feed_dict=None):
        """The memory plan of running ``fetches``: per device, ``peak_bytes`` (the arena),
        ``lower_bound_bytes`` (the most bytes live at once), ``no_reuse_bytes`` (every
        intermediate in its own buffer) and ``constant_bytes``."""
        flat, _ = _flatten(fetches)
        return self._s.memory(self._feeds(feed_dict)[1], [self._tensor(t)._t for t in flat])

    def counters(self):
        """Plans, pipelines, bind groups and buffers created so far, runs, and the bytes cpu:0
        keeps per plan made once from constants (``cpu_prepared_bytes``: packed weights)."""
        return self._s.counters()
