"""Writes golden.safetensors with Python's safetensors (tests/graph/checkpoint.rs reads it), or,
with --check FILE, checks that a file wgflow saved loads in Python with the same tensors.

    pip install safetensors numpy
    python tests/golden/safetensors/make.py                 # writes golden.safetensors
    python tests/golden/safetensors/make.py --check F.safetensors

The tests never run Python: the file this writes is committed.
"""

import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def tensors():
    """The golden tensors: every dtype wgflow maps, special values, a scalar, an empty one."""
    return {
        "layer/w": np.array(
            [[np.nan, -0.0, np.inf], [0.1, -3.5, 1e-45]], dtype=np.float32
        ),
        "layer/scale": np.array(2.5, dtype=np.float32),
        "half": np.array([0.5, -65504.0, 5.960464477539063e-08, np.nan], dtype=np.float16),
        "ints": np.array([[-(2**31), -1], [0, 2**31 - 1]], dtype=np.int32),
        "count": np.array([0, 1, 2**32 - 1], dtype=np.uint32),
        "flags": np.array([True, False, True, True, False], dtype=np.bool_),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        got = load_file(sys.argv[2])
        want = tensors()
        assert sorted(got) == sorted(want), (sorted(got), sorted(want))
        for name, value in want.items():
            assert same(got[name], value), (name, got[name], value)
        print(f"ok: {sys.argv[2]} holds the {len(want)} golden tensors bit for bit")
        return
    path = os.path.join(HERE, "golden.safetensors")
    save_file(tensors(), path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
