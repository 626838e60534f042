"""Sparse input: a canonical CSR matrix (`softkmeans._sparse.check_csr`) read from its
stored entries by the core's csr_* kernels; nothing of size n x d is formed. Every
definition is the dense one (SPEC.md, "Sparse input")."""

from __future__ import annotations

import numpy as np

from .. import _sparse
from .._covariance import Covariance
from . import reads
from .dense import LocalSource
from .runner import run

__all__ = ["CSRSource"]


class CSRSource(LocalSource):
    """A scipy.sparse matrix or array of any format, read as one canonical CSR block (the
    user's arrays shared where they are canonical already, never modified)."""

    def __init__(self, X, sample_weight=None, *, n_threads=0, name="X", fit=False):
        X = _sparse.check_csr(X, name)
        super().__init__(X.shape, sample_weight, n_threads, fit)
        self.data, self.dtype = X, X.dtype
        self._covariance = None

    kind = "csr"

    def blocks(self):
        yield 0, self.shape[0], self.data

    def covariance(self):
        """(weighted mean (d,), the covariance operator) of X's rows: each of its reads
        a COVARIANCE pass (`softkmeans.sources.reads`), made once."""
        if self._covariance is None:
            self._covariance = Covariance.of_passes(self.covariance_pass, self.n_threads)
        return self._covariance.mean, self._covariance

    def covariance_pass(self, block_fn, *args):
        """The COVARIANCE pass of block_fn over X (`Covariance.of_passes`'s reduce)."""
        return run(self, reads.COVARIANCE, None, block_fn, *args)

    def rows(self, idx):
        return self.data[np.asarray(idx, dtype=np.int64)].toarray()

    def subset(self, idx):
        weights = None if self.unit_weights else self.weights[idx]
        return CSRSource(self.data[idx], weights, n_threads=self.n_threads)
