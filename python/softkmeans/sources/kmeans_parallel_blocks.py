"""The passes of k-means|| seeding (`softkmeans.fit.kmeans_parallel`) over row blocks.

Per-row state between passes: ``closest`` (float64, the squared distance of each row to
its nearest candidate so far) and ``nearest`` (int64, that candidate's index in the
candidate list; ties to the earlier candidate). The block functions here are the whole
computation; `LocalParallelPasses` runs them over a `LocalSource`'s blocks in order, and
`softkmeans.sources.kmeans_parallel_dask` runs the same functions as one Dask task per block.

Random draws do not depend on the blocks: row i's uniform in round r is a hash of
(seed, r, i) (`row_uniforms`, SplitMix64's finaliser), so any chunking of X, any thread
count and any scheduler draw the same rows. Per-row distances come from
`softkmeans._native.assign`, whose value for a row does not depend on the other rows of
its block. The only quantities that depend on the blocks are sums in block order: the
potential phi = sum_i w_i closest_i, and (for weights other than 1) the candidates'
weights. Their rounding (~1e-16 relative) can flip a draw only where a row's uniform (or
the candidates' k-means++ draw) falls that close to its threshold.
"""

from __future__ import annotations

import numpy as np

from .. import _native

__all__ = [
    "LocalParallelPasses",
    "block_candidate_weights",
    "block_draw",
    "block_race",
    "block_update",
    "row_uniforms",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix(z):
    """SplitMix64's finaliser, in place on a uint64 array (wrapping arithmetic)."""
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def row_uniforms(seed, round_, start, stop):
    """(stop - start,) float64 in [0, 1): the uniforms of rows start..stop-1 in round
    `round_` for `seed` (a uint64), each a function of (seed, round_, row index) only."""
    with np.errstate(over="ignore"):
        key = _splitmix(np.array([seed, round_], dtype=np.uint64) * _GOLDEN)
        key = _splitmix(np.array([key[0] ^ key[1]], dtype=np.uint64))[0]
        z = np.arange(start, stop, dtype=np.uint64) * _GOLDEN
        z += key
        _splitmix(z)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def block_race(w, seed, start, stop):
    """The first centre, drawn with probability w_i / sum w (an exponential race: the row
    of least -log(u_i) / w_i; weight 0 never wins): (key, global index) of the block's
    winner, (inf, -1) when no row has a positive weight. Ties to the first row."""
    u = row_uniforms(seed, 0, start, stop)
    keys = -np.log1p(-u)  # Exp(1)
    if w is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            keys = np.where(w > 0, keys / w, np.inf)
    i = int(np.argmin(keys))
    return (float(keys[i]), start + i) if np.isfinite(keys[i]) else (np.inf, -1)


def block_update(rows, w, closest, nearest, C, first, n_threads):
    """In place over one block: closest = min(closest, D(rows, C)) and nearest = first +
    the index in C of the new nearest where strictly closer. Returns the block's
    potential sum_i w_i closest_i (float64)."""
    labels, dist = _native.assign(rows, C, n_threads)
    # Masked copies, not boolean indexing (which gathers, then scatters): a third of
    # the NumPy time of a pass over 1e6 rows; the same values (dist widened exactly).
    closer = np.less(dist, closest)
    np.copyto(closest, dist, where=closer)
    labels += first
    np.copyto(nearest, labels, where=closer)
    return float(closest.sum() if w is None else w @ closest)


def block_draw(w, closest, seed, round_, start, scale):
    """Global indices of the block's rows drawn in round `round_`: row i with probability
    min(1, scale w_i closest_i), scale = l / phi (u_i < scale w_i closest_i; a row of
    weight 0 or at a candidate is never drawn)."""
    u = row_uniforms(seed, round_, start, start + closest.shape[0])
    p = closest * scale if w is None else (w * closest) * scale
    return start + np.flatnonzero(u < p)


def block_candidate_weights(w, nearest, m):
    """(m,) float64: the block's weight of the rows nearest to each of m candidates."""
    return np.bincount(nearest, weights=w, minlength=m).astype(np.float64)


class LocalParallelPasses:
    """k-means||'s passes over a `LocalSource` (blocks in order; the state in memory).

    - ``first(seed)``: the first centre's row index (no pass over X);
    - ``update(C)``: one pass over X, the candidates C appended; returns phi;
    - ``draw(seed, round_, scale)``: the rows drawn (no pass over X; sorted);
    - ``candidate_weights()``: (m,) the weight nearest to each candidate (no pass).
    """

    def __init__(self, source):
        self.source = source
        n = source.shape[0]
        self.w = None if source.unit_weights else source.weights
        self.closest = np.full(n, np.inf)
        self.nearest = np.zeros(n, dtype=np.int64)
        self.m = 0  # candidates so far

    def _w(self, start, stop):
        return None if self.w is None else self.w[start:stop]

    def first(self, seed):
        n = self.source.shape[0]
        return block_race(self.w, seed, 0, n)[1]

    def update(self, C):
        C = np.ascontiguousarray(C, dtype=self.source.dtype)
        phi = 0.0
        for start, stop, rows in self.source.blocks():
            phi += block_update(
                rows, self._w(start, stop), self.closest[start:stop],
                self.nearest[start:stop], C, self.m, self.source.n_threads,
            )  # fmt: skip
        self.m += C.shape[0]
        return phi

    def draw(self, seed, round_, scale):
        return block_draw(self.w, self.closest, seed, round_, 0, scale)

    def candidate_weights(self):
        return block_candidate_weights(self.w, self.nearest, self.m)
