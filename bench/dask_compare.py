"""softkmeans.dask vs dask-ml's KMeans vs the in-memory fit, on one 2-process LocalCluster.

    python bench/dask_compare.py [--n 2000000] [--d 16] [--k 64] [--chunks 8] [--repeat 3]
                                 [--tasks] [--no-dask-ml] [--quiet]

The same persisted float32 array (n x d, `chunks` row blocks), the same initial centroids,
k clusters, 20 iterations with tol=0 (every fit runs all 20; checked through n_iter_):

- softkmeans.dask.SoftKMeans(assignment="hard") on the Dask array;
- with --tasks, the same with every pass run as one task per block (the way before
  `softkmeans.sources.dask_resident`: its cost, at the same load);
- dask_ml.cluster.KMeans(init=<the same array>, max_iter=20, tol=0) on the Dask array
  (skipped, and said so, when dask-ml is not installed or with --no-dask-ml);
- softkmeans.SoftKMeans(assignment="hard") on the NumPy array in this process (all cores).

The fits are interleaved (`repeat` rounds of each in turn), so that a load that changes
over the minutes of the run weighs on all alike. Prints the machine line, the median wall
time of each fit, and the targets as measured / needed: the Dask fit at most 1.5x the
in-memory fit, dask-ml at least 8x the Dask fit (ratios of the medians; the medians of
the per-round ratios beside them). --quiet prints the machine line, the medians and the
targets only (no warnings or cluster logs), for a rerun on a quiet machine:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/dask_compare.py --quiet
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import numpy as np

OURS, TASKS, DASK_ML, IN_MEMORY = "ours", "ours, tasks", "dask-ml", "in memory"
NAMES = {
    OURS: "softkmeans.dask.SoftKMeans(hard)",
    TASKS: "softkmeans.dask.SoftKMeans(hard), tasks",
    DASK_ML: "dask_ml.cluster.KMeans",
    IN_MEMORY: "softkmeans.SoftKMeans(hard), in memory",
}
# The targets (issue 34): (numerator, denominator, "<=" or ">=", needed).
TARGETS = [(OURS, IN_MEMORY, "<=", 1.5), (DASK_ML, OURS, ">=", 8.0)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", action="store_true", help="also the Dask fit as tasks")
    parser.add_argument("--no-dask-ml", action="store_true", help="leave dask-ml out")
    parser.add_argument("--quiet", action="store_true", help="the machine line and targets")
    args = parser.parse_args(argv)
    if args.quiet:
        warnings.simplefilter("ignore")
        logging.getLogger("distributed").setLevel(logging.ERROR)
    print(_machine_line())
    run(n=args.n, d=args.d, k=args.k, chunks=args.chunks, iters=args.iters,
        repeat=args.repeat, tasks=args.tasks, dask_ml=not args.no_dask_ml,
        quiet=args.quiet)  # fmt: skip


def run(*, n, d, k, chunks, iters, repeat, tasks=False, dask_ml=True, quiet=False):
    """Runs the interleaved fits, prints the times and the targets;
    returns the median seconds by contender: "ours" (the Dask fit), "ours, tasks" (with
    tasks), "dask-ml" (when run), "in memory"."""
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    say = (lambda *a: None) if quiet else print
    X, C0 = _problem(n, d, k)
    fits = _fits(k, C0, iters, tasks, dask_ml, say)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)  # fmt: skip
    with cluster, Client(cluster) as client, warnings.catch_warnings():
        # The benchmark's own X travels in its graph (recomputable, as the fit wants).
        warnings.filterwarnings("ignore", message="Sending large graph")
        Xd = da.from_array(X, chunks=(-(-n // chunks), -1)).persist()
        wait(Xd)
        client.run(lambda: __import__("softkmeans.dask"))
        say(f"n={n} d={d} k={k} float32, {Xd.numblocks[0]} persisted blocks, 2 worker "
            f"processes x 1 thread, {iters} iterations tol=0, median of {repeat}")  # fmt: skip
        load_before = _load()
        times, models = _interleaved(fits, {"dask": Xd, "numpy": X}, iters, repeat)
        say(f"load average before: {load_before}, after: {_load()}")
        if DASK_ML in models:  # dask-ml's labels are lazy: compute them here
            models[DASK_ML].labels_ = np.asarray(models[DASK_ML].labels_)
    for key, ts in times.items():
        say(f"{NAMES[key]:42s} {statistics.median(ts):8.3f} s   "
            f"({', '.join(f'{x:.3f}' for x in ts)})")  # fmt: skip
    # float32: the centroids are rounded to float32 after each step, so the block order
    # of the sums can move a boundary point over 20 iterations (float64 fits agree exactly).
    for key in (IN_MEMORY, DASK_ML):
        if key in models:
            same = float(np.mean(models[OURS].labels_ == models[key].labels_))
            say(f"labels agreeing with {NAMES[key]}: {same:.5f}")
    if quiet:
        print(f"medians ({repeat} rounds, load average {load_before} before, {_load()} after): "
              + ", ".join(f"{key} {statistics.median(ts):.3f} s" for key, ts in times.items()))
    for line in _target_lines(times):
        print(line)
    return {key: statistics.median(ts) for key, ts in times.items()}


def _problem(n, d, k):
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(k, d))
    X = (centres[rng.integers(0, k, n)] + rng.normal(size=(n, d))).astype(np.float32)
    return X, X[rng.choice(n, k, replace=False)].copy()


def _fits(k, C0, iters, tasks, dask_ml, say):
    """{contender: (the input it takes, fit(X) -> fitted model)}, in the order run."""
    import softkmeans
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans
    from softkmeans.sources import dask_passes

    def ours(X):
        return DaskSoftKMeans(k, assignment="hard", init=C0, max_iter=iters, tol=0).fit(X)

    def as_tasks(X):
        dask_passes.RESIDENT = False
        try:
            return ours(X)
        finally:
            dask_passes.RESIDENT = True

    fits = {OURS: ("dask", ours)}
    if tasks:
        fits[TASKS] = ("dask", as_tasks)
    if dask_ml:
        try:
            from dask_ml.cluster import KMeans as DaskMLKMeans
        except ImportError as exc:
            say(f"dask-ml not available ({exc}): comparing with the in-memory fit only")
        else:
            fits[DASK_ML] = (
                "dask",
                lambda X: DaskMLKMeans(n_clusters=k, init=C0, max_iter=iters, tol=0).fit(X),
            )
    fits[IN_MEMORY] = (
        "numpy",
        lambda X: softkmeans.SoftKMeans(k, assignment="hard", init=C0, max_iter=iters, tol=0)
        .fit(X),
    )  # fmt: skip
    return fits


def _interleaved(fits, inputs, iters, repeat):
    """({contender: [seconds per round]}, {contender: the last fitted model})."""
    times = {key: [] for key in fits}
    models = {}
    for _ in range(repeat):
        for key, (kind, fit) in fits.items():
            t0 = time.perf_counter()
            model = fit(inputs[kind])
            times[key].append(time.perf_counter() - t0)
            assert model.n_iter_ == iters, f"{NAMES[key]} ran {model.n_iter_} iterations"
            models[key] = model
    return times, models


def _target_lines(times):
    """The targets as measured / needed (ratios of the medians; per-round medians)."""
    lines = []
    med = {key: statistics.median(ts) for key, ts in times.items()}
    pairs = TARGETS + ([(TASKS, IN_MEMORY, "<=", 1.5)] if TASKS in times else [])
    for top, bottom, sense, needed in pairs:
        if top not in times or bottom not in times:
            continue
        ratio = med[top] / med[bottom]
        per_round = statistics.median(a / b for a, b in zip(times[top], times[bottom]))
        ok = ratio <= needed if sense == "<=" else ratio >= needed
        lines.append(
            f"{NAMES[top]} / {NAMES[bottom]}: {ratio:.2f}x measured / {sense} {needed:g}x "
            f"needed: {'ok' if ok else 'MISS'} (median of per-round ratios {per_round:.2f}x)"
        )
    return lines


def _machine_line():
    from peers import gemm_rate
    from table import machine_line

    return machine_line(gemm_rate(np.float32), 2, 2048)


def _load():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


if __name__ == "__main__":
    main()
