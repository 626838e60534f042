"""Fits on a Fortran-ordered or strided X without copying it whole.

The native kernels read C-contiguous rows. A NumPy array in another layout (Fortran
order, a column slice ``X[:, ::2]``, a transposed view) would otherwise be copied whole
into C order before a fit, doubling its memory, as scikit-learn's KMeans does. Here each
pass over X copies one bounded row block at a time (`ROW_BLOCK_BYTES`) into one reused
C-contiguous buffer and merges the blocks' statistics in block order (SPEC.md, "Block
statistics"): `RowBlockFitter` is `softkmeans._driver.Fitter` with its reads of X
replaced, as `softkmeans.dask` replaces them for Dask arrays.

Results: with X of at most one block the fit equals the fit of the C-ordered copy bit for
bit; beyond that, up to the rounding of the block sums (float64: ~1e-15 relative), with
the same labels except at exact ties.

Still whole: annealing (``anneal``) reads X through its own passes and copies a
non-C-contiguous X once; the fewer-distinct-points check, made only when a fit ends with
empty clusters, sorts the rows of X (as before).
"""

from __future__ import annotations

import numpy as np

from . import _native, _stats
from . import _validation as v
from ._driver import Fitter

__all__ = [
    "ROW_BLOCK_BYTES",
    "BlockSeedingPasses",
    "RowBlockFitter",
    "check_in_row_blocks",
    "needs_row_blocks",
    "row_blocks",
]

# Bytes of X copied at a time: large enough that a block amortises a kernel call (and its
# thread team) many times over, small next to any X worth not copying.
ROW_BLOCK_BYTES = 1 << 22


def needs_row_blocks(X) -> bool:
    """True for a 2-D float32/float64 NumPy array the kernels cannot read in place (not
    C-contiguous): the fit then reads it in row blocks."""
    return (
        isinstance(X, np.ndarray)
        and X.ndim == 2
        and not X.flags.c_contiguous
        and X.dtype.kind == "f"
        and X.dtype.itemsize in (4, 8)
        and X.dtype.isnative
    )


class _Blocks:
    """Row blocks of X copied into one reused C-contiguous buffer of `extra` spare rows.

    Iterating yields (start, stop, buf) with buf[: stop - start] = X[start:stop]; the
    caller may fill buf[stop - start :] (the spare rows) and must be done with buf before
    the next block.
    """

    def __init__(self, X, extra=0):
        n, d = X.shape
        self.X = X
        # The canonical dtype objects: the binding tells float32 from float64 by them.
        self.dtype = np.dtype(np.float32) if X.dtype.itemsize == 4 else np.dtype(np.float64)
        self.rows = max(1, min(n, ROW_BLOCK_BYTES // (d * self.dtype.itemsize)))
        self.buf = np.empty((self.rows + extra, d), dtype=self.dtype)

    def __iter__(self):
        n = self.X.shape[0]
        for start in range(0, n, self.rows):
            stop = min(start + self.rows, n)
            np.copyto(self.buf[: stop - start], self.X[start:stop])
            yield start, stop, self.buf


def row_blocks(X):
    """(start, stop, C-contiguous copy of X[start:stop]) for bounded row blocks of X; the
    copy is a reused buffer, valid until the next block."""
    for start, stop, buf in _Blocks(X):
        yield start, stop, buf[: stop - start]


class BlockSeedingPasses:
    """k-means++'s two passes (`softkmeans._seeding.InMemoryPasses`) over row blocks.

    The kernels take their centres as row indices of the X they read, so each block is
    followed in the buffer by the centre rows, with weight 0 and closest 0 (they add
    exactly 0 to the potentials).
    """

    def __init__(self, X, w, n_threads, max_candidates):
        self.X, self.w, self.n_threads = X, w, n_threads
        self.blocks = _Blocks(X, extra=max_candidates)
        rows = self.blocks.buf.shape[0]
        self.w_buf = np.zeros(rows)
        self.closest_buf = np.zeros(rows)

    def update_closest(self, closest, index):
        center = np.array(self.X[index], dtype=self.blocks.dtype)
        for start, stop, buf in self.blocks:
            b = stop - start
            buf[b] = center
            cl = self.closest_buf[: b + 1]
            cl[:b] = closest[start:stop]
            _native.kmeanspp_update_closest(buf[: b + 1], cl, b, self.n_threads)
            closest[start:stop] = cl[:b]

    def candidate_potentials(self, closest, cand):
        L = len(cand)
        rows = np.array(self.X[cand], dtype=self.blocks.dtype)
        total = np.zeros(L)
        for start, stop, buf in self.blocks:
            b = stop - start
            buf[b : b + L] = rows
            wb, cl = self.w_buf[: b + L], self.closest_buf[: b + L]
            wb[:b], wb[b:] = self.w[start:stop], 0.0
            cl[:b], cl[b:] = closest[start:stop], 0.0
            idx = np.arange(b, b + L, dtype=np.int64)
            total += _native.kmeanspp_candidate_potentials(
                buf[: b + L], wb, cl, idx, self.n_threads
            )
        return total


def check_in_row_blocks(X):
    """`softkmeans._validation.check_data` (finiteness, magnitude) block by block; X as it
    is (a non-empty 2-D float array by `needs_row_blocks`)."""
    if X.size == 0:
        return v.check_data(X)  # its error for an empty X
    for _, _, block in row_blocks(X):
        v.check_data(block)
    return X


class RowBlockFitter(Fitter):
    """`Fitter` for a float32/float64 X that is not C-contiguous (`needs_row_blocks`)."""

    def _check_data(self, X):
        return check_in_row_blocks(X)

    def _covariance(self, X, w):
        parts = []
        for start, stop, block in row_blocks(X):
            wb = w[start:stop]
            Wb = float(wb.sum())
            if Wb > 0:
                mean, cov = _native.weighted_covariance(block, wb, self._n_threads)
                parts.append((Wb, mean, cov))
        _, mean, cov = _stats.merge_moments(parts)
        return mean, cov

    def _pass(self, X, w, C, kind, sigma, *, sums=True, labels=False):
        parts, labs = [], []
        for start, stop, block in row_blocks(X):
            stats, lab, _ = _native.block_stats(
                block, C, kind, sigma, w[start:stop], self._n_threads, sums=sums, labels=labels
            )
            parts.append(stats)
            labs.append(lab)
        return _stats.merge(parts), (np.concatenate(labs) if labels else None)

    def _seeding_passes(self, X, w):
        # At most 2 + log(k) candidates per centre (the default n_local_trials).
        k = self.params.n_clusters
        return BlockSeedingPasses(X, w, self._n_threads, 2 + int(np.log(k)))

    def _labels_and_distances(self, X, C):
        labels = np.empty(X.shape[0], dtype=np.int64)
        dist = np.empty(X.shape[0], dtype=X.dtype)
        for start, stop, block in row_blocks(X):
            lab, _ = _native.assign(block, C, self._n_threads)
            labels[start:stop] = lab
            dist[start:stop] = ((block - C[lab]) ** 2).sum(axis=1)
        return labels, dist

    def _run_annealing(self, X, *args, **kwargs):
        # NOTE: annealing's passes read X directly (not through these hooks): one copy.
        return super()._run_annealing(np.ascontiguousarray(X), *args, **kwargs)
