"""The reads of X that every fit and prediction makes, each one pass (`runner.Pass`) or
row map (`runner.RowMap`), written once and run by `runner.run` in this process or on
Dask. The algorithms' own passes live with them in `softkmeans.fit` (relocation,
annealing, k-means||).

Each function here is ``read(source, ...)``; the block functions are module-level (a
Dask task pickles them by name).
"""

from __future__ import annotations

import copy

import numpy as np

from .. import _native, _sparse, _stats
from .._covariance import DENSE_D, Covariance
from .nearest import CentroidGrouping, NearestCentroid
from .runner import Pass, RowMap, run

__all__ = [
    "augment",
    "augmented",
    "distances",
    "euclidean_distances",
    "gradients",
    "labels",
    "map_rows",
    "merge_moments",
    "moments",
    "nearest_stats",
    "responsibilities",
    "stats",
]


# ---------------------------------------------------------------------- statistics


def _stats_block(rows, w, start, C, kind, sigma, n_threads, sums, labels):
    stats, lab, _ = _native.block_stats(
        rows, C, kind, sigma, w, n_threads, sums=sums, labels=labels
    )
    return stats, (None if lab is None else [lab])


def _merge_stats_labels(parts):
    """BlockStats merged; the per-row arrays kept as a list of the blocks' arrays (one
    concatenation at the end, `_joined`: the tree's levels copy no row)."""
    stats = _stats.merge([p[0] for p in parts])
    rows = None if parts[0][1] is None else [a for p in parts for a in p[1]]
    return stats, rows


def _joined(result):
    """(BlockStats, the per-row arrays of the blocks concatenated, or None)."""
    stats, rows = result
    if rows is None:
        return stats, None
    return stats, rows[0] if len(rows) == 1 else np.concatenate(rows)


STATS = Pass("block-stats", _stats_block, _merge_stats_labels)


def stats(source, C, kind, sigma, *, sums=True, labels=False):
    """One fused pass at C (SPEC.md, "Block statistics"): (BlockStats, labels (n,)
    int64 or None)."""
    C = np.ascontiguousarray(C, dtype=source.dtype)
    return _joined(run(source, STATS, C, kind, sigma, source.n_threads, sums, labels))


def _nearest(C, group, n_threads):
    """A block's own `NearestCentroid` at C with the groups made once by the caller (a
    block's probe may turn its pass plain: no state shared between blocks or tasks)."""
    return NearestCentroid(C, n_threads, group=group)


def _nearest_block(rows, w, start, C, group, n_threads):
    if group is None:  # few centroids: the plain pass (`_stats_block`'s)
        return _stats_block(rows, w, start, C, "hard", 0.0, n_threads, False, True)
    stats, lab = _nearest(C, group, n_threads).hard_stats(rows, w)
    return stats, [lab]


NEAREST_STATS = Pass("nearest-stats", _nearest_block, _merge_stats_labels)


def nearest_stats(source, C):
    """The hard statistics at C without N and S, and every row's label: those of `stats`
    (labels and the minimum margin bit for bit, J within rounding), by the group-pruned
    pass where C has many centroids (a sampled fit's final pass). The centroids are
    grouped once, here (on the client of a Dask source)."""
    C = np.ascontiguousarray(C, dtype=source.dtype)
    group = CentroidGrouping().of(C, source.n_threads)
    return _joined(run(source, NEAREST_STATS, C, group, source.n_threads))


def _gradients_block(rows, w, start, C, kind, sigma, n_threads):
    stats, _, grad = _native.block_stats(rows, C, kind, sigma, w, n_threads, grad_x=True)
    return stats, [grad]


GRADIENTS = Pass("gradients", _gradients_block, _merge_stats_labels)


def gradients(source, C, kind, sigma):
    """(BlockStats, dF/dx_i (n, d) in X's dtype): the functional API's gradients."""
    return _joined(run(source, GRADIENTS, C, kind, sigma, source.n_threads))


# ---------------------------------------------------------------------- row maps


def _labels_block(rows, C, group, n_threads):
    if group is None:  # few centroids: the plain pass
        return _native.assign(rows, C, n_threads)[0]
    return _nearest(C, group, n_threads)(rows)[0]


LABELS = RowMap("labels", _labels_block, np.int64)


def labels(source, C, grouping=None):
    """(n,) int64: the nearest centroid of each row (`predict`); grouping: a
    `CentroidGrouping` the caller keeps for its centroids (None: decided for this call)."""
    C = np.ascontiguousarray(C, dtype=source.dtype)
    group = (grouping or CentroidGrouping()).of(C, source.n_threads)
    return run(source, LABELS, C, group, source.n_threads)


# Rows of float32 X upcast at a time by `euclidean_distances` (scikit-learn's chunk: about
# 10 MiB of float64 rows, here 4 MiB for the rows plus the (rows, k) result).
_UPCAST_BYTES = 1 << 22


