"""The oracle: every quantity of SPEC.md computed from its definition in plain NumPy/SciPy.

Nothing here goes through ``softkmeans`` (neither the native core nor
``softkmeans.reference``): this module imports NumPy and SciPy only, so a claim's verdict
computed here does not share a line of code with the library it checks. What each
function trades for independence:

- distances are formed as sum_d (x_id - c_jd)^2 in float64 by scipy's cdist (no
  ||x||^2 + ||c||^2 - 2 x.c expansion, no clamping needed);
- softmax responsibilities use scipy.special.logsumexp (its own max shift);
- entmax15 is computed two ways with no candidate filter: the full sort of all k scores
  (Peters, Niculae and Martins 2019, Algorithm 2) and bisection on tau (60 halvings of a
  bracket of width 1); `entmax15` returns the sort's answer and `entmax15_bisect` the
  other, and the tests hold them to 1e-12;
- every step is c_j+ = sum_i r_ij x_i / sum_i r_ij with a dense r, the same formula for
  every kind (so one-hot rows give Lloyd's step bit for bit, whatever filled them in).

Unit sample weights throughout (the claims use none).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist
from scipy.special import logsumexp


def sq_distances(X, C):
    """D (n, k) float64, D_ij = sum_d (x_id - c_jd)^2 from the differences
    (scipy.spatial.distance.cdist, "sqeuclidean": a loop over the coordinates' differences,
    no ||x||^2 + ||c||^2 - 2 x.c expansion)."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    return cdist(X, C, "sqeuclidean")


def labels(D):
    """argmin_j D_ij, ties to the smallest j."""
    return np.argmin(D, axis=1)


def margins(D):
    """Delta_i = D_i(2) - D_i(1) (k >= 2)."""
    two = np.partition(D, 1, axis=1)[:, :2]
    return two[:, 1] - two[:, 0]


def tie_floor(D, d):
    """Margins at or below this are ties within the rounding of these distances.

    Each D_ij (from the differences, d coordinates) is off by at most (d + 2) eps D_ij,
    so a margin D_i(2) - D_i(1) by at most (d + 2) eps (D_i(1) + D_i(2)): twice the
    largest such error over the rows. It scales with the distances, not with ||x||^2
    (the library's expanded form rounds relative to the norms: its floor is its own)."""
    two = np.partition(D, 1, axis=1)[:, :2]
    eps = np.finfo(np.float64).eps
    return float(2.0 * (d + 2) * eps * np.max(two.sum(axis=1)))


def hard(D):
    """One-hot r of Lloyd's assignment."""
    r = np.zeros_like(D)
    r[np.arange(D.shape[0]), labels(D)] = 1.0
    return r


def scores(D, sigma):
    """z_ij = -(D_ij - min_l D_il) / (2 sigma^2): SPEC.md's scores shifted by their row
    maximum before the division, so that a cold sigma (|D / 2 sigma^2| ~ 1e10) does not
    round the differences that r depends on (r is invariant to the shift)."""
    return -(D - D.min(axis=1, keepdims=True)) / (2.0 * sigma * sigma)


def softmax(D, sigma):
    """r_ij = exp(z_ij - logsumexp_j z_ij), z = scores(D, sigma); subnormal entries are 0."""
    z = scores(D, sigma)
    with np.errstate(under="ignore"):
        r = np.exp(z - logsumexp(z, axis=1, keepdims=True))
    r[r < np.finfo(np.float64).tiny] = 0.0
    return r


def entmax15(Z):
    """Row-wise entmax15 of scores Z by the full sort of all k entries (no filter)."""
    Z = np.asarray(Z, dtype=np.float64)
    u = Z / 2.0
    u = u - u.max(axis=1, keepdims=True)
    s = -np.sort(-u, axis=1)
    k = Z.shape[1]
    idx = np.arange(1, k + 1, dtype=np.float64)
    mean = np.cumsum(s, axis=1) / idx
    mean_sq = np.cumsum(s * s, axis=1) / idx
    delta = (1.0 - idx * (mean_sq - mean * mean)) / idx
    tau = mean - np.sqrt(np.maximum(delta, 0.0))
    support = np.sum(tau <= s, axis=1)  # tau_s <= u_s holds for a prefix of s
    tau_star = tau[np.arange(Z.shape[0]), support - 1]
    return np.maximum(u - tau_star[:, None], 0.0) ** 2


def entmax15_bisect(Z, n_iter=60):
    """Row-wise entmax15 by bisection on tau: sum_j [u_j - tau]_+^2 = 1, u = Z / 2."""
    u = np.asarray(Z, dtype=np.float64) / 2.0
    top = u.max(axis=1, keepdims=True)
    lo, hi = top - 1.0, top.copy()  # mass >= 1 at top - 1, 0 at top
    for _ in range(n_iter):
        mid = (lo + hi) / 2.0
        mass = np.sum(np.maximum(u - mid, 0.0) ** 2, axis=1, keepdims=True)
        lo = np.where(mass >= 1.0, mid, lo)
        hi = np.where(mass >= 1.0, hi, mid)
    r = np.maximum(u - lo, 0.0) ** 2
    return r / r.sum(axis=1, keepdims=True)


def responsibilities(D, sigma=None, kind="softmax"):
    if kind == "hard":
        return hard(D)
    if kind == "softmax":
        return softmax(D, sigma)
    if kind == "entmax15":
        return entmax15(scores(D, sigma))
    raise ValueError(f"unknown kind {kind!r}")


