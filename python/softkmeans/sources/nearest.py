"""The nearest centroid of each row (`Source.labels`: `predict`, the labels of the
farthest-point and relocation passes): the plain assignment pass, or, for many centroids,
the group-pruned one (`cpp/src/impl/group_pruned.hpp`), which returns the same labels and
minimum squared distances bit for bit and computes only the groups of centroids whose
ball may hold a row's nearest. Which one, and how the centroids are grouped, is decided
here, once per set of centroids (`CentroidGrouping`: a fitted estimator keeps one across
its predictions); the kernel computes."""

from __future__ import annotations

import numpy as np

from .. import _native
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

    def __init__(self, C, n_threads, grouping=None):
        """grouping: a `CentroidGrouping` kept across calls (None: C grouped here)."""
        self.C, self.n_threads = C, n_threads
        self.group = (grouping or CentroidGrouping()).of(C, n_threads)

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
        if self.group is None or hasattr(rows, "indptr"):  # CSR rows: the plain pass
            return _native.assign(rows, self.C, self.n_threads)
        if rows.shape[0] <= 2 * self.PROBE_ROWS:
            return self._pruned(rows)
        head = self._pruned(rows[: self.PROBE_ROWS])
        if self.group is None:  # the probe pruned too little
            tail = _native.assign(rows[self.PROBE_ROWS :], self.C, self.n_threads)
        else:
            tail = self._pruned(rows[self.PROBE_ROWS :])
        return tuple(np.concatenate(part) for part in zip(head, tail))

    def _pruned(self, rows):
        labels, min_sq_dist, n_distances = _native.assign_grouped(
            rows, self.C, self.group, self.n_threads
        )
        if n_distances > self.MAX_FRACTION * rows.shape[0] * self.C.shape[0]:
            self.group = None
        return labels, min_sq_dist


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
