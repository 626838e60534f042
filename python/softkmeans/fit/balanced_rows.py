"""Sets of rows for the balanced repair (`softkmeans.fit.balanced_repair`): sorted unions
of row indices and each group's rows of least margin, in O(n) work where the sorts they
replace (`np.unique`, a stable argsort of every label, an argpartition of each group)
took most of the repair's NumPy time at 1e6 rows (measured at 1e6 x 16, k = 64: 0.77 s
in `np.unique` and 0.34 s in the argsort, of a 14 s fit's CPU time)."""

from __future__ import annotations

import numpy as np

from .. import _native

__all__ = ["boundary_rows", "min_outside", "sorted_union", "with_leavers"]

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


def with_leavers(boundary, keys, margin, leave):
    """boundary (sorted) with, for every group j, at least leave_j (k,) of its rows (keys
    (n,) int64 == j; outside [0, k): none), those of least margin (float64; ties to the
    smaller row): a cluster over its count by e needs e of its rows free to move, one
    short of rows some of those next to it (`_native.least_margin_rows`: one O(n) pass,
    where NumPy's argpartition of each group took 0.7 s of the 1e6 fit's 8.7 s)."""
    n = margin.size
    if not leave.any() or boundary.size == n:
        return boundary
    keys = np.asarray(keys, dtype=np.int64)
    return np.flatnonzero(_native.least_margin_rows(boundary, keys, margin, leave))


def min_outside(values, boundary):
    """The least of values outside the rows `boundary` (inf when none)."""
    if boundary.size == values.size:
        return np.inf
    keep = np.ones(values.size, dtype=bool)
    keep[boundary] = False
    return float(values[keep].min())


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
        none = np.empty(0, dtype=np.int64)
        near = np.flatnonzero(_native.least_margin_rows(none, None, margin, np.array([take])))
    return np.arange(n) if 2 * near.size >= n else near
