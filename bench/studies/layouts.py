"""The price of not copying a Fortran-ordered X: whole `fit` calls, interleaved in one process.

Fits the same float32 data, from the same k-means++ seeding, four ways: C-ordered (the
kernels read it in place), Fortran-ordered (read in row blocks, `softkmeans.sources.RowBlockSource`:
no whole copy), Fortran-ordered copied to C order by the caller first (what scikit-learn
does inside its fit; the copy is timed), and scikit-learn's KMeans on the Fortran-ordered X
(the named peer). Each round runs the four in turn; prints the median seconds of each and
its ratio to the Fortran-ordered row-block fit, then the peak NumPy memory of each fit
(tracemalloc) as a fraction of X.

    python bench/studies/layouts.py [--n 400000] [--d 64] [--k 16] [--max-iter 20] [--rounds 5]
        [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np
from sklearn.cluster import KMeans

from softkmeans import SoftKMeans


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--max-iter", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(args.k, args.d))
    Xc = (centres[rng.integers(0, args.k, args.n)] + rng.normal(size=(args.n, args.d))).astype(
        np.float32
    )
    XF = np.asfortranarray(Xc)
    params = dict(n_clusters=args.k, init="k-means++", random_state=0, max_iter=args.max_iter)
    ours = dict(assignment="hard", n_threads=args.threads, **params)
    runs = {
        "C order, in place": lambda: SoftKMeans(**ours).fit(Xc),
        "Fortran, row blocks": lambda: SoftKMeans(**ours).fit(XF),
        "Fortran, copied to C first": lambda: SoftKMeans(**ours).fit(np.ascontiguousarray(XF)),
        "scikit-learn KMeans, Fortran": lambda: KMeans(**params).fit(XF),
    }
    times = {name: [] for name in runs}
    inertia = {}
    for _ in range(args.rounds):
        for name, run in runs.items():
            t0 = time.perf_counter()
            model = run()
            times[name].append(time.perf_counter() - t0)
            inertia[name] = model.inertia_
    base = statistics.median(times["Fortran, row blocks"])
    size = f"X {Xc.nbytes / 2**20:.0f} MiB"
    print(f"n={args.n} d={args.d} k={args.k} max_iter={args.max_iter} float32, {size}")
    print(f"{'fit':32s} {'median s':>9s} {'/ row blocks':>13s} {'inertia':>14s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:32s} {med:9.3f} {med / base:13.2f} {inertia[name]:14.6g}")
    # Peak NumPy allocations of one more fit of each (tracemalloc sees every array buffer;
    # the native core's O(threads x tile x k) scratch is not among them).
    print(f"{'fit':32s} {'peak NumPy bytes / X.nbytes':>28s}")
    for name, run in runs.items():
        tracemalloc.start()
        run()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{name:32s} {peak / Xc.nbytes:28.1%}")


if __name__ == "__main__":
    main()
