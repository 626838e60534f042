"""How a pass runs over the row blocks of a Dask array (`softkmeans.sources.dask_source`).

A pass maps block_fn(X block, w block or None, *args) over the non-empty row blocks,
whose results (the parts) are merged by a tree of merges of MERGE_FAN_IN consecutive
parts, in block order, level by level. The tree's shape depends only on the number of
blocks, so the result does not depend on which worker computed what, or when, nor on the
scheduler: the ways below merge the same groups in the same order (the same bits).

- **With a distributed client** (X and the weights persisted on the workers), a pass
  runs first where the blocks are: one call per worker on the blocks it holds
  (`softkmeans.sources.dask_resident`; ~2 ms a pass, where tasks cost ~15-20 ms). Where
  its plan fails (a worker lost, blocks moved, too many parts for the client), or with
  RESIDENT False, the pass is one task per block, submitted on the blocks' futures
  (`Client.map`): no graph to build, tokenize or optimize per pass, and no merge task
  between the blocks and the client (these recompute lost blocks). The last
  level of the tree (at most MERGE_FAN_IN parts) is gathered and merged on the client;
  the levels below it (more than MERGE_FAN_IN blocks) are merge tasks on the workers, so
  that the client never receives more than MERGE_FAN_IN parts. A `Shared` argument (the
  centroids) travels inside each task while it is small (INLINE_BYTES), and as one task
  that every block task depends on otherwise.
- **With the local scheduler**, a pass is one ``dask.delayed`` graph computed by
  `compute`; a `Shared` argument is one key of it.
"""

from __future__ import annotations

import functools
import uuid

import dask
import numpy as np
from dask.sizeof import sizeof

from .dask_resident import NOT_RESIDENT, ResidentPasses
from .runner import MERGE_FAN_IN, RowMap, merge_in_tree, reduce_tree, transformed

__all__ = ["LOST", "BlockPasses", "Shared", "compute", "delayed_blocks", "merge_in_tree"]

# A `Shared` argument is copied into each block task of a pass up to this many bytes in
# all (k = 64, d = 16 float32 centroids over 8 blocks: 32 KiB); above it, it is one task
# that the block tasks depend on (each worker fetches it once).
INLINE_BYTES = 1 << 20

# With a client, a pass runs first as one call per worker on the blocks it holds
# (`softkmeans.sources.dask_resident`), as tasks where it cannot; False: always as tasks.
RESIDENT = True

LOST = (
    "the Dask fit lost data it cannot recompute: most likely a worker died holding blocks "
    "of X (or sample_weight) that were scattered from the client rather than computed "
    "from a graph. Build X from a recomputable source (da.from_array, da.from_zarr, "
    "dd.read_parquet, ...) and persist it, so that Dask can recompute lost blocks"
)


def _reported(run, *args):
    """run(*args), with a lost, unrecomputable input reported as what happened."""
    try:
        return run(*args)
    except Exception as exc:
        names = {type(e).__name__ for e in _chain(exc)}
        if names & {"FutureCancelledError", "CancelledError"}:
            raise RuntimeError(f"{LOST} ({type(exc).__name__}: {exc})") from exc
        raise


