"""The balanced assignment's reads of X (`softkmeans.fit.balanced`), each a pass run by
`softkmeans.sources.runner` in this process or on Dask alike."""

from __future__ import annotations

import numpy as np

from .. import _native
from ..sources.runner import Pass, RowMap, concat, run

__all__ = ["candidates", "label_sums", "sq_distances"]

# Bytes of (rows, k) float64 distances, or of float64 rows, formed at a time.
_CHUNK_BYTES = 1 << 22


def _candidates_block(rows, w, start, C, m, n_threads):
    """The block's (cand (b, m), dist (b, m), beyond (b,)), ~4 MiB of distances at a time."""
    b, k = rows.shape[0], C.shape[0]
    cand = np.empty((b, m), dtype=np.int64)
    dist = np.empty((b, m), dtype=np.float64)
    beyond = np.full(b, np.inf)
    step = max(1, _CHUNK_BYTES // (8 * k))
    for s in range(0, b, step):
        D = _native.sq_distances(rows[s : s + step], C, n_threads)
        out = slice(s, s + D.shape[0])
        part = np.argpartition(D, m, axis=1)
        cand[out] = part[:, :m]
        dist[out] = np.take_along_axis(D, part[:, :m], axis=1)
        beyond[out] = np.take_along_axis(D, part[:, m : m + 1], axis=1)[:, 0]
    return cand, dist, beyond


CANDIDATES = Pass("balanced-candidates", _candidates_block, concat)


def candidates(source, C, m):
    """The m nearest centroids of every row, for a balanced assignment: (cand (n, m)
    int64, their squared distances (n, m) float64, the (m + 1)-th smallest distance
    (n,) float64, a lower bound on every other centroid's; inf when m >= k). One pass;
    (rows, k) distances exist ~4 MiB at a time, never (n, k)."""
    n, k = source.shape[0], C.shape[0]
    if m >= k:  # (n, k) is the output: one kernel call a block
        return np.broadcast_to(np.arange(k), (n, k)), sq_distances(source, C), np.full(n, np.inf)
    return run(source, CANDIDATES, C, m, source.n_threads)


def _sq_distances_block(rows, C, n_threads):
    return _native.sq_distances(rows, C, n_threads).astype(np.float64)


SQ_DISTANCES = RowMap("balanced-sq-distances", _sq_distances_block, np.float64, 2)


def sq_distances(source, C):
    """D (n, k) float64, D_ij = ||x_i - c_j||^2 (the kernel's, in X's dtype), in this
    process (a Dask source's row map computed: the auction reads it here)."""
    return np.asarray(run(source, SQ_DISTANCES, C, source.n_threads))


def _label_sums_block(rows, w, start, labels, k):
    """S (k, d) float64 of the block, accumulated ~4 MiB of float64 rows at a time."""
    from scipy import sparse

    S = np.zeros((k, rows.shape[1]))
    step = max(1, _CHUNK_BYTES // (8 * rows.shape[1]))
    for s in range(0, rows.shape[0], step):
        chunk = rows[s : s + step].astype(np.float64)
        lo, hi = start + s, start + s + chunk.shape[0]
        onehot = sparse.csr_matrix(
            (w[s : s + chunk.shape[0]], (labels[lo:hi], np.arange(hi - lo))), shape=(k, hi - lo)
        )
        part = onehot @ chunk
        S += part.toarray() if sparse.issparse(part) else part
    return S


def _sum_in_order(parts):
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


LABEL_SUMS = Pass("balanced-label-sums", _label_sums_block, _sum_in_order)


def label_sums(source, labels, k):
    """S (k, d) float64, S_j = sum of w_i x_i over the rows labelled j (the centroid
    step of a given assignment)."""
    return run(source, LABEL_SUMS, np.asarray(labels), k)
