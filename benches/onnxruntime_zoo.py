"""onnxruntime's latency on one model of the zoo (scripts/onnx/zoo_models.py), run by
`cargo bench --bench onnx_zoo` between wgflow's runs of the same model, so both are measured
in one run on the same cores.

Usage: python onnxruntime_zoo.py ZOO_DIR NAME
Prints `b1_ms=` and `b8_ms=` (median of 7 blocks of calls after two warm-up runs; 3 blocks
with WGFLOW_BENCH_QUICK=1) for the feeds the manifest names, and `onnxruntime=VERSION`; a
missing onnxruntime prints a `note=` line and exits 0. The CPU execution provider uses its
default thread pool (all cores) and its default graph optimisations.
"""
import json
import os
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"note=onnxruntime not importable: {e}")
    sys.exit(0)

quick = os.environ.get("WGFLOW_BENCH_QUICK") == "1"
zoo, name = sys.argv[1], sys.argv[2]
with open(os.path.join(zoo, "manifest.json")) as f:
    entry = {m["name"]: m for m in json.load(f)["models"]}[name]
print(f"onnxruntime={ort.__version__}")
sess = ort.InferenceSession(os.path.join(zoo, f"{name}.onnx"), providers=["CPUExecutionProvider"])
for batch, spec in entry["batches"].items():
    feeds = {k: np.load(os.path.join(zoo, v)) for k, v in spec["feeds"].items()}
    t = time.perf_counter()
    sess.run(None, feeds)
    once = time.perf_counter() - t
    sess.run(None, feeds)
    # Blocks of about 50 ms, so a fast model is not timed one call at a time.
    iters = max(1, min(20, int(0.05 / max(once, 1e-6))))
    samples = []
    for _ in range(3 if quick else 7):
        t = time.perf_counter()
        for _ in range(iters):
            sess.run(None, feeds)
        samples.append((time.perf_counter() - t) / iters)
    samples.sort()
    print(f"b{batch}_ms={samples[len(samples) // 2] * 1e3:.3f}", flush=True)
