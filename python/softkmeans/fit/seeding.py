"""Greedy k-means++ seeding (Arthur & Vassilvitskii 2007; greedy variant as in scikit-learn).

For each new centre, ``n_local_trials`` candidates are drawn with probability proportional
to w_i D(x_i)^2 (D = distance to the nearest centre chosen so far) and the candidate that
lowers the potential sum_i w_i D(x_i)^2 the most is kept. The default number of trials is
``2 + int(log(k))``, scikit-learn's choice, and the random draws are made in the same order
as ``sklearn.cluster.kmeans_plusplus`` (one ``choice`` for the first centre, then one
``uniform(size=n_local_trials)`` per centre), so with the same ``RandomState`` both pick the
same points except where rounding separates two candidates.

NOTE: on float32 X of more than a few 10^4 rows, scikit-learn's seeds differ from ours from
the second or third centre on (100k x 8, k = 16: 3 of 4 seeds; 300k x 32, k = 64: every
seed tried). scikit-learn draws from a float32 cumulative sum of w_i D_i^2 (its rounding,
up to ~n eps_32 of the total, moves a draw to another row), sums the potentials in float32
and, inside ``KMeans.fit``, seeds on X - X.mean(axis=0); we draw from a float64 cumulative
sum of the uncentred X's distances, the exact k-means++ distribution. Reproducing
scikit-learn's float32 arithmetic was tried (1f019a4, reverted): 7.5x slower seeding
(1e6 x 16, k = 64 float32: 0.87 s against 6.5 s). float64 X, and float32 X below that
size, get scikit-learn's seeds (tests/test_sklearn_dropin.py).

The distance work runs in the native core's fused kernels
(``_native.kmeanspp_candidate_potentials`` once per centre for its candidates,
``_native.kmeanspp_update_closest`` for the first centre), as two passes run by the one
runner (`softkmeans.sources.runner`): `CLOSEST` and `POTENTIALS`, whose per-row state
(the distances to the nearest centre so far) is an argument that each block reads its
rows of, and a result merged by concatenation. One pass over X per centre where the
candidates' distances are kept (`SeedingPasses`), two otherwise; every distance has the
same bits either way.

Weights: a point of weight 0 is never chosen (the first draw is proportional to w_i, later
draws search the cumulative sum of w_i D_i^2 for the first *strictly* larger value, so a
zero increment is never hit).
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import _native, sources
from .. import _validation as v
from ..sources import queries, runner
from ..sources.dense import file_backed
from ..sources.runner import Pass, concat

__all__ = [
    "CLOSEST",
    "KMeansPlusPlus",
    "POTENTIALS",
    "SeedingPasses",
    "check_random_state",
    "greedy_kmeans_plusplus",
    "kmeans_plusplus",
]


def check_random_state(seed):
    """None, int or RandomState -> RandomState (scikit-learn's convention, without sklearn)."""
    if seed is None or seed is np.random:
        return np.random.mtrand._rand
    if isinstance(seed, (numbers.Integral, np.integer)) and not isinstance(seed, bool):
        return np.random.RandomState(int(seed))
    if isinstance(seed, np.random.RandomState):
        return seed
    raise ValueError(f"random_state must be None, an int or a numpy RandomState; got {seed!r}")


def _check_n_clusters(n_clusters, n_samples):
    n_clusters = v.check_int(n_clusters, "n_clusters", 1)
    if n_samples < n_clusters:
        raise ValueError(f"n_samples={n_samples} should be >= n_clusters={n_clusters}.")
    return n_clusters


def _check_norms(x_squared_norms, n):
    """scikit-learn's checks of x_squared_norms: its length first, whatever its number of
    dimensions (its message for a 2-D array of the wrong length), then 1-D and finite."""
    try:
        shape = np.shape(x_squared_norms)
    except ValueError:  # ragged: as_float_array names it
        shape = ()
    if len(shape) >= 1 and shape[0] != n:
        raise ValueError(
            f"The length of x_squared_norms {shape[0]} should be equal to the "
            f"length of n_samples {n}."
        )
    v.as_float_array(x_squared_norms, "x_squared_norms", ndim=1, allow_empty=True)


# Rows per block of the two-level search in `_draw` (block sums, then one block's cumsum).
_BLOCK = 4096


def _last_positive(weighted):
    positive = np.flatnonzero(weighted > 0)
    return int(positive[-1]) if positive.size else weighted.size - 1


def _draw(weighted, rand_vals):
    """Indices i with cum[i-1] <= r < cum[i], cum the cumulative sum of ``weighted``.

    The first strictly larger cumulative value, so a zero increment is never hit. Two
    levels, block sums then the cumulative sum inside one block, instead of a full cumsum
    (a write of n doubles per centre). Draws at or beyond the total (rounding) go to the
    last point with a positive increment.
    """
    n = weighted.size
    starts = np.arange(0, n, _BLOCK)
    block_cum = np.cumsum(np.add.reduceat(weighted, starts))
    blocks = np.searchsorted(block_cum, rand_vals, side="right")
    out = np.empty(len(rand_vals), dtype=np.int64)
    cums = {}  # a block's cumulative sum, once for the draws that land in it
    for t, (blk, r) in enumerate(zip(blocks, rand_vals)):
        if blk >= starts.size:
            out[t] = _last_positive(weighted)
            continue
        base = block_cum[blk - 1] if blk > 0 else 0.0
        part = weighted[starts[blk] : starts[blk] + _BLOCK]
        if blk not in cums:
            cums[blk] = np.cumsum(part)
        i = int(np.searchsorted(cums[blk], r - base, side="right"))
        if i >= part.size:  # rounding between the two levels
            i = _last_positive(part)
        out[t] = starts[blk] + i
    return out


def kmeans_plusplus(
    X,
    n_clusters,
    *,
    sample_weight=None,
    x_squared_norms=None,
    random_state=None,
    n_local_trials=None,
):
    """Choose ``n_clusters`` initial centroids among the rows of X by greedy k-means++.

    Parameters
    ----------
    X : array (n, d), float32 or float64 (other real dtypes are converted to float64), or
        a scipy.sparse matrix or array (read as CSR from its stored entries).
    n_clusters : int, 1 <= n_clusters <= n.
    sample_weight : None or array (n,) of weights >= 0; the draws are proportional to
        w_i D_i^2, and zero-weight points are never chosen.
    x_squared_norms : None or array (n,), the squared row norms of X. Accepted for
        scikit-learn's signature and checked (length n, finite); not used: the native
        kernels compute each distance in one fused pass, where precomputed norms would
        save nothing.
    random_state : None, int or numpy.random.RandomState.
    n_local_trials : None (``2 + int(log(n_clusters))``) or a positive int.

    Returns
    -------
    centers : (n_clusters, d) array, dtype of X (rows of X).
    indices : (n_clusters,) int64 array, ``X[indices] == centers``.
    """
    source = sources.source_of(X, sample_weight)
    n_clusters = _check_n_clusters(n_clusters, source.shape[0])
    if x_squared_norms is not None:
        _check_norms(x_squared_norms, source.shape[0])
    rng = check_random_state(random_state)
    if n_local_trials is not None:
        n_local_trials = v.check_int(n_local_trials, "n_local_trials", 1, allow_none=True)
    return greedy_kmeans_plusplus(source, n_clusters, rng, n_local_trials=n_local_trials)


def greedy_kmeans_plusplus(
    source, n_clusters, rng, *, n_local_trials=None, report=None, passes=None
):
    """`kmeans_plusplus` over an in-process `softkmeans.sources.Source` (1 <= n_clusters
    <= n), rng a RandomState; returns (centers, indices). Unit weights skip the product
    w * closest. report(c): called after each of the c = 1 .. n_clusters centres (verbose
    progress). passes: the source's `SeedingPasses` where made already."""
    n, d = source.shape
    w = source.weights
    unit_weights = source.unit_weights
    if n_local_trials is None:
        n_local_trials = 2 + int(np.log(n_clusters))
    if passes is None:
        passes = SeedingPasses(source)
    centers = np.empty((n_clusters, d), dtype=source.dtype)
    indices = np.full(n_clusters, -1, dtype=np.int64)

    # scikit-learn draws the first centre with rng.choice(n, p=w / w.sum()): one uniform
    # draw, searched in the cumulative weights. The same draw, searched without the three
    # n-sized temporaries of choice (p, its cumulative sum, a sign check).
    first = int(_draw(w, np.array([rng.random_sample() * float(w.sum())]))[0])
    # closest_dist_sq in float64: the cumulative sum over n points needs the headroom.
    closest = np.full(n, np.inf)
    passes.update_closest(closest, first)
    centers[0] = source.rows([first])[0]
    indices[0] = first
    current_pot = float(closest @ w)
    weighted_buf = None if unit_weights else np.empty(n)
    if report is not None:
        report(1)

    for c in range(1, n_clusters):
        rand_vals = rng.uniform(size=n_local_trials) * current_pot
        if current_pot > 0.0:
            if unit_weights:
                weighted = closest
            else:
                weighted = np.multiply(w, closest, out=weighted_buf)
            cand = _draw(weighted, rand_vals)
        else:
            # Every point coincides with a chosen centre: any positive-weight point will do.
            positive = np.flatnonzero(w > 0)
            cand = positive[(rand_vals * 0).astype(np.int64) + rng.randint(positive.size)]
        cand = np.ascontiguousarray(cand, dtype=np.int64)
        pots = passes.candidate_potentials(closest, cand)
        best = int(np.argmin(pots))
        passes.update_closest(closest, int(cand[best]))
        current_pot = float(pots[best])
        centers[c] = source.rows([cand[best]])[0]
        indices[c] = cand[best]
        if report is not None:
            report(c + 1)
    return centers, indices


# ---------------------------------------------------------------- the passes over X

# Bytes of rows a block copies at a time where it reads them stacked on the centres.
CHUNK_BYTES = 1 << 20


def _stacked(rows, w, closest, centres):
    """(s, stop, X, w, closest): rows s..stop-1 of the block followed by the L centre rows
    (weight 0 and closest 0: they add exactly 0 to a potential), the kernels taking their
    centres as row indices of the X they read (stop - s, ...); dense rows CHUNK_BYTES at
    a time in one reused buffer, a CSR block whole."""
    b, L = rows.shape[0], centres.shape[0]
    if not isinstance(rows, np.ndarray):  # CSR
        from scipy import sparse

        X = sparse.vstack([rows, sparse.csr_matrix(centres)], format="csr")
        zeros = np.zeros(L)
        yield 0, b, X, np.concatenate([w, zeros]), np.concatenate([closest, zeros])
        return
    step = max(1, CHUNK_BYTES // (rows.shape[1] * rows.dtype.itemsize))
    buf = np.empty((min(step, b) + L, rows.shape[1]), dtype=rows.dtype)
    w_buf, closest_buf = np.zeros(buf.shape[0]), np.zeros(buf.shape[0])
    for s in range(0, b, step):
        m = min(step, b - s)
        buf[:m], buf[m : m + L] = rows[s : s + m], centres
        w_buf[:m], w_buf[m : m + L] = w[s : s + m], 0.0
        closest_buf[:m], closest_buf[m : m + L] = closest[s : s + m], 0.0
        yield s, s + m, buf[: m + L], w_buf[: m + L], closest_buf[: m + L]


def _closest_block(rows, w, start, closest, centre, index, n_threads):
    """(b,) float64: the block's min(closest_i, ||x_i - X[index]||^2). centre None: the
    block is all of X (`runner.run_array`), read in place; else the centre's row (1, d),
    read stacked after the block's rows."""
    b = rows.shape[0]
    if centre is None:
        out = closest[start : start + b].copy()
        _native.kmeanspp_update_closest(rows, out, index - start, n_threads)
        return out
    out = np.empty(b)
    for s, stop, X, _, cl in _stacked(rows, w, closest[start : start + b], centre):
        _native.kmeanspp_update_closest(X, cl, stop - s, n_threads)
        out[s:stop] = cl[: stop - s]
    return out


def _potentials_block(rows, w, start, closest, centres, cand, n_threads, dist=None):
    """(m, L) float64: sum_i w_i min(closest_i, ||x_i - X[cand_l]||^2) over the block, one
    row per kernel call in row order (k-means++ adds them in that order). centres None:
    the block is all of X, read in place in one call (dist: None, or an (L, n) array
    that receives the distances); else the centres' rows (L, d), read stacked after
    chunks of the block's rows."""
    b = rows.shape[0]
    closest = closest[start : start + b]
    if centres is None:
        return _native.kmeanspp_candidate_potentials(rows, w, closest, cand, n_threads, dist)[
            None
        ]
    parts = []
    for s, stop, X, wb, cl in _stacked(rows, w, closest, centres):
        idx = np.arange(stop - s, stop - s + centres.shape[0], dtype=np.int64)
        parts.append(_native.kmeanspp_candidate_potentials(X, wb, cl, idx, n_threads))
    return np.array(parts)


# args: closest (n,), the centre's row (1, d) or None, its index in X, n_threads.
CLOSEST = Pass("kmeanspp_closest", _closest_block, concat)
# args: closest (n,), the candidates' rows (L, d) or None, their indices (L,) int64 in X,
# n_threads, and where the block is all of X, an (L, n) array for their distances or None.
POTENTIALS = Pass("kmeanspp_potentials", _potentials_block, concat)


class KMeansPlusPlus:
    """The k-means++ seeding of a fit's runs: its passes over an in-process source made
    once (kept candidates' distances stay valid from run to run: X does not change); a
    Dask source is sampled into this process for each seeding
    (`softkmeans.sources.queries.seeding_sample`)."""

    def __init__(self, source, n_clusters):
        self.source, self.n_clusters = source, n_clusters
        in_process = isinstance(source, sources.LocalSource)
        self.passes = SeedingPasses(source) if in_process else None

    def centres(self, rng, report=None):
        """(centers, indices) of one seeding, rng a RandomState."""
        if self.passes is None:
            sample = queries.seeding_sample(self.source, self.n_clusters, rng)
            return greedy_kmeans_plusplus(sample, self.n_clusters, rng, report=report)
        return greedy_kmeans_plusplus(
            self.source, self.n_clusters, rng, report=report, passes=self.passes
        )


class SeedingPasses:
    """k-means++'s passes over an in-process source (`CLOSEST`, `POTENTIALS`): over the
    array its kernels read in place where it has one (`sources.kernel_array`), else over
    its blocks. The candidates' distances are kept where allowed (a dense X in the
    process's memory, not a memory-mapped one, whose pages they would double) and where
    they take at most half of X's memory (an (L, n) array of X's dtype: scikit-learn keeps
    them too); an update with one of the last candidates then takes its row of them: one
    pass over X per centre instead of two."""

    def __init__(self, source):
        self.source, self.n_threads = source, source.n_threads
        self.X = sources.kernel_array(source)
        self.keep = isinstance(self.X, np.ndarray) and not file_backed(self.X)
        self._cand = None  # the last candidates whose distances are in self._dist
        self._dist = None

    def _run(self, read, *args):
        if self.X is None:
            return runner.run(self.source, read, *args)
        return runner.run_array(self.X, self.source.weights, read, *args)

    def update_closest(self, closest, index):
        """In place: closest_i = min(closest_i, ||x_i - X[index]||^2)."""
        if self._cand is not None and index in self._cand:
            np.minimum(closest, self._dist[self._cand.index(index)], out=closest)
            return
        centre = None if self.X is not None else self.source.rows([index])
        closest[:] = self._run(CLOSEST, closest, centre, index, self.n_threads)

    def candidate_potentials(self, closest, cand):
        """(L,) float64: sum_i w_i min(closest_i, ||x_i - X[cand_l]||^2)."""
        L, d = len(cand), self.source.shape[1]
        self._cand, dist = None, None
        if self.keep and 2 * L <= d:
            if self._dist is None or self._dist.shape[0] != L:
                self._dist = np.empty((L, self.source.shape[0]), dtype=self.X.dtype)
            dist = self._dist
        centres = None if self.X is not None else self.source.rows(cand)
        parts = self._run(POTENTIALS, closest, centres, cand, self.n_threads, dist)
        if dist is not None:
            self._cand = [int(c) for c in cand]
        total = np.zeros(L)
        for part in parts:  # in row order
            total += part
        return total
