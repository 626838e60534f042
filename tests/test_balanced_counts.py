"""The exact repair of the counts, `_native.balanced_counts` (successive shortest paths,
cpp/src/balanced_counts.cpp), where its shortcuts act: a row's few edges limited to a
reach, and the check of complementary slackness that reads a row's D only where the
bound from its edges (the least value outside them, less the offsets' rise) does not
clear.

Oracles: the least cost of the assignment problem with each cluster expanded into its
count of slots (scipy's linear_sum_assignment, `lp_optimum`) and complementary slackness
checked on every row and every column in NumPy; float32 distances against their float64
copy.
"""

import numpy as np
import pytest

from conftest import lp_optimum
from softkmeans import _native
from softkmeans._balance import integer_targets


def _problem(seed, n, k, noise):
    """Distances of n rows to k clusters (float32 values), unequal counts, and offsets
    near the optimum's: the optimum's (every edge, from zero) plus noise of the given
    scale relative to the median gap, as a warm repair starts."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, 4))
    X = centres[rng.integers(0, k, size=n)] + rng.normal(size=(n, 4))
    D = ((X[:, None, :] - centres[None]) ** 2).sum(-1).astype(np.float32).astype(np.float64)
    share = rng.uniform(0.5, 1.5, size=k)
    counts = integer_targets(share * n / share.sum(), n)
    owner = np.full(n, -1, dtype=np.int64)
    g = _native.balanced_counts(D, counts, np.zeros(k), owner, 1, np.inf, k, 0.0, 1)[2]
    part = np.sort(D - g, axis=1)
    scale = noise * float(np.median(part[:, 1] - part[:, 0]))
    return D, counts, g + rng.normal(scale=scale, size=k)


def _assert_optimum(D, counts, status, owner, g, tie):
    assert status == 0
    assert np.array_equal(np.bincount(owner, minlength=counts.size), counts)
    value = D - g
    assert (value[np.arange(D.shape[0]), owner] <= value.min(axis=1) + tie).all()
    cost = float(D[np.arange(D.shape[0]), owner].sum())
    assert cost == pytest.approx(lp_optimum(D, counts), rel=1e-12)


@pytest.mark.parametrize("k", [12, 13])
@pytest.mark.parametrize("edges_per_row", [2, 8])
@pytest.mark.parametrize("noise", [0.5, 4.0])
@pytest.mark.parametrize("seed", range(6))
def test_few_edges_from_near_offsets_is_the_optimum(seed, noise, edges_per_row, k):
    # The repair's call (every row may move, few edges each at the first try, then every
    # edge): offsets near the optimum's leave most rows' edges to one or two clusters
    # within the reach, and the shortest paths raise some offsets past the reach of
    # rows whose labels the check alone then guards. k = 13: the native scans over a
    # row's clusters go four at a time over arrays padded with inf (13: three pads).
    D, counts, g = _problem(seed, 300, k, noise)
    tie = 1e-12 * float(D.mean())
    owner = np.full(D.shape[0], -1, dtype=np.int64)
    status, owner, g_out, _, _ = _native.balanced_counts(
        D, counts, g, owner, 1, np.inf, edges_per_row, tie, 2
    )
    _assert_optimum(D, counts, status, owner, g_out, tie)


@pytest.mark.parametrize("seed", range(4))
def test_float32_distances_are_their_float64_copy(seed):
    # Distances over six decades: the difference of two float32 values is then seldom a
    # float32 (each must be read as double before any arithmetic).
    rng = np.random.default_rng(seed)
    n, k = 400, 10
    D32 = rng.lognormal(sigma=3.0, size=(n, k)).astype(np.float32)
    share = rng.uniform(0.5, 1.5, size=k)
    counts = integer_targets(share * n / share.sum(), n)
    owner = np.full(n, -1, dtype=np.int64)
    D = D32.astype(np.float64)
    optimum = _native.balanced_counts(D, counts, np.zeros(k), owner, 1, np.inf, k, 0.0, 1)[2]
    far = rng.normal(scale=float(np.median(D32)), size=k)
    near = optimum + rng.normal(scale=1e-3 * float(np.median(D32)), size=k)  # few edges
    for g in (far, near):
        for args in ((1, np.inf, 8, 1e-9, 2), (2, 0.0, 3, 1e-9, 4)):
            want = _native.balanced_counts(D, counts, g, owner, *args)
            got = _native.balanced_counts(D32, counts, g, owner, *args)
            assert got[0] == want[0] and got[3:] == want[3:]
            assert np.array_equal(got[1], want[1]) and np.array_equal(got[2], want[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_row_whose_edge_the_reach_left_out_is_checked(dtype):
    # Cluster 0 holds one row too many and cluster 3 one too few. The rows near a tie
    # chain 0 -> 1 -> 2 -> 3 (row a: 0.75 to cluster 1, b: 1 to 2, c: 1 to 3) and row f
    # of cluster 0 is 1 from cluster 1 and 2.25 from cluster 3; 150 rows of clusters
    # 1-3 lie 0.5 from cluster 0 and far from the rest. The widest gap is 1, so the
    # first reach (2) leaves f's edge to cluster 3 out: the chain (2.75) moves three
    # rows and raises g_3 by 2.75, past f's 2.25, while f keeps its cluster. Only the
    # check's bound with the offsets' rise sends f to a read of its D (then a wider
    # reach finds the optimum: f to cluster 3).
    big = 100.0
    D = np.full((154, 4), big)
    D[0, [0, 1]] = 0.0, 0.75  # a
    D[1, [0, 1, 3]] = 0.0, 1.0, 2.25  # f
    D[2, [1, 2]] = 0.0, 1.0  # b
    D[3, [2, 3]] = 0.0, 1.0  # c
    for j in (1, 2, 3):
        D[4 + 50 * (j - 1) : 4 + 50 * j, [j, 0]] = 0.0, 0.5
    counts = np.array([1, 51, 51, 51])
    owner = np.full(D.shape[0], -1, dtype=np.int64)
    D = D.astype(dtype)
    status, owner, g, _, _ = _native.balanced_counts(D, counts, np.zeros(4), owner, 1, np.inf,
                                                     2, 1e-9, 2)  # fmt: skip
    assert owner[1] == 3 and owner[0] == 0
    _assert_optimum(D.astype(np.float64), counts, status, owner, g, 1e-9)
