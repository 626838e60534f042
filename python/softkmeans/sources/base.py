"""The data-source protocol (`Source`) and what every in-process source shares (`LocalSource`).

A source binds X (n, d) and its weights w (n,) after validation, and answers every read a
fit or a prediction makes, each as one pass over X (or a few, named below). The callers
(`softkmeans.fit`, the estimators, the functional API) hold the policy; a source only
reads. Its methods, by who needs them:

- every pass of the fit loop: `stats` (SPEC.md, "Block statistics");
- predict / transform / predict_proba: `labels`, `distances`, `responsibilities` (and
  a `LocalSource`'s `map_rows` for the functional API);
- the tolerance: `feature_variances`; the critical width (only when asked): `moments`;
- seeding: `seeding_source` (a `LocalSource`: X, or a sample of it) and its
  `seeding_passes` and `rows` (k-means++, "random"); `parallel_passes` (k-means||'s
  passes over all of X, `softkmeans.sources.parallel`) and `rows`;
- empty clusters: `farthest` (relocation), `positive`, `n_distinct_rows` (the warning);
- annealing: `augmented`, `responsibility_moments`, `add_farthest`;
- the bounded hard step, which keeps per-row state between passes: `dense_array`;
- a fit on a training sample (`softkmeans.fit.sampled`): `subset`.

``n_threads`` (an int, 0: the OpenMP default) is the thread count of the native calls;
the fit sets it once it knows k.
"""

from __future__ import annotations

import abc
from typing import NamedTuple

import numpy as np

from .. import _native, _stats
from .. import _validation as v
from .._covariance import DENSE_D, Covariance
from .nearest import NearestCentroid
from .parallel import LocalParallelPasses


class Farthest(NamedTuple):
    """The m rows farthest from their nearest centroid (relocation of empty clusters)."""

    dist: np.ndarray  # (m,) squared distances, X's dtype
    rows: np.ndarray  # (m, d) dense, X's dtype
    weights: np.ndarray  # (m,) float64
    labels: np.ndarray  # (m,) int64, their labels at the centroids


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


def check_weights(sample_weight, n, fit=False):
    """Validated (n,) float64 weights (None: all ones); for a fit, all zeros get their
    own message (the functional API's is `softkmeans._validation`'s)."""
    try:
        return v.check_sample_weight(sample_weight, n)
    except ValueError:
        if fit and sample_weight is not None:
            arr = np.asarray(sample_weight)
            if arr.ndim == 1 and arr.size == n and arr.dtype.kind in "biuf" and not arr.any():
                raise ValueError(
                    "sample_weight is all zero: at least one weight must be positive"
                ) from None
        raise


