"""The nearest centroid of each row (`Source.labels`: `predict`, the labels of the
farthest-point and relocation passes): the plain assignment pass, or, for many centroids,
the group-pruned one (`cpp/src/impl/group_pruned.hpp`), which returns the same labels and
minimum squared distances bit for bit and computes only the groups of centroids whose
ball may hold a row's nearest. Which one, and how the centroids are grouped, is decided
here, once per set of centroids; the kernel computes."""

from __future__ import annotations

from .. import _native
from ..centroid_groups import ball_groups

__all__ = ["NearestCentroid"]


class NearestCentroid:
    """Callable on a block of rows: (labels (n,) int64, min_sq_dist (n,) rows' dtype),
    `_native.assign`'s bits."""

    # The group-pruned pass from this many centroids (d > SMALL_DIM, dense rows), with
    # k / CENTROIDS_PER_GROUP groups (a power of two, at most 64). Measured with
    # `python bench/ivf_kernels.py` (bench/README.md, "Issue 24"): see there.
    MIN_CENTROIDS = 1024
    CENTROIDS_PER_GROUP = 64
    MAX_GROUPS = 64

    def __init__(self, C, n_threads):
        self.C, self.n_threads = C, n_threads
        k, d = C.shape
        self.group = None
        if k >= self.MIN_CENTROIDS and d > _native.SMALL_DIM:
            t = 1
            while 2 * t <= min(self.MAX_GROUPS, k // self.CENTROIDS_PER_GROUP):
                t *= 2
            self.group = ball_groups(C, t)

    def __call__(self, rows):
        if self.group is None or hasattr(rows, "indptr"):  # CSR rows: the plain pass
            return _native.assign(rows, self.C, self.n_threads)
        labels, min_sq_dist, _ = _native.assign_grouped(rows, self.C, self.group, self.n_threads)
        return labels, min_sq_dist
