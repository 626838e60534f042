"""The repair's sets of rows (softkmeans.fit.balanced_rows) against their definitions
written as scans: np.unique of the concatenated sets, and each cluster's rows picked
one cluster at a time with a boolean mask."""

import numpy as np
import pytest

from softkmeans.fit import balanced_rows


@pytest.mark.parametrize("n, sizes", [(1000, (3, 0, 5)), (1000, (400, 700)), (50, (50, 50))])
def test_sorted_union_is_unique_of_the_sets(n, sizes):
    rng = np.random.default_rng(n + sum(sizes))
    parts = [np.sort(rng.choice(n, size=s, replace=False)) for s in sizes]
    got = balanced_rows.sorted_union(n, *parts)
    want = np.unique(np.concatenate(parts))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def _with_leavers_by_scan(boundary, labels, margin, leave):
    rows = [boundary]
    for j in np.flatnonzero(leave):
        mine = np.flatnonzero(labels == j)
        take = min(int(leave[j]), mine.size)
        if take < mine.size:
            mine = mine[np.argpartition(margin[mine], take - 1)[:take]]
        rows.append(mine)
    return np.unique(np.concatenate(rows))


@pytest.mark.parametrize("n, k", [(2000, 7), (300, 40)])
def test_with_leavers_takes_each_clusters_least_margins(n, k):
    rng = np.random.default_rng(k)
    labels = rng.integers(0, k, size=n)
    margin = rng.integers(0, 50, size=n).astype(np.float64)  # ties: the row order decides
    boundary = np.sort(rng.choice(n, size=n // 10, replace=False))
    leave = np.where(rng.random(k) < 0.5, rng.integers(1, 3 * n // k, size=k), 0)
    groups = balanced_rows.label_groups(labels, leave > 0)
    got = balanced_rows.with_leavers(boundary, groups, margin, leave)
    np.testing.assert_array_equal(got, _with_leavers_by_scan(boundary, labels, margin, leave))
    for j in np.flatnonzero(leave):  # and what it is for: leave_j rows of j free to move
        assert np.isin(np.flatnonzero(labels == j), got).sum() >= min(leave[j], (labels == j).sum())


@pytest.mark.parametrize("n, k", [(2000, 7), (300, 40)])
def test_joiners_are_each_short_clusters_rows_of_least_margin_among_those_next_to_it(n, k):
    # The repair's joiners of a short cluster j: rows whose second candidate is j (-1:
    # a row of one candidate, next to none), those of least margin, by a scan.
    rng = np.random.default_rng(k + 1)
    second = rng.integers(-1, k, size=n).astype(np.int32)
    margin = rng.integers(0, 50, size=n).astype(np.float64)
    boundary = np.sort(rng.choice(n, size=n // 10, replace=False))
    join = np.where(rng.random(k) < 0.5, rng.integers(1, 3 * n // k, size=k), 0)
    join[0] = 5  # (a row of none is never cluster 0's)
    groups = balanced_rows.joiner_groups(second, join > 0)
    got = balanced_rows.with_leavers(boundary, groups, margin, np.append(join, 0))
    np.testing.assert_array_equal(got, _with_leavers_by_scan(boundary, second, margin, join))
    assert not np.isin(np.flatnonzero(second == -1), np.setdiff1d(got, boundary)).any()


def test_boundary_rows_are_the_band_within_the_wanted_and_the_most():
    margin = np.array([5.0, 0.5, 3.0, 0.1, 9.0, 2.0, 7.0, 0.2, 8.0, 6.0])
    band = np.full(10, 1.0)
    # within the band: 3 rows, between want 2 and most 4
    np.testing.assert_array_equal(balanced_rows.boundary_rows(margin, band, 2, 4, False), [1, 3, 7])
    # fewer than want: the 4 of least margin; more than most: the 2 of least margin
    rows = balanced_rows.boundary_rows
    np.testing.assert_array_equal(rows(margin, band, 4, 8, False), [1, 3, 5, 7])
    np.testing.assert_array_equal(rows(margin, band, 1, 2, False), [3, 7])
    # asked for every row, or half of them wanted
    assert balanced_rows.boundary_rows(margin, band, 1, 2, True).size == 10
    assert balanced_rows.boundary_rows(margin, band, 5, 8, False).size == 10
