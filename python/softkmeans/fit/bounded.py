"""The policy of the bounded hard step: when a fit takes it, how its centroids are
grouped, and the per-row state it carries from one pass to the next (the kernel:
`cpp/src/impl/bounded.hpp`)."""

from __future__ import annotations

import numpy as np

from .. import _native
from ..centroid_groups import principal_axis_groups

__all__ = ["BoundedHardPass"]


class BoundedHardPass:
    """The hard step of an in-memory fit with group distance bounds (Yinyang's; see
    `cpp/src/impl/bounded.hpp`): each call at centroids C returns the BlockStats of
    `block_stats(X, C, "hard")` (the same labels, N and S bit for bit), computing only the
    distances that may change a row's label since the previous call. The centroids are
    split once, at the first call, into t groups (`centroid_groups`); each row carries its
    label and, per group, a lower bound on its distance to the group's other centroids
    (8 + 8 t bytes a row, t <= MAX_GROUPS: at most 520) from one step to the next.

    History: J of a step that skipped distances sums the skipped rows' exact distances
    (within rounding of the kernel's); its min_margin is nan (not every margin is known).
    """

    # Up to 64 groups (the kernel's limit): 520 bytes a row. Distances computed per step of
    # the (1e5, 256, 1024) fit with 16 and 32 groups: see bench/README.md ("Issue 10"). At
    # (1e5, 128, 4096) on clustered data from random rows (`bench/ivf_kernels.py`), 64
    # groups computed 4.7 / 8.8 / 24% of the distances at steps 2 / 3 / 4 where 16 computed
    # 15 / 34 / 32%, in about the same time (8 steps, medians of 3 on a loaded 2-core
    # machine: 7.2 s with 16 groups, 8.0 with 32, 7.2 with 64).
    MAX_GROUPS = 64
    # At least this many centroids a group, and this many multiply-adds (group size x d) a
    # row's group: each group computed costs a row a fixed part (its minima, its bound)
    # that only a large group outweighs. Single-thread CPU time of the bounded steps over
    # the plain ones (`python bench/studies/bounded_steps.py N D K STEPS`), 1 / 2 / 4 / 16 groups:
    # at (2e5, 64, 256), 8 steps, 0.60 / 0.64 / 0.66 / 0.93; at (1e5, 256, 1024) 16 groups
    # 0.43 (Hamerly's single bound 0.47).
    # Issue 24: 8192 (from 16384) so that k = 4096 at d = 128 takes 64 groups (above).
    MIN_GROUP_SIZE = 8
    MIN_GROUP_WORK = 8192

    def __init__(self, X, w, n_threads):
        self.X, self.w, self.n_threads = X, w, n_threads
        self.labels = np.zeros(X.shape[0], dtype=np.int64)
        self.lower = None
        self.group = None
        self.C_prev = None

    # A row's k distances cost about k d multiply-adds, k d itemsize / 32 vector ones (AVX2),
    # its bound test about d: below this size of the centroids (k d itemsize bytes) the test
    # and the gathering cost about what they save. Single-thread CPU time of 20 Lloyd steps on
    # blobs, bounded / plain (`python bench/studies/bounded_steps.py N D K 20 DTYPE`): float32 1.28
    # at 16 x 64 (4 KiB), 0.52-0.63 at 32 x 128, 16 x 256, 64 x 64, 16 x 1024, 0.39 at
    # 64 x 256, 0.48 at 256 x 1024 (8 steps); float64 0.98 at 8 x 128 (8 KiB), 0.84 at 16 x 64.
    # Since the bound tests take a vector of rows at a time (an AVX-512 machine, n = 1e6):
    # float32 1.00 at 16 x 64 (4 KiB: still no gain below the threshold), float64 0.80 at
    # 8 x 128, 0.64 at 16 x 64.
    MIN_CENTROID_BYTES = 8192

    @classmethod
    def for_fit(cls, source, kind, k, max_steps):
        """The bounded pass of a fit with k centroids over `source`, or None where the
        plain pass runs: kinds other than hard, a source without one in-memory dense array
        (CSR, row blocks, Dask), d <= 4 (the direct-difference path), centroids smaller
        than MIN_CENTROID_BYTES, and a fit of one step with one group, whose bounds no
        later pass would read (the final pass with one group is plain); its first step
        costs more than the plain one (1e6 x 32, k = 256, AMD Zen 4, 2 threads: 113 ms
        against 96 ms)."""
        X = source.dense_array()
        if kind != "hard" or X is None:
            return None
        d = X.shape[1]
        if d <= _native.SMALL_DIM or k * d * X.itemsize < cls.MIN_CENTROID_BYTES:
            return None
        if max_steps == 1 and cls.group_count(k, d) == 1:
            return None
        return cls(X, source.weights, source.n_threads)

    @classmethod
    def group_count(cls, k, d):
        """t, the largest power of two <= MAX_GROUPS, k / MIN_GROUP_SIZE and k d /
        MIN_GROUP_WORK (1: Hamerly's single bound)."""
        t = 1
        while 2 * t <= min(cls.MAX_GROUPS, k // cls.MIN_GROUP_SIZE, k * d // cls.MIN_GROUP_WORK):
            t *= 2
        return t

    @classmethod
    def centroid_groups(cls, C):
        """(k,) int64: the group of each centroid of C, `group_count` groups of about equal
        size, near centroids together: halve every group at the median of its projection
        on its principal axis, log2 t times. A group's bound falls by its own largest
        drift, so groups of neighbours keep far groups' bounds high."""
        return principal_axis_groups(C, cls.group_count(*C.shape))

    # The final pass computes each row's own group, and the other groups its bounds do not
    # rule out, at a cost of about share k d multiply-adds a row (share: of the
    # distances computed) and ROW_OVERHEAD more (its bounds, tests and direct distance);
    # the plain pass costs k d. Where share k d + ROW_OVERHEAD > k d the plain pass runs
    # (same outputs): centroids that moved far since the last step, as in a fit of one step
    # from its seeding. At 1e6 x 32, k = 512, two groups (2 threads, AMD Zen 4), the final
    # pass took 160 / 178 / 200 / 230 ms bounded at 51 / 63 / 73 / 100% of the distances
    # computed, 172 ms plain. The share is estimated on ESTIMATE_ROWS rows spread over X.
    ROW_OVERHEAD = 6000
    ESTIMATE_ROWS = 1024

    def __call__(self, C):
        stats, n_distances = self._step(C, exact=False)
        if n_distances < self.X.shape[0] * C.shape[0]:
            stats = stats._replace(min_margin=float("nan"))
        return stats

    def final(self, C):
        """The fit's final pass at C: (BlockStats, labels (n,)), the distortion and
        min_margin those of `block_stats` bit for bit (`exact`: every row's distance to its
        label's group is computed, and every row whose margin the bounds leave open below
        the least one found); None (the caller's plain pass) with one group (every
        distance) or where the bounds would leave most distances to compute (above)."""
        if self.group is not None and self.group.max() == 0:
            return None
        if self.C_prev is not None:
            k_d = C.shape[0] * C.shape[1]
            if self.computed_share(C) > 1.0 - self.ROW_OVERHEAD / k_d:
                return None
        stats, _ = self._step(C, exact=True)
        return stats, self.labels

    def computed_share(self, C):
        """An estimate of the share of the distances a final pass at C computes: on rows
        spread over X, each row's own group and every group whose bound, less the group's
        largest drift since the last step, is not above the row's distance to its label
        (the kernel's tests without their rounding slack or Hamerly's separation)."""
        n = self.X.shape[0]
        rows = np.arange(0, n, max(1, n // self.ESTIMATE_ROWS))
        C64 = np.asarray(C, dtype=np.float64)
        labels = self.labels[rows]
        to_label = np.linalg.norm(self.X[rows] - C64[labels], axis=1)
        drift = np.linalg.norm(C64 - self.C_prev, axis=1)
        t = self.lower.shape[1]
        group_drift = np.zeros(t)
        np.maximum.at(group_drift, self.group, drift)
        computed = self.lower[rows] - group_drift <= to_label[:, None]
        computed[np.arange(rows.size), self.group[labels]] = True
        sizes = np.bincount(self.group, minlength=t)
        return float((computed @ sizes).sum() / (rows.size * C.shape[0]))

    def _step(self, C, exact):
        if self.group is None:
            self.group = self.centroid_groups(C)
            t = int(self.group.max()) + 1
            self.lower = np.zeros((self.X.shape[0], t), dtype=np.float64)
        stats, _, n_distances = _native.hard_stats_bounded(
            self.X,
            C,
            self.C_prev,
            self.w,
            self.labels,
            self.lower,
            self.group,
            self.n_threads,
            exact=exact,
        )
        self.C_prev = C
        return stats, n_distances

    def labels_at(self, C):
        """The labels at C when C is the input of the last step (else None)."""
        return self.labels if C is self.C_prev else None
