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

import numpy as np
import scipy.sparse as sp

from .. import _balance, _native, _stats
from . import balanced_start
from .balanced_passes import biased_pass, kernel_rows, sq_distances
from .balanced_rows import boundary_rows, min_outside, sorted_union, with_leavers
from .balanced_start import Start, candidates_start, pass_start, rounding_slack, solve_spd

__all__ = [
    "CountsRepair",
    "Start",
    "min_outside",
    "rounding_slack",
    "solve_spd",
]

# Rows allowed to move at the first try, per unit of count error, beyond those within
# the band (the shortest paths need a few candidates per move); 4x at each retry.
ROWS_PER_MOVE = 8
# The band of the first try: this times the spread of the offsets' last change, at most
# BAND_ROWS x the rows allowed (early changes are wide). A first try without the rows
# near a cluster whose offset must move fails (offsets moved 7-520, not 0.1-1.4): bench/
# balanced.py's 21 solves at 1e6 x 16, k = 64 took 53 tries at 2, 40 at 4, 36 at 8 (Zen 4:
# fits 8.9, 8.0, 7.4 s; at 1e5 1.22, 1.12, 1.39 s; 1e6, k = 16: 6.6 s at 2, 5.8 s at 4).
BAND_FACTOR, BAND_ROWS = 4.0, 16
# A repair that fails TRIES times takes every row.
TRIES = 4
# A start whose count error, estimated on PRESOLVE_ROWS evenly spaced rows, is above
# PRESOLVE_ERROR x n rows and above PRESOLVE_NOISE x the error that the sample's own
# offsets leave (about n sqrt(k / PRESOLVE_ROWS): each cluster's count estimated from
# ~PRESOLVE_ROWS / k rows; measured at 1e5 x 16, k = 64: 6,300-6,800 rows, where warm
# starts missed by 1,100-3,000 and the presolve made them worse) first takes the
# offsets of those rows (`CountsRepair._presolve`), and the pass is made there (with
# candidates within PRESOLVE_BAND x the spread of that change): one pass, not a pass to
# see the error and another after. One above NEWTON_ERROR x k rows then takes Newton's
# offsets on each row's CANDIDATES best columns (at most NEWTON_STEPS steps, stopping
# at NEWTON_ENOUGH x k), above NEWTON_MIN_K clusters: the shortest paths' heaps hold
# k - 1 edges a row, Newton reads 8 a row at each of ~10 evaluations (measured on
# bench/balanced.py's 20,000 x 6 blobs, 3 runs, CPU time of one thread: at k = 10 the
# fit took 0.36 s with a Newton start and 0.29 s without, at k = 16 the two were even,
# at k = 32 Newton was 11 % faster, at 1e5 x 16, k = 64, 40 %).
NEWTON_ERROR, NEWTON_ENOUGH, CANDIDATES, NEWTON_STEPS, NEWTON_MIN_K = 1, 1, 8, 10, 16
# Newton reads the rows whose gap is below NEWTON_REACH x the spread of the offsets'
# last change, and starts again (at most NEWTON_RESTARTS times) while it stops above
# NEWTON_AGAIN x its enough.
NEWTON_REACH, NEWTON_RESTARTS, NEWTON_AGAIN = 2.0, 2, 4
# Rows a Newton call reads from which its ~30 sweeps (parallel regions) run on the
# source's threads. Measured on bench/balanced.py's 1e6 x 16, k = 64 fit, 2 threads,
# quiet (load ~1.1), wall: 6.15 s from 2^21 rows (every call on one thread), 5.72 s
# from 2^18, 5.47 s from 2^16 (the unconstrained fit 0.18 s). On a busy machine each
# sweep may wait for a descheduled thread (before Newton's vector sweeps, load 4-5:
# 14.2 s wall on 2 threads, 8.4 s on 1).
NEWTON_THREAD_ROWS = 1 << 16
# Rows left open by Newton's margins, per row the first repair takes, above which a
# pass at Newton's offsets gives their exact gaps (`CountsRepair._start`).
RECHECK_ROWS = 4
# Where that pass misses the counts by more than NEWTON_AGAIN x Newton's enough (its
# offsets moved past the candidates it read), a pass with candidates at its offsets and
# Newton again, at most RECHECK_NEWTONS times (bench/balanced.py's unequal blobs of seed
# 1 at 1e6: Newton's offsets moved 587, the pass there missed by 410,732 rows and the
# repair of every row took 57 s of one solve).
RECHECK_NEWTONS = 2
# The rounds of a repair: the rows outside the boundary that its offsets' change makes
# violate complementary slackness join it, and it runs again from there.
ROUNDS = 6
# A round checks the rows that the bound leaves open when they are at most this many per
# boundary row; else the repair widens the boundary (4x).
UNSURE_PER_ROW = 2
# A row's candidates: its columns within CANDIDATE_BAND x the spread of the offsets'
# change at the last solve of its best (the columns it may move to, if the next change
# is like the last; the others are bounded by the pass's floor).
CANDIDATE_BAND = 4.0
PRESOLVE_ERROR, PRESOLVE_ROWS, PRESOLVE_BAND, PRESOLVE_NOISE = 0.01, 8192, 1.0, 1.5
# The sample is drawn from PRESOLVE_SHARE x PRESOLVE_ROWS rows on: it is labelled at
# every solve, and a larger share of the rows costs more than it saves (bench/
# balanced.py's 20,000 x 6, k = 10, CPU time of one thread: 0.31 s with a sample of
# 8192 rows, 0.25 s of 2000, 0.21 s of 500, 0.19 s with none).
PRESOLVE_SHARE = 8
# From PRESOLVE_SHARE x PRESOLVE_LARGE_ROWS rows on, a sample of PRESOLVE_LARGE_ROWS: 8192
# rows' offsets missed 1e6 rows' counts by 60,000-90,000, Newton on 8 candidates ran away
# and the repair took that error (2-9 s a solve). bench/balanced.py's 1e6 fit, same solver
# states, one thread: seed 0 10.9 -> 10.0 s, seed 1 33.7 -> 13.9 s, seed 2 14.9 -> 14.4 s.
PRESOLVE_LARGE_ROWS = 32768
# The last boundary's rows (at most, evenly spaced) that move the offsets with the
# centroids (`CountsRepair._predicted`).
PREDICT_ROWS = 1 << 15
# Distances (rows x k) below which the repair's reads of rows run on one thread.
SMALL_WORK = 1 << 20
# Below this many multiply-adds a pass (n x k x d) a solve reads X on one thread: its
# passes are short next to its serial Newton and shortest paths, and a team waiting
# between them spins (and on a busy machine waits for a descheduled thread). Measured
# on bench/balanced.py's 20,000 x 6, k = 10 (1.2e6 a pass), n_threads=2, 2 cores under
# other load: the fit took 0.38 s wall with two threads in its passes, 0.29 s with one.
SERIAL_SOLVE_WORK = 1 << 23
# The moves to a boundary row's best other clusters that the first repair takes.
EDGES = 8
# A warm solve whose pass misses the counts by at most PAIR_ERROR x n rows gives Newton
# the rows near a tie with their next cluster, by that pair's change at the last solve
# (`_pair_newton_start`): a row of label a and next b whose gap is below PAIR_REACH x
# |change_b - change_a|. Measured at 1e6 x 16, k = 64 (bench/balanced.py), late in the
# fit: 1,500-50,000 rows where the global spread of the change took 440,000-760,000
# (far-apart clusters' offsets drift with no row between them), missing 30-300 of the
# 700-6,000 rows that changed label; an error above 2 % (the first 5 solves, 6-9 %)
# moved the offsets too far for the last change to say where. From 0.5 % up to 2 % the
# pairs' Newton stalled where the global one did not (1e6, seed 1: two solves of 1.5-2.2
# s of widenings and failed tries; same solver states, one thread, two runs: seed 0
# 10.9/10.2 -> 10.0/9.6 s, seed 1 14.4/14.1 -> 10.8/10.9 s, seed 2 11.2/11.0 -> 11.6/11.4 s).
PAIR_ERROR, PAIR_REACH = 0.005, 4.0
# Rows that change label outside Newton's rows widen them (the pair's change of this
# solve), at most PAIR_WIDENINGS times; an over-full cluster lends Newton
# 2 x its excess + PAIR_LEAVERS of its rows of least gap.
PAIR_WIDENINGS, PAIR_LEAVERS = 3, 16
# A cluster short of rows gives the repair 2 x its shortfall (4x, 8x at each retry) +
# JOINERS of the rows whose second candidate it is, of least margin: at 1e6 x 16, k = 64
# late repairs failed where no boundary row was next to a short cluster (its offset rose
# 100-600, the others' 0.1-30); with joiners a fit's tries went 55 -> 46 (failed 34 ->
# 25) and its solves' CPU on the same states 18.2 -> 17.4 s (one thread, Intel, paired).
JOINERS = 16


