"""The data-source protocol (`Source`); what every in-process source shares is
`softkmeans.sources.dense.LocalSource`.

A source binds X (n, d) and its weights w (n,) after validation, and only reads: its
``kind`` ("dense", "csr" or "dask"), ``shape``, ``dtype``, ``weights``, its row
``blocks`` (with their first rows' indices), the rows at given indices, a ``subset``
of its rows, and ``close``. Every read a fit or a prediction makes is a pass over the
blocks (`softkmeans.sources.runner`): the common ones in `softkmeans.sources.reads`, an
algorithm's own with the algorithm in `softkmeans.fit`. ``transforms`` (functions rows
-> rows) are applied by the runner to every block: cosine's normalization, annealing's
zero column.

``n_threads`` (an int, 0: the OpenMP default) is the thread count of the native calls;
the fit sets it once it knows k.
"""


from __future__ import annotations

import abc

import numpy as np


class Source(abc.ABC):
    """What reads X. Attributes: ``kind`` ("dense", "csr" or "dask"), ``shape`` (n, d),
    ``dtype`` (float32 or float64), ``weights`` ((n,) float64; a Dask source's a Dask
    array or None), ``data`` (X as validated: what a callable ``init`` receives),
    ``unit_weights`` (no sample_weight was given), ``transforms`` (per-block functions
    rows -> rows the runner applies, in order), ``rows_per_pass`` (the most rows one
    native call reads: the thread count is chosen by it), ``n_threads``, ``on_block``."""

    kind: str
    shape: tuple
    dtype: np.dtype
    data: object
    unit_weights: bool
    transforms: tuple = ()
    # (d,) the features' weighted variances where known (`queries.feature_variances`).
    variances = None
    # True for cosine's sources (`softkmeans.sources.normalized`): the rows are directions
    # and a zero row has none (it is never a relocation target).
    directions: bool = False
    n_threads: int = 0
    # Called as on_block(rows done, n) after each block of a pass, where the source reads
    # X in several blocks (a large memory-mapped file): the progress of a long pass.
    on_block = None

    @abc.abstractmethod
    def blocks(self):
        """(start, stop, rows) over X in order, rows a C-contiguous array or a CSR matrix
        the kernels take (before the transforms); a block may be a reused buffer, valid
        until the next. A Dask source's blocks are its chunks (read by its runner)."""

    @abc.abstractmethod
    def rows(self, idx):
        """Rows X[idx] as a dense (len(idx), d) array of X's dtype, transformed."""

    @abc.abstractmethod
    def subset(self, idx):
        """The source of the rows X[idx] (idx sorted, distinct) with their weights, read
        the way X is (in memory, from a temporary file when X is file-backed, on the
        Dask workers); the caller closes it."""

    def close(self):  # noqa: B027 - most sources hold nothing to release
        """Release what the source holds beyond X (a temporary file)."""

    def dense_array(self):
        """X (transformed) as one C-contiguous in-memory array, or None (the bounded step
        needs one)."""
        return None
