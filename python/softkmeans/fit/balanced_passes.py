"""The balanced assignment's reads of X (`softkmeans.fit.balanced`), each a pass run by
`softkmeans.sources.runner` in this process or on Dask alike."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _balance, _native, _stats
from ..sources.runner import Pass, RowMap, concat, run

__all__ = ["BIASED", "BiasedPass", "biased_pass", "candidates", "kernel_rows", "label_sums",
           "sq_distances"]  # fmt: skip

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


class BiasedPass(NamedTuple):
    """One pass at offsets g: labels (n,) int64, gap (n,) and dist (n,) = D at the label
    (X's dtype), the BlockStats at those labels, and each row's best biased columns
    within a band, at most m (`_native.biased_hard_stats_candidates`: cand (n, m) int32,
    cand_dist (n, m), floor (n,); m = 0: none)."""

    labels: np.ndarray
    gap: np.ndarray
    dist: np.ndarray
    stats: _stats.BlockStats
    cand: np.ndarray
    cand_dist: np.ndarray
    floor: np.ndarray


def _unfused_candidates(D, g, m, band):
    """(cand, cand_dist, floor) of `_native.biased_hard_stats_candidates` from D (rows, k)
    by their definition (NumPy, in D's dtype)."""
    if m == 0:
        none = np.empty((D.shape[0], 0), dtype=D.dtype)
        return none.astype(np.int32), none, np.empty(0, dtype=D.dtype)
    v = D - np.asarray(g, dtype=np.float64).astype(D.dtype)
    order = np.argsort(v, axis=1, kind="stable")[:, :m]
    sorted_v = np.take_along_axis(v, order, axis=1)
    bar = (sorted_v[:, 0] + D.dtype.type(band)).astype(D.dtype)
    held = sorted_v < bar[:, None]
    cand = np.where(held, order, -1).astype(np.int32)
    cand_dist = np.where(held, np.take_along_axis(D, order, axis=1), 0).astype(D.dtype)
    floor = np.where(held[:, -1], sorted_v[:, -1], bar).astype(D.dtype)
    return cand, cand_dist, floor


def _unfused_block(rows, C, g, w, n_threads, m, band):
    """The pass over one block by its definition: the kernel's D (rows, k), then
    `_balance.biased_argmin`, the candidates and the sums (CSR blocks, which no fused
    kernel reads)."""
    from scipy import sparse

    D = _native.sq_distances(rows, C, n_threads)
    labels, gap = _balance.biased_argmin(D, g)
    dist = D[np.arange(D.shape[0]), labels]
    k = C.shape[0]
    onehot = sparse.csr_matrix((w, (labels, np.arange(labels.size))), shape=(k, labels.size))
    S = onehot @ rows.astype(np.float64)
    S = S.toarray() if sparse.issparse(S) else np.asarray(S)
    N = np.bincount(labels, w, minlength=k)
    J = float(w @ dist.astype(np.float64))
    stats = _stats.BlockStats(float(w.sum()), N, S, J, J, np.nan)
    return (labels, gap, dist, stats, *_unfused_candidates(D, g, m, band))


def _biased_block(rows, w, start, C, g, n_threads, m, band):
    """The block's `BiasedPass` fields: the fused native pass for a dense block, the
    unfused one for a CSR block (which no fused kernel reads)."""
    if not isinstance(rows, np.ndarray):
        return _unfused_block(rows, C, g, w, n_threads, m, band)
    return _native.biased_hard_stats_candidates(rows, C, g, w, n_threads, m, band)


def _merge_biased(parts):
    """Consecutive blocks' fields in block order: the rows' arrays concatenated, the
    statistics added in order (`_stats.merge`)."""
    labels, gap, dist, stats, cand, cand_dist, floor = zip(*parts)
    return (
        np.concatenate(labels), np.concatenate(gap), np.concatenate(dist), _stats.merge(stats),
        np.concatenate(cand), np.concatenate(cand_dist), np.concatenate(floor),
    )  # fmt: skip


# args: C (k, d) in X's dtype, g (k,) float64, n_threads, m, band.
BIASED = Pass("balanced-biased", _biased_block, _merge_biased)


def biased_pass(source, C, g, m=0, band=np.inf):
    """`BiasedPass` of every row of a source at centroids C (X's dtype) and offsets g
    (k,) float64, with at most m candidates a row within band of its best: the `BIASED`
    pass, run by the runner (in this process or on Dask; the rows' fields come back to
    this process, where the repair runs)."""
    g = np.ascontiguousarray(g, dtype=np.float64)
    return BiasedPass(*run(source, BIASED, C, g, source.n_threads, m, float(band)))


def kernel_rows(source, idx):
    """The rows idx of the source as its kernels read them (CSR stays CSR: the CSR
    kernel's distances are not the dense one's bits)."""
    if source.kind == "csr":
        return source.data[idx]
    return np.ascontiguousarray(source.rows(idx))
