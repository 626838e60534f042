"""What the fit asks of a source that is not a pass over every row: the features'
variances (the tolerance), which weights are positive, the number of distinct rows (a
warning's cause), the rows seeding draws from, and k-means||'s passes.

Each is one function of a source, here where the kinds of source are known; what reads
X (or a Dask source's weights) is a pass of the runner, in this process or on Dask.
"""

from __future__ import annotations

import numpy as np

from .. import _sparse
from .dense import FEATURE_MOMENTS, FeatureMoments
from .kmeans_parallel_blocks import LocalParallelPasses
from .reads import moments
from .runner import Pass, concat, run

__all__ = [
    "DISTINCT_ROWS",
    "POSITIVE",
    "WEIGHTS",
    "feature_variances",
    "kmeans_parallel_passes",
    "n_distinct_rows",
    "positive",
    "seeding_sample",
    "weights",
]


def feature_variances(source):
    """(d,) float64: the weighted variance of each feature (kept once computed; a fit's
    validation pass computes it)."""
    if source.variances is None:
        if source.kind == "csr":
            source.variances = source.covariance()[1].diagonal()
        elif source.kind == "dask":
            source.variances = np.diagonal(moments(source)[1]).copy()
        else:
            parts = run(source, FEATURE_MOMENTS)
            source.variances = FeatureMoments(source.shape[1]).add_all(parts).variances()
    return source.variances


def positive(source):
    """(n,) bool, w > 0, or None when every weight is positive (a Dask source's weights
    read by the `POSITIVE` pass; an in-process source holds them in memory)."""
    if source.unit_weights:
        return None
    out = run(source, POSITIVE) if source.kind == "dask" else source.weights > 0
    return None if out.all() else out


def weights(source):
    """(n,) float64: the weights in this process (all ones without sample_weight), for
    a solver that runs here on every row (a balanced fit's): a Dask source's read by the
    `WEIGHTS` pass, an in-process source's those it holds."""
    if source.kind != "dask":
        return source.weights
    if source.unit_weights:
        return np.ones(source.shape[0])
    return run(source, WEIGHTS)


def _weights_block(rows, w, start):
    return w


# The weights, block by block (a Dask source's live on its workers).
WEIGHTS = Pass("weights", _weights_block, concat)


def _positive_block(rows, w, start):
    return w > 0


# Which weights are positive, block by block (a Dask source's weights live on its workers).
POSITIVE = Pass("positive", _positive_block, concat)


def n_distinct_rows(source):
    """The number of distinct rows of positive weight (for cosine: of distinct
    directions, the rows as normalized)."""
    return len(run(source, DISTINCT_ROWS))


def _distinct_block(rows, w, start):
    """The distinct rows of positive weight of a block: an array of rows (dense), a
    sorted list of row keys (CSR, `softkmeans._sparse.distinct_rows`)."""
    kept = rows[w > 0]
    if _sparse.is_sparse(kept):
        return _sparse.distinct_rows(kept)
    return distinct_dense_rows(kept)


def _distinct_merge(parts):
    if isinstance(parts[0], list):
        return sorted(set().union(*parts))
    return distinct_dense_rows(np.concatenate(parts))


def distinct_dense_rows(rows):
    """The distinct rows of a dense (m, d) array, equal by value as `np.unique(rows,
    axis=0)` counts them (-0.0 is 0.0), each at its first place in `rows`.

    `np.unique(axis=0)` sorts the rows lexicographically, O(m log m) comparisons of d
    values (0.7 s at 2e5 x 64, a third of a 20-step fit it only warns for); here each
    row is hashed to 64 bits and the hashes are sorted. Equal rows have equal hashes; a
    run of equal hashes holding two different rows (a collision) shows as two adjacent
    different rows, and the rows are then np.unique's.
    """
    rows = np.ascontiguousarray(rows)
    if rows.shape[0] < 2:
        return rows
    hashes = _row_hashes(rows)
    order = np.argsort(hashes, kind="stable")
    same_hash = hashes[order[1:]] == hashes[order[:-1]]
    later, earlier = order[1:][same_hash], order[:-1][same_hash]
    if not np.array_equal(rows[later], rows[earlier]):  # a collision: rows of one hash differ
        return np.unique(rows, axis=0)
    first = np.ones(rows.shape[0], dtype=bool)
    first[later] = False  # a stable sort: the earlier row of an equal pair comes first
    return rows[first]


def _row_hashes(rows, chunk_rows=8192):
    """A 64-bit hash of each row's bytes: its 32-bit words times fixed random odd
    multipliers, summed mod 2^64 (two different rows collide with odds about 2^-32 at
    worst), then mixed (splitmix64's finalizer) so the sort sees spread keys."""
    multipliers = _hash_multipliers(rows.shape[1] * rows.dtype.itemsize // 4)
    h = np.empty(rows.shape[0], dtype=np.uint64)
    for a in range(0, rows.shape[0], chunk_rows):  # bounded temporaries
        block = rows[a : a + chunk_rows] + rows.dtype.type(0)  # -0.0 + 0 is +0.0: equal rows
        words = block.view(np.uint32).reshape(block.shape[0], -1)  # hash equal
        h[a : a + chunk_rows] = words.astype(np.uint64) @ multipliers
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    return h ^ (h >> np.uint64(32))


def _hash_multipliers(n):
    """n fixed odd 64-bit multipliers (the same in every process: a Dask worker's
    block hashes as this process's)."""
    return np.random.default_rng(0x5EED).integers(1, 2**63, size=n, dtype=np.uint64) | 1


# The distinct rows of positive weight of X, in this process or on Dask (their number:
# `n_distinct_rows`).
DISTINCT_ROWS = Pass("distinct_rows", _distinct_block, _distinct_merge)


def seeding_sample(source, n_clusters, rng):
    """The in-process source k-means++ and "random" draw from: the source itself, or a
    Dask source's uniform sample (`softkmeans.sources.dask_source.seeding_sample`)."""
    if source.kind == "dask":
        from .dask_source import seeding_sample as dask_sample

        return dask_sample(source, n_clusters, rng)
    return source


def kmeans_parallel_passes(source):
    """k-means||'s passes over X (`softkmeans.sources.kmeans_parallel_blocks`): in this
    process, or as block tasks on Dask (`softkmeans.sources.kmeans_parallel_dask`)."""
    if source.kind == "dask":
        from .dask_source import kmeans_parallel_passes as dask_passes

        return dask_passes(source)
    return LocalParallelPasses(source)
