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
    """The distinct rows of positive weight of a block, sorted: an array of rows (dense),
    a list of row keys (CSR, `softkmeans._sparse.distinct_rows`)."""
    kept = rows[w > 0]
    if _sparse.is_sparse(kept):
        return _sparse.distinct_rows(kept)
    return np.unique(kept, axis=0)


def _distinct_merge(parts):
    if isinstance(parts[0], list):
        return sorted(set().union(*parts))
    return np.unique(np.concatenate(parts), axis=0)


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
