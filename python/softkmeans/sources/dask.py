"""`DaskSource`: a Dask array or DataFrame as a data source (`softkmeans.sources`).

Imported only when a Dask collection is given (the ``softkmeans[dask]`` extra). The fit
(`softkmeans.fit`) is the in-memory one; each read of X is a pass over the blocks:

- **A pass** maps the native block-statistics kernel (`softkmeans._native.block_stats`)
  over the row blocks, one task per block, on the workers (`softkmeans.sources.dask_passes`:
  with a distributed client, tasks on the persisted blocks' futures; otherwise a
  ``dask.delayed`` graph). The centroids travel with the pass's tasks.
- **The merge** of the block statistics (`softkmeans._stats.merge`) is a tree of merges of
  consecutive blocks, in block order, whose shape depends only on the number of blocks, so
  the result does not depend on which worker computed what, or when. Only the statistics
  of at most 8 groups of blocks (k x d numbers each) reach the client.
- **The update** c_j+ = S_j / N_j (`softkmeans._stats.step_result`) and the loop
  (`softkmeans.fit.steps.run_steps`) run on the client.

A fit from the same initial centroids therefore equals the in-memory fit up to the
rounding of the block sums (float64: ~1e-15 relative), with the same labels; the chunking
changes nothing beyond that rounding.

What this means for users (memory, seeding, lazy predictions, annealing, streaming) is
in `softkmeans.dask`.
"""

from __future__ import annotations

import copy
import functools

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "softkmeans.dask needs Dask: pip install 'softkmeans[dask]' "
        "(dask[array,dataframe] and distributed)"
    ) from exc

from .. import _native, _stats
from .. import _validation as v
from .base import Farthest, Source, euclidean_distances
from .dask_parallel import DaskParallelPasses
from .dask_passes import BlockPasses, Shared, compute, delayed_blocks, merge_in_tree, unit_weights
from .dense import ArraySource, FeatureMoments
from .nearest import CentroidGrouping, NearestCentroid

__all__ = ["DaskSource", "check_collection", "is_collection"]

# k-means++ / "random" seeding draws from at most this many rows (or 100 per cluster).
SAMPLE_ROWS = 10_000
SAMPLE_ROWS_PER_CLUSTER = 100


# ---------------------------------------------------------------------- the cluster


def _client():
    """The current distributed Client, or None (then the local Dask scheduler runs)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _weights(w, n):
    return unit_weights(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)


# ---------------------------------------------------------------------- block tasks


def _block_stats(X, w, C, kind, sigma, n_threads, sums, labels):
    """BlockStats of the block at C; (BlockStats, labels) when `labels`."""
    X = np.ascontiguousarray(X)
    stats, lab, _ = _native.block_stats(
        X, C, kind, sigma, _weights(w, X.shape[0]), n_threads, sums=sums, labels=labels
    )
    return (stats, lab) if labels else stats


def _block_moments(X, w, n_threads):
    """Check the block (finite, not too large; weights finite and >= 0) and return
    (W, weighted mean (d,), W x covariance (d, d)) of its rows."""
    X = v.check_data(X)
    if w is not None:
        w = v.as_float_array(w, "sample_weight", ndim=1, dtype=np.float64, allow_empty=True)
        if (w < 0).any():
            raise ValueError("sample_weight must be non-negative")
    w = _weights(w, X.shape[0])
    W = float(w.sum())
    d = X.shape[1]
    if not W > 0:
        return 0.0, np.zeros(d), np.zeros((d, d))
    mean, cov = _native.weighted_covariance(X, w, n_threads)
    return W, mean, W * cov


def _merge_moments(parts):
    return functools.reduce(_stats.merge_moment_pair, parts)


def _block_farthest(X, w, C, m, n_threads):
    """The m rows of the block farthest from their nearest centroid: (dist, rows, weights,
    labels)."""
    X = np.ascontiguousarray(X)
    w = _weights(w, X.shape[0])
    labels, _ = _native.assign(X, C, n_threads)
    # As the in-memory relocation computes them (in the dtype of X).
    dist = ((X - C[labels]) ** 2).sum(axis=1)
    top = np.argsort(-dist, kind="stable")[:m]
    return dist[top], X[top], w[top], labels[top]


def _concat_farthest(parts):
    return tuple(np.concatenate(column) for column in zip(*parts))


def _block_responsibility_moments(X, w, Ca, kind, sigma, n_threads):
    """Annealing's per-centroid moments of the block, as [(U_j, mean_j, U_j x cov_j)]."""
    block = ArraySource(np.ascontiguousarray(X), w, n_threads=n_threads, checked=True)
    d = block.shape[1]
    out = []
    for U, mean, cov in block.responsibility_moments(Ca, kind, sigma):
        out.append((U, mean, U * cov) if U > 0 else (0.0, np.zeros(d), np.zeros((d, d))))
    return out


