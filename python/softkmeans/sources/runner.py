"""The one runner of passes over X (SPEC.md, "Passes").

A `Pass` is a block function and a merge. The block function maps one block of rows to
a partial result, ``block(rows, w, start, *args)``: the rows (dense or CSR, after the
source's per-block transforms), their weights (float64, always an array), the index of
the block's first row in X, and the pass's read-only arguments (the centroids, ...). The
merge maps a list of consecutive partials, in block order, to one partial of the same
form. `run` runs a pass over a source:

- in this process (every `LocalSource`): the blocks in row order, the partials merged
  by the fixed tree below;
- on Dask (`softkmeans.sources.dask_source`): the same block function as one task per
  chunk, the partials merged by the same tree (`softkmeans.sources.dask_passes`).

The tree merges groups of MERGE_FAN_IN consecutive partials, level by level, so its
shape depends only on the number of blocks: equal blocks give equal bytes whichever
runner, scheduler or worker computed them (SPEC.md, "Block statistics").

A `RowMap` is a pass whose partials are rows (labels, distances, responsibilities): its
merge is concatenation, and on Dask it is a lazy array (a prediction stays lazy).

A source's ``transforms`` (functions rows -> rows: cosine's row normalization,
annealing's zero column) are applied by the runner to each block before the block
function sees it; no copy of X is made.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

__all__ = [
    "MERGE_FAN_IN",
    "Pass",
    "RowMap",
    "concat",
    "merge_in_tree",
    "merge_nodes",
    "reduce_tree",
    "run",
    "run_array",
    "run_blocks",
    "transformed",
]

# Partials of up to this many consecutive blocks merge in one step: a tree whose shape
# depends only on the number of blocks (one level up to 8 blocks, two up to 64, ...).
MERGE_FAN_IN = 8


class Pass(NamedTuple):
    """A read of X: ``block(rows, w, start, *args) -> partial``, ``merge([partial]) ->
    partial`` (consecutive partials in block order); `name` names its Dask tasks."""

    name: str
    block: Callable
    merge: Callable


class RowMap(NamedTuple):
    """A read of X giving one result per row: ``block(rows, *args) -> array`` (or a
    tuple of arrays) of len(rows) rows; ``dtype``: the result's dtype (None: X's), ``ndim``
    2 for (n, k) results (a Dask array's chunks), 1 for (n,)."""

    name: str
    block: Callable
    dtype: object = None
    ndim: int = 1


def reduce_tree(parts, combine, until):
    """The levels of the merge tree while more than `until` parts remain: each level
    combines consecutive groups of MERGE_FAN_IN parts, in block order."""
    while len(parts) > until:
        parts = [combine(parts[i : i + MERGE_FAN_IN]) for i in range(0, len(parts), MERGE_FAN_IN)]
    return parts


def merge_in_tree(values, merge):
    """The values merged as the tree merges them (one value: itself, unmerged)."""
    return reduce_tree(list(values), merge, 1)[0]


def merge_nodes(nodes, n, merge):
    """The tree over n blocks, merged as far as `nodes` allow: the nodes of a tree held
    in parts (a Dask worker holds some blocks, the client gathers the workers' nodes).

    nodes: {(level, j): partial}; level 0 holds the blocks, and node j of level L + 1 is
    the merge of nodes j * MERGE_FAN_IN ... (j + 1) * MERGE_FAN_IN - 1 of level L, in
    order (`reduce_tree`'s groups). Every node whose children are all present replaces
    them; returns the new dict. With every block present: one node, `merge_in_tree`'s."""
    nodes = dict(nodes)
    level, size = 0, n
    while size > 1:
        for j in range(0, size, MERGE_FAN_IN):
            group = [(level, i) for i in range(j, min(j + MERGE_FAN_IN, size))]
            if all(node in nodes for node in group):
                nodes[(level + 1, j // MERGE_FAN_IN)] = merge([nodes.pop(g) for g in group])
        level, size = level + 1, -(-size // MERGE_FAN_IN)
    return nodes


def concat(parts):
    """Concatenation in block order (of each member where the parts are tuples)."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(column) for column in zip(*parts))
    return np.concatenate(parts)


def transformed(rows, transforms):
    """A block after the source's per-block transforms, in order."""
    for transform in transforms:
        rows = transform(rows)
    return rows


def run(source, read, *args):
    """The pass or row map `read` over `source`, with args: its merged result."""
    if source.kind == "dask":
        return source.block_passes.run(read, source.transforms, *args)
    return run_blocks(source.blocks(), source.weights, read, *args, transforms=source.transforms)


def run_array(X, weights, read, *args):
    """The pass or row map `read` over the in-memory array X (n, d) as one block (a
    source's `dense_array`: the kernels read X in place, its rows' indices those of X)."""
    return run_blocks(((0, X.shape[0], X),), weights, read, *args)


def run_blocks(blocks, weights, read, *args, transforms=()):
    """The pass or row map `read` over (start, stop, rows) blocks of X in row order (a
    source's, one array's, or those a copy of X writes as it reads them), `transforms`
    applied to each: its merged result."""
    # A loop, not a comprehension: the transformed block is dropped before the next one
    # is made (one block's copy alive at a time).
    parts = []
    for start, stop, rows in blocks:
        if transforms:
            rows = transformed(rows, transforms)
        if isinstance(read, RowMap):
            parts.append(read.block(rows, *args))
        else:
            parts.append(read.block(rows, weights[start:stop], start, *args))
        del rows
    if isinstance(read, RowMap):
        return concat(parts)
    return merge_in_tree(parts, read.merge)
