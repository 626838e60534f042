"""What partial_fit adds to the streaming step of SPEC.md ("Streaming"): continuing from a
batch fit, and reviving dead centroids.

Continuing: after ``fit``, a stream starts at the fitted centroids (scikit-learn's
MiniBatchKMeans does the same), remembering the weight of each fitted cluster, its
training rows at their labels, as the weight it has seen (T_j = M_j = N_j).

Reviving (MiniBatchKMeans's reassignment, counts-based): after a batch's update, from the
second batch on and once the stream has seen REVIVE_AFTER rows per centroid, a centroid
is dead when both the weight it has seen and its share of this batch are below
REVIVE_RATIO of the largest centroid's (T_j < r max T and N_j(batch) < r max N(batch)):
the stream has starved it and still does. Each dead centroid moves to a row of the batch
drawn with probability proportional to w_i D_i, D_i the squared distance to the nearest
centroid so far (the k-means++ draw, so an uncovered cluster is the likely pick), one at
a time, each pick joining the centroids the next is drawn against. A revived centroid
remembers nothing (M_j = 0: the next batch moves it to the mean of its own rows) and is
credited with the smallest seen weight among the live ones (T_j, so that it is not dead
again at once; MiniBatchKMeans resets its count the same way). The draws come from
random_state and the batch's number: the same seed gives the same stream.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from ..sources import reads

__all__ = [
    "REVIVE_AFTER",
    "REVIVE_RATIO",
    "StreamState",
    "fitted_weights",
    "revive_dead",
    "revival_rng",
]


@dataclasses.dataclass
class StreamState:
    """What a streaming fit carries from one batch to the next (SPEC.md, "Streaming")."""

    centroids: np.ndarray  # (k, d), the dtype of the first batch
    totals: np.ndarray  # (k,) float64, T_j(t): the weight seen (forgotten by decay)
    memory: np.ndarray  # (k,) float64, M_j(t): the weight the centroid remembers
    sigma: float  # fixed at the first batch (0.0 for "hard")
    critical_sigma: float  # of the first batch
    n_steps: int  # batches seen


# MiniBatchKMeans's default reassignment_ratio.
REVIVE_RATIO = 0.01
# No revival before the stream has seen this many rows (weight) per centroid before the
# batch, nor on its first batch: an early centroid may wait for its rows (MiniBatchKMeans
# waits 10 n_clusters rows between reassignments).
REVIVE_AFTER = 10.0


def fitted_weights(labels, weights, k):
    """(k,) float64: the weight of each fitted cluster, its rows at their labels."""
    labels = np.asarray(labels, dtype=np.int64)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    return np.bincount(labels, weights=w, minlength=k).astype(np.float64)


def revival_rng(random_state, n_steps):
    """The generator of batch n_steps' draws, seeded by (seed, n_steps): seed the int
    random_state, or one draw from a RandomState (None: NumPy's global one)."""
    if isinstance(random_state, numbers.Integral):
        seed = int(random_state)
    else:
        state = np.random.mtrand._rand if random_state is None else random_state
        seed = int(state.randint(2**31))
    return np.random.RandomState([seed, int(n_steps)])


def revive_dead(source, C, totals, memory, batch_weights, before, make_rng):
    """(C, totals, memory, revived indices) after moving the dead centroids of this batch
    (`source`) to drawn rows; the arrays are new where a centroid moved. before: the
    stream's state before the batch; make_rng() gives the generator of the draws (called
    only where a centroid is dead)."""
    k = C.shape[0]
    if before.n_steps < 1 or before.totals.sum() < REVIVE_AFTER * k:
        return C, totals, memory, np.empty(0, np.int64)
    starving = batch_weights < REVIVE_RATIO * batch_weights.max(initial=0.0)
    dead = np.flatnonzero((totals < REVIVE_RATIO * totals.max()) & starving)
    if dead.size == 0 or dead.size == k:
        return C, totals, memory, dead[:0]
    live = np.setdiff1d(np.arange(k), dead)
    C, totals, memory = C.copy(), totals.copy(), memory.copy()
    rng = make_rng()
    w = np.asarray(source.weights, dtype=np.float64)
    nearest = np.min(_squared(source, C[live]), axis=1)
    for j in dead:
        p = w * nearest
        if not p.sum() > 0.0:  # every row of weight sits on a centroid
            return C, totals, memory, dead[: np.searchsorted(dead, j)]
        row = source.rows(np.array([rng.choice(p.size, p=p / p.sum())]))
        C[j] = row[0]
        nearest = np.minimum(nearest, _squared(source, row)[:, 0])
    totals[dead] = totals[live].min()
    memory[dead] = 0.0
    return C, totals, memory, dead


def _squared(source, C):
    """(n, m) float64 squared distances of the batch's rows to C."""
    return (
        np.asarray(reads.distances(source, np.ascontiguousarray(C, dtype=source.dtype)), np.float64)
        ** 2
    )
