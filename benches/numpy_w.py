"""NumPy's times for issue 14's workloads W1-W5, run by `cargo bench --bench table` when
Python with NumPy is present, so both are measured in one run on the same cores.

Prints `W1_ms=...` lines: medians of 7 batches, the same shapes and dtypes as the bench
(W1 a+b 16M f32; W2 maximum(a*b+c, 0)*0.5 + exp(-a) 4M f32; W3 1024^3 f32 matmul; W4 the
256x784-512-512-10 MLP with bias+relu and a softmax; W5 row sums of 4096x4096 f32).
"""
import time

import numpy as np


def median_ms(f, iters):
    f()
    f()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        samples.append((time.perf_counter() - t0) / iters)
    samples.sort()
    return samples[len(samples) // 2] * 1e3


def main():
    r = np.random.default_rng(0)
    f32 = np.float32
    a = r.uniform(-1, 1, 1 << 24).astype(f32)
    b = r.uniform(-1, 1, 1 << 24).astype(f32)
    print(f"W1_ms={median_ms(lambda: a + b, 5)}")
    n = 1 << 22
    a2, b2, c2 = (r.uniform(-1, 1, n).astype(f32) for _ in range(3))
    print(f"W2_ms={median_ms(lambda: np.maximum(a2 * b2 + c2, f32(0)) * f32(0.5) + np.exp(-a2), 5)}")
    m1, m2 = (r.uniform(-1, 1, (1024, 1024)).astype(f32) for _ in range(2))
    print(f"W3_ms={median_ms(lambda: m1 @ m2, 5)}")
    x = r.uniform(-1, 1, (256, 784)).astype(f32)
    dims = [(784, 512), (512, 512), (512, 10)]
    ws = [r.uniform(-1, 1, d).astype(f32) for d in dims]
    bs = [r.uniform(-1, 1, d[1]).astype(f32) for d in dims]

    def mlp():
        h = x
        for i in range(3):
            h = h @ ws[i] + bs[i]
            if i < 2:
                h = np.maximum(h, f32(0))
        e = np.exp(h - h.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    print(f"W4_ms={median_ms(mlp, 20)}")
    q = r.uniform(-1, 1, (4096, 4096)).astype(f32)
    print(f"W5_ms={median_ms(lambda: q.sum(-1), 10)}")
    print(f"numpy={np.__version__}")


if __name__ == "__main__":
    main()
