"""The hard balanced assignment as one pass and a repair (SPEC.md, "Balanced assignments
as one pass"), for unit weights and integer counts.

Each solve makes one fused pass at the last offsets g (`biased_pass`: every row's label
argmin_j (D_ij - g_j), its gap to the second smallest, and N, S, J at those labels), then
makes the counts exact by successive shortest paths (`_native.balanced_counts`) on the
boundary rows alone: the rows whose gap is below a band. The other rows keep their labels,
which stay argmins of D - g' as long as the offsets move, relative to each other, by less
than their gaps (the spread of g' - g): that is checked after the repair, and the band
widened until it holds. The labels are then the optimum of the linear program at these
centroids and counts (complementary slackness on every row), whatever the start offsets:
a warm start only makes the boundary thinner. N, S and J are the pass's, corrected by the
moved rows.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import _balance, _native, _stats
from ..sources.runner import transformed_blocks

__all__ = [
    "BiasedPass",
    "CountsRepair",
    "Start",
    "biased_pass",
    "min_outside",
    "rounding_slack",
]

# Rows allowed to move at the first try, per unit of count error, beyond those within
# the band (the shortest paths need a few candidates per move); 4x at each retry.
ROWS_PER_MOVE = 8
# The band of the first try: this times the spread of the offsets' last change.
BAND_FACTOR = 2.0
# A repair that fails TRIES times takes every row.
TRIES = 4
# A start whose count error is above PRESOLVE_ERROR x n rows (n >= 2 PRESOLVE_ROWS)
# first takes the offsets of evenly spaced rows, PRESOLVE_ROWS or n / PRESOLVE_SHARE if
# fewer (`CountsRepair._presolve`), and a pass there (with candidates within
# PRESOLVE_BAND x the spread of that change); above NEWTON_MIN_K clusters, one above
# NEWTON_ERROR x k rows then takes Newton's offsets on each row's CANDIDATES best
# columns (at most NEWTON_STEPS steps, stopping at NEWTON_ENOUGH x k). Measured on
# bench/balanced.py's 20,000 x 6 blobs, k = 10, n_init = 3, CPU time of one thread:
# a sample of n / 10 rows (not 8192) and no Newton start took the fit from 0.36 s to
# 0.25 s. The shortest paths' heaps hold k - 1 edges a row, Newton reads 8 a row at
# each of ~10 evaluations: at k = 16 the two were even, at k = 32 Newton was 11 %
# faster, at 1e5 x 16, k = 64, 40 %.
NEWTON_ERROR, NEWTON_ENOUGH, CANDIDATES, NEWTON_STEPS, NEWTON_MIN_K = 1, 1, 8, 10, 16
# A row's candidates: its columns within CANDIDATE_BAND x the spread of the offsets'
# change at the last solve of its best (the columns it may move to, if the next change
# is like the last; the others are bounded by the pass's floor).
CANDIDATE_BAND = 4.0
PRESOLVE_ERROR, PRESOLVE_ROWS, PRESOLVE_SHARE, PRESOLVE_BAND = 0.01, 8192, 10, 1.0
# The moves to a boundary row's best other clusters that the first repair takes.
EDGES = 8
# Below this many multiply-adds a pass (n x k x d) a solve reads X on one thread: its
# passes are short next to its serial Newton and shortest paths, and a team waiting
# between them spins (and on a busy machine waits for a descheduled thread). Measured
# on bench/balanced.py's 20,000 x 6, k = 10 (1.2e6 a pass), n_threads=2, 2 cores under
# other load: the fit took 0.38 s wall with two threads in its passes, 0.29 s with one.
SERIAL_SOLVE_WORK = 1 << 23


class BiasedPass(NamedTuple):
    """One pass at offsets g: labels (n,) int64, gap (n,) and dist (n,) = D at the label
    (X's dtype), the BlockStats at those labels, and each row's best biased columns
    within a band, at most m (`_native.biased_hard_stats_candidates`: cand (n, m) int32,
    cand_dist (n, m), floor (n,); m = 0: none)."""

    labels: np.ndarray
    gap: np.ndarray
    dist: np.ndarray
    stats: _stats.BlockStats
    cand: np.ndarray
    cand_dist: np.ndarray
    floor: np.ndarray


def _unfused_candidates(D, g, m, band):
    """(cand, cand_dist, floor) of `_native.biased_hard_stats_candidates` from D (rows, k)
    by their definition (NumPy, in D's dtype)."""
    if m == 0:
        none = np.empty((D.shape[0], 0), dtype=D.dtype)
        return none.astype(np.int32), none, np.empty(0, dtype=D.dtype)
    v = D - np.asarray(g, dtype=np.float64).astype(D.dtype)
    order = np.argsort(v, axis=1, kind="stable")[:, :m]
    sorted_v = np.take_along_axis(v, order, axis=1)
    bar = (sorted_v[:, 0] + D.dtype.type(band)).astype(D.dtype)
    held = sorted_v < bar[:, None]
    cand = np.where(held, order, -1).astype(np.int32)
    cand_dist = np.where(held, np.take_along_axis(D, order, axis=1), 0).astype(D.dtype)
    floor = np.where(held[:, -1], sorted_v[:, -1], bar).astype(D.dtype)
    return cand, cand_dist, floor


def _unfused_block(rows, C, g, w, n_threads, m, band):
    """The pass over one block by its definition: the kernel's D (rows, k), then
    `_balance.biased_argmin`, the candidates and the sums (CSR blocks, which no fused
    kernel reads)."""
    D = _native.sq_distances(rows, C, n_threads)
    labels, gap = _balance.biased_argmin(D, g)
    dist = D[np.arange(D.shape[0]), labels]
    k = C.shape[0]
    onehot = sp.csr_matrix((w, (labels, np.arange(labels.size))), shape=(k, labels.size))
    S = onehot @ rows.astype(np.float64)
    S = S.toarray() if sp.issparse(S) else np.asarray(S)
    N = np.bincount(labels, w, minlength=k)
    J = float(w @ dist.astype(np.float64))
    stats = _stats.BlockStats(float(w.sum()), N, S, J, J, np.nan)
    return (labels, gap, dist, stats, *_unfused_candidates(D, g, m, band))


def biased_pass(source, C, g, m=0, band=np.inf):
    """`BiasedPass` of every row of a local source at centroids C (X's dtype) and offsets
    g (k,) float64, with at most m candidates a row within band of its best: the fused
    native pass per dense block, the unfused one per CSR block; blocks merged in order."""
    g = np.ascontiguousarray(g, dtype=np.float64)
    parts = []
    for start, stop, rows in transformed_blocks(source):
        w = source.weights[start:stop]
        if sp.issparse(rows):
            parts.append(_unfused_block(rows, C, g, w, source.n_threads, m, band))
        else:
            parts.append(
                _native.biased_hard_stats_candidates(rows, C, g, w, source.n_threads, m, band)
            )
    if len(parts) == 1:
        return BiasedPass(*parts[0])
    labels, gap, dist, stats, cand, cand_dist, floor = zip(*parts)
    return BiasedPass(
        np.concatenate(labels), np.concatenate(gap), np.concatenate(dist), _stats.merge(stats),
        np.concatenate(cand), np.concatenate(cand_dist), np.concatenate(floor),
    )  # fmt: skip


def _kernel_rows(source, idx):
    """The rows idx of the source as its kernels read them (CSR stays CSR: the CSR
    kernel's distances are not the dense one's bits)."""
    if source.kind == "csr":
        return source.data[idx]
    return np.ascontiguousarray(source.rows(idx))


def rounding_slack(p, g):
    """(n,) a bound on how far each row's computed gap may be from its exact gap at g
    (the pass subtracts g rounded to X's dtype, in X's dtype: a few units of roundoff of
    |D| + |g| on each of the two values)."""
    u = float(np.finfo(p.dist.dtype).eps)
    big = np.abs(p.dist).astype(np.float64) + 3.0 * float(np.abs(g).max(initial=0.0))
    return 8.0 * u * (big + p.gap.astype(np.float64)) + np.finfo(np.float64).tiny


class Start(NamedTuple):
    """Where the repair starts: offsets g (k,), each row's label at g, a lower bound on
    its exact gap there (margin, float64) and its D at the label (own, float64)."""

    g: np.ndarray
    labels: np.ndarray
    margin: np.ndarray
    own: np.ndarray


def _pass_start(p, g):
    """The `Start` of the pass p at its offsets g."""
    margin = p.gap.astype(np.float64) - rounding_slack(p, g)
    return Start(g, p.labels, margin, p.dist.astype(np.float64))


def _newton_start(p, g, targets, enough):
    """The `Start` at offsets near the optimum's: damped Newton on the dual over each
    row's candidates (`_native.balanced_newton`, many rows a step). A row's margin is
    its gap among its candidates, and below the bound on the columns outside them: at
    g their biased values were at least the pass's floor (in X's dtype, less its
    rounding), and each has since fallen by at most the most any offset rose."""
    _, g_new, labels, own, gap = _native.balanced_newton(
        p.cand, p.cand_dist, targets, g, NEWTON_STEPS, enough
    )[:5]
    if np.isfinite(p.floor).any():
        u = float(np.finfo(p.floor.dtype).eps)
        big = np.abs(p.floor).astype(np.float64) + 4.0 * np.abs(g).max()
        floor = p.floor.astype(np.float64) - 8.0 * u * big
        outside = floor - float((g_new - g).max()) - (own - g_new[labels])
        gap = np.minimum(gap, outside)
    u = float(np.finfo(np.float64).eps)
    finite = np.where(np.isfinite(gap), np.abs(gap), 0.0)
    margin = gap - 8.0 * u * (np.abs(own) + 3.0 * np.abs(g_new).max() + finite)
    return Start(g_new, labels, margin - np.finfo(np.float64).tiny, own)


class CountsRepair:
    """The balanced hard assignment of a local source's unit-weight rows to integer
    counts, solved at each iteration's centroids from the last offsets (warm start).

    targets (k,) int64 summing to n + slack: slack extra rows of cost 0 to every cluster
    (capacities made two-sided; they are always boundary rows).
    """

    def __init__(self, source, targets, slack=0):
        k = np.asarray(targets).size
        n, d = source.shape
        if source.n_threads != 1 and n * k * d < SERIAL_SOLVE_WORK:
            source = copy.copy(source)  # (the same X and weights, read on one thread)
            source.n_threads = 1
        self.source, self.targets, self.slack = source, np.asarray(targets, np.int64), slack
        self.g = np.zeros(k)
        self.slack_owner = np.full(slack, -1, dtype=np.int64)
        # Candidates a row for the Newton start (none with slack rows: the sample's,
        # nor at few clusters), those within band of the row's best (inf: the first
        # solve).
        self.m = 0 if slack or k <= NEWTON_MIN_K else min(k, CANDIDATES)
        self.band = np.inf
        # How far each cluster's offset fell behind the one that rose most, at the last
        # warm repair: the band of its rows at the next.
        self.reach, self.warm = np.zeros(k), False
        # (boundary rows, their D, every row's margin at the end) of the last solve
        self.last = None

    def solve(self, C, g=None):
        """(labels (n,), offsets g (k,) with max 0, BlockStats at the labels, each row's
        D at its label (float64)). g: the start offsets (default: the last solve's)."""
        g = self.g if g is None else np.asarray(g, dtype=np.float64)
        g_in = g
        p = biased_pass(self.source, C, g, self.m, self.band)
        n, k = p.labels.size, g.size
        off = int(np.abs(np.bincount(p.labels, minlength=k) - self.targets).sum()) + self.slack
        if off > PRESOLVE_ERROR * n and n >= 2 * PRESOLVE_ROWS:
            g = self._presolve(C, g, n, min(PRESOLVE_ROWS, n // PRESOLVE_SHARE))
            # the sample's offsets are near: candidates within a share of their change
            band = PRESOLVE_BAND * float(np.ptp(g - g_in)) or np.inf
            p = biased_pass(self.source, C, g, self.m, band)
            off = int(np.abs(np.bincount(p.labels, minlength=k) - self.targets).sum())
            off += self.slack
        start = _pass_start(p, g)
        if self.m and off > NEWTON_ERROR * k:
            start = _newton_start(p, g, self.targets, NEWTON_ENOUGH * k)
        labels, margin = start.labels, start.margin
        counts = np.bincount(labels, minlength=k)
        off = int(np.abs(counts - self.targets).sum()) + self.slack
        excess = np.maximum(counts - self.targets, 0)
        want = ROWS_PER_MOVE * (off // 2 + k)
        band = BAND_FACTOR * self.reach[labels]
        for tries in range(TRIES + 1):
            boundary = _boundary(margin, band, want, tries == TRIES)
            boundary = _with_leavers(boundary, labels, margin, (2 << tries) * excess)
            out = self._repair(C, start, boundary)
            if out is not None:
                change = out[0] - start.g
                # A row of cluster a keeps its label while each offset g_j rose, less
                # g_a, by at most its gap: max(change) - change_a.
                reach = change.max() - change
                after = margin - reach[labels]
                if min_outside(after, boundary) >= 0:
                    # A cold start's change says nothing of the next solve's (from here).
                    self.reach = reach if self.warm else np.zeros(k)
                    self.warm, self.last = True, (boundary, out[2], after)
                    spread = float(np.ptp(out[0] - g_in))
                    self.band = CANDIDATE_BAND * spread if spread > 0 else self.band
                    return self._accept(p, start, boundary, *out)
            # NOTE: not a band of the failed change: a repair of too few rows overshoots
            # (measured: 20x the spread of the full repair's change).
            want = 4 * max(want, boundary.size)
        raise RuntimeError("the balanced repair did not settle on every row")  # pragma: no cover

    def _presolve(self, C, g, n, m):
        """Offsets near the optimum's when the start misses the counts by much: those of
        m evenly spaced rows with the counts scaled to them (the quantiles that the
        offsets are, estimated on a sample), from g: Newton on their distances to every
        centroid, or, with slack rows, the exact shortest paths."""
        k = g.size
        rows = (np.arange(m, dtype=np.int64) * n) // m
        D = _native.sq_distances(_kernel_rows(self.source, rows), C, self.source.n_threads)
        slack = (self.slack * m) // n
        targets = _balance.integer_targets(self.targets * ((m + slack) / self.targets.sum()),
                                           m + slack)  # fmt: skip
        if not slack:
            every = np.ascontiguousarray(np.broadcast_to(np.arange(k, dtype=np.int32), D.shape))
            return _native.balanced_newton(every, D, targets, g, NEWTON_STEPS, NEWTON_ENOUGH * k)[1]
        cost = np.vstack([D.astype(np.float64), np.zeros((slack, k))])
        status, _, g_sub, _, _ = _native.balanced_counts(
            cost, targets, g, np.full(m + slack, -1, dtype=np.int64), 1, np.inf, k, 0.0, 1
        )
        return g_sub if status == 0 else g

    def _repair(self, C, start, boundary):
        """(offsets, owners of the boundary rows then the slack rows, their D (float64),
        their rows) by successive shortest paths from the start's offsets; None when the
        other rows' labels leave a count out of reach."""
        k, nb = self.targets.size, boundary.size
        fixed = np.bincount(start.labels, minlength=k)
        fixed -= np.bincount(start.labels[boundary], minlength=k)
        targets = self.targets - fixed
        if (targets < 0).any():
            return None
        rows = _kernel_rows(self.source, boundary)
        D = _native.sq_distances(rows, C, self.source.n_threads).astype(np.float64)
        cost = np.vstack([D, np.zeros((self.slack, k))]) if self.slack else D
        owner = np.concatenate([start.labels[boundary], self.slack_owner])
        tie = 1e-12 * max(float(D.mean()) if nb else 0.0, np.finfo(np.float64).tiny)
        # Every boundary row may move; first through its EDGES best moves only, then
        # (when complementary slackness fails on one of them) through all.
        status, owner, g_new, _, _ = _native.balanced_counts(
            cost, targets, start.g, owner, 1, np.inf, EDGES, tie, 2
        )
        return None if status != 0 else (g_new, owner, D, rows)

    def _accept(self, p, start, boundary, g_new, owner, D, rows):
        """The labels after the repair, and the pass's statistics corrected by every row
        whose label is not the pass's (unit weights)."""
        nb, k = boundary.size, self.targets.size
        self.g, self.slack_owner = g_new - g_new.max(), owner[nb:]
        labels = start.labels.copy()
        labels[boundary] = owner[:nb]
        own = start.own.copy()
        own[boundary] = D[np.arange(nb), owner[:nb]]
        moved = np.flatnonzero(labels != p.labels)
        new, old = labels[moved], p.labels[moved]
        x = _kernel_rows(self.source, moved)
        x = x.toarray() if sp.issparse(x) else np.asarray(x, dtype=np.float64)
        S = p.stats.sums.copy()
        np.add.at(S, new, x)
        np.subtract.at(S, old, x)
        N = p.stats.cluster_weights + np.bincount(new, minlength=k) - np.bincount(old, minlength=k)
        J = p.stats.distortion + float((own[moved] - p.dist[moved].astype(np.float64)).sum())
        return labels, self.g.copy(), _stats.BlockStats(p.stats.weight, N, S, J, J, np.nan), own


def _boundary(margin, band, want, everything):
    """The rows that may move (sorted): those whose margin is within their band (n,),
    and at least the want of smallest margin; every row when asked or when that is half
    of them."""
    n = margin.size
    if everything or 2 * want >= n:
        return np.arange(n)
    near = np.flatnonzero(margin <= band)
    if near.size < want:
        near = np.sort(np.argpartition(margin, want)[:want])
    return np.arange(n) if 2 * near.size >= n else near


def _with_leavers(boundary, labels, margin, leave):
    """boundary with, for every cluster j, at least leave_j of its rows (those of least
    margin): a cluster over its count by e needs e of its rows free to move."""
    if not leave.any() or boundary.size == labels.size:
        return boundary
    extra = [boundary]
    for j in np.flatnonzero(leave):
        mine = np.flatnonzero(labels == j)
        take = min(int(leave[j]), mine.size)
        if take < mine.size:
            mine = mine[np.argpartition(margin[mine], take - 1)[:take]]
        extra.append(mine)
    return np.unique(np.concatenate(extra))


def min_outside(values, boundary):
    """The least of values outside the rows `boundary` (inf when none)."""
    if boundary.size == values.size:
        return np.inf
    keep = np.ones(values.size, dtype=bool)
    keep[boundary] = False
    return float(values[keep].min())
