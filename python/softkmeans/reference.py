"""Pure-NumPy reference implementation of the softkmeans functional API (the oracle).

Every function here computes exactly what SPEC.md defines, written for clarity and
accuracy rather than speed. It has the same names, signatures, validation and error
messages as the native backend (``softkmeans.<name>``), so that parity tests can call
both the same way. It never imports ``softkmeans._core``.

Numerics, once for the whole module:

- Everything is computed in float64, whatever the input dtype. Arrays come back in
  the dtype of X (or Z), except labels (int64), cluster weights (float64), the
  ``empty`` mask (bool) and scalars (Python float).
- Squared distances are computed directly as sum_l (x_il - c_jl)^2, never by the norm
  expansion ||x||^2 + ||c||^2 - 2 x.c, so they carry no cancellation error.
- Scores are shifted by their row maximum before any exponential or threshold:
  z_ij - max_l z_il = -(D_ij - min_l D_il) / (2 sigma^2), which is <= 0 and exactly 0
  at the nearest centroids. Softmax is the max-shifted log-sum-exp; entmax15 is
  shift-invariant, so the shift changes tau but not r.
- ``n_threads`` is validated and ignored.
- A scipy.sparse X is validated as the native backend validates it (the same canonical
  CSR, the same errors), then densified: the oracle applies SPEC.md's definitions to the
  same values, and is not meant for data that does not fit densely in memory.
"""

from __future__ import annotations

import numpy as np

from softkmeans import _sparse
from softkmeans._balance import check_targets
from softkmeans._types import StepResult
from softkmeans._validation import (
    check_centroids,
    check_data,
    check_kind,
    check_n_threads,
    check_sample_weight,
    check_scores,
    check_sigma,
)

__all__ = [
    "StepResult",
    "assign",
    "centroid_step",
    "critical_sigma",
    "entmax15",
    "gradients",
    "margins",
    "objective",
    "responsibilities",
    "sq_distances",
]


def _check_x(X):
    """`check_data`; a sparse X checked as CSR (`_sparse.check_csr`) and densified (its
    dtype kept): the oracle reads no source."""
    if _sparse.is_sparse(X):
        return _sparse.check_csr(X).toarray()
    return check_data(X)


# Upper bound on the number of float64 elements of the (rows, k, d) temporary built by
# the direct distance formula; rows are processed in chunks that fit. Tests may lower it.
_CHUNK_ELEMENTS = 1 << 22


# ---------------------------------------------------------------------------------------
# Internal float64 building blocks
# ---------------------------------------------------------------------------------------


