"""The nearest centroid of each row (`softkmeans.sources.reads.labels`: `predict`, the
labels of the farthest-point and relocation passes): the plain assignment pass, or, for
many centroids, a pruned one, which returns the same labels and minimum squared
distances bit for bit: the group-pruned pass (`cpp/src/impl/group_pruned.hpp`: only the
groups of centroids whose ball may hold a row's nearest), or the projection-pruned pass
(`cpp/src/impl/projected.hpp`: the distances in the centroids' leading principal axes,
with the norm of the rest, bound the full ones; only the candidates they leave are
computed in full). Balls prune clusters within clusters; on a continuum of real
descriptors (`bench/ivf.py`'s patches) they computed 71% of the distances, the
projection 0.4%. How the centroids are grouped and projected is decided here, once per
set of centroids (`CentroidGrouping`: a fitted estimator keeps one across its
predictions), and which pass a block takes by probing its first rows; the kernels
compute."""

from __future__ import annotations

from functools import reduce
from typing import NamedTuple

import numpy as np

from .. import _native, _stats
from ..centroid_groups import ball_groups, principal_projection

__all__ = ["CentroidGrouping", "NearestCentroid", "Pruning"]


class Pruning(NamedTuple):
    """What the pruned passes take for one set of centroids: the ball groups (k,) int64
    and the projection (Q (d, p), mu (d,)) or None (the balls alone)."""

    group: np.ndarray
    projection: tuple[np.ndarray, np.ndarray] | None = None


