"""Streaming K-Means: `SoftKMeans.partial_fit` against scikit-learn's MiniBatchKMeans.

Both see the same stream (shuffled batches over blobs, several passes) from the same
initial centroids, called alternately batch by batch in one process; prints the time per
row of each (medians over the batches, whole public calls with their validation), the
ratio, and the final inertia of each against the full batch fit from the same init.

    python bench/streaming.py [--n 200000] [--d 16] [--k 32] [--batch 4096] [--passes 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import make_blobs

import softkmeans
from softkmeans import SoftKMeans


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--std", type=float, default=2.0)
    args = ap.parse_args()
    X, _ = make_blobs(
        args.n, n_features=args.d, centers=args.k, cluster_std=args.std, random_state=0
    )
    X = X.astype(np.float32)
    C0, _ = softkmeans.kmeans_plusplus(X, args.k, random_state=0)
    full = SoftKMeans(args.k, assignment="hard", init=C0, tol=0, max_iter=300).fit(X)
    ours = SoftKMeans(args.k, assignment="hard", init=C0)
    peer = MiniBatchKMeans(args.k, init=C0, n_init=1, batch_size=args.batch, random_state=0)
    rng = np.random.default_rng(0)
    t_ours, t_peer = [], []
    for _ in range(args.passes):
        order = rng.permutation(args.n)
        for s in range(0, args.n, args.batch):
            batch = np.ascontiguousarray(X[order[s : s + args.batch]])
            t0 = time.perf_counter()
            ours.partial_fit(batch)
            t1 = time.perf_counter()
            peer.partial_fit(batch)
            t2 = time.perf_counter()
            t_ours.append((t1 - t0) / len(batch))
            t_peer.append((t2 - t1) / len(batch))
    J = {
        "full fit": full.inertia_,
        "softkmeans partial_fit": softkmeans.objective(X, ours.cluster_centers_, kind="hard"),
        "MiniBatchKMeans": softkmeans.objective(
            X, peer.cluster_centers_.astype(np.float32), kind="hard"
        ),
    }
    mo, mp = statistics.median(t_ours), statistics.median(t_peer)
    print(f"n={args.n} d={args.d} k={args.k} batch={args.batch} passes={args.passes}")
    print(
        f"time per row: softkmeans {mo * 1e9:.0f} ns, MiniBatchKMeans {mp * 1e9:.0f} ns, "
        f"MiniBatchKMeans / softkmeans = {mp / mo:.2f}x (target >= 1)"
    )
    for name, value in J.items():
        print(f"inertia {name}: {value:.6g} ({value / full.inertia_:.5f} x full fit)")


if __name__ == "__main__":
    main()
