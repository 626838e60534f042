"""The functional API on the native core.

Each function has the signature of its twin in `softkmeans.reference`; both
validate their arguments with `softkmeans._validation`, so they accept the same
inputs and raise the same errors. Every function runs in C++ (`_core`); this
module only validates, converts and calls. `critical_sigma` takes the weighted
covariance from the core and its largest eigenvalue from numpy.
"""

from __future__ import annotations

import numpy as np

from . import _core
from . import _validation as v
from ._types import StepResult

_NATIVE = (
    "sq_distances",
    "assign",
    "margins",
    "entmax15",
    "responsibilities",
    "objective",
    "centroid_step",
    "gradients",
    "critical_sigma",
)


def native_functions() -> tuple[str, ...]:
    """Names of the API functions that run in the native core."""
    return _NATIVE


def _check_all(X, C, sigma, kind, sample_weight, n_threads):
    X = v.check_data(X)
    C = v.check_centroids(C, X)
    kind = v.check_kind(kind)
    sigma = v.check_sigma(sigma, kind)
    w = v.check_sample_weight(sample_weight, X.shape[0])
    return X, C, sigma, kind, w, v.check_n_threads(n_threads)


def sq_distances(X, C, *, n_threads=None):
    """Squared Euclidean distances D_ij = ||x_i - c_j||^2, shape (n, k), dtype of X."""
    X = v.check_data(X)
    C = v.check_centroids(C, X)
    return _core.sq_distances(X, C, v.check_n_threads(n_threads))


def assign(X, C, *, n_threads=None):
    """Hard assignment: `(labels, min_sq_dist)`, labels_i = argmin_j D_ij (ties to smallest j)."""
    X = v.check_data(X)
    C = v.check_centroids(C, X)
    return _core.assign(X, C, v.check_n_threads(n_threads))


def margins(X, C, *, n_threads=None):
    """Margins Delta_i = D_i(2) - D_i(1), shape (n,), dtype of X (k >= 2)."""
    X = v.check_data(X)
    C = v.check_centroids(C, X)
    n_threads = v.check_n_threads(n_threads)
    if C.shape[0] < 2:
        raise ValueError(f"margins need at least 2 centroids; got k={C.shape[0]}")
    return _core.margins(X, C, n_threads)


def entmax15(Z, *, n_threads=None):
    """Row-wise entmax15 of scores Z (n, k), dtype of Z; exact zeros off the support."""
    Z = v.check_scores(Z)
    return _core.entmax15(Z, v.check_n_threads(n_threads))


def responsibilities(X, C, sigma=None, *, kind="softmax", n_threads=None):
    """Responsibilities r (n, k) of each point for each centroid, dtype of X."""
    X, C, sigma, kind, _, n_threads = _check_all(X, C, sigma, kind, None, n_threads)
    return _core.responsibilities(X, C, kind, sigma, n_threads)


def objective(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """The kind's objective at C (J, F_sigma or G_sigma), as a Python float."""
    X, C, sigma, kind, w, n_threads = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    return float(_core.objective(X, C, kind, sigma, w, n_threads))


def centroid_step(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """One fused alternating-minimization step from C (one pass over X): a StepResult."""
    X, C, sigma, kind, w, n_threads = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    new_C, N, value, distortion, min_margin, empty = _core.centroid_step(
        X, C, kind, sigma, w, n_threads
    )
    return StepResult(
        centroids=new_C,
        cluster_weights=N,
        objective=float(value),
        distortion=float(distortion),
        min_margin=float(min_margin),
        empty=empty,
    )


def gradients(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """`(grad_X (n, d), grad_C (k, d))` of the kind's objective, r held at its optimum."""
    X, C, sigma, kind, w, n_threads = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    return _core.gradients(X, C, kind, sigma, w, n_threads)


def critical_sigma(X, *, sample_weight=None):
    """sqrt(lambda_max) of the weighted population covariance (a Python float)."""
    X = v.check_data(X)
    w = v.check_sample_weight(sample_weight, X.shape[0])
    _, cov = _core.weighted_covariance(X, w, 0)
    lam = float(np.linalg.eigvalsh(cov)[-1])
    return float(np.sqrt(max(lam, 0.0)))
