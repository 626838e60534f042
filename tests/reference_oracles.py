"""Independent computations the reference tests compare softkmeans.reference with:
Python loops for distances, assignments, margins and Lloyd's step, bisection for entmax15,
weighted covariances, and the hypothesis strategies of small problems. Shared by
test_reference.py and test_reference_properties.py; nothing here imports the library.
"""

from __future__ import annotations

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

KINDS = ("hard", "softmax", "entmax15")
SOFT_KINDS = ("softmax", "entmax15")
PROPERTY = settings(max_examples=50, deadline=None)


# ---------------------------------------------------------------------------------------
# Independent helpers
# ---------------------------------------------------------------------------------------


def loop_sq_distances(X, C):
    """D_ij by a double loop over Python floats."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    D = np.empty((X.shape[0], C.shape[0]))
    for i, x in enumerate(X.tolist()):
        for j, c in enumerate(C.tolist()):
            D[i, j] = sum((a - b) ** 2 for a, b in zip(x, c))
    return D


def loop_assign(D):
    """argmin per row, ties to the smallest index, by a strict-less-than scan."""
    labels, mins = [], []
    for row in D.tolist():
        best = 0
        for j in range(1, len(row)):
            if row[j] < row[best]:
                best = j
        labels.append(best)
        mins.append(row[best])
    return np.array(labels), np.array(mins)


def loop_margins(D):
    return np.array([sorted(row)[1] - sorted(row)[0] for row in D.tolist()])


def loop_lloyd_step(X, C, w):
    """Lloyd's update by explicit accumulation; returns (centroids, N)."""
    _, d = X.shape
    k = C.shape[0]
    labels, _ = loop_assign(loop_sq_distances(X, C))
    N = [0.0] * k
    S = [[0.0] * d for _ in range(k)]
    for x, wi, a in zip(X.tolist(), w.tolist(), labels.tolist()):
        N[a] += wi
        for col in range(d):
            S[a][col] += wi * x[col]
    out = np.array(C, dtype=np.float64)
    for j in range(k):
        if N[j] > 0:
            out[j] = np.array(S[j]) / N[j]
    return out, np.array(N)


def bisect_entmax15(Z):
    """entmax15 by bisection on tau: sum_j [z_j/2 - tau]_+^2 = 1, one row at a time.

    f(tau) = sum_j [u_j - tau]_+^2 - 1 is decreasing, f(max u - 1) >= 0, f(max u) = -1.
    """
    Z = np.asarray(Z, dtype=np.float64)
    out = np.empty_like(Z)
    for i, z in enumerate(Z):
        u = z / 2.0
        lo, hi = u.max() - 1.0, u.max()
        for _ in range(300):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if np.sum(np.maximum(u - mid, 0.0) ** 2) >= 1.0:
                lo = mid
            else:
                hi = mid
        out[i] = np.maximum(u - 0.5 * (lo + hi), 0.0) ** 2
    return out


def weighted_covariance(X, w):
    """Population covariance with weights, via numpy.cov (independent of the reference)."""
    return np.atleast_2d(np.cov(X.T, aweights=w, bias=True))


def random_problem(seed, n, d, k, scale=1.0, weights=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    C = rng.normal(size=(k, d)) * scale
    if weights:
        w = rng.integers(0, 4, size=n).astype(np.float64)
        w[rng.integers(n)] += 1.0  # positive sum
    else:
        w = np.ones(n)
    return X, C, w


@st.composite
def problems(draw, min_k=1, max_k=5, max_n=20, max_d=3, weights=True, centroids_in_data=False):
    """(X, C, w, scale); with centroids_in_data, C is k distinct rows of X (no empty
    Lloyd cluster)."""
    seed = draw(st.integers(0, 2**32 - 1))
    k = draw(st.integers(min_k, max_k))
    n = draw(st.integers(k if centroids_in_data else 1, max(k, max_n)))
    d = draw(st.integers(1, max_d))
    scale = 10.0 ** draw(st.integers(-3, 3))
    X, C, w = random_problem(seed, n, d, k, scale, weights=weights and draw(st.booleans()))
    if centroids_in_data:
        C = X[:k].copy()
    return X, C, w, scale


def one_hot_rows(r):
    """True for rows with one entry exactly 1 and the others exactly 0."""
    return (np.sum(r == 1.0, axis=1) == 1) & (np.sum(r == 0.0, axis=1) == r.shape[1] - 1)
