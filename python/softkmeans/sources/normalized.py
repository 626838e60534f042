"""Sources of the normalized rows x_i / ||x_i|| (``metric="cosine"``; SPEC.md, "Cosine
(spherical) K-Means"). A zero row stays 0: at squared distance 1 from every unit
centroid it ties everywhere and adds nothing to S.

`normalized(source)` wraps the source `source_of` chose, once per fit or prediction:

- dense in-process X: the same source with `normalize_rows` as a per-block transform
  (`softkmeans.sources.runner`: each row scaled in float64 and rounded once), so a
  memory-mapped X (or one read in row blocks) is read by passes, never copied; an
  in-memory C-contiguous X gets its normalized rows once, in memory (the same function:
  the same bits), so that a pass does not normalize X again;
- CSR (`UnitCSRSource`): never copied. The row norms (n,) are computed once; each pass
  reads X in row blocks of at most `BLOCK_ENTRIES` stored entries whose values are scaled
  into a block-sized temporary (the indices are the user's, shared), their statistics
  merged in block order. Why not scales inside the native csr kernels: the block copy
  reads each stored entry once per pass, against the k reads the distances make of it
  (k >= 8 in any fit worth timing), so it costs what one more centroid would, with no
  kernel change;
- a Dask collection: the same Dask source over X mapped block by block to its normalized
  rows, lazily, on the workers (each pass normalizes its chunks again: d flops per
  entry, against k d for the distances).

A zero row weighs 0 in the normalized source: it adds nothing to S (SPEC.md), and
nothing to N_j, J, the objectives and the margins either. Why: its distance to a unit
centroid c_j is ||c_j||^2 as rounded, so which centroid wins its tie, and where its weight
would go in N, is decided by rounding. Weight 0 also keeps it from being a seed, an added
centroid or (`farthest` sees it at distance 0) a relocation target, which would put a
centroid at 0, off the sphere. Its label and responsibilities are still computed (the
tie: any label, uniform responsibilities).
"""

from __future__ import annotations

import copy

import numpy as np

from .. import _sparse
from . import reads
from .csr import CSRSource
from .dense import SCAN_BYTES, ArraySource, LocalSource, file_backed
from .runner import RowMap, run, run_blocks

__all__ = [
    "BLOCK_ENTRIES",
    "NO_DIRECTION",
    "ROW_NORMS",
    "UnitCSRSource",
    "normalize_rows",
    "normalized",
]

NO_DIRECTION = (
    "X has no nonzero row of positive weight: metric='cosine' clusters the directions "
    "x / ||x|| of the rows, and a zero row has none"
)

# Stored entries of a CSR block scaled at a time: a bounded temporary (64 MiB of float32
# values) whatever the size of X. Why this large: each native call accumulates S (k, d)
# per thread and merges it, so a block must be large against k d (TF-IDF 5e4 x 2e4 with
# 3.7e6 entries, k = 100, 10 iterations: 9.2-12.7 s in blocks of 2^20 entries, 5.0-5.5 s
# of 2^22, 4.5-4.6 s in one block of 2^24; loaded 2-core machine).
BLOCK_ENTRIES = 1 << 24


def normalized(source, fit=True):
    """The source of the normalized rows of `source` (a validated `Source`). fit: ValueError
    when every row of positive weight is zero (no direction to cluster); a prediction
    takes such a batch (its rows are answered one by one, whatever their neighbours)."""
    if isinstance(source, CSRSource):
        return UnitCSRSource(source, fit)
    if isinstance(source, LocalSource):
        return _dense_normalized(source, fit)
    return _dask_normalized(source, fit)


def _direction_weights(nonzero, source, fit):
    """The weights of the normalized rows (zero rows 0), None where all are 1; nonzero:
    (n,) bool, or the rows' norms. fit: ValueError where no row has a direction."""
    nonzero = np.asarray(nonzero) > 0
    if source.unit_weights and nonzero.all():
        return None
    weights = source.weights * nonzero
    if fit and not (weights > 0).any():
        raise ValueError(NO_DIRECTION)
    return weights


def _hold_weights(unit, weights):
    """Set the direction weights of a unit source, a zero sum included (a prediction on
    zero rows: every row at weight 0, each still labelled and scored, as 0)."""
    if weights is not None:
        unit.weights, unit.unit_weights = weights, False


def _scale(rows64, norms):
    """rows / norms in place (float64), zero rows left 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(norms > 0, 1.0 / norms, 0.0)
    rows64 *= inv[:, None]
    return rows64


def _has_direction(rows):
    """(n,) bool: the rows of a dense block that are not zero (a direction)."""
    return rows.any(axis=1)


def _norms64(rows):
    """(n,) float64: the rows' Euclidean norms, their squares summed in float64 (a dense
    block given in float64; a CSR block's stored values, row by row)."""
    if _sparse.is_sparse(rows):
        values = rows.data.astype(np.float64)
        row_of = np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))
        return np.sqrt(np.bincount(row_of, weights=values * values, minlength=rows.shape[0]))
    return np.sqrt(np.einsum("ij,ij->i", rows, rows))


def _row_norms(rows):
    return _norms64(rows if _sparse.is_sparse(rows) else rows.astype(np.float64))


