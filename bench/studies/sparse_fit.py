"""The parts of the sparse hard fit of `compare.py --only sparse` (40000 x 3000 CSR, density
0.004, k = 20, 30 iterations; --rows topic (default) or uniform, --dtype float64 (default)
or float32), timed alone: one hard `block_stats` pass, the
covariance's lambda_max (`critical_sigma`, which a hard fit no longer computes), and the
whole fit against scikit-learn's KMeans(algorithm="lloyd") from the same init. Every
figure is a median of contenders run alternately in one process.

With --baseline DIR, the same parts of another build run beside this one: DIR holds a copy
of that build's package under the name softkmeans_baseline, e.g.

    mkdir -p /tmp/base && cp -r /work/main/python/softkmeans /tmp/base/softkmeans_baseline
    python bench/studies/sparse_fit.py --baseline /tmp/base

(with an editable install the compiled `_core*.so` lies in site-packages/softkmeans/:
copy it into the baseline folder too).

--threads 1 (the default) reports CPU time (time.process_time), which a loaded machine
disturbs least; other thread counts report wall time.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

import numpy as np

import softkmeans
from softkmeans import _native, _sparse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from compare_fits import SPARSE_GENERATORS  # noqa: E402
from peers import SETTLE_SECONDS  # noqa: E402


def medians(fns, repeats, clock, rest=0.0):
    """Median time (ms) of each named callable, run alternately `repeats` times."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, f in fns.items():
            time.sleep(rest)
            t0 = clock()
            f()
            times[name].append(clock() - t0)
    return {name: 1e3 * float(np.median(t)) for name, t in times.items()}


def line(what, m):
    names = list(m)
    text = ", ".join(f"{name} {m[name]:.2f} ms" for name in names)
    ratios = ", ".join(f"{names[0]}/{name} {m[names[0]] / m[name]:.2f}x" for name in names[1:])
    print(f"{what}: {text}; {ratios}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--baseline", help="a folder holding a package softkmeans_baseline")
    ap.add_argument("--rows", choices=sorted(SPARSE_GENERATORS), default="topic",
                    help="compare_fits.py's generator of the rows")  # fmt: skip
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    args = ap.parse_args()
    builds = {"this": (softkmeans, _native, _sparse)}
    if args.baseline:
        sys.path.insert(0, args.baseline)
        base = importlib.import_module("softkmeans_baseline")
        builds = {
            "baseline": (
                base,
                importlib.import_module("softkmeans_baseline._native"),
                importlib.import_module("softkmeans_baseline._sparse"),
            ),
            **builds,
        }
    th = args.threads
    clock = time.process_time if th == 1 else time.perf_counter
    print(f"threads {th}, {'CPU' if th == 1 else 'wall'} time, medians of {args.repeats}, "
          f"{args.rows} rows, {args.dtype}, load average {os.getloadavg()}")  # fmt: skip
    X, C = SPARSE_GENERATORS[args.rows](40_000, 3_000, 0.004, 20)
    X, C = X.astype(args.dtype), C.astype(args.dtype)
    Xc = _sparse.check_csr(X)
    w = np.ones(X.shape[0])

    def one_pass(nat):
        return lambda: nat.block_stats(Xc, C, "hard", 0.0, w, th)

    def critical_sigma(pkg):  # the covariance operator and its lambda_max
        return lambda: pkg.critical_sigma(Xc)

    natives = {b: nat for b, (_, nat, _) in builds.items()}
    packages = {b: pkg for b, (pkg, _, _) in builds.items()}
    line("pass", medians({b: one_pass(n) for b, n in natives.items()}, 8 * args.repeats, clock))
    line(
        "critical_sigma",
        medians({b: critical_sigma(p) for b, p in packages.items()}, args.repeats, clock),
    )
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    fits = {
        b: pkg.SoftKMeans(20, assignment="hard", init=C, n_init=1, max_iter=30, n_threads=th)
        for b, (pkg, _, _) in builds.items()
    }
    peer = KMeans(20, init=C, n_init=1, max_iter=30, algorithm="lloyd")
    fns = {"sklearn": lambda: peer.fit(X), **{b: (lambda m=m: m.fit(X)) for b, m in fits.items()}}
    with threadpool_limits(limits=th):
        line("whole fit", medians(fns, args.repeats, clock, rest=SETTLE_SECONDS))
    if "baseline" in fits:
        a, b = fits["baseline"], fits["this"]
        crit = abs(a.critical_sigma_ / b.critical_sigma_ - 1)
        print(
            "same fit: labels", np.array_equal(a.labels_, b.labels_),
            "centroids bitwise", a.cluster_centers_.tobytes() == b.cluster_centers_.tobytes(),
            "inertia", a.inertia_ == b.inertia_,
            f"n_iter {a.n_iter_}/{b.n_iter_}, critical_sigma_ relative difference {crit:.0e}",
        )  # fmt: skip


if __name__ == "__main__":
    main()
