"""k-means|| seeding (Bahmani, Moseley, Vattani, Kumar & Vassilvitskii 2012, "Scalable
K-Means++"): a few passes over X draw an oversampled set of candidates, and the greedy
k-means++ of `softkmeans.fit.seeding` picks the k centres among them, each candidate
weighted by the weight of the rows nearest to it.

1. The first candidate: one row drawn with probability w_i / sum w; one pass over X
   gives every row's squared distance D_i^2 to it and the potential phi = sum_i w_i D_i^2.
2. ``ROUNDS`` rounds (2): each row is drawn independently with probability
   min(1, l w_i D_i^2 / phi), l = ``OVERSAMPLING[r]`` x k in round r (k, then 3 k: about
   4 k candidates), and one pass over X brings D_i^2 (the distance to the nearest
   candidate) and phi up to date with the rows drawn.
3. The last pass's nearest-candidate labels weight the candidates (no further pass), and
   the weighted greedy k-means++ (scikit-learn's draws, ``2 + log k`` local trials) runs
   in memory on them. The last round's draw needs no potential after it, so its pass
   serves only the weights: where ``WEIGHING_ROWS`` rows a candidate are under half the
   rows, it reads only a sample of that many (rows drawn by their hashed uniforms), and
   the sample's moves to the new candidates, scaled, estimate every row's
   (`softkmeans.sources.kmeans_parallel_blocks.block_weighing_update`).

Passes over X: 1 + ROUNDS (3), whatever k; rounds stop early when phi is 0 (every row at
a candidate). The random draws (the first candidate and each row's draw) are uniforms
hashed from (seed, round, row index), the seed drawn once from ``random_state``
(`softkmeans.sources.kmeans_parallel_blocks`): the same rows for any chunking, thread count or
scheduler, so a Dask array seeds as the in-memory array of the same rows.

Where fewer than k candidates come out (X has fewer than k distinct positive-weight
rows, or very few rows), the seeding is k-means++'s on the source's seeding rows.
"""

from __future__ import annotations

import numpy as np

from .. import sources
from ..sources import queries
from .seeding import greedy_kmeans_plusplus

__all__ = ["OVERSAMPLING", "ROUNDS", "WEIGHING_ROWS", "kmeans_parallel"]

# l = OVERSAMPLING[r] x k candidates in round r, each round a pass of n x l distances (the
# whole cost at large k), but the last round's pass reads only a sample (below), so its
# candidates are cheap where the first rounds' are not. Bahmani et al. mostly run l = 2k,
# r = 5, and find a constant number of rounds enough in practice (the bound, r = O(log
# psi), is for the worst case); Spark's default since 2.1 is l = 2k, r = 2 (SPARK-17389).
# Measured here (the fit 30 Lloyd steps from each seeding, mean final inertia over 3-5
# random states, Zen 4): l = (k, 3k) against (k, k, k), which had ended within 0.3% of
# r = 5: bench/seeding.py's blobs (1e6 x 32) at k = 256 3.268e7 against 3.259e7 (k-means++
# 3.286e7), at k = 512 within 0.3% (2 states); well-separated sklearn blobs 1e6 x 32, 512
# centres, 3.370e7 against 3.324e7 (k-means++ 3.472e7); 3e5 x 64, k = 256, 1.969e7
# against 1.989e7 (k-means++ 2.104e7); 2e5 x 16, k = 8 and 32, even. One full pass fewer:
# bench/seeding.py at k = 256, seeding 0.27 -> 0.17 s. (k, 2k) ended above k-means++ on
# the separated blobs (3.497e7, 4 states); (k, k) left clusters there without a candidate
# (4.34e7).
OVERSAMPLING = (1.0, 3.0)
ROUNDS = len(OVERSAMPLING)
# The last pass reads about this many rows a candidate (every row where that is half the
# rows or more). At 1e6 x 32, k = 512 (2,013 candidates) it reads 13% of the rows (with
# l = (k, k, k), 9%: 0.16 -> 0.03 s, bench/seeding.py). The seeding's inertia over 20
# random states (separated blobs, 512 centres, l = (k, k, k)): 1.0008x that of every
# row's weights; the sample's own counts as the weights (no earlier passes' nearest) had
# made it 1.011x.
WEIGHING_ROWS = 64
# Below this many multiply-adds per centre (candidates x d x trials, ~10 ms of one core),
# the candidates' k-means++ runs on one thread: a thread team woken once per centre costs
# more than it saves on such passes, and far more on a busy machine (5,120 x 128
# candidates, k = 1024: 0.55 s on one thread, 3.7 s on two busy cores).
_SERIAL_WORK = 1 << 26


def kmeans_parallel(source, n_clusters, rng, *, oversampling=OVERSAMPLING):
    """k-means|| over a `softkmeans.sources.Source`: (centers (k, d) of X's dtype, and
    the number of passes over X made). rng: a RandomState (one draw for the hashed
    uniforms' seed, then the in-memory k-means++'s draws); oversampling: l / k of each
    round (their number the rounds)."""
    seed = int(rng.randint(0, 2**32, dtype=np.uint64)) << 32 | int(
        rng.randint(0, 2**32, dtype=np.uint64)
    )
    passes = queries.kmeans_parallel_passes(source)
    rounds = len(oversampling)
    first = passes.first(seed)
    chosen = [np.array([first], dtype=np.int64)]
    phi = passes.update(source.rows(chosen[0]))
    n_passes = 1
    n_candidates = 1
    for r in range(1, rounds + 1):
        if not phi > 0:
            break
        l = oversampling[r - 1] * n_clusters  # noqa: E741 - the paper's name
        drawn = passes.draw(seed, r, l / phi)
        if drawn.size == 0:
            continue
        chosen.append(drawn)
        n_candidates += drawn.size
        fraction = WEIGHING_ROWS * n_candidates / source.shape[0]
        last = r == rounds and fraction < 0.5
        phi = passes.update(source.rows(drawn), seed, fraction if last else None)
        n_passes += 1
    idx = np.concatenate(chosen)
    weights = passes.candidate_weights()
    if int((weights > 0).sum()) < n_clusters:
        seeds = queries.seeding_sample(source, n_clusters, rng)
        return greedy_kmeans_plusplus(seeds, n_clusters, rng)[0], n_passes
    rows = np.ascontiguousarray(source.rows(idx), dtype=source.dtype)
    trials = 2 + int(np.log(n_clusters))
    small = rows.shape[0] * rows.shape[1] * trials < _SERIAL_WORK
    candidates = sources.ArraySource(
        rows, weights, n_threads=1 if small else source.n_threads, checked=True
    )
    centers, _ = greedy_kmeans_plusplus(candidates, n_clusters, rng)
    return centers, n_passes