class Source(abc.ABC):
    """What reads X. Attributes: ``shape`` (n, d), ``dtype`` (float32 or float64),
    ``data`` (X as validated: what a callable ``init`` receives), ``unit_weights`` (no
    sample_weight was given), ``rows_per_pass`` (the most rows one native call reads: the
    thread count is chosen by it), ``n_threads``, ``on_block``."""

    shape: tuple
    dtype: np.dtype
    data: object
    unit_weights: bool
    n_threads: int = 0
    # Called as on_block(rows done, n) after each block of a pass, where the source reads
    # X in several blocks (a large memory-mapped file): the progress of a long pass.
    on_block = None

    @abc.abstractmethod
    def stats(self, C, kind, sigma, *, sums=True, labels=False):
        """One fused pass at C: (BlockStats, labels (n,) int64 or None)."""

    @abc.abstractmethod
    def labels(self, C, grouping=None):
        """(n,) int64: the nearest centroid of each row (`predict`); grouping: a
        `softkmeans.sources.nearest.CentroidGrouping` the caller keeps for its centroids,
        where the source prunes by groups (None: decided for this call)."""

    @abc.abstractmethod
    def distances(self, C):
        """(n, k) Euclidean distances to the centroids, X's dtype (`transform`)."""

    @abc.abstractmethod
    def responsibilities(self, C, kind, sigma):
        """(n, k) responsibilities of `kind` at width sigma, X's dtype (`predict_proba`)."""

    @abc.abstractmethod
    def feature_variances(self):
        """(d,) float64: the weighted variance of each feature."""

    @abc.abstractmethod
    def moments(self):
        """(weighted mean (d,), weighted population covariance (d, d) or an operator with
        ``diagonal()`` and ``lambda_max()``)."""

    @abc.abstractmethod
    def rows(self, idx):
        """Rows X[idx] as a dense (len(idx), d) array of X's dtype."""

    @abc.abstractmethod
    def seeding_source(self, n_clusters, rng):
        """The in-process source k-means++ and "random" draw from (self, or a sample)."""

    @abc.abstractmethod
    def parallel_passes(self):
        """k-means||'s passes over X (`softkmeans.fit.kmeans_parallel`): an object with
        ``first(seed)`` (the first candidate's row index), ``update(C)`` (one pass: each
        row's distance to its nearest candidate, C appended; returns the potential),
        ``draw(seed, round_, scale)`` (the row indices drawn, sorted) and
        ``candidate_weights()``, as `softkmeans.sources.parallel.LocalParallelPasses`."""

    @abc.abstractmethod
    def farthest(self, C, m, labels=None):
        """`Farthest` for the m rows farthest from their nearest centroid of C, as
        scikit-learn's relocation picks them; labels: the labels at C when known."""

    @abc.abstractmethod
    def positive(self):
        """(n,) bool, w > 0, or None when every weight is positive."""

    @abc.abstractmethod
    def n_distinct_rows(self):
        """The number of distinct rows of positive weight."""

    @abc.abstractmethod
    def augmented(self):
        """The source of [X, 0] (n, d + 1): annealing's prior coordinate."""

    @abc.abstractmethod
    def responsibility_moments(self, Ca, kind, sigma):
        """[(U_j, mean_j (d,), cov_j (d, d))]: the moments of X under the weights
        w r_j, r the responsibilities of [X, 0] at Ca (mean, cov None where U_j <= 0)."""

    @abc.abstractmethod
    def add_farthest(self, C, k):
        """C (m, d) extended to k rows, one at a time, by the positive-weight row farthest
        from all centroids so far (ties to the first row)."""

    @abc.abstractmethod
    def subset(self, idx):
        """The source of the rows X[idx] (idx sorted, distinct) with their weights, read
        the way X is (in memory, from a temporary file when X is file-backed, on the
        Dask workers); the caller closes it."""

    def nearest_stats(self, C):
        """The hard statistics at C without N and S, and every row's label: those of
        `stats` (labels and the minimum margin bit for bit, J within rounding), by the
        group-pruned pass where the source has it (a sampled fit's final pass)."""
        return self.stats(C, "hard", 0.0, sums=False, labels=True)

    def close(self):  # noqa: B027 - most sources hold nothing to release
        """Release what the source holds beyond X (a temporary file)."""

    def dense_array(self):
        """X as one C-contiguous in-memory array, or None (the bounded step needs one)."""
        return None


