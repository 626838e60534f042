"""Sparse input: a canonical CSR matrix (`softkmeans._sparse.check_csr`) read from its
stored entries by the core's csr_* kernels; nothing of size n x d is formed. Every
definition is the dense one (SPEC.md, "Sparse input")."""

from __future__ import annotations

import numpy as np

from .. import _native, _sparse
from .._covariance import Covariance
from .base import LocalSource
from .seeding import KeptDistancePasses

__all__ = ["CSRSource"]


class CSRSource(LocalSource):
    """A scipy.sparse matrix or array of any format, read as one canonical CSR block (the
    user's arrays shared where they are canonical already, never modified)."""

    def __init__(self, X, sample_weight=None, *, n_threads=0, name="X", fit=False):
        X = _sparse.check_csr(X, name)
        super().__init__(X.shape, n_threads)
        self.data, self.dtype = X, X.dtype
        self.set_weights(sample_weight, fit)
        self._covariance = None

    def blocks(self, augmented=False):
        yield 0, self.shape[0], _sparse.with_zero_column(self.data) if augmented else self.data

    def _operator(self):
        if self._covariance is None:
            self._covariance = Covariance.of(self.data, self.weights, self.n_threads)
        return self._covariance

    def feature_variances(self):
        return self._operator().diagonal()

    def moments(self):
        cov = self._operator()
        return cov.mean, cov

    def block_moments(self, rows, w):
        cov = Covariance.of(rows, w, self.n_threads)
        return cov.mean, cov  # an operator: lambda_max without a (d, d) array

    def rows(self, idx):
        return self.data[np.asarray(idx, dtype=np.int64)].toarray()

    def subset(self, idx):
        weights = None if self.unit_weights else self.weights[idx]
        return CSRSource(self.data[idx], weights, n_threads=self.n_threads)

    def block_sq_distances(self, rows, C, labels):
        # The kernel's own distance to the label's centroid (stored entries only).
        return _native.assign(rows, C, self.n_threads)[1]

    def block_sq_distances_to(self, rows, row):
        return _native.assign(rows, row[None, :].astype(self.dtype), self.n_threads)[1]

    def n_distinct_rows(self):
        positive = self.positive()
        return _sparse.n_distinct_rows(self.data if positive is None else self.data[positive])

    def seeding_passes(self, n_candidates):
        return KeptDistancePasses(self.data, self.weights, self.n_threads, keep_distances=False)
