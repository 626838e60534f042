"""Data sources: the one way anything in softkmeans reads X.

A fit, `score`, `predict`, `transform`, `predict_proba`, `partial_fit`, the seeding, the
empty-cluster relocation, annealing and the functional API all read X through a `Source`
(`softkmeans.sources.base`), chosen once by `source_of` where the input is validated.
Nothing above this package asks what kind of input it has. A source only reads (its
blocks, rows, a subset); every read is a pass (`runner`: a block function and a merge)
run in this process or on Dask by the one runner: the common reads in `reads`, what
is not a pass over every row in `queries`.

One implementation per kind of input:

==========================  ======================================================
input                       source
==========================  ======================================================
C-contiguous NumPy array,   `ArraySource` (`dense`): the kernels read X in place
np.memmap                   (a memmap over 1 GiB: in 64 MiB blocks, the next one
                            read ahead while one is computed, `readahead`)
Fortran-ordered or strided  `RowBlockSource` (`dense`): bounded row blocks copied
array, DataFrame values,    into one reused C-contiguous buffer, their statistics
h5py / zarr datasets        merged in block order (SPEC.md, "Block statistics");
                            for a fit, an h5py / zarr dataset is first copied once
                            into a temporary memory-mapped file (`spool`)
scipy.sparse (any format)   `CSRSource` (`csr`): canonical CSR, stored entries only
Dask array or DataFrame     `softkmeans.sources.dask_source.DaskSource`: block passes on
                            the workers, merged in a fixed tree (needs the extra)
==========================  ======================================================

A new kind of input (a Parquet dataset, an Arrow table) is a `LocalSource` with its own
`blocks` and `rows`, and its tests (tests/test_sources.py runs every
source through every path of a fit).
"""

from __future__ import annotations

import numpy as np

from .. import _sparse
from .. import _validation as v
from .base import Source
from .csr import CSRSource
from .dense import ArraySource, LocalSource, RowBlockSource, spool

__all__ = [
    "ArraySource",
    "CSRSource",
    "LocalSource",
    "RowBlockSource",
    "Source",
    "is_row_sliceable",
    "check_deferred",
    "is_deferred",
    "kernel_array",
    "source_of",
]


def source_of(X, sample_weight=None, *, n_threads=0, name="X", fit=False, row_blocks=True):
    """The source that reads X (n, d), with its weights validated (None: all ones).

    fit: the source of a fit, which reads X many times: the validation pass also yields
    the features' moments (the tolerance), and a row-sliceable array-like is copied once
    into a temporary memory-mapped file (`spool`; the caller `close`s the source).
    row_blocks=False: a dense X that is not C-contiguous is copied whole instead of read
    in row blocks (the functional API: the kernels' own bits).
    A `Source` is returned as it is. Raises TypeError/ValueError naming what is wrong
    (dtype, shape, NaN or infinity, values too large, bad weights).
    """
    if isinstance(X, Source):
        if sample_weight is not None:
            raise TypeError("sample_weight goes with X, not with a Source (it holds its own)")
        return X
    kw = dict(n_threads=n_threads, name=name)
    if isinstance(X, np.ndarray):  # the common case first: in place, or in row blocks
        # A C-contiguous array is read in place whatever its dtype (converted if need be).
        if row_blocks and not X.flags.c_contiguous and _needs_row_blocks(X):
            return RowBlockSource(X, sample_weight, fit=fit, **kw)
        return ArraySource(X, sample_weight, fit=fit, **kw)
    if _sparse.is_sparse(X):
        return CSRSource(X, sample_weight, **kw)
    if _is_dask(X) and row_blocks:
        from .dask_source import DaskSource

        return DaskSource(X, sample_weight, n_threads=n_threads, scan=fit)
    if is_row_sliceable(X) and fit:
        return spool(X, sample_weight, **kw)
    if row_blocks and (is_row_sliceable(X) or _needs_row_blocks(X)):
        return RowBlockSource(X, sample_weight, fit=fit, **kw)
    return ArraySource(X, sample_weight, fit=fit, **kw)


def kernel_array(source):
    """X as one array the native kernels read in place, rows at X's indices, or None:
    a dense X in memory or memory-mapped (after the source's transforms: cosine's
    normalized copy, `Source.dense_array`), or a CSR X read as it is (not a subclass's:
    cosine's `UnitCSRSource` scales its rows block by block)."""
    X = source.dense_array()
    if X is None and type(source) is CSRSource:
        X = source.data
    return X


def is_row_sliceable(X) -> bool:
    """True for a 2-D array-like read by row slices that is not an in-memory array: an
    h5py or zarr dataset, say (not a NumPy array, a DataFrame, a sparse matrix or a Dask
    array, which have their own paths)."""
    shape = getattr(X, "shape", None)
    return (
        not isinstance(X, np.ndarray)
        and shape is not None
        and len(shape) == 2
        and hasattr(X, "dtype")
        and hasattr(X, "__getitem__")
        and not hasattr(X, "iloc")  # pandas
        and not hasattr(X, "tocsr")  # scipy.sparse
        and not hasattr(X, "compute")  # dask
    )


def is_deferred(X) -> bool:
    """True for an X that validation must not read whole: a Dask collection or a
    row-sliceable array-like (h5py, zarr); its source reads it."""
    return _is_dask(X) or is_row_sliceable(X)


def check_deferred(X):
    """The checks of a deferred X that read no data: 2-D, a real dtype (numeric columns).
    Returns its feature names (a Dask DataFrame's string column names) or None."""
    if _is_dask(X):
        from .dask_source import check_collection

        return check_collection(X)
    shape = tuple(X.shape)
    if len(shape) != 2:
        raise ValueError(f"X must be 2-dimensional; got shape {shape}")
    v.check_real_dtype(np.dtype(X.dtype), "X")
    return None


def _needs_row_blocks(X) -> bool:
    """A 2-D float32/float64 NumPy array the kernels cannot read in place."""
    return (
        isinstance(X, np.ndarray)
        and X.ndim == 2
        and X.size > 0
        and not X.flags.c_contiguous
        and X.dtype.kind == "f"
        and X.dtype.itemsize in (4, 8)
        and X.dtype.isnative
    )


def _is_dask(X) -> bool:
    import sys

    dask = sys.modules.get("dask")  # a Dask collection cannot exist without it
    return dask is not None and dask.is_dask_collection(X)
