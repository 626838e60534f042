"""The passes over X that greedy k-means++ makes per centre (`softkmeans.fit.seeding`):

- ``update_closest(closest, index)``: in place, closest_i = min(closest_i,
  ||x_i - X[index]||^2);
- ``candidate_potentials(closest, cand)``: (L,) sum_i w_i min(closest_i, ||x_i - X[cand_l]||^2).

`KeptDistancePasses` reads an X the kernels take whole (dense or CSR); `BlockSeedingPasses`
an in-process source's transformed blocks. Both give every distance the same bits.
"""

from __future__ import annotations

import numpy as np

from .. import _native
from .runner import transformed_blocks

__all__ = ["BlockSeedingPasses", "KeptDistancePasses"]


class KeptDistancePasses:
    """The candidates' distances are kept where allowed (keep_distances: a dense X in
    the process's memory, not a memory-mapped one, whose pages they would double) and
    where they take at most half of X's memory (an (L, n) array of X's dtype: scikit-learn
    keeps them too); an update with one of the last candidates then takes its row of them:
    one pass over X per centre instead of two."""

    def __init__(self, X, w, n_threads, *, keep_distances):
        self.X, self.w, self.n_threads = X, w, n_threads
        self.keep_distances = keep_distances
        self._cand = None  # the last candidates whose distances are in self._dist
        self._dist = None

    def update_closest(self, closest, index):
        if self._cand is not None and index in self._cand:
            np.minimum(closest, self._dist[self._cand.index(index)], out=closest)
            return
        _native.kmeanspp_update_closest(self.X, closest, index, self.n_threads)

    def candidate_potentials(self, closest, cand):
        n, d = self.X.shape
        L = len(cand)
        self._cand = None
        if not self.keep_distances or 2 * L > d:
            return _native.kmeanspp_candidate_potentials(
                self.X, self.w, closest, cand, self.n_threads
            )
        if self._dist is None or self._dist.shape[0] != L:
            self._dist = np.empty((L, n), dtype=self.X.dtype)
        pots = _native.kmeanspp_candidate_potentials(
            self.X, self.w, closest, cand, self.n_threads, self._dist
        )
        self._cand = [int(c) for c in cand]
        return pots


# Bytes of rows BlockSeedingPasses copies at a time (with the centre rows after them).
CHUNK_BYTES = 1 << 20


class BlockSeedingPasses:
    """The same passes over an in-process source's (transformed) blocks. The kernels take
    their centres as row indices of the X they read, so the blocks' rows are copied,
    CHUNK_BYTES at a time, into a buffer followed by the centre rows, with weight 0 and
    closest 0 (they add exactly 0 to the potentials). Dense blocks only."""

    def __init__(self, source, max_candidates):
        self.source, self.max_candidates = source, max_candidates
        self.w = source.weights
        self.step = max(1, CHUNK_BYTES // (source.shape[1] * source.dtype.itemsize))
        size = self.step + max_candidates
        self.buf = np.empty((size, source.shape[1]), dtype=source.dtype)
        self.w_buf, self.closest_buf = np.zeros(size), np.zeros(size)

    def _chunks(self):
        """(start, stop, buffer holding rows start..stop-1 first) over X, in order."""
        for start, stop, rows in transformed_blocks(self.source):
            for s in range(0, stop - start, self.step):
                part = rows[s : s + self.step]
                self.buf[: part.shape[0]] = part
                yield start + s, start + s + part.shape[0], self.buf

    def update_closest(self, closest, index):
        center = self.source.rows([index])[0]
        threads = self.source.n_threads
        for start, stop, buf in self._chunks():
            b = stop - start
            buf[b] = center
            cl = self.closest_buf[: b + 1]
            cl[:b] = closest[start:stop]
            _native.kmeanspp_update_closest(buf[: b + 1], cl, b, threads)
            closest[start:stop] = cl[:b]

    def candidate_potentials(self, closest, cand):
        L = len(cand)
        centres = self.source.rows(cand)
        total = np.zeros(L)
        for start, stop, buf in self._chunks():
            b = stop - start
            buf[b : b + L] = centres
            wb, cl = self.w_buf[: b + L], self.closest_buf[: b + L]
            wb[:b], wb[b:] = self.w[start:stop], 0.0
            cl[:b], cl[b:] = closest[start:stop], 0.0
            idx = np.arange(b, b + L, dtype=np.int64)
            total += _native.kmeanspp_candidate_potentials(
                buf[: b + L], wb, cl, idx, self.source.n_threads
            )
        return total