def _merge_responsibility_moments(parts):
    return [_merge_moments(list(per_centroid)) for per_centroid in zip(*parts)]


def _block_farthest_row(X, w, reference, n_threads):
    """(squared distance, row) of the block's positive-weight row farthest from the
    centroids C and the rows `added`, reference = (C, added) (ties to the first row), as
    annealing's in-memory `_add_farthest` computes them."""
    C, added = reference
    X = np.ascontiguousarray(X)
    positive = (_weights(w, X.shape[0]) > 0).astype(np.float64)
    dist = _native.assign(X, C, n_threads)[1].astype(np.float64) * positive
    for row in added:
        dist = np.minimum(dist, ((X - row) ** 2).sum(axis=1) * positive)
    i = int(np.argmax(dist))
    return dist[i], X[i].copy()


def _first_farthest(parts):
    """The part of the largest distance; of equal ones the first in block order."""
    best = parts[0]
    for part in parts[1:]:
        if part[0] > best[0]:
            best = part
    return best


def _nearest_block(X, w, nearest):
    """(BlockStats without N and S, labels) of the hard kind at nearest.C for the block:
    `NearestCentroid.hard_stats` (the group-pruned pass where nearest has groups)."""
    X = np.ascontiguousarray(X)
    return nearest.hard_stats(X, _weights(w, X.shape[0]))


def _labels_block(X, C, n_threads):
    if X.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    X = v.check_data(X)
    return _native.assign(X, C.astype(X.dtype), n_threads)[0]


def _nearest_labels_block(X, C, group, n_threads):
    """`_labels_block`'s labels by the group-pruned pass (C's groups made on the client)."""
    if X.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    X = v.check_data(X)
    return NearestCentroid(C.astype(X.dtype), n_threads, group=group)(X)[0]


def _distances_block(X, C, n_threads):
    if X.shape[0] == 0:
        return np.empty((0, C.shape[0]), dtype=X.dtype)
    return euclidean_distances(v.check_data(X), C, n_threads)


def _proba_block(X, C, kind, sigma, n_threads):
    if X.shape[0] == 0:
        return np.empty((0, C.shape[0]), dtype=X.dtype)
    X = v.check_data(X)
    return _native.responsibilities(X, C.astype(X.dtype), kind, sigma, n_threads)


# ---------------------------------------------------------------------- passes


def _stats_pass(passes, C, kind, sigma, n_threads, *, sums=True, labels=False):
    """One block_stats pass over the blocks at C: (merged BlockStats, labels or None)."""
    args = (Shared(C), kind, sigma, n_threads, sums, labels)
    parts = passes.map("block_stats", _block_stats, *args)
    if not labels:
        return passes.merged(parts, _stats.merge, "softkmeans-merge"), None
    # The labels reach the client anyway: the blocks' statistics come with them, merged
    # on the client in the same tree.
    stats, labs = zip(*passes.gather(parts))
    return merge_in_tree(list(stats), _stats.merge), np.concatenate(labs)


# ---------------------------------------------------------------------- input checks


def _is_dask(obj):
    return dask.is_dask_collection(obj)


def _is_dataframe(obj):
    return _is_dask(obj) and hasattr(obj, "dtypes") and hasattr(obj, "to_dask_array")


