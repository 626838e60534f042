"""Concurrent Python threads calling the native core: thread safety and GIL release.

This file is about several Python threads calling softkmeans at the same time. The
`n_threads` argument (OpenMP threads inside one call) is tested elsewhere: its results
are bitwise identical across thread counts in tests/test_determinism.py, and equal the
reference in tests/test_parity.py (which parametrizes over thread counts).

- Four Python threads calling every native function (with different dtypes, kinds and
  `n_threads`) at the same time give bit-for-bit the results of sequential calls
  (the core's sums are deterministic by construction, STYLE.md).
- Estimators fitted in four Python threads at once equal sequential fits, and four
  Python threads predicting with one fitted estimator get sequential results.
- The GIL is released during a native call: a pure-Python thread keeps running while one
  long native call is in flight.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import softkmeans
from conftest import assert_identical, make_blobs
from softkmeans import SoftKMeans

N_WORKERS = 4


def _calls():
    """(name, thunk) for every native function, both dtypes, every kind, 1..3 threads."""
    out = []
    rng = np.random.default_rng(1)
    api = softkmeans
    for dtype in (np.float32, np.float64):
        X, C = make_blobs(3000, 12, 9, dtype=dtype, seed=4)
        w = rng.uniform(0.1, 2.0, size=X.shape[0])
        Z = -softkmeans.reference.sq_distances(X, C)
        for nt in (1, 2, 3):
            t = f"{np.dtype(dtype).name}-t{nt}"
            out += [
                (f"sq_distances-{t}", partial(api.sq_distances, X, C, n_threads=nt)),
                (f"assign-{t}", partial(api.assign, X, C, n_threads=nt)),
                (f"margins-{t}", partial(api.margins, X, C, n_threads=nt)),
                (f"entmax15-{t}", partial(api.entmax15, Z, n_threads=nt)),
                (f"critical_sigma-{t}", partial(api.critical_sigma, X, sample_weight=w)),
            ]
            for kind in ("hard", "softmax", "entmax15"):
                kw = {"kind": kind, "n_threads": nt}
                kww = dict(kw, sample_weight=w)
                out += [
                    (f"r-{kind}-{t}", partial(api.responsibilities, X, C, 1.5, **kw)),
                    (f"objective-{kind}-{t}", partial(api.objective, X, C, 1.5, **kww)),
                    (f"step-{kind}-{t}", partial(api.centroid_step, X, C, 1.5, **kww)),
                    (f"gradients-{kind}-{t}", partial(api.gradients, X, C, 1.5, **kww)),
                ]
    return out


def test_python_threads_calling_concurrently_get_sequential_results():
    calls = _calls()
    expected = {name: f() for name, f in calls}
    rng = np.random.default_rng(0)
    # Each worker runs every call twice, in its own random order, so different functions
    # overlap in time.
    orders = [rng.permutation(2 * len(calls)) % len(calls) for _ in range(N_WORKERS)]
    start = threading.Barrier(N_WORKERS)

    def worker(order):
        start.wait()
        return [(calls[i][0], calls[i][1]()) for i in order]

    with ThreadPoolExecutor(N_WORKERS) as pool:
        results = list(pool.map(worker, orders))
    for per_worker in results:
        for name, got in per_worker:
            assert_identical(got, expected[name], name, nan_equal=True)


def test_estimators_fitted_in_concurrent_python_threads_equal_sequential_fits():
    X, _ = make_blobs(2000, 5, 6, seed=8)
    configs = [
        dict(n_clusters=6, assignment="hard", random_state=0, n_threads=2),
        dict(n_clusters=6, assignment="softmax", random_state=1, n_threads=1),
        dict(n_clusters=6, assignment="entmax15", random_state=2, n_threads=3),
        dict(n_clusters=4, assignment="softmax", sigma=0.5, random_state=3),
    ]

    def fit(cfg):
        est = SoftKMeans(**cfg, max_iter=50).fit(X)
        return est.cluster_centers_, est.labels_, est.inertia_, est.n_iter_

    expected = [fit(cfg) for cfg in configs]
    start = threading.Barrier(N_WORKERS)

    def worker(i):
        start.wait()
        return [fit(configs[(i + j) % len(configs)]) for j in range(len(configs))]

    with ThreadPoolExecutor(N_WORKERS) as pool:
        results = list(pool.map(worker, range(N_WORKERS)))
    for i, per_worker in enumerate(results):
        for j, got in enumerate(per_worker):
            c = (i + j) % len(configs)
            assert_identical(got, expected[c], f"fit {configs[c]}", nan_equal=True)


def test_python_threads_predicting_with_one_shared_estimator_get_sequential_results():
    X, _ = make_blobs(5000, 6, 7, seed=9)
    est = SoftKMeans(n_clusters=7, assignment="entmax15", random_state=0, max_iter=20).fit(X)
    methods = [est.predict, est.predict_proba, est.transform, est.score]
    expected = [m(X) for m in methods]
    start = threading.Barrier(N_WORKERS)

    def worker(i):
        start.wait()
        return [methods[(i + j) % len(methods)](X) for j in range(3 * len(methods))]

    with ThreadPoolExecutor(N_WORKERS) as pool:
        results = list(pool.map(worker, range(N_WORKERS)))
    for i, per_worker in enumerate(results):
        for j, got in enumerate(per_worker):
            m = (i + j) % len(methods)
            assert_identical(got, expected[m], methods[m].__name__, nan_equal=True)


# ---------------------------------------------------------------------------------------
# GIL release
# ---------------------------------------------------------------------------------------


def _tiled(rows, cols, n, seed):
    """An (n, cols) array made of copies of a random (rows, cols) block: cheap to build."""
    block = np.random.default_rng(seed).normal(size=(rows, cols))
    return np.ascontiguousarray(np.tile(block, (-(-n // rows), 1))[:n])


def _long_call(name, n):
    """A call of `name` whose native part dominates: O(n k d) work against O(n d)
    validation (d = k = 256), one OpenMP thread."""
    d = k = 256
    if name == "entmax15":
        Z = _tiled(512, 1024, n, 0) * 0.05  # every entry a candidate: full sorts
        return lambda: softkmeans.entmax15(Z, n_threads=1)
    X = _tiled(512, d, n, 1)
    C = _tiled(k, d, k, 2)
    if name in ("sq_distances", "assign", "margins"):
        f = getattr(softkmeans, name)
        return lambda: f(X, C, n_threads=1)
    if name == "critical_sigma":
        return lambda: softkmeans.critical_sigma(X)
    f = getattr(softkmeans, name)
    return lambda: f(X, C, 20.0, kind="entmax15", n_threads=1)


def _calibrated(name, target=0.2, n_max=1 << 17):
    """A call of `name` that takes at least `target` seconds (or the largest n allowed)."""
    n = 4096
    while True:
        call = _long_call(name, n)
        t0 = time.perf_counter()
        call()
        elapsed = time.perf_counter() - t0
        if elapsed >= target or n >= n_max:
            return call, elapsed
        n = min(n_max, int(n * min(16.0, max(2.0, 1.5 * target / max(elapsed, 1e-3)))))


def _longest_pause(call):
    """Run `call` while a pure-Python thread ticks; return (longest tick pause, duration)."""
    ticks = []
    stop = threading.Event()

    def counter():
        i = 0
        while not stop.is_set():
            i += 1
            if i % 200 == 0:
                ticks.append(time.perf_counter())

    th = threading.Thread(target=counter, daemon=True)
    th.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    th.join()
    inside = np.array([t0] + [t for t in ticks if t0 <= t <= t1] + [t1])
    return float(np.diff(inside).max()), t1 - t0


@pytest.mark.parametrize("name", softkmeans.native_functions())
def test_gil_released_to_other_python_threads_during_native_call(name):
    """A pure-Python counter thread keeps ticking while one long native call runs.

    The counter records a timestamp every few hundred increments. If the call held the
    GIL, the counter would stop for the whole native part of the call: the longest pause
    between ticks would be about the call's duration. We require the longest pause to be
    well under half of it. The call runs on one OpenMP thread (leaving a core to the
    counter), and a busy machine gets three tries: a held GIL fails every one of them.
    BLAS is limited to one thread as well: critical_sigma's np.linalg.eigvalsh of the
    256 x 256 covariance takes ~3 ms on one OpenBLAS thread but over 1 s with two on a
    loaded 2-core machine, and numpy's linalg holds the GIL for much of that.
    """
    with threadpool_limits(limits=1):
        call, duration = _calibrated(name)
        if duration < 0.1:
            pytest.skip(f"{name} too fast to measure at the largest size ({duration:.3f} s)")
        attempts = [_longest_pause(call) for _ in range(1)]
        while attempts[-1][0] >= 0.5 * attempts[-1][1] and len(attempts) < 3:
            attempts.append(_longest_pause(call))
    pause, total = attempts[-1]
    assert pause < 0.5 * total, (
        f"{name}: the Python thread paused {pause:.3f} s of a {total:.3f} s call "
        f"({len(attempts)} tries); the native call seems to hold the GIL"
    )
