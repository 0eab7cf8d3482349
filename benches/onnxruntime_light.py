"""onnxruntime's batch-1 latency for the light models, run by `cargo bench --bench onnx` when
onnxruntime is installed, so wgflow and onnxruntime are measured in one run on the same cores.

Usage: python onnxruntime_light.py MODEL_DIR NAME...
Prints `NAME_ms=` (median of 7 batches after two warm-up runs; 3 with WGFLOW_BENCH_QUICK=1)
and `onnxruntime=VERSION`; a missing onnxruntime prints a `note=` line and exits 0.
The input is the runner's deterministic `arange(n).reshape(shape) / n`, as in
tests/onnx/light.rs. The CPU execution provider uses its default thread pool (all cores).
"""
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
model_dir, names = sys.argv[1], sys.argv[2:]
print(f"onnxruntime={ort.__version__}")
for name in names:
    path = os.path.join(model_dir, f"light_{name}.onnx")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    n = int(np.prod(shape))
    x = (np.arange(n).reshape(shape) / n).astype(np.float32)
    feeds = {inp.name: x}
    for _ in range(2):
        sess.run(None, feeds)
    iters = 2 if quick else 5
    samples = []
    for _ in range(3 if quick else 7):
        t = time.perf_counter()
        for _ in range(iters):
            sess.run(None, feeds)
        samples.append((time.perf_counter() - t) / iters)
    samples.sort()
    print(f"{name}_ms={samples[len(samples) // 2] * 1e3:.3f}", flush=True)