def _sq_distances64(X, C):
    """D_ij = sum_l (x_il - c_jl)^2 in float64, shape (n, k), chunked over rows."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    n, d = X.shape
    k = C.shape[0]
    D = np.empty((n, k), dtype=np.float64)
    rows = max(1, _CHUNK_ELEMENTS // max(1, k * d))
    for start in range(0, n, rows):
        diff = X[start : start + rows, None, :] - C[None, :, :]  # (rows, k, d)
        D[start : start + rows] = np.einsum("ikl,ikl->ik", diff, diff)
    return D


def _shifted_scores(D, sigma):
    """z_ij - max_l z_il = -(D_ij - min_l D_il) / (2 sigma^2), float64, every entry <= 0.

    The gap is formed before the division, so the scores keep the accuracy of the
    distance gaps. An exact gap of 0 gives a score of exactly 0, even when 2 sigma^2
    underflows to 0 (no 0/0).

    NOTE: a score that would be -inf (2 sigma^2 underflows for sigma < ~1e-162, or the
    quotient overflows) is clamped to the most negative finite float. Both maps give such
    an entry exactly 0 either way (exp underflows to 0; entmax15 zeros every entry with
    z_j <= max z - 2), and no inf - inf can arise downstream.
    """
    T = 2.0 * sigma * sigma
    gap = D - D.min(axis=1, keepdims=True)
    z = np.zeros_like(gap)
    with np.errstate(divide="ignore", over="ignore"):
        np.divide(-gap, T, out=z, where=gap > 0.0)
    return np.maximum(z, -np.finfo(np.float64).max)


def _softmax64(D, sigma, tiny):
    """Softmax responsibilities and per-point free energies, both float64.

    r_ij = exp(z_ij - lse_i) with lse_i = log sum_j exp(z_ij), z_ij = -D_ij / (2 sigma^2),
    computed as the log-sum-exp shifted by m_i = max_j z_ij = -min_j D_ij / (2 sigma^2):
        lse_i = m_i + log sum_j exp(z_ij - m_i),
        -2 sigma^2 lse_i = min_j D_ij - 2 sigma^2 log sum_j exp(z_ij - m_i).
    The sum is >= 1 (the nearest centroid contributes exp(0) = 1), so nothing is NaN or
    Inf; as sigma -> 0 the other terms underflow to 0 and r becomes one-hot, with exact
    ties sharing the mass equally.

    SPEC.md: a mass exp(z_ij - m_i) below ``tiny``, the smallest normal number of the
    data's dtype, is 0 by definition (the native core flushes it too), so whether a
    cluster is empty does not depend on subnormal arithmetic.

    Returns (r (n, k), f (n,)) where f_i = -2 sigma^2 lse_i.
    """
    shifted = _shifted_scores(D, sigma)
    e = np.exp(shifted)
    e[e < tiny] = 0.0
    total = e.sum(axis=1)
    r = e / total[:, None]
    f = D.min(axis=1) - 2.0 * sigma * sigma * np.log(total)
    return r, f


def _entmax15_threshold_full_sort(u_sorted):
    """tau per row by SPEC.md's sort-based algorithm over all k entries.

    u_sorted: (n, k) float64, each row sorted in descending order.
    For each support size s = 1..k:
        M_s = mean(u_1..u_s),  Q_s = mean(u_1^2..u_s^2),
        delta_s = (1 - s (Q_s - M_s^2)) / s,  tau_s = M_s - sqrt(delta_s),
    and tau = tau_s for the largest s with tau_s <= u_s (s = 1 always qualifies:
    tau_1 = u_1 - 1).

    NOTE: Q_s - M_s^2 (the variance of the top s entries) is accumulated with Welford's
    update instead of the two running means, so it stays accurate when a row spans many
    orders of magnitude (a full sort sees entries far below the support). When
    delta_s < 0 the size s cannot be the support (tau_s would not be real); clamping
    delta_s at 0 gives tau_s = M_s >= u_s, which the test rejects unless the top s
    entries are all equal, in which case delta_s = 1/s > 0 anyway. For rows spanning
    ~1e154 or more the Welford product can overflow to +inf: then delta_s = -inf and
    tau_s = M_s, which is rejected as above, so the overflow is harmless.
    """
    n, k = u_sorted.shape
    tau = np.empty(n, dtype=np.float64)
    mean = np.zeros(n, dtype=np.float64)  # M_s
    m2 = np.zeros(n, dtype=np.float64)  # s (Q_s - M_s^2), by Welford
    for s in range(1, k + 1):
        u_s = u_sorted[:, s - 1]
        dev = u_s - mean
        mean = mean + dev / s
        m2 = m2 + dev * (u_s - mean)
        delta = (1.0 - m2) / s  # (1 - s (Q_s - M_s^2)) / s
        tau_s = mean - np.sqrt(np.maximum(delta, 0.0))
        tau = np.where(tau_s <= u_s, tau_s, tau)  # keep the largest qualifying s
    return tau


def _halved_shifted(Z):
    """u = z/2 - max(z)/2 per row, float64: u <= 0 and max u = 0.

    entmax15 is invariant under a constant shift of a row (tau shifts with it), so the
    shift changes nothing but the rounding. NOTE: halving before subtracting (rather
    than (z - max z) / 2) cannot overflow, even for rows spanning the float64 range.
    """
    Z = np.asarray(Z, dtype=np.float64)
    half = Z / 2.0
    return half - half.max(axis=1, keepdims=True)


def _entmax15_full_sort(Z):
    """Row-wise entmax15 by a full descending sort of u = z/2 - max(z)/2, float64.

    entmax15(z)_j = [u_j - tau]_+^2 with tau from _entmax15_threshold_full_sort.
    Entries outside the support are exact zeros (max(., 0) of a non-positive number).
    """
    u = _halved_shifted(Z)
    u_sorted = -np.sort(-u, axis=1)
    with np.errstate(over="ignore"):  # see the NOTE of _entmax15_threshold_full_sort
        tau = _entmax15_threshold_full_sort(u_sorted)
    return np.maximum(u - tau[:, None], 0.0) ** 2


def _entmax15_filtered(Z):
    """Row-wise entmax15 sorting only the candidates z_j > max(z) - 2, float64.

    With u = (z - max z) / 2, an entry with u_j <= -1 is never in the support: the top
    entry alone reaches mass 1 at tau = -1. So only the candidates u_j > -1 are sorted,
    and SPEC.md's running means M_s, Q_s are taken over them (all in (-1, 0], so the
    variance Q_s - M_s^2 is well conditioned). This is the algorithm the native core
    follows; it must agree with _entmax15_full_sort.
    """
    U = _halved_shifted(Z)
    out = np.zeros_like(U)
    for i, u in enumerate(U):
        cand = -np.sort(-u[u > -1.0])  # descending; always holds the maximum (u = 0)
        s = np.arange(1, cand.size + 1)
        M = np.cumsum(cand) / s
        Q = np.cumsum(cand * cand) / s
        delta = (1.0 - s * (Q - M * M)) / s
        tau_s = M - np.sqrt(np.maximum(delta, 0.0))
        support = np.nonzero(tau_s <= cand)[0][-1] + 1
        tau = tau_s[support - 1]
        out[i] = np.maximum(u - tau, 0.0) ** 2
    return out


def _responsibilities64(D, sigma, kind, dtype):
    """r (n, k) float64 for the given kind from float64 distances D of data of ``dtype``."""
    n, k = D.shape
    if kind == "hard":
        r = np.zeros((n, k), dtype=np.float64)
        r[np.arange(n), np.argmin(D, axis=1)] = 1.0  # ties to the smallest j
        return r
    if kind == "softmax":
        return _softmax64(D, sigma, np.finfo(dtype).tiny)[0]
    return _entmax15_full_sort(_shifted_scores(D, sigma))


def _point_objectives64(D, r, sigma, kind, dtype):
    """Per-point objective terms (before weighting), float64 (n,).

    hard:     min_j D_ij
    softmax:  -2 sigma^2 lse_i
    entmax15: sum_j r_ij D_ij - 2 sigma^2 H(r_i),  H(p) = (4/3) (1 - sum_j p_j^(3/2))

    NOTE: for entmax15, sum_j r_ij D_ij is evaluated as
    min_j D_ij + sum_j r_ij (D_ij - min_j D_ij), equal in exact arithmetic since
    sum_j r_ij = 1, but free of the rounding of sum_j r_ij times a large min_j D_ij; a
    one-hot row gives min_j D_ij exactly.
    """
    d_min = D.min(axis=1)
    if kind == "hard":
        return d_min
    if kind == "softmax":
        return _softmax64(D, sigma, np.finfo(dtype).tiny)[1]
    expected = d_min + np.sum(r * (D - d_min[:, None]), axis=1)
    tsallis = (4.0 / 3.0) * (1.0 - np.sum(r**1.5, axis=1))
    return expected - 2.0 * sigma * sigma * tsallis


def _margins64(D):
    """Delta_i = D_i(2) - D_i(1), float64 (n,); requires k >= 2."""
    two_smallest = np.partition(D, 1, axis=1)[:, :2]
    return two_smallest[:, 1] - two_smallest[:, 0]


def _check_all(X, C, sigma, kind, sample_weight, n_threads):
    X = _check_x(X)
    C = check_centroids(C, X)
    kind = check_kind(kind)
    sigma = check_sigma(sigma, kind)
    w = check_sample_weight(sample_weight, X.shape[0])
    check_n_threads(n_threads)
    return X, C, sigma, kind, w


# ---------------------------------------------------------------------------------------
# Public API (SPEC.md, "The functional API")
# ---------------------------------------------------------------------------------------


def sq_distances(X, C, *, n_threads=None):
    """Squared Euclidean distances D_ij = ||x_i - c_j||^2 = sum_l (x_il - c_jl)^2.

    X (n, d), C (k, d). Returns D (n, k) in the dtype of X, computed in float64 by the
    direct formula (no norm expansion).
    """
    X = _check_x(X)
    C = check_centroids(C, X)
    check_n_threads(n_threads)
    return _sq_distances64(X, C).astype(X.dtype)


def assign(X, C, *, n_threads=None):
    """Hard assignment a_i = argmin_j D_ij (ties to the smallest j) and min_j D_ij.

    Returns (labels int64 (n,), min_sq_dist (n,) in the dtype of X). The argmin is taken
    over the float64 distances.
    """
    X = _check_x(X)
    C = check_centroids(C, X)
    check_n_threads(n_threads)
    D = _sq_distances64(X, C)
    labels = np.argmin(D, axis=1).astype(np.int64)
    return labels, D[np.arange(D.shape[0]), labels].astype(X.dtype)


def margins(X, C, *, n_threads=None):
    """Margins Delta_i = D_i(2) - D_i(1), the gap between the two smallest D_ij.

    Requires k >= 2 (ValueError otherwise). Returns (n,) in the dtype of X.
    """
    X = _check_x(X)
    C = check_centroids(C, X)
    check_n_threads(n_threads)
    if C.shape[0] < 2:
        raise ValueError(f"margins need at least 2 centroids; got k={C.shape[0]}")
    return _margins64(_sq_distances64(X, C)).astype(X.dtype)


def entmax15(Z, *, n_threads=None):
    """Row-wise entmax15 of scores Z (n, k): r_ij = [z_ij / 2 - tau_i]_+^2, sum_j r_ij = 1.

    tau_i by SPEC.md's sort-based algorithm: sort u = z/2 descending; for each support
    size s, M_s = mean(u_1..u_s), Q_s = mean(u_1^2..u_s^2),
    delta_s = (1 - s (Q_s - M_s^2)) / s, tau_s = M_s - sqrt(delta_s); the support is the
    largest s with tau_s <= u_s. Computed in float64 on u shifted by its row maximum;
    zeros are exact. Returns (n, k) in the dtype of Z.
    """
    Z = check_scores(Z)
    check_n_threads(n_threads)
    return _entmax15_full_sort(Z).astype(Z.dtype)


def responsibilities(X, C, sigma=None, *, kind="softmax", n_threads=None):
    """Responsibilities r (n, k) of each point for each centroid.

    hard:     r_ij = 1 if j = argmin_l D_il (ties to the smallest j) else 0
    softmax:  r_ij = exp(z_ij - lse_i),  z_ij = -D_ij / (2 sigma^2),
              lse_i = log sum_j exp(z_ij) (max-shifted)
    entmax15: r_i = entmax15(z_i)
    Returns (n, k) in the dtype of X.
    """
    X, C, sigma, kind, _ = _check_all(X, C, sigma, kind, None, n_threads)
    D = _sq_distances64(X, C)
    return _responsibilities64(D, sigma, kind, X.dtype).astype(X.dtype)


def objective(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """The kind's objective at centroids C, as a Python float.

    hard:     J(C)       = sum_i w_i min_j D_ij
    softmax:  F_sigma(C) = sum_i w_i (-2 sigma^2 lse_i)
    entmax15: G_sigma(C) = sum_i w_i [sum_j r_ij D_ij - 2 sigma^2 H(r_i)],
              H(p) = (4/3) (1 - sum_j p_j^(3/2)), r from entmax15.
    """
    X, C, sigma, kind, w = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    D = _sq_distances64(X, C)
    r = _responsibilities64(D, sigma, kind, X.dtype)
    return float(w @ _point_objectives64(D, r, sigma, kind, X.dtype))


def centroid_step(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """One alternating-minimization step from centroids C.

    N_j = sum_i w_i r_ij,  S_j = sum_i w_i r_ij x_i,  c_j+ = S_j / N_j.
    A cluster with N_j == 0 is empty: it keeps c_j and is flagged in ``empty``.
    With hard r this is Lloyd's update.

    Returns StepResult(centroids (k, d) dtype of X, cluster_weights N float64 (k,),
    objective (the kind's objective at C), distortion (J at C),
    min_margin (Delta_min over points with w_i > 0 at C; inf when k == 1),
    empty bool (k,)).
    """
    X, C, sigma, kind, w = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    X64 = X.astype(np.float64)
    C64 = C.astype(np.float64)
    D = _sq_distances64(X64, C64)
    r = _responsibilities64(D, sigma, kind, X.dtype)

    N = w @ r  # (k,)
    S = r.T @ (w[:, None] * X64)  # (k, d)
    empty = N == 0.0
    new_C = C64.copy()
    new_C[~empty] = S[~empty] / N[~empty, None]

    value = float(w @ _point_objectives64(D, r, sigma, kind, X.dtype))
    distortion = float(w @ D.min(axis=1))
    if C.shape[0] >= 2:
        min_margin = float(_margins64(D)[w > 0].min())
    else:
        min_margin = float("inf")
    return StepResult(
        centroids=new_C.astype(X.dtype),
        cluster_weights=N,
        objective=value,
        distortion=distortion,
        min_margin=min_margin,
        empty=empty,
    )


def gradients(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """Gradients of the kind's objective, with r held at its optimum (envelope theorem).

    dF/dc_j = 2 (N_j c_j - S_j),   N_j = sum_i w_i r_ij,  S_j = sum_i w_i r_ij x_i
    dF/dx_i = 2 w_i (x_i - sum_j r_ij c_j)
    (for hard, J is differentiable only away from ties). Returns (grad_X (n, d),
    grad_C (k, d)) in the dtype of X.
    """
    X, C, sigma, kind, w = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    X64 = X.astype(np.float64)
    C64 = C.astype(np.float64)
    r = _responsibilities64(_sq_distances64(X64, C64), sigma, kind, X.dtype)

    N = w @ r
    S = r.T @ (w[:, None] * X64)
    grad_C = 2.0 * (N[:, None] * C64 - S)
    grad_X = 2.0 * w[:, None] * (X64 - r @ C64)
    return grad_X.astype(X.dtype), grad_C.astype(X.dtype)


def critical_sigma(X, *, sample_weight=None):
    """sqrt(lambda_max), lambda_max the largest eigenvalue of the weighted population
    covariance  Sigma = sum_i w_i (x_i - mu)(x_i - mu)^T / W,  mu = sum_i w_i x_i / W.

    Above this sigma, all centroids at mu is a strict local minimizer of F_sigma.
    Computed as the largest singular value of the rows sqrt(w_i / W) (x_i - mu), whose
    square is lambda_max (no explicit covariance is formed). Returns a Python float.
    """
    X = _check_x(X)
    w = check_sample_weight(sample_weight, X.shape[0])
    X64 = X.astype(np.float64)
    W = w.sum()
    mu = (w @ X64) / W
    A = np.sqrt(w / W)[:, None] * (X64 - mu)
    return float(np.linalg.norm(A, 2))


# ---------------------------------------------------------------------------------------
# Cosine (spherical) K-Means (SPEC.md, "Cosine (spherical) K-Means"): the definitions
# above on the rows x_i / ||x_i|| (zero rows 0) and unit centroids C. Public, but not in
# __all__, which is SPEC.md's functional API table (the native side has no such
# functions: a cosine fit reads its normalized source, `softkmeans.fit.metric`).
# ---------------------------------------------------------------------------------------


def _cosine_distances64(X, C, sample_weight, n_threads, sigma=None, kind="hard"):
    """(normalized rows (n, d), D (n, k) = ||x^_i||^2 + 1 - 2 x^_i.c_j, weights, sigma,
    kind, dtype): D = 2 - 2 x^.c for a nonzero row, exactly 1 for a zero row (C unit),
    whose weight is 0 (it adds nothing to any sum: SPEC.md's NOTE)."""
    X, C, sigma, kind, w = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    X64 = X.astype(np.float64)
    norms = np.linalg.norm(X64, axis=1)
    nonzero = norms > 0
    Xn = np.zeros_like(X64)
    Xn[nonzero] = X64[nonzero] / norms[nonzero, None]
    w = w * nonzero
    D = np.maximum(
        nonzero.astype(np.float64)[:, None] + 1.0 - 2.0 * Xn @ C.astype(np.float64).T, 0.0
    )
    return Xn, D, w, sigma, kind, X.dtype


def cosine_responsibilities(X, C, sigma=None, *, kind="softmax", n_threads=None):
    """r (n, k) of cosine K-Means; softmax: the von Mises-Fisher responsibilities
    exp(kappa x^_i.c_j) / sum_l exp(kappa x^_i.c_l), kappa = 1 / sigma^2."""
    _, D, _, sigma, kind, dtype = _cosine_distances64(X, C, None, n_threads, sigma, kind)
    return _responsibilities64(D, sigma, kind, dtype).astype(dtype)


def cosine_centroid_step(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """One cosine step from unit centroids C: N_j = sum_i w_i r_ij, S_j = sum_i w_i r_ij
    x^_i, c_j+ = S_j / ||S_j|| (S_j = 0: empty, c_j kept); objective, J and margins of D."""
    Xn, D, w, sigma, kind, dtype = _cosine_distances64(X, C, sample_weight, n_threads, sigma, kind)
    r = _responsibilities64(D, sigma, kind, dtype)
    N = w @ r
    S = r.T @ (w[:, None] * Xn)
    norms = np.linalg.norm(S, axis=1)
    empty = norms == 0.0
    new_C = np.asarray(C, dtype=np.float64).copy()
    new_C[~empty] = S[~empty] / norms[~empty, None]
    k = new_C.shape[0]
    return StepResult(
        centroids=new_C.astype(dtype),
        cluster_weights=N,
        objective=float(w @ _point_objectives64(D, r, sigma, kind, dtype)),
        distortion=float(w @ D.min(axis=1)),
        min_margin=float(_margins64(D)[w > 0].min()) if k >= 2 else float("inf"),
        empty=empty,
    )


def cosine_critical_sigma(X, *, sample_weight=None):
    """sqrt(lambda_max(P Sigma P) / ||mu||): mu and Sigma the weighted mean and population
    covariance of the normalized rows, m = mu / ||mu||, P = I - m m^T."""
    X = _check_x(X)
    C = np.zeros((1, X.shape[1]), dtype=X.dtype)
    Xn, _, w, _, _, _ = _cosine_distances64(X, C, sample_weight, None)
    W = w.sum()
    mu = (w @ Xn) / W
    m = mu / np.linalg.norm(mu)
    P = np.eye(X.shape[1]) - np.outer(m, m)
    A = np.sqrt(w / W)[:, None] * ((Xn - mu) @ P)
    return float(np.sqrt(np.linalg.norm(A, 2) ** 2 / np.linalg.norm(mu)))


# Balanced assignments (SPEC.md, "Balanced (size-constrained) assignments"): the oracles of
# tests/test_balanced.py, outside __all__ (the functional API has no balanced functions;
# the native path is the fit's, `softkmeans.fit.balanced`).
# ---------------------------------------------------------------------------------------


def _balance_inputs(X, C, balance, max_cluster_size, sample_weight, n_threads):
    """(X, D float64 (n, k), w, Targets) of a balanced call (`softkmeans._balance`)."""
    X = _check_x(X)
    C = check_centroids(C, X)
    w = check_sample_weight(sample_weight, X.shape[0])
    check_n_threads(n_threads)
    targets = check_targets(
        balance, max_cluster_size, C.shape[0], X.shape[0], float(w.sum()), sample_weight is None
    )
    if targets is None:
        raise ValueError("a balanced assignment needs balance or max_cluster_size")
    return X, _sq_distances64(X, C), w, targets


def balanced_assignment(
    X, C, *, balance=None, max_cluster_size=None, sample_weight=None, n_threads=None
):
    """The hard balanced assignment, as the linear program SPEC.md defines (HiGHS):
    minimize sum_ij w_i D_ij r_ij over r_ij >= 0 with sum_j r_ij = 1 and
    sum_i w_i r_ij = m_j (balance) or <= u_j (max_cluster_size).

    Returns (R (n, k) float64, the optimal plan: one-hot except at ties, which split
    mass; offsets g (k,) float64, the duals of the cluster constraints, so that
    a_i = argmin_j (D_ij - g_j) on R's support; g <= 0 for capacities). Rows of zero
    weight take argmin_j (D_ij - g_j) (ties to the smallest j). For small n only: the
    program has n k variables.
    """
    from scipy import optimize, sparse

    X, D, w, targets = _balance_inputs(X, C, balance, max_cluster_size, sample_weight, n_threads)
    n, k = D.shape
    live = np.flatnonzero(w > 0)
    m = live.size
    cost = (w[live, None] * D[live]).ravel()
    row_sum = sparse.kron(sparse.eye(m), np.ones((1, k)))  # sum_j r_ij = 1
    col_sum = sparse.kron(w[live][None, :], sparse.eye(k))  # sum_i w_i r_ij
    if targets.one_sided:
        res = optimize.linprog(
            cost, A_ub=col_sum, b_ub=targets.capacities, A_eq=row_sum, b_eq=np.ones(m),
            bounds=(0, None), method="highs-ds",
        )  # fmt: skip
        offsets = None if res.ineqlin is None else res.ineqlin.marginals
    else:
        A = sparse.vstack([row_sum, col_sum])
        b = np.concatenate([np.ones(m), targets.masses])
        res = optimize.linprog(cost, A_eq=A, b_eq=b, bounds=(0, None), method="highs-ds")
        offsets = None if res.eqlin is None else res.eqlin.marginals[m:]
    if res.status != 0:
        raise ValueError(f"the balanced linear program failed: {res.message}")
    offsets = np.asarray(offsets, dtype=np.float64)
    if not targets.one_sided:
        offsets = offsets - offsets.max()  # defined up to a constant
    R = np.zeros((n, k))
    R[live] = res.x.reshape(m, k)
    dead = np.flatnonzero(w == 0)
    R[dead, np.argmin(D[dead] - offsets, axis=1)] = 1.0
    return R, offsets


def balanced_responsibilities(
    X, C, sigma, *, balance=None, max_cluster_size=None, sample_weight=None,
    tol=1e-12, max_iter=100_000, n_threads=None,
):  # fmt: skip
    """The soft balanced assignment at T = 2 sigma^2 (entropic transport), by SPEC.md's
    log-domain Sinkhorn in float64: r_ij = exp((g_j - D_ij)/T - lse_i);
    g_j += T (log m_j - log N_j) (capacities: g_j = min(0, that)), until every
    |N_j / m_j - 1| <= tol (capacities: N_j <= u_j (1 + tol), and within tol of u_j
    wherever g_j < 0). Returns (R (n, k) float64, offsets g (k,) float64, max g = 0 for
    masses)."""
    X, D, w, targets = _balance_inputs(X, C, balance, max_cluster_size, sample_weight, n_threads)
    sigma = check_sigma(sigma, "softmax")
    T = 2.0 * sigma * sigma
    bounds = targets.bounds
    g = np.zeros(D.shape[1])
    for _ in range(max_iter):
        z = (g - D) / T
        z -= z.max(axis=1, keepdims=True)
        R = np.exp(z)
        R /= R.sum(axis=1, keepdims=True)
        N = w @ R
        ratio = N / bounds
        if targets.one_sided:
            if (ratio <= 1 + tol).all() and (np.abs(ratio[g < 0] - 1) <= tol).all():
                return R, g
            g = np.minimum(0.0, g - T * np.log(np.maximum(ratio, 1e-300)))
        else:
            if (np.abs(ratio - 1) <= tol).all():
                return R, g
            g = g - T * np.log(np.maximum(ratio, 1e-300))
            g -= g.max()
    raise ValueError(f"Sinkhorn did not reach tol={tol} in max_iter={max_iter} iterations")