class LocalSource(Source):
    """A source in this process: X is read as row blocks (`blocks`), each a C-contiguous
    array or a CSR matrix the native kernels take; statistics of several blocks merge in
    block order. With one block every result is the kernels' own, bit for bit."""

    def __init__(self, shape, n_threads=0):
        """Subclasses set ``data`` and ``dtype``, then call `set_weights`."""
        self.shape = tuple(int(s) for s in shape)
        self.rows_per_pass = self.shape[0]
        self.n_threads = n_threads

    def set_weights(self, sample_weight, fit=False):
        """Validate and hold the weights (None: all ones); fit: a fit's messages."""
        self.weights = check_weights(sample_weight, self.shape[0], fit)
        self.unit_weights = sample_weight is None

    @abc.abstractmethod
    def seeding_passes(self, n_candidates):
        """k-means++'s passes over X (`softkmeans.sources.seeding`), for at most
        n_candidates candidates a centre."""

    @abc.abstractmethod
    def blocks(self, augmented=False):
        """(start, stop, rows) over X in order; augmented: rows of [X, 0]. A block may be
        a reused buffer, valid until the next."""

    # What differs between dense and CSR blocks (the dense way here).

    def block_sq_distances(self, rows, C, labels):
        """||x_i - c_{labels_i}||^2 of a block, X's dtype, ~4 MiB of rows at a time (the
        same per-row sums without two temporaries of the block's size)."""
        out = np.empty(rows.shape[0], dtype=rows.dtype)
        step = max(1, (1 << 22) // (rows.shape[1] * rows.itemsize))
        for s in range(0, rows.shape[0], step):
            out[s : s + step] = ((rows[s : s + step] - C[labels[s : s + step]]) ** 2).sum(axis=1)
        return out

    def block_sq_distances_to(self, rows, row):
        """||x_i - row||^2 of a block (row dense (d,))."""
        return ((rows - row) ** 2).sum(axis=1)

    def block_moments(self, rows, w):
        """(mean, covariance) of a block's rows under weights w: the (d, d) array up to
        DENSE_D features, an operator beyond (`softkmeans._covariance`)."""
        cov = Covariance.of(rows, w, self.n_threads)
        return cov.mean, cov.dense() if cov.d <= DENSE_D else cov

    def paired_blocks(self):
        """(start, stop, rows of X, rows of [X, 0]) in order (the two `blocks` in step)."""
        for (start, stop, rows), (_, _, rows_a) in zip(self.blocks(), self.blocks(True)):
            yield start, stop, rows, rows_a

    def stats(self, C, kind, sigma, *, sums=True, labels=False):
        def block(rows, w):
            stats, lab, _ = _native.block_stats(
                rows, C, kind, sigma, w, self.n_threads, sums=sums, labels=labels
            )
            return stats, lab

        merged, labs = self._merged_blocks(block)
        return merged, (_concat(labs) if labels else None)

    def nearest_stats(self, C):
        nearest = NearestCentroid(C, self.n_threads)
        merged, labs = self._merged_blocks(nearest.hard_stats)
        return merged, _concat(labs)

    def _merged_blocks(self, block):
        """block(rows, w) -> (BlockStats, labels) over the blocks: (the statistics merged
        in block order, [labels of each block])."""
        parts, labs = [], []
        for start, stop, rows in self.blocks():
            stats, lab = block(rows, self.weights[start:stop])
            parts.append(stats)
            labs.append(lab)
        return (parts[0] if len(parts) == 1 else _stats.merge(parts)), labs

    def gradients(self, C, kind, sigma):
        """(BlockStats, dF/dx_i (n, d) in X's dtype): the functional API's gradients."""
        parts, grads = [], []
        for start, stop, rows in self.blocks():
            stats, _, grad = _native.block_stats(
                rows, C, kind, sigma, self.weights[start:stop], self.n_threads, grad_x=True
            )
            parts.append(stats)
            grads.append(grad)
        return (parts[0] if len(parts) == 1 else _stats.merge(parts)), _concat(grads)

    def labels(self, C, grouping=None):
        nearest = NearestCentroid(C, self.n_threads, grouping)
        return self.map_rows(lambda rows: nearest(rows)[0])

    def distances(self, C):
        return self.map_rows(lambda rows: euclidean_distances(rows, C, self.n_threads))

    def responsibilities(self, C, kind, sigma):
        return self.map_rows(
            lambda rows: _native.responsibilities(rows, C, kind, sigma, self.n_threads)
        )

    def candidates(self, C, m):
        """The m nearest centroids of every row, for a balanced assignment: (cand (n, m)
        int64, their squared distances (n, m) float64, the (m + 1)-th smallest distance
        (n,) float64, a lower bound on every other centroid's; inf when m >= k). One pass;
        (rows, k) distances exist ~4 MiB at a time, never (n, k)."""
        n, k = self.shape[0], C.shape[0]
        if m >= k:  # (n, k) is the output: one kernel call a block
            return np.broadcast_to(np.arange(k), (n, k)), self.sq_distances(C), np.full(n, np.inf)
        cand = np.empty((n, m), dtype=np.int64)
        dist = np.empty((n, m), dtype=np.float64)
        beyond = np.full(n, np.inf)
        step = max(1, (1 << 22) // (8 * k))
        for start, _, rows in self.blocks():
            for s in range(0, rows.shape[0], step):
                D = _native.sq_distances(rows[s : s + step], C, self.n_threads)
                out = slice(start + s, start + s + D.shape[0])
                part = np.argpartition(D, m, axis=1)
                cand[out] = part[:, :m]
                dist[out] = np.take_along_axis(D, part[:, :m], axis=1)
                beyond[out] = np.take_along_axis(D, part[:, m : m + 1], axis=1)[:, 0]
        return cand, dist, beyond

    def sq_distances(self, C):
        """D (n, k) float64, D_ij = ||x_i - c_j||^2 (the kernel's, in X's dtype)."""
        D = np.empty((self.shape[0], C.shape[0]))
        for start, stop, rows in self.blocks():
            D[start:stop] = _native.sq_distances(rows, C, self.n_threads)
        return D

    def label_sums(self, labels, k):
        """S (k, d) float64, S_j = sum of w_i x_i over the rows labelled j (the centroid
        step of a given assignment), accumulated in float64 ~4 MiB of rows at a time."""
        from scipy import sparse

        S = np.zeros((k, self.shape[1]))
        step = max(1, (1 << 22) // (8 * self.shape[1]))
        for start, stop, rows in self.blocks():
            for s in range(0, stop - start, step):
                chunk = rows[s : s + step].astype(np.float64)
                lo = start + s
                hi = lo + chunk.shape[0]
                onehot = sparse.csr_matrix(
                    (self.weights[lo:hi], (labels[lo:hi], np.arange(hi - lo))),
                    shape=(k, hi - lo),
                )
                part = onehot @ chunk
                S += part.toarray() if sparse.issparse(part) else part
        return S

    def map_rows(self, fn):
        """fn(rows) over the blocks, concatenated (each part if fn returns a tuple)."""
        outs = [fn(rows) for _, _, rows in self.blocks()]
        if len(outs) == 1:
            return outs[0]
        if isinstance(outs[0], tuple):
            return tuple(np.concatenate(part) for part in zip(*outs))
        return np.concatenate(outs)

    def seeding_source(self, n_clusters, rng):
        return self

    def parallel_passes(self):
        return LocalParallelPasses(self)

    def augmented(self):
        return _Augmented(self)

    def positive(self):
        positive = self.weights > 0
        return None if positive.all() else positive

    def _labels_and_distances(self, C, labels=None):
        """(labels (n,), squared distance of each row to its centroid (n,)) in X's dtype
        as scikit-learn computes them (so that the farthest points agree with its)."""
        n = self.shape[0]
        dist = np.empty(n, dtype=self.dtype)
        out_labels = np.empty(n, dtype=np.int64) if labels is None else labels
        nearest = NearestCentroid(C, self.n_threads) if labels is None else None
        for start, stop, rows in self.blocks():
            if labels is None:
                out_labels[start:stop], _ = nearest(rows)
            dist[start:stop] = self.block_sq_distances(rows, C, out_labels[start:stop])
        return out_labels, dist

    def farthest(self, C, m, labels=None):
        labels, dist = self._labels_and_distances(C, labels)
        if dist.max() == 0:
            return Farthest(dist[:0], self.rows([]), self.weights[:0], labels[:0])
        far = np.argpartition(dist, -m)[: -m - 1 : -1]
        return Farthest(dist[far], self.rows(far), self.weights[far], labels[far])

    def responsibility_moments(self, Ca, kind, sigma):
        k = Ca.shape[0]
        parts = [[] for _ in range(k)]
        for start, stop, rows, rows_a in self.paired_blocks():
            R = _native.responsibilities(rows_a, Ca, kind, sigma, self.n_threads)
            w = self.weights[start:stop]
            for j in range(k):
                u = w * R[:, j].astype(np.float64)
                U = float(u.sum())
                if U > 0:
                    mean, cov = self.block_moments(rows, u)
                    parts[j].append((U, mean, cov))
        out = []
        for blocks in parts:
            if not blocks:
                out.append((0.0, None, None))
            elif len(blocks) == 1:
                out.append(blocks[0])
            else:
                out.append(_stats.merge_moments(blocks))
        return out

    def add_farthest(self, C, k):
        positive = (self.weights > 0).astype(np.float64)
        C = [np.asarray(c) for c in C]
        _, dist = self.map_rows(lambda rows: _native.assign(rows, self._as_x(C), self.n_threads))
        dist = dist.astype(np.float64) * positive
        while len(C) < k:
            row = self.rows([int(np.argmax(dist))])[0]
            C.append(row)
            to_row = self.map_rows(lambda rows, row=row: self.block_sq_distances_to(rows, row))
            dist = np.minimum(dist, to_row * positive)
        return self._as_x(C)

    def _as_x(self, C):
        return np.ascontiguousarray(np.array(C), dtype=self.dtype)


def _concat(parts):
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _Augmented(LocalSource):
    """[X, 0] (n, d + 1) of a local source: annealing's steps with the prior coordinate
    (its blocks are the parent's augmented ones; only `stats` is read of it)."""

    def __init__(self, parent):
        super().__init__((parent.shape[0], parent.shape[1] + 1), parent.n_threads)
        self.parent = parent
        self.data, self.dtype = parent.data, parent.dtype
        self.weights, self.unit_weights = parent.weights, parent.unit_weights

    def blocks(self, augmented=False):
        return self.parent.blocks(augmented=True)

    def _unused(self, *args, **kwargs):
        raise NotImplementedError("an augmented source is only read by stats")

    feature_variances = moments = rows = n_distinct_rows = seeding_passes = _unused
    parallel_passes = subset = _unused