def objective(X, C, sigma=None, kind="softmax", D=None):
    """J (hard), F_sigma (softmax) or G_sigma (entmax15) from the definitions."""
    D = sq_distances(X, C) if D is None else D
    if kind == "hard":
        return float(D.min(axis=1).sum())
    T = 2.0 * sigma * sigma
    if kind == "softmax":
        return float(np.sum(-T * logsumexp(-D / T, axis=1)))
    r = responsibilities(D, sigma, "entmax15")
    H = (4.0 / 3.0) * (1.0 - np.sum(r**1.5, axis=1))
    return float(np.sum(np.sum(r * D, axis=1) - T * H))


def step_from(X, C, r):
    """(c+, N): c_j+ = sum_i r_ij x_i / N_j, N_j = sum_i r_ij; an empty cluster keeps c_j."""
    N = r.sum(axis=0)
    S = (np.asarray(X, dtype=np.float64).T @ r).T  # (X^T r)^T: OpenBLAS is slow on r^T X
    out = np.array(C, dtype=np.float64, copy=True)
    full = N > 0
    out[full] = S[full] / N[full, None]
    return out, N


def step(X, C, sigma=None, kind="softmax"):
    """The centroid step of SPEC.md: (c+, N)."""
    return step_from(X, C, responsibilities(sq_distances(X, C), sigma, kind))


def lloyd(X, C, max_iter):
    """Lloyd's path C_0 = C, C_1, ... until a step returns its input; (path, converged)."""
    path = [np.array(C, dtype=np.float64, copy=True)]
    for _ in range(max_iter):
        new = step(X, path[-1], kind="hard")[0]
        if np.array_equal(new, path[-1]):
            return path, True
        path.append(new)
    return path, False


def gradients(X, C, sigma=None, kind="softmax"):
    """(dF/dX, dF/dC): 2 (x_i - sum_j r_ij c_j) and 2 (N_j c_j - S_j)."""
    X = np.asarray(X, dtype=np.float64)
    r = responsibilities(sq_distances(X, C), sigma, kind)
    N = r.sum(axis=0)
    return 2.0 * (X - r @ C), 2.0 * (N[:, None] * C - (X.T @ r).T)


def covariance_top(X):
    """The largest eigenvalue of the population covariance (the critical sigma^2)."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X - X.mean(axis=0)
    cov = Xc.T @ Xc / X.shape[0]
    return float(np.linalg.eigvalsh(cov)[-1])


def softmax_hessian(X, C, sigma):
    """The (kd, kd) Hessian of F_sigma at C, centroid-major, from its definition:
    H_jl = 2 N_j delta_jl I - (4 / T) sum_i r_ij (delta_jl - r_il) a_ij a_il^T,
    a_ij = c_j - x_i, T = 2 sigma^2."""
    X = np.asarray(X, dtype=np.float64)
    r = softmax(sq_distances(X, C), sigma)
    T = 2.0 * sigma * sigma
    n, k = r.shape
    d = C.shape[1]
    A = C[None, :, :] - X[:, None, :]
    B = (r[:, :, None] * A).reshape(n, k * d)
    H = (4.0 / T) * (B.T @ B)
    for j in range(k):
        sl = slice(j * d, (j + 1) * d)
        block = A[:, j, :].T @ (r[:, j, None] * A[:, j, :])
        H[sl, sl] += 2.0 * r[:, j].sum() * np.eye(d) - (4.0 / T) * block
    return H


def softmax_hessian_min(X, C, sigma, dense_max=400):
    """The smallest eigenvalue of the softmax Hessian (dense eigvalsh, or Lanczos on H v)."""
    k, d = C.shape
    if k * d <= dense_max:
        return float(np.linalg.eigvalsh(softmax_hessian(X, C, sigma))[0])
    from scipy.sparse.linalg import LinearOperator, eigsh

    X = np.asarray(X, dtype=np.float64)
    r = softmax(sq_distances(X, C), sigma)
    T = 2.0 * sigma * sigma
    N = r.sum(axis=0)

    def matvec(v):
        V = np.reshape(v, (k, d))
        P = np.einsum("jd,jd->j", C, V)[None, :] - X @ V.T
        q = np.einsum("ij,ij->i", r, P)
        G = r * (P - q[:, None])
        corr = G.sum(axis=0)[:, None] * C - (X.T @ G).T
        return (2.0 * N[:, None] * V - (4.0 / T) * corr).ravel()

    op = LinearOperator((k * d, k * d), matvec=matvec, dtype=np.float64)
    v0 = np.random.default_rng(0).standard_normal(k * d)  # ARPACK's own start is random
    return float(eigsh(op, k=1, which="SA", tol=1e-10, v0=v0, return_eigenvectors=False)[0])


def entmax15_runner_up(gap):
    """The closed form of the second entmax15 weight of a row with two candidates at a
    score gap g = Delta / (2 sigma^2) < 2 (third entries out of the support):
    ((sqrt(8 - g^2) - g) / 4)^2; 0 at g >= 2."""
    g = np.asarray(gap, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        val = ((np.sqrt(np.maximum(8.0 - g * g, 0.0)) - g) / 4.0) ** 2
    return np.where(g < 2.0, val, 0.0)
