"""Balanced K-Means: `SoftKMeans(balance="equal")` against the unconstrained fit and
against k-means-constrained (`KMeansConstrained`, min-cost flow), in one process.

Same data (blobs of very unequal sizes, so that balancing matters), same initial
centroids, same number of iterations (tol=0) for every fit. Prints the machine, the load
average and a same-run sgemm rate, then:

- the time of the unconstrained hard fit, the balanced one and the capped one
  (max_cluster_size = ceil(1.05 n / k)), interleaved medians, and the ratio to the
  unconstrained fit (issue 25 target: <= 1.5x); --auction: also the balanced fit with
  the epsilon-scaled auction instead of the shortest paths (`MAX_K_TRANSFER = 0`: the
  solver that is left for weights and k > 16);
- the balanced objective sum_i ||x_i - c_{a_i}||^2 (float64, from each fit's labels and
  centroids) and the time of one KMeansConstrained fit with size_min = size_max = n / k
  (issue 25 targets: quality within 1 %, at least 20x faster).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/balanced.py \
        [--n 100000] [--d 16] [--k 10] [--iters 10] [--repeats 3] [--kmc-n N] [--no-capped]
        [--auction]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import peers
import table

from softkmeans import SoftKMeans
from softkmeans.fit import balanced


def unequal_blobs(n, d, k, seed=0):
    """Blobs whose sizes grow as j^2 (the largest about 3 k / (k + 1) times the mean)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(k, d))
    p = np.arange(1, k + 1, dtype=float) ** 2
    X = centres[rng.choice(k, size=n, p=p / p.sum())] + rng.standard_normal((n, d))
    return X.astype(np.float32)


def labelled_cost(X, C, labels, chunk=1 << 16):
    """sum_i ||x_i - c_{labels_i}||^2 in float64."""
    C64 = np.asarray(C, dtype=np.float64)
    total = 0.0
    for s in range(0, X.shape[0], chunk):
        diff = X[s : s + chunk].astype(np.float64) - C64[labels[s : s + chunk]]
        total += float(np.einsum("ij,ij->", diff, diff))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kmc-n", type=int, default=None, help="n for KMeansConstrained")
    ap.add_argument("--no-capped", action="store_true", help="skip max_cluster_size (slow)")
    ap.add_argument("--auction", action="store_true", help="also time the auction solver")
    args = ap.parse_args()
    n, d, k = args.n, args.d, args.k
    sgemm = peers.gemm_rate(np.float32, n_threads=args.threads, size=1024)
    print(table.machine_line(sgemm, args.threads, 1024))

    X = unequal_blobs(n, d, k)
    C0 = peers.initial_centroids(X, k)
    cap = math.ceil(1.05 * n / k)
    common = dict(assignment="hard", init=C0, n_init=1, max_iter=args.iters, tol=0.0)
    common["n_threads"] = args.threads
    fits = {}

    def case(name, max_k_transfer=balanced.MAX_K_TRANSFER, **kw):
        def run():
            default, balanced.MAX_K_TRANSFER = balanced.MAX_K_TRANSFER, max_k_transfer
            try:
                fits[name] = SoftKMeans(k, **common, **kw).fit(X)
            finally:
                balanced.MAX_K_TRANSFER = default

        return run

    cases = {
        "unconstrained": case("unconstrained"),
        "balance='equal'": case("balance='equal'", balance="equal"),
    }
    if not args.no_capped:
        cases[f"max_cluster_size={cap}"] = case(f"max_cluster_size={cap}", max_cluster_size=cap)
    if args.auction:
        name = "balance='equal' (auction)"
        cases[name] = case(name, max_k_transfer=0, balance="equal")
    timings = peers.interleaved(cases, repeats=args.repeats, warmup=1)
    base = timings["unconstrained"].median
    print(f"\nn={n} d={d} k={k}, {args.iters} iterations from the same init, float32")
    print(f"{'fit':28s} {'median s':>9s} {'x plain':>8s} {'iters':>6s} {'max/mean':>9s} "
          f"{'objective':>14s}")  # fmt: skip
    for name, timing in timings.items():
        model = fits[name]
        counts = np.bincount(model.labels_, minlength=k)
        cost = labelled_cost(X, model.cluster_centers_, model.labels_)
        print(f"{name:28s} {timing.median:9.3f} {timing.median / base:8.2f} "
              f"{model.n_iter_:6d} {counts.max() / counts.mean():9.3f} {cost:14.6g}")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")

    try:
        from k_means_constrained import KMeansConstrained
    except ImportError as exc:
        print(peers.skip_message("k-means-constrained", exc))
        return
    m = args.kmc_n or n
    Xm = X[:m]
    Cm = C0 if m == n else peers.initial_centroids(Xm, k)
    size = m // k
    if size * k != m:
        raise SystemExit(f"--kmc-n must be a multiple of k={k} (equal sizes)")
    t = time.perf_counter()
    peer = KMeansConstrained(
        k, size_min=size, size_max=size, init=Cm.astype(np.float64), n_init=1,
        max_iter=args.iters, tol=0.0,
    ).fit(Xm.astype(np.float64))  # fmt: skip
    t_peer = time.perf_counter() - t
    t = time.perf_counter()
    ours = SoftKMeans(k, **{**common, "init": Cm}, balance="equal").fit(Xm)
    t_ours = time.perf_counter() - t
    cost_peer = labelled_cost(Xm, peer.cluster_centers_, peer.labels_)
    cost_ours = labelled_cost(Xm, ours.cluster_centers_, ours.labels_)
    print(f"\nagainst KMeansConstrained (min-cost flow), n={m} d={d} k={k}, "
          f"{args.iters} iterations from the same init (one fit each):")  # fmt: skip
    print(f"  KMeansConstrained {t_peer:9.2f} s  objective {cost_peer:.6g}  "
          f"iters {peer.n_iter_}")  # fmt: skip
    print(f"  softkmeans        {t_ours:9.2f} s  objective {cost_ours:.6g}  "
          f"iters {ours.n_iter_}")  # fmt: skip
    print(f"  speed-up {t_peer / t_ours:.1f}x (target >= 20x); objective ours / peer "
          f"{cost_ours / cost_peer:.5f} (target <= 1.01)")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
