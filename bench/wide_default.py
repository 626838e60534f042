"""The default fit of wide dense data against the hard fit (issue 36, item 1).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/wide_default.py

A soft fit with sigma=None (entmax15's default) needs lambda_max of the covariance (its
width is 0.1 x sqrt(lambda_max)); beyond 512 features that is Lanczos on one pass over X
per product (`softkmeans._covariance`), never a d x d matrix. The default softmax fit
(sigma="default", i.e. "auto": Lloyd from the seeds, then EM of the isotropic mixture)
needs no lambda_max; its EM steps at few centroids take the narrow softmax accumulation
(cpp/src/impl/stats_narrow.hpp). Printed
per shape: the hard fit, the default softmax fit and entmax15's, each the median of 3
interleaved runs with k-means++ from the same seed, the ratio to the hard fit, and
critical_sigma alone with the Lanczos steps it took. Needed: the default fit at most 2x the
hard fit.
"""

from __future__ import annotations

import time

import numpy as np

import softkmeans
from softkmeans import SoftKMeans, _covariance

SHAPES = [(2000, 8000, "uniform"), (2000, 8000, "blobs"), (10, 100_000, "uniform")]
REPEATS = 3


def data(n, d, kind, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d), dtype=np.float32)
    if kind == "blobs":
        X += 2.0 * rng.random((8, d), dtype=np.float32)[rng.integers(0, 8, n)]
    return X


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def lanczos_steps(X):
    """critical_sigma(X) and the number of matvecs (passes over X) it took."""
    count = [0]
    real = _covariance.Covariance.matvec

    def counting(self, v):
        count[0] += 1
        return real(self, v)

    _covariance.Covariance.matvec = counting
    try:
        seconds, value = timed(lambda: softkmeans.critical_sigma(X))
    finally:
        _covariance.Covariance.matvec = real
    return seconds, value, count[0]


def main():
    print(f"# softkmeans {softkmeans.__version__}; load average "
          f"{open('/proc/loadavg').read().split()[:3]}")  # fmt: skip
    print("| n, d, data | hard fit | default fit (softmax) | ratio | entmax15 fit | ratio | "
          "critical_sigma | Lanczos steps |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, d, kind in SHAPES:
        X = data(n, d, kind)
        k = min(8, n)
        runs = {"hard": [], "softmax": [], "entmax15": []}
        for _ in range(REPEATS):
            for name in runs:
                model = SoftKMeans(k, assignment=name, n_init=1, random_state=0)
                runs[name].append(timed(lambda model=model, X=X: model.fit(X))[0])
        hard, soft, ent = (float(np.median(runs[name])) for name in runs)
        seconds, _, steps = lanczos_steps(X)
        print(f"| {n:,}, {d:,}, {kind} float32 | {hard:.3f} s | {soft:.3f} s | "
              f"{soft / hard:.2f}x | {ent:.3f} s | {ent / hard:.2f}x | {seconds:.3f} s | "
              f"{steps} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