class NearestCentroid:
    """Callable on blocks of rows: (labels (n,) int64, min_sq_dist (n,) rows' dtype),
    `_native.assign`'s bits."""

    # The pruned passes from this many centroids (d > SMALL_DIM, dense rows), the groups
    # k / CENTROIDS_PER_GROUP of them (a power of two, at most MAX_GROUPS: the kernel's
    # limit). Plain / pruned time, grouping included, 1e5 x 128 clustered rows
    # (`bench/ivf_kernels.clustered`), 2 threads, loaded machine: at k = 512 / 1024 /
    # 2048 / 4096, 1.30 / 1.74 / 2.90 / 5.05 with 64 groups; with 64 centroids a group
    # 1.15 / 0.77 / 1.07 / - (fewer, wider balls). Where the balls do not separate the
    # rows (uniform centres, 99% of the distances computed) the kernel takes about 1.5
    # times the plain pass: PROBE_ROWS below.
    MIN_CENTROIDS = 1024
    CENTROIDS_PER_GROUP = 8
    MAX_GROUPS = 64
    # The projection on PROJECTION_DIMS leading axes (at most d / 4), from d >= 32: 31
    # (32 augmented coordinates) took 0.84 s where 32 took 0.90, 24 1.06 and 16 1.32
    # (1e5 of bench/ivf.py's descriptors, k = 4096, one thread, loaded machine).
    PROJECTION_DIMS = 31
    # The first PROBE_ROWS rows of a larger block are assigned by the first pruned pass
    # (balls, then the projection); if that computed more than its fraction of their
    # distances (MAX_FRACTION: balls that do not separate the data; MAX_PROJECTED_FRACTION
    # in full, the projection that leaves too many candidates), the next PROBE_ROWS rows
    # probe the next pass, and the rows after the last the plain pass.
    PROBE_ROWS = 4096
    MAX_FRACTION = 0.5
    MAX_PROJECTED_FRACTION = 0.05

    def __init__(self, C, n_threads, grouping=None, group=None):
        """grouping: a `CentroidGrouping` kept across calls (None: C grouped here); group:
        C's `Pruning` (or ball groups) made already (`groups_of`'s, on a Dask client),
        taken as they are."""
        self.C, self.n_threads = C, n_threads
        made = group if group is not None else (grouping or CentroidGrouping()).of(C, n_threads)
        if made is not None and not isinstance(made, Pruning):
            made = Pruning(made)
        self.pruning = made
        # The pruned passes left to try, the first the one taken; settled once one kept.
        self.passes = (
            [] if made is None else ["balls"] + ["projected"] * (made.projection is not None)
        )
        self.settled = False

    @property
    def group(self):
        """The ball groups while a pruned pass is taken; None once the plain pass is."""
        return self.pruning.group if self.passes else None

    @classmethod
    def groups_of(cls, C, n_threads):
        """C's `Pruning` for the pruned passes, or None: the plain pass."""
        k, d = C.shape
        if k < cls.MIN_CENTROIDS or d <= _native.SMALL_DIM:
            return None
        t = 1
        while 2 * t <= min(cls.MAX_GROUPS, k // cls.CENTROIDS_PER_GROUP):
            t *= 2
        projection = None
        if d >= 32:
            projection = principal_projection(C, min(cls.PROJECTION_DIMS, d // 4), n_threads)
        return Pruning(ball_groups(C, t, n_threads=n_threads), projection)

    def _kernel(self, rows, margins):
        """The pruned pass taken now on a dense block: `_native.assign_grouped`'s outputs
        (margins: `nearest_two_grouped`'s)."""
        if self.passes[0] == "projected":
            Q, mu = self.pruning.projection
            return _native.assign_projected(rows, self.C, Q, mu, self.n_threads, margins=margins)
        kernel = _native.nearest_two_grouped if margins else _native.assign_grouped
        return kernel(rows, self.C, self.pruning.group, self.n_threads)

    def __call__(self, rows):
        def pruned(part):
            labels, min_sq_dist, n_distances = self._kernel(rows[part], False)
            return (labels, min_sq_dist), n_distances

        def plain(part):
            return _native.assign(rows[part], self.C, self.n_threads)

        def join(head, tail):
            return tuple(np.concatenate(pair) for pair in zip(head, tail))

        return self._probed(rows, pruned, plain, join)

    def hard_stats(self, rows, w):
        """(BlockStats without N and S, labels (n,)) of the hard kind at C for a block of
        rows with weights w: `_native.block_stats`'s labels and minimum margin bit for bit,
        J (the objective) the sum of w_i D_ia in float64 in row order (numpy's pairwise
        sum: within rounding of the plain pass's, whatever the thread count). A fit's
        final pass over every row (`softkmeans.fit.sampled`)."""

        def pruned(part):
            labels, m1, second, beyond, n_distances = self._kernel(rows[part], True)
            return (self._pruned_stats(rows[part], w[part], m1, second, beyond), labels), (
                n_distances
            )

        def plain(part):
            stats, labels, _ = _native.block_stats(
                rows[part], self.C, "hard", 0.0, w[part], self.n_threads, sums=False, labels=True
            )
            return stats, labels

        def join(head, tail):
            return _stats.merge([head[0], tail[0]]), np.concatenate([head[1], tail[1]])

        return self._probed(rows, pruned, plain, join)

    def _pruned_stats(self, rows, w, m1, second, beyond):
        """The BlockStats of rows from the pruned pass's minima: a row's margin is exact
        where its second smallest is not above the bound of the groups left out; the
        others whose bound on the margin may be below the least exact one are computed in
        full (few: the bound is loose only where a row's second nearest centroid lies in
        a group the pass left out). (1 - 1e-6): the bound is rounded in float64 and the
        margins in the rows' dtype; a row kept out has a margin >= the least."""
        positive = w > 0
        exact = second.astype(np.float64) <= beyond
        margins = second[exact & positive] - m1[exact & positive]  # the kernel's T subtraction
        least = float(margins.min()) if margins.size else np.inf
        unsure = ~exact & positive & ((beyond - m1) * (1.0 - 1e-6) <= least)
        if unsure.any():
            full = _native.margins(rows[unsure], self.C, self.n_threads)
            least = min(least, float(full.min()))
        J = float(np.sum(w * m1.astype(np.float64)))
        return _stats.BlockStats(float(np.sum(w)), None, None, J, J, least)

    def _probed(self, rows, pruned, plain, join):
        """plain(slice) over the block where C has no pruning or the rows are CSR; else
        pruned(slice) -> (result, distances computed): while no pass is settled and more
        than two probes of rows are left, PROBE_ROWS rows by the pass taken now (kept if
        it pruned enough, else the next pass), then the rest by the pass kept, or by the
        plain pass when none is left; join(head, tail) the parts."""
        if not self.passes or hasattr(rows, "indptr"):  # CSR rows: the plain pass
            return plain(slice(None))
        n, done, parts = rows.shape[0], 0, []
        while self.passes and not self.settled and n - done > 2 * self.PROBE_ROWS:
            parts.append(
                self._counted(pruned, slice(done, done + self.PROBE_ROWS), self.PROBE_ROWS)
            )
            done += self.PROBE_ROWS
        rest = slice(done, None)
        parts.append(self._counted(pruned, rest, n - done) if self.passes else plain(rest))
        return reduce(join, parts)

    def _counted(self, pruned, part, n_rows):
        """pruned(part)'s result (n_rows rows); the pass kept if it computed at most its
        fraction of the distances, else the next pass from here on."""
        result, n_distances = pruned(part)
        limit = self.MAX_PROJECTED_FRACTION if self.passes[0] == "projected" else self.MAX_FRACTION
        if n_distances > limit * n_rows * self.C.shape[0]:
            self.passes.pop(0)
        else:
            self.settled = True
        return result


class CentroidGrouping:
    """The groups of the last centroids asked for (`NearestCentroid.groups_of`), made again
    when the centroids differ from those (a refit, a partial_fit, centroids set or changed
    in place by the user): comparing k d numbers costs nothing next to a pass over n
    rows, and catches every way the centroids change. The groups do not depend on the
    thread count."""

    def __init__(self):
        self._C = self._group = None

    def of(self, C, n_threads):
        """The groups of C (None: the plain pass), made only if C is not the last C."""
        last = self._C
        if last is None or last.dtype != C.dtype or not np.array_equal(last, C):
            self._group = NearestCentroid.groups_of(C, n_threads)
            self._C = np.array(C, copy=True)
        return self._group
