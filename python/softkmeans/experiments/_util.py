"""Helpers of claims 1-4: seeded subsampling and starts, Lloyd and soft descent runs."""

from __future__ import annotations

import numpy as np

import softkmeans as sk

EPS = float(np.finfo(np.float64).eps)


def subsample(ds, ctx, max_rows):
    """(X, note): ds.X, or a seeded subset of max_rows rows (ctx.rng("rows", name))."""
    X = ds.X
    n = X.shape[0]
    if n <= max_rows:
        return X, ""
    idx = np.sort(ctx.rng("rows", ds.name).choice(n, size=max_rows, replace=False))
    return np.ascontiguousarray(X[idx]), f"rows: {max_rows} of {n} (seeded choice)"


def kpp(X, k, ctx, *keys):
    """k-means++ centroids seeded by ctx.rng("kpp", *keys)."""
    seed = int(ctx.rng("kpp", *keys).integers(2**31 - 1))
    return np.ascontiguousarray(sk.kmeans_plusplus(X, k, random_state=seed)[0], dtype=np.float64)


def descend(X, C, sigma=None, kind="hard", max_iter=300, rtol=1e-12):
    """Alternating minimization from C until the centroids stop moving: (C, objective at C)."""
    scale = float(np.sqrt(np.mean(np.var(X, axis=0)) * X.shape[1])) + 1e-300
    for _ in range(max_iter):
        res = sk.centroid_step(X, C, sigma, kind=kind)
        C_new = res.centroids
        moved = float(np.max(np.abs(C_new - C)))
        C = C_new
        if moved <= rtol * scale:
            break
    return C, sk.objective(X, C, sigma, kind=kind)


def matched_distance(A, B):
    """Frobenius distance between two centroid sets after the best permutation of B's rows."""
    cost = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:  # greedy matching: an upper bound on the optimal one
        used, total = set(), 0.0
        for i in range(A.shape[0]):
            j = min((j for j in range(B.shape[0]) if j not in used), key=lambda j: cost[i, j])
            used.add(j)
            total += cost[i, j]
        return float(np.sqrt(total))
    rows, cols = linear_sum_assignment(cost)
    return float(np.sqrt(cost[rows, cols].sum()))


def fmt_sig(x):
    return f"{x:.3g}"
