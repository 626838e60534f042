"""Issue 24, items 1 and 2, at the kernel level: the distances the bounded hard step
computes per Lloyd step at large k, the group-pruned exact assignment against the plain
assignment pass and faiss's exact search, and a sampled fit's final pass (labels, J and
the minimum margin) pruned against the plain pass, in one process on the same rows.

    python bench/ivf_kernels.py                  # k = 1024 / 4096 fractions, 2e5 x 128 speed
    python bench/ivf_kernels.py --quick          # n / 10
    python bench/ivf_kernels.py --real 1000000 --only-real   # issue 35's predict target

`--real N` (default 1e6; --quick 1e5; 0: skip): issue 35's target row on N of
`bench/ivf.py`'s descriptors (nothing downloaded) and k = 4096 centroids a sampled fit
trained on them (64 rows a centroid, 10 iterations, random init): `predict`'s pass
(`NearestCentroid`, grouping and probes included: the projection-pruned pass on these
rows) against faiss `IndexFlatL2.search(X, 1)` (exact, the same threads), target 5x, and
the sampled fit's final pass over every row (`reads.nearest_stats`) against the plain one;
then the ceiling of the projected pass: faiss against the plain pass over the augmented
coordinates alone (its first step, which every row and centroid takes).

The fractions are printed from both starts: k random rows (faiss's) and greedy k-means++
(the estimator's default, whose seeding takes about 30 s at k = 4096 on 2e5 rows).

`bench/ivf.py` (the whole-fit targets) imports `distance_fraction`, `assignment_speedup`
and `clustered` from here; keep their names and arguments.

The clustered data (`clustered`): 64 well separated "super" centres (normal, scale 1),
k / 64 centres about each (scale 0.5), rows about the centres (scale 0.2), in d dimensions:
clusters within clusters, as descriptors of real images have. The centroids assigned to are
the centres moved by noise of the rows' scale (as a fit's centroids are). On data without
such structure (independent uniform centres in 128 dimensions) no ball of centroids is far
from any row, and the pruned pass computes nearly everything: `--uniform` prints that too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers as P  # noqa: E402
import table  # noqa: E402

from softkmeans import _native  # noqa: E402
from softkmeans.centroid_groups import principal_axis_groups  # noqa: E402
from softkmeans.fit.bounded import BoundedHardPass  # noqa: E402
from softkmeans.fit.seeding import kmeans_plusplus  # noqa: E402
from softkmeans.sources import reads  # noqa: E402
from softkmeans.sources.nearest import NearestCentroid  # noqa: E402


def clustered(n, d, k, *, dtype=np.float32, seed=0, uniform=False):
    """(X (n, d), C (k, d)): rows about k centres in 64 super-clusters (module docstring),
    C the centres plus noise of the rows' scale; uniform: independent uniform centres."""
    rng = np.random.default_rng(seed)
    if uniform:
        centres = rng.random((k, d))
        noise = 0.02
    else:
        supers = rng.normal(scale=1.0, size=(64, d))
        centres = supers[np.arange(k) % 64] + rng.normal(scale=0.5, size=(k, d))
        noise = 0.2
    X = centres[rng.integers(k, size=n)] + rng.normal(scale=noise, size=(n, d))
    C = centres + rng.normal(scale=noise, size=(k, d))
    return X.astype(dtype), C.astype(dtype)


def distance_fraction(n, d, k, *, steps=8, n_threads=2, seed=0, groups=None, X=None, init="random"):
    """Lloyd steps of the bounded hard step on `clustered` data (or the rows X) from k
    distinct rows drawn at random (init "random": faiss's and a random init's start) or
    chosen by greedy k-means++ (init "k-means++": `SoftKMeans`'s default); seeded. Per
    step, the fraction of the n k row-centroid distances computed (and, separately, the
    k^2 of Hamerly's separations, which the step computes when n >= 16 k). groups: the
    number of groups (default: the fit's policy, `BoundedHardPass.centroid_groups`)."""
    if X is None:
        X, _ = clustered(n, d, k, seed=seed)
    if init == "k-means++":
        C = kmeans_plusplus(X, k, random_state=seed + 1)[0].astype(X.dtype)
    elif init == "random":
        C = X[np.random.default_rng(seed + 1).choice(n, size=k, replace=False)]
    else:
        raise ValueError(f"init must be 'random' or 'k-means++', got {init!r}")
    w = np.ones(n)
    if groups is None:
        group = BoundedHardPass.centroid_groups(C)
    else:
        group = principal_axis_groups(C, groups)
    t = int(group.max()) + 1
    labels, lower = np.zeros(n, np.int64), np.zeros((n, t))
    C_prev, out, seconds = None, [], []
    t0 = time.perf_counter()
    for _ in range(steps):
        t_step = time.perf_counter()
        stats, _, n_distances = _native.hard_stats_bounded(
            X, C, C_prev, w, labels, lower, group, n_threads
        )
        seconds.append(time.perf_counter() - t_step)
        separations = k * k if C_prev is not None and n >= 16 * k else 0
        out.append((n_distances / (n * k), separations / (n * k)))
        N = stats.cluster_weights
        C_next = C.copy()
        C_next[N > 0] = (stats.sums[N > 0] / N[N > 0, None]).astype(C.dtype)
        C_prev, C = C, C_next
    print(
        f"distance_fraction n={n} d={d} k={k} groups={t} init={init}"
        f" ({time.perf_counter() - t0:.2f} s):"
        " per step (row-centroid [+ separations]) "
        + ", ".join(f"{a:.4f}" + (f"+{b:.4f}" if b else "") for a, b in out)
        + "; seconds per step "
        + ", ".join(f"{s:.3f}" for s in seconds),
        flush=True,
    )
    return out


