"""softkmeans.dask vs dask-ml's KMeans vs the in-memory fit, on one 2-process LocalCluster.

    python bench/dask_compare.py [--n 2000000] [--d 16] [--k 64] [--chunks 8] [--repeat 3]

The same persisted float32 array (n x d, `chunks` row blocks), the same initial centroids,
k clusters, 20 iterations with tol=0 (every fit runs all 20; checked through n_iter_):

- softkmeans.dask.SoftKMeans(assignment="hard") on the Dask array;
- dask_ml.cluster.KMeans(init=<the same array>, max_iter=20, tol=0) on the Dask array
  (skipped, and said so, when dask-ml is not installed);
- softkmeans.SoftKMeans(assignment="hard") on the NumPy array in this process (all cores).

Prints the median wall time of `repeat` fits of each and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _median_time(fit, repeat):
    times, model = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        model = fit()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

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
    iters = args.iters

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
        rows = []

        def ours():
            return DaskSoftKMeans(args.k, assignment="hard", init=C0, max_iter=iters, tol=0).fit(Xd)

        t_ours, times, model = _median_time(ours, args.repeat)
        assert model.n_iter_ == iters, model.n_iter_
        rows.append(("softkmeans.dask.SoftKMeans(hard)", t_ours, times))

        if DaskMLKMeans is not None:

            def theirs():
                return DaskMLKMeans(n_clusters=args.k, init=C0, max_iter=iters, tol=0).fit(Xd)

            t_ml, times, ml = _median_time(theirs, args.repeat)
            assert ml.n_iter_ == iters, f"dask-ml ran {ml.n_iter_} iterations, not {iters}"
            rows.append(("dask_ml.cluster.KMeans", t_ml, times))
            agree = float(np.mean(model.labels_ == np.asarray(ml.labels_)))
        else:
            t_ml = agree = None

        def in_memory():
            return softkmeans.SoftKMeans(
                args.k, assignment="hard", init=C0, max_iter=iters, tol=0
            ).fit(X)

        t_mem, times, mem = _median_time(in_memory, args.repeat)
        rows.append(("softkmeans.SoftKMeans(hard), in memory", t_mem, times))

    for name, t, times in rows:
        print(f"{name:42s} {t:8.3f} s   ({', '.join(f'{x:.3f}' for x in times)})")
    same = float(np.mean(model.labels_ == mem.labels_))
    # float32: the centroids are rounded to float32 after each step, so the block order
    # of the sums can move a boundary point over 20 iterations (float64 fits agree exactly).
    print(f"dask / in-memory: {t_ours / t_mem:.2f}x the time (labels agreeing: {same:.5f})")
    if t_ml is not None:
        print(
            f"dask-ml / ours:   {t_ml / t_ours:.1f}x faster (labels agreeing with dask-ml: "
            f"{agree:.4f})"
        )


if __name__ == "__main__":
    main()