def _newton_rows(p, g, targets, enough, rows, n_threads, scratch=None):
    """(count error among the candidates, offsets) of damped Newton from g on the rows
    `rows` of the pass p (None: every row), the others' labels fixed: a Newton that stops
    above NEWTON_AGAIN x enough with its steps spent (more evaluations than steps; not
    stalled: at least halving its error) starts again from where it stopped, at most
    NEWTON_RESTARTS times (one that stopped before, stalled or without a direction,
    stalls again: 5-140 ms a restart at 1e6 rows). Newton
    reads the rows in place (by index), on n_threads where they are many, in the memory
    of scratch (`_native.newton_scratch`; None: its own)."""
    n, k = p.labels.size, targets.size
    rest = np.zeros(k, dtype=np.int64)
    if rows is not None:
        rest = np.bincount(p.labels, minlength=k) - np.bincount(p.labels[rows], minlength=k)
    threads = n_threads if (n if rows is None else rows.size) >= NEWTON_THREAD_ROWS else 1
    g_new, last = g, np.inf
    for _ in range(NEWTON_RESTARTS + 1):
        err, g_new, _, _, _, evals = _native.balanced_newton(
            p.cand, p.cand_dist, targets - rest, g_new, NEWTON_STEPS, enough, rows, threads,
            scratch, outputs=False,
        )  # fmt: skip
        # there, or stalled (evaluations: the start's and at least one a step)
        if err <= NEWTON_AGAIN * enough or 2 * err > last or evals <= NEWTON_STEPS:
            break
        last = err
    return err, g_new


