"""softkmeans.dask vs dask-ml's KMeans vs the in-memory fit, on one 2-process LocalCluster.

    python bench/dask_compare.py [--n 2000000] [--d 16] [--k 64] [--chunks 8] [--repeat 3]

The same persisted float32 array (n x d, `chunks` row blocks), the same initial centroids,
k clusters, 20 iterations with tol=0 (every fit runs all 20; checked through n_iter_):

- softkmeans.dask.SoftKMeans(assignment="hard") on the Dask array;
- dask_ml.cluster.KMeans(init=<the same array>, max_iter=20, tol=0) on the Dask array
  (skipped, and said so, when dask-ml is not installed);
- softkmeans.SoftKMeans(assignment="hard") on the NumPy array in this process (all cores).

The fits are interleaved (ours, dask-ml's, in memory; `repeat` rounds), so that a load
that changes over the minutes of the run weighs on all three alike. Prints the median wall
time of each, the ratios of the medians and the median of the per-round ratios, and the
load average before and after (the machine this runs on may be shared).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _timed(fit):
    t0 = time.perf_counter()
    model = fit()
    return time.perf_counter() - t0, model


def _load():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    run(n=args.n, d=args.d, k=args.k, chunks=args.chunks, iters=args.iters, repeat=args.repeat)


def run(*, n, d, k, chunks, iters, repeat):
    """Runs the interleaved fits, prints the table, returns the median seconds by contender:
    "ours" (the Dask fit), "dask-ml" (when installed), "in memory"."""
    args = argparse.Namespace(n=n, d=d, k=k, chunks=chunks, iters=iters, repeat=repeat)
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import softkmeans
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    try:
        from dask_ml.cluster import KMeans as DaskMLKMeans
    except ImportError as exc:
        DaskMLKMeans = None
        print(f"dask-ml not available ({exc}): comparing with the in-memory fit only")

    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(args.k, args.d))
    X = (centres[rng.integers(0, args.k, args.n)] + rng.normal(size=(args.n, args.d))).astype(
        np.float32
    )
    C0 = X[rng.choice(args.n, args.k, replace=False)].copy()

    models = {}
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, Client(cluster) as client:
        Xd = da.from_array(X, chunks=(-(-args.n // args.chunks), -1)).persist()
        wait(Xd)
        client.run(lambda: __import__("softkmeans.dask"))
        print(
            f"n={args.n} d={args.d} k={args.k} float32, {Xd.numblocks[0]} persisted blocks, "
            f"2 worker processes x 1 thread, {iters} iterations tol=0, median of {args.repeat}"
        )

        def ours():
            return DaskSoftKMeans(args.k, assignment="hard", init=C0, max_iter=iters, tol=0).fit(Xd)

        def theirs():
            return DaskMLKMeans(n_clusters=args.k, init=C0, max_iter=iters, tol=0).fit(Xd)

        def in_memory():
            return softkmeans.SoftKMeans(
                args.k, assignment="hard", init=C0, max_iter=iters, tol=0
            ).fit(X)

        fits = {"softkmeans.dask.SoftKMeans(hard)": ours}
        if DaskMLKMeans is not None:
            fits["dask_ml.cluster.KMeans"] = theirs
        fits["softkmeans.SoftKMeans(hard), in memory"] = in_memory
        times = {name: [] for name in fits}
        load_before = _load()
        for _ in range(args.repeat):
            for name, fit in fits.items():
                t, fitted = _timed(fit)
                assert fitted.n_iter_ == iters, f"{name} ran {fitted.n_iter_} iterations"
                times[name].append(t)
                models[name] = fitted
        print(f"load average before: {load_before}, after: {_load()}")
        if DaskMLKMeans is not None:  # dask-ml's labels are lazy: compute them here
            ml_labels = np.asarray(models["dask_ml.cluster.KMeans"].labels_)

    for name, ts in times.items():
        print(f"{name:42s} {statistics.median(ts):8.3f} s   ({', '.join(f'{x:.3f}' for x in ts)})")
    names = list(fits)
    ours_t, mem_t = times[names[0]], times[names[-1]]
    model, mem = models[names[0]], models[names[-1]]
    same = float(np.mean(model.labels_ == mem.labels_))
    # float32: the centroids are rounded to float32 after each step, so the block order
    # of the sums can move a boundary point over 20 iterations (float64 fits agree exactly).
    print(
        f"dask / in-memory: {statistics.median(ours_t) / statistics.median(mem_t):.2f}x the "
        f"time (median of per-round ratios {_median_ratio(ours_t, mem_t):.2f}x; labels "
        f"agreeing: {same:.5f})"
    )
    if DaskMLKMeans is not None:
        ml_t = times[names[1]]
        agree = float(np.mean(model.labels_ == ml_labels))
        print(
            f"dask-ml / ours:   {statistics.median(ml_t) / statistics.median(ours_t):.1f}x faster "
            f"(median of per-round ratios {_median_ratio(ml_t, ours_t):.1f}x; labels agreeing "
            f"with dask-ml: {agree:.4f})"
        )

    keys = ["ours"] + (["dask-ml"] if DaskMLKMeans is not None else []) + ["in memory"]
    return {key: statistics.median(times[name]) for key, name in zip(keys, names)}


def _median_ratio(a, b):
    return statistics.median(x / y for x, y in zip(a, b))


if __name__ == "__main__":
    main()
