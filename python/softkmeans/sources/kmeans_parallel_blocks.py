"""The passes of k-means|| seeding (`softkmeans.fit.kmeans_parallel`) over row blocks.

Per-row state between passes: ``closest`` (float64, the squared distance of each row to
its nearest candidate so far) and ``nearest`` (int64, that candidate's index in the
candidate list; ties to the earlier candidate). The block functions here are the whole
computation; `LocalParallelPasses` runs them over a `LocalSource`'s blocks in order, and
`softkmeans.sources.kmeans_parallel_dask` runs the same functions as one Dask task per block.

The last pass may read a sample of the rows (`block_sample`: the rows whose uniform of
round ``SAMPLE_ROUND`` is below a fraction f): it serves only the candidates' weights.
Rows outside the sample keep their nearest of the earlier passes, and the sample's
moves to the new candidates, scaled by (1 - f) / f, estimate the others' moves
(`block_weighing_update`): the weights are exact where no row moves, and unbiased.

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
    "SAMPLE_ROUND",
    "LocalParallelPasses",
    "block_candidate_weights",
    "block_draw",
    "block_race",
    "block_sample",
    "block_update",
    "block_weighing_update",
    "row_uniforms",
]

# The round of the uniforms that draw the weighing sample (never a drawing round's).
SAMPLE_ROUND = 1 << 32


def row_uniforms(seed, round_, start, stop, n_threads=0):
    """(stop - start,) float64 in [0, 1): the uniforms of rows start..stop-1 in round
    `round_` for `seed` (a uint64), each a function of (seed, round_, row index) only
    (`softkmeans._native.row_uniforms`: SplitMix64's finaliser of the row's index)."""
    return _native.row_uniforms(int(seed), int(round_), int(start), int(stop), n_threads)


def block_race(w, seed, start, stop, n_threads=0):
    """The first centre, drawn with probability w_i / sum w (an exponential race: the row
    of least -log(u_i) / w_i; weight 0 never wins): (key, global index) of the block's
    winner, (inf, -1) when no row has a positive weight. Ties to the first row."""
    u = row_uniforms(seed, 0, start, stop, n_threads)
    keys = -np.log1p(-u)  # Exp(1)
    if w is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            keys = np.where(w > 0, keys / w, np.inf)
    i = int(np.argmin(keys))
    return (float(keys[i]), start + i) if np.isfinite(keys[i]) else (np.inf, -1)


def block_sample(seed, start, stop, fraction, n_threads=0):
    """(stop - start,) bool: the rows start..stop-1 in the weighing sample of `fraction`
    of the rows (u_i < fraction, the uniforms of round SAMPLE_ROUND)."""
    return row_uniforms(seed, SAMPLE_ROUND, start, stop, n_threads) < fraction


def block_update(rows, w, closest, nearest, C, first, n_threads):
    """In place over one block: closest = min(closest, D(rows, C)) and nearest = first +
    the index in C of the new nearest where strictly closer. Returns the block's
    potential sum_i w_i closest_i (float64)."""
    labels, dist = _native.assign(rows, C, n_threads)
    _native.take_closer(dist, labels, first, closest, nearest, n_threads)
    return float(closest.sum() if w is None else w @ closest)


def block_weighing_update(rows, w, closest, nearest, C, first, n_threads, sample, fraction):
    """`block_update` at the rows of `sample` only (bool, the block's rows; `fraction` of
    all rows); the others keep their nearest of the earlier passes. Returns the
    correction (first + len(C),) float64 that the block's `block_candidate_weights` then
    needs: (1 - fraction) / fraction times the weight the sample's rows moved to each
    candidate (less what they moved from it)."""
    m = first + C.shape[0]
    idx = np.flatnonzero(sample)
    if idx.size == 0:
        return np.zeros(m)
    part_closest, before = closest[idx], nearest[idx]
    after = before.copy()
    block_update(rows[idx], None, part_closest, after, C, first, n_threads)
    closest[idx], nearest[idx] = part_closest, after
    moved = after != before
    w_moved = None if w is None else w[idx][moved]
    gained = np.bincount(after[moved], weights=w_moved, minlength=m)
    lost = np.bincount(before[moved], weights=w_moved, minlength=m)
    return (gained - lost) * ((1.0 - fraction) / fraction)


def block_draw(w, closest, seed, round_, start, scale, n_threads=0):
    """Global indices of the block's rows drawn in round `round_`: row i with probability
    min(1, scale w_i closest_i), scale = l / phi (u_i < scale w_i closest_i; a row of
    weight 0 or at a candidate is never drawn)."""
    u = row_uniforms(seed, round_, start, start + closest.shape[0], n_threads)
    p = closest * scale if w is None else (w * closest) * scale
    return start + np.flatnonzero(u < p)


def block_candidate_weights(w, nearest, m, correction=None):
    """(m,) float64: the block's weight of the rows nearest to each of m candidates (plus
    the correction of a `block_weighing_update`, where given)."""
    weights = np.bincount(nearest, weights=w, minlength=m).astype(np.float64)
    return weights if correction is None else weights + correction


class LocalParallelPasses:
    """k-means||'s passes over a `LocalSource` (blocks in order; the state in memory).

    - ``first(seed)``: the first centre's row index (no pass over X);
    - ``update(C, seed=None, fraction=None)``: one pass over X, the candidates C
      appended; returns phi; with a fraction (the last pass), the rows of the weighing
      sample only (`block_sample`, `block_weighing_update`), and no phi (nan);
    - ``draw(seed, round_, scale)``: the rows drawn (no pass over X; sorted);
    - ``candidate_weights()``: (m,) the weight nearest to each candidate (estimated
      after a sampled pass, >= 0; no pass).
    """

    def __init__(self, source):
        self.source = source
        n = source.shape[0]
        self.w = None if source.unit_weights else source.weights
        self.closest = np.full(n, np.inf)
        self.nearest = np.zeros(n, dtype=np.int64)
        self.m = 0  # candidates so far
        self.correction = None  # (m,) after a sampled pass

    def _w(self, start, stop):
        return None if self.w is None else self.w[start:stop]

    def first(self, seed):
        n = self.source.shape[0]
        return block_race(self.w, seed, 0, n, self.source.n_threads)[1]

    def update(self, C, seed=None, fraction=None):
        C = np.ascontiguousarray(C, dtype=self.source.dtype)
        if fraction is not None:
            self.correction = np.zeros(self.m + C.shape[0])
        phi = 0.0
        for start, stop, rows in self.source.blocks():
            state = (
                rows, self._w(start, stop), self.closest[start:stop],
                self.nearest[start:stop], C, self.m, self.source.n_threads,
            )  # fmt: skip
            if fraction is None:
                phi += block_update(*state)
            else:
                sample = block_sample(seed, start, stop, fraction, self.source.n_threads)
                self.correction += block_weighing_update(*state, sample, fraction)
        self.m += C.shape[0]
        return phi if fraction is None else np.nan

    def draw(self, seed, round_, scale):
        return block_draw(self.w, self.closest, seed, round_, 0, scale, self.source.n_threads)

    def candidate_weights(self):
        weights = block_candidate_weights(self.w, self.nearest, self.m, self.correction)
        return np.maximum(weights, 0.0)  # an estimate below 0: a candidate left by all
