"""The hard step with group distance bounds (`_native.hard_stats_bounded`, the groups of
`BoundedHardPass.centroid_groups`) against the plain hard step (`_native.block_stats`)
along one Lloyd trajectory: per step the fractions of rows and of distances computed and
the CPU time of each, one thread, best of 3; then the ratio of the totals. The figures
behind `BoundedHardPass.MIN_CENTROID_BYTES` (python/softkmeans/fit/bounded.py) and
bench/README.md's "Whole hard fit" paragraph.

    python bench/studies/bounded_steps.py N D K STEPS [float32|float64]
    python bench/studies/bounded_steps.py 1e5 256 1024 8

Also `--fit N D K ITERS`: the whole `SoftKMeans(assignment="hard", init=C0, tol=0).fit` at
one thread, the CPU time of each native pass it makes (the covariance, the bounded steps,
the final pass) and the rest, second of two runs. And `--settle`: the plain step at
(1e6, 16, 64), 2 threads, timed right after a 4096^3 sgemm and after 0.3 s of rest (the
reason for `peers.SETTLE_SECONDS`).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import peers as P  # noqa: E402

from softkmeans import _native  # noqa: E402
from softkmeans.fit.bounded import BoundedHardPass  # noqa: E402


def cpu_best(fn, repeats=3):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def trajectory(n, d, k, steps, dtype):
    X = P.make_blobs(n, d, k, dtype)
    C = P.initial_centroids(X, k)
    w = np.ones(n)
    group = BoundedHardPass.centroid_groups(C)
    labels, lower = np.zeros(n, np.int64), np.zeros((n, int(group.max()) + 1))
    C_prev, total_b, total_p = None, 0.0, 0.0
    for step in range(steps):
        saved = labels.copy(), lower.copy()

        def bounded(C=C, C_prev=C_prev, saved=saved):
            labels[:], lower[:] = saved  # every repeat from the same state
            return _native.hard_stats_bounded(X, C, C_prev, w, labels, lower, group, 1)

        tb, (stats, n_computed, n_distances) = cpu_best(bounded)
        tp, _ = cpu_best(lambda C=C: _native.block_stats(X, C, "hard", 1.0, w, 1))
        total_b, total_p = total_b + tb, total_p + tp
        print(f"step {step}: rows {n_computed / n:6.1%}  distances {n_distances / (n * k):6.1%}  "
              f"bounded {tb * 1e3:7.1f} ms  "
              f"plain {tp * 1e3:7.1f} ms")  # fmt: skip
        N = stats.cluster_weights
        held = N > 0
        C_next = C.copy()
        C_next[held] = (stats.sums[held] / N[held, None]).astype(dtype)
        C_prev, C = C, C_next
    print(
        f"bounded / plain CPU time over {steps} steps: {total_b / total_p:.2f} "
        f"({lower.shape[1]} groups)"
    )


def settle(threads=2):
    from threadpoolctl import threadpool_limits

    n, d, k = 1_000_000, 16, 64
    X = P.make_blobs(n, d, k)
    C = P.initial_centroids(X, k)
    w = np.ones(n)
    A = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    out = np.empty_like(A)

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def gemm():
        with threadpool_limits(threads):
            np.matmul(A, A, out=out)

    def ours():
        _native.block_stats(X, C, "hard", 1.0, w, threads)

    gemm(), ours()
    for rest in (0.0, 0.3):
        to, tg = [], []
        for _ in range(5):
            tg.append(timed(gemm))
            time.sleep(rest)
            to.append(timed(ours))
            time.sleep(rest)
        rate = 2 * n * k * d / np.median(to) / 1e9
        peak = 2 * 4096**3 / np.median(tg) / 1e9
        print(f"rest {rest} s: hard step {rate:.1f} GFLOP/s, sgemm {peak:.1f} ({rate / peak:.0%})")


def fit_passes(n, d, k, iters, dtype=np.float32):
    import softkmeans

    X = P.make_blobs(n, d, k, dtype)
    C0 = P.initial_centroids(X, k)
    spent = {}

    def timed(name):
        wrapped = getattr(_native, name)

        def call(*args, **kwargs):
            t0 = time.process_time()
            out = wrapped(*args, **kwargs)
            spent.setdefault(name, []).append(time.process_time() - t0)
            return out

        setattr(_native, name, call)

    for name in ("weighted_covariance", "hard_stats_bounded", "block_stats"):
        timed(name)
    for _ in range(2):  # the first run pays the imports and first touches
        spent.clear()
        t0 = time.process_time()
        softkmeans.SoftKMeans(
            k, assignment="hard", init=C0, n_init=1, max_iter=iters, tol=0, n_threads=1
        ).fit(X)
        total = time.process_time() - t0
    print(f"fit {total * 1e3:.0f} ms CPU, one thread; passes (ms):")
    for name, times in spent.items():
        print(f"  {name}: " + " ".join(f"{t * 1e3:.0f}" for t in times))
    rest = total - sum(map(sum, spent.values()))
    print(f"  rest: {rest * 1e3:.0f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--settle"]:
        settle()
    elif sys.argv[1] == "--fit":
        n, d, k, iters = (int(float(a)) for a in sys.argv[2:6])
        fit_passes(n, d, k, iters, np.dtype(sys.argv[6]) if len(sys.argv) > 6 else np.float32)
    else:
        n, d, k, steps = (int(float(a)) for a in sys.argv[1:5])
        trajectory(n, d, k, steps, np.dtype(sys.argv[5]) if len(sys.argv) > 5 else np.float32)
