"""One step (`block_stats`, N and S, labels with --labels) of this build against the same
call of another build's compiled core loaded beside it in this process: per shape, dtype,
kind and SIMD level, the median wall time of interleaved bursts (each burst at least
0.25 s of back-to-back calls, after one warm-up call), new / old, and whether the two
builds' outputs are bitwise equal. The before/after figures of bench/README.md's issue-10
paragraphs of this round. Data: standard normal times 3; hard at sigma 1, softmax at
sigma^2 = lambda_max / 10.

    python bench/core_ab.py OLD_CORE_SO N,D,K [N,D,K ...] [--threads T] [--kinds hard,softmax]
        [--levels avx2,avx512] [--repeats R] [--labels]

OLD_CORE_SO: a `_core*.so` built from another commit (e.g. copied from main's
python/softkmeans before building a branch).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_ab import load_core  # noqa: E402

from softkmeans import _core as new  # noqa: E402

BURST_SECONDS = 0.25


def burst(f):
    """Mean seconds of back-to-back calls of f over at least BURST_SECONDS."""
    t0 = time.perf_counter()
    calls = 0
    while True:
        f()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= BURST_SECONDS:
            return elapsed / calls


def same_outputs(a, b):
    return all(
        (u is None and v is None) or np.array_equal(np.asarray(u), np.asarray(v))
        for u, v in zip(a, b, strict=True)
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old_core")
    parser.add_argument("shapes", nargs="+")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--kinds", default="hard,softmax")
    parser.add_argument("--levels", default=",".join(new.available_simd_levels()[1:]))
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--labels", action="store_true")
    args = parser.parse_args()
    old = load_core(args.old_core)
    rng = np.random.default_rng(0)
    for shape in args.shapes:
        n, d, k = (int(float(v)) for v in shape.split(","))
        for dtype in (np.dtype(t) for t in args.dtypes.split(",")):
            X = (rng.standard_normal((n, d)) * 3).astype(dtype)
            C = X[rng.choice(n, k, replace=False)].copy()
            w = np.ones(n)
            lmax = np.linalg.eigvalsh(np.cov(X.T.astype(np.float64)))[-1]
            for kind in args.kinds.split(","):
                sigma = float(np.sqrt(lmax / 10)) if kind == "softmax" else 1.0
                for level in args.levels.split(","):
                    new._set_simd_level(level)
                    old._set_simd_level(level)
                    call = (X, C, kind, sigma, w, args.threads, True, args.labels, False)
                    calls = [
                        lambda call=call: old.block_stats(*call),
                        lambda call=call: new.block_stats(*call),
                    ]
                    same = same_outputs(calls[0](), calls[1]())
                    times = [[], []]
                    for _ in range(args.repeats):
                        for i, f in enumerate(calls):
                            times[i].append(burst(f))
                    t_old, t_new = (float(np.median(t)) for t in times)
                    print(
                        f"({n}, {d}, {k}) {dtype.name} {kind} {level}: old {t_old * 1e3:.2f} ms, "
                        f"new {t_new * 1e3:.2f} ms, new / old {t_new / t_old:.3f}, "
                        f"{'bitwise equal' if same else 'outputs differ'}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
