"""Annealing's own reads of X, each a pass (`softkmeans.sources.runner`), run in this
process or on Dask alike:

- `responsibility_moments`: each width's split test (and split-merge's), the moments of
  X under each centroid's responsibilities at the augmented centroids;
- `add_farthest`: a cooling that ends short of k centroids adds the farthest rows, one
  pass per added centroid.
"""

from __future__ import annotations

import numpy as np

from .. import _native, _stats
from ..sources.block_ops import dense_row, sq_distances_to_row, weighted_moments
from ..sources.reads import augment
from ..sources.runner import Pass, run

__all__ = ["add_farthest", "responsibility_moments"]


def _moments_block(rows, w, start, Ca, kind, sigma, n_threads):
    """[(U_j, mean_j, cov_j)] of the block (mean, cov None where U_j <= 0)."""
    R = _native.responsibilities(augment(rows), Ca, kind, sigma, n_threads)
    out = []
    for j in range(Ca.shape[0]):
        u = w * R[:, j].astype(np.float64)
        U = float(u.sum())
        out.append((U, *weighted_moments(rows, u, n_threads)) if U > 0 else (0.0, None, None))
    return out


def _merge_moments(parts):
    """Per centroid, the blocks' moments merged in block order (`_stats.merge_moments`)."""
    out = []
    for blocks in zip(*parts):
        positive = [b for b in blocks if b[0] > 0]
        if not positive:
            out.append((0.0, None, None))
        elif len(positive) == 1:
            out.append(positive[0])
        else:
            out.append(_stats.merge_moments(positive))
    return out


RESPONSIBILITY_MOMENTS = Pass("anneal-moments", _moments_block, _merge_moments)


def responsibility_moments(source, Ca, kind, sigma):
    """[(U_j, mean_j (d,), cov_j (d, d))]: the moments of X under the weights w r_j, r the
    responsibilities of [X, 0] at Ca (mean, cov None where U_j <= 0)."""
    Ca = np.ascontiguousarray(Ca, dtype=source.dtype)
    return run(source, RESPONSIBILITY_MOMENTS, Ca, kind, sigma, source.n_threads)


def _farthest_block(rows, w, start, C, added, n_threads):
    """(squared distance, row) of the block's positive-weight row farthest from the
    centroids C and the rows `added` (ties to the first row)."""
    positive = (w > 0).astype(np.float64)
    dist = _native.assign(rows, C, n_threads)[1].astype(np.float64) * positive
    for row in added:
        dist = np.minimum(dist, sq_distances_to_row(rows, row, n_threads) * positive)
    i = int(np.argmax(dist))
    return dist[i], dense_row(rows, i)


def _first_farthest(parts):
    """The part of the largest distance; of equal ones the first in block order."""
    best = parts[0]
    for part in parts[1:]:
        if part[0] > best[0]:
            best = part
    return best


FARTHEST_ROW = Pass("add-farthest", _farthest_block, _first_farthest)


def add_farthest(source, C, k):
    """C (m, d) extended to k rows, one at a time, by the positive-weight row farthest
    from all centroids so far (ties to the first row): one pass per added row."""
    C = np.ascontiguousarray(C, dtype=source.dtype)
    added = []
    while C.shape[0] + len(added) < k:
        _, row = run(source, FARTHEST_ROW, C, tuple(added), source.n_threads)
        added.append(np.asarray(row, dtype=source.dtype))
    return np.vstack([C, *added]).astype(source.dtype) if added else C