def _as_array(X, *, lengths):
    """A dask array from a dask array or a dask DataFrame of numeric columns;
    (array, feature names or None). Nothing is computed, except the partition lengths of
    a DataFrame when `lengths` (after its columns are checked)."""
    names = None
    if _is_dataframe(X):
        dtypes = X.dtypes
        if getattr(dtypes, "ndim", 1) == 0:  # a Series
            raise ValueError("X must be 2-dimensional: a Dask DataFrame, not a Series")
        bad = [
            f"{c!r} ({dt})"
            for c, dt in dtypes.items()
            if not (isinstance(dt, np.dtype) and dt.kind in "biuf")
        ]
        if bad:
            raise TypeError(
                "X must have numeric columns only (bool, integer or float); "
                f"these are not: {', '.join(bad)}"
            )
        columns = list(X.columns)
        if columns and all(isinstance(c, str) for c in columns):
            names = np.asarray(columns, dtype=object)
        X = X.to_dask_array(lengths=True if lengths else None)
    elif not isinstance(X, da.Array):
        raise TypeError(f"expected a Dask array or DataFrame; got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional; got shape {X.shape}")
    # The dtype check of the in-memory validation, on an empty array of X's dtype.
    dtype = v.as_float_array(np.empty((0, 0), dtype=X.dtype), "X", ndim=2, allow_empty=True).dtype
    if X.dtype != dtype:
        X = X.astype(dtype)
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X, names


def _known_rows(X):
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            "X has unknown chunk sizes (e.g. after boolean indexing); call "
            "X.compute_chunk_sizes() first, or pass a Dask DataFrame (its partition "
            "lengths are computed)"
        )


def _sample_weight(sample_weight, X):
    """sample_weight as a float64 dask array with the row chunks of X, or None."""
    if sample_weight is None:
        return None
    n = X.shape[0]
    if _is_dataframe(sample_weight) and getattr(sample_weight.dtypes, "ndim", 1) == 0:
        sample_weight = sample_weight.to_dask_array(lengths=True)
    if not _is_dask(sample_weight):
        w = v.check_sample_weight(sample_weight, n)
        return da.from_array(w, chunks=(X.chunks[0],))
    if not isinstance(sample_weight, da.Array) or sample_weight.ndim != 1:
        raise ValueError("sample_weight must be a 1-dimensional Dask array (or NumPy array)")
    if sample_weight.shape[0] != n:
        raise ValueError(f"sample_weight has {sample_weight.shape[0]} entries but X has {n} rows")
    if sample_weight.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"sample_weight's chunks {sample_weight.chunks[0]} must equal X's row chunks "
            f"{X.chunks[0]}; use sample_weight.rechunk((X.chunks[0],))"
        )
    if sample_weight.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must be real numeric; got dtype {sample_weight.dtype}")
    return sample_weight.astype(np.float64)


def _block_scan(X, w):
    """Check the block (finite, not too large; weights finite and >= 0) and return its
    features' (W, mean (d,), M2 (d,)) under the weights (the tolerance)."""
    X = v.check_data(X)
    if w is not None:
        w = v.as_float_array(w, "sample_weight", ndim=1, dtype=np.float64, allow_empty=True)
        if (w < 0).any():
            raise ValueError("sample_weight must be non-negative")
    moments = FeatureMoments(X.shape[1]).add(X, _weights(w, X.shape[0]))
    return moments.W, moments.mean, moments.M2


def _merge_scans(parts):
    moments = FeatureMoments(len(parts[0][1]))
    for part in parts:
        moments.merge(*part)
    return moments.W, moments.mean, moments.M2


def is_collection(X) -> bool:
    """True for a Dask array or DataFrame."""
    return _is_dask(X)


def check_collection(X):
    """The checks of a Dask X made before any task runs (numeric columns, 2-D, dtype):
    raises TypeError/ValueError; returns the feature names (string columns) or None."""
    return _as_array(X, lengths=False)[1]


