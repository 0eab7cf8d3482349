"""Run wgflow's exported ONNX models with onnxruntime and compare with wgflow's outputs.

The export tests write each case when `WGFLOW_ONNX_EXPORT_DIR` is set:

    WGFLOW_ONNX_EXPORT_DIR=/tmp/wgx cargo test --all-features --test onnx export::
    python scripts/onnx/export_check.py /tmp/wgx

Each `<dir>/<case>/` holds `model.onnx` and `test_data_set_0/input_*.pb` (the feeds) and
`output_*.pb` (wgflow's cpu:0 outputs). The model is checked with `onnx.checker` (full
check, with shape inference), run on onnxruntime's CPU provider, and every output compared:
floats within `atol + rtol * |expected|`, other dtypes exactly. Exit status 1 on any mismatch.
Needs `onnx`, `onnxruntime` and `numpy`.
"""

import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def load(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def numbered(data, prefix):
    files = glob.glob(os.path.join(data, f"{prefix}_*.pb"))
    return sorted(files, key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))


def check(case_dir, rtol, atol):
    model_path = os.path.join(case_dir, "model.onnx")
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    data = os.path.join(case_dir, "test_data_set_0")
    feeds = dict(load(p) for p in numbered(data, "input"))
    wants = [load(p) for p in numbered(data, "output")]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    gots = sess.run([name for name, _ in wants], feeds)
    worst, failures = 0.0, []
    for (name, want), got in zip(wants, gots):
        if got.shape != want.shape or got.dtype != want.dtype:
            failures.append(f"{name}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}")
            continue
        if np.issubdtype(want.dtype, np.floating):
            g, w = got.astype(np.float64), want.astype(np.float64)
            both_nan = np.isnan(g) & np.isnan(w)
            err = np.where(both_nan, 0.0, np.abs(g - w) - rtol * np.abs(w))
            err = np.nan_to_num(err, nan=np.inf)
            m = float(err.max()) if err.size else 0.0
            diff = np.where(both_nan, 0.0, np.abs(g - w))
            worst = max(worst, float(np.nan_to_num(diff, nan=np.inf).max()) if diff.size else 0.0)
            if m > atol:
                failures.append(f"{name}: off by up to {m + atol:.3g} (atol {atol}, rtol {rtol})")
        elif not np.array_equal(got, want):
            n = int((got != want).sum())
            failures.append(f"{name}: {n} of {want.size} elements differ")
    return len(wants), worst, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the WGFLOW_ONNX_EXPORT_DIR the tests wrote")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    args = ap.parse_args()
    cases = sorted(d for d in os.listdir(args.dir) if os.path.isfile(os.path.join(args.dir, d, "model.onnx")))
    if not cases:
        sys.exit(f"no <case>/model.onnx under {args.dir}")
    bad = 0
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    for case in cases:
        try:
            n, worst, failures = check(os.path.join(args.dir, case), args.rtol, args.atol)
        except Exception as e:  # a model onnxruntime or the checker refuses is a failure
            n, worst, failures = 0, float("nan"), [f"{type(e).__name__}: {e}"]
        status = "ok" if not failures else "FAIL"
        bad += bool(failures)
        print(f"{status:4} {case}: {n} outputs, largest |difference| {worst:.3g}")
        for f in failures:
            print(f"       {f}")
    print(f"{len(cases) - bad}/{len(cases)} cases match")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
