"""How much distance bounds could spare the balanced fit's passes (issue 35, item 1): along
the balanced hard fit's trajectory on bench/balanced.py's unequal blobs, each solve's
rows and distances that the tightest bounds carried from the solve before would leave
unread, with the offsets known in advance (an oracle: no solver could do better).

At offsets g the labels are the nearest augmented centroids [c_j, sqrt(max g - g_j)] of
the rows [x, 0] (SPEC.md, the bias trick), so the unconstrained bounded step's bounds
apply there, the offsets' change moving the augmented centroids. From solve t - 1 to t,
with the exact augmented distances at t - 1 (the tightest bounds) and each augmented
centroid's exact move m_j:
  - one bound a row (Hamerly): the row is skipped where its gap in distance at t - 1
    exceeds m_a + max_j m_j (a its label);
  - a bound a row and centroid (Elkan): the distance to j is read where
    dist_j - m_j < dist_a + m_a (j != a), every distance of a row none of whose
    others passes being skipped (its label stands).
Then the least time of a pass that reads only those: the share read times the solver's
fused pass (`biased_hard_stats_candidates`, no candidates), summed over the solves, over
the unconstrained fit, all timed in this process; with k bounds a row, at least the time
of reading and writing them at this machine's copy rate, at one byte a bound (at d = 16
a float32 bound costs about what the distance it spares does). The offsets are each
solve's exact ones (`BalancedProblem.solve(C, offsets=True)`), the steps S / N.

    python bench/studies/balanced_bounds.py [N] [--iters 20] [--sample 5]

N rows (default 1e6), d = 16, k = 64 as bench/balanced.py; the bounds are counted on
every `sample`-th row (float64, NumPy).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import peers as P  # noqa: E402
import table  # noqa: E402
from balanced import unequal_blobs  # noqa: E402

from softkmeans import SoftKMeans, _native, sources  # noqa: E402
from softkmeans._balance import check_targets  # noqa: E402
from softkmeans.fit.balanced import BalancedProblem, with_offsets  # noqa: E402

D_DIM, K = 16, 64
# The width of a bound in the k-bounds floor: one byte, the least any bound takes.
BOUND_BYTES = 1


def trajectory(X, C, iters):
    """[(C_t, g_t)] of the balanced hard fit from C: each solve's centroids and exact
    offsets, the step S / N of its labels."""
    source = sources.source_of(X)
    spec = check_targets("equal", None, K, X.shape[0], float(X.shape[0]), True)
    problem = BalancedProblem(source, spec)
    out = []
    C = np.asarray(C, dtype=np.float64)
    for _ in range(iters):
        labels, g, _ = problem.solve(C.astype(X.dtype), offsets=True)
        out.append((C, np.asarray(g, dtype=np.float64)))
        N = np.bincount(labels, minlength=K).astype(np.float64)
        S = np.zeros_like(C)
        np.add.at(S, labels, X.astype(np.float64))
        C = S / N[:, None]
    return out


def distances(Xs, A):
    """Augmented distances (not squared) of the rows [x, 0] to A (k, d + 1), float64."""
    sq = (Xs * Xs).sum(1)[:, None] - 2.0 * Xs @ A[:, :-1].T + (A * A).sum(1)[None, :]
    return np.sqrt(np.maximum(sq, 0.0))


def skipped(Xs, before, after):
    """(rows skipped by one bound, distances skipped by one a centroid) from solve before
    to after, each (C, g)."""
    A0, A1 = (with_offsets(C, g, np.float64) for C, g in (before, after))
    dist = distances(Xs, A0)
    label = dist.argmin(axis=1)
    at = np.arange(dist.shape[0])
    move = np.sqrt(((A1 - A0) ** 2).sum(axis=1))
    own = dist[at, label]
    others = dist.copy()
    others[at, label] = np.inf
    rows = (others.min(axis=1) - own > move[label] + move.max()).mean()
    read = others - move[None, :] < (own + move[label])[:, None]
    read[at, label] = False
    needs = read.any(axis=1)  # a row whose bounds all hold reads nothing
    read_share = (read.sum(axis=1) + needs).sum() / dist.size
    return float(rows), float(1.0 - read_share)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", nargs="?", type=float, default=1e6)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--sample", type=int, default=5)
    args = parser.parse_args()
    n = int(args.n)
    X = unequal_blobs(n, D_DIM, K)
    C0 = P.initial_centroids(X, K)
    print(table.machine_line(P.gemm_rate(n_threads=2, size=1024), 2, 1024))
    steps = trajectory(X, C0, args.iters)
    Xs = X[:: args.sample].astype(np.float64)
    print(f"{n} x {D_DIM}, k = {K}, {args.iters} solves; bounds counted on {Xs.shape[0]} rows")
    print(f"{'solve':>5s} {'offsets moved':>14s} {'rows skipped (1 bound)':>23s} "
          f"{'distances skipped (k bounds)':>29s}")  # fmt: skip
    row_read, dist_read = [1.0], [1.0]  # the first solve has no bounds
    for t in range(1, len(steps)):
        rows, dists = skipped(Xs, steps[t - 1], steps[t])
        row_read.append(1.0 - rows)
        dist_read.append(1.0 - dists)
        spread = float(np.ptp(steps[t][1] - steps[t - 1][1]))
        print(f"{t:5d} {spread:14.2f} {rows:23.3f} {dists:29.3f}")
    common = dict(assignment="hard", init=C0, n_init=1, max_iter=args.iters, tol=0.0)
    C = np.ascontiguousarray(C0, dtype=X.dtype)
    g, w = np.zeros(K), np.ones(n)

    def one_pass():
        _native.biased_hard_stats_candidates(X, C, g, w, 0, 0, np.inf)

    times = P.interleaved({"unconstrained": lambda: SoftKMeans(K, **common).fit(X),
                           "fused pass": one_pass}, repeats=5, warmup=1)  # fmt: skip
    fit, pas = times["unconstrained"].median, times["fused pass"].median
    print(f"unconstrained fit {fit:.3f} s; one fused pass {pas * 1e3:.1f} ms")
    # k bounds a row (Elkan's), read and written each pass at the copy rate, at least a
    # byte each (bounds rounded down to 8 bits: the most optimistic width)
    bandwidth = P.copy_bandwidth(n_threads=2)
    bounds_floor = 2.0 * n * K * BOUND_BYTES / (bandwidth * 1e9)
    print(f"copy bandwidth {bandwidth:.1f} GB/s: k bounds a row of {BOUND_BYTES} byte read and "
          f"written {bounds_floor * 1e3:.1f} ms a pass")  # fmt: skip
    for name, share in (("every row", [1.0] * len(row_read)), ("rows past one bound", row_read),
                        ("distances past k bounds", dist_read)):  # fmt: skip
        total = pas * float(np.sum(share))
        if name.startswith("distances"):
            total = float(sum(max(pas * s, bounds_floor) for s in share))
        print(f"passes reading {name:24s}: {total:.3f} s = {total / fit:.2f}x the unconstrained "
              f"fit, leaving {max(1.5 * fit - total, 0.0) / len(share) * 1e3:.1f} ms a solve "
              f"for the solver at 1.5x")  # fmt: skip


if __name__ == "__main__":
    main()
