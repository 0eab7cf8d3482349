"""JSON encoding shared by the golden generators (gen_*.py): a NumPy array becomes
{"shape": [...], "dtype": "f32" | "f16" | "i32" | "u32" | "bool", "data": [...]} with
non-finite floats as the strings "nan", "inf" and "-inf" (what tests/common/golden.rs reads).
"""

import math

import numpy as np

DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.int32): "i32",
    np.dtype(np.uint32): "u32",
    np.dtype(np.bool_): "bool",
}


def dtype_name(arr):
    try:
        return DTYPES[arr.dtype]
    except KeyError:
        raise TypeError(f"unsupported dtype {arr.dtype}") from None


def enc_value(v, dt):
    if dt in ("f32", "f16"):
        f = float(np.float32(v))
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if dt == "bool":
        return 1 if bool(v) else 0
    return int(v)


def enc(arr):
    arr = np.asarray(arr)
    dt = dtype_name(arr)
    return {
        "shape": [int(d) for d in arr.shape],
        "dtype": dt,
        "data": [enc_value(v, dt) for v in np.ascontiguousarray(arr).reshape(-1).tolist()],
    }