def euclidean_distances(rows, C, n_threads):
    """||x_i - c_j|| (n, k) of a block (dense or CSR) in its dtype (`transform`).

    NOTE: SPEC.md's D = ||x||^2 + ||c||^2 - 2 x.c loses float32's bits where x is near c:
    at a point exactly on its centre of norm ~5 it leaves ~2e-6, whose square root is
    1.4e-3 where the float64 distance is 0. So float32 rows are upcast to float64, a
    chunk at a time, and the distances rounded back to float32 (scikit-learn's
    `_euclidean_distances_upcast`): products of float32 numbers are exact in float64
    and the norms and dot products of x = c cancel to 0; each distance is within float32
    rounding of the float64 one. The squared distances are clamped at 0 by the kernel.
    """
    C = np.asarray(C)
    if rows.dtype != np.float32:
        D = _native.sq_distances(rows, C.astype(rows.dtype, copy=False), n_threads)
        return np.sqrt(D, out=D)
    n, d = rows.shape
    k = C.shape[0]
    C64 = np.ascontiguousarray(C, dtype=np.float64)
    out = np.empty((n, k), dtype=np.float32)
    width = k + (d if isinstance(rows, np.ndarray) else 0)  # a CSR chunk holds its entries
    step = max(1, _UPCAST_BYTES // (8 * width))
    for s in range(0, n, step):
        chunk = rows[s : s + step].astype(np.float64)
        D = _native.sq_distances(chunk, C64, n_threads)
        out[s : s + step] = np.sqrt(D, out=D)
    return out


DISTANCES = RowMap("distances", euclidean_distances, None, 2)


def distances(source, C):
    """(n, k) Euclidean distances to the centroids, X's dtype (`transform`)."""
    return run(source, DISTANCES, np.asarray(C), source.n_threads)


def _responsibilities_block(rows, C, kind, sigma, n_threads):
    return _native.responsibilities(rows, C.astype(rows.dtype, copy=False), kind, sigma, n_threads)


RESPONSIBILITIES = RowMap("responsibilities", _responsibilities_block, None, 2)


def responsibilities(source, C, kind, sigma):
    """(n, k) responsibilities of `kind` at width sigma, X's dtype (`predict_proba`)."""
    return run(source, RESPONSIBILITIES, np.asarray(C), kind, sigma, source.n_threads)


def map_rows(source, fn):
    """fn(rows) over the transformed blocks, concatenated (each part where fn returns a
    tuple): the functional API's per-row kernels (an in-process source)."""
    return run(source, RowMap("rows", fn))


# ---------------------------------------------------------------------- moments


def _moments_block(rows, w, start, n_threads):
    """(W, weighted mean (d,), weighted covariance (d, d)) of the block; zeros at W = 0."""
    W = float(w.sum())
    if not W > 0:
        d = rows.shape[1]
        return 0.0, np.zeros(d), np.zeros((d, d))
    return (W, *_native.weighted_covariance(rows, w, n_threads))


def merge_moments(parts):
    """(W, mean, covariance) of consecutive blocks' (W, mean, covariance), in block
    order (`softkmeans._stats.merge_moments`; blocks of zero weight skipped)."""
    positive = [p for p in parts if p[0] > 0]
    if not positive:
        return parts[0]
    return _stats.merge_moments(positive)


MOMENTS = Pass("moments", _moments_block, merge_moments)


def _covariance_block(rows, w, start, row_scale, block_fn, *args):
    """One block's share of a `Covariance` operator's pass (its block_fn); row_scale:
    None, or cosine's scales (n,) of the rows of a CSR X read unscaled."""
    scale = None if row_scale is None else row_scale[start : start + rows.shape[0]]
    return block_fn(rows, w, scale, *args)


def _sum_parts(parts):
    """Consecutive partials (tuples of arrays and floats) added in block order."""
    total = parts[0]
    for part in parts[1:]:
        total = tuple(a + b for a, b in zip(total, part))
    return total


COVARIANCE = Pass("covariance", _covariance_block, _sum_parts)


def moments(source):
    """(weighted mean (d,), weighted population covariance) of the source's rows: the (d, d)
    array of the MOMENTS pass up to DENSE_D features; past it an operator
    (`softkmeans._covariance.Covariance`: ``diagonal()``, ``lambda_max()``; no (d, d)
    array), each product one COVARIANCE pass (a CSR source's operator at every d:
    `softkmeans.sources.csr.CSRSource.covariance`). Both passes run by the runner, so an
    in-process source and a Dask one over the same blocks give the same bits."""
    if source.kind == "csr":
        mean, cov = source.covariance()
        _check_total_weight(cov.W)
        return mean, cov
    if source.shape[1] > DENSE_D:
        cov = Covariance.of_passes(
            lambda block_fn, *args: run(source, COVARIANCE, None, block_fn, *args),
            source.n_threads,
        )
        _check_total_weight(cov.W)
        return cov.mean, cov
    W, mean, cov = run(source, MOMENTS, source.n_threads)
    _check_total_weight(W)
    return mean, cov


def _check_total_weight(W):
    if not W > 0:
        raise ValueError("sample_weight must have a positive sum")
    if not np.isfinite(W):
        raise ValueError("sample_weight must have a finite sum; rescale the weights")


# ---------------------------------------------------------------------- transforms


def augment(rows):
    """A block with a zero last column (annealing's prior coordinate), dense or CSR."""
    if hasattr(rows, "indptr"):
        return _sparse.with_zero_column(rows)
    out = np.zeros((rows.shape[0], rows.shape[1] + 1), dtype=rows.dtype)
    out[:, :-1] = rows
    return out


def augmented(source):
    """The source of [X, 0] (n, d + 1): `source`'s blocks with `augment` applied to each,
    by the runner (no copy of X)."""
    out = copy.copy(source)
    out.shape = (source.shape[0], source.shape[1] + 1)
    out.transforms = (*source.transforms, augment)
    return out
