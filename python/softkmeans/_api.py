"""The functional API on the native core.

Each function has the signature of its twin in `softkmeans.reference`; both
validate their arguments with `softkmeans._validation`, so they accept the same
inputs and raise the same errors. Every function runs in C++ through the trusted
layer `softkmeans._native`; this module validates once, calls it, and shapes the
result: `objective`, `centroid_step` and `gradients` are all one `block_stats` pass
(the step S / N and the centroid gradient are formed in `softkmeans._stats`), and
`critical_sigma` takes the weighted covariance from the core and its largest
eigenvalue from numpy.

X may be a scipy.sparse matrix or array (SPEC.md, "Sparse input"): it is validated once
into a canonical CSR matrix (`softkmeans._sparse`) and read from its stored entries by the
core's csr_* kernels; C stays dense, and every output is what the same values dense give
(`gradients` returns a dense (n, d) grad_X; `critical_sigma` takes lambda_max of the
covariance operator by scipy, never forming it for large d).
"""

from __future__ import annotations

from . import _native, _stats, sources
from . import _validation as v
from .sources import reads
from .sources.dense import check_weights

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


def _source(X, sample_weight=None, n_threads=0):
    """The source of X, read whole: a dense X that is not C-contiguous is copied, so that
    every function returns the kernels' own bits (a fit reads such an X in row blocks)."""
    return sources.source_of(X, sample_weight, n_threads=n_threads, row_blocks=False)


def _check_all(X, C, sigma, kind, sample_weight, n_threads):
    """The arguments checked in the reference's order: X, C, kind, sigma, weights."""
    source = _source(X, None, v.check_n_threads(n_threads))
    C = v.check_centroids(C, source)
    kind = v.check_kind(kind)
    sigma = v.check_sigma(sigma, kind)
    if sample_weight is not None:
        source.weights = check_weights(sample_weight, source.shape[0])
        source.unit_weights = False
    return source, C, sigma, kind


def sq_distances(X, C, *, n_threads=None):
    """Squared Euclidean distances D_ij = ||x_i - c_j||^2, shape (n, k), dtype of X."""
    source = _source(X, None, v.check_n_threads(n_threads))
    C = v.check_centroids(C, source)
    return reads.map_rows(source, lambda rows: _native.sq_distances(rows, C, source.n_threads))


def assign(X, C, *, n_threads=None):
    """Hard assignment: `(labels, min_sq_dist)`, labels_i = argmin_j D_ij (ties to smallest j)."""
    source = _source(X, None, v.check_n_threads(n_threads))
    C = v.check_centroids(C, source)
    return reads.map_rows(source, lambda rows: _native.assign(rows, C, source.n_threads))


def margins(X, C, *, n_threads=None):
    """Margins Delta_i = D_i(2) - D_i(1), shape (n,), dtype of X (k >= 2)."""
    source = _source(X, None, v.check_n_threads(n_threads))
    C = v.check_centroids(C, source)
    if C.shape[0] < 2:
        raise ValueError(f"margins need at least 2 centroids; got k={C.shape[0]}")
    return reads.map_rows(source, lambda rows: _native.margins(rows, C, source.n_threads))


def entmax15(Z, *, n_threads=None):
    """Row-wise entmax15 of scores Z (n, k), dtype of Z; exact zeros off the support."""
    Z = v.check_scores(Z)
    return _native.entmax15(Z, v.check_n_threads(n_threads))


def responsibilities(X, C, sigma=None, *, kind="softmax", n_threads=None):
    """Responsibilities r (n, k) of each point for each centroid, dtype of X."""
    source, C, sigma, kind = _check_all(X, C, sigma, kind, None, n_threads)
    return reads.map_rows(source,
        lambda rows: _native.responsibilities(rows, C, kind, sigma, source.n_threads)
    )


def objective(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """The kind's objective at C (J, F_sigma or G_sigma), as a Python float."""
    source, C, sigma, kind = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    stats, _ = reads.stats(source, C, kind, sigma, sums=False)
    return float(stats.objective)


def centroid_step(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """One fused alternating-minimization step from C (one pass over X): a StepResult."""
    source, C, sigma, kind = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    stats, _ = reads.stats(source, C, kind, sigma)
    return _stats.step_result(stats, C)


def gradients(X, C, sigma=None, *, kind="softmax", sample_weight=None, n_threads=None):
    """`(grad_X (n, d), grad_C (k, d))` of the kind's objective, r held at its optimum."""
    source, C, sigma, kind = _check_all(X, C, sigma, kind, sample_weight, n_threads)
    stats, grad_X = reads.gradients(source, C, kind, sigma)
    return grad_X, _stats.centroid_gradient(stats, C)


def critical_sigma(X, *, sample_weight=None):
    """sqrt(lambda_max) of the weighted population covariance (a Python float)."""
    _, cov = reads.moments(_source(X, sample_weight))
    return _stats.critical_sigma_of(cov)
