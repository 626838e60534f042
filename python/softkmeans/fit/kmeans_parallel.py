"""k-means|| seeding (Bahmani, Moseley, Vattani, Kumar & Vassilvitskii 2012, "Scalable
K-Means++"): a few passes over X draw an oversampled set of candidates, and the greedy
k-means++ of `softkmeans.fit.seeding` picks the k centres among them, each candidate
weighted by the weight of the rows nearest to it.

1. The first candidate: one row drawn with probability w_i / sum w; one pass over X
   gives every row's squared distance D_i^2 to it and the potential phi = sum_i w_i D_i^2.
2. ``ROUNDS`` rounds: each row is drawn independently with probability
   min(1, l w_i D_i^2 / phi), l = ``OVERSAMPLING`` x k (about l new candidates a round),
   and one pass over X brings D_i^2 (the distance to the nearest candidate) and phi up to
   date with the rows drawn.
3. The last pass's nearest-candidate labels weight the candidates (no further pass), and
   the weighted greedy k-means++ (scikit-learn's draws, ``2 + log k`` local trials) runs
   in memory on them. The last round's draw needs no potential after it, so its pass
   serves only the weights: where ``WEIGHING_ROWS`` rows a candidate are under half the
   rows, it reads only a sample of that many (rows drawn by their hashed uniforms), and
   the sample's moves to the new candidates, scaled, estimate every row's
   (`softkmeans.sources.kmeans_parallel_blocks.block_weighing_update`).

Passes over X: 1 + ROUNDS (4), whatever k; rounds stop early when phi is 0 (every row at
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

# l = OVERSAMPLING x k candidates a round, ROUNDS rounds: about 3 k candidates, each round a
# pass of n x l distances (the whole cost at large k: k = 512, 1e6 x 32, rounds 0.25 s each,
# the candidates' k-means++ 0.1 s). Bahmani et al. mostly run l = 2k, r = 5, and find a
# constant number of rounds enough in practice (the bound, r = O(log psi), is for the
# worst case); Spark's default since 2.1 is l = 2k, r = 2 (SPARK-17389). Measured here
# (bench/seeding.py's blobs and well-separated sklearn blobs, 1e6 x 32, k = 512; 3e5 x 64,
# k = 256; 2e5 x 16, k = 8 and 32; 3 to 6 random states each; the fit 30 Lloyd steps from
# each seeding): l = k, r = 3 ends within 0.3% of r = 5 on the overlapping blobs and below
# it on the separated ones (3.24e7 against 3.45e7; k-means++ 3.51e7; the optimum 3.20e7),
# with 3 k candidates instead of 5 k; l = k, r = 2 misses clusters of the separated blobs
# (4.34e7); l = 2k, r = 2 fits as r = 3 with a third more distances.
OVERSAMPLING = 1.0
ROUNDS = 3
# The last pass reads about this many rows a candidate (every row where that is half the
# rows or more). At 1e6 x 32, k = 512 (1,459 candidates) it reads 9% of the rows: 0.16 ->
# 0.03 s (bench/seeding.py). The seeding's inertia over 20 random states (separated blobs,
# 512 centres): 1.0008x that of every row's weights; the sample's own counts as the
# weights (no earlier passes' nearest) had made it 1.011x.
WEIGHING_ROWS = 64
# Below this many multiply-adds per centre (candidates x d x trials, ~10 ms of one core),
# the candidates' k-means++ runs on one thread: a thread team woken once per centre costs
# more than it saves on such passes, and far more on a busy machine (5,120 x 128
# candidates, k = 1024: 0.55 s on one thread, 3.7 s on two busy cores).
_SERIAL_WORK = 1 << 26


def kmeans_parallel(source, n_clusters, rng, *, rounds=ROUNDS, oversampling=OVERSAMPLING):
    """k-means|| over a `softkmeans.sources.Source`: (centers (k, d) of X's dtype, and
    the number of passes over X made). rng: a RandomState (one draw for the hashed
    uniforms' seed, then the in-memory k-means++'s draws)."""
    seed = int(rng.randint(0, 2**32, dtype=np.uint64)) << 32 | int(
        rng.randint(0, 2**32, dtype=np.uint64)
    )
    passes = queries.kmeans_parallel_passes(source)
    l = oversampling * n_clusters  # noqa: E741 - the paper's name
    first = passes.first(seed)
    chosen = [np.array([first], dtype=np.int64)]
    phi = passes.update(source.rows(chosen[0]))
    n_passes = 1
    n_candidates = 1
    for r in range(1, rounds + 1):
        if not phi > 0:
            break
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
