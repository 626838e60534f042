"""Sparse input (SPEC.md, "Sparse input"): validation of scipy.sparse matrices and arrays,
and the few things the fitting code does with rows of X that differ for CSR.

scipy is imported only here, and only once a sparse input has been seen: `is_sparse` asks
``scipy.sparse`` only when the user's program has imported it already (a sparse matrix
cannot exist otherwise), so ``import softkmeans`` and dense fits never import scipy.

A validated X is a ``scipy.sparse.csr_matrix`` in canonical format (sorted column indices,
no duplicates: duplicates are summed, as scipy does), float32 or float64, indices and
indptr of one integer type (int32 or int64). It shares the user's arrays when they are
already so, and is a copy otherwise: the user's matrix is never modified. The native core
reads its stored entries only (``softkmeans._native`` passes data, indices and indptr to the
csr_* kernels); nothing of size n x d is formed unless a caller asks for it (the data
gradient of `softkmeans.gradients` is dense (n, d)).
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = [
    "check_csr",
    "distinct_rows",
    "is_sparse",
    "with_zero_column",
]


def is_sparse(X) -> bool:
    """True for a scipy.sparse matrix or array (without importing scipy)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(X)


def check_csr(X, name: str = "X", *, dtype=None):
    """X (any scipy.sparse format) as a canonical CSR matrix, float32 or float64.

    The same errors as `softkmeans._validation.as_float_array` for the same faults
    (TypeError for complex or non-numeric dtypes, ValueError for NaN or infinity in the
    stored values, for an empty shape, and for values so large that squared distances
    overflow), plus ValueError for index arrays that are out of range or inconsistent.
    `dtype`: convert the values to this float dtype.
    """
    from scipy import sparse

    from . import _validation as v

    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional; got shape {X.shape}")
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"{name} must not be empty; got shape {X.shape}")
    v.check_real_dtype(X.dtype, name)
    if dtype is None:
        dtype = v.float_dtype_of(X.dtype)
    if X.format != "csr":
        X = X.tocsr()  # a new matrix: CSC, COO, ... converted once, never densified
    indices, indptr = _checked_indices(X, name)
    data = X.data
    if data.dtype != dtype:
        data = data.astype(dtype)
    X = sparse.csr_matrix((data, indices, indptr), shape=(n, d), copy=False)
    if not X.has_canonical_format:
        # Sorted once and duplicates summed, on a copy (the arrays may be the user's).
        X = X.copy()
        X.sum_duplicates()
    if X.data.size:
        lo, hi = float(X.data.min()), float(X.data.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"{name} contains NaN or infinity")
        v.check_magnitude(X.data, name, max(hi, -lo), d=d)
    return X


def _checked_indices(X, name):
    """(indices, indptr) of a CSR X with one integer dtype, after checking their ranges:
    what the native core indexes with must be in range before it runs."""
    indices, indptr = X.indices, X.indptr
    n, d = X.shape
    for arr, what in ((indices, "indices"), (indptr, "indptr")):
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name}.{what} must be integers; got dtype {arr.dtype}")
    if indptr.shape != (n + 1,):
        raise ValueError(f"{name}.indptr must have {n + 1} entries; got {indptr.shape[0]}")
    nnz = int(indptr[-1])
    if int(indptr[0]) != 0 or nnz > indices.shape[0] or nnz > X.data.shape[0]:
        raise ValueError(f"{name}.indptr must start at 0 and end at most at the stored count")
    if (np.diff(indptr) < 0).any():
        raise ValueError(f"{name}.indptr must be non-decreasing")
    indices = indices[:nnz]
    if nnz and (int(indices.min()) < 0 or int(indices.max()) >= d):
        raise ValueError(
            f"{name}.indices must be in [0, {d}); got values from {int(indices.min())} to "
            f"{int(indices.max())} (an index overflow?)"
        )
    # One index type for both arrays: int32 where every value fits, else int64 (a
    # lossless cast after the range checks above).
    big = max(nnz, d) > np.iinfo(np.int32).max
    itype = np.dtype(np.int64) if big else np.dtype(np.int32)
    if indices.dtype != itype:
        indices = indices.astype(itype)
    if indptr.dtype != itype:
        indptr = indptr.astype(itype)
    return indices, indptr


def distinct_rows(X):
    """The distinct rows of a canonical CSR X as a sorted list of keys, one a row: its
    stored columns (int64) and values, explicit zeros dropped, as bytes (nothing
    densified; two blocks' keys merge as sets)."""
    X = X.copy()
    X.eliminate_zeros()
    keys = {
        (X.indices[a:b].astype(np.int64).tobytes(), X.data[a:b].tobytes())
        for a, b in zip(X.indptr[:-1], X.indptr[1:])
    }
    return sorted(keys)


def with_zero_column(X):
    """A canonical CSR X (n, d) as (n, d + 1) with an all-zero last column (no new stored
    entries; the arrays are shared)."""
    from scipy import sparse

    n, d = X.shape
    return sparse.csr_matrix((X.data, X.indices, X.indptr), shape=(n, d + 1), copy=False)
