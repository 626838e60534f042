"""k-means||'s passes over a Dask array (`softkmeans.sources.dask_source.DaskSource`): the block
functions of `softkmeans.sources.kmeans_parallel_blocks`, one task per row block.

The per-row state (closest, nearest: 16 bytes a row; after a sampled pass, the weights'
correction) of each block is one persisted result per block (on the workers with a
distributed client; in the client's memory with the local scheduler), updated by one task
per block in each pass; only scalars (the blocks' potentials and first-centre races), the
drawn row indices and the (m,) candidate weights reach the client, each combined in block
order. Every row's draw and distance is the in-memory one, so the seeding equals the
in-memory seeding of the same rows (up to the rounding of phi, see
`softkmeans.sources.kmeans_parallel_blocks`).
"""

from __future__ import annotations

import dask
import numpy as np

from .kmeans_parallel_blocks import (
    block_candidate_weights,
    block_draw,
    block_race,
    block_sample,
    block_update,
    block_weighing_update,
)

__all__ = ["DaskParallelPasses"]


def _initial_state(rows):
    return np.full(rows, np.inf), np.zeros(rows, dtype=np.int64), 0.0, None


def _update_task(X, w, state, C, first, n_threads, seed, start, fraction):
    """The block's new state: (closest, nearest, potential, the weights' correction of a
    sampled pass or None)."""
    closest, nearest = state[0].copy(), state[1].copy()
    X = np.ascontiguousarray(X)
    w = None if w is None else np.asarray(w, dtype=np.float64)
    if fraction is None:
        return closest, nearest, block_update(X, w, closest, nearest, C, first, n_threads), None
    sample = block_sample(seed, start, start + X.shape[0], fraction, n_threads)
    state = (X, w, closest, nearest, C, first, n_threads)
    return closest, nearest, np.nan, block_weighing_update(*state, sample, fraction)


def _potential(state):
    return state[2]


def _draw_task(w, state, seed, round_, start, scale, n_threads):
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return block_draw(w, state[0], seed, round_, start, scale, n_threads)


def _race_task(w, seed, start, stop, n_threads):
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return block_race(w, seed, start, stop, n_threads)


def _weights_task(w, state, m):
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return block_candidate_weights(w, state[1], m, state[3])


class DaskParallelPasses:
    """`softkmeans.sources.kmeans_parallel_blocks.LocalParallelPasses`'s methods over Dask blocks.

    blocks: [(X block, w block or None, rows)] delayed, in order, non-empty; compute:
    the source's dask.compute; n_threads: the kernels' thread count per task.
    """

    def __init__(self, blocks, compute, n_threads):
        self.blocks, self.compute, self.n_threads = blocks, compute, n_threads
        self.starts = np.concatenate([[0], np.cumsum([b[2] for b in blocks])])
        self.states = [dask.delayed(_initial_state)(b[2]) for b in blocks]
        self.m = 0
        self.token = dask.base.tokenize(*[b[0] for b in blocks])

    def _key(self, name, i, *args):
        return (f"softkmeans-kmeans-parallel-{name}-" + dask.base.tokenize(self.token, *args), i)

    def first(self, seed):
        tasks = [
            dask.delayed(_race_task, pure=True)(
                wb, seed, int(self.starts[i]), int(self.starts[i + 1]), self.n_threads,
                dask_key_name=self._key("race", i, seed),
            )
            for i, (_, wb, _) in enumerate(self.blocks)
        ]  # fmt: skip
        best_key, best = np.inf, -1
        for key, index in self.compute(*tasks):  # block order: ties to the first
            if key < best_key:
                best_key, best = key, index
        return best

    def update(self, C, seed=None, fraction=None):
        C = np.ascontiguousarray(C)
        C_key = dask.delayed(C, name="softkmeans-candidates-" + dask.base.tokenize(C))
        tasks = [
            dask.delayed(_update_task, pure=True)(
                xb, wb, state, C_key, self.m, self.n_threads, seed, int(self.starts[i]),
                fraction, dask_key_name=self._key("update", i, C, self.m, seed, fraction),
            )
            for i, ((xb, wb, _), state) in enumerate(zip(self.blocks, self.states))
        ]  # fmt: skip
        (self.states,) = dask.persist(tasks)
        self.m += C.shape[0]
        pots = self.compute(*[dask.delayed(_potential, pure=True)(s) for s in self.states])
        phi = 0.0
        for pot in pots:
            phi += pot
        return phi

    def draw(self, seed, round_, scale):
        tasks = [
            dask.delayed(_draw_task, pure=True)(
                wb, state, seed, round_, int(self.starts[i]), scale, self.n_threads
            )
            for i, ((_, wb, _), state) in enumerate(zip(self.blocks, self.states))
        ]
        return np.concatenate(self.compute(*tasks))

    def candidate_weights(self):
        tasks = [
            dask.delayed(_weights_task, pure=True)(wb, state, self.m)
            for (_, wb, _), state in zip(self.blocks, self.states)
        ]
        total = np.zeros(self.m)
        for part in self.compute(*tasks):
            total += part
        return np.maximum(total, 0.0)  # an estimate below 0: a candidate left by all
