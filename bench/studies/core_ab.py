"""One step (`block_stats`, N and S, labels with --labels) of this build against the same
call of another build's compiled core loaded beside it in this process: per shape, dtype,
kind and SIMD level, the median wall time of interleaved bursts (each burst at least
0.25 s of back-to-back calls, after one warm-up call), new / old, and whether the two
builds' outputs are bitwise equal. The before/after figures of bench/README.md's issue-10
paragraphs of this round. Data: standard normal times 3; hard at sigma 1, softmax at
sigma^2 = lambda_max / 10.

    python bench/studies/core_ab.py OLD_CORE_SO N,D,K [N,D,K ...] [--threads T]
        [--kinds hard,softmax] [--levels avx2,avx512] [--repeats R] [--labels]

OLD_CORE_SO: a `_core*.so` built from another commit (e.g. copied from main's
python/softkmeans before building a branch).

Two more modes, on compare.py's blob data (`peers.make_blobs`, `peers.initial_centroids`):

    python bench/studies/core_ab.py OLD_CORE_SO N,D,K ... --bounded [--steps 0,1,3,6,15]
        [--threads T]
    python bench/studies/core_ab.py OLD_CORE_SO N,D,K ... --fit [--threads T]

`--bounded`: the hard step with group bounds (`_native.hard_stats_bounded`, the fit's
groups) along this build's Lloyd trajectory from that init: at each chosen step both builds
start from the same saved state (centroids, previous centroids, labels, bounds); per step
the fraction of distances computed, new / old, and whether labels, bounds, N, S and J are
bitwise equal. `--fit`: the whole `SoftKMeans(assignment="hard", init=C0, n_init=1,
max_iter=20, tol=0).fit` with each build's core behind `softkmeans._native`, interleaved.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import peers as P  # noqa: E402
from softmax_ab import load_core  # noqa: E402

import softkmeans  # noqa: E402
from softkmeans import _core as new  # noqa: E402
from softkmeans import _native  # noqa: E402
from softkmeans.fit.bounded import BoundedHardPass  # noqa: E402

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
    parser.add_argument("--bounded", action="store_true")
    parser.add_argument("--steps", default="0,1,3,6,15")
    parser.add_argument("--fit", action="store_true")
    args = parser.parse_args()
    old = load_core(args.old_core)
    if args.bounded or args.fit:
        for shape in args.shapes:
            n, d, k = (int(float(v)) for v in shape.split(","))
            for dtype in (np.dtype(t) for t in args.dtypes.split(",")):
                if args.bounded:
                    bounded_steps(old, n, d, k, dtype, args)
                else:
                    whole_fit(old, n, d, k, dtype, args)
        return
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


def with_core(core, f):
    """f() with `core` behind softkmeans._native (this build's restored after)."""
    _native._core = core
    try:
        return f()
    finally:
        _native._core = new


def bounded_step_from(core, X, w, threads, saved):
    """One bounded step with `core` from a saved state (C, C_prev, group, labels, lower):
    (seconds, its outputs, distances computed)."""
    C, C_prev, group, labels, lower = saved
    state = BoundedHardPass(X, w, threads)
    state.C_prev, state.labels[:] = C_prev, labels
    if lower is not None:
        state.group, state.lower = group, lower.copy()
    t0 = time.perf_counter()
    stats, n_distances = with_core(core, lambda: state._step(C, exact=False))
    seconds = time.perf_counter() - t0
    outputs = (state.labels, state.lower, stats.cluster_weights, stats.sums,
               np.float64(stats.distortion))  # fmt: skip
    return seconds, outputs, n_distances


def bounded_steps(old, n, d, k, dtype, args):
    X = P.make_blobs(n, d, k, dtype)
    C = P.initial_centroids(X, k)
    w = np.ones(n)
    steps = [int(v) for v in args.steps.split(",")]
    trajectory = BoundedHardPass(X, w, args.threads)
    saved = {}
    for step in range(max(steps) + 1):
        if step in steps:
            saved[step] = (
                C,
                trajectory.C_prev,
                trajectory.group,
                trajectory.labels.copy(),
                None if trajectory.lower is None else trajectory.lower.copy(),
            )
        stats = trajectory(C)
        N = stats.cluster_weights
        C = np.array(C, copy=True)
        C[N > 0] = (stats.sums[N > 0] / N[N > 0, None]).astype(dtype)
    for step in steps:
        times = [[], []]
        outputs = [None, None]
        for _ in range(args.repeats):
            for i, core in enumerate((old, new)):
                seconds, out, n_distances = bounded_step_from(core, X, w, args.threads, saved[step])
                times[i].append(seconds)
                outputs[i] = out
        t_old, t_new = (float(np.median(t)) for t in times)
        same = all(np.array_equal(a, b) for a, b in zip(*outputs, strict=True))
        print(
            f"({n}, {d}, {k}) {dtype.name} bounded step {step} ({n_distances / (n * k):.1%} of "
            f"the distances): old {t_old * 1e3:.1f} ms, new {t_new * 1e3:.1f} ms, new / old "
            f"{t_new / t_old:.3f}, {'bitwise equal' if same else 'outputs differ'}",
            flush=True,
        )


def whole_fit(old, n, d, k, dtype, args):
    X = P.make_blobs(n, d, k, dtype)
    C0 = P.initial_centroids(X, k)

    def fit(core):
        model = softkmeans.SoftKMeans(
            k, assignment="hard", init=C0, n_init=1, max_iter=20, tol=0, n_threads=args.threads
        )
        t0 = time.perf_counter()
        with_core(core, lambda: model.fit(X))
        return time.perf_counter() - t0, model

    times = [[], []]
    models = [None, None]
    for _ in range(args.repeats):
        for i, core in enumerate((old, new)):
            seconds, models[i] = fit(core)
            times[i].append(seconds)
    t_old, t_new = (float(np.median(t)) for t in times)
    same = np.array_equal(models[0].cluster_centers_, models[1].cluster_centers_) and (
        models[0].inertia_ == models[1].inertia_
    )
    print(
        f"({n}, {d}, {k}) {dtype.name} fit, {args.threads} threads: old {t_old * 1e3:.0f} ms, "
        f"new {t_new * 1e3:.0f} ms, new / old {t_new / t_old:.3f}, "
        f"{'same centroids and inertia' if same else 'centroids or inertia differ'}",
        flush=True,
    )


if __name__ == "__main__":
    main()
