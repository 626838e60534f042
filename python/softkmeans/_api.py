"""The functional API on the native core.

Each function has the signature of its twin in `softkmeans.reference`; both
validate their arguments with `softkmeans._validation`, so they accept the same
inputs and raise the same errors. Functions listed by `native_functions()` run
in C++; the others still call the reference (the native-core work replaces
them one by one).
"""

from __future__ import annotations

from . import _core
from . import _validation as v
from . import reference as _ref

_NATIVE = ("sq_distances", "assign")


def native_functions() -> tuple[str, ...]:
    """Names of the API functions that run in the native core."""
    return _NATIVE


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


# Not native yet: the reference computes them (same signature, same results).
margins = _ref.margins
entmax15 = _ref.entmax15
responsibilities = _ref.responsibilities
objective = _ref.objective
centroid_step = _ref.centroid_step
gradients = _ref.gradients
critical_sigma = _ref.critical_sigma
