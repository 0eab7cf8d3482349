"""Helpers shared by the package: the user's call site, feed normalisation."""

import os
import sys

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

#: NumPy dtypes wgflow holds natively.
DTYPES = ("float32", "float16", "int32", "uint32", "bool")

# Native-order dtypes by name: NumPy's are singletons, so a feed's dtype is checked by
# identity (`dtype.name` builds a string per call, 1.6 µs).
_NATIVE = {name: np.dtype(name) for name in DTYPES}


def caller():
    """``file:line`` of the innermost frame outside this package (where a build error
    should point)."""
    f = sys._getframe(1)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_PACKAGE_DIR + os.sep):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def dtype_name(dtype):
    """A dtype given as a string, NumPy dtype or type, as wgflow's (NumPy's) name."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in ("f32", "f16", "i32", "u32"):
        return {"f32": "float32", "f16": "float16", "i32": "int32", "u32": "uint32"}[dtype]
    try:
        name = np.dtype(dtype).name
    except TypeError as e:
        raise TypeError(f"dtype {dtype!r} is not a dtype") from e
    if name not in DTYPES:
        raise TypeError(
            f"dtype {name} is not supported: wgflow has float32, float16, int32, uint32 and bool"
        )
    return name


def as_feed(value, want=None, what="feed"):
    """``value`` as a C-contiguous native-endian array for the native layer.

    Python scalars and lists take the wanted dtype; an ndarray must already have it (int64
    for an int32 tensor is accepted: it is narrowed with a range check). Anything else is a
    ``TypeError``; wrong shapes are reported by the library as ``ValueError``. ``what``
    names the value in errors: a string, or a function giving one (called only then).
    """
    if type(value) is np.ndarray:
        # The common case, checked first: a run's feed is converted on every call.
        if value.dtype is _NATIVE.get(want) and value.flags.c_contiguous and value.flags.aligned:
            return value
    if callable(what):
        what = what()
    if value is None:
        raise TypeError(f"{what}: None is not a value")
    if isinstance(value, np.ndarray) or np.isscalar(value) and isinstance(value, np.generic):
        a = np.asarray(value)
        if a.dtype.hasobject:
            raise TypeError(f"{what}: arrays of Python objects cannot be fed; got dtype object")
        if a.dtype.kind not in "biuf" or a.dtype.itemsize > 8:
            raise TypeError(f"{what}: arrays of dtype {a.dtype} are not supported")
        name = a.dtype.newbyteorder("=").name
        if want is not None and name != want and not (name == "int64" and want == "int32"):
            raise TypeError(
                f"{what}: got an array of dtype {name}, but the tensor is {want}; "
                f"convert it with .astype(numpy.{want})"
            )
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
    else:
        try:
            a = np.asarray(value, dtype=want)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what}: cannot convert {type(value).__name__} to an array: {e}") from e
        if a.dtype.hasobject:
            raise TypeError(f"{what}: cannot convert {type(value).__name__} to a numeric array")
        if want is None and a.dtype == np.float64:
            a = a.astype(np.float32)
        elif want is None and a.dtype == np.int64:
            a = a.astype(np.int32)
    # Not np.ascontiguousarray: it turns a 0-d array into a 1-d one. An unaligned array (a
    # view at an odd offset into a buffer) is copied too: the native side reads elements in place.
    return a if a.flags.c_contiguous and a.flags.aligned else a.copy(order="C")


def placeholder_shapes(arrays):
    """Placeholder shapes for a cached graph over ``arrays``: when every array of rank > 0
    has one shape, its dimensions are run-time dimensions shared by name (one graph per
    rank, any size); otherwise (broadcasting) the exact shapes. The second value is the
    cache key part."""
    shapes = {a.shape for a in arrays if a.ndim > 0}
    if len(shapes) <= 1:
        return [[f"d{i}" for i in range(a.ndim)] for a in arrays], ("rank",) + tuple(a.ndim for a in arrays)
    return [list(a.shape) for a in arrays], ("shape",) + tuple(a.shape for a in arrays)
