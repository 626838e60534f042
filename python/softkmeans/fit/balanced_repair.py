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

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import _balance, _native, _stats
from ..sources.runner import transformed_blocks

__all__ = ["BiasedPass", "CountsRepair", "biased_pass", "min_outside", "rounding_slack"]

# Rows allowed to move at the first try, per unit of count error, beyond those within
# the band (the shortest paths need a few candidates per move); 4x at each retry.
ROWS_PER_MOVE = 8
# The band of the first try: this times the spread of the offsets' last change.
BAND_FACTOR = 2.0
# A repair that fails TRIES times takes every row.
TRIES = 4
# A start whose count error is above PRESOLVE_ERROR x n rows first takes the offsets of
# PRESOLVE_ROWS evenly spaced rows (`CountsRepair._presolve`).
PRESOLVE_ERROR, PRESOLVE_ROWS = 0.01, 16384
# The moves to a boundary row's best other clusters that the first repair takes.
EDGES = 8


class BiasedPass(NamedTuple):
    """One pass at offsets g: labels (n,) int64, gap (n,) and dist (n,) = D at the label
    (X's dtype), and the BlockStats at those labels."""

    labels: np.ndarray
    gap: np.ndarray
    dist: np.ndarray
    stats: _stats.BlockStats


def _unfused_block(rows, C, g, w, n_threads):
    """The pass over one block by its definition: the kernel's D (rows, k), then
    `_balance.biased_argmin` and the sums (CSR blocks, which no fused kernel reads)."""
    D = _native.sq_distances(rows, C, n_threads)
    labels, gap = _balance.biased_argmin(D, g)
    dist = D[np.arange(D.shape[0]), labels]
    k = C.shape[0]
    onehot = sp.csr_matrix((w, (labels, np.arange(labels.size))), shape=(k, labels.size))
    S = onehot @ rows.astype(np.float64)
    S = S.toarray() if sp.issparse(S) else np.asarray(S)
    N = np.bincount(labels, w, minlength=k)
    J = float(w @ dist.astype(np.float64))
    return labels, gap, dist, _stats.BlockStats(float(w.sum()), N, S, J, J, np.nan)


def biased_pass(source, C, g):
    """`BiasedPass` of every row of a local source at centroids C (X's dtype) and offsets
    g (k,) float64: the fused native pass per dense block, the unfused one per CSR block;
    blocks merged in order."""
    g = np.ascontiguousarray(g, dtype=np.float64)
    parts = []
    for start, stop, rows in transformed_blocks(source):
        w = source.weights[start:stop]
        if sp.issparse(rows):
            parts.append(_unfused_block(rows, C, g, w, source.n_threads))
        else:
            parts.append(_native.biased_hard_stats(rows, C, g, w, source.n_threads))
    if len(parts) == 1:
        return BiasedPass(*parts[0])
    labels, gap, dist, stats = zip(*parts)
    return BiasedPass(
        np.concatenate(labels), np.concatenate(gap), np.concatenate(dist), _stats.merge(stats)
    )


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