def _chain(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def compute(*objs):
    """dask.compute, with a lost, unrecomputable input reported as what happened."""
    return _reported(dask.compute, *objs)


def delayed_blocks(X, w):
    """[(X block, w block or None)] of the non-empty row blocks, as Delayed, in order."""
    xs = X.to_delayed().ravel()
    ws = [None] * len(xs) if w is None else list(w.to_delayed().ravel())
    return [(x, wb) for x, wb, rows in zip(xs, ws, X.chunks[0]) if rows > 0]


class Shared:
    """An argument that every block task of a pass receives (the centroids)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _identity(value):
    return value


def _block_task(block_fn, transforms, start, X, w, *args):
    """One block of a pass on a worker: the block as the in-process runner gives it (a
    C-contiguous array after the source's transforms, its weights an array)."""
    X = transformed(np.ascontiguousarray(X), transforms)
    w = unit_weights(X.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    return block_fn(X, w, start, *args)


def _row_task(X, block_fn, transforms, *args):
    """One block of a row map (a lazy prediction): its values checked first (a
    prediction's X is not scanned before)."""
    from .. import _validation as v

    if X.shape[0] == 0:
        return block_fn.empty(X, *args)
    return block_fn.block(transformed(v.check_data(X), transforms), *args)


def _is_shared(arg):
    return arg is not None and not isinstance(arg, (bool, int, float, str))


class BlockPasses:
    """The Dask runner of passes (`softkmeans.sources.runner.run`): one task per
    non-empty row block of X (and w), merged in the fixed tree, in block order.

    client: the distributed Client X and w are persisted on, or None (the local
    scheduler).
    """

    def __init__(self, X, w, client):
        self.client = client
        self.X, self.w = X, w
        rows = [int(r) for r in X.chunks[0]]
        starts = np.concatenate([[0], np.cumsum(rows)])[:-1].tolist()
        if client is None:
            xs = list(X.to_delayed().ravel())
            ws = [None] * len(xs) if w is None else list(w.to_delayed().ravel())
        else:
            xs = _block_futures(X)
            ws = _block_futures(w) if w is not None else [None] * len(xs)
        blocks = [(s, r, xb, wb) for s, r, xb, wb in zip(starts, rows, xs, ws) if r > 0]
        self.blocks = [(s, xb, wb) for s, _, xb, wb in blocks]
        self.resident = None if client is None else ResidentPasses(client, blocks)

    def run(self, read, transforms, *args):
        """The pass or row map `read` with args over the blocks, after `transforms`."""
        if isinstance(read, RowMap):
            return self._row_map(read, transforms, *args)
        task = functools.partial(_block_task, read.block, transforms)
        if self.resident is not None and RESIDENT:
            result = self.resident.run(task, read.merge, args)
            if result is not NOT_RESIDENT:
                return result
        args = [Shared(a) if _is_shared(a) else a for a in args]
        parts = self.map(read.name, task, *args)
        return self.merged(parts, read.merge, f"softkmeans-{read.name}-merge")

    def _row_map(self, read, transforms, *args):
        """A lazy Dask array of the row map's results, one task per chunk."""
        X = self.X
        kw = dict(dtype=read.dtype or X.dtype, name=f"softkmeans-{read.name}")
        if read.ndim == 1:
            kw["drop_axis"] = 1
        else:
            kw["chunks"] = (X.chunks[0], (int(args[0].shape[0]),))
        return X.map_blocks(_row_task, _RowBlock(read), transforms, *args, **kw)

    def map(self, name, block_fn, *args):
        """One task per block, block_fn(start, X block, w block or None, *args): the
        parts, named ``softkmeans-<name>`` in the task stream."""
        if self.client is None:
            args = [_delayed_shared(a) for a in args]
            token = dask.base.tokenize(self.X, self.w, *args)
            return [
                dask.delayed(block_fn, pure=True)(
                    start, xb, wb, *args, dask_key_name=(f"softkmeans-{name}-{token}", i)
                )
                for i, (start, xb, wb) in enumerate(self.blocks)
            ]
        n = len(self.blocks)
        token = uuid.uuid4().hex
        args = [self._submitted_shared(a, n, token) for a in args]
        starts, xs, ws = (list(column) for column in zip(*self.blocks))
        return self.client.map(
            block_fn, starts, xs, ws, *[[a] * n for a in args],
            key=[f"softkmeans-{name}-{token}-{i}" for i in range(n)], pure=False,
        )  # fmt: skip

    def merged(self, parts, merge, name):
        """The parts merged by `merge` in the fixed tree, on the client."""
        if self.client is None:

            def combine(group):
                key = f"{name}-" + dask.base.tokenize(group)
                return dask.delayed(merge, pure=True)(group, dask_key_name=key)

            return compute(merge_in_tree(parts, combine))[0]

        def submit(group):
            return self.client.submit(merge, group, key=f"{name}-{uuid.uuid4().hex}", pure=False)

        return merge_in_tree(self.gather(reduce_tree(parts, submit, MERGE_FAN_IN)), merge)

    def gather(self, parts):
        """The parts' values, in order."""
        if self.client is None:
            return list(compute(*parts))
        return _reported(self.client.gather, parts)

    def _submitted_shared(self, arg, n, token):
        if not isinstance(arg, Shared):
            return arg
        if sizeof(arg.value) * n <= INLINE_BYTES:
            return arg.value
        return self.client.submit(
            _identity, arg.value, key=f"softkmeans-centroids-{token}", pure=False
        )


class _RowBlock:
    """A row map's block function with the empty result of an empty chunk."""

    def __init__(self, read):
        self.block, self.read = read.block, read

    def empty(self, X, *args):
        if self.read.ndim == 1:
            return np.empty(0, dtype=self.read.dtype)
        return np.empty((0, args[0].shape[0]), dtype=self.read.dtype or X.dtype)


def _delayed_shared(arg):
    """A Shared argument as one graph key: sent to the scheduler once with the pass's
    graph and from there to each worker once, never embedded in the block tasks.

    NOTE: not ``client.scatter(C, broadcast=True)``: a broadcast waits for every worker,
    and hangs while one that just died is being restarted; a key in the graph (or a task,
    with a client) is simply recomputed wherever it is needed.
    """
    if not isinstance(arg, Shared):
        return arg
    return dask.delayed(arg.value, name="softkmeans-centroids-" + dask.base.tokenize(arg.value))


def _block_futures(A):
    """The futures of a persisted array's row blocks, in block order."""
    from dask.core import flatten
    from distributed import futures_of

    by_key = {f.key: f for f in futures_of(A)}
    return [by_key[key] for key in flatten(A.__dask_keys__())]


@functools.lru_cache(maxsize=16)
def unit_weights(n):
    """A read-only array of n ones (the weights of an unweighted block), made once per
    block size in each process rather than once per pass."""
    ones = np.ones(n)
    ones.flags.writeable = False
    return ones