class DaskSource(Source):
    """A Dask array or DataFrame of numeric columns, read by passes over its row blocks.

    With a distributed client, X and the weights are persisted on the workers while the
    source lives. scan: validate X on the workers in one pass that also yields the
    features' moments (a fit's first pass); otherwise the values are not checked.
    """

    def __init__(self, X, sample_weight=None, *, n_threads=0, scan=False):
        X, _ = _as_array(X, lengths=True)
        _known_rows(X)
        if X.size == 0:
            raise ValueError(f"X must not be empty; got shape {X.shape}")
        w = _sample_weight(sample_weight, X)
        client = _client()
        if client is not None:
            X = client.persist(X)
            w = client.persist(w) if w is not None else None
        self.data, self.weights = X, w
        self.shape = tuple(int(s) for s in X.shape)
        self.dtype = X.dtype
        self.unit_weights = sample_weight is None
        self.rows_per_pass = int(max(X.chunks[0]))
        self.n_threads = n_threads
        self._variances = None
        self.passes = BlockPasses(X, w, client)
        if scan:
            W, _, M2 = self._pass("scan", _block_scan, _merge_scans)
            _check_total_weight(W)
            self._variances = M2 / W

    def close(self):
        """Nothing to release: persisted blocks are freed with the last reference."""

    def _pass(self, name, block_fn, merge, *args):
        """One pass of block_fn over the blocks, its parts merged by `merge`."""
        parts = self.passes.map(name, block_fn, *args)
        return self.passes.merged(parts, merge, f"softkmeans-{name}-merge")

    def stats(self, C, kind, sigma, *, sums=True, labels=False):
        return _stats_pass(self.passes, C, kind, sigma, self.n_threads, sums=sums, labels=labels)

    def nearest_stats(self, C):
        # The centroids grouped once, on the client; each block's pass on its worker.
        parts = self.passes.map(
            "nearest", _nearest_block, Shared(NearestCentroid(C, self.n_threads))
        )
        stats, labs = zip(*self.passes.gather(parts))
        return merge_in_tree(list(stats), _stats.merge), np.concatenate(labs)

    def _blockwise(self, fn, out_index, dtype, meta, *more, **kwargs):
        """fn(X block, C, *more's arrays, **kwargs) lazily over the row blocks; more: pairs
        (whole array of one chunk, its index), like C every task's."""
        C = da.from_array(kwargs.pop("C"), chunks=kwargs["shape"])
        del kwargs["shape"]
        return da.blockwise(
            fn, out_index, self.data, "ij", C, "kj", *more, dtype=dtype, concatenate=True,
            meta=meta, n_threads=self.n_threads, **kwargs,
        )  # fmt: skip

    def labels(self, C, grouping=None):
        # The groups made on the client (kept in grouping across predicts); each block's
        # pruned pass on its worker.
        empty = np.empty(0, dtype=np.int64)
        group = (grouping or CentroidGrouping()).of(C, self.n_threads)
        if group is None:
            return self._blockwise(_labels_block, "i", np.int64, empty, C=C, shape=C.shape)
        groups = da.from_array(group, chunks=group.shape)
        return self._blockwise(
            _nearest_labels_block, "i", np.int64, empty, groups, "k", C=C, shape=C.shape
        )

    def distances(self, C):
        meta = np.empty((0, 0), dtype=self.dtype)
        return self._blockwise(_distances_block, "ik", self.dtype, meta, C=C, shape=C.shape)

    def responsibilities(self, C, kind, sigma):
        meta = np.empty((0, 0), dtype=self.dtype)
        return self._blockwise(
            _proba_block, "ik", self.dtype, meta, C=C, shape=C.shape, kind=kind, sigma=sigma
        )

    def feature_variances(self):
        if self._variances is None:
            self._variances = np.diagonal(self.moments()[1]).copy()
        return self._variances

    def moments(self):
        W, mean, M = self._pass("moments", _block_moments, _merge_moments, self.n_threads)
        _check_total_weight(W)
        return mean, M / W

    def rows(self, idx):
        return np.ascontiguousarray(compute(self.data[np.asarray(idx, dtype=np.int64)])[0])

    def subset(self, idx):
        """The rows idx as a Dask array (gathered and persisted on the workers)."""
        idx = np.asarray(idx, dtype=np.int64)
        weights = None if self.weights is None else self.weights[idx]
        return DaskSource(self.data[idx], weights, n_threads=self.n_threads, scan=True)

    def seeding_source(self, n_clusters, rng):
        """An in-memory uniform sample of max(SAMPLE_ROWS, SAMPLE_ROWS_PER_CLUSTER x k)
        rows (all of X when it has no more), with their weights."""
        n = self.shape[0]
        X, w = self.data, self.weights
        m = max(SAMPLE_ROWS, SAMPLE_ROWS_PER_CLUSTER * n_clusters)
        if n > m:
            idx = np.unique(rng.randint(0, n, size=m))
            X, w = X[idx], (w[idx] if w is not None else None)
        rows, ws = compute(X, w) if w is not None else (compute(X)[0], None)
        if ws is not None and int((ws > 0).sum()) < n_clusters:
            raise ValueError(
                f"the seeding sample has fewer than n_clusters={n_clusters} rows of positive "
                "weight; pass init as an array of centroids"
            )
        return ArraySource(rows, ws, n_threads=self.n_threads, checked=True)

    def parallel_passes(self):
        """k-means||'s passes as block tasks (`softkmeans.sources.dask_parallel`)."""
        blocks = [
            (x, wb, int(rows))
            for (x, wb), rows in zip(delayed_blocks(self.data, self.weights), self.data.chunks[0])
            if rows > 0
        ]
        return DaskParallelPasses(blocks, compute, self.n_threads)

    def farthest(self, C, m, labels=None):
        dist, rows, ws, labs = self._pass(
            "farthest", _block_farthest, _concat_farthest, Shared(C), m, self.n_threads
        )
        if dist.max() == 0:
            return Farthest(dist[:0], rows[:0], ws[:0], labs[:0])
        # NOTE: the same m rows as the in-memory fit; when several clusters are empty at
        # once, which empty cluster gets which row may differ (argpartition order).
        top = np.argsort(-dist, kind="stable")[:m]
        return Farthest(dist[top], np.ascontiguousarray(rows[top]), ws[top], labs[top])

    def positive(self):
        return None if self.weights is None else compute(self.weights > 0)[0]

    def n_distinct_rows(self):
        positive = self.positive()
        rows = compute(self.data if positive is None else self.data[positive])[0]
        return np.unique(rows, axis=0).shape[0]

    def augmented(self):
        """[X, 0], lazily: each pass augments its blocks on the workers."""
        d = self.shape[1] + 1
        source = copy.copy(self)
        source.data = self.data.map_blocks(
            _augment, chunks=(self.data.chunks[0], (d,)), dtype=self.dtype
        )
        source.shape = (self.shape[0], d)
        source.passes = self.passes.prepared(_augment, source.data)
        return source

    def responsibility_moments(self, Ca, kind, sigma):
        """One pass: the per-centroid moments of each block, merged in block order."""
        args = (Shared(Ca), kind, sigma, self.n_threads)
        block_fn, merge = _block_responsibility_moments, _merge_responsibility_moments
        merged = self._pass("anneal-moments", block_fn, merge, *args)
        return [(U, mean, M / U) if U > 0 else (U, None, None) for U, mean, M in merged]

    def add_farthest(self, C, k):
        """The in-memory greedy choice, one pass per added centroid."""
        C = np.ascontiguousarray(C, dtype=self.dtype)
        added = []
        while C.shape[0] + len(added) < k:
            reference = Shared((C, list(added)))
            farthest = self._pass(
                "farthest", _block_farthest_row, _first_farthest, reference, self.n_threads
            )
            added.append(farthest[1])
        return np.vstack([C, *added]).astype(self.dtype) if added else C


def _augment(X):
    """A block with a zero last column (annealing's prior coordinate)."""
    Xa = np.zeros((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
    Xa[:, :-1] = X
    return Xa


def _check_total_weight(W):
    if not W > 0:
        raise ValueError("sample_weight must have a positive sum")
    if not np.isfinite(W):
        raise ValueError("sample_weight must have a finite sum; rescale the weights")