def _add_faiss(cases, X, C, n_threads):
    """cases["faiss"]: faiss's exact flat search (IndexFlatL2, k=1) of X over C, at
    n_threads; the skip reason printed where faiss is not there."""
    try:
        P.require("faiss")
        import faiss
    except P.PeerUnavailable as e:
        print(P.skip_message("faiss", e))
        return
    index = faiss.IndexFlatL2(X.shape[1])
    index.add(C)

    def faiss_search():
        with P.thread_limit(n_threads):
            return index.search(X, 1)

    cases["faiss"] = faiss_search


def assignment_speedup(n, d, k, *, n_threads=2, repeats=5, seed=0, uniform=False):
    """The group-pruned assignment (`NearestCentroid`, the grouping included) vs the plain
    `assign` pass and faiss `IndexFlatL2.search(X, 1)` on the same rows: median seconds of
    interleaved repeats, the ratio plain / pruned, and the labels checked equal."""
    X, C = clustered(n, d, k, seed=seed, uniform=uniform)
    group = NearestCentroid(C, n_threads).group  # the balls (this data keeps them)
    assert group is not None, "below NearestCentroid.MIN_CENTROIDS"
    labels, dist = NearestCentroid(C, n_threads)(X)
    ref_labels, ref_dist = _native.assign(X, C, n_threads)
    same = np.array_equal(labels, ref_labels) and np.array_equal(dist, ref_dist)
    # The kernel alone on every row (the policy may stop pruning after a probe).
    _, _, n_distances = _native.assign_grouped(X, C, group, n_threads)
    cases = {
        "plain": lambda: _native.assign(X, C, n_threads),
        "pruned": lambda: NearestCentroid(C, n_threads)(X),
        "kernel": lambda: _native.assign_grouped(X, C, group, n_threads),
    }
    _add_faiss(cases, X, C, n_threads)
    t0 = time.perf_counter()
    NearestCentroid(C, n_threads)
    grouping = time.perf_counter() - t0
    res = P.interleaved(cases, repeats=repeats)
    med = {name: r.median for name, r in res.items()}
    kind = "uniform" if uniform else "clustered"
    line = (
        f"assignment_speedup {kind} n={n} d={d} k={k} threads={n_threads}: plain "
        f"{med['plain']:.3f} s, pruned {med['pruned']:.3f} s (grouping {grouping:.3f} s; "
        f"the kernel alone {med['kernel']:.3f} s, {n_distances / (n * k):.4f} of the "
        "distances)"
    )
    if "faiss" in med:
        line += f", faiss IndexFlatL2 {med['faiss']:.3f} s"
    line += f"; plain / pruned {med['plain'] / med['pruned']:.2f}x (target >= 5x)"
    if "faiss" in med:
        line += f", faiss / pruned {med['faiss'] / med['pruned']:.2f}x"
    line += f"; labels and minima equal: {same}"
    print(line, flush=True)
    return med, same


