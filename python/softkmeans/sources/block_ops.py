"""What differs between a dense block of rows and a CSR one, for the algorithms' block
functions (`softkmeans.fit`): written here, in the package that knows the kinds of
input, so that no fit module asks whether X is dense or sparse."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _native
from .._covariance import DENSE_D, Covariance

__all__ = ["dense_row", "row_sq_norms", "sq_distances_to_labels", "sq_distances_to_row",
           "weighted_moments"]  # fmt: skip


def _is_csr(rows):
    return hasattr(rows, "indptr")


def weighted_moments(rows, u, n_threads):
    """(mean, covariance) of a block's rows under weights u: the (d, d) array up to
    DENSE_D features of a dense block, an operator (`softkmeans._covariance`) beyond and
    for CSR (``diagonal()``, ``lambda_max()``, no (d, d) array)."""
    cov = Covariance.of(rows, u, n_threads)
    if _is_csr(rows) or cov.d > DENSE_D:
        return cov.mean, cov
    return cov.mean, cov.dense()


def sq_distances_to_row(rows, row, n_threads):
    """||x_i - row||^2 of a block (row dense (d,)); CSR: the kernel's, stored entries."""
    if _is_csr(rows):
        return _native.assign(rows, row[None, :].astype(rows.dtype), n_threads)[1]
    return ((rows - row) ** 2).sum(axis=1)


def sq_distances_to_labels(rows, C, labels, n_threads):
    """||x_i - c_{labels_i}||^2 of a block, X's dtype, as scikit-learn computes them (so
    that the farthest points agree with its); dense: ~4 MiB of rows at a time, in place in
    the gathered centroids (the same per-row sums without a temporary of the block's size),
    the row blocks on n_threads threads (NumPy's loops release the GIL; each row's sum is
    its own, so the bits do not depend on the threads); CSR: the kernel's own."""
    if _is_csr(rows):
        return _native.assign(rows, C, n_threads)[1]
    out = np.empty(rows.shape[0], dtype=rows.dtype)
    step = max(1, (1 << 22) // (rows.shape[1] * rows.itemsize))

    def block(s):
        diff = C[labels[s : s + step]]
        np.subtract(rows[s : s + step], diff, out=diff)
        np.square(diff, out=diff)
        diff.sum(axis=1, out=out[s : s + step])

    starts = range(0, rows.shape[0], step)
    workers = min(len(starts), n_threads if n_threads and n_threads > 0 else os.cpu_count() or 1)
    if workers <= 1:
        for s in starts:
            block(s)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(block, starts))
    return out


def row_sq_norms(rows):
    """(n,) ||x_i||^2 of a block's rows."""
    if _is_csr(rows):
        return np.asarray(rows.multiply(rows).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", rows, rows)


def dense_row(rows, i):
    """Row i of a block as a dense (d,) array (a copy)."""
    return rows[i].toarray()[0] if _is_csr(rows) else np.array(rows[i])