class CountsRepair:
    """The balanced hard assignment of a local source's unit-weight rows to integer
    counts, solved at each iteration's centroids from the last offsets (warm start).

    targets (k,) int64 summing to n + slack: slack extra rows of cost 0 to every cluster
    (capacities made two-sided; they are always boundary rows).
    """

    def __init__(self, source, targets, slack=0):
        self.source, self.targets, self.slack = source, np.asarray(targets, np.int64), slack
        self.g = np.zeros(self.targets.size)
        self.slack_owner = np.full(slack, -1, dtype=np.int64)
        # How far each cluster's offset fell behind the one that rose most, at the last
        # warm solve: the band of its rows at the next.
        self.reach, self.warm = np.zeros(self.targets.size), False
        self.last = None  # (boundary rows, their D, every row's margin) of the last solve

    def solve(self, C, g=None):
        """(labels (n,), offsets g (k,) with max 0, BlockStats at the labels, each row's
        D at its label (float64)). g: the start offsets (default: the last solve's)."""
        g = self.g if g is None else np.asarray(g, dtype=np.float64)
        p = biased_pass(self.source, C, g)
        counts = np.bincount(p.labels, minlength=self.targets.size)
        off = int(np.abs(counts - self.targets).sum()) + self.slack
        n = p.labels.size
        if off > PRESOLVE_ERROR * n and n >= 2 * PRESOLVE_ROWS:
            g = self._presolve(C, g, n)
            p = biased_pass(self.source, C, g)
            counts = np.bincount(p.labels, minlength=self.targets.size)
            off = int(np.abs(counts - self.targets).sum()) + self.slack
        margin = p.gap.astype(np.float64) - rounding_slack(p, g)  # <= the exact gap
        excess = np.maximum(counts - self.targets, 0)
        want = ROWS_PER_MOVE * (off // 2 + g.size)
        band = BAND_FACTOR * self.reach[p.labels]
        for tries in range(TRIES + 1):
            boundary = _boundary(margin, band, want, tries == TRIES)
            boundary = _with_leavers(boundary, p.labels, margin, (2 << tries) * excess)
            out = self._repair(C, p, g, boundary)
            if out is not None:
                change = out[0] - g
                # A row of cluster a keeps its label while each offset g_j rose, less
                # g_a, by at most its gap: max(change) - change_a.
                reach = change.max() - change
                if min_outside(margin - reach[p.labels], boundary) >= 0:
                    # A cold start's change says nothing of the next solve's (from here).
                    self.reach = reach if self.warm else np.zeros(g.size)
                    self.warm, self.last = True, (boundary, out[2], margin)
                    return self._accept(p, boundary, *out)
            # NOTE: not a band of the failed change: a repair of too few rows overshoots
            # (measured: 20x the spread of the full repair's change).
            want = 4 * max(want, boundary.size)
        raise RuntimeError("the balanced repair did not settle on every row")  # pragma: no cover

    def _presolve(self, C, g, n):
        """Offsets near the optimum's when the start's count error is large: the exact
        offsets of PRESOLVE_ROWS evenly spaced rows with the counts scaled to them (the
        quantiles that the offsets are, estimated on a sample), from g."""
        m = PRESOLVE_ROWS
        rows = (np.arange(m, dtype=np.int64) * n) // m
        D = _native.sq_distances(_kernel_rows(self.source, rows), C, self.source.n_threads)
        slack = (self.slack * m) // n
        targets = _balance.integer_targets(self.targets * ((m + slack) / self.targets.sum()),
                                           m + slack)  # fmt: skip
        cost = np.vstack([D.astype(np.float64), np.zeros((slack, g.size))])
        status, _, g_sub, _, _ = _native.balanced_counts(
            cost, targets, g, np.full(m + slack, -1, dtype=np.int64), 1, np.inf, g.size, 0.0, 1
        )
        return g_sub if status == 0 else g

    def _repair(self, C, p, g, boundary):
        """(offsets, owners of the boundary rows then the slack rows, their D (float64),
        their rows) by successive shortest paths from g; None when the other rows' labels
        leave a count out of reach."""
        k, nb = self.targets.size, boundary.size
        fixed = np.bincount(p.labels, minlength=k) - np.bincount(p.labels[boundary], minlength=k)
        targets = self.targets - fixed
        if (targets < 0).any():
            return None
        rows = _kernel_rows(self.source, boundary)
        D = _native.sq_distances(rows, C, self.source.n_threads).astype(np.float64)
        cost = np.vstack([D, np.zeros((self.slack, k))]) if self.slack else D
        owner = np.concatenate([p.labels[boundary], self.slack_owner])
        tie = 1e-12 * max(float(D.mean()) if nb else 0.0, np.finfo(np.float64).tiny)
        # Every boundary row may move; first through its EDGES best moves only, then
        # (when complementary slackness fails on one of them) through all.
        status, owner, g_new, _, _ = _native.balanced_counts(
            cost, targets, g, owner, 1, np.inf, EDGES, tie, 2
        )
        return None if status != 0 else (g_new, owner, D, rows)

    def _accept(self, p, boundary, g_new, owner, D, rows):
        """The labels after the repair, and the pass's statistics corrected by the rows
        it moved (unit weights)."""
        nb, k = boundary.size, self.targets.size
        self.g, self.slack_owner = g_new - g_new.max(), owner[nb:]
        new, old = owner[:nb], p.labels[boundary]
        moved = np.flatnonzero(new != old)
        labels = p.labels.copy()
        labels[boundary[moved]] = new[moved]
        x = rows[moved]
        x = x.toarray() if sp.issparse(x) else np.asarray(x, dtype=np.float64)
        S = p.stats.sums.copy()
        np.add.at(S, new[moved], x)
        np.subtract.at(S, old[moved], x)
        N = p.stats.cluster_weights + np.bincount(new[moved], minlength=k)
        N -= np.bincount(old[moved], minlength=k)
        own = p.dist.astype(np.float64)
        own[boundary] = D[np.arange(nb), new]
        J = p.stats.distortion + float((D[moved, new[moved]] - D[moved, old[moved]]).sum())
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
    k = leave.size
    if not leave.any() or boundary.size == labels.size:
        return boundary
    order = np.argsort(labels.astype(np.int32), kind="stable")
    ends = np.cumsum(np.bincount(labels, minlength=k))
    extra = [boundary]
    for j in np.flatnonzero(leave):
        mine = order[(ends[j - 1] if j else 0) : ends[j]]
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