def dask_assignment_speedup(n, d, k, *, blocks=4, n_threads=2, repeats=3, seed=0):
    """`softkmeans.dask`'s predict pass (`DaskSource.labels`: the centroids grouped on the
    client, each block pruned) against the same pass with the plain assignment, on the
    synchronous scheduler (the blocks one after another, n_threads each): median seconds
    of interleaved repeats, the labels checked equal."""
    import dask
    import dask.array as da

    from softkmeans.sources.dask_source import DaskSource

    X, C = clustered(n, d, k, seed=seed)
    source = DaskSource(da.from_array(X, chunks=(-(-n // blocks), d)), n_threads=n_threads)
    labels = {}

    def labelled(name, min_centroids):
        def run():
            saved = NearestCentroid.MIN_CENTROIDS
            NearestCentroid.MIN_CENTROIDS = min_centroids
            try:
                with dask.config.set(scheduler="synchronous"):
                    labels[name] = reads.labels(source, C).compute()
            finally:
                NearestCentroid.MIN_CENTROIDS = saved

        return run

    cases = {"plain": labelled("plain", k + 1), "pruned": labelled("pruned", k)}
    med = {name: r.median for name, r in P.interleaved(cases, repeats=repeats).items()}
    print(
        f"dask_assignment_speedup clustered n={n} d={d} k={k} blocks={blocks} "
        f"threads={n_threads}: plain {med['plain']:.3f} s, pruned {med['pruned']:.3f} s "
        f"(grouping included); plain / pruned {med['plain'] / med['pruned']:.2f}x; labels "
        f"equal: {np.array_equal(labels['plain'], labels['pruned'])}",
        flush=True,
    )
    return med


def final_pass_speedup(n, d, k, *, n_threads=2, repeats=5, seed=0, uniform=False):
    """A sampled hard fit's final pass over every row (`Source.nearest_stats`: labels, J
    and the minimum margin, the grouping included) vs the plain pass it replaces
    (`_native.block_stats`, kind hard, without N and S) on the same rows: median seconds
    of interleaved repeats, the ratio plain / pruned, and the results checked equal."""
    from softkmeans.sources import source_of

    X, C = clustered(n, d, k, seed=seed, uniform=uniform)
    w = np.ones(n)
    source = source_of(X, n_threads=n_threads)
    stats, labels = reads.nearest_stats(source, C)
    plain, plain_labels, _ = _native.block_stats(X, C, "hard", 0.0, w, n_threads, labels=True)
    same = (
        np.array_equal(labels, plain_labels)
        and stats.min_margin == plain.min_margin
        and abs(stats.distortion - plain.distortion) <= 1e-12 * plain.distortion
    )
    cases = {
        "plain": lambda: _native.block_stats(
            X, C, "hard", 0.0, w, n_threads, sums=False, labels=True
        ),
        "pruned": lambda: reads.nearest_stats(source, C),
    }
    med = {name: r.median for name, r in P.interleaved(cases, repeats=repeats).items()}
    kind = "uniform" if uniform else "clustered"
    print(
        f"final_pass_speedup {kind} n={n} d={d} k={k} threads={n_threads}: plain "
        f"{med['plain']:.3f} s, pruned {med['pruned']:.3f} s; plain / pruned "
        f"{med['plain'] / med['pruned']:.2f}x; labels, min margin equal and J within 1e-12: "
        f"{same}",
        flush=True,
    )
    return med, same


def augmented_coordinates(X, C, projection):
    """(A (n, p + 1), CA (k, p + 1)) float32: the projected pass's augmented coordinates
    (cpp/src/impl/projected.hpp: Q^T (v - mu) and the residual's norm) of the rows and the
    centroids; None projection: (X, C)."""
    if projection is None:
        return X, C
    Q, mu = projection

    def of(V):
        parts = []
        for s in range(0, V.shape[0], 1 << 16):
            Y = V[s : s + (1 << 16)].astype(np.float64) - mu
            Z = Y @ Q
            r = np.sqrt(np.maximum((Y * Y).sum(axis=1) - (Z * Z).sum(axis=1), 0.0))
            parts.append(np.hstack([Z, r[:, None]]).astype(np.float32))
        return np.ascontiguousarray(np.vstack(parts))

    return of(X), of(C)


def real_descriptors(n, k=4096, *, n_threads=2, repeats=3):
    """Issue 35's row (module docstring): prints the target as measured / needed."""
    from ivf import Descriptors

    from softkmeans import SoftKMeans
    from softkmeans.sources import source_of

    t0 = time.perf_counter()
    X = Descriptors().rows(n)
    C = SoftKMeans(
        k, assignment="hard", init="random", max_iter=10, tol=0.0, random_state=0,
        max_points_per_centroid=64, n_threads=n_threads,
    ).fit(X).cluster_centers_.astype(np.float32)  # fmt: skip
    print(f"# {n} descriptors and k = {k} centroids in {time.perf_counter() - t0:.0f} s")
    nearest = NearestCentroid(C, n_threads)
    labels, dist = nearest(X)
    same = all(map(np.array_equal, (labels, dist), _native.assign(X, C, n_threads)))
    w, source = np.ones(n), source_of(X, n_threads=n_threads)
    stats, final_labels = reads.nearest_stats(source, C)
    plain_stats, plain_labels, _ = _native.block_stats(
        X, C, "hard", 0.0, w, n_threads, sums=False, labels=True
    )
    same_final = np.array_equal(final_labels, plain_labels) and (
        stats.min_margin == plain_stats.min_margin
    )
    made = nearest.pruning
    A, CA = augmented_coordinates(X, C, None if made is None else made.projection)
    cases = {
        "predict": lambda: NearestCentroid(C, n_threads)(X),
        "augmented plain": lambda: _native.assign(A, CA, n_threads),
        "plain": lambda: _native.assign(X, C, n_threads),
        "final": lambda: reads.nearest_stats(source, C),
        "final plain": lambda: _native.block_stats(
            X, C, "hard", 0.0, w, n_threads, sums=False, labels=True
        ),
    }
    _add_faiss(cases, X, C, n_threads)
    med = {name: r.median for name, r in P.interleaved(cases, repeats=repeats, warmup=0).items()}
    shape = f"n={n} d={X.shape[1]} k={k} threads={n_threads}, load {table.load_average()}"
    print(
        f"real descriptors ({shape}): predict {med['predict']:.2f} s (passes "
        f"{nearest.passes or ['plain']}), plain {med['plain']:.2f} s; final pass "
        f"{med['final']:.2f} s, plain {med['final plain']:.2f} s; labels and minima equal: "
        f"{same}, final labels and min margin equal: {same_final}"
    )
    if "faiss" in med:
        for name in ("predict", "final"):
            ratio = med["faiss"] / med[name]
            met = "yes" if ratio >= 5 else "NO"
            print(
                f"| {name} vs faiss IndexFlatL2 k=1 ({shape}) | {ratio:.2f}x "
                f"({med['faiss']:.2f} s / {med[name]:.2f} s) | 5x | {met} |",
                flush=True,
            )
        tiles = _native.amx_available() and _native.kernel_choices()["amx"]["value"] == "on"
        print(
            f"ceiling: faiss / the plain pass over the {A.shape[1]} augmented coordinates "
            f"alone (the projected pass's step 1 in float32, {med['augmented plain']:.2f} s): "
            f"{med['faiss'] / med['augmented plain']:.2f}x; 5x leaves "
            f"{med['faiss'] / 5 - med['augmented plain']:.2f} s for the rest; step 1 "
            f"{'on AMX tiles (split bf16) here' if tiles else 'in float32 here'}", flush=True,
        )  # fmt: skip
    return med


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--uniform", action="store_true", help="also the uniform-centre data")
    p.add_argument("--descriptors", type=int, default=0, metavar="N",
                   help="also the distances per step on N of bench/ivf.py's descriptors at "
                   "k = 4096, 10 steps (1000000: its lloyd row)")  # fmt: skip
    p.add_argument(
        "--real",
        type=int,
        default=None,
        metavar="N",
        help="issue 35's predict row on N descriptors (default 1e6, --quick 1e5)",
    )
    p.add_argument("--only-real", action="store_true", help="only the --real row")  # fmt: skip
    args = p.parse_args(argv)
    scale = 10 if args.quick else 1
    sgemm = P.gemm_rate(np.float32, n_threads=args.threads)
    print(table.machine_line(sgemm, args.threads, 2048))
    real = args.real if args.real is not None else 1_000_000 // scale
    if real:
        real_descriptors(real, n_threads=args.threads, repeats=args.repeats)
    if args.only_real:
        print(f"# load average after the run: {table.load_average()}")
        return
    for k in (1024, 4096):
        for init in ("random", "k-means++"):
            distance_fraction(
                max(20 * k, 200_000) // scale, 128, k, n_threads=args.threads, init=init
            )
    assignment_speedup(200_000 // scale, 128, 4096, n_threads=args.threads, repeats=args.repeats)
    final_pass_speedup(200_000 // scale, 128, 4096, n_threads=args.threads, repeats=args.repeats)
    if args.uniform:
        assignment_speedup(
            200_000 // scale, 128, 4096, n_threads=args.threads, repeats=args.repeats, uniform=True
        )
    if args.descriptors:
        from ivf import Descriptors

        X = Descriptors().rows(args.descriptors)
        distance_fraction(X.shape[0], X.shape[1], 4096, steps=10, n_threads=args.threads, X=X)
    print(f"# load average after the run: {table.load_average()}")


if __name__ == "__main__":
    main()
