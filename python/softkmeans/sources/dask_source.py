"""`DaskSource`: a Dask array or DataFrame as a data source (`softkmeans.sources`).

Imported only when a Dask collection is given (the ``softkmeans[dask]`` extra). The fit
(`softkmeans.fit`) is the in-memory one; each read of X is a pass (`softkmeans.sources.
runner`: the same block functions and merges as in this process) over the chunks:

- **A pass** maps its block function over the row blocks on the workers
  (`softkmeans.sources.dask_passes`: with a distributed client, one call per worker on
  the persisted blocks it holds, else tasks on the blocks' futures; otherwise a
  ``dask.delayed`` graph). The centroids travel with the pass.
- **The merge** of the partial results is the runner's fixed tree of merges of
  consecutive blocks, in block order, whose shape depends only on the number of blocks,
  so the result does not depend on which worker computed what, or when (and equals the
  in-process runner's over the same blocks, byte for byte). Only the partials of at most
  8 groups of blocks reach the client.
- **The update** c_j+ = S_j / N_j (`softkmeans._stats.step_result`) and the loop
  (`softkmeans.fit.steps.run_steps`) run on the client.

A fit from the same initial centroids therefore equals the in-memory fit up to the
rounding of the block sums (float64: ~1e-15 relative), with the same labels; the chunking
changes nothing beyond that rounding.

What this means for users (memory, seeding, lazy predictions, annealing, streaming) is
in `softkmeans.dask`.
"""

from __future__ import annotations

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "softkmeans.dask needs Dask: pip install 'softkmeans[dask]' "
        "(dask[array,dataframe] and distributed)"
    ) from exc

from .. import _validation as v
from .base import Source
from .dask_passes import BlockPasses, compute, delayed_blocks
from .dense import ArraySource, FeatureMoments
from .kmeans_parallel_dask import DaskParallelPasses
from .runner import Pass, run, transformed

__all__ = [
    "DaskSource",
    "check_collection",
    "is_collection",
    "kmeans_parallel_passes",
    "seeding_sample",
]

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


def _beside(w, X):
    """w with each block computed on the worker of X's (persisted) block, the larger
    input of its task: a pass then finds both in one place (`softkmeans.sources.
    dask_resident`; a replica of w's block moved there would be dropped again by the
    scheduler's memory manager)."""
    return da.blockwise(_first, "i", w, "i", X, "ij", dtype=w.dtype, concatenate=True)


def _first(w, X):
    return w


def _block_scan(X, w, start):
    """Check the block (finite, not too large; weights finite and >= 0) and return its
    features' (W, mean (d,), M2 (d,)) under the weights (the tolerance)."""
    X = v.check_data(X)
    w = v.as_float_array(w, "sample_weight", ndim=1, dtype=np.float64, allow_empty=True)
    if (w < 0).any():
        raise ValueError("sample_weight must be non-negative")
    moments = FeatureMoments(X.shape[1]).add(X, w)
    return moments.W, moments.mean, moments.M2


def _merge_scans(parts):
    moments = FeatureMoments(len(parts[0][1]))
    for part in parts:
        moments.merge(*part)
    return moments.W, moments.mean, moments.M2


SCAN = Pass("scan", _block_scan, _merge_scans)


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
            w = client.persist(_beside(w, X)) if w is not None else None
        self.data, self.weights = X, w
        self.shape = tuple(int(s) for s in X.shape)
        self.dtype = X.dtype
        self.unit_weights = sample_weight is None
        self.kind = "dask"
        self.rows_per_pass = int(max(X.chunks[0]))
        self.n_threads = n_threads
        self.variances = None
        self.block_passes = BlockPasses(X, w, client)
        if scan:
            W, _, M2 = run(self, SCAN)
            _check_total_weight(W)
            self.variances = M2 / W

    def close(self):
        """Nothing to release: persisted blocks are freed with the last reference."""

    def blocks(self):
        raise TypeError("a Dask source's blocks are its chunks, read by its runner")

    def rows(self, idx):
        rows = np.ascontiguousarray(compute(self.data[np.asarray(idx, dtype=np.int64)])[0])
        return transformed(rows, self.transforms)

    def subset(self, idx):
        """The rows idx as a Dask array (gathered and persisted on the workers)."""
        idx = np.asarray(idx, dtype=np.int64)
        weights = None if self.weights is None else self.weights[idx]
        return DaskSource(self.data[idx], weights, n_threads=self.n_threads, scan=True)


def seeding_sample(source, n_clusters, rng):
    """An in-memory uniform sample of max(SAMPLE_ROWS, SAMPLE_ROWS_PER_CLUSTER x k) rows
    of a `DaskSource` (all of X when it has no more), with their weights."""
    n = source.shape[0]
    X, w = source.data, source.weights
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
    return ArraySource(transformed(rows, source.transforms), ws, n_threads=source.n_threads,
                       checked=True)  # fmt: skip


def kmeans_parallel_passes(source):
    """k-means||'s passes as block tasks (`softkmeans.sources.kmeans_parallel_dask`)."""
    X, w = source.data, source.weights
    blocks = [
        (x, wb, int(rows))
        for (x, wb), rows in zip(delayed_blocks(X, w), X.chunks[0])
        if rows > 0
    ]
    return DaskParallelPasses(blocks, compute, source.n_threads)


def _check_total_weight(W):
    if not W > 0:
        raise ValueError("sample_weight must have a positive sum")
    if not np.isfinite(W):
        raise ValueError("sample_weight must have a finite sum; rescale the weights")