def _newton_start(p, g, targets, enough, reach=np.inf, n_threads=1, scratch=None):
    """The `Start` at offsets near the optimum's: damped Newton on the dual over each
    row's candidates (`_newton_rows`, many rows a step), every row's label and margin
    then at the new offsets (`candidates_start`).

    Newton reads the rows with two candidates or more and a gap below reach (how far
    the offsets are expected to move; a row of one keeps its label there, and costs
    Newton a read of its row at every start and finish: 12 ms of a 15 ms call at 1e5
    rows, k = 64, late in a fit), the others' labels fixed (every row where a cluster
    holds more of those fixed rows than its count)."""
    if p.cand.shape[1] < 2:
        return pass_start(p, g)
    some = np.flatnonzero((p.cand[:, 1] >= 0) & (p.gap < reach))
    if some.size == 0:
        return pass_start(p, g)
    k = targets.size
    rest = np.bincount(p.labels, minlength=k) - np.bincount(p.labels[some], minlength=k)
    rows = None if some.size == p.labels.size or (rest > targets).any() else some
    g_new = _newton_rows(p, g, targets, enough, rows, n_threads, scratch)[1]
    return candidates_start(p, g, g_new, n_threads)


def _pair_newton_start(p, g, targets, enough, pair, n_threads=1, scratch=None):
    """`_newton_start` on the rows near a tie with their next cluster by the change of
    that pair (`pair` (k,): the offsets' change at the last solve; PAIR_REACH), not by
    the global spread of the change. Every row's label is then taken at Newton's
    offsets; while that misses the counts by more than NEWTON_AGAIN x enough, the rows
    near a tie by this solve's change join Newton's and it runs again from g (at most
    PAIR_WIDENINGS times). A cluster that holds more fixed rows than its count lends
    Newton its rows of least gap (PAIR_LEAVERS)."""
    if p.cand.shape[1] < 2:
        return pass_start(p, g)
    n, k = p.labels.size, targets.size
    labels = p.labels
    # Each row's (label, next) pair as an index of a k x k table (k * k: a row of one
    # candidate, never near): one gather a reach, not two of offsets and their difference.
    pairs = np.where(p.cand[:, 1] >= 0, labels * k + p.cand[:, 1], k * k)

    def near_by(change):
        reach = np.append((PAIR_REACH * np.abs(change[None, :] - change[:, None])).ravel(), -np.inf)
        return p.gap < reach[pairs]

    counts = np.bincount(labels, minlength=k)
    near = near_by(pair)
    for _ in range(PAIR_WIDENINGS + 1):
        rows = np.flatnonzero(near)
        excess = np.maximum(counts - np.bincount(labels[rows], minlength=k) - targets, 0)
        if excess.any():
            leave = np.where(excess > 0, 2 * excess + PAIR_LEAVERS, 0)
            rows = with_leavers(rows, labels, p.gap.astype(np.float64), leave)
        rows = None if rows.size == n else rows
        g_new = _newton_rows(p, g, targets, enough, rows, n_threads, scratch)[1]
        start = candidates_start(p, g, g_new, n_threads)
        err = int(np.abs(np.bincount(start.labels, minlength=k) - targets).sum())
        if err <= NEWTON_AGAIN * enough or rows is None:
            break
        wider = near | near_by(g_new - g)
        if (wider == near).all():
            break
        near = wider
    return start


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
        # The offsets' change at the last solve, from its pass's (None: none yet).
        self.pair = None
        # (boundary rows, their D, every row's margin at the end) of the last solve
        self._last = None
        # (centroids, boundary rows, their D and labels) of the last solve (`_predicted`)
        self.prev = None
        # Newton's memory, kept between its calls (fresh, 30-40 ms of a call at 1e6 rows)
        self.scratch = _native.newton_scratch()

    def solve(self, C, g=None):
        """(labels (n,), offsets g (k,) with max 0, BlockStats at the labels, each row's
        D at its label (float64)). g: the start offsets (default: the last solve's)."""
        predict = g is None and self.prev is not None
        g = self.g if g is None else np.asarray(g, dtype=np.float64)
        g_in, n, k = g, self.source.shape[0], g.size
        band = self.band
        m = presolve_rows(n)
        if n >= PRESOLVE_SHARE * m:
            sample = self._sample(C, n, m)
            error = _sample_error(sample, g, n)
            if predict:
                moved = self._predicted(C)
                moved_error = _sample_error(sample, moved, n)
                if moved_error < error:
                    g, error = moved, moved_error
            if error > max(PRESOLVE_ERROR * n, PRESOLVE_NOISE * n * np.sqrt(k / m)):
                g = self._presolve(sample, g)
                # the sample's offsets are near: candidates within a share of their change
                band = PRESOLVE_BAND * float(np.ptp(g - g_in)) or np.inf
        p = biased_pass(self.source, C, g, self.m, band)
        off = int(np.abs(np.bincount(p.labels, minlength=k) - self.targets).sum()) + self.slack
        g_pass = g
        p, g, start = self._start(C, p, g, off)
        counts = np.bincount(start.labels, minlength=k)
        off = int(np.abs(counts - self.targets).sum()) + self.slack
        excess = np.maximum(counts - self.targets, 0)
        short = np.maximum(self.targets - counts, 0)
        want = ROWS_PER_MOVE * (off // 2 + k)
        two = p.cand.shape[1] >= 2 and short.any()
        # the rows next to each cluster: their second candidate (-1: none)
        joiners = p.cand[:, 1].astype(np.int64) if two else None
        band = BAND_FACTOR * self.reach[start.labels]
        for tries in range(TRIES + 1):
            boundary = boundary_rows(start.margin, band, want, BAND_ROWS * want, tries == TRIES)
            boundary = with_leavers(boundary, start.labels, start.margin, (2 << tries) * excess)
            if joiners is not None:
                join = (2 << tries) * short + JOINERS * (short > 0)
                boundary = with_leavers(boundary, joiners, start.margin, join)
            out = self._repair_rounds(C, p, g, start, boundary)
            if out is not None:
                boundary, end, g_new, owner, D = out
                change = g_new - start.g
                # A cold start's change says nothing of the next solve's (from here).
                self.reach = (change.max() - change) if self.warm else np.zeros(k)
                self.warm, self._last = True, (boundary, D, end.margin)
                some = np.arange(0, boundary.size, -(-boundary.size // PREDICT_ROWS))
                self.prev = (C, boundary[some], D[some], owner[some])
                self.pair = g_new - g_pass
                spread = float(np.ptp(g_new - g_pass))  # from the first pass's offsets
                self.band = CANDIDATE_BAND * spread if spread > 0 else self.band
                return self._accept(p, end, boundary, g_new, owner, D)
            # NOTE: not a band of the failed change: a repair of too few rows overshoots
            # (measured: 20x the spread of the full repair's change).
            want *= 4
        raise RuntimeError("the balanced repair did not settle on every row")  # pragma: no cover

    @property
    def last(self):
        """(boundary rows, their D (float64), every row's margin at the end) of the last
        solve (None before the first)."""
        if self._last is None:
            return None
        boundary, D, margin = self._last
        return boundary, D.astype(np.float64, copy=False), margin

    def _start(self, C, p, g, off):
        """(pass, its offsets, `Start`) for the repair from the pass p at offsets g that
        misses the counts by off: Newton's when off is above NEWTON_ERROR x k. A Newton
        that stalls above NEWTON_AGAIN x its enough on candidates within a band (the
        offsets must move past them: measured 3,352 rows at 1e6, where the repair of
        that error took every row, 2 s) takes a pass at g with every row's CANDIDATES
        best columns, and Newton again; one that still stalls there, Newton again with a
        column more for the short clusters that few rows hold (`cover_short`). Where
        Newton's margins leave more rows open (< 0: their floor less the offsets' rise
        says nothing) than RECHECK_ROWS x the first repair takes, a pass at Newton's
        offsets gives every row's exact gap (early in a fit at 1e6: the repair of the
        smallest margins failed on 50,000 rows 4 times and took every row, 2.5 s,
        against a pass of 0.15-0.35 s). Where that pass misses the counts by more than
        NEWTON_AGAIN x enough, a pass with candidates at Newton's offsets and Newton
        again from there (RECHECK_NEWTONS). No start is taken that misses the counts by
        more than an exact pass before it (the first pass's at g included)."""
        k = g.size
        if not self.m or off <= NEWTON_ERROR * k:
            return p, g, pass_start(p, g)
        enough = NEWTON_ENOUGH * k
        threads, scratch = self.source.n_threads, self.scratch
        reach = NEWTON_REACH * self.band / CANDIDATE_BAND
        if self.pair is not None and off <= PAIR_ERROR * p.labels.size:
            start = _pair_newton_start(p, g, self.targets, enough, self.pair, threads, scratch)
        else:
            start = _newton_start(p, g, self.targets, enough, reach, threads, scratch)
        err = int(np.abs(np.bincount(start.labels, minlength=k) - self.targets).sum())
        if err > NEWTON_AGAIN * enough and np.isfinite(self.band):
            # from g again: Newton's offsets there count only the rows among their
            # candidates (measured: 812,048 rows off on every column)
            p = biased_pass(self.source, C, g, self.m, np.inf)
            start = _newton_start(p, g, self.targets, enough, np.inf, threads, scratch)
            err = int(np.abs(np.bincount(start.labels, minlength=k) - self.targets).sum())
        if err > NEWTON_AGAIN * enough:
            wider = balanced_start.cover_short(p, g, self.targets, start.labels,
                                lambda rows: self._distances(rows, C),
                                lambda J: sq_distances(self.source, C[J]))  # fmt: skip
            if wider is not None:
                p = wider
                start = _newton_start(p, g, self.targets, enough, np.inf, threads, scratch)
                err = int(np.abs(np.bincount(start.labels, minlength=k) - self.targets).sum())
        # The exact start of least count error so far (the pass's at first): Newton on
        # candidates may move a cluster past every row's (measured at 1e6: its offsets'
        # pass missed by 1,968,750 rows, the one before by 37,744), and a start that
        # misses by more than it is not taken.
        best = (off, p, g, None)
        for again in range(RECHECK_NEWTONS + 1):
            if err >= best[0]:
                _, p, g, start = best
                return p, g, pass_start(p, g) if start is None else start
            if (start.margin < 0).sum() <= RECHECK_ROWS * ROWS_PER_MOVE * (err // 2 + k):
                return p, g, start
            g = start.g
            p = biased_pass(self.source, C, g, 0)
            start = pass_start(p, g)
            err = int(np.abs(np.bincount(start.labels, minlength=k) - self.targets).sum())
            if err < best[0]:
                best = (err, p, g, start)
            if err <= NEWTON_AGAIN * enough:
                return p, g, start
            if again == RECHECK_NEWTONS:
                break
            # Newton's offsets moved past its candidates (many rows' best at them lies
            # outside their 8): Newton again on candidates taken at those offsets
            p = biased_pass(self.source, C, g, self.m, np.inf)
            start = _newton_start(p, g, self.targets, enough, np.inf, threads, scratch)
            err = int(np.abs(np.bincount(start.labels, minlength=k) - self.targets).sum())
        _, p, g, start = best  # (Newton's offsets came no nearer than an exact pass's)
        return p, g, pass_start(p, g) if start is None else start

    def _repair_rounds(self, C, p, gp, start, boundary):
        """(boundary, the `Start` of the last round, offsets, owners of the boundary rows
        then the slack rows, their D) of the repair from start on the rows boundary, the
        rows outside it that the offsets' change makes violate complementary slackness
        added and repaired again from there (at most ROUNDS times); None when a repair
        cannot reach the counts or the rounds do not settle."""
        for _ in range(ROUNDS):
            out = self._repair(C, start, boundary)
            if out is None:
                return None
            g_new, owner, D = out
            change = g_new - start.g
            # A row of cluster a keeps its label while each offset g_j rose, less g_a, by
            # at most its gap: max(change) - change_a. The rows that bound leaves open are
            # checked on all their distances at g_new.
            after = start.margin - (change.max() - change)[start.labels]
            after[boundary] = np.inf
            unsure = np.flatnonzero(after < 0)
            if unsure.size > UNSURE_PER_ROW * boundary.size:
                return None  # the offsets moved far: a wider boundary is cheaper
            labels = start.labels.copy()
            labels[boundary] = owner[: boundary.size]
            own = start.own.copy()
            own[boundary] = D[np.arange(boundary.size), owner[: boundary.size]]
            violators = self._violators(C, p, gp, g_new, unsure, labels, own, after)
            after[boundary] = 0.0
            start = Start(g_new, labels, after, own)
            if violators.size == 0:
                return boundary, start, g_new, owner, D
            boundary = sorted_union(start.labels.size, boundary, violators)
            self.slack_owner = owner[-self.slack :] if self.slack else self.slack_owner
        return None

    def _violators(self, C, p, gp, g, rows, labels, own, margin):
        """The rows (of `rows`) whose label is not an argmin of D - g (within the
        repair's tie); the others' margins (n,) set to lower bounds on their gaps at g,
        in place. First on the candidates of the pass p at offsets gp (their D, and the
        floor on the other columns less the most an offset rose since), then on every
        column where that leaves a row open."""
        if rows.size == 0 or p.cand.shape[1] == 0:
            return self._violators_on_d(C, g, rows, labels, margin)
        cand, cd = p.cand[rows], p.cand_dist[rows].astype(np.float64)
        va = own[rows] - g[labels[rows]]
        held = cand >= 0
        v = np.where(held, cd - g[np.maximum(cand, 0)], np.inf)
        v[cand == labels[rows][:, None]] = np.inf
        u = float(np.finfo(p.floor.dtype).eps)
        floor = p.floor[rows].astype(np.float64)
        floor -= 8.0 * u * (np.abs(floor) + 4.0 * float(np.abs(gp).max()))
        floor -= float((g - gp).max())  # the most a column outside fell since
        gap = np.minimum(v.min(axis=1), floor) - va
        bad = v.min(axis=1) - va < -_tie(cd)
        margin[rows] = gap
        open_ = (gap < 0) & ~bad
        on_d = self._violators_on_d(C, g, rows[open_], labels, margin)
        return sorted_union(margin.size, rows[bad], on_d)

    def _violators_on_d(self, C, g, rows, labels, margin):
        """_violators on every column (the rows' D from the kernel)."""
        if rows.size == 0:
            return rows
        D = self._distances(rows, C)
        gap = np.empty(rows.size)
        step = max(1, (1 << 18) // D.shape[1])  # float64 rows in cache (250k rows: 3x faster)
        for s in range(0, rows.size, step):
            v = D[s : s + step].astype(np.float64)
            v -= g  # (in place)
            at, mine = np.arange(v.shape[0]), labels[rows[s : s + step]]
            own = v[at, mine]
            v[at, mine] = np.inf
            gap[s : s + step] = v.min(axis=1) - own
        margin[rows] = gap
        return rows[gap < -_tie(D)]

    def _distances(self, rows, C):
        """D (rows, k) of the source's rows `rows` (the kernel's), on one thread where they
        are few (SMALL_WORK: a parallel call of a few thousand rows waited 8-18 ms for its
        second thread on this loaded 2-core machine, against 0.06 ms on one)."""
        few = rows.size * C.shape[0] <= SMALL_WORK
        threads = 1 if few else self.source.n_threads
        return _native.sq_distances(kernel_rows(self.source, rows), C, threads)

    def _predicted(self, C):
        """The last offsets moved with the centroids (to C): the change of g_l - g_a that
        keeps each of the last boundary's rows (label a, next best l) at its place, the
        change of its D_il - D_ia, fitted by least squares over those rows (a graph
        Laplacian on the k clusters). A start only: the pass and the repair at whatever
        offsets are exact."""
        _, rows, D_old, labels = self.prev
        k = self.g.size
        D_new = self._distances(rows, C)  # only two columns a row are read (widened there)
        v = D_old - self.g
        at = np.arange(rows.size)
        v[at, labels] = np.inf
        nxt = np.argmin(v, axis=1)
        rhs = np.subtract(*[D_new[at, c].astype(np.float64) - D_old[at, c] for c in (nxt, labels)])
        # the pairs' counts (integers: exact in any order; np.add.at took 5 ms a call)
        pairs = np.bincount(labels * k + nxt, minlength=k * k).reshape(k, k).astype(np.float64)
        L = np.diag(pairs.sum(axis=1) + pairs.sum(axis=0)) - pairs - pairs.T
        b = np.bincount(nxt, rhs, minlength=k) - np.bincount(labels, rhs, minlength=k)
        L[np.diag_indices(k)] += 1e-9 * max(float(np.diag(L).max()), 1.0)
        change = solve_spd(L, b)
        return self.g + change - change.max()

    def _sample(self, C, n, m):
        """(D, targets, slack) of m evenly spaced rows: their distances to C and the
        counts scaled to them (slack: the slack rows' share)."""
        rows = (np.arange(m, dtype=np.int64) * n) // m
        D = self._distances(rows, C)
        slack = (self.slack * m) // n
        targets = _balance.integer_targets(self.targets * ((m + slack) / self.targets.sum()),
                                           m + slack)  # fmt: skip
        return D, targets, slack

    def _presolve(self, sample, g):
        """Offsets near the optimum's when the start misses the counts by much: those of
        the sample (`_sample`: the quantiles that the offsets are, estimated on a
        sample), from g: Newton on their distances to every centroid, or, with slack
        rows, the exact shortest paths."""
        D, targets, slack = sample
        m, k = D.shape[0], g.size
        if not slack:
            every = np.ascontiguousarray(np.broadcast_to(np.arange(k, dtype=np.int32), D.shape))
            # (as many entries as Newton's rows a thread would read of 8 candidates)
            many = D.size >= NEWTON_THREAD_ROWS * CANDIDATES
            threads = self.source.n_threads if many else 1
            return _native.balanced_newton(
                every, D, targets, g, NEWTON_STEPS, NEWTON_ENOUGH * k, None, threads,
                self.scratch, outputs=False,
            )[1]  # fmt: skip
        cost = np.vstack([D.astype(np.float64), np.zeros((slack, k))])
        status, _, g_sub, _, _ = _native.balanced_counts(
            cost, targets, g, np.full(m + slack, -1, dtype=np.int64), 1, np.inf, k, 0.0, 1
        )
        return g_sub if status == 0 else g

    def _repair(self, C, start, boundary):
        """(offsets, owners of the boundary rows then the slack rows, their D (the
        kernel's, X's dtype: the shortest paths read float32 as float64, no copy)) by
        successive shortest paths from the start's offsets; None when the other rows'
        labels leave a count out of reach."""
        k = self.targets.size
        fixed = np.bincount(start.labels, minlength=k)
        fixed -= np.bincount(start.labels[boundary], minlength=k)
        targets = self.targets - fixed
        if (targets < 0).any():
            return None
        D = self._distances(boundary, C)
        cost = np.vstack([D, np.zeros((self.slack, k))]) if self.slack else D
        owner = np.concatenate([start.labels[boundary], self.slack_owner])
        tie = _tie(D)
        # Every boundary row may move; first through its EDGES best moves only, then
        # (when complementary slackness fails on one of them) through all.
        status, owner, g_new, _, _ = _native.balanced_counts(
            cost, targets, start.g, owner, 1, np.inf, EDGES, tie, 2
        )
        return None if status != 0 else (g_new, owner, D)

    def _accept(self, p, start, boundary, g_new, owner, D):
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
        x = kernel_rows(self.source, moved)
        x = x.toarray() if sp.issparse(x) else np.asarray(x, dtype=np.float64)
        S = p.stats.sums.copy()
        np.add.at(S, new, x)
        np.subtract.at(S, old, x)
        N = p.stats.cluster_weights + np.bincount(new, minlength=k) - np.bincount(old, minlength=k)
        J = p.stats.distortion + float((own[moved] - p.dist[moved].astype(np.float64)).sum())
        return labels, self.g.copy(), _stats.BlockStats(p.stats.weight, N, S, J, J, np.nan), own


def presolve_rows(n):
    """The rows of the presolve's sample at n rows: PRESOLVE_LARGE_ROWS where they are
    at most a PRESOLVE_SHARE-th of n, else PRESOLVE_ROWS."""
    large = max(PRESOLVE_ROWS, PRESOLVE_LARGE_ROWS)
    return large if n >= PRESOLVE_SHARE * large else PRESOLVE_ROWS


def _sample_error(sample, g, n):
    """The count error of the offsets g estimated on the sample (`CountsRepair._sample`),
    in rows of n (the slack rows: unassigned)."""
    D, targets, _ = sample
    labels = _balance.biased_labels(D, g)
    off = np.abs(np.bincount(labels, minlength=targets.size) - targets).sum()
    return float(off) * n / D.shape[0]


def _tie(D):
    """The repair's tolerance on a tie (float64), relative to the mean of distances D
    (summed in float64: float32 D gives the bits of its float64 copy)."""
    mean = float(D.mean(dtype=np.float64)) if D.size else 0.0
    return 1e-12 * max(mean, np.finfo(np.float64).tiny)
