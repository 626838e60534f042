"""The nearest centroid of each row (`softkmeans.sources.reads.labels`: `predict`, the
labels of the farthest-point and relocation passes): the plain assignment pass, or, for
many centroids, the group-pruned one (`cpp/src/impl/group_pruned.hpp`), which returns
the same labels and minimum squared distances bit for bit and computes only the groups
of centroids whose ball may hold a row's nearest. Which one, and how the centroids are
grouped, is decided here, once per set of centroids (`CentroidGrouping`: a fitted
estimator keeps one across its predictions); the kernel computes."""

from __future__ import annotations

import numpy as np

from .. import _native, _stats
from ..centroid_groups import ball_groups

__all__ = ["CentroidGrouping", "NearestCentroid"]


class NearestCentroid:
    """Callable on blocks of rows: (labels (n,) int64, min_sq_dist (n,) rows' dtype),
    `_native.assign`'s bits."""

    # The group-pruned pass from this many centroids (d > SMALL_DIM, dense rows), with
    # k / CENTROIDS_PER_GROUP groups (a power of two, at most MAX_GROUPS: the kernel's
    # limit). Plain / pruned time, grouping included, 1e5 x 128 clustered rows
    # (`bench/ivf_kernels.clustered`), 2 threads, loaded machine: at k = 512 / 1024 /
    # 2048 / 4096, 1.30 / 1.74 / 2.90 / 5.05 with 64 groups; with 64 centroids a group
    # 1.15 / 0.77 / 1.07 / - (fewer, wider balls). Where the balls do not separate the
    # rows (uniform centres, 99% of the distances computed) the kernel takes about 1.5
    # times the plain pass: PROBE_ROWS below.
    MIN_CENTROIDS = 1024
    CENTROIDS_PER_GROUP = 8
    MAX_GROUPS = 64
    # The first PROBE_ROWS rows of a larger block are assigned pruned; if that computed
    # more than MAX_FRACTION of their distances (balls that do not separate the data), the
    # rest of the rows take the plain pass.
    PROBE_ROWS = 4096
    MAX_FRACTION = 0.5

    def __init__(self, C, n_threads, grouping=None, group=None):
        """grouping: a `CentroidGrouping` kept across calls (None: C grouped here); group:
        C's groups made already (`groups_of`'s, on a Dask client), taken as they are."""
        self.C, self.n_threads = C, n_threads
        self.group = (
            group if group is not None else (grouping or CentroidGrouping()).of(C, n_threads)
        )

    @classmethod
    def groups_of(cls, C, n_threads):
        """(k,) int64: the groups of C the pruned pass takes, or None: the plain pass."""
        k, d = C.shape
        if k < cls.MIN_CENTROIDS or d <= _native.SMALL_DIM:
            return None
        t = 1
        while 2 * t <= min(cls.MAX_GROUPS, k // cls.CENTROIDS_PER_GROUP):
            t *= 2
        return ball_groups(C, t, n_threads=n_threads)

    def __call__(self, rows):
        def pruned(part):
            labels, min_sq_dist, n_distances = _native.assign_grouped(
                rows[part], self.C, self.group, self.n_threads
            )
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
            labels, m1, second, beyond, n_distances = _native.nearest_two_grouped(
                rows[part], self.C, self.group, self.n_threads
            )
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
        """plain(slice) over the block where C has no groups or the rows are CSR; else
        pruned(slice) -> (result, distances computed), on the first PROBE_ROWS rows first
        when the block is larger, the rest plain if those computed more than MAX_FRACTION
        of their distances; join(head, tail) the two parts."""
        if self.group is None or hasattr(rows, "indptr"):  # CSR rows: the plain pass
            return plain(slice(None))
        if rows.shape[0] <= 2 * self.PROBE_ROWS:
            return self._counted(pruned, slice(None), rows.shape[0])
        head = self._counted(pruned, slice(None, self.PROBE_ROWS), self.PROBE_ROWS)
        tail = slice(self.PROBE_ROWS, None)
        if self.group is None:  # the probe pruned too little
            return join(head, plain(tail))
        return join(head, self._counted(pruned, tail, rows.shape[0] - self.PROBE_ROWS))

    def _counted(self, pruned, part, n_rows):
        """pruned(part)'s result; the plain pass from here on if it computed too much."""
        result, n_distances = pruned(part)
        if n_distances > self.MAX_FRACTION * n_rows * self.C.shape[0]:
            self.group = None
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
