"""Sets of rows for the balanced repair (`softkmeans.fit.balanced_repair`): sorted unions
of row indices and each over-full cluster's rows of least margin, in O(n) array work
where the sorts they replace (`np.unique`, a stable argsort of every label) took most of
the repair's NumPy time at 1e6 rows (measured at 1e6 x 16, k = 64: 0.77 s in `np.unique`
and 0.34 s in the argsort, of a 14 s fit's CPU time)."""

from __future__ import annotations

import numpy as np

__all__ = ["LabelGroups", "boundary_rows", "joiner_groups", "label_groups", "min_outside",
           "sorted_union", "with_leavers"]  # fmt: skip

# A union of row sets is marked on an (n,) mask when the sets hold more than n /
# MASK_SHARE rows (a pass over n bytes); fewer are sorted (`np.unique`).
MASK_SHARE = 64


def sorted_union(n, *parts):
    """The distinct rows (sorted, int64) of the index arrays parts, each in [0, n): the
    value of np.unique(np.concatenate(parts))."""
    total = sum(p.size for p in parts)
    if total * MASK_SHARE <= n:
        return np.unique(np.concatenate(parts).astype(np.int64, copy=False))
    mask = np.zeros(n, dtype=bool)
    for p in parts:
        mask[p] = True
    return np.flatnonzero(mask)


class LabelGroups:
    """The rows of some clusters, each cluster's in row order: rows[ends[j] - sizes[j] :
    ends[j]] are cluster j's (sizes[j] = 0 for the clusters not asked for)."""

    def __init__(self, rows, sizes):
        self.rows, self.sizes = rows, sizes
        self.ends = np.cumsum(sizes)

    def of(self, j):
        return self.rows[self.ends[j] - self.sizes[j] : self.ends[j]]


def label_groups(labels, which):
    """`LabelGroups` of the clusters `which` (k,) bool: one stable (radix) sort of the
    labels of their rows alone, not of every row and not a scan per cluster."""
    mine = np.flatnonzero(which[labels])
    order = np.argsort(labels[mine].astype(np.uint16), kind="stable")
    sizes = np.bincount(labels[mine], minlength=which.size)
    return LabelGroups(mine[order], sizes)


def with_leavers(boundary, groups, margin, leave):
    """boundary (sorted) with, for every cluster j, at least leave_j of its rows (those of
    least margin; groups: `label_groups` of at least the clusters with leave_j > 0): a
    cluster over its count by e needs e of its rows free to move."""
    n = margin.size
    if not leave.any() or boundary.size == n:
        return boundary
    extra = [boundary]
    for j in np.flatnonzero(leave):
        mine = groups.of(j)
        take = min(int(leave[j]), mine.size)
        if take < mine.size:
            mine = mine[np.argpartition(margin[mine], take - 1)[:take]]
        extra.append(mine)
    return sorted_union(n, *extra)


def min_outside(values, boundary):
    """The least of values outside the rows `boundary` (inf when none)."""
    if boundary.size == values.size:
        return np.inf
    keep = np.ones(values.size, dtype=bool)
    keep[boundary] = False
    return float(values[keep].min())


def joiner_groups(second, which):
    """`LabelGroups` of the rows by their second candidate second (n,) (-1: none), for
    the clusters `which` (k,) bool: the rows that may join each of them first."""
    k = which.size
    return label_groups(np.where(second >= 0, second, k), np.append(which, False))


def boundary_rows(margin, band, want, most, everything):
    """The rows that may move (sorted): those whose margin is within their band (n,),
    at least the want and at most `most` of smallest margin; every row when asked or
    when that is half of them."""
    n = margin.size
    if everything or 2 * want >= n:
        return np.arange(n)
    near = np.flatnonzero(margin <= band)
    if near.size < want or near.size > most:
        take = want if near.size < want else most
        near = np.sort(np.argpartition(margin, take)[:take])
    return np.arange(n) if 2 * near.size >= n else near
