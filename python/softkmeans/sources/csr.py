"""Sparse input: a canonical CSR matrix (`softkmeans._sparse.check_csr`) read from its
stored entries by the core's csr_* kernels; nothing of size n x d is formed. Every
definition is the dense one (SPEC.md, "Sparse input")."""

from __future__ import annotations

import numpy as np

from .. import _native, _sparse
from .base import LocalSource

__all__ = ["CSRSource", "SparseCovariance"]


class CSRSource(LocalSource):
    """A scipy.sparse matrix or array of any format, read as one canonical CSR block (the
    user's arrays shared where they are canonical already, never modified)."""

    def __init__(self, X, sample_weight=None, *, n_threads=0, name="X", fit=False):
        X = _sparse.check_csr(X, name)
        super().__init__(X.shape, n_threads)
        self.data, self.dtype = X, X.dtype
        self._set_weights(sample_weight, fit)
        self._covariance = None

    kind = "csr"

    def blocks(self):
        yield 0, self.shape[0], self.data

    def _operator(self):
        if self._covariance is None:
            self._covariance = SparseCovariance(self.data, self.weights, self.n_threads)
        return self._covariance

    def covariance(self):
        """(weighted mean (d,), the covariance operator) of X's rows."""
        cov = self._operator()
        return cov.mean, cov

    def rows(self, idx):
        return self.data[np.asarray(idx, dtype=np.int64)].toarray()

    def subset(self, idx):
        weights = None if self.unit_weights else self.weights[idx]
        return CSRSource(self.data[idx], weights, n_threads=self.n_threads)


class SparseCovariance:
    """The weighted population covariance of a CSR X as an operator (d, d), never formed
    for large d: v -> (X^T diag(w) X v) / W - mu (mu . v), from the stored entries.

    diagonal(): the weighted variances; lambda_max(): its largest eigenvalue (dense
    eigvalsh for small d, Lanczos (scipy's eigsh, to machine precision) otherwise).

    NOTE: the second moment minus mu mu^T, not centred rows (centring would densify X):
    where the mean is large against the spread this cancels, and lambda_max loses the
    digits the ratio costs (sparse data, mostly zeros, has a mean near 0).
    """

    # Up to this d the covariance is formed (d x d) and eigvalsh'd, as for dense X.
    DENSE_D = 512

    def __init__(self, X, w, n_threads=0, row_scale=None):
        """row_scale (n,): the covariance of the rows s_i x_i (cosine's normalized rows,
        `softkmeans.sources.normalized`), X not copied: the weights become w s and w s^2."""
        self.n_threads = n_threads
        self.W = float(w.sum())
        w1, self.w = (w, w) if row_scale is None else (w * row_scale, w * row_scale**2)
        self.X = X
        self.mean = np.asarray(X.T @ w1, dtype=np.float64) / self.W
        sq = X.multiply(X).T @ self.w
        self._diag = np.maximum(np.asarray(sq, dtype=np.float64) / self.W - self.mean**2, 0.0)

    def diagonal(self):
        return self._diag

    def dense(self):
        Xw = self.X.multiply(self.w[:, None]).tocsr()
        second = np.asarray((self.X.T @ Xw).toarray(), dtype=np.float64) / self.W
        return second - np.outer(self.mean, self.mean)

    def matvec(self, vec):
        vec = np.ascontiguousarray(vec, dtype=np.float64)
        out = _native.csr_second_moment_matvec(self.X, self.w, vec, self.n_threads)
        out /= self.W
        out -= self.mean * (self.mean @ vec)
        return out

    def lambda_max(self) -> float:
        d = self.X.shape[1]
        if d <= self.DENSE_D:
            return max(float(np.linalg.eigvalsh(self.dense())[-1]), 0.0)
        from scipy.sparse.linalg import LinearOperator, eigsh

        op = LinearOperator((d, d), matvec=self.matvec, dtype=np.float64)
        v0 = np.full(d, 1.0 / np.sqrt(d))  # fixed: the same value on every call
        top = eigsh(
            op, k=1, which="LA", tol=0, v0=v0, ncv=min(d - 1, 40), return_eigenvectors=False
        )
        return max(float(top[-1]), 0.0)
