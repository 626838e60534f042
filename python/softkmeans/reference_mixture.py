"""Pure-NumPy reference of sigma="auto" (SPEC.md, "A temperature that means something"):
EM of the equal-weight isotropic Gaussian mixture, written from its definition.

Like `softkmeans.reference`, this never imports the native core: the parity tests compare
`SoftKMeans(sigma="auto")` against it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["em_isotropic", "posterior"]


def posterior(X, C, sigma):
    """r (n, k): the posterior of the equal-weight mixture of N(c_j, sigma^2 I) at X."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    D = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    z = -D / (2.0 * sigma * sigma)
    z -= z.max(axis=1, keepdims=True)
    r = np.exp(z)
    return r / r.sum(axis=1, keepdims=True)


def em_isotropic(X, C, n_steps, sample_weight=None):
    """(centroids, sigma) after n_steps EM steps from C, sigma_0^2 = J(C) / (W d).

    Step: r = posterior(X, C, sigma); c_j = sum_i w_i r_ij x_i / sum_i w_i r_ij;
    sigma^2 = sum_ij w_i r_ij ||x_i - c_j||^2 / (W d) at the new c_j. A component with no
    weight keeps its centre.
    """
    X = np.asarray(X, dtype=np.float64)
    C = np.array(C, dtype=np.float64)
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    W = w.sum()
    D = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    sigma = np.sqrt((w * D.min(axis=1)).sum() / (W * d))
    for _ in range(n_steps):
        wr = w[:, None] * posterior(X, C, sigma)
        N = wr.sum(axis=0)
        full = N > 0
        C[full] = (wr.T @ X)[full] / N[full, None]
        D = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        sigma = np.sqrt((wr * D).sum() / (W * d))
    return C, float(sigma)