def normalize_rows(rows):
    """A dense block's rows x / ||x|| (each scaled in float64, rounded once to the rows'
    dtype; a zero row stays 0), SCAN_BYTES of float64 at a time."""
    out = np.empty(rows.shape, dtype=rows.dtype)
    step = max(1, SCAN_BYTES // (8 * rows.shape[1]))
    for s in range(0, rows.shape[0], step):
        chunk = rows[s : s + step].astype(np.float64)
        out[s : s + chunk.shape[0]] = _scale(chunk, _norms64(chunk))
    return out


HAS_DIRECTION = RowMap("has-direction", _has_direction, np.bool_)
# The rows' norms (the scales of a CSR X's normalized rows).
ROW_NORMS = RowMap("row-norms", _row_norms, np.float64)


def _dense_normalized(source, fit):
    """`source` with its rows normalized by the runner, block by block (no copy), the
    zero rows at weight 0."""
    weights = _direction_weights(run(source, HAS_DIRECTION), source, fit)
    if isinstance(source, ArraySource) and not source.transforms and not file_backed(source.data):
        # X in memory: its normalized rows once, in memory (the bounded hard pass and the
        # kept seeding distances read one array; a pass would normalize X again each time).
        out = ArraySource(normalize_rows(source.data), None, n_threads=source.n_threads,
                          checked=True)  # fmt: skip
        _hold_weights(out, weights)
        out.directions = True
        return out
    out = copy.copy(source)
    out.weights = source.weights if weights is None else weights
    out.unit_weights = weights is None
    out.transforms = (*source.transforms, normalize_rows)
    out.directions = True
    out.variances = None  # the tolerance is that of the directions
    out._transformed = None  # dense_array: the normalized rows, made when asked
    return out


class UnitCSRSource(CSRSource):
    """The normalized rows of a CSR source, scaled block by block (never copied whole)."""

    def __init__(self, source, fit=True):
        super().__init__(source.data, None, n_threads=source.n_threads)
        self.row_norms = run_blocks(self.stored_blocks(), source.weights, ROW_NORMS)
        _hold_weights(self, _direction_weights(self.row_norms, source, fit))
        with np.errstate(divide="ignore"):
            self.row_scale = np.where(self.row_norms > 0, 1.0 / self.row_norms, 0.0)
        self.directions = True

    def subset(self, idx):
        """The normalized rows idx (CSRSource's subset holds the unscaled X)."""
        return UnitCSRSource(super().subset(idx))

    def spans(self):
        """(start, stop) row spans of about BLOCK_ENTRIES stored entries (one row at least)."""
        indptr, n = self.data.indptr, self.shape[0]
        start = 0
        while start < n:
            stop = int(np.searchsorted(indptr, indptr[start] + BLOCK_ENTRIES, side="right")) - 1
            stop = min(max(stop, start + 1), n)
            yield start, stop
            start = stop

    def stored_blocks(self):
        """(start, stop, rows) of X as stored (unscaled: views of its arrays), in spans."""
        for start, stop in self.spans():
            yield start, stop, self.scaled_block(start, stop, self.data.shape[1], scaled=False)

    def scaled_block(self, start, stop, columns, scaled=True):
        """Rows start..stop-1 normalized (scaled: else as stored), as a canonical CSR of
        `columns` columns."""
        from scipy import sparse

        X = self.data
        lo, hi = X.indptr[start], X.indptr[stop]
        vals = X.data[lo:hi]
        if scaled:
            scale = np.repeat(self.row_scale[start:stop], np.diff(X.indptr[start : stop + 1]))
            vals = (vals * scale).astype(self.dtype)
        block = sparse.csr_matrix(
            (vals, X.indices[lo:hi], X.indptr[start : stop + 1] - lo),
            shape=(stop - start, columns),
            copy=False,
        )
        block.has_sorted_indices = True
        block.has_canonical_format = True
        return block

    def blocks(self):
        for start, stop in self.spans():
            yield start, stop, self.scaled_block(start, stop, self.data.shape[1])

    def rows(self, idx):
        idx = np.asarray(idx, dtype=np.int64)
        dense = self.data[idx].toarray().astype(np.float64)
        return _scale(dense, self.row_norms[idx]).astype(self.dtype)

    def covariance_pass(self, block_fn, *args):
        """The COVARIANCE pass of block_fn over the normalized rows: X's stored spans, each
        row scaled in float64 by the block functions (never rounded to X's dtype)."""
        return run_blocks(self.stored_blocks(), self.weights, reads.COVARIANCE, self.row_scale,
                          block_fn, *args)  # fmt: skip


def _has_direction(X):
    return X.any(axis=1).astype(np.float64)


def _dask_normalized(source, fit):
    """A Dask source of the rows normalized lazily, block by block, on the workers; the
    zero rows at weight 0. fit: one scan pass (as any Dask fit's first), which refuses
    a total weight of 0; a prediction scans nothing (as `source_of`'s) and takes a
    batch of zero rows (each answered as in a mixed batch)."""
    from .dask_source import DaskSource

    X = source.data
    nonzero = X.map_blocks(_has_direction, drop_axis=1, dtype=np.float64)
    weights = nonzero if source.weights is None else nonzero * source.weights
    unit = X.map_blocks(normalize_rows, dtype=source.dtype)
    try:
        return DaskSource(unit, weights, n_threads=source.n_threads, scan=fit)
    except ValueError as exc:
        if "positive sum" not in str(exc):
            raise
        raise ValueError(NO_DIRECTION) from None
