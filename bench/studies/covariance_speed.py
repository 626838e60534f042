"""The weighted covariance pass (`softkmeans._native.weighted_covariance`, behind
critical_sigma_ and the tolerance of every fit) against NumPy's float64 covariance
(centre, weight, one BLAS dgemm) as the named peer, interleaved in one process, medians.

    python bench/studies/covariance_speed.py [--threads 2] [--repeats 5]

Rates count the n d^2 multiply-adds of the whole product (2 n d^2 flops) for both
contenders, whatever part of it each computes.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import peers as P  # noqa: E402

from softkmeans import _native  # noqa: E402

SHAPES = ((100_000, 256), (200_000, 64), (1_000_000, 16))


def numpy_covariance(X, w):
    """(mean, covariance) in float64 as np.cov(X.T, aweights=w, bias=True) computes them."""
    X64 = X.astype(np.float64, copy=False)
    W = w.sum()
    mean = w @ X64 / W
    Xc = X64 - mean
    return mean, (Xc.T * w) @ Xc / W


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    print("| shape | dtype | ours | numpy float64 | ours GFLOP/s | peer / ours |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for n, d in SHAPES:
        for dtype in (np.float32, np.float64):
            rng = np.random.default_rng(0)
            X = (rng.standard_normal((n, d)) + 3.0).astype(dtype)
            w = rng.uniform(0.5, 1.5, size=n)
            with P.thread_limit(args.threads):
                t = P.interleaved(
                    {
                        "ours": lambda X=X, w=w: _native.weighted_covariance(X, w, args.threads),
                        "numpy": lambda X=X, w=w: numpy_covariance(X, w),
                    },
                    repeats=args.repeats,
                )
            ours, peer = t["ours"].median, t["numpy"].median
            rate = 2.0 * n * d * d / ours / 1e9
            print(
                f"| {n:,} x {d} | {np.dtype(dtype).name} | {ours * 1e3:.1f} ms "
                f"| {peer * 1e3:.1f} ms | {rate:.0f} | {peer / ours:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
